"""The limitations page is computed: change the registry, the gradient rules or the result files and its numbers move."""
import json, re
import numpy as np
import pytest
import vkml
import vkml.frontend.autograd as A
import vkml.frontend.functions as VF
import vkml.lab.limitations as L
from vkml.core.ops import Op, Category, NO_GRAD_REASONS
from vkml.frontend.registry import register_operator, unregister_operator


def numbers(sentence: str) -> list:
    return [int(n) for n in re.findall(r"\d+", sentence)]


@pytest.fixture
def operator():
    "Register operators for one test and always take them out again."
    names = []
    def add(name, example):
        register_operator(name, "test", lambda *a: None, example)
        names.append(name)
    yield add
    for n in names: unregister_operator(n)


def test_a_graph_free_operator_moves_both_operator_counts(operator):
    before = numbers(L.headline()[1])            # [on vulkan, of n, on cpu, of n]
    operator("fake_graph_free", lambda: vkml.tensor([1.0, 2.0]))   # traces to INPUT only: runs everywhere
    after = numbers(L.headline()[1])
    assert after == [before[0] + 1, before[1] + 1, before[2] + 1, before[3] + 1]
    assert not [r for r in L.off_backend_rows() if "fake_graph_free" in r["operators"]]


def test_an_operator_using_prod_stays_off_vulkan_with_its_category(operator):
    before = numbers(L.headline()[1])
    operator("fake_prod_user", lambda: VF.prod(vkml.tensor([1.0, 2.0])) * 2.0)
    after = numbers(L.headline()[1])
    assert after[:2] == [before[0], before[1] + 1]          # counted, but not on Vulkan
    rows = [r for r in L.off_backend_rows() if "fake_prod_user" in r["operators"]]
    assert [(r["backend"], r["op"], r["category"]) for r in rows] == [("vulkan", "PROD", Category.BREAKS_GUARANTEE)]
    assert "fake_prod_user" in L.off_backend_table()


def test_an_operator_whose_example_fails_is_a_genuine_gap(operator):
    def broken(): raise vkml.ShapeError("planted")
    operator("fake_broken", broken)
    rows = [r for r in L.off_backend_rows() if "fake_broken" in r["operators"]]
    assert {r["backend"] for r in rows} == {"cpu", "vulkan"}
    assert all(r["category"] is Category.NOT_YET and "planted" in r["reason"] for r in rows)


def test_an_unknown_backend_gap_is_a_genuine_gap(monkeypatch):
    monkeypatch.delitem(L.BACKEND_GAPS, ("vulkan", Op.PROD))
    prod_rows = [r for r in L.off_backend_rows() if "PROD" in r["op"].split(", ")]
    assert prod_rows and all(r["category"] is Category.NOT_YET for r in prod_rows)
    assert re.search(r"[1-9]\d* genuine gap", L.breakdown(prod_rows))


def test_one_row_per_cause_not_per_operator(operator):
    "Regression: the nine CPU-only linear-algebra operators were nine rows (nine gaps) for one cause."
    rows = [r for r in L.off_backend_rows() if any(n.startswith("linalg.") for n in r["operators"])]
    assert len(rows) == 1 and {"linalg.svd", "linalg.cholesky", "logdet"} <= set(rows[0]["operators"])
    assert rows[0]["backend"] == "vulkan" and {"SVD", "CHOLESKY"} <= set(rows[0]["op"].split(", "))
    operator("fake_prod_user", lambda: VF.prod(vkml.tensor([1.0, 2.0])) * 2.0)   # a second operator, the same cause
    prod = [r for r in L.off_backend_rows() if "PROD" in r["op"].split(", ")]
    assert len(prod) == 1 and prod[0]["operators"] == ["prod", "fake_prod_user"]


def test_removing_a_gradient_rule_moves_the_headline_and_adds_a_gap(monkeypatch):
    grad_before = numbers(L.headline()[0])
    rows_before = L.no_grad_rows()
    from vkml.core.elementwise import ELEMENTWISE
    monkeypatch.setattr(ELEMENTWISE[Op.ERF], "vjp", None)
    grad_after = numbers(L.headline()[0])
    assert grad_after == [grad_before[0] - 1, grad_before[1]]
    rows = L.no_grad_rows()
    assert len(rows) == len(rows_before) + 1
    erf = next(r for r in rows if r["op"] == "ERF")
    assert erf["category"] is Category.NOT_YET                    # no reason stated: a genuine gap
    gaps = sum(r["category"] is Category.NOT_YET for r in rows_before)   # (MAXPOOL2D_BACKWARD's own rule is one)
    assert f"{gaps + 1} genuine gap" in L.breakdown(rows)
    assert "| ERF | not yet implemented |" in L.no_grad_table()


