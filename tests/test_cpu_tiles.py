"""The matrix-product tiles a CPU device (lavapipe) chooses for itself (kernels_nn.cpu_untiled, TILE_POLICY "auto"):
the untiled kernel for every product, and the weight gradient of a convolution as one product
per image summed in order. The rest of the suite runs the GPU's choices on lavapipe (conftest sets
VKML_TILE_POLICY=gpu); here the CPU's own path runs against the CPU oracle, and the profile shows it was taken."""
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
import vkml.backends.vulkan as vkv
import vkml.backends.vulkan.kernels_nn as kn
import vkml.backends.vulkan.kernel_api as kapi
import vkml.backends.vulkan.kernels as kred
from vkml.frontend.tensor import apply
from vkml.core.ops import Op
from test_parity_nn import both, check_sum, rnd, RNG
import oracle

pytestmark = pytest.mark.vulkan
SFX = {np.float32: "f32", np.float16: "f16", np.float64: "f64"}


@pytest.fixture
def cpu_policy(monkeypatch):
    "A CPU device under its own policy. On a GPU these tests skip (its own kernels run there); CI's device is lavapipe."
    if vkv.devices()[vkv.default_index()].type != "cpu": pytest.skip("the CPU device's kernels: run on lavapipe")
    monkeypatch.setattr(kapi, "TILE_POLICY", "auto")


def test_every_product_stays_untiled_on_a_cpu_device(monkeypatch):
    "On lavapipe every product takes the untiled kernel (no tile was faster at any size measured); a GPU keeps its tile."
    monkeypatch.setattr(kapi, "TILE_POLICY", "auto")
    for M, N, B, K in [(32, 128, 1, 10), (144, 16, 32, 32), (512, 512, 1, 512), (4096, 4096, 1, 4096)]:
        assert kn.variant_for(vkml.float32, M, N, B, K, "cpu") == "matmul_small"
    assert kn.variant_for(vkml.float32, 512, 512, 1, 512, "discrete") != "matmul_small"   # a GPU keeps its tile
    monkeypatch.setattr(kapi, "TILE_POLICY", "gpu")
    assert kn.variant_for(vkml.float32, 32, 128, 1, 10, "cpu") == "matmul32x64"   # the suite's policy: the GPU's choice


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_products_on_the_cpu_policy(cpu_policy, dtype):
    mm = lambda a, b: apply(Op.MATMUL, a, b)
    for B, M, K, N, block in [(1, 32, 10, 128, "matmul_small_cpu"), (32, 144, 32, 16, "matmul_small_cpu16"),
                              (2, 70, 300, 67, "matmul_small_cpu16")]:   # 16 x 16 blocks from 32 of them: 16, 288, 50
        with vkv.profile() as prof:
            check_sum(mm, [rnd(B, M, K, dtype=dtype), rnd(B, K, N, dtype=dtype)], K)
        assert set(n.rsplit("_", 1)[0] for n in prof if n.startswith("matmul")) == {block}, sorted(prof)


