"""Every notebook in nbs/ runs top to bottom, each as one test (the notebooks' lesson cells are tests).

Each notebook runs through nbdev's `test_nb` in its own Python process, so a crash in a driver or a
leaked device in one notebook cannot take the others (or the pytest session) down. Cells flagged with
one of `tst_flags` (pyproject.toml: `slow`, `gpu`) are skipped, as `nbdev-test` does; `--runslow` or
`VKML_SLOW=1` runs `#| slow` cells too, and `VKML_NB_FLAGS="gpu"` forces other flags.
The executed notebook is saved (outside the repository) for test_docs.py to render.
"""
import os, subprocess, sys
from pathlib import Path
import pytest
from conftest import ROOT, run_slow

NB_TIMEOUT = 240  # seconds for one whole notebook; notebooks should take seconds (heavy sweeps go in tests/)
NOTEBOOKS = sorted((ROOT / "nbs").glob("*.ipynb"))

_RUNNER = r"""
import sys, hashlib
from pathlib import Path
import nbdev.test as nbt          # the module, so pytest never collects `test_nb` itself
from fastcore.nbio import write_nb
fn, out, skip, force, cell_timeout, root = sys.argv[1:7]
if out:
    sha = hashlib.sha256(Path(fn).read_bytes()).hexdigest()
    def _save(nb, path):          # `save=True` writes back to the notebook; write the copy elsewhere instead
        nb.metadata["vkml_executed"] = {"source_sha256": sha, "by": "execnb"}
        for c in nb.cells: c.metadata.pop("execution", None)  # execnb's timings are not valid nbformat
        write_nb(nb, out)
    nbt.write_nb = _save
ok, secs = nbt.test_nb(fn, skip_flags=skip.split(), force_flags=force.split(), cell_timeout=int(cell_timeout),
                       basepath=root, save=bool(out))
print(f"{Path(fn).name}: {'ok' if ok else 'FAILED'} in {secs:.1f} s")
sys.exit(0 if ok else 1)
"""


def nb_flags(config) -> tuple:
    "(skip_flags, force_flags) as nbdev-test would use them, from `tst_flags` and the run options."
    from nbdev.config import get_config
    skip = get_config(ROOT).tst_flags
    skip = skip.split() if isinstance(skip, str) else list(skip or [])
    force = os.environ.get("VKML_NB_FLAGS", "").split() + (["slow"] if run_slow(config) else [])
    return skip, force


@pytest.mark.timeout(NB_TIMEOUT + 30)
@pytest.mark.parametrize("nb", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook(nb, request, executed_nbs):
    skip, force = nb_flags(request.config)
    out = executed_nbs / nb.name
    cmd = [sys.executable, "-c", _RUNNER, str(nb), str(out), " ".join(skip), " ".join(force), str(NB_TIMEOUT), str(ROOT)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=NB_TIMEOUT, cwd=nb.parent)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{nb.name} ran past {NB_TIMEOUT} s\n{(e.stderr or b'')[-4000:]!s}", pytrace=False)
    if r.returncode != 0:
        pytest.fail(f"{nb.name} failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-8000:]}", pytrace=False)


def test_there_are_notebooks():
    "A glob that finds nothing must not pass silently."
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS
