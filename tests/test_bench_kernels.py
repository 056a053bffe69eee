"""bench/bench_kernels.py runs end to end on tiny sizes (lavapipe here) and writes the JSON the lead reads.
Timings are never checked: only that every case and field is there."""
import importlib.util, json
from pathlib import Path
import pytest

pytestmark = pytest.mark.vulkan
ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("_bench_kernels", ROOT / "bench" / "bench_kernels.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod


def test_bench_kernels_small(tmp_path):
    out = tmp_path / "k.json"
    _load().main(["--small", "--sweep", "--budget", "0", "--reps", "1", "--no-torch", "--out", str(out)])
    r = json.loads(out.read_text())
    assert {"date", "commit", "device", "driver", "torch", "cases", "sweep"} <= set(r)
    names = [c["case"] for c in r["cases"]]
    for want in ("sum over the last axis", "sum over the first axis", "matmul float16", "bmm", "conv2d fwd+bwd float32",
                 "add, rank-4 broadcast", "mul with a transposed operand", "exp", "softmax", "layer_norm", "rms_norm",
                 "cross_entropy forward + backward"):
        assert any(n.startswith(want) for n in names), (want, names)
    for c in r["cases"]:
        assert c["vkml_us"] > 0 and c["shaders"] and c["torch_us"] is None and c["ratio"] is None and c["met"] is None
    conv = next(c for c in r["cases"] if c["case"].startswith("conv2d fwd+bwd float32"))
    assert any(s.startswith("conv") for s in conv["shaders"]) and any(s.startswith("wgrad") for s in conv["shaders"])   # implicit GEMM
    assert r["sweep"] and all("skipped" in s for s in r["sweep"])   # --budget 0: listed, not timed
    # the norms and losses each run as one row kernel (a workgroup per row), cross-entropy's mean aside
    for c in r["cases"]:
        if c["case"].startswith(("softmax", "log_softmax", "layer_norm", "rms_norm")): assert len(c["shaders"]) == 1, c
    fams = {e["family"] for e in r["series"]}
    assert {"add (contiguous)", "softmax over the last axis", "matmul float32", "matmul float16"} <= fams
    assert all(e["vkml_us"] > 0 and e["work"] > 0 and e["torch_us"] is None for e in r["series"])
    p = r["cpu_prod"]
    assert p["vkml_us"] > 0 and p["numpy_us"] > 0 and p["goal"] == 0.5


def test_h200_script_parses():
    import subprocess
    assert subprocess.run(["bash", "-n", "bench/h200_kernels.sh"], cwd=ROOT).returncode == 0