@pytest.mark.parametrize("block", ["matmul_small_cpu", "matmul_small_cpu16"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_small_products_take_the_cpu_block(cpu_policy, dtype, block, monkeypatch):
    """On a CPU device the untiled kernel owns an 8 x 16 block per thread (16 x 16 where there are enough of them: forced
    here) in workgroups of one 8-lane vector (lavapipe's time goes with the words each lane loads): ragged edges,
    transposed operands and K split past lavapipe's loop budget agree with the oracle."""
    monkeypatch.setattr(kn, "SMALL_CPU_BIG_MIN", 0 if block.endswith("16") else 10**9)
    mm = lambda a, b: apply(Op.MATMUL, a, b)
    mm_t = lambda a, b: apply(Op.MATMUL, a.transpose(-1, -2), b.transpose(-1, -2))
    with vkv.profile() as prof:
        check_sum(mm, [rnd(3, 9, 5, dtype=dtype), rnd(3, 5, 17, dtype=dtype)], 5)              # ragged: 9 x 17
        check_sum(mm, [rnd(2, 1, 7, dtype=dtype), rnd(2, 7, 1, dtype=dtype)], 7)               # 1 x 1
        check_sum(mm_t, [rnd(2, 11, 8, dtype=dtype), rnd(2, 33, 11, dtype=dtype)], 11)         # both transposed
    assert f"{block}_" + SFX[dtype] in prof and "matmul_small_" + SFX[dtype] not in prof, sorted(prof)
    with vkv.profile() as prof:
        check_sum(mm, [rnd(1, 3, 70_000, dtype=dtype), rnd(1, 70_000, 5, dtype=dtype)], 70_000)   # K past the budget
    assert any(n.startswith(f"{block}_") for n in prof) and any(n.startswith("reduce") for n in prof), sorted(prof)
    if dtype is np.float16:   # a strided transposed convolution's columns: f16 operands, an f32 result
        ct = lambda x, w: F.conv_transpose2d(x, w, stride=2)
        with vkv.profile() as prof: check_sum(ct, [rnd(2, 8, 5, 4, dtype=dtype), rnd(8, 3, 3, 3, dtype=dtype)], 8 * 9)
        assert f"{block}_f16_f32" in prof, sorted(prof)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_conv_weight_gradient_by_images(cpu_policy, dtype, monkeypatch):
    """The products of every image, g_n (O x L) times its windows, summed: in one untiled dispatch whose threads walk
    the images (C's image stride 0), or, where a thread's loop would pass lavapipe's budget, into slabs summed in
    order. Stride, padding, dilation, a strided g; both forms agree with the oracle."""
    wg = lambda arg: (lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=arg))
    cases = [((2, 8, 7, 6), (4, 7, 6), ((3, 3), (1, 1), (1, 1), (1, 1), 1)),
             ((3, 6, 4, 5), (4, 9, 6), ((2, 3), (2, 1), (1, 1), (1, 1), 1)),
             ((1, 5, 3, 3), (3, 9, 9), ((2, 2), (1, 1), (0, 0), (3, 2), 1))]
    run = lambda case: check_sum(wg(case[2]), [rnd(*case[0], dtype=dtype), rnd(case[0][0], *case[1], dtype=dtype)],
                                 case[0][0] * case[0][2] * case[0][3])
    for case in cases:
        with vkv.profile() as prof: run(case)
        assert not any(n.startswith(("wgrad", "reduce")) for n in prof) and any(n.startswith("im2col") for n in prof), sorted(prof)
        assert f"matmul_small_cpu_{SFX[dtype]}" in prof, sorted(prof)   # one dispatch: the images summed in its threads
    monkeypatch.setattr(kn, "LOOP_BUDGET", 50)   # N x L terms past a thread's budget (L is not): slabs, then their sum
    for case in cases[:2]:
        with vkv.profile() as prof: run(case)
        # the slabs are summed by a thread per output, not by the cols kernel's barrier-bound workgroups
        assert f"reduce_slabs_{SFX[dtype]}" in prof and not any(n.startswith("reduce_cols") for n in prof), sorted(prof)
    monkeypatch.undo()
    monkeypatch.setattr(kapi, "TILE_POLICY", "gpu")   # the test can tell: the GPU's path is the tiled kernel
    with vkv.profile() as prof: run(cases[0])
    assert any(n.startswith("wgrad") for n in prof), sorted(prof)


def test_a_summed_product_needs_the_untiled_kernel():
    "C's stride 0 across b1 sums the products only in the untiled kernel: a tile would race on C, so it is refused."
    from vkml.core.dtypes import BackendError, float32
    with pytest.raises(BackendError, match="summed over 4 batches"):
        kn.matmul_dispatch(float32, None, None, None, 512, 512, 64, 4, 1, (0, 64 * 512, 0, 64, 1), (0, 64 * 512, 0, 512, 1),
                           (0, 0, 0, 512, 1))


REDUCE = {"sum": Op.SUM, "mean": Op.MEAN, "max": Op.MAX, "min": Op.MIN}


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int64])
def test_reductions_on_the_cpu_policy(cpu_policy, dtype, monkeypatch):
    """On a CPU device a row goes to one thread (reduce_<dt>), where a GPU gives it a workgroup: a convolution's bias
    gradient, a linear layer's, a loss over a row; rows past a thread's loop budget, and long rows with fewer outputs
    than a vector's 8 lanes, keep the GPU's plan. Every op agrees with the oracle either way."""
    sfx = SFX.get(dtype) or {np.int32: "i32", np.int64: "i64"}[dtype]
    mk = lambda *shape: rnd(*shape).astype(dtype) if np.dtype(dtype).kind == "f" else RNG.integers(-9, 9, shape).astype(dtype)
    cases = [((32, 16, 8, 8), (0, 2, 3)), ((32, 10), (0,)), ((16, 2048), (1,)), ((1, 320), (1,)), ((5, 3000), (1,))]
    for shape, axes in cases:
        x = mk(*shape)
        for name, op in REDUCE.items():
            if name == "mean" and np.dtype(dtype).kind != "f": continue
            with vkv.profile() as prof:
                check_sum(lambda t, op=op: apply(op, t, arg=(axes, False)), [x], int(np.prod([shape[a] for a in axes])))
            assert set(prof) == {f"reduce_{sfx}"}, (shape, axes, sorted(prof))
    with vkv.profile() as prof: check_sum(lambda t: apply(Op.SUM, t, arg=((1,), False)), [mk(2, 9000)], 9000)
    assert f"reduce_{sfx}" not in prof, sorted(prof)   # two long rows: a vector's lanes mostly empty, so workgroups
    monkeypatch.setattr(kred, "CPU_SERIAL_MAX_K", 1000)   # rows past a thread's budget: the GPU's plan
    monkeypatch.setattr(kred, "_plans", {})               # (plans are cached by layout)
    with vkv.profile() as prof: check_sum(lambda t: apply(Op.SUM, t, arg=((1,), False)), [mk(16, 2048)], 2048)
    assert f"reduce_{sfx}" not in prof and any(n.startswith("reduce_") for n in prof), sorted(prof)


