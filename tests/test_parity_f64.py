"""float64 on Vulkan (ADR 0023) against the CPU oracle, for the hand-written nn kernels: matmul (small,
tiled, split K in f64 slabs), conv2d (implicit GEMM, im2col, the 1x1 matmul path), its weight gradient,
conv_transpose2d (implicit, and columns + col2im), gather, index_add, scatter; pooling refused by name.

Bound: a contraction over k terms may differ by 1e-300 + 1e-13 * sqrt(k) * sum|terms|. A kernel that
computed in float32 anywhere would miss it by five orders of magnitude (the tests say so: the f32
product of the same inputs fails the bound). The elementwise and reduction kernels' float64 rows are
in test_parity_elementwise.py and test_elementwise_table.py.
"""
import numpy as np
import pytest

import vkml
import vkml.backends.vulkan as vkv
import vkml.backends.vulkan.kernels_nn as kn
from vkml.core.dtypes import BackendError
from vkml.core.ops import Op
from vkml.frontend.tensor import apply, tensor

pytestmark = pytest.mark.vulkan

RNG = np.random.default_rng(64)
DEVS = ("cpu", "vulkan")


def rnd(*shape): return RNG.standard_normal(shape)


def both(build, *arrays):
    return tuple(build(*[tensor(a, device=d) for a in arrays]).numpy() for d in DEVS)


def bound_ok(cpu, vk, terms, k):
    return np.abs(vk - cpu) <= 1e-300 + 1e-13 * np.sqrt(max(k, 1)) * terms


def check64(build, arrays, k):
    "Vulkan's float64 result against the CPU's within the f64 contraction bound; returns the profile's kernel names."
    with vkv.profile() as prof:
        cpu, vk = both(build, *arrays)
    assert cpu.dtype == vk.dtype == np.float64 and cpu.shape == vk.shape
    terms = build(*[tensor(np.abs(a)) for a in arrays]).numpy()
    ok = bound_ok(cpu, vk, terms, k)
    assert ok.all(), f"{(~ok).sum()} elements out of bound; worst {np.abs(vk - cpu).max():.3e}"
    return sorted(prof)


def mm(a, b): return apply(Op.MATMUL, a, b)
def conv(arg): return lambda x, w: apply(Op.CONV2D, x, w, arg=arg)


@pytest.mark.parametrize("bmkn", [(1, 5, 7, 3), (2, 100, 70, 90), (1, 130, 300, 67)], ids=["small", "tiled", "ragged"])
def test_matmul(bmkn):
    B, M, K, N = bmkn
    names = check64(mm, [rnd(B, M, K), rnd(B, K, N)], K)
    assert any(n.endswith("_f64") and n.startswith("matmul") for n in names), names
    assert not any(n.startswith(("matmul128", "matmul64x128", "matmul_cm")) for n in names)   # f64 has one tile


def test_matmul_computes_in_double():
    "The same product rounded through float32 misses the bound: the bound can tell double from float."
    a, b = rnd(1, 70, 300), rnd(1, 300, 80)
    cpu = (tensor(a) @ tensor(b)).numpy()
    f32 = (tensor(a.astype(np.float32), device="vulkan") @ tensor(b.astype(np.float32), device="vulkan")).numpy()
    terms = (tensor(np.abs(a)) @ tensor(np.abs(b))).numpy()
    assert not bound_ok(cpu, f32.astype(np.float64), terms, 300).all()
    check64(mm, [a, b], 300)


def test_matmul_views_and_split_k(monkeypatch):
    "Transposed and broadcast operands; K split to fill the GPU (f64 slabs summed by reduce_slabs_f64); lavapipe's budget."
    perm = lambda t: apply(Op.PERMUTE, t, arg=(0, 2, 1))
    check64(lambda a, b: mm(perm(a), b), [rnd(2, 40, 70), rnd(2, 40, 50)], 40)
    check64(lambda a, b: mm(a, apply(Op.EXPAND, b, shape=(3, 20, 90), dtype=b.dtype)), [rnd(3, 70, 20), rnd(1, 20, 90)], 20)
    names = check64(mm, [rnd(1, 64, 2048), rnd(1, 2048, 64)], 2048)          # one tile, long K: split
    assert "reduce_slabs_f64" in names and "matmul_f64" in names, names
    monkeypatch.setattr(kn, "LOOP_BUDGET", 40)                                   # the loop-budget split, small kernel too
    names = check64(mm, [rnd(2, 9, 300), rnd(2, 300, 7)], 300)
    assert "matmul_small_f64" in names and "reduce_slabs_f64" in names, names


