"""The experiments (nbs/40-42) on the current Vulkan device: the prod experiment's VALUES (never its
timings), the submission-cost protocol on a quick schedule, the fusion measurement on a small input
(dispatch counts, bytes and parity, never timings), and the bench scripts the H200 run uses.
References are independent numpy code."""
import json
import math, subprocess, sys
from pathlib import Path
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.vulkan


def lanes_ref(x: np.ndarray, lanes: int, flush: bool) -> float:
    "Independent reference: float32 products, lane l over x[l::lanes] in order, then the lanes in order."
    tiny = np.float32(1.1754944e-38)
    def mul(a, b):
        with np.errstate(all="ignore"): r = np.float32(np.float32(a) * np.float32(b))
        return np.float32(0) if flush and abs(r) < tiny else r
    parts = []
    for l in range(lanes):
        p = np.float32(1)
        for v in x[l::lanes]: p = mul(p, v)
        parts.append(p)
    r = np.float32(1)
    for p in parts: r = mul(r, p)
    return float(r)


def alt(n):
    return np.array([1e20 if i % 2 == 0 else 1e-20 for i in range(n)], np.float32)


def test_prod_experiment_values():
    import vkml, vkml.backends.vulkan as vkv
    from vkml.lab.experiments import lane_prod, denormals
    mode = denormals()
    assert mode in ("preserved", "flushed to zero")
    vkv.reset_stats()
    got = {(n, l): lane_prod(alt(n), l)[0] for n, l in [(4, 2), (8, 2), (8, 4), (4, 1), (8, 1)]}
    s = vkv.stats()
    assert s["dispatches"] == 5 and s["submissions"] == 5, s       # each value came from a real dispatch
    keep = mode == "preserved"
    assert (math.isinf(got[(4, 2)]) and got[(4, 2)] > 0) if keep else math.isnan(got[(4, 2)])
    assert math.isnan(got[(8, 2)])                                  # 1e-80 is 0 even as a denormal: inf * 0
    assert (math.isinf(got[(8, 4)]) and got[(8, 4)] > 0) if keep else math.isnan(got[(8, 4)])
    assert got[(4, 1)] == 1.0 and got[(8, 1)] == 1.0                # one lane is index order
    for n in (4, 8, 2**12):
        assert vkml.tensor(alt(n)).prod().item() == 1.0             # the CPU's index-order product
    for (n, l), v in got.items():
        ref = lanes_ref(alt(n), l, flush=not keep)
        assert (math.isnan(v) and math.isnan(ref)) or v == ref, (n, l, v, ref)


def test_denormal_probe_matches_the_lane_products():
    from vkml.lab.experiments import lane_prod, denormals, float_controls
    p, parts = lane_prod(alt(4), 2)
    assert parts[0] == np.inf
    assert (parts[1] > 0) == (denormals() == "preserved")          # 1e-40 survives, or is flushed to 0
    fc = float_controls()
    assert set(fc) == {"shaderDenormPreserveFloat32", "shaderDenormFlushToZeroFloat32", "denormBehaviorIndependence"}


@pytest.mark.parametrize("n,lanes", [(1, 1), (7, 3), (1000, 64), (200_003, 1), (150_000, 2)])
def test_lane_prod_is_exactly_the_ordered_float32_product(n, lanes):
    """Values near 1 (no overflow): every lane's product equals numpy's sequential float32 product exactly,
    also past 65,535 elements per lane (lavapipe stops an invocation's loops after 65,535 trips)."""
    from vkml.lab.experiments import lane_prod
    x = (1 + (np.random.default_rng(n).random(n) - 0.5) * 1e-3).astype(np.float32)
    p, parts = lane_prod(x, lanes)
    want = [np.multiply.accumulate(x[l::lanes], dtype=np.float32)[-1] for l in range(lanes)]
    np.testing.assert_array_equal(parts, np.array(want, np.float32))
    assert p == float(np.multiply.accumulate(np.array(want, np.float32), dtype=np.float32)[-1])


