"""bench/ddp.py --quick: two ranks of vkml.distributed on lavapipe (both on vulkan:0, noted in the JSON) write the
JSON that the two-GPU run writes, with the equality check passed; bench/render_ddp.py renders it. Timings are
not checked (they are figures, not facts)."""
import json, subprocess, sys
from pathlib import Path
import pytest

from conftest import ROOT
import vkml.distributed as dist

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="mpi4py is not installed (the `distributed` extra)")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "ddp_h200x2.json"
    r = subprocess.run([sys.executable, "bench/ddp.py", "--quick", "--no-torch", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return out, json.loads(out.read_text()), r.stdout


@pytest.mark.vulkan
@pytest.mark.timeout(300)
def test_the_quick_run_writes_the_json_with_both_rank_counts(quick):
    _, d, _ = quick
    p = d["provenance"]
    for k in ("date", "device", "driver", "commit", "command", "devices"): assert p[k], k
    assert "bench/ddp.py --quick" in p["command"]
    assert d["quick"] is True and d["ranks"] == [1, 2] and d["goal_efficiency"] == 0.85
    assert not [k for k, r in d["runs"].items() if "error" in r], d["runs"]
    assert sorted({(r["ranks"], r["rank"]) for r in p["devices"]}) == [(1, 0), (2, 0), (2, 1)]
    assert [c["case"] for c in d["cases"]] == ["mlp", "cifar"]
    for c in d["cases"]:
        for n in ("1", "2"):
            assert c["vkml"][n]["eager"]["samples_per_s"] > 0
        assert c["vkml"]["1"]["jit"]["samples_per_s"] > 0
        assert c["efficiency"]["vkml_eager"] > 0 and isinstance(c["met"], bool)
        assert c["vkml"]["2"]["exchange_bytes_per_step"] > 0
        assert c["torch"] is None   # --no-torch


@pytest.mark.vulkan
def test_two_ranks_equal_one_process_on_the_doubled_batch(quick):
    _, d, out = quick
    for c in d["cases"]:
        q = c["equality"]
        assert q["passed"] and q["ranks_identical"] and q["max_excess"] <= 1 and q["values_over_bound"] == 0, (c["case"], q)
        assert q["steps"] == d["spec"]["check_steps"] and q["worst_parameter"]
    assert "shares" in d["cases"][1]["equality"]["reference"]   # BatchNorm: each rank's statistics, in the reference too
    assert out.count("passed (max") == 2


@pytest.mark.vulkan
def test_a_data_parallel_step_under_jit_is_timed_with_its_exchange(quick):
    "Two ranks' jitted step replays (ADR 0030); the JSON says what its exchange cost per replay."
    _, d, _ = quick
    for c in d["cases"]:
        j = c["vkml"]["2"]["jit"]
        assert c["jit_under_ddp"] == "supported" and j["samples_per_s"] > 0 and c["efficiency"]["vkml_jit"] > 0
        x = j["exchange"]
        # a host point per bucket and one for the averages (the exchange overlapped with backward); BatchNorm: its buffers too
        assert x["replays"] > 0 and x["host_points"] == c["vkml"]["2"]["buckets"] + 1 + (c["case"] == "cifar"), (x, c["vkml"]["2"])
        assert x["bytes_per_step"] == c["vkml"]["2"]["exchange_bytes_per_step"]
        assert 0 < x["mpi_ms_per_step"] <= x["exchange_ms_per_step"] and x["exchange_bytes_per_s"] > 0


@pytest.mark.vulkan
def test_fewer_devices_than_ranks_share_the_default_device_with_a_note(quick):
    import vkml
    _, d, _ = quick
    if len(vkml.devices()) >= 2: pytest.skip("two Vulkan devices here: each rank has its own")
    assert {r["device"] for r in d["provenance"]["devices"]} == {"vulkan:0"}
    assert any("every rank on vulkan:0" in n for n in d["notes"])


@pytest.mark.vulkan
def test_render_ddp_renders_the_json(quick):
    sys.path.insert(0, str(ROOT / "bench"))
    from render_ddp import render_ddp
    path, d, _ = quick
    md = render_ddp(path.parent)
    assert md.startswith("## Data-parallel training, 1 and 2 ranks")
    assert d["provenance"]["commit"] in md and "--quick" in md
    for c in d["cases"]: assert f"| {c['case']} | vkML eager |" in md
    assert render_ddp(path.parent / "absent") == ""