@pytest.mark.parametrize("case", [(2, 16, 13, 11, 24, 3, 3, (1, 1), (1, 1), (1, 1), 1),    # one tap per slab (C/g % 8 == 0)
                                  (2, 6, 17, 15, 20, 3, 2, (2, 1), (1, 0), (2, 1), 2)],    # taps inside a slab; grouped
                         ids=["one-tap", "grouped"])
def test_conv2d_implicit(case):
    N, C, H, W, O, kh, kw, st, pd, dl, G = case
    names = check64(conv((st, pd, dl, G)), [rnd(N, C, H, W), rnd(O, C // G, kh, kw)], C // G * kh * kw)
    assert "conv_f64" in names and not any(n.startswith("im2col") for n in names), names


def test_conv2d_im2col_and_1x1():
    "Flipped weights (no mergeable tap stride: copied, then im2col + matmul) and a 1x1 convolution (a plain matmul)."
    flip = lambda w: apply(Op.SLICE, w, arg=((0, 4, 1), (0, 3, 1), (2, -1, -1), (2, -1, -1)))
    names = check64(lambda x, w: conv(((1, 1), (1, 1), (1, 1), 1))(x, flip(w)), [rnd(2, 3, 6, 7), rnd(4, 3, 3, 3)], 27)
    assert any(n.startswith("im2col_f64") for n in names), names
    check64(conv(((1, 1), (0, 0), (1, 1), 1)), [rnd(2, 8, 5, 6), rnd(3, 8, 1, 1)], 8)


def test_conv2d_weight_gradient(monkeypatch):
    "CONV2D_WEIGHT (wgrad_f64), also with K split into f64 partials."
    wg = lambda arg: (lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=arg))
    names = check64(wg(((3, 3), (1, 1), (1, 1), (1, 1), 1)), [rnd(2, 8, 7, 6), rnd(2, 4, 7, 6)], 2 * 42)
    assert "wgrad_f64" in names, names
    for parts, summed in [(5, "reduce_slabs_f64"), (12, "reduce_cols_final_f64")]:   # few slabs: a thread per output
        monkeypatch.setattr(kn, "split_k", lambda name, M, N, K, nb: parts)
        names = check64(wg(((3, 3), (1, 1), (1, 1), (1, 1), 2)), [rnd(3, 4, 9, 8), rnd(3, 6, 9, 8)], 3 * 72)
        assert summed in names, names


def test_conv_transpose2d():
    "Stride 1 on the implicit GEMM; stride 2 as columns + col2im (lowered when each output sums enough products)."
    ct = lambda arg: (lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=arg))
    names = check64(ct(((1, 1), (1, 1), (0, 0), (1, 1), 1)), [rnd(2, 16, 20, 18), rnd(16, 8, 3, 3)], 16 * 9)
    assert "conv_f64" in names, names
    names = check64(ct(((2, 2), (1, 1), (1, 1), (1, 1), 1)), [rnd(2, 32, 7, 7), rnd(32, 16, 3, 3)], 32 * 9)
    assert {"matmul_f64", "col2im_f64"} <= set(names) or "conv_transpose2d_f64" in names, names


def test_gather_index_add_scatter():
    x, idx = rnd(4, 6), np.array([[0, 2, 1], [3, 3, 0]])
    cpu, vk = both(lambda t: vkml.gather(t, 1, tensor(idx, device=t.device)), x)
    np.testing.assert_array_equal(vk, cpu)
    src, i1 = rnd(4, 3), np.array([0, 2, 2])
    cpu, vk = both(lambda t, s: vkml.index_add(t, 1, tensor(i1, device=t.device), s), x, src)
    np.testing.assert_allclose(vk, cpu, rtol=1e-15, atol=1e-300)
    cpu, vk = both(lambda t, s: vkml.scatter(t, 1, tensor(np.array([[5, 0, 1]] * 4), device=t.device), s), x, src)
    np.testing.assert_array_equal(vk, cpu)


def test_pooling_refuses_float64_naming_the_cpu():
    x = tensor(rnd(1, 2, 4, 4), device="vulkan")
    with pytest.raises(BackendError, match=r"to\(.cpu.\)"):
        vkml.nn.functional.max_pool2d(x, 2).numpy()
