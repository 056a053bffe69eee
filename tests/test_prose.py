"""Prose is self-contained: every file the notebooks, the README, the docs, the ADRs, the benchmarks and
the tests name is in the repository, and none cites documents that live elsewhere (a spec, a GPU kit,
a roadmap). State the fact, not where someone else wrote it down.
"""
import json, re, subprocess
from pathlib import Path
import pytest
from conftest import ROOT

ELSEWHERE = re.compile(r"\bSPEC\b|SPEC\.md|GPU\.md|TOOLING|ROADMAP|\.\./shared|\bshared/[A-Z]")
FILE = re.compile(r"(?<![\w/.$<{*-])((?:[\w.-]+/)*[\w-]+(?:\.[\w-]+)*\.(?:md|ipynb|py|json|sh|toml|yml|yaml|glsl|comp|spv))\b")
# Files a text names that are made when it runs, by a user, or elsewhere on purpose (not the repository's).
MADE = {"setup.py", "results.json", "model.safetensors", "x.json", "out.json", "step.json", "_modidx.py",
        "mkdocs.yml", "llms.txt", "conf.py", "__main__.py", "settings.json", "pytest.ini",
        "script.py"}   # a placeholder in a command line


def repo_files() -> set:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not out: out = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    return set(out)


def texts(prose_only=False):
    "(name, text) of every piece of prose (Markdown cells and files) and, unless `prose_only`, code the check reads."
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if c["cell_type"] == "markdown" or not prose_only: yield f"{nb.name} cell {i}", "".join(c["source"])
    pats = ("README.md", "adr/*.md", "docs/*.md") if prose_only else (
        "README.md", "CHANGELOG.md", "adr/*.md", "docs/*", "bench/*.py", "bench/*.sh", "scripts/*", "tests/*.py")
    for pat in pats:
        for f in sorted(ROOT.glob(pat)):
            if f.is_file() and f.name != Path(__file__).name: yield str(f.relative_to(ROOT)), f.read_text(encoding="utf-8")


def resolves(ref: str, files: set, names: set) -> bool:
    ref = ref.lstrip("./")
    if re.fullmatch(r"(?:[\w-]+/)*[A-Z]\.\w+", ref): return True   # a placeholder: nbs/X.ipynb
    if ref.startswith("bench/results/"): return True   # where a benchmark writes what it measures (committed once run)
    return (ref.startswith("_") or ref in files or ref.split("/")[-1] in names or ref in MADE
            or any(f.endswith("/" + ref) for f in files) or (ROOT / ref).exists())


def test_no_document_from_elsewhere():
    bad = [f"{name}: {m.group(0)!r} in {text[max(0, m.start() - 50):m.end() + 30]!r}"
           for name, text in texts() if not name.startswith("CHANGELOG") for m in ELSEWHERE.finditer(text)]
    assert not bad, "prose cites documents that are not in the repository:\n" + "\n".join(bad)


def test_every_named_file_exists():
    files = repo_files()
    names = {f.split("/")[-1] for f in files}
    bad = sorted({f"{name}: {m.group(1)}" for name, text in texts(prose_only=True)
                  for m in FILE.finditer(text) if not resolves(m.group(1), files, names)})
    assert not bad, "prose names files that are not in the repository:\n" + "\n".join(bad)


def test_the_check_catches_a_missing_file():
    files = repo_files()
    names = {f.split("/")[-1] for f in files}
    assert resolves("nbs/06_cpu.ipynb", files, names) and resolves("vkml/core/graph.py", files, names)
    assert not resolves("docs/NOWHERE.md", files, names)
    assert ELSEWHERE.search("as the SPEC says") and not ELSEWHERE.search("SPECIAL values")


def test_the_contributing_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[Contributing](nbs/53_contributing.ipynb)" in readme and (ROOT / "nbs" / "53_contributing.ipynb").exists()


EXPORT = re.compile(r"#\|\s*export\b")
LONGEST_EXPORT = 100   # lines in one `#| export` cell: past this a notebook is a listing, not a lesson
# Notebooks other engineers are splitting now (the operator table, the optimiser); each still has a long
# cell. The check fails when one of them no longer has, so the entry is removed as soon as it is done.
SPLIT_PENDING = {"17_nn_functional.ipynb", "32_optim.ipynb"}


def long_export_cells(limit: int = LONGEST_EXPORT) -> dict:
    "notebook name -> ['cell i: n lines', ...] of the export cells longer than `limit` lines."
    out = {}
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        for i, c in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            s = "".join(c["source"])
            if c["cell_type"] == "code" and EXPORT.match(s) and (n := len(s.splitlines())) > limit:
                out.setdefault(nb.name, []).append(f"cell {i}: {n} lines")
    return out


def test_no_export_cell_over_100_lines():
    long = long_export_cells()
    bad = [f"{nb} {c}" for nb, cells in long.items() if nb not in SPLIT_PENDING for c in cells]
    assert not bad, (f"export cells over {LONGEST_EXPORT} lines (split them into pieces, each introduced by a "
                     "sentence saying what it does):\n" + "\n".join(bad))
    done = sorted(SPLIT_PENDING - set(long))
    assert not done, f"these notebooks have no long export cell any more: remove them from SPLIT_PENDING: {done}"


def test_the_long_cell_check_counts_lines():
    assert EXPORT.match("#| export\nx = 1") and EXPORT.match("#|export") and not EXPORT.match("#| exporti_not")
    assert all(n in long_export_cells(0) for n in ("12_tensor.ipynb", "27c_backend.ipynb"))