def test_a_stated_reason_gives_its_category(monkeypatch):
    from vkml.core.elementwise import ELEMENTWISE
    monkeypatch.setattr(ELEMENTWISE[Op.ERFC], "vjp", None)
    monkeypatch.setitem(NO_GRAD_REASONS, Op.ERFC, (Category.WAITING_MEASUREMENT, "planted reason"))
    erfc = next(r for r in L.no_grad_rows() if r["op"] == "ERFC")
    assert (erfc["category"], erfc["reason"]) == (Category.WAITING_MEASUREMENT, "planted reason")
    assert "1 waiting on a measurement" in L.breakdown(L.no_grad_rows())


def test_breakdown_counts_every_category():
    rows = [dict(category=Category.BY_DESIGN)] * 3 + [dict(category=Category.NOT_YET)] * 2 + [dict(category=L.DONE)]
    assert L.breakdown(rows) == "3 by design, 1 done, 2 genuine gaps (not yet implemented)"
    assert L.breakdown([]) == "0 genuine gaps (not yet implemented)"


def _fusion_result(device="NVIDIA H200"):
    "A results file of the fusion experiment's format, with known numbers."
    from vkml.lab.experiments.fusion import SCHEMA
    def wl(name, d_off, d_on, b_off, b_on, ideal, g_off, g_on):
        m = lambda d, b, g: dict(dispatches=d, bytes_moved=b, bytes_ideal=ideal, gpu_us=g, host_us=100.0)
        return dict(name=name, unfused=m(d_off, b_off, g_off), fused=m(d_on, b_on, g_on),
                    saved=dict(dispatches=d_off / d_on, bytes_moved=b_off / b_on, gpu_us=g_off / g_on, host_us=1.0))
    return dict(schema=SCHEMA, provenance=dict(device=device, command="python bench/fusion.py"), rows=4096, cols=4096,
                workloads=[wl("layer_norm", 10, 3, 600, 200, 100, 440.0, 80.0), wl("adam", 60, 3, 430, 100, 100, 900.0, 100.0)])


def test_fusion_row_renders_the_measured_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "RESULTS", tmp_path)
    monkeypatch.setitem(L._fusion_cache, "here", "MEASURED HERE")     # the live part has its own tests
    row = L.fusion_row()
    assert row["category"] == L.DONE and "not yet measured on the H200" in row["state"] and "MEASURED HERE" in row["state"]
    (tmp_path / "fusion_h200.json").write_text(json.dumps({"provenance": {"device": "NVIDIA H200"}, "norms": []}))
    assert "not yet measured on the H200" in L.fusion_row()["state"]   # a file measured before fusion existed is not this measurement
    (tmp_path / "fusion_h200.json").write_text(json.dumps(_fusion_result()))
    row = L.fusion_row()
    state = row["state"]
    assert "on the NVIDIA H200 at 4096×4096" in state and "bench/results/fusion_h200.json" in state + row["see"]
    assert "dispatches 3.3–20" in state and "bytes moved 3–4.3" in state and "GPU time 5.5–9" in state
    assert "layer_norm: 10 → 3 dispatches, bytes 6× → 2× a single pass, GPU 440 → 80 µs" in state
    assert "MEASURED HERE" in state and "not yet measured" not in state


@pytest.mark.vulkan
def test_fusion_row_measures_on_the_device_at_hand():
    here = L._fusion_here()                                           # (cached: the page measures once per process)
    assert here.startswith("measured now on "), here
    off, on = map(int, re.search(r"layer_norm: (\d+) → (\d+) dispatches", here).groups())
    assert on < off


def test_fusion_row_without_vulkan_counts_the_schedules(monkeypatch):
    import vkml.core.graph
    from vkml.lab.experiments.fusion import kernel_counts
    def no_device(device): raise vkml.core.dtypes.DeviceError("no Vulkan device in this test")
    monkeypatch.setattr(vkml.core.graph, "get_backend", no_device)
    monkeypatch.setattr(L, "_fusion_cache", {})
    monkeypatch.delenv("VKML_REQUIRE_VULKAN", raising=False)
    here = L._fusion_here()
    off, on = kernel_counts(*L.FUSION_LIVE)["layer_norm"]
    assert "no Vulkan device here (DeviceError)" in here and f"layer_norm {off} → {on}" in here and on < off


def test_demo_results_decide_which_device_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "RESULTS", tmp_path)
    (tmp_path / "demo_h200.json").write_text(json.dumps({"results": [
        {"device": "cpu", "step_s": 0.004}, {"device": "vulkan:0", "train_s": 2.0, "steps": 1000}]}))
    row = L.gpu_wins_row("no device needed: the file decides")
    assert row["category"] == L.DONE and "the GPU wins" in row["state"] and "4.00 ms on cpu" in row["state"]


def test_demo_results_where_the_cpu_wins_are_not_done(tmp_path, monkeypatch):
    "Regression: the H200's result (the CPU wins) was filed under done; the row shows when it was measured."
    monkeypatch.setattr(L, "RESULTS", tmp_path)
    (tmp_path / "demo_h200.json").write_text(json.dumps({"date": "2026-11-29", "commit": "2ef4690", "results": [
        {"device": "cpu", "step_s": 0.0126}, {"device": "vulkan", "step_s": 0.0158}]}))
    row = L.gpu_wins_row("no device needed: the file decides")
    assert row["category"] is Category.NOT_YET and "the CPU wins" in row["state"]
    assert "2026-11-29" in row["state"] and "2ef4690" in row["state"]


