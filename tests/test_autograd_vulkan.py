"""Autograd on Vulkan: gradients against the CPU oracle's, and what a training step costs in submissions."""
import numpy as np
import pytest

from vkml.core.dtypes import DeviceError, float32
from vkml.core.ops import Op
from vkml.frontend.tensor import apply, tensor, realize
import vkml.frontend.autograd as ag

from test_autograd import CASES, r

pytestmark = pytest.mark.vulkan


# (the validation-message check is the autouse fixture in conftest.py)


def _stats():
    import vkml.backends.vulkan as vkv
    return vkv.stats()

def _submissions(): return _stats()["submissions"]

def _np32(a):
    a = np.asarray(a)
    return a.astype(np.float32) if a.dtype.kind == "f" else a

def _grads(fn, inputs, g_seed, device):
    "The output and every float input's gradient for upstream gradient N(0,1)(seed), computed on `device`."
    ts = [tensor(_np32(a), device=device, requires_grad=np.asarray(a).dtype.kind == "f") for a in inputs]
    out = fn(*ts)
    G = np.random.default_rng(g_seed).standard_normal(out.shape).astype(out.dtype.np)
    out.backward(gradient=tensor(G, device=device))
    grads = [t.grad for t in ts if t.requires_grad]
    realize(out, *[g for g in grads if g is not None])
    return [out.numpy()] + [None if g is None else g.numpy() for g in grads]   # None: no path (ASSIGN's target)


VK_CASES = [(op, i) for op, cases in CASES.items() for i in range(len(cases))
            if op is not Op.PROD and op.kind != "linalg"]   # PROD and the factorizations: CPU only

@pytest.mark.parametrize("op,i", VK_CASES, ids=lambda v: v.name if isinstance(v, Op) else str(v))
def test_vulkan_gradients_match_the_cpu(op, i, vulkan):
    fn, inputs = CASES[op][i]
    vk = _grads(fn, inputs, 7, vulkan)
    cpu = _grads(fn, inputs, 7, "cpu")
    for v, c in zip(vk, cpu):
        assert (v is None) == (c is None)
        if c is None: continue
        scale = max(1.0, float(np.max(np.abs(c)))) if c.size else 1.0
        np.testing.assert_allclose(v.astype(np.float64), c.astype(np.float64), rtol=1e-4, atol=1e-5 * scale)

def test_vulkan_where_gradient(vulkan):
    cond = np.array([True, False, True, False])
    out = []
    for d in (vulkan, "cpu"):
        a, b = tensor(r(4).astype(np.float32), device=d, requires_grad=True), tensor(r(4, seed=1).astype(np.float32), device=d, requires_grad=True)
        y = apply(Op.WHERE, tensor(cond, device=d), a, b)
        y.backward(gradient=tensor(np.arange(4, dtype=np.float32), device=d))
        out.append((a.grad.numpy(), b.grad.numpy()))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


# --- submissions ----------------------------------------------------------------------------------------

def _mlp(device, seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(1, 8, 16), (1, 1, 16), (1, 16, 4), (1, 1, 4)]
    params = [tensor((rng.standard_normal(s) * 0.3).astype(np.float32), device=device, requires_grad=True) for s in shapes]
    xb = tensor(rng.standard_normal((1, 32, 8)).astype(np.float32), device=device)
    yb = tensor(rng.standard_normal((1, 32, 4)).astype(np.float32), device=device)
    return params, xb, yb

def _loss(params, xb, yb):
    w1, b1, w2, b2 = params
    def lin(x, w, b): return apply(Op.ADD, apply(Op.MATMUL, x, w), apply(Op.EXPAND, b, shape=(1, x.shape[1], w.shape[2]), dtype=float32))
    d = apply(Op.SUB, lin(apply(Op.RELU, lin(xb, w1, b1)), w2, b2), yb)
    return apply(Op.MEAN, apply(Op.MUL, d, d), arg=((0, 1, 2), False))

