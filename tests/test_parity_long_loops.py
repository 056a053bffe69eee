"""Vulkan against independent numpy for shapes that make one shader invocation loop a long time.

lavapipe (llvmpipe's gallivm, LP_MAX_TGSI_LOOP_ITERATIONS = 65,535) silently stops a shader invocation
after 65,535 loop iterations, counted over ALL its loops together (nesting does not help; only
unrolled loops are free). Before the fix, (1 x k) @ (k x 1) of ones returned 65535 for any k >= 65,536
and index_add with 70,000 entries returned 65535. Each case here crosses that budget in the old kernels.
Bounds (tests/oracle.py, the parity bound): sums over k terms within atol + 1e-5 * sqrt(k) * sum|terms| (f32);
integer sums, maxima, indices exact.
"""
import numpy as np
import pytest
import vkml
from vkml.frontend.tensor import apply
from vkml.core.ops import Op
from vkml.core.dtypes import BackendError
import oracle

pytestmark = pytest.mark.vulkan
RNG = np.random.default_rng(65535)


def vk(a): return vkml.tensor(a, device="vulkan")


def close_sum(got, ref, k, absum, atol=1e-6):
    "A sum of `k` terms within tests/oracle.py's reduction bound (`absum`: sum|terms|)."
    oracle.assert_close(got, ref, atol=atol, k=k, terms=absum, same_dtype=False, same_shape=False)


@pytest.mark.parametrize("k", [70_000, 140_000])
def test_matmul_long_k_ones(k):
    "The reported bug: (1 x k) @ (k x 1) of ones is k (exact in f32), not 65535."
    a, b = np.ones((1, k), np.float32), np.ones((k, 1), np.float32)
    got = vkml.matmul(vk(a), vk(b)).numpy()
    assert got.shape == (1, 1) and got[0, 0] == k


@pytest.mark.parametrize("k", [70_000, 140_000])
def test_matmul_long_k_random(k):
    a, b = RNG.standard_normal((3, k)).astype(np.float32), RNG.standard_normal((k, 2)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    close_sum(vkml.matmul(vk(a), vk(b)).numpy(), ref, k, np.abs(a).astype(np.float64) @ np.abs(b))


def test_matmul_long_k_f16():
    k = 140_000
    a, b = np.full((1, k), 0.25, np.float16), np.full((k, 2), 0.125, np.float16)
    got = vkml.matmul(vk(a), vk(b)).numpy()
    assert got.dtype == np.float16 and np.all(got == np.float16(k / 32))


def test_matmul_tiled_long_k_broadcast():
    "A tiled (33 x 33 output) product whose K loop (K / 16 trips) passes the budget: broadcast operands."
    k = 1_000_000   # ceil(k / 16) trips > 60,000: the host splits K
    # small integers: every partial sum is exact in f32 (a constant summed 1e6 times in f32 otherwise
    # drifts by ~1%, an accumulation-order effect that would hide what this test is about)
    a0, b0 = RNG.integers(-2, 3, (33, 1)).astype(np.float32), RNG.integers(-2, 3, (1, 33)).astype(np.float32)
    a = apply(Op.EXPAND, vk(a0[None]), shape=(1, 33, k), dtype=vkml.float32)   # stride 0 along K: no copy
    b = apply(Op.EXPAND, vk(b0[None]), shape=(1, k, 33), dtype=vkml.float32)
    got = apply(Op.MATMUL, a, b).numpy()[0]
    np.testing.assert_array_equal(got, k * (a0 @ b0))


@pytest.mark.parametrize("n", [70_000, 140_000, 1_000_000])
def test_index_add_many_entries(n):
    "Each output scans all n entries (1_000_000 also splits the scan into several dispatches)."
    idx = RNG.integers(0, 4, n).astype(np.int64)
    src_i = RNG.integers(-1000, 1000, n).astype(np.int32)
    ref_i = np.zeros(4, np.int64)
    for j in range(4): ref_i[j] = src_i[idx == j].astype(np.int64).sum()
    got_i = vkml.index_add(vk(np.zeros(4, np.int32)), 0, vk(idx), vk(src_i)).numpy()
    np.testing.assert_array_equal(got_i, ref_i.astype(np.int32))
    src = RNG.standard_normal(n).astype(np.float32)
    ref = np.array([src[idx == j].astype(np.float64).sum() for j in range(4)])
    absum = np.array([np.abs(src[idx == j]).astype(np.float64).sum() for j in range(4)])
    got = vkml.index_add(vk(np.zeros(4, np.float32)), 0, vk(idx), vk(src)).numpy()
    close_sum(got, ref, n, absum)
    ones = vkml.index_add(vk(np.zeros(1, np.float32)), 0, vk(np.zeros(n, np.int64)), vk(np.ones(n, np.float32))).numpy()
    assert ones[0] == n


@pytest.mark.parametrize("n", [70_000, 1_000_000])
def test_scatter_many_entries(n):
    "SCATTER (x[idx] = v) scans like index_add; across several dispatches the last matching entry still wins."
    idx = RNG.integers(0, 5, n).astype(np.int64)
    src = np.arange(n, dtype=np.int32)
    ref = np.array([src[idx == j][-1] if (idx == j).any() else -1 for j in range(5)], np.int32)
    got = vkml.scatter(vk(np.full(5, -1, np.int32)), 0, vk(idx), vk(src)).numpy()
    np.testing.assert_array_equal(got, ref)


def test_reductions_long_axis():
    k = 140_000
    x = RNG.standard_normal((2, k)).astype(np.float32)
    xi = RNG.integers(-50, 50, (k, 1, 2)).astype(np.int32)   # axis 0, the other dims tiny
    x64 = x.astype(np.float64)
    close_sum(vkml.sum(vk(x), 1).numpy(), x64.sum(1), k, np.abs(x64).sum(1))
    np.testing.assert_array_equal(vkml.sum(vk(xi), 0).numpy(), xi.astype(np.int64).sum(0).astype(np.int32))
    np.testing.assert_array_equal(vkml.amax(vk(x), 1).numpy(), x.max(1))
    np.testing.assert_array_equal(vkml.argmax(vk(x), 1).numpy(), np.argmax(x, 1))
    np.testing.assert_array_equal(vkml.cumsum(vk(xi), 0).numpy(), np.cumsum(xi.astype(np.int64), 0).astype(np.int32))
    c = vkml.cumsum(vk(x), 1).numpy()
    ref = np.cumsum(x64, 1)
    assert np.all(np.abs(c - ref) <= 1e-6 + 1e-5 * np.sqrt(k) * np.cumsum(np.abs(x64), 1))


def test_argmax_cumsum_very_long_row():
    "Rows long enough that a workgroup's thread loops past 65,535 trips unless it unrolls (k / 256 > 65,535)."
    k = 17_000_000
    x = np.zeros(k, np.float32)
    x[k - 3] = 2.0; x[k - 1] = 2.0                       # first of two maxima, near the end
    assert vkml.argmax(vk(x), 0).numpy() == k - 3
    xi = np.ones(4_000_000, np.int32)                     # old scan: ~9 trips per 256-tile, past 1.9M
    np.testing.assert_array_equal(vkml.cumsum(vk(xi), 0).numpy()[[0, 1_999_999, -1]], [1, 2_000_000, 4_000_000])


def fold_ref(cols, out_hw, k):
    "numpy fold for stride 1, no padding/dilation: each block adds its patch."
    n, ckk, L = cols.shape
    c = ckk // (k[0] * k[1])
    bh, bw = out_hw[0] - k[0] + 1, out_hw[1] - k[1] + 1
    out = np.zeros((n, c) + tuple(out_hw))
    p = cols.reshape(n, c, k[0], k[1], bh, bw)
    for by in range(bh):
        for bx in range(bw): out[:, :, by:by + k[0], bx:bx + k[1]] += p[:, :, :, :, by, bx]
    return out


def test_fold_big_kernel():
    "fold with a 256 x 256 kernel: the old gather looped over all 65,536 taps of every pixel."
    k, hw = (256, 256), (257, 257)
    cols = RNG.standard_normal((1, k[0] * k[1], 4)).astype(np.float32)
    got = vkml.nn.functional.fold(vk(cols), hw, k).numpy()
    ref = fold_ref(cols.astype(np.float64), hw, k)
    close_sum(got, ref, 4, fold_ref(np.abs(cols).astype(np.float64), hw, k))


def test_fold_many_taps_stride():
    "Non-overlapping 300 x 300 blocks: one tap per pixel, found without scanning 90,000."
    k, s, B = 300, 300, 3
    cols = RNG.standard_normal((1, k * k, B * B)).astype(np.float32)
    got = vkml.nn.functional.fold(vk(cols), (k * B, k * B), (k, k), stride=s).numpy()
    ref = cols.reshape(k, k, B, B).transpose(2, 0, 3, 1).reshape(1, 1, k * B, k * B)
    np.testing.assert_array_equal(got, ref)


def maxpool_ref(x, k):
    "Stride 1, no padding: (max, first-argmax flat index) per window."
    n, c, h, w = x.shape
    oh, ow = h - k + 1, w - k + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))    # n c oh ow k k
    flat = win.reshape(n, c, oh, ow, k * k)
    a = flat.argmax(-1)
    iy = np.arange(oh)[:, None] + a // k
    ix = np.arange(ow)[None, :] + a % k
    return flat.max(-1), iy, ix