def test_provenance_paths_are_relative_to_the_repository(tmp_path, monkeypatch):
    "Regression: the page printed the measuring host's absolute output paths."
    monkeypatch.setattr(L, "RESULTS", tmp_path)
    (tmp_path / "demo_h200.json").write_text(json.dumps({"command": "python bench/demo_timing.py --out /tmp/h200-results/demo_h200.json",
                                                         "results": []}))
    (tmp_path / "fusion_h200.json").write_text(json.dumps({"provenance": {"command": "python3 /root/vkml/bench/fusion.py --out /root/out/x.json"}}))
    p = L.provenance("skipped")
    assert "--out bench/results/demo_h200.json" in p and "python3 bench/fusion.py --out x.json" in p
    assert "/tmp/" not in p and "/root/" not in p


def test_index_checks_are_probed():
    "Regression: the row said 'waiting on architectural work' after the device-side checks shipped (ADR 0025)."
    row = L.index_check_row("no Vulkan device in this test")
    assert row["category"] == L.DONE and row["state"].count("IndexOutOfRangeError") == 2 and "not probed here" in row["state"]


@pytest.mark.vulkan
def test_index_checks_are_probed_on_vulkan():
    row = L.index_check_row(None)
    assert row["category"] == L.DONE and "an index computed on Vulkan: IndexOutOfRangeError" in row["state"]


def test_a_gather_that_returns_silently_is_not_done(monkeypatch):
    monkeypatch.setattr(VF, "gather", lambda x, dim, idx: x[:1])    # as the kernels that clamped did
    row = L.index_check_row("no Vulkan device in this test")
    assert row["category"] is Category.WAITING_ARCHITECTURE and "without an error" in row["state"]


def test_threads_are_probed():
    "Regression: the row said the device state is 'shared without locks' after a lock per device shipped."
    row = L.threading_row("no Vulkan device in this test")
    assert row["category"] == L.DONE and "the values one thread gets" in row["state"] and "without locks" not in row["state"]
    assert "RLock" in row["state"] and "per thread" in row["state"]


def test_complex_and_sparse_rows_are_probed(monkeypatch):
    assert L.complex_row()["category"] is Category.NOT_YET and "DTypeError" in L.complex_row()["state"]
    assert L.sparse_row()["category"] is Category.WAITING_ARCHITECTURE
    monkeypatch.setattr(vkml.Tensor, "to_sparse", lambda self: self, raising=False)
    monkeypatch.setattr(vkml, "sparse_coo_tensor", lambda *a: None, raising=False)
    assert L.sparse_row()["category"] == L.DONE         # the row follows the library


def test_linalg_row_follows_the_functions(monkeypatch):
    import vkml.linalg as LA
    row = L.linalg_row()
    assert row["category"] == L.DONE and "cholesky" in row["state"] and "[[0.2727, -0.0909], [-0.0909, 0.3636]]" in row["state"]
    monkeypatch.delattr(LA, "eigh")
    row = L.linalg_row()
    assert row["category"] is Category.NOT_YET and "eigh" in row["state"]


def test_feature_rows_probe_the_library(tmp_path, monkeypatch):
    monkeypatch.setattr(L, "RESULTS", tmp_path)   # no result files: the rows come from probes only
    rows = {r["feature"]: r for r in L.feature_rows("skipped in this test")}
    assert rows["rank > 4"]["category"] is Category.BY_DESIGN
    assert rows["float64"]["category"] == L.DONE and "no Vulkan device" in rows["float64"]["state"]
    assert rows["float64 kernels on Vulkan"]["category"] is Category.NOT_YET and "MAXPOOL2D" in rows["float64 kernels on Vulkan"]["state"]
    assert rows["higher-order gradients"]["category"] == L.DONE and "MAXPOOL2D" in rows["higher-order gradients"]["state"]
    assert "no Vulkan device" in rows[L.GPU_ROW]["state"]
    assert rows["several GPUs"]["category"] == L.DONE and "vkml.distributed.DistributedDataParallel" in rows["several GPUs"]["state"]
    assert {"rank > 4", "complex numbers", "sparse tensors", "threads", "out-of-range index values"} <= set(rows)
    exchange = rows["gradient exchange overlapped with backward, device to device"]
    assert exchange["category"] is Category.WAITING_ARCHITECTURE and "MPI on the host" in exchange["state"]
    assert "while backward computes the next" in exchange["state"] and "nothing overlaps" not in exchange["state"]   # ADR 0032


def test_provenance_names_the_version():
    assert f"vkML **{vkml.__version__}**" in L.provenance("skipped")


@pytest.mark.vulkan
def test_lazy_detach_is_one_submission_on_vulkan():
    row = L.lazy_detach_row(None)
    lazy, eager = map(float, re.search(r"takes (\S+) submission\(s\) on Vulkan, (\S+) with an eager", row["state"]).groups())
    assert lazy == 1 and eager > lazy