def _sgd(params, lr=0.1):
    return [apply(Op.SUB, p, apply(Op.MUL, p.grad, ag._k(lr, p.grad))).detach().requires_grad_() for p in params]

def test_forward_and_backward_in_one_submission(vulkan):
    params, xb, yb = _mlp(vulkan)
    loss = _loss(params, xb, yb)
    loss.backward()
    n0 = _submissions()
    realize(loss, *(p.grad for p in params))
    assert _submissions() - n0 == 1

def test_forward_backward_update_and_loss_read_in_one_submission(vulkan):
    params, xb, yb = _mlp(vulkan)
    loss = _loss(params, xb, yb)
    loss.backward()
    new = _sgd(params)
    assert len(new) >= 4
    n0 = _submissions()
    realize(loss, *new)
    value = loss.item()
    assert _submissions() - n0 == 1, "reading the loss after the step's realize needed another submission"
    # and the values are the CPU's
    cparams, cxb, cyb = _mlp("cpu")
    closs = _loss(cparams, cxb, cyb)
    closs.backward()
    cnew = _sgd(cparams)
    np.testing.assert_allclose(value, closs.item(), rtol=1e-5)
    for p, c in zip(new, cnew):
        np.testing.assert_allclose(p.numpy(), c.numpy(), rtol=1e-5, atol=1e-6)

def test_lazy_detach_is_one_submission_per_step_and_eager_is_more(vulkan, monkeypatch):
    def step(eager):
        monkeypatch.setattr(ag, "EAGER_DETACH", eager)
        params, xb, yb = _mlp(vulkan)
        n0 = _submissions()
        loss = _loss(params, xb, yb)
        loss.backward()
        new = _sgd(params)
        realize(loss, *new)
        loss.item()
        return _submissions() - n0
    lazy, eager = step(False), step(True)
    assert lazy == 1
    assert eager >= 4   # one per eagerly detached parameter, at least

def test_the_deferred_loss_joins_the_optimisers_realize(vulkan):
    params, xb, yb = _mlp(vulkan)
    loss = _loss(params, xb, yb)
    loss.backward()
    new = _sgd(params)
    n0 = _submissions()
    realize(*new)                      # the loss is not named: backward deferred it
    loss.item()
    assert _submissions() - n0 == 1

def test_vulkan_pow_gradient_with_a_negative_base(vulkan):
    out = []
    for d in (vulkan, "cpu"):
        a = tensor(np.array([-1.5, -0.7, 0.8, 0.0], np.float32), device=d, requires_grad=True)
        b = tensor(np.array([2.0, 3.0, 2.0, 2.0], np.float32), device=d, requires_grad=True)
        y = apply(Op.POW, a, b)
        y.backward(gradient=tensor(np.ones(4, np.float32), device=d))
        out.append((y.numpy(), a.grad.numpy(), b.grad.numpy()))
    for v, c in zip(*out):
        np.testing.assert_allclose(v, c, rtol=1e-5, atol=1e-6)


def test_reading_gradients_one_by_one_computes_backward_once():
    """backward() defers every gradient it sets: the first read computes them all in one realize, as PyTorch's backward
    computes them all. Before, each read realized its own gradient's graph, and a deep net's gradients read one by one
    (a log of their norms, a check against another run) computed the layers behind each again: 6 layers, 6 realizes."""
    import vkml.nn.functional as F
    rng = np.random.default_rng(0)
    w0 = [rng.standard_normal((16, 16)).astype(np.float32) * 0.3 for _ in range(6)]
    x0 = rng.standard_normal((4, 16)).astype(np.float32)
    grads = {}
    for device in ("cpu", "vulkan"):
        ws = [tensor(w, device=device, requires_grad=True) for w in w0]
        h = tensor(x0, device=device)
        for w in ws: h = F.gelu(h @ w)
        h.sum().backward()
        if device == "vulkan": before = _stats()["realizes"]
        grads[device] = [w.grad.numpy() for w in ws]
        if device == "vulkan": assert _stats()["realizes"] - before == 1
    for a, b in zip(grads["vulkan"], grads["cpu"]): np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