def test_max_pool_backward_many_windows():
    "Each pixel of a 16 x 16, stride-1 pooling is in up to 256 windows of 256 elements each."
    k = 16
    x = RNG.standard_normal((1, 2, 40, 40)).astype(np.float32)
    m, iy, ix = maxpool_ref(x, k)
    np.testing.assert_array_equal(vkml.nn.functional.max_pool2d(vk(x), k, stride=1).numpy(), m)
    g = RNG.standard_normal(m.shape).astype(np.float32)
    ref = np.zeros(x.shape)
    for c in range(2):
        np.add.at(ref[0, c], (iy[0, c], ix[0, c]), g[0, c].astype(np.float64))
    arg = ((k, k), (1, 1), (0, 0), (1, 1), False)
    got = apply(Op.MAXPOOL2D_BACKWARD, vk(g), vk(x), arg=arg).numpy()
    absref = np.zeros(x.shape)
    for c in range(2): np.add.at(absref[0, c], (iy[0, c], ix[0, c]), np.abs(g[0, c]).astype(np.float64))
    close_sum(got, ref, k * k, absref)


def test_global_pools_big_window():
    "A 256 x 256 window: the old scan looped 256 * 257 times."
    x = RNG.standard_normal((1, 1, 256, 256)).astype(np.float32)
    np.testing.assert_array_equal(vkml.nn.functional.max_pool2d(vk(x), 256).numpy().ravel(), [x.max()])
    got = vkml.nn.functional.avg_pool2d(vk(x), 256).numpy().ravel()[0]
    close_sum(got, x.astype(np.float64).mean(), 65536, np.abs(x).astype(np.float64).mean())


def test_over_budget_is_a_typed_error():
    "A window scan that no restructuring keeps under the budget is refused, not answered wrong."
    x = vk(np.zeros((1, 1, 1, 600_000), np.float32))
    with pytest.raises(BackendError, match="65,535"):
        vkml.nn.functional.max_pool2d(x, (1, 600_000)).numpy()


def test_conv2d_long_reduction():
    "A 300 x 300 kernel over a 300 x 300 image: im2col + a matmul with K = 90,000 (split on the host)."
    x = RNG.standard_normal((1, 1, 300, 300)).astype(np.float32)
    w = RNG.standard_normal((2, 1, 300, 300)).astype(np.float32)
    got = vkml.nn.functional.conv2d(vk(x), vk(w)).numpy().ravel()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = (x64 * w64).sum(axis=(1, 2, 3))
    close_sum(got, ref, 90_000, np.abs(x64 * w64).sum(axis=(1, 2, 3)))
