"""The Vulkan runtime: devices, the allocator, the barrier planner, submissions, the pipeline cache and
what the validation layer says. Kernels here are the runtime's own self-test shaders (compiled with
glslc into a temporary directory), so these tests do not depend on the shipped kernels."""
import gc, json, os, shutil, subprocess, sys, textwrap, time
from pathlib import Path
import numpy as np
import pytest

from vkml.core.dtypes import DeviceError, BackendError, FeatureError, OutOfMemoryError, VulkanUnavailableError, View
from vkml.core.dtypes import float32, float16
from vkml.core.ops import Op

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.vulkan

sys.path.insert(0, str(Path(__file__).parent))
import selftest
ADD_SRC = selftest.ADD_SRC


def compile_glsl(src: str, out: Path) -> bytes:
    comp = out.with_suffix(".comp")
    comp.write_text(src)
    r = subprocess.run(["glslc", "--target-env=vulkan1.2", "-O", str(comp), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


@pytest.fixture(scope="session")
def selftest_spv(tmp_path_factory) -> Path:
    "The self-test add shader (f32: o = a + b over contiguous ranges), compiled once per session."
    if shutil.which("glslc") is None: pytest.skip("glslc is not installed")
    p = tmp_path_factory.mktemp("spv") / "_selftest_add.spv"
    compile_glsl(ADD_SRC, p)
    return p


_selftest_add = selftest.kernel


@pytest.fixture
def V(selftest_spv):
    "vkml.backends.vulkan with the self-test op SELFTEST_ADD defined (and forgotten afterwards)."
    import vkml.backends.vulkan as V
    selftest.define(selftest_spv.read_bytes())
    yield V
    selftest.remove()


def vt(a, device="vulkan"):
    import vkml
    return vkml.tensor(np.asarray(a, np.float32), device=device)


def add(a, b):
    from vkml.frontend.tensor import apply
    return apply(Op.SELFTEST_ADD, a, b)


def run_script(code: str, env: dict = None, timeout=120) -> dict:
    "Run `code` in a fresh interpreter (fresh Vulkan instance); it prints one JSON line last."
    e = dict(os.environ, **(env or {}))
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                       timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# (the validation-message check is the autouse fixture in conftest.py)


# ---------------------------------------------------------------- devices
def test_devices_listing():
    import vkml.backends.vulkan as V
    infos = V.devices()
    assert infos and [d.index for d in infos] == list(range(len(infos)))
    d = infos[0]
    assert d.name and d.type in ("discrete", "integrated", "virtual", "cpu", "other")
    assert d.limits["maxPushConstantsSize"] >= 128 and d.limits["maxStorageBufferRange"] > 0
    assert len(d.limits["maxComputeWorkGroupCount"]) == 3 and d.limits["maxComputeSharedMemorySize"] >= 16384
    for k in ("f16", "i64", "storage8", "storage16", "push_descriptor", "cooperative_matrix", "timestamps"):
        assert isinstance(d.features[k], bool)
    assert d.subgroup_size >= 1 and d.api_version.count(".") == 2 and d.driver
    assert d.name in d.summary()


def _fake_infos():
    from vkml.backends.vulkan.device import DeviceInfo
    mk = lambda i, name, t: DeviceInfo(i, name, t, "drv", "1.3.0", {}, {}, 32, {})
    return [mk(0, "llvmpipe", "cpu"), mk(1, "Some iGPU", "integrated"), mk(2, "NVIDIA H200", "discrete"), mk(3, "virt", "virtual")]


def test_default_choice_prefers_discrete(monkeypatch):
    from vkml.backends.vulkan import device as D
    monkeypatch.setattr(D, "_infos", _fake_infos())
    monkeypatch.delenv("VKML_DEVICE", raising=False)
    assert D.default_index() == 2
    monkeypatch.setattr(D, "_infos", [d for d in _fake_infos() if d.type != "discrete"])
    assert D.default_index() == 1          # integrated before virtual and cpu
    monkeypatch.setattr(D, "_infos", [_fake_infos()[0], _fake_infos()[3]])
    assert D.default_index() == 3          # virtual before cpu


def test_vkml_device_override(monkeypatch):
    from vkml.backends.vulkan import device as D
    monkeypatch.setattr(D, "_infos", _fake_infos())
    monkeypatch.setenv("VKML_DEVICE", "0"); assert D.default_index() == 0
    monkeypatch.setenv("VKML_DEVICE", "h200"); assert D.default_index() == 2
    monkeypatch.setenv("VKML_DEVICE", "LLVM"); assert D.default_index() == 0
    monkeypatch.setenv("VKML_DEVICE", "radeon")
    with pytest.raises(DeviceError, match="vulkan:2 = NVIDIA H200"): D.default_index()
    monkeypatch.setenv("VKML_DEVICE", "9")
    with pytest.raises(DeviceError, match="matches no Vulkan device"): D.default_index()


def test_device_names():
    from vkml.frontend.tensor import canonical_device
    import vkml.backends.vulkan as V
    assert canonical_device("vulkan:0") == "vulkan:0"
    assert canonical_device("vulkan") == f"vulkan:{V.default_index()}"
    with pytest.raises(DeviceError, match=r"no device 'vulkan:99'.*vulkan:0 = "): canonical_device("vulkan:99")
    with pytest.raises(DeviceError): canonical_device("vulkan:x")


def test_missing_loader_is_a_typed_error(monkeypatch):
    from vkml.backends.vulkan import device as D
    monkeypatch.setattr(D, "_vk", None)
    monkeypatch.setitem(sys.modules, "vulkan", None)        # `import vulkan` now raises ImportError
    with pytest.raises(VulkanUnavailableError, match="libvulkan1 mesa-vulkan-drivers"): D.vk_module()


def test_no_driver_is_a_typed_error():
    out = run_script("""
        import json, vkml.backends.vulkan as V
        try: V.devices(); print(json.dumps("no error"))
        except Exception as e: print(json.dumps(f"{type(e).__name__}: {e}"))
        """, env=dict(VK_ICD_FILENAMES="/nonexistent.json", VK_DRIVER_FILES="/nonexistent.json"))
    assert out.startswith("VulkanUnavailableError") and "mesa-vulkan-drivers" in out


def test_import_vkml_needs_no_vulkan():
    out = run_script("""
        import sys, json
        sys.modules["vulkan"] = None          # as if the package or the loader were missing
        import vkml, vkml.backends.vulkan
        from vkml.backends.vulkan import kernel_api
        try: vkml.tensor([1.0], device="vulkan"); r = "no error"
        except Exception as e: r = type(e).__name__
        print(json.dumps(r))
        """)
    assert out == "VulkanUnavailableError"


def test_feature_error_for_missing_dtype_support(V, monkeypatch):
    import vkml
    from vkml.backends.vulkan.device import get_device
    dev = get_device()
    monkeypatch.setitem(dev.info.features, "f16", False)
    a = vkml.tensor(np.ones(4, np.float16), device="vulkan")
    from vkml.frontend.tensor import apply
    with pytest.raises(FeatureError, match="shaderFloat16"): apply(Op.ADD, a, a).realize()


# ---------------------------------------------------------------- allocator
def test_suballocation_few_vkallocatememory(V):
    from vkml.backends.vulkan.memory import memory
    m = memory()
    gc.collect(); m.dev.wait(); m.tensors.collect()      # settle earlier tests' frees first
    before = V.memory_stats()
    ts = [vt(np.full(100, i)) for i in range(500)]
    after = V.memory_stats()
    assert after["allocations"] - before["allocations"] <= 1       # 500 tensors, at most one new block
    assert after["bytes_in_use"] - before["bytes_in_use"] == 500 * 512   # 400 bytes each, aligned to 256
    offs = {(t.node.buf.alloc.block.id, t.node.buf.alloc.offset) for t in ts}
    assert len(offs) == 500 and all(o % m.tensors.align == 0 for _, o in offs)
    assert [float(t.numpy()[0]) for t in ts[:5]] == [0, 1, 2, 3, 4]


def test_reuse_and_baseline_after_drop(V):
    add(vt(np.arange(1000)), vt(np.arange(1000))).numpy()   # warm up: a GPU's readback pool takes its first block
    gc.collect()
    base = V.memory_stats()
    a = vt(np.arange(1000))
    c = add(a, a); c.realize()
    key = (c.node.buf.alloc.block.id, c.node.buf.alloc.offset)
    assert V.memory_stats()["bytes_in_use"] > base["bytes_in_use"]
    np.testing.assert_array_equal(c.numpy(), 2 * np.arange(1000))
    del a, c; gc.collect()
    s = V.memory_stats()
    assert s["bytes_in_use"] == base["bytes_in_use"]
    assert s["allocations"] == base["allocations"]
    b = vt(np.zeros(1000)); d = vt(np.zeros(1000))
    assert key in {(t.node.buf.alloc.block.id, t.node.buf.alloc.offset) for t in (b, d)}   # the freed range came back


def test_free_ranges_coalesce():
    from vkml.backends.vulkan.memory import memory
    p = memory().tensors
    p.collect()
    allocs = [p.alloc(1000) for _ in range(3)]
    blk = allocs[0].block
    assert all(a.block is blk for a in allocs)
    del allocs[1]; p.collect()
    del allocs[0]; p.collect()
    del allocs; p.collect()
    # every free range of the block merged back: the block's whole free space is one range
    free = sorted((off, size) for (bid, off), size in p.starts.items() if bid == blk.id)
    ends = [o + s for o, s in free]
    assert all(e < o2 for e, (o2, _) in zip(ends, free[1:]))   # no two free ranges touch


def test_a_range_in_flight_goes_back_to_the_gpu_at_once_and_to_the_host_after_the_fence():
    """Every submission starts with a barrier on the work submitted before it, so a range dropped while a submission
    may still read it can be written by the next one's kernels (it is no longer in use), but not by the host."""
    from vkml.backends.vulkan.device import get_device
    from vkml.backends.vulkan.memory import Pool
    dev = get_device(); p = Pool(dev, "device", block_size=1 << 20)    # a pool of its own
    try:
        a = p.alloc(4096); where = (a.block.id, a.offset)
        serial = a.use[0] = dev.submitted + 1      # as if the next submission used it
        del a; gc.collect(); p.collect()
        assert p.in_use == 0 and where in p.later.starts                 # on the later list, not in use
        h = p.alloc(4096, host=True)               # the host writes first: other bytes
        g = p.alloc(4096)                          # a kernel writes first: these, after that submission
        assert (h.block.id, h.offset) != where and (g.block.id, g.offset) == where and g.use[0] == serial
        del g; gc.collect(); p.collect()
        assert where in p.later.starts
        s = dev.submit(dev.command_buffer()); dev.wait(s)
        p.collect()
        assert not p.later and p.in_use == 4096    # (h) the rest back on the free list
        del h; gc.collect(); p.collect()
        assert p.in_use == 0 and len(p.free) == 1  # one free range: the whole block
    finally:
        p.close()


def test_out_of_memory_is_typed(V):
    from vkml.backends.vulkan.memory import memory
    with pytest.raises(OutOfMemoryError, match=r"cannot allocate 1,125,899,906,842,624 bytes.*in use"):
        memory().tensors.alloc(1 << 50)
    with pytest.raises(OutOfMemoryError, match="float32 tensor|bytes"):
        vt(np.zeros(1)).node.buf.alloc.pool.alloc(1 << 45)
    np.testing.assert_array_equal(vt([1, 2]).numpy(), [1, 2])   # still usable afterwards


def test_big_tensors_get_their_own_block():
    from vkml.backends.vulkan.memory import memory, BLOCK_SIZE
    p = memory().tensors
    a = p.alloc(BLOCK_SIZE + 12345)
    assert a.block.size >= BLOCK_SIZE + 12345 and a.offset == 0


# ---------------------------------------------------------------- the barrier planner (pure)
from vkml.backends.vulkan.recorder import plan_barriers, BarrierPlanner
A, B, C = ("A", 0, 256), ("B", 0, 256), ("C", 0, 256)


def test_planner_raw():
    assert plan_barriers([("compute", [A], [B]), ("compute", [B], [C])]) == [(1, "RAW", frozenset({"compute"}), "compute")]


def test_planner_war():
    assert plan_barriers([("compute", [A], [B]), ("compute", [C], [A])]) == [(1, "WAR", frozenset({"compute"}), "compute")]


def test_planner_waw():
    assert plan_barriers([("compute", [], [A]), ("compute", [], [("A", 128, 512)])])[0][:2] == (1, "WAW")


def test_planner_no_hazard():
    # read after read, disjoint ranges of one buffer, and different buffers need nothing
    assert plan_barriers([("compute", [A], [B]), ("compute", [A], [C]), ("compute", [A], [("B", 256, 512)])]) == []
    assert plan_barriers([("compute", [], [("A", 0, 256)]), ("compute", [("A", 256, 300)], [])]) == []


def test_planner_barrier_clears_and_tracks_stages():
    steps = [("transfer", [("S", 0, 64)], [A]),  # upload
             ("compute", [A], [B]),               # RAW on the upload: wait for transfer
             ("compute", [A], [C]),               # independent of B: no barrier
             ("compute", [B, C], [A]),            # RAW on B, C (and WAR on A)
             ("transfer", [A], [("R", 0, 256)])]  # readback: wait for compute
    plan = plan_barriers(steps)
    assert plan == [(1, "RAW", frozenset({"transfer"}), "compute"), (3, "RAW", frozenset({"compute"}), "compute"),
                    (4, "RAW", frozenset({"compute"}), "transfer")]


def test_planner_chain_of_dependent_dispatches():
    steps = [("compute", [(f"t{i}", 0, 8)], [(f"t{i + 1}", 0, 8)]) for i in range(10)]
    assert [i for i, *_ in plan_barriers(steps)] == list(range(1, 10))


def _brute_plan(steps):
    "The planner's rule the slow way: compare each step with every range since the last barrier."
    hit = lambda xs, ys: any(k == k2 and lo < hi2 and lo2 < hi for k, lo, hi in xs for k2, lo2, hi2 in ys)
    out, written, read, stages = [], [], [], set()
    for i, (stage, r, w) in enumerate(steps):
        hz = "RAW" if hit(r, written) else "WAW" if hit(w, written) else "WAR" if hit(w, read) else None
        if hz: out.append((i, hz, frozenset(stages), stage)); written, read, stages = [], [], set()
        written += w; read += r; stages.add(stage)
    return out


def test_planner_matches_brute_force_on_random_steps():
    import random
    rng = random.Random(0)
    rnd = lambda: (rng.choice("AB"), *sorted(rng.sample(range(40), 2)))   # non-empty ranges, many overlaps
    for _ in range(2000):
        steps = [(rng.choice(["compute", "transfer"]), [rnd() for _ in range(rng.randint(0, 3))],
                  [rnd() for _ in range(rng.randint(0, 2))]) for _ in range(rng.randint(1, 12))]
        assert plan_barriers(steps) == _brute_plan(steps), steps


def test_planner_remembers_a_union_not_a_list():
    # 1000 independent dispatches writing neighbouring ranges: one interval is remembered, so a step
    # costs the same however many came before it (comparing with every range was O(steps^2))
    p = BarrierPlanner()
    for i in range(1000): assert p.step("compute", [("X", 0, 64)], [("A", 64 * i, 64 * i + 64)]) is None
    assert p.written.edges == {"A": [0, 64000]} and p.read.edges == {"X": [0, 64]}
    assert p.step("compute", [("A", 6400, 6464)], [("B", 0, 64)])[:2] == ("RAW", frozenset({"compute"}))


# ---------------------------------------------------------------- submissions
def test_one_realize_is_one_submission(V):
    a, b = vt(np.arange(8)), vt(np.ones(8))
    V.reset_stats()
    x = a
    for _ in range(20): x = add(x, b)
    y = add(x, a)
    from vkml.frontend.tensor import realize
    realize(x, y)
    s = V.stats()
    assert s["submissions"] == 1 and s["dispatches"] == 21 and s["waits"] == 0
    from vkml.backends.vulkan.memory import memory
    # every step reads the previous one's output (+ on a GPU, the barrier before copying x and y back)
    assert s["barriers"] == 20 + (0 if memory().direct_readback else 1)
    np.testing.assert_array_equal(y.numpy(), np.arange(8) * 2 + 20)
    # small results are read back by the submission that computes them (on a GPU: a copy it records)
    assert V.stats()["submissions"] == 1


def test_independent_dispatches_need_no_barrier(V):
    a, b = vt(np.arange(8)), vt(np.ones(8))
    V.reset_stats()
    from vkml.frontend.tensor import realize
    from vkml.frontend.tensor import get_backend
    outs = [add(a, b).node for _ in range(5)]
    from vkml.engine.schedule import Schedule
    s = Schedule(outs); s.readback = []                        # no readback copies: only the dispatches' hazards
    get_backend(outs[0].device).run(s)
    assert V.stats()["barriers"] == 0 and V.stats()["dispatches"] == 5


def test_missing_kernel_names_the_op_and_records_nothing(V):
    from vkml.frontend.tensor import apply
    a = vt(np.arange(6).reshape(2, 3))
    s = add(a, a)
    p = apply(Op.PROD, s, arg=((1,), False))
    V.reset_stats()
    with pytest.raises(BackendError, match=r"PROD.*\.to\('cpu'\)"): p.realize()
    assert V.stats()["submissions"] == 0 and V.stats()["dispatches"] == 0
    assert not s.node.realized


def test_error_while_recording_leaves_nothing_half_done(V):
    from vkml.backends.vulkan.kernel_api import vk_kernels
    a = vt(np.arange(4))
    x = add(a, a); y = add(x, a)
    calls = []
    def bad(node, out, *srcs):
        calls.append(1)
        if len(calls) == 2: raise RuntimeError("kernel bug")
        return _selftest_add(node, out, *srcs)
    vk_kernels[Op.SELFTEST_ADD] = bad
    V.reset_stats()
    with pytest.raises(RuntimeError, match="kernel bug"): y.realize()
    assert not x.node.realized and not y.node.realized and V.stats()["submissions"] == 0
    vk_kernels[Op.SELFTEST_ADD] = _selftest_add
    np.testing.assert_array_equal(y.numpy(), 3 * np.arange(4))


def test_views_cost_no_dispatch(V):
    from vkml.frontend.tensor import apply
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = vt(x)
    V.reset_stats()
    p = apply(Op.PERMUTE, a, arg=(2, 0, 1))
    s = apply(Op.SLICE, p, arg=((3, -1, -1), (0, 2, 1), (1, 3, 1)))
    r = apply(Op.RESHAPE, a, shape=(6, 4), dtype=float32)
    np.testing.assert_array_equal(p.numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(s.numpy(), x.transpose(2, 0, 1)[3::-1, 0:2, 1:3])
    np.testing.assert_array_equal(r.numpy(), x.reshape(6, 4))
    from vkml.backends.vulkan.memory import memory
    assert V.stats()["dispatches"] == 0
    assert V.stats()["submissions"] == (0 if memory().direct_readback else 3)   # discrete GPUs: readback copies only


def test_scratch_between_two_dispatches(V):
    from vkml.backends.vulkan.kernel_api import Dispatch, Scratch, groups_1d, vk_kernels
    def two_pass(node, out, a, b):     # out = (a + b) + b through a scratch buffer
        n = out.view.numel
        sc = Scratch(4 * n)
        return [Dispatch("_selftest_add", (sc, a, b), (n, a.view.offset, b.view.offset), groups_1d(n)),
                Dispatch("_selftest_add", (out, sc, b), (n, 0, b.view.offset), groups_1d(n))]
    vk_kernels[Op.SELFTEST_ADD] = two_pass
    a, b = vt(np.arange(300)), vt(np.full(300, 2))
    V.reset_stats()
    c = add(a, b); c.realize()
    from vkml.backends.vulkan.memory import memory
    assert V.stats()["barriers"] == 1 + (0 if memory().direct_readback else 1)   # + the readback's on a GPU
    np.testing.assert_array_equal(c.numpy(), np.arange(300) + 4)


def test_staging_and_readback_paths(V):
    "The paths a discrete GPU takes (uploads through staging + copy; readback through host-cached memory), forced on lavapipe."
    from vkml.backends.vulkan.memory import memory
    from vkml.frontend.tensor import apply
    m = memory()
    saved = m.direct_upload, m.direct_readback
    m.direct_upload = m.direct_readback = False
    try:
        V.reset_stats()
        n = 20_000                                                # 80 KB: above READBACK_BYTES
        x = np.arange(n, dtype=np.float32)
        a, b = vt(x), vt(np.ones(n))
        assert V.stats()["submissions"] == 0                      # uploads wait for the next submission
        np.testing.assert_array_equal(a.numpy(), x)               # read from the host copy: nothing submitted
        c = add(a, b); c.realize()
        assert V.stats()["submissions"] == 1
        np.testing.assert_array_equal(c.numpy(), x + 1)           # a readback copy: one more submission
        assert V.stats()["submissions"] == 2 and V.stats()["bytes_uploaded"] == 2 * 4 * n
        small = add(a[:10], b[:10]); small.realize()              # small results come back with their submission
        np.testing.assert_array_equal(small.numpy(), x[:10] + 1)
        assert V.stats()["submissions"] == 3
        p = apply(Op.SLICE, apply(Op.RESHAPE, c, shape=(100, 200), dtype=float32), arg=((99, -1, -3), (10, 190, 7)))
        np.testing.assert_array_equal(p.numpy(), (x + 1).reshape(100, 200)[99::-3, 10:190:7])
        # a readback recorded with the realize that computes it: still one submission
        d = add(c, b)
        V.reset_stats()
        from vkml.frontend.tensor import get_backend
        from vkml.engine.schedule import Schedule
        get_backend(d.device).run(Schedule([d.node], read=True))
        np.testing.assert_array_equal(d.numpy(), x + 2)
        assert V.stats()["submissions"] == 1
    finally:
        m.direct_upload, m.direct_readback = saved


def test_profile_times_each_kernel(V):
    a = vt(np.arange(1000))
    with V.profile() as prof:
        x = a
        for _ in range(3): x = add(x, a)
        x.realize()
    assert prof["_selftest_add"]["count"] == 3 and prof["_selftest_add"]["total_us"] > 0


# ---------------------------------------------------------------- close
def test_close_kills_live_tensors_and_reopens(V):
    import vkml.backends.vulkan.device as D
    a = vt(np.arange(4))
    b = add(a, a); b.realize()
    V.close()
    with pytest.raises(DeviceError, match="was closed"): b.numpy()
    with pytest.raises(DeviceError, match="was closed"): add(b, b).realize()
    del a, b; gc.collect()
    c = vt(np.arange(3))                               # a fresh device
    np.testing.assert_array_equal(add(c, c).numpy(), [0, 2, 4])
    from vkml.backends.vulkan.memory import memory
    assert V.memory_stats()["allocations"] == (1 if memory().direct_readback else 2)   # + a readback block


# ---------------------------------------------------------------- the pipeline cache
CACHE_SCRIPT = """
import json, numpy as np, vkml, vkml.backends.vulkan as V
from vkml.core.ops import Op
from vkml.frontend.tensor import apply
from vkml.backends.vulkan.kernel_api import vk_kernels, Dispatch, groups_1d
from vkml.backends.vulkan.pipelines import pipeline_cache_path
import sys; sys.path.insert(0, {tests!r}); import selftest
op = selftest.define(open({spv!r}, "rb").read())
a = vkml.tensor(np.arange(5, dtype=np.float32), device="vulkan")
r = apply(op, a, a).numpy().tolist()
import warnings
path = str(pipeline_cache_path(V.devices()[0]))
V.close()
print(json.dumps(dict(r=r, path=path, msgs=V.validation_messages())))
"""


def test_pipeline_cache_written_and_corrupt_file_discarded(selftest_spv, tmp_path):
    env = dict(VKML_PIPELINE_CACHE=str(tmp_path / "cache"))
    out = run_script(CACHE_SCRIPT.format(spv=str(selftest_spv), tests=str(Path(__file__).parent)), env)
    assert out["r"] == [0, 2, 4, 6, 8]
    p = Path(out["path"])
    assert p.parent == tmp_path / "cache" and p.exists() and p.stat().st_size >= 32
    import struct
    from vkml.backends.vulkan.device import devices
    info = devices()[0]
    size, version, vendor, dev = struct.unpack_from("<4I", p.read_bytes())
    assert (version, vendor, dev) == (1, info.vendor_id, info.device_id) and p.read_bytes()[16:32] == info.pipeline_cache_uuid
    p.write_bytes(b"this is not a pipeline cache" * 10)            # corrupt: ignored, then replaced
    out = run_script(CACHE_SCRIPT.format(spv=str(selftest_spv), tests=str(Path(__file__).parent)), env)
    assert out["r"] == [0, 2, 4, 6, 8]
    assert p.read_bytes()[4:8] == b"\x01\x00\x00\x00"
    assert not list(p.parent.glob(".pipelines-*"))                 # no temporary files left behind


# ---------------------------------------------------------------- the validation layer
VALIDATION_SCRIPT = """
import json, gc, numpy as np, vkml, vkml.backends.vulkan as V
from vkml.core.ops import Op
from vkml.frontend.tensor import apply
from vkml.backends.vulkan.kernel_api import vk_kernels, Dispatch, groups_1d
from vkml.backends.vulkan import recorder as Dsp, memory as M, device as D
import sys; sys.path.insert(0, {tests!r}); import selftest
op = selftest.define(open({spv!r}, "rb").read())
mode = {mode!r}
dev = D.get_device()
msgs = []
if mode in ("clean", "missing_barrier"):
    m = M.memory(dev)
    m.direct_upload = m.direct_readback = False     # uploads by a copy command, readbacks by a copy
    barrier = Dsp.Recorder._barrier
    if mode == "missing_barrier": Dsp.Recorder._barrier = lambda self, b: None   # the bug the layer must catch
    a = vkml.tensor(np.arange(1000, dtype=np.float32), device="vulkan")
    b = apply(op, a, a)
    c = apply(op, b, a)
    r = c.numpy().tolist()
    ok = r == (np.arange(1000) * 3).tolist()
    Dsp.Recorder._barrier = barrier
    del a, b, c; gc.collect()
elif mode == "leak":
    vk = dev.vk
    buf = vk.vkCreateBuffer(dev.handle, vk.VkBufferCreateInfo(size=1024, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), None)
    ok = True
V.close()
print(json.dumps(dict(ok=ok, msgs=V.validation_messages())))
"""


def _has_validation_layer() -> bool:
    from vkml.backends.vulkan.device import vk_module
    vk = vk_module()
    return any(l.layerName == "VK_LAYER_KHRONOS_validation" for l in vk.vkEnumerateInstanceLayerProperties())


def _validate(spv, mode):
    if not _has_validation_layer(): pytest.skip("the Khronos validation layer is not installed (vulkan-validationlayers)")
    return run_script(VALIDATION_SCRIPT.format(spv=str(spv), mode=mode, tests=str(Path(__file__).parent)),
                      dict(VKML_VALIDATION="1", VKML_VALIDATION_LOG=""))   # planted messages: not the suite's failures


def test_validation_clean_run_reports_nothing(selftest_spv):
    out = _validate(selftest_spv, "clean")
    assert out["ok"] and out["msgs"] == []


def test_validation_catches_a_planted_missing_barrier(selftest_spv):
    out = _validate(selftest_spv, "missing_barrier")
    assert any("SYNC-HAZARD" in m for m in out["msgs"]), out["msgs"]


def test_validation_catches_a_planted_leak(selftest_spv):
    out = _validate(selftest_spv, "leak")
    assert any("vkDestroyDevice" in m and "VK_OBJECT_TYPE_BUFFER" in m for m in out["msgs"]), out["msgs"]


def test_without_a_compiler_python_numbers_run_from_prebuilt_kernels(monkeypatch, tmp_path):
    "No glslc and a cold kernel cache: `x + 1.0`, `2.0 * x`, `x > 0` and masked_fill read the number as a parameter of a prebuilt kernel."
    import vkml
    from vkml.backends.vulkan import codegen
    monkeypatch.setenv("VKML_GLSLC", "off")
    monkeypatch.setenv("VKML_KERNEL_CACHE", str(tmp_path))       # nothing compiled earlier can help
    monkeypatch.setattr(codegen, "_spirv", {})
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    for d in ("cpu", "vulkan"):
        x = vkml.tensor(a, device=d)
        got = [(x + 1.0).numpy(), (2.0 * x).numpy(), (x > 0).numpy(), x.masked_fill(x > 0, 0.5).numpy(),
               vkml.where(x > 0, x, 0.0).numpy()]
        if d == "cpu": want = got
    for g, w in zip(got, want): np.testing.assert_array_equal(g, w)
    assert not list(tmp_path.iterdir())                              # every kernel was prebuilt


def test_without_a_compiler_schedules_run_unfused_and_stats_say_so(monkeypatch):
    "No glslc: every elementwise op runs its own prebuilt kernel, the results are the same, stats() says why."
    import vkml
    import vkml.backends.vulkan as V
    x = vkml.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4), device="vulkan")
    want = ((x * 2.0).exp() + 1.0).sum(1).numpy()
    assert V.stats()["fusion"] == "on"
    monkeypatch.setenv("VKML_GLSLC", "off")
    assert V.stats()["fusion"].startswith("off: VKML_GLSLC=off")
    V.reset_stats()
    got = ((x * 2.0).exp() + 1.0).sum(1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert V.stats()["dispatches"] >= 4          # multiply, exp, add and sum: one kernel each


def test_a_read_back_result_is_freed_without_the_cyclic_collector():
    "Regression: a readback's getter held its tensor, in the tensor's own `fetch`: a cycle, freed only by a gc run."
    import gc
    import vkml
    from vkml.backends.vulkan.memory import memory_stats
    x = vkml.tensor(np.ones(8, np.float32), device="vulkan")
    gc.collect()
    gc.disable()
    try:
        before = memory_stats()["buffers"]
        for _ in range(20):
            y = (x * 2.0).sum()
            y.realize()
            assert y.item() == 16.0
            del y
        assert memory_stats()["buffers"] == before
    finally:
        gc.enable()


def test_the_memory_model_comes_with_its_device_scope():
    """Tensor cores turn on the Vulkan memory model; every shader's device-scope atomics then need its device scope
    (VUID-RuntimeSpirv-vulkanMemoryModel-06265, reported by the validation layer on the H200)."""
    from vkml.backends.vulkan.device import device_features, vk_module
    vk = vk_module()
    f = dict(storage16=True, f16=True, int8=True, i64=True, f64=True, coopmat_f16=True)
    feats, exts, owners = device_features(vk, f)
    f12 = vk.ffi.cast("VkPhysicalDeviceVulkan12Features*", feats.pNext)
    assert "VK_KHR_cooperative_matrix" in exts
    assert f12.vulkanMemoryModel and f12.vulkanMemoryModelDeviceScope


def test_coopmat_off_keeps_the_extension_off(monkeypatch):
    "VKML_COOPMAT=off: the device is created without VK_KHR_cooperative_matrix (a validation layer older than the extension rejects it)."
    from vkml.backends.vulkan.device import _coopmat_f16, vk_module
    monkeypatch.setenv("VKML_COOPMAT", "off")
    assert _coopmat_f16(vk_module(), None, {"VK_KHR_cooperative_matrix"}, 32, True) is False


def test_generated_kernels_read_their_arguments_from_a_uniform_buffer():
    """Binding 0 of a generated kernel is a uniform buffer of argument words (ADR 0038: lavapipe loads a uniform word
    once, a storage word lane by lane), its other bindings storage buffers; a launch needing more words than one
    chunk is refused, not written past it."""
    import vkml
    import vkml.backends.vulkan as vkv
    from vkml.backends.vulkan.recorder import Recorder, runtime
    from vkml.backends.vulkan.kernel_api import ARGS_BYTES
    x = vkml.tensor(np.arange(8, dtype=np.float32), device="vulkan")
    with vkv.profile() as prof: assert np.allclose((x * 2 + 1).exp().numpy(), np.exp(np.arange(8) * 2 + 1), rtol=1e-5)
    name = next(n for n in prof if n.startswith("gen_"))
    rt = runtime(vkv.get_device())
    vk = rt.dev.vk
    pipe = next(p for (nm, _), p in rt.pipelines.pipes.items() if nm == name)
    kinds = [pipe.writes[i].descriptorType for i in range(pipe.nb)]
    assert kinds[0] == vk.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER and set(kinds[1:]) == {vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER}, kinds
    rec = Recorder(rt)
    try:
        with pytest.raises(BackendError, match="argument words"): rec.write_args([0] * (ARGS_BYTES // 4 + 1))
    finally: rec.abort()
