"""Run a notebook's code cells in one namespace, from nbs/ (as nbdev-test does), where nbdev and fastcore are missing
(the H200 machine): `python bench/run_notebook.py nbs/38a_lstm.ipynb`. fastcore.test's asserts are replaced by plain ones;
IPython's display objects by their text."""
import json, os, sys, types
from pathlib import Path

shim = types.ModuleType("fastcore.test")
def _eq(a, b) -> bool:
    import numpy as np
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray): return np.array_equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)): return len(a) == len(b) and all(map(_eq, a, b))
    return a == b
def test_eq(a, b): assert _eq(a, b), f"{a!r} != {b!r}"
def test_close(a, b, eps=1e-5): assert abs(a - b) < eps, f"{a!r} !~ {b!r}"
def test_fail(f, contains=""):
    try: f()
    except Exception as e: assert contains in str(e), e; return
    raise AssertionError("no exception")
shim.test_eq, shim.test_close, shim.test_fail = test_eq, test_close, test_fail
sys.modules.setdefault("fastcore", types.ModuleType("fastcore")); sys.modules["fastcore.test"] = shim
try: import IPython.display  # noqa: F401
except ImportError: IPython = None
disp = types.ModuleType("_display"); disp.Markdown = str; disp.display = print   # (no fake IPython: matplotlib probes it)
sys.modules["_display"] = disp

nb = Path(sys.argv[1]).resolve()
os.chdir(nb.parent)
sys.path.insert(0, str(nb.parent.parent))
os.environ.setdefault("MPLBACKEND", "Agg")
ns = {"__name__": "__main__"}
for i, c in enumerate(json.loads(nb.read_text())["cells"]):
    if c["cell_type"] != "code": continue
    src = "".join(c["source"])
    if IPython is None: src = src.replace("from IPython.display import", "from _display import")
    if "#| eval: false" in src: continue
    print(f"--- cell {i}", flush=True)
    exec(compile(src, f"{nb.name}[{i}]", "exec"), ns)
print("all cells ran")