def test_lane_prod_rejects_bad_lane_counts():
    from vkml.lab.experiments import lane_prod
    for l in (0, 65):
        with pytest.raises(ValueError): lane_prod(alt(4), l)


def test_submission_cost_quick_protocol():
    from vkml.lab.experiments.submission import run, fit, comparison
    res = run(quick=True)
    assert res["check"] == 1.875                                    # 4 dependent dispatches ran, in order
    for kind in ("blocking", "polled"):
        # a line fitted to timings: its numbers exist; their sign is the machine's business (a loaded machine can
        # fit a negative intercept), and timings are never asserted
        assert math.isfinite(res[kind]["a_us"]) and math.isfinite(res[kind]["b_us"]), res[kind]
        assert len(res[kind]["median_us"]) == len(res[kind]["ns"]) == 4
    assert res["record_us"] > 0 and res["eager_us"] > 0
    assert res["batching"]["submissions"]["once"] == 1
    assert res["batching"]["submissions"]["realize"] == res["batching"]["submissions"]["read"] == res["batching"]["ns"][-1]
    for k in ("date", "device", "driver", "command", "commit"): assert res["provenance"][k]
    assert "not yet measured on the H200" in comparison(res, None)
    json.dumps(res)                                                 # JSON-ready


def test_fit_recovers_a_line():
    from vkml.lab.experiments.submission import fit
    ns = [1, 2, 4, 8, 16, 1024]
    a, b = fit(ns, [55 + 8 * n for n in ns])
    assert abs(a - 55) < 1e-6 and abs(b - 8) < 1e-9


def test_fusion_saves_dispatches_and_bytes_and_keeps_parity():
    "Every workload, fused and unfused, on a small input: fewer dispatches, no more bytes, both within the parity bound."
    from vkml.lab.experiments.fusion import run, WORKLOADS
    res = run(16, 64, repeats=1)
    assert [r["name"] for r in res["workloads"]] == [w.name for w in WORKLOADS]
    for r in res["workloads"]:
        on, off = r["fused"], r["unfused"]
        assert on["dispatches"] < off["dispatches"], r["name"]
        assert on["bytes_ideal"] <= on["bytes_moved"] <= off["bytes_moved"], r["name"]
        assert on["bytes_ideal"] == off["bytes_ideal"], r["name"]
        assert on["submissions"] == off["submissions"] == 1, r["name"]
        for m in (on, off):
            assert len(m["per_dispatch"]) == m["dispatches"] >= m["kernels"], (r["name"], m["fuse"])
            assert m["err_over_bound"] <= 1, (r["name"], m["fuse"], m["max_abs_err"])
            assert m["bytes_moved"] == sum(p["bytes"] for p in m["per_dispatch"])
    by = {r["name"]: r for r in res["workloads"]}
    chain, adam = by["gelu(x*w+b)"], by["adam"]
    assert (chain["unfused"]["dispatches"], chain["fused"]["dispatches"]) == (3, 1)
    assert chain["fused"]["bytes_moved"] == chain["fused"]["bytes_ideal"] == (2 * 16 * 64 + 2 * 64) * 4
    assert chain["unfused"]["bytes_moved"] == chain["fused"]["bytes_ideal"] + 2 * 2 * 16 * 64 * 4  # two intermediates, out and back
    # one kernel updates every parameter and both moments; the given gradients are first copied into the
    # flat gradient, one copy each (a backward pass would write them there in place)
    assert adam["fused"]["dispatches"] == 1 + 3
    assert [p["shader"].startswith("copy") for p in adam["fused"]["per_dispatch"]] == [True, True, True, False]
    n = 16 * 64 + 64 + 64 * 16
    update = adam["fused"]["per_dispatch"][-1]["bytes"]
    assert 7 * 4 * n <= update <= 7 * 4 * n + 64                           # p, g, m, v read; p, m, v written: one pass
    json.dumps(res)                                                       # JSON-ready


