"""bench/real_models.py's vkML side: each case's model at its real size has the known number of parameters, and one
step of each vkML mode runs at --small's sizes; the renderer turns its JSON into RESULTS.md's section. Never imports
torch (the bench's PyTorch side is its own: the bench imports torch only when it is there)."""
import importlib, math, sys
from pathlib import Path
import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture(scope="module")
def rm():
    sys.path.insert(0, str(BENCH))
    saved = sys.modules.get("torch", "absent")
    sys.modules["torch"] = None                  # `import torch` raises ImportError: the bench runs vkML alone
    try: mod = importlib.import_module("real_models")
    finally:
        if saved == "absent": del sys.modules["torch"]
        else: sys.modules["torch"] = saved
    assert mod.torch is None
    return mod


def test_the_models_have_their_known_sizes(rm):
    specs = rm.case_specs(small=False)
    n = {name: rm.count_params(spec["build"](rm.Lib("vkml"))) for name, spec in specs.items()}
    # nanoGPT's shakespeare-char model: 10.65M parameters as nanoGPT counts them (without the position embedding),
    # 6 x 12 x 384² in the blocks, the tied 65 x 384 embedding, the layer norms' weights, and 256 x 384 positions
    gpt_blocks, wte, wpe, norms = 6 * 12 * 384 ** 2, 65 * 384, 256 * 384, (2 * 6 + 1) * 384
    assert n["gpt"] == gpt_blocks + wte + wpe + norms == 10_745_088
    assert round((n["gpt"] - wpe) / 1e6, 2) == 10.65
    assert n["resnet20"] == 269_722                 # He et al.'s 0.27M (option A shortcuts: no parameters)
    assert n["cnn_bn"] == 896 + 64 + 18_496 + 128 + 73_856 + 256 + 20_490


def test_one_step_of_each_vkml_mode_at_small_sizes(rm, tmp_path):
    specs = rm.case_specs(small=True)
    rows = [rm.run_case(name, spec, steps=1, warm=1, profile_steps=1, log=lambda s: None) for name, spec in specs.items()]
    for r in rows:
        assert r["torch"] == {} and r["ratios"] == {}
        assert set(r["vkml"]) == set(rm.VK_MODES)
        for mode, m in r["vkml"].items():
            assert "error" not in m, (r["case"], mode, m)
            assert m["ms"] > 0 and math.isfinite(m["loss_last"]) and m["peak_bytes"] > 0
        eager, amp = r["vkml"]["eager"], r["vkml"]["amp"]
        assert eager["loss_first"] == r["vkml"]["jit"]["loss_first"]          # the same weights and batch, whatever the mode
        assert abs(amp["loss_first"] - eager["loss_first"]) < 1e-2 * abs(eager["loss_first"])   # float16 products
        assert sum(eager["gpu_us_per_step"].values()) > 0 and eager["dispatches_per_step"] > 0
    sys.path.insert(0, str(BENCH))
    from render_real_models import render_section
    md = render_section(dict(provenance={"date": "today", "device": "lavapipe"}, steps=1, warm=1, results=rows))
    assert all(f"| {name} | eager ↔ eager |" in md for name in specs) and "parameters" in md


def test_a_failing_mode_is_recorded_and_the_run_goes_on(rm):
    spec = dict(rm.case_specs(small=True)["cnn_bn"])
    spec["opt"] = ("NoSuchOptimizer", {})
    r = rm.run_case("cnn_bn", spec, steps=1, warm=0, profile_steps=0, vk_modes=("eager", "jit"), log=lambda s: None)
    assert set(r["vkml"]) == {"eager", "jit"} and all("NoSuchOptimizer" in m["error"] for m in r["vkml"].values())


@pytest.mark.vulkan
def test_a_training_run_repeats_bit_for_bit(rm, tmp_path):
    "bench/repeatable.py at --small: the same weights and batches, trained twice in each mode, give the same parameters."
    import json
    rep = importlib.import_module("repeatable")
    out = tmp_path / "r.json"
    rep.main(["--small", "--modes", "eager", "amp", "--runs", "2", "--steps", "3", "--out", str(out)])
    res = json.loads(out.read_text())
    assert all(r["repeatable"] for r in res.values()), {m: [x["params_sha1"] for x in r["runs"]] for m, r in res.items()}
    assert res["eager"]["runs"][0]["params_sha1"] != res["amp"]["runs"][0]["params_sha1"]   # (autocast changed the numbers)


@pytest.mark.vulkan
def test_the_gpt_trains_alike_in_float32_and_under_amp(rm, tmp_path):
    """bench/amp_check.py: float32, amp (in parts and in one submission a step) and amp under vkml.jit train alike (losses
    within 2e-2 of float32's, no overflow lowering the scale), and every amp gradient is finite and near float32's.
    On lavapipe at --small's width with the full GPT's 6 layers (a reduce kernel storing a prologue value broke amp's
    gradients from 6 layers on, not at 5: bench/results/logs/h100_s43_2026-12-07); on a GPU at the full GPT's sizes."""
    import json
    import vkml.backends.vulkan as vkv
    ac = importlib.import_module("amp_check")
    gpu = vkv.devices()[vkv.default_index()].features.get("coopmat_f16")
    out = tmp_path / "a.json"
    ac.main((["--steps", "6"] if gpu else ["--small", "--layers", "6", "--batch", "2", "--steps", "6"]) + ["--grads", "--out", str(out)])
    res = json.loads(out.read_text())
    assert set(res["runs"]) == {"vkml eager", "vkml amp", "vkml amp_first0", "vkml amp_jit"}
    assert all(r["alike"] for r in res["runs"].values()), {k: (r["losses"], r["scales"]) for k, r in res["runs"].items()}
    bad = {n: r for n, r in res["grads"].items() if not r["finite"] or r["rel_err"] > 1e-2}
    assert not bad, bad
