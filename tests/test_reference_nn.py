"""vkml.nn.functional against independent numpy references (explicit loops for conv, pool, unfold, fold).

The references never import vkML's numpy oracle (vkml.backends.cpu); they follow PyTorch's documented formulas.
"""
import math
import numpy as np
import pytest
import vkml
from vkml.frontend.tensor import tensor, toposort
from vkml.core.ops import Op
import vkml.nn.functional as F
from vkml.frontend.gradcheck import gradcheck
import oracle

TESTED_OPERATORS = {
    "matmul", "linear", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "unfold", "fold",
    "max_unpool2d", "adaptive_max_pool2d",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "batch_norm", "group_norm", "dropout", "embedding",
    "scaled_dot_product_attention",
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "kl_div",
}

RNG = np.random.default_rng(1234)
TOL = {np.float32: dict(rtol=1e-4, atol=1e-5), np.float16: dict(rtol=2e-2, atol=2e-2)}


def rnd(*shape, dtype=np.float32, lo=None, hi=None):
    a = RNG.standard_normal(shape) if lo is None else RNG.uniform(lo, hi, shape)
    return np.asarray(a).astype(dtype)


def check(t, ref, dtype=np.float32, **kw):
    got = t.numpy()
    assert got.shape == np.shape(ref), (got.shape, np.shape(ref))
    assert got.dtype == dtype, got.dtype
    oracle.assert_close(got, np.asarray(ref, np.float64), what="", same_dtype=False, **{**TOL[dtype], **kw})


def no_prod(*ts):
    assert Op.PROD not in {n.op for n in toposort([t.node for t in ts])}