def test_fusion_counts_bytes_from_the_bindings():
    "Distinct elements per binding (broadcast counts once), reads and writes apart, the argument buffer not at all."
    import vkml
    from vkml.core.dtypes import View, float32
    from vkml.backends.vulkan.recorder import ArgsBinding, VkTensor
    from vkml.backends.vulkan.kernel_api import Dispatch, Scratch
    from vkml.lab.experiments.fusion import dispatch_bytes, view_bytes
    a = vkml.tensor(np.zeros((8, 16), np.float32), device="vulkan").node.buf
    row = VkTensor(a.alloc, View((8, 16), (0, 1), 0), float32)           # one row seen 8 times
    col = VkTensor(a.alloc, View((8, 16), (16, 0), 0), float32)          # one column of 8 seen 16 times
    assert (view_bytes(a), view_bytes(row), view_bytes(col), view_bytes(Scratch(40))) == (512, 64, 32, 40)
    args = ArgsBinding(a.alloc)
    assert dispatch_bytes(Dispatch("gen_x", (args, a, row, col, row), (0,), (1, 1, 1), (1,))) == 512 + 64 + 32
    assert dispatch_bytes(Dispatch("gen_x", (args, a, a), (0,), (1, 1, 1), (1,))) == 2 * 512      # in place: read and written
    idx = VkTensor(a.alloc, View((8,), (1,), 0), float32)
    out = VkTensor(a.alloc, View((8,), (1,), 0), float32)
    assert dispatch_bytes(Dispatch("gather_f32", (out, a, idx), (0,), (1, 1, 1))) == 32 + 32 + 32   # 8 of a's 128 read


def test_fusion_parity_failure_is_loud():
    "A workload whose Vulkan result is off by more than the bound fails the measurement."
    import vkml
    from vkml.lab.experiments.fusion import Workload, measure_workload, _xwb
    bad = Workload("bad", "x + 1e-3 on Vulkan only", _xwb,
                   lambda s: [s["x"] + (1e-3 if s["x"].device != "cpu" else 0.0)], lambda r, c: 1, 1.0)
    with pytest.raises(AssertionError, match="exceeds the parity bound"): measure_workload(bad, 4, 8, repeats=1)


def test_fusion_off_is_restored_and_schedules_agree_with_the_device():
    import os
    from vkml.lab.experiments.fusion import fusion, kernel_counts
    before = os.environ.get("VKML_FUSION")
    with fusion(False): assert os.environ["VKML_FUSION"] == "0"
    assert os.environ.get("VKML_FUSION") == before
    counts = kernel_counts(8, 32)
    assert all(on < off for off, on in counts.values()), counts


def test_old_fusion_results_are_not_read_as_current():
    from vkml.lab.experiments import load_result
    from vkml.lab.experiments.fusion import current, SCHEMA
    old = load_result("fusion_h200.json")
    assert old is None or current(old) == (old.get("schema") == SCHEMA)
    assert not current({"provenance": {}, "norms": []}) and current({"schema": SCHEMA})


def _script(*args, timeout=240):
    r = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_bench_scripts_write_their_json(tmp_path):
    _script("bench/prod_lanes.py", "--length", "4096", "--out", str(tmp_path / "prod.json"))
    _script("bench/submission_cost.py", "--quick", "--out", str(tmp_path / "sub.json"))
    _script("bench/fusion.py", "--rows", "16", "--cols", "64", "--repeats", "1", "--only", "layer_norm", "adam",
            "--out", str(tmp_path / "fusion.json"))
    for f, keys in (("prod.json", {"values", "timing", "denormals"}), ("sub.json", {"blocking", "polled", "record_us"}),
                    ("fusion.json", {"schema", "workloads", "rows", "cols"})):
        res = json.loads((tmp_path / f).read_text())
        assert keys <= set(res) and {"date", "device", "driver", "command", "commit"} <= set(res["provenance"])
    assert subprocess.run(["bash", "-n", "bench/h200_all.sh"], cwd=ROOT).returncode == 0


def test_missing_h200_results_read_as_none():
    from vkml.lab.experiments import load_result
    assert load_result("no_such_results_file.json") is None
