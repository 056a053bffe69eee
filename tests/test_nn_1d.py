"""The 1-D convolution and pooling of vkml.nn.functional (conv1d, max_pool1d, avg_pool1d, adaptive_avg_pool1d) and
their modules (Conv1d, MaxPool1d, AvgPool1d, AdaptiveAvgPool1d), on the CPU and on Vulkan, against independent
numpy references written here as direct loops over the 1-D definitions (PyTorch's documented formulas); their
gradients by gradcheck on the CPU (float64) and on Vulkan against the CPU's; PyTorch's parameter shapes, names
and default initialisation; and the typed errors for bad arguments."""
import math
import numpy as np
import pytest

import vkml
import vkml.frontend.autograd  # noqa: F401  (Tensor.backward)
import vkml.nn as nn
import vkml.nn.functional as F
from vkml.frontend.gradcheck import gradcheck
from vkml.core.ops import Op
from vkml.frontend.tensor import tensor, toposort, realize
import oracle

TESTED_OPERATORS = {"conv1d", "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d"}
"The operator-table rows this file checks against a reference (tests/test_registry.py counts them)."

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
RNG = np.random.default_rng(11)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# --- independent references (float64, loops over the 1-D definitions) -------------------------------------

def out_len(L, k, s, p, d, ceil):
    "PyTorch's output length: floor (or ceil) of (L + 2p - d(k-1) - 1)/s, plus 1; a ceil window may not start in the right padding."
    span = L + 2 * p - d * (k - 1) - 1
    n = (-(-span // s) if ceil else span // s) + 1
    if ceil and (n - 1) * s >= L + p: n -= 1
    return n


def conv1d_ref(x, w, b, stride=1, pad=(0, 0), dil=1, groups=1):
    "y[n, o, i] = b[o] + sum over c in o's group and t < k of xpad[n, c, i*stride + t*dil] * w[o, c, t]."
    x, w = x.astype(np.float64), w.astype(np.float64)
    N, C, L = x.shape
    O, cg, k = w.shape
    xp = np.zeros((N, C, L + pad[0] + pad[1])); xp[:, :, pad[0]:pad[0] + L] = x
    lo = (L + pad[0] + pad[1] - dil * (k - 1) - 1) // stride + 1
    og = O // groups
    y = np.zeros((N, O, lo))
    for n in range(N):
        for o in range(O):
            g = o // og
            for i in range(lo):
                acc = 0.0 if b is None else float(b[o])
                for c in range(cg):
                    for t in range(k):
                        acc += xp[n, g * cg + c, i * stride + t * dil] * w[o, c, t]
                y[n, o, i] = acc
    return y


def max_pool1d_ref(x, k, s, p, d, ceil):
    "(values, indices): each window's maximum and the position along L of its first maximum (padding never wins)."
    N, C, L = x.shape
    lo = out_len(L, k, s, p, d, ceil)
    y, idx = np.zeros((N, C, lo)), np.zeros((N, C, lo), np.int64)
    for n in range(N):
        for c in range(C):
            for i in range(lo):
                best, at = -math.inf, -1
                for t in range(k):
                    j = i * s - p + t * d
                    if 0 <= j < L and (at < 0 or x[n, c, j] > best): best, at = float(x[n, c, j]), j
                y[n, c, i], idx[n, c, i] = best, at
    return y, idx


def avg_pool1d_ref(x, k, s, p, ceil, include_pad):
    "Each window's sum over its size: clipped to the padded input (count_include_pad) or to the input."
    N, C, L = x.shape
    lo = out_len(L, k, s, p, 1, ceil)
    y = np.zeros((N, C, lo))
    for i in range(lo):
        a = i * s - p
        e = min(a + k, L + p)
        size = e - a
        a, e = max(a, 0), min(e, L)
        y[:, :, i] = x[:, :, a:e].astype(np.float64).sum(-1) / (size if include_pad else e - a)
    return y


def adaptive_avg_pool1d_ref(x, o):
    "Window i covers floor(i*L/o) .. ceil((i+1)*L/o)."
    L = x.shape[-1]
    return np.stack([x[..., (i * L) // o: -(-((i + 1) * L) // o)].astype(np.float64).mean(-1) for i in range(o)], -1)


def close(got, want, terms=None, k=1):
    "Within the float32 reference bound, scaled for a sum of `k` terms of magnitude sum |terms|."
    rtol, atol = oracle.REFERENCE["float32"]
    oracle.assert_close(got.numpy() if hasattr(got, "numpy") else got, want, rtol=rtol, atol=atol, k=k, terms=terms,
                        same_dtype=False)


# --- forward against the references, on each device --------------------------------------------------------

CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, groups, bias)
    ((2, 3, 9), (4, 3, 3), 1, 0, 1, 1, True),
    ((1, 4, 11), (6, 2, 3), 2, 1, 1, 2, True),
    ((2, 2, 12), (2, 1, 3), 1, 2, 2, 2, False),
    ((1, 3, 10), (5, 3, 4), 3, 2, 2, 1, True),
    ((3, 2, 5), (3, 2, 1), 1, 0, 1, 1, False),
    ((1, 6, 8), (6, 1, 5), 1, 2, 1, 6, True),     # depthwise
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("xs,ws,s,p,d,g,bias", CONV_CASES)
def test_conv1d(xs, ws, s, p, d, g, bias, device):
    x, w, b = rnd(*xs), rnd(*ws), (rnd(ws[0]) if bias else None)
    t = lambda a: None if a is None else tensor(a, device=device)
    got = F.conv1d(t(x), t(w), t(b), stride=s, padding=p, dilation=d, groups=g)
    assert got.device.startswith(device) and got.dtype is vkml.float32
    terms = conv1d_ref(np.abs(x), np.abs(w), None if b is None else np.abs(b), s, (p, p), d, g)
    close(got, conv1d_ref(x, w, b, s, (p, p), d, g), terms, k=ws[1] * ws[2] + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_conv1d_padding_modes_unbatched_and_tuples(device):
    x, w = rnd(3, 9), rnd(2, 3, 4)
    X, W = tensor(x, device=device), tensor(w, device=device)
    close(F.conv1d(X, W), conv1d_ref(x[None], w, None)[0])                         # (C, L) in, (O, L') out
    close(F.conv1d(X, W, padding="valid"), conv1d_ref(x[None], w, None)[0])
    close(F.conv1d(X[None], W, stride=(2,), padding=(1,), dilation=(2,)), conv1d_ref(x[None], w, None, 2, (1, 1), 2))
    for d in (1, 2):   # 'same' with an even kernel: PyTorch puts the extra element on the right
        tot = d * (4 - 1)
        y = F.conv1d(X[None], W, padding="same", dilation=d)
        assert y.shape == (1, 2, 9)
        close(y, conv1d_ref(x[None], w, None, 1, (tot // 2, tot - tot // 2), d))


MAX_CASES = [  # (L, kernel, stride, padding, dilation, ceil_mode)
    (10, 2, None, 0, 1, False), (11, 3, 2, 1, 1, False), (11, 3, 2, 1, 1, True), (12, 3, 1, 1, 2, False),
    (9, 4, 3, 2, 1, True), (7, 7, 1, 0, 1, False), (8, 2, 3, 1, 3, True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L,k,s,p,d,ceil", MAX_CASES)
def test_max_pool1d(L, k, s, p, d, ceil, device):
    x = rnd(2, 3, L)
    y, i = F.max_pool1d(tensor(x, device=device), k, s, p, d, ceil, return_indices=True)
    ry, ri = max_pool1d_ref(x, k, k if s is None else s, p, d, ceil)
    oracle.assert_close(y.numpy(), ry.astype(np.float32))      # a maximum is exact
    assert i.dtype is vkml.int64
    np.testing.assert_array_equal(i.numpy(), ri)
    np.testing.assert_array_equal(F.max_pool1d(tensor(x[0], device=device), k, s, p, d, ceil).numpy(), ry[0])   # (C, L)


def test_max_pool1d_ties_and_nan_take_the_first():
    x = np.array([[[1.0, 1.0, 0.0, np.nan, 2.0, 2.0]]], np.float32)
    y, i = F.max_pool1d(tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(i.numpy(), [[[0, 3, 4]]])
    assert np.isnan(y.numpy()[0, 0, 1]) and y.numpy()[0, 0, 2] == 2


AVG_CASES = [  # (L, kernel, stride, padding, ceil_mode, count_include_pad)
    (10, 2, None, 0, False, True), (11, 3, 2, 1, False, True), (11, 3, 2, 1, False, False), (11, 3, 2, 1, True, True),
    (11, 3, 2, 1, True, False), (9, 4, 3, 2, True, False), (7, 7, 1, 3, False, False), (6, 1, 1, 0, False, True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L,k,s,p,ceil,cip", AVG_CASES)
def test_avg_pool1d(L, k, s, p, ceil, cip, device):
    x = rnd(2, 3, L)
    got = F.avg_pool1d(tensor(x, device=device), k, s, p, ceil, cip)
    close(got, avg_pool1d_ref(x, k, k if s is None else s, p, ceil, cip), avg_pool1d_ref(np.abs(x), k, k if s is None else s, p, ceil, cip), k=k)
    close(F.avg_pool1d(tensor(x[1], device=device), k, s, p, ceil, cip), avg_pool1d_ref(x[1:2], k, k if s is None else s, p, ceil, cip)[0],
          avg_pool1d_ref(np.abs(x[1:2]), k, k if s is None else s, p, ceil, cip)[0], k=k)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("L,o", [(8, 4), (8, 3), (7, 1), (5, 5), (3, 7), (10, (4,))])
def test_adaptive_avg_pool1d(L, o, device):
    x = rnd(2, 3, L)
    n = o[0] if isinstance(o, tuple) else o
    got = F.adaptive_avg_pool1d(tensor(x, device=device), o)
    close(got, adaptive_avg_pool1d_ref(x, n), adaptive_avg_pool1d_ref(np.abs(x), n), k=-(-L // n) + 1)
    close(F.adaptive_avg_pool1d(tensor(x[0], device=device), o), adaptive_avg_pool1d_ref(x[0], n),
          adaptive_avg_pool1d_ref(np.abs(x[0]), n), k=-(-L // n) + 1)


def test_the_1d_functions_are_the_2d_ops_on_a_view():
    "No new graph op: conv1d is a CONV2D, the pools MAXPOOL2D and AVGPOOL2D, reached through reshapes."
    x = tensor(rnd(1, 2, 8))
    ops = lambda t: {n.op for n in toposort([t.node])}
    assert Op.CONV2D in ops(F.conv1d(x, tensor(rnd(3, 2, 3))))
    assert Op.MAXPOOL2D in ops(F.max_pool1d(x, 2)) and Op.AVGPOOL2D in ops(F.avg_pool1d(x, 2))
    assert all(Op.PROD not in ops(t) for t in (F.adaptive_avg_pool1d(x, 3), F.conv1d(x, tensor(rnd(3, 2, 3)))))


# --- modules ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_conv1d_module(device):
    vkml.frontend.functions.manual_seed(0)
    m = nn.Conv1d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2, device=device)
    assert m.weight.shape == (6, 2, 3) and m.bias.shape == (6,) and list(m.state_dict()) == ["weight", "bias"]
    assert (m.kernel_size, m.stride, m.padding, m.dilation, m.groups) == ((3,), (2,), (1,), (2,), 2)
    assert all(p.device.startswith(device) for p in m.parameters())
    x = rnd(2, 4, 13)
    w, b = m.weight.numpy(), m.bias.numpy()
    close(m(tensor(x, device=device)), conv1d_ref(x, w, b, 2, (1, 1), 2, 2),
          conv1d_ref(np.abs(x), np.abs(w), np.abs(b), 2, (1, 1), 2, 2), k=7)
    close(m(tensor(x[0], device=device)), conv1d_ref(x[:1], w, b, 2, (1, 1), 2, 2)[0],
          conv1d_ref(np.abs(x[:1]), np.abs(w), np.abs(b), 2, (1, 1), 2, 2)[0], k=7)
    no_bias = nn.Conv1d(4, 6, 3, bias=False, padding="same", device=device)
    assert no_bias.bias is None and list(no_bias.state_dict()) == ["weight"] and no_bias(tensor(x, device=device)).shape == (2, 6, 13)


def test_conv1d_default_init_is_pytorchs():
    "Kaiming-uniform with a=√5: the weight and the bias both drawn from U(±1/√fan_in), fan_in = in/groups · k."
    vkml.frontend.functions.manual_seed(3)
    m = nn.Conv1d(8, 64, 5, groups=2)
    bound = 1 / math.sqrt(4 * 5)
    for p in (m.weight.numpy(), m.bias.numpy()):
        assert np.abs(p).max() <= bound and np.abs(p).max() > 0.8 * bound
    w = m.weight.numpy().ravel()
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound      # uniform's standard deviation
    vkml.frontend.functions.manual_seed(3)
    assert np.array_equal(nn.Conv1d(8, 64, 5, groups=2).weight.numpy(), m.weight.numpy())   # one seed, one model


def test_a_pytorch_state_dict_loads_by_name():
    "A state dict of PyTorch's names and shapes (numpy arrays, as one saved from torch.nn.Conv1d converts) loads."
    sd = {"0.weight": rnd(6, 4, 3), "0.bias": rnd(6), "4.weight": rnd(2, 6), "4.bias": rnd(2)}
    m = nn.Sequential(nn.Conv1d(4, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(6, 2))
    m.load_state_dict(sd)
    x = rnd(2, 4, 10)
    h = np.maximum(conv1d_ref(x, sd["0.weight"], sd["0.bias"]), 0).mean(-1)
    close(m(tensor(x)), h @ sd["4.weight"].T.astype(np.float64) + sd["4.bias"], np.abs(h) @ np.abs(sd["4.weight"]).T + np.abs(sd["4.bias"]), k=40)
    with pytest.raises(vkml.VkmlError):
        nn.Conv1d(4, 6, 3).load_state_dict({"weight": rnd(6, 4, 1, 3), "bias": rnd(6)})   # a Conv2d's weight


@pytest.mark.parametrize("device", DEVICES)
def test_pool_modules(device):
    x = rnd(2, 3, 11)
    X = tensor(x, device=device)
    y, i = nn.MaxPool1d(3, 2, 1, return_indices=True, ceil_mode=True)(X)
    ry, ri = max_pool1d_ref(x, 3, 2, 1, 1, True)
    oracle.assert_close(y.numpy(), ry.astype(np.float32)); np.testing.assert_array_equal(i.numpy(), ri)
    oracle.assert_close(nn.MaxPool1d(2)(X).numpy(), max_pool1d_ref(x, 2, 2, 0, 1, False)[0].astype(np.float32))
    a = nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False)
    assert (a.kernel_size, a.stride, a.padding) == ((3,), (2,), (1,))
    close(a(X), avg_pool1d_ref(x, 3, 2, 1, False, False), avg_pool1d_ref(np.abs(x), 3, 2, 1, False, False), k=3)
    close(nn.AvgPool1d(4)(X), avg_pool1d_ref(x, 4, 4, 0, False, True), avg_pool1d_ref(np.abs(x), 4, 4, 0, False, True), k=4)
    close(nn.AdaptiveAvgPool1d(4)(X), adaptive_avg_pool1d_ref(x, 4), adaptive_avg_pool1d_ref(np.abs(x), 4), k=4)
    assert nn.MaxPool1d(2).stride == 2 and "output_size=4" in repr(nn.AdaptiveAvgPool1d(4))


# --- gradients ---------------------------------------------------------------------------------------------------

def no_ties(*shape, seed=0):
    "Distinct values (a max pool's gradient is only defined away from ties)."
    return np.random.default_rng(seed).permutation(np.linspace(-1, 1, math.prod(shape))).reshape(shape)


GRAD_CASES = {   # name -> (fn of tensors, float64 inputs)
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b), [rnd(2, 3, 7), rnd(4, 3, 3), rnd(4)]),
    "conv1d_s2_p1_d2_g2": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2),
                           [rnd(1, 4, 9), rnd(6, 2, 2), rnd(6)]),
    "conv1d_same": (lambda x, w: F.conv1d(x, w, padding="same"), [rnd(3, 6), rnd(2, 3, 4)]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1), [no_ties(2, 2, 9)]),
    "max_pool1d_ceil_d2": (lambda x: F.max_pool1d(x, 2, 3, 1, 2, True), [no_ties(1, 2, 10, seed=1)]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1, True, False), [rnd(2, 2, 8)]),
    "avg_pool1d_pad": (lambda x: F.avg_pool1d(x, 4, 1, 2), [rnd(1, 3, 6)]),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 3), [rnd(2, 2, 8)]),
    "adaptive_avg_pool1d_up": (lambda x: F.adaptive_avg_pool1d(x, 5), [rnd(1, 2, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradcheck(name):
    fn, inputs = GRAD_CASES[name]
    assert gradcheck(fn, [a.astype(np.float64) for a in inputs])


def test_conv1d_module_gradcheck():
    m = nn.Conv1d(2, 4, 3, padding=1, groups=2)
    def fn(x, w, b):
        m._parameters.update(weight=w, bias=b)
        return m(x)
    saved = dict(m._parameters)
    try: assert gradcheck(fn, [rnd(2, 2, 6).astype(np.float64), m.weight.numpy(), m.bias.numpy()])
    finally: m._parameters.update(saved)


def grads(fn, inputs, device):
    "The output and each input's gradient for a fixed upstream gradient, computed on `device`."
    ts = [tensor(a.astype(np.float32), device=device, requires_grad=True) for a in inputs]
    out = fn(*ts)
    G = np.random.default_rng(5).standard_normal(out.shape).astype(np.float32)
    out.backward(gradient=tensor(G, device=device))
    realize(out, *[t.grad for t in ts])
    return [out.numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.vulkan
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_vulkan_gradients_equal_the_cpus(name):
    fn, inputs = GRAD_CASES[name]
    for v, c in zip(grads(fn, inputs, "vulkan"), grads(fn, inputs, "cpu")):
        oracle.assert_close(v, c, k=32, atol=1e-5, what=name)   # sums of at most 32 terms, in another order


# --- typed errors -----------------------------------------------------------------------------------------------

X3, W3 = tensor(rnd(2, 3, 8)), tensor(rnd(4, 3, 3))

@pytest.mark.parametrize("call,exc,text", [
    (lambda: F.conv1d(tensor(rnd(2, 3, 8, 8)), W3), vkml.ShapeError, "3-D (batched) or 2-D"),   # an image
    (lambda: F.conv1d(tensor(rnd(8)), W3), vkml.ShapeError, "3-D (batched) or 2-D"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 3, 3, 3))), vkml.ShapeError, "weight must be 3-D"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 3))), vkml.ShapeError, "weight must be 3-D"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 3, 9))), vkml.ShapeError, "larger than"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 3, 5)), dilation=3), vkml.ShapeError, "larger than"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 3, 9)), padding="valid"), vkml.ShapeError, "larger than"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 2, 3))), vkml.ShapeError, "channels"),
    (lambda: F.conv1d(X3, tensor(rnd(4, 1, 3)), groups=3), vkml.ShapeError, "channels"),
    (lambda: F.conv1d(X3, W3, groups=0), vkml.ArgumentError, "groups"),
    (lambda: F.conv1d(X3, W3, tensor(rnd(3))), vkml.ShapeError, "bias"),
    (lambda: F.conv1d(X3, W3, stride=0), vkml.ArgumentError, "stride must be >= 1"),
    (lambda: F.conv1d(X3, W3, stride=(1, 1)), vkml.ArgumentError, "1-tuple"),
    (lambda: F.conv1d(X3, W3, padding=-1), vkml.ArgumentError, "padding must be >= 0"),
    (lambda: F.conv1d(X3, W3, padding="full"), vkml.ArgumentError, "'same' or 'valid'"),
    (lambda: F.conv1d(X3, W3, stride=2, padding="same"), vkml.ArgumentError, "stride 1"),
    (lambda: F.conv1d(X3, W3, dilation=0), vkml.ArgumentError, "dilation"),
    (lambda: F.conv1d(tensor(np.ones((2, 3, 8), np.int64)), W3), vkml.DTypeError, ".float()"),
    (lambda: F.conv1d(X3, W3.half()), vkml.DTypeError, "cast"),
    (lambda: F.conv1d(rnd(2, 3, 8), W3), vkml.DTypeError, "Tensor"),
    (lambda: F.max_pool1d(X3, 9), vkml.ShapeError, "larger than"),
    (lambda: F.max_pool1d(X3, 3, dilation=4), vkml.ShapeError, "larger than"),
    (lambda: F.max_pool1d(X3, 2, padding=2), vkml.ArgumentError, "half the kernel"),
    (lambda: F.max_pool1d(X3, 0), vkml.ArgumentError, "kernel_size"),
    (lambda: F.max_pool1d(X3, (2, 2)), vkml.ArgumentError, "1-tuple"),
    (lambda: F.max_pool1d(X3, 2, ceil_mode=1), vkml.ArgumentError, "ceil_mode"),
    (lambda: F.max_pool1d(tensor(rnd(1, 2, 3, 8)), 2), vkml.ShapeError, "3-D (batched) or 2-D"),
    (lambda: F.max_pool1d(tensor(np.arange(8).reshape(1, 1, 8)), 2), vkml.DTypeError, ".float()"),
    (lambda: F.avg_pool1d(X3, 9), vkml.ShapeError, "larger than"),
    (lambda: F.avg_pool1d(X3, 3, stride=-1), vkml.ArgumentError, "stride"),
    (lambda: F.avg_pool1d(X3, 3, padding=2), vkml.ArgumentError, "half the kernel"),
    (lambda: F.avg_pool1d(X3, 2, count_include_pad="yes"), vkml.ArgumentError, "count_include_pad"),
    (lambda: F.adaptive_avg_pool1d(X3, 0), vkml.ArgumentError, "positive"),
    (lambda: F.adaptive_avg_pool1d(X3, (2, 2)), vkml.ArgumentError, "1-tuple"),
    (lambda: F.adaptive_avg_pool1d(X3, None), vkml.ArgumentError, "output_size"),
    (lambda: F.adaptive_avg_pool1d(tensor(np.zeros((1, 2, 0), np.float32)), 2), vkml.ShapeError, "empty"),
    (lambda: nn.Conv1d(4, 6, 3, groups=4), vkml.ArgumentError, "divisible"),
    (lambda: nn.Conv1d(4, 6, 3, groups=0), vkml.ArgumentError, "groups"),
    (lambda: nn.Conv1d(4, 6, (3, 3)), vkml.ArgumentError, "1-tuple"),
    (lambda: nn.Conv1d(4, 6, 3, padding_mode="circular"), vkml.ArgumentError, "zeros"),
    (lambda: nn.Conv1d(4, 6, 3, dtype=vkml.float16), vkml.DTypeError, "float32"),
    (lambda: nn.Conv1d(4, 6, 3, stride=2, padding="same"), vkml.ArgumentError, "stride 1"),
    (lambda: nn.Conv1d(3, 4, 3)(tensor(rnd(2, 3, 8).astype(np.float16))), vkml.DTypeError, "x.float()"),
    (lambda: nn.MaxPool1d(2)(rnd(2, 3, 8)), vkml.DTypeError, "vkml Tensor"),
])
def test_typed_errors(call, exc, text):
    with pytest.raises(exc) as e: call()
    assert isinstance(e.value, vkml.VkmlError) and text in str(e.value), str(e.value)
    assert "2d" not in str(e.value), str(e.value)    # the message names the 1-D call, not the 2-D op under it