def test_grouped_weight_gradient_keeps_the_tiled_kernel(cpu_policy):
    wg = lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=((3, 3), (1, 1), (1, 1), (1, 1), 2))
    with vkv.profile() as prof: check_sum(wg, [rnd(3, 4, 9, 8), rnd(3, 6, 9, 8)], 3 * 72)
    assert any(n.startswith("wgrad") for n in prof), sorted(prof)


def test_a_training_step_agrees_on_both_policies(monkeypatch):
    "The digits CNN's loss and gradients on lavapipe's own tiles equal the GPU's tiles' within the parity bounds."
    import vkml.demo
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((32, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, 32)
    out = {}
    for policy in ("gpu", "auto"):
        monkeypatch.setattr(kapi, "TILE_POLICY", policy)
        vkml.manual_seed(0)
        model = vkml.demo.build_model("cnn").to("vulkan")
        loss = F.cross_entropy(model(vkml.tensor(x, device="vulkan")), vkml.tensor(y, device="vulkan"))
        loss.backward()
        out[policy] = [loss.item()] + [p.grad.numpy() for p in model.parameters()]
    for a, b in zip(out["gpu"], out["auto"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_im2col_by_rows(cpu_policy, dtype, monkeypatch):
    """On a CPU device im2col runs a thread per row (n, c, i, j), which finds its row once and walks its pixels: stride,
    padding, dilation, a strided input; it agrees with the oracle, and with the GPU's thread per element."""
    cases = [((2, 3, 7, 6), ((3, 3), (1, 1), (1, 1), (1, 1))),
             ((3, 2, 9, 8), ((2, 3), (2, 1), (0, 2), (2, 1))),
             ((1, 4, 5, 5), ((1, 1), (1, 1), (0, 0), (1, 1)))]
    for shape, (k, d, p, s) in cases:
        unf = lambda x, k=k, d=d, p=p, s=s: apply(Op.IM2COL, x[:, :, ::1, 1:], arg=(k, d, p, s))   # (a strided view)
        x = rnd(*shape[:3], shape[3] + 1, dtype=dtype)
        with vkv.profile() as prof: check_sum(unf, [x], 1)
        assert f"im2col_rows_{SFX[dtype]}" in prof, sorted(prof)
    monkeypatch.setattr(kn, "IM2COL_ROWS_MAX", 0)   # rows too long for one thread: a thread per element
    with vkv.profile() as prof: check_sum(unf, [x], 1)
    assert not any(n.startswith("im2col_rows") for n in prof) and any(n.startswith("im2col") for n in prof), sorted(prof)


def test_row_kernels_on_the_cpu_policy(cpu_policy, monkeypatch):
    """On a CPU device a short row's fused kernel (softmax, a loss, a norm) runs in a workgroup of one 8-lane vector:
    one fibre, whose fold reads 8 partials from shared memory instead of 32. The forms, and the kernels' results against
    the oracle, on rows shorter and longer than the vector's share."""
    from vkml.backends.vulkan import codegen
    assert codegen.row_form(10, "cpu") == "row8x2" and codegen.row_form(10, "discrete") == "row32x1"
    assert codegen.row_form(300, "cpu") == "row16x32"       # longer rows: more threads, as on a GPU
    cases = [(lambda x: F.softmax(x, dim=-1), (32, 10)), (lambda x: F.log_softmax(x, dim=-1), (7, 300)),
             (lambda x: F.layer_norm(x, (48,)), (16, 48)), (lambda x: F.layer_norm(x, (5,)), (3, 5))]
    y = RNG.integers(0, 10, 32)
    cases.append((lambda x: F.cross_entropy(x, vkml.tensor(y, device=x.device)), (32, 10)))
    for build, shape in cases:
        with vkv.profile() as prof: cpu, vk = both(build, rnd(*shape))
        oracle.assert_close(vk, cpu, k=shape[-1], what=f"{shape}")
        assert any(n.startswith("gen_") for n in prof), sorted(prof)
    monkeypatch.setattr(kapi, "TILE_POLICY", "gpu")          # the suite's policy: the GPU's 32 threads
    assert codegen.row_form(10, "cpu") == "row32x1"