# ---------------------------------------------------------------- matmul, linear

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("sa,sb", [((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                                   ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((2, 1, 2, 3), (4, 3, 5)),
                                   ((1, 2, 3), (4, 3, 2)), ((2, 2, 3, 4), (2, 2, 4, 1)), ((4,), (2, 4, 3))])
def test_matmul(sa, sb, dtype):
    a, b = rnd(*sa, dtype=dtype), rnd(*sb, dtype=dtype)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    out = F.matmul(tensor(a), tensor(b))
    check(out, ref, dtype); no_prod(out)


def test_matmul_errors():
    with pytest.raises(vkml.ShapeError, match="inner dimensions"): F.matmul(tensor(rnd(2, 3)), tensor(rnd(4, 2)))
    with pytest.raises(vkml.DTypeError): F.matmul(tensor(rnd(2, 3)), tensor(rnd(3, 2, dtype=np.float16)))
    with pytest.raises(vkml.DTypeError, match=r"\.float\(\)"): F.matmul(tensor(np.ones((2, 2), np.int64)), tensor(np.ones((2, 2), np.int64)))
    with pytest.raises(vkml.ShapeError): F.matmul(tensor(rnd(2, 3)), tensor(np.float32(1.0)))


@pytest.mark.parametrize("xs", [(4,), (3, 4), (2, 3, 4), (2, 2, 3, 4)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear(xs, bias):
    x, w, b = rnd(*xs), rnd(5, 4), rnd(5)
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + (b if bias else 0)
    check(F.linear(tensor(x), tensor(w), tensor(b) if bias else None), ref)
    with pytest.raises(vkml.ShapeError): F.linear(tensor(x), tensor(rnd(5, 3)))


# ---------------------------------------------------------------- convolution (explicit loops)

def conv2d_ref(x, w, b, stride, pad, dil, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, pad, dil
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw)); xp[:, :, ph:ph + h, pw:pw + wd] = x
    ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, ho, wo))
    for bi in range(n):
        for oc in range(o):
            g = oc // og
            for i in range(ho):
                for j in range(wo):
                    acc = 0.0
                    for ci in range(cg):
                        for u in range(kh):
                            for v in range(kw):
                                acc += xp[bi, g * cg + ci, i * sh + u * dh, j * sw + v * dw] * w[oc, ci, u, v]
                    out[bi, oc, i, j] = acc + (b[oc] if b is not None else 0.0)
    return out


CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 6, 5), (4, 3, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((1, 4, 7, 7), (6, 2, 3, 2), (2, 1), (1, 2), (1, 1), 2),
    ((2, 2, 8, 8), (2, 1, 3, 3), (1, 2), (2, 1), (2, 1), 2),
    ((1, 3, 5, 5), (2, 3, 1, 1), (2, 2), (0, 0), (1, 1), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("xs,ws,s,p,d,g", CONV_CASES)
def test_conv2d(xs, ws, s, p, d, g, dtype):
    x, w, b = rnd(*xs, dtype=dtype), rnd(*ws, dtype=dtype), rnd(ws[0], dtype=dtype)
    check(F.conv2d(tensor(x), tensor(w), tensor(b), stride=s, padding=p, dilation=d, groups=g),
          conv2d_ref(x, w, b, s, p, d, g), dtype, atol=1e-4 if dtype == np.float32 else 5e-2)


def test_conv2d_unbatched_and_modes():
    x, w = rnd(3, 6, 5), rnd(2, 3, 2, 3)
    check(F.conv2d(tensor(x), tensor(w)), conv2d_ref(x[None], w, None, (1, 1), (0, 0), (1, 1), 1)[0])
    check(F.conv2d(tensor(x), tensor(w), padding="valid"), conv2d_ref(x[None], w, None, (1, 1), (0, 0), (1, 1), 1)[0])
    # 'same' with an even kernel: PyTorch puts the extra row/column at the bottom/right
    for dil in (1, 2):
        out = F.conv2d(tensor(x[None]), tensor(w), padding="same", dilation=dil)
        th, tw = dil * (2 - 1), dil * (3 - 1)
        xp = np.pad(x[None], ((0, 0), (0, 0), (th // 2, th - th // 2), (tw // 2, tw - tw // 2)))
        check(out, conv2d_ref(xp, w, None, (1, 1), (0, 0), (dil, dil), 1))
        assert out.shape == (1, 2, 6, 5)
    with pytest.raises(vkml.VkmlError): F.conv2d(tensor(x), tensor(w), stride=2, padding="same")
    with pytest.raises(vkml.ShapeError): F.conv2d(tensor(x), tensor(rnd(2, 2, 3, 3)))
    with pytest.raises(vkml.ShapeError): F.conv2d(tensor(x), tensor(rnd(2, 3, 9, 9)))


def conv_t_ref(x, w, b, stride, pad, opad, dil, groups):
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, pad, opad, dil
    ho = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    wo = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    canvas = np.zeros((n, cog * groups, ph + ho + kh * dh, pw + wo + kw * dw))
    cig = cin // groups
    for bi in range(n):
        for ci in range(cin):
            g = ci // cig
            for i in range(h):
                for j in range(wd):
                    for co in range(cog):
                        for u in range(kh):
                            for v in range(kw):
                                canvas[bi, g * cog + co, i * sh + u * dh, j * sw + v * dw] += x[bi, ci, i, j] * w[ci, co, u, v]
    out = canvas[:, :, ph:ph + ho, pw:pw + wo]
    return out + (b[None, :, None, None] if b is not None else 0)


@pytest.mark.parametrize("xs,ws,s,p,op,d,g", [
    ((2, 3, 4, 4), (3, 2, 3, 3), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ((1, 4, 3, 5), (4, 1, 3, 2), (2, 3), (1, 0), (1, 2), (1, 1), 2),
    ((1, 2, 3, 3), (2, 3, 2, 2), (2, 2), (1, 1), (0, 1), (2, 2), 1),
])
def test_conv_transpose2d(xs, ws, s, p, op, d, g):
    x, w, b = rnd(*xs), rnd(*ws), rnd(ws[1] * g)
    check(F.conv_transpose2d(tensor(x), tensor(w), tensor(b), stride=s, padding=p, output_padding=op, groups=g, dilation=d),
          conv_t_ref(x, w, b, s, p, op, d, g), atol=1e-4)
    check(F.conv_transpose2d(tensor(x[0]), tensor(w), None, s, p, op, g, d), conv_t_ref(x[:1], w, None, s, p, op, d, g)[0], atol=1e-4)


def test_conv_transpose2d_errors():
    with pytest.raises(vkml.VkmlError, match="output_padding"):
        F.conv_transpose2d(tensor(rnd(1, 2, 3, 3)), tensor(rnd(2, 2, 3, 3)), stride=1, output_padding=1)


# ---------------------------------------------------------------- pooling (explicit loops, PyTorch's formulas)

def pool_out(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p: o -= 1
    return o


def max_pool_ref(x, k, s, p, d, ceil):
    n, c, h, w = x.shape
    ho, wo = pool_out(h, k[0], s[0], p[0], d[0], ceil), pool_out(w, k[1], s[1], p[1], d[1], ceil)
    out = np.full((n, c, ho, wo), -np.inf)
    for i in range(ho):
        for j in range(wo):
            for u in range(k[0]):
                for v in range(k[1]):
                    r, q = i * s[0] - p[0] + u * d[0], j * s[1] - p[1] + v * d[1]
                    if 0 <= r < h and 0 <= q < w: out[:, :, i, j] = np.maximum(out[:, :, i, j], x[:, :, r, q])
    return out


def avg_pool_ref(x, k, s, p, ceil, include_pad):
    n, c, h, w = x.shape
    ho, wo = pool_out(h, k[0], s[0], p[0], 1, ceil), pool_out(w, k[1], s[1], p[1], 1, ceil)
    out = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            hs, ws_ = i * s[0] - p[0], j * s[1] - p[1]
            he, we = min(hs + k[0], h + p[0]), min(ws_ + k[1], w + p[1])
            size = (he - hs) * (we - ws_)
            hs, ws_, he, we = max(hs, 0), max(ws_, 0), min(he, h), min(we, w)
            total = x[:, :, hs:he, ws_:we].astype(np.float64).sum((2, 3))
            out[:, :, i, j] = total / (size if include_pad else (he - hs) * (we - ws_))
    return out


POOL_CASES = [  # kernel, stride, padding, dilation, ceil
    ((2, 2), (2, 2), (0, 0), (1, 1), False), ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (1, 1), True), ((2, 3), (3, 2), (1, 1), (1, 1), True),
    ((3, 3), (1, 1), (0, 0), (1, 1), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("k,s,p,d,ceil", POOL_CASES + [((2, 2), (1, 2), (1, 0), (2, 2), False), ((2, 2), (2, 2), (1, 1), (2, 1), True)])
def test_max_pool2d(k, s, p, d, ceil, dtype):
    x = rnd(2, 3, 7, 6, dtype=dtype)
    check(F.max_pool2d(tensor(x), k, s, p, d, ceil), max_pool_ref(x, k, s, p, d, ceil), dtype)


def test_max_pool2d_defaults_unbatched():
    x = rnd(3, 6, 6)
    check(F.max_pool2d(tensor(x), 2), max_pool_ref(x[None], (2, 2), (2, 2), (0, 0), (1, 1), False)[0])
    with pytest.raises(vkml.VkmlError, match="half"): F.max_pool2d(tensor(x), 2, padding=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("k,s,p,d,ceil", POOL_CASES)
def test_avg_pool2d(k, s, p, d, ceil, include_pad, dtype):
    x = rnd(2, 3, 7, 6, dtype=dtype)
    check(F.avg_pool2d(tensor(x), k, s, p, ceil, include_pad), avg_pool_ref(x, k, s, p, ceil, include_pad), dtype)


def max_pool_indices_ref(x, k, s, p, d, ceil):
    """PyTorch's max_pool2d indices: for each window, h·W + w of its first maximum in scan order (rows, then
    columns); padding never wins. (A NaN counts as a maximum; vkML takes the first NaN, which the random inputs
    here never hold.)"""
    n, c, h, w = x.shape
    ho, wo = pool_out(h, k[0], s[0], p[0], d[0], ceil), pool_out(w, k[1], s[1], p[1], d[1], ceil)
    out = np.zeros((n, c, ho, wo), np.int64)
    for a in range(n):
        for b in range(c):
            for i in range(ho):
                for j in range(wo):
                    best, where = -np.inf, None
                    for u in range(k[0]):
                        for v in range(k[1]):
                            r, q = i * s[0] - p[0] + u * d[0], j * s[1] - p[1] + v * d[1]
                            if 0 <= r < h and 0 <= q < w and (where is None or x[a, b, r, q] > best):
                                best, where = x[a, b, r, q], r * w + q
                    out[a, b, i, j] = where
    return out


@pytest.mark.parametrize("k,s,p,d,ceil", POOL_CASES + [((2, 2), (1, 2), (1, 0), (2, 2), False), ((2, 2), (2, 2), (1, 1), (2, 1), True)])
def test_max_pool2d_indices(k, s, p, d, ceil):
    x = rnd(2, 3, 7, 6)
    y, i = F.max_pool2d(tensor(x), k, s, p, d, ceil, return_indices=True)
    check(y, max_pool_ref(x, k, s, p, d, ceil))
    np.testing.assert_array_equal(i.numpy(), max_pool_indices_ref(x, k, s, p, d, ceil))
    assert i.dtype == vkml.int64


def max_unpool_ref(x, idx, out_hw):
    "torch.nn.functional.max_unpool2d: zeros of (N, C, *out_hw) with x[n, c, i, j] at the flat position idx[n, c, i, j]."
    n, c = x.shape[:2]
    out = np.zeros((n, c, out_hw[0] * out_hw[1]))
    for a in range(n):
        for b in range(c): out[a, b, idx[a, b].reshape(-1)] = x[a, b].reshape(-1)
    return out.reshape(n, c, *out_hw)


@pytest.mark.parametrize("k,s,p,out", [((2, 2), (2, 2), (0, 0), None), ((3, 3), (2, 2), (1, 1), (7, 6)), ((2, 2), (2, 2), (0, 0), (7, 6))])
def test_max_unpool2d(k, s, p, out):
    x = rnd(2, 3, 7, 6)
    y, i = F.max_pool2d(tensor(x), k, s, p, return_indices=True)
    hw = out or tuple((n - 1) * si - 2 * pi + ki for n, si, pi, ki in zip(y.shape[2:], s, p, k))   # PyTorch's default size
    check(F.max_unpool2d(y, i, k, s, p, out), max_unpool_ref(y.numpy(), i.numpy(), hw))


def test_max_unpool2d_refuses_an_index_outside_the_output():
    "PyTorch raises for an index past the output (its default size can be smaller than the pooled input)."
    y, i = F.max_pool2d(tensor(np.arange(42, dtype=np.float32).reshape(1, 1, 7, 6)), 3, 2, 1, return_indices=True)   # default output (7, 5): too narrow
    with pytest.raises(vkml.IndexOutOfRangeError): F.max_unpool2d(y, i, 3, 2, 1).numpy()
    with pytest.raises(vkml.IndexOutOfRangeError):
        F.max_unpool2d(y, tensor(np.full((1, 1, 4, 3), 35, np.int64)), 3, 2, 1)   # data indices: refused before any kernel


def test_avg_pool2d_divisor_override():
    "PyTorch: with divisor_override, every window's sum (padding counts as zeros) is divided by it."
    x = rnd(2, 3, 7, 6)
    for ceil in (False, True):
        sums = avg_pool_ref(x, (3, 3), (2, 2), (1, 1), ceil, True) * 9   # (the include-pad mean of an interior window ×9)
        n, c, h, w = x.shape
        ref = np.zeros_like(sums)
        for i in range(sums.shape[2]):
            for j in range(sums.shape[3]):
                hs, ws_ = max(i * 2 - 1, 0), max(j * 2 - 1, 0)
                ref[:, :, i, j] = x[:, :, hs:i * 2 + 2, ws_:j * 2 + 2].astype(np.float64).sum((2, 3)) / 5
        check(F.avg_pool2d(tensor(x), 3, 2, 1, ceil_mode=ceil, divisor_override=5), ref)


def adaptive_ref(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].astype(np.float64).mean((2, 3))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("hw,osz", [((6, 6), 3), ((6, 6), 1), ((7, 5), 3), ((5, 7), (2, 4)), ((4, 6), (4, 6)),
                                    ((5, 5), (None, 2)), ((3, 3), 5)])
def test_adaptive_avg_pool2d(hw, osz, dtype):
    x = rnd(2, 3, *hw, dtype=dtype)
    o = osz if isinstance(osz, tuple) else (osz, osz)
    oh, ow = (hw[i] if o[i] is None else o[i] for i in range(2))
    out = F.adaptive_avg_pool2d(tensor(x), osz)
    check(out, adaptive_ref(x, oh, ow), dtype); no_prod(out)
    check(F.adaptive_avg_pool2d(tensor(x[0]), osz), adaptive_ref(x, oh, ow)[0], dtype)


def adaptive_max_ref(x, oh, ow):
    "Adaptive max pooling (PyTorch's windows) and the flat position h·W + w of each window's first maximum."
    n, c, h, w = x.shape
    out, idx = np.zeros((n, c, oh, ow)), np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            a = win.argmax(-1)
            out[:, :, i, j] = win.max(-1)
            idx[:, :, i, j] = (h0 + a // (w1 - w0)) * w + w0 + a % (w1 - w0)
    return out, idx


@pytest.mark.parametrize("hw,osz", [((6, 6), 3), ((7, 5), 3), ((5, 7), (2, 4)), ((3, 3), 5), ((5, 5), (None, 2))])
def test_adaptive_max_pool2d(hw, osz):
    x = rnd(2, 3, *hw)
    o = osz if isinstance(osz, tuple) else (osz, osz)
    oh, ow = (hw[i] if o[i] is None else o[i] for i in range(2))
    y, i = F.adaptive_max_pool2d(tensor(x), osz, return_indices=True)
    ref, ridx = adaptive_max_ref(x, oh, ow)
    check(y, ref); np.testing.assert_array_equal(i.numpy(), ridx)
    check(F.adaptive_max_pool2d(tensor(x[0]), osz), ref[0])


def unfold_ref(x, k, d, p, s):
    n, c, h, w = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    ho, wo = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c * k[0] * k[1], ho * wo))
    for ci in range(c):
        for u in range(k[0]):
            for v in range(k[1]):
                for i in range(ho):
                    for j in range(wo):
                        out[:, (ci * k[0] + u) * k[1] + v, i * wo + j] = xp[:, ci, i * s[0] + u * d[0], j * s[1] + v * d[1]]
    return out


def fold_ref(cols, osz, k, d, p, s):
    n, ck, L = cols.shape
    c = ck // (k[0] * k[1])
    h, w = osz
    ho, wo = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1, (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((n, c, h + 2 * p[0], w + 2 * p[1]))
    for ci in range(c):
        for u in range(k[0]):
            for v in range(k[1]):
                for i in range(ho):
                    for j in range(wo):
                        out[:, ci, i * s[0] + u * d[0], j * s[1] + v * d[1]] += cols[:, (ci * k[0] + u) * k[1] + v, i * wo + j]
    return out[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


FOLD_CASES = [((2, 2), (1, 1), (0, 0), (1, 1)), ((3, 3), (1, 1), (1, 1), (1, 1)), ((2, 3), (2, 1), (1, 0), (2, 1)),
              ((3, 2), (1, 2), (0, 1), (1, 2))]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("k,d,p,s", FOLD_CASES)
def test_unfold(k, d, p, s, dtype):
    x = rnd(2, 3, 6, 5, dtype=dtype)
    check(F.unfold(tensor(x), k, d, p, s), unfold_ref(x, k, d, p, s), dtype)
    check(F.unfold(tensor(x[0]), k, d, p, s), unfold_ref(x, k, d, p, s)[0], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("k,d,p,s", FOLD_CASES)
def test_fold(k, d, p, s, dtype):
    osz = (6, 5)
    L = unfold_ref(np.zeros((1, 1, *osz)), k, d, p, s).shape[2]
    cols = rnd(2, 2 * k[0] * k[1], L, dtype=dtype)
    check(F.fold(tensor(cols), osz, k, d, p, s), fold_ref(cols.astype(np.float64), osz, k, d, p, s), dtype)
    with pytest.raises(vkml.ShapeError): F.fold(tensor(rnd(2, 2 * k[0] * k[1], L + 1)), osz, k, d, p, s)


# ---------------------------------------------------------------- softmax and normalisation

def np_log_softmax(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 2, 3, 5), -1), ((2, 2, 3, 5), 2)])
def test_softmax(shape, dim, dtype):
    x = rnd(*shape, dtype=dtype) * 3
    check(F.softmax(tensor(x), dim), np.exp(np_log_softmax(x, dim)), dtype)
    check(F.log_softmax(tensor(x), dim), np_log_softmax(x, dim), dtype)


def test_softmax_stable():
    x = np.array([[1000.0, 999.0, -1000.0], [-1e4, -1e4, -1e4]], np.float32)
    check(F.softmax(tensor(x), 1), np.exp(np_log_softmax(x, 1)))
    check(F.log_softmax(tensor(x), 1), np_log_softmax(x, 1), atol=1e-3)
    with pytest.raises(vkml.DTypeError, match=r"\.float\(\)"): F.softmax(tensor([1, 2]), 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,ns", [((4, 6), (6,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((2, 2, 3, 4), (2, 3, 4))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, ns, affine, dtype):
    x = rnd(*shape, dtype=dtype) * 2 + 1
    w, b = (rnd(*ns, dtype=dtype), rnd(*ns, dtype=dtype)) if affine else (None, None)
    axes = tuple(range(len(shape) - len(ns), len(shape)))
    x64 = x.astype(np.float64)
    ref = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + 1e-5)
    if affine: ref = ref * w + b
    check(F.layer_norm(tensor(x), ns, tensor(w) if affine else None, tensor(b) if affine else None), ref, dtype)
    ref_rms = x64 / np.sqrt((x64 ** 2).mean(axes, keepdims=True) + 1e-6)
    if affine: ref_rms = ref_rms * w
    check(F.rms_norm(tensor(x), ns, tensor(w) if affine else None, eps=1e-6), ref_rms, dtype)


def test_norm_errors_and_rms_default_eps():
    with pytest.raises(vkml.ShapeError): F.layer_norm(tensor(rnd(2, 3)), (4,))
    with pytest.raises(vkml.ShapeError): F.layer_norm(tensor(rnd(2, 3)), 3, weight=tensor(rnd(4)))
    x = np.zeros((1, 4), np.float32)
    check(F.rms_norm(tensor(x), 4), x)  # eps = machine epsilon keeps 0/0 away


@pytest.mark.parametrize("shape", [(8, 3), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm(shape):
    x = rnd(*shape) * 2 + 0.5
    w, b, rm, rv = rnd(3), rnd(3), rnd(3), rnd(3, lo=0.5, hi=2.0)
    axes = (0,) + tuple(range(2, len(shape)))
    cs = (1, 3) + (1,) * (len(shape) - 2)
    x64 = x.astype(np.float64)
    mu, var = x64.mean(axes), x64.var(axes)
    ref_train = (x64 - mu.reshape(cs)) / np.sqrt(var.reshape(cs) + 1e-5) * w.reshape(cs) + b.reshape(cs)
    check(F.batch_norm(tensor(x), tensor(rm), tensor(rv), tensor(w), tensor(b), training=True), ref_train)
    out, bm, bv = F.batch_norm_stats(tensor(x), tensor(w), tensor(b))
    check(out, ref_train); check(bm, mu); check(bv, x64.var(axes, ddof=1))
    ref_eval = (x64 - rm.reshape(cs)) / np.sqrt(rv.reshape(cs) + 1e-3) * w.reshape(cs) + b.reshape(cs)
    check(F.batch_norm(tensor(x), tensor(rm), tensor(rv), tensor(w), tensor(b), training=False, eps=1e-3), ref_eval)
    check(F.batch_norm(tensor(x), tensor(rm), tensor(rv)), (x64 - rm.reshape(cs)) / np.sqrt(rv.reshape(cs) + 1e-5))


def test_batch_norm_errors():
    with pytest.raises(vkml.ShapeError, match="more than 1 value"): F.batch_norm(tensor(rnd(1, 3)), None, None, training=True)
    with pytest.raises(vkml.VkmlError): F.batch_norm(tensor(rnd(4, 3)), None, None)
    with pytest.raises(vkml.ShapeError): F.batch_norm(tensor(rnd(4, 3)), tensor(rnd(2)), tensor(rnd(2)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape,g", [((2, 6), 3), ((2, 4, 5), 2), ((2, 6, 3, 3), 3), ((1, 4, 2, 2), 1), ((3, 4, 2, 2), 4)])
def test_group_norm(shape, g, dtype):
    x = rnd(*shape, dtype=dtype) * 3 + 1
    c = shape[1]
    w, b = rnd(c, dtype=dtype), rnd(c, dtype=dtype)
    xg = x.astype(np.float64).reshape(shape[0], g, -1)
    ref = ((xg - xg.mean(2, keepdims=True)) / np.sqrt(xg.var(2, keepdims=True) + 1e-5)).reshape(shape)
    cs = (1, c) + (1,) * (len(shape) - 2)
    check(F.group_norm(tensor(x), g, tensor(w), tensor(b)), ref * w.reshape(cs) + b.reshape(cs), dtype)
    with pytest.raises(vkml.ShapeError): F.group_norm(tensor(x), 5)


# ---------------------------------------------------------------- dropout, embedding

@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_dropout(p, dtype):
    x = rnd(20, 50, lo=0.5, hi=1.5, dtype=dtype)
    out = F.dropout(tensor(x), p)
    (rn,) = [n for n in toposort([out.node]) if n.op is Op.RAND]
    u = oracle.uniform(*rn.arg, x.size, rn.dtype).reshape(x.shape)  # float32 uniforms for any x dtype
    ref = np.where(u >= p, x.astype(np.float64) / (1 - p), 0.0)
    check(out, ref, dtype)
    assert abs((out.numpy() == 0).mean() - p) < 0.05
    assert F.dropout(tensor(x), p, training=False).numpy().tolist() == x.tolist()


def test_dropout_edges():
    x = tensor(rnd(3, 4))
    assert (F.dropout(x, 1.0).numpy() == 0).all()
    np.testing.assert_array_equal(F.dropout(x, 0.0).numpy(), x.numpy())
    a, b = F.dropout(x, 0.5).numpy(), F.dropout(x, 0.5).numpy()
    assert not np.array_equal(a == 0, b == 0) or a.size < 8  # two calls draw fresh masks
    with pytest.raises(vkml.VkmlError): F.dropout(x, 1.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("ishape", [(5,), (2, 3), (2, 2, 3), ()])
def test_embedding(ishape, dtype):
    w = rnd(7, 4, dtype=dtype)
    idx = RNG.integers(0, 7, ishape)
    check(F.embedding(tensor(np.asarray(idx, np.int64)), tensor(w)), w[idx], dtype, rtol=0, atol=0)


def test_embedding_errors():
    w = tensor(rnd(7, 4))
    with pytest.raises(vkml.IndexOutOfRangeError, match="index 7"): F.embedding(tensor([1, 7]), w)
    with pytest.raises(vkml.IndexOutOfRangeError, match="index -1"): F.embedding(tensor([-1]), w)
    with pytest.raises(vkml.DTypeError, match=r"\.long\(\)"): F.embedding(tensor([1.0]), w)


# ---------------------------------------------------------------- attention

def sdpa_ref(q, k, v, mask=None, causal=False, scale=None):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if causal: s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    if mask is not None: s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("shapes", [((4, 8), (6, 8), (6, 5)), ((2, 4, 8), (2, 4, 8), (2, 4, 8)), ((2, 3, 5, 4), (2, 3, 6, 4), (2, 3, 6, 2))])
@pytest.mark.parametrize("mode", ["plain", "causal", "bool", "float", "scale"])
def test_sdpa(shapes, mode):
    q, k, v = (rnd(*s) for s in shapes)
    L, S = shapes[0][-2], shapes[1][-2]
    mask = None
    if mode == "bool":
        mask = RNG.random((L, S)) > 0.3; mask[:, 0] = True
    if mode == "float": mask = rnd(L, S)
    ref = sdpa_ref(q, k, v, mask, mode == "causal", 0.3 if mode == "scale" else None)
    out = F.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v), tensor(mask) if mask is not None else None,
                                         is_causal=mode == "causal", scale=0.3 if mode == "scale" else None)
    check(out, ref); no_prod(out)


# ---------------------------------------------------------------- losses

def reduce_ref(l, reduction):
    return {"none": l, "sum": l.sum(), "mean": l.mean()}[reduction]


def ce_ref(x, t, weight=None, ignore=-100, reduction="mean", ls=0.0):
    """PyTorch's cross_entropy with class indices, in float64 (classes in dim 1, or 0 for 1-D input)."""
    cls = 0 if x.ndim == 1 else 1
    logp = np_log_softmax(x, cls)
    lp = np.moveaxis(logp, cls, -1)  # (..., C)
    c = lp.shape[-1]
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    valid = t != ignore
    ts = np.where(valid, t, 0)
    picked = np.take_along_axis(lp, ts[..., None], -1)[..., 0]
    wt = w[ts] * valid
    nll = -picked * wt
    smooth = np.where(valid, -(lp * w).sum(-1), 0.0)
    if reduction == "mean": nll, smooth = nll.sum() / wt.sum(), smooth.sum() / wt.sum()
    else: nll, smooth = reduce_ref(nll, reduction), reduce_ref(smooth, reduction)
    return (1 - ls) * nll + ls / c * smooth


CE_SHAPES = [((5,), ()), ((4, 5), (4,)), ((2, 5, 3), (2, 3)), ((2, 4, 3, 2), (2, 3, 2))]


@pytest.mark.parametrize("xs,ts", CE_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.2])
def test_cross_entropy(xs, ts, reduction, weighted, ls):
    x = rnd(*xs) * 3
    c = xs[0] if len(xs) == 1 else xs[1]
    t = np.asarray(RNG.integers(0, c, ts), np.int64)
    if t.ndim: t.flat[0] = -100                  # one ignored target
    if t.ndim and t.size > 1: t.flat[-1] = c - 1
    w = rnd(c, lo=0.5, hi=2.0) if weighted else None
    out = F.cross_entropy(tensor(x), tensor(t), tensor(w) if weighted else None, reduction=reduction, label_smoothing=ls)
    check(out, ce_ref(x, t, w, -100, reduction, ls)); no_prod(out)
    if ls == 0:
        lp = np_log_softmax(x, 0 if x.ndim == 1 else 1).astype(np.float32)
        check(F.nll_loss(tensor(lp), tensor(t), tensor(w) if weighted else None, reduction=reduction), ce_ref(x, t, w, -100, reduction))


def test_cross_entropy_custom_ignore_and_stable():
    x = np.array([[1000.0, 0.0, -1000.0], [0.0, 1000.0, 0.0], [3.0, 1.0, 2.0]], np.float32)
    t = np.array([2, 1, 0], np.int64)
    check(F.cross_entropy(tensor(x), tensor(t), ignore_index=0, reduction="none"), ce_ref(x, t, ignore=0, reduction="none"), atol=1e-3)
    check(F.cross_entropy(tensor(x), tensor(t)), ce_ref(x, t), atol=1e-2)


@pytest.mark.parametrize("xs", [(5,), (4, 5), (2, 5, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ls", [0.0, 0.3])
def test_cross_entropy_probabilities(xs, reduction, weighted, ls):
    x = rnd(*xs)
    cls = 0 if len(xs) == 1 else 1
    c = xs[cls]
    p = np.exp(np_log_softmax(rnd(*xs), cls)).astype(np.float32)
    w = rnd(c, lo=0.5, hi=2.0) if weighted else None
    tgt = p.astype(np.float64) * (1 - ls) + ls / c
    wb = np.ones(c) if w is None else w.astype(np.float64)
    wb = wb.reshape([c if i == cls else 1 for i in range(len(xs))])
    l = -(np_log_softmax(x, cls) * tgt * wb).sum(cls)
    ref = {"none": l, "sum": l.sum(), "mean": l.sum() / (x.size // c)}[reduction]
    check(F.cross_entropy(tensor(x), tensor(p), tensor(w) if weighted else None, reduction=reduction, label_smoothing=ls), ref)


def test_class_target_errors():
    x = tensor(rnd(3, 4))
    with pytest.raises(vkml.IndexOutOfRangeError, match=r"target 4 at position \(1,\)"): F.cross_entropy(x, tensor([0, 4, 1]))
    with pytest.raises(vkml.IndexOutOfRangeError, match="target -2"): F.nll_loss(x, tensor([0, -2, 1]))
    with pytest.raises(vkml.IndexOutOfRangeError, match="target 9"): F.cross_entropy(x, tensor([9, -100, 1]), ignore_index=9 + 1)
    F.cross_entropy(x, tensor([0, -100, 1])).numpy()  # ignore_index is not out of range
    with pytest.raises(vkml.DTypeError, match=r"\.long\(\)"): F.cross_entropy(x, tensor(np.array([0, 1, 2], np.int32)))
    with pytest.raises(vkml.ShapeError): F.cross_entropy(x, tensor([0, 1]))
    with pytest.raises(vkml.VkmlError, match="reduction"): F.cross_entropy(x, tensor([0, 1, 2]), reduction="avg")


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 2, 2, 3)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_pointwise_losses(shape, reduction, dtype):
    x, y = rnd(*shape, dtype=dtype), rnd(*shape, dtype=dtype)
    d = x.astype(np.float64) - y
    check(F.mse_loss(tensor(x), tensor(y), reduction), reduce_ref(d * d, reduction), dtype)
    check(F.l1_loss(tensor(x), tensor(y), reduction), reduce_ref(np.abs(d), reduction), dtype)
    for beta in (1.0, 0.5, 0.0):
        ad = np.abs(d)
        l = ad if beta == 0 else np.where(ad < beta, 0.5 * d * d / beta, ad - 0.5 * beta)
        check(F.smooth_l1_loss(tensor(x), tensor(y), reduction, beta), reduce_ref(l, reduction), dtype)


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(shape, reduction, weighted):
    p, y = rnd(*shape, lo=0.01, hi=0.99), rnd(*shape, lo=0.0, hi=1.0)
    p.flat[0], y.flat[0] = 0.0, 1.0   # log(0) clamps to -100
    w = rnd(*shape, lo=0.5, hi=2.0) if weighted else None
    p64 = p.astype(np.float64)
    with np.errstate(divide="ignore"):
        l = -(y * np.maximum(np.log(p64), -100) + (1 - y) * np.maximum(np.log(1 - p64), -100))
    if weighted: l = l * w
    check(F.binary_cross_entropy(tensor(p), tensor(y), tensor(w) if weighted else None, reduction), reduce_ref(l, reduction))


@pytest.mark.parametrize("shape", [(6,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("extra", ["none", "weight", "pos_weight"])
def test_bce_with_logits(shape, reduction, extra):
    x, y = rnd(*shape) * 4, rnd(*shape, lo=0.0, hi=1.0)
    x.flat[0], x.flat[-1] = 200.0, -200.0
    w = rnd(*shape, lo=0.5, hi=2.0) if extra == "weight" else None
    pw = rnd(shape[-1], lo=0.5, hi=3.0) if extra == "pos_weight" else None
    x64 = x.astype(np.float64)
    log_sig, log_1msig = -np.logaddexp(0, -x64), -np.logaddexp(0, x64)   # log σ(x), log(1 - σ(x))
    l = -((1.0 if pw is None else pw) * y * log_sig + (1 - y) * log_1msig)
    if w is not None: l = l * w
    out = F.binary_cross_entropy_with_logits(tensor(x), tensor(y), tensor(w) if w is not None else None, reduction,
                                             pos_weight=tensor(pw) if pw is not None else None)
    check(out, reduce_ref(l, reduction), atol=1e-4)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(shape, reduction, log_target):
    inp = np_log_softmax(rnd(*shape), -1).astype(np.float32)
    q = np.exp(np_log_softmax(rnd(*shape), -1))
    q.flat[0] = 0.0                                       # 0 log 0 = 0
    tgt = (np.log(np.where(q > 0, q, 1e-30)) if log_target else q).astype(np.float32)
    t64 = tgt.astype(np.float64)
    if log_target: l = np.exp(t64) * (t64 - inp)
    else: l = np.where(t64 > 0, t64 * np.log(np.where(t64 > 0, t64, 1)), 0.0) - t64 * inp
    ref = l.sum() / shape[0] if reduction == "batchmean" else reduce_ref(l, reduction)
    check(F.kl_div(tensor(inp), tensor(tgt), reduction, log_target), ref)


# ---------------------------------------------------------------- the same calls on Vulkan (parity with the CPU)

def _parity_cases():
    r = np.random.default_rng(7)
    f = lambda *s: r.standard_normal(s).astype(np.float32)
    u = lambda *s: r.uniform(0.05, 0.95, s).astype(np.float32)
    i64 = lambda hi, *s: r.integers(0, hi, s).astype(np.int64)
    x4, w4, b4 = f(2, 3, 7, 6), f(4, 3, 3, 3), f(4)
    lg, tg = f(4, 5) * 3, i64(5, 4)
    tg[0] = -100
    return {
        "matmul": lambda T: (F.matmul(T(f(2, 3, 4, 5)), T(f(3, 5, 2))), F.matmul(T(f(3, 4)), T(f(4))), F.matmul(T(f(2, 4, 5)), T(f(5, 3)))),
        "linear": lambda T: (F.linear(T(f(2, 3, 4)), T(f(6, 4)), T(f(6))),),
        "conv2d": lambda T: (F.conv2d(T(x4), T(w4), T(b4), stride=(2, 1), padding=1), F.conv2d(T(x4), T(f(6, 1, 2, 2)), groups=3, dilation=2),
                             F.conv2d(T(x4), T(f(2, 3, 2, 2)), padding="same")),
        "conv_transpose2d": lambda T: (F.conv_transpose2d(T(x4), T(f(3, 2, 3, 3)), T(f(2)), stride=2, padding=1, output_padding=1),),
        "max_pool2d": lambda T: (F.max_pool2d(T(x4), 3, 2, 1, ceil_mode=True), F.max_pool2d(T(x4), 2, dilation=2)),
        "avg_pool2d": lambda T: (F.avg_pool2d(T(x4), 3, 2, 1, ceil_mode=True, count_include_pad=False), F.avg_pool2d(T(x4), 2)),
        "adaptive_avg_pool2d": lambda T: (F.adaptive_avg_pool2d(T(x4), (3, 4)), F.adaptive_avg_pool2d(T(x4), 1)),
        "max_unpool2d": lambda T: (F.max_unpool2d(*F.max_pool2d(T(x4), 3, 2, 1, return_indices=True), 3, 2, 1, (7, 6)),
                                   *F.max_pool2d(T(x4), 2, 1, ceil_mode=True, return_indices=True)),
        "adaptive_max_pool2d": lambda T: (*F.adaptive_max_pool2d(T(x4), (3, 4), return_indices=True), F.adaptive_max_pool2d(T(x4), (7, 3)),
                                          F.avg_pool2d(T(x4), 3, 2, 1, divisor_override=4)),
        "unfold": lambda T: (F.unfold(T(x4), (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),),
        "fold": lambda T: (F.fold(F.unfold(T(x4), 3, padding=1), (7, 6), 3, padding=1),),
        "softmax": lambda T: (F.softmax(T(f(3, 4, 5) * 10), 1), F.softmax(T(np.array([[1000.0, 0.0, -1000.0]], np.float32)))),
        "log_softmax": lambda T: (F.log_softmax(T(f(3, 4, 5) * 10), -1),),
        "layer_norm": lambda T: (F.layer_norm(T(f(2, 3, 8)), 8, T(f(8)), T(f(8))),),
        "rms_norm": lambda T: (F.rms_norm(T(f(2, 3, 8)), (3, 8), T(f(3, 8))),),
        "batch_norm": lambda T: (F.batch_norm(T(x4), T(f(3)), T(u(3)), T(f(3)), T(f(3)), training=True),
                                 F.batch_norm(T(x4), T(f(3)), T(u(3)), T(f(3)), T(f(3))), *F.batch_norm_stats(T(x4))[1:]),
        "group_norm": lambda T: (F.group_norm(T(f(2, 4, 3, 3)), 2, T(f(4)), T(f(4))),),
        "dropout": lambda T: (F.dropout(T(f(8, 16)), 0.3),),
        "embedding": lambda T: (F.embedding(T(i64(6, 2, 3)), T(f(6, 4))),),
        "scaled_dot_product_attention": lambda T: (F.scaled_dot_product_attention(T(f(2, 4, 8)), T(f(2, 5, 8)), T(f(2, 5, 3)), T(f(4, 5) > 0)),
                                                   F.scaled_dot_product_attention(T(f(2, 4, 8)), T(f(2, 4, 8)), T(f(2, 4, 3)), is_causal=True)),
        "cross_entropy": lambda T: (F.cross_entropy(T(lg), T(tg), T(u(5)), label_smoothing=0.1), F.cross_entropy(T(lg), T(np.exp(np_log_softmax(lg, 1)).astype(np.float32))),
                                    F.cross_entropy(T(lg), T(tg), reduction="none")),
        "nll_loss": lambda T: (F.nll_loss(T(lg), T(tg)), F.nll_loss(T(lg), T(tg), T(u(5)), reduction="sum")),
        "mse_loss": lambda T: (F.mse_loss(T(f(3, 4)), T(f(3, 4))),),
        "l1_loss": lambda T: (F.l1_loss(T(f(3, 4)), T(f(3, 4)), "sum"),),
        "smooth_l1_loss": lambda T: (F.smooth_l1_loss(T(f(3, 4)), T(f(3, 4)), beta=0.5),),
        "binary_cross_entropy": lambda T: (F.binary_cross_entropy(T(u(3, 4)), T(u(3, 4))),),
        "binary_cross_entropy_with_logits": lambda T: (F.binary_cross_entropy_with_logits(T(f(3, 4) * 30), T(u(3, 4)), pos_weight=T(u(4))),),
        "kl_div": lambda T: (F.kl_div(T(np_log_softmax(f(3, 4), 1).astype(np.float32)), T(u(3, 4)), "batchmean"),),
    }


PARITY = _parity_cases()


def test_parity_covers_every_operator():
    assert set(PARITY) == TESTED_OPERATORS


@pytest.mark.parametrize("name", sorted(PARITY))
def test_vulkan_matches_cpu(name, vulkan):
    import vkml.frontend.functions as VF
    outs = {}
    for dev in ("cpu", vulkan):
        VF.manual_seed(11)          # dropout draws the same bits on both devices
        cases = _parity_cases()     # the same inputs for both
        ts = cases[name](lambda a: tensor(a, device=dev))
        outs[dev] = [t.numpy() for t in ts]
    for c, v in zip(outs["cpu"], outs[vulkan]):
        assert c.shape == v.shape and c.dtype == v.dtype
        np.testing.assert_allclose(v, c, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- gradients of the compositions (float64 central differences)

def _grad_cases():
    r = np.random.default_rng(3)
    f = lambda *s: r.standard_normal(s)
    u = lambda *s: r.uniform(0.1, 0.9, s)
    import vkml.frontend.functions as VF
    T = lambda a: tensor(a)
    tg = np.array([0, 3, -100, 2], np.int64)
    return {
        "matmul": (lambda a, b: F.matmul(a, b), [f(2, 2, 3), f(3, 2)]),
        "linear": (lambda x, w, b: F.linear(x, w, b), [f(2, 3), f(2, 3), f(2)]),
        "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, dilation=(1, 2)), [f(1, 2, 5, 5), f(2, 2, 2, 2), f(2)]),
        "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1), [f(1, 2, 3, 3), f(2, 1, 3, 3)]),
        "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [f(1, 2, 5, 5)]),
        "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), [f(1, 2, 5, 5)]),
        "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [f(1, 2, 5, 4)]),
        "max_unpool2d": (lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2), [f(1, 2, 4, 4)]),
        "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (2, 3)), [f(1, 2, 5, 4)]),
        "unfold": (lambda x: F.unfold(x, 2, padding=1, stride=2), [f(1, 2, 3, 3)]),
        "fold": (lambda x: F.fold(x, (3, 3), 2), [f(1, 8, 4)]),
        "softmax": (lambda x: F.softmax(x, 1), [f(3, 4)]),
        "log_softmax": (lambda x: F.log_softmax(x, 0), [f(3, 4)]),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, 4, w, b), [f(3, 4), f(4), f(4)]),
        "rms_norm": (lambda x, w: F.rms_norm(x, 4, w), [f(3, 4), f(4)]),
        "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [f(4, 3), f(3), f(3)]),
        "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), [f(2, 4, 2), f(4), f(4)]),
        "dropout": (lambda x: (VF.manual_seed(5), F.dropout(x, 0.4))[1], [f(4, 5)]),
        "embedding": (lambda w: F.embedding(T(np.array([[0, 2], [2, 1]])), w), [f(3, 2)]),
        "scaled_dot_product_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [f(3, 2), f(3, 2), f(3, 2)]),
        "cross_entropy": (lambda x, w: F.cross_entropy(x, T(tg), w, label_smoothing=0.2), [f(4, 5), u(5)]),
        "nll_loss": (lambda x: F.nll_loss(x, T(tg), reduction="sum"), [f(4, 5)]),
        "mse_loss": (lambda x, y: F.mse_loss(x, y), [f(3, 4), f(3, 4)]),
        "l1_loss": (lambda x, y: F.l1_loss(x, y), [f(3, 4), f(3, 4)]),
        "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y, beta=0.7), [f(3, 4), f(3, 4)]),
        "binary_cross_entropy": (lambda p, y: F.binary_cross_entropy(p, y), [u(3, 4), u(3, 4)]),
        "binary_cross_entropy_with_logits": (lambda x, y, pw: F.binary_cross_entropy_with_logits(x, y, pos_weight=pw), [f(3, 4) * 3, u(3, 4), u(4)]),
        "kl_div": (lambda x, y: F.kl_div(x, y, "batchmean"), [f(3, 4), u(3, 4)]),
    }


def test_grad_cases_cover_every_operator():
    assert set(_grad_cases()) == TESTED_OPERATORS


@pytest.mark.parametrize("name", sorted(_grad_cases()))
def test_gradcheck(name):
    fn, inputs = _grad_cases()[name]
    assert gradcheck(fn, inputs)
