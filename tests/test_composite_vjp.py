"""`composite_vjp`: a function built from several ops with one gradient rule for all of them (PyTorch's
autograd.Function), and batch norm's training gradient through it: two reductions over the activation in backward,
side by side, where the ops' own rules made four or five, one waiting for another; second derivatives exact."""
import gc
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
from vkml.core.dtypes import InplaceError
from vkml.frontend.autograd import composite_vjp, _composites, grad
from vkml.frontend.gradcheck import gradcheck, gradgradcheck
from vkml.frontend.tensor import schedule
from vkml.engine.schedule import FUSED_REDUCE


def r(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape)


def test_backward_uses_the_composite_rule_and_skips_the_ops_between():
    x = vkml.tensor(np.array([1.0, 2.0, 3.0], np.float32)).requires_grad_()
    w = vkml.tensor(np.array([0.5, 0.5, 0.5], np.float32)).requires_grad_()
    cube = composite_vjp(x * x * x + w, (x, None, w), lambda g: (g * 7.0, None, g * 2.0))   # (a rule of our own)
    cube.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [7.0, 7.0, 7.0])   # the rule's, not 3x²
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0, 2.0])
    assert len(_composites) >= 1
    del cube; gc.collect()
    assert not any(True for _ in _composites), "a composite's entry outlives its output"


def test_no_composite_is_kept_without_grad():
    x = vkml.tensor(np.ones(3, np.float32))
    composite_vjp(x * 2.0, (x,), lambda g: (g,))
    assert not _composites


def bn_grads_numpy(x, w, g, eps=1e-5):
    "Batch norm's training gradients in closed form (float64)."
    dims = (0,) + tuple(range(2, x.ndim)); n = x.size // x.shape[1]
    cs = (1, -1) + (1,) * (x.ndim - 2)
    mu = x.mean(dims, keepdims=True); var = ((x - mu) ** 2).mean(dims, keepdims=True)
    r_ = 1 / np.sqrt(var + eps); xhat = (x - mu) * r_
    sg, sgx = g.sum(dims, keepdims=True), (g * xhat).sum(dims, keepdims=True)
    dx = w.reshape(cs) * r_ * (g - sg / n - xhat * sgx / n)
    return dx, sgx.reshape(-1), sg.reshape(-1)


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 4, 3, 3)])
def test_batch_norm_gradients_match_the_closed_form(device, shape):
    x, w, b, g = r(*shape), r(shape[1], seed=1), r(shape[1], seed=2), r(*shape, seed=3)
    X, W, B = (vkml.tensor(a.astype(np.float32), device=device).requires_grad_() for a in (x, w, b))
    F.batch_norm(X, None, None, W, B, training=True).backward(vkml.tensor(g.astype(np.float32), device=device))
    for got, want in zip((X.grad, W.grad, B.grad), bn_grads_numpy(x, w, g)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_second_derivatives(affine):
    "The rule is written in ops of live values (x, its mean, its scale), so differentiating it again is exact."
    if affine:
        assert gradgradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                             [r(4, 3, 2, 2), r(3, seed=1), r(3, seed=2)])
    else:
        assert gradgradcheck(lambda x: F.batch_norm(x, None, None, training=True), [r(5, 3)])
        assert gradcheck(lambda x: F.batch_norm(x, None, None, training=True), [r(5, 3)])


def _reductions(*tensors) -> int:
    "How many kernels of the schedule computing `tensors` reduce over the activation."
    return sum(1 for k in schedule(*tensors).kernels if any(n.op in FUSED_REDUCE for n in k.nodes))


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_a_batch_norm_step_reduces_twice_forward_and_twice_backward(device):
    """Forward: the mean and the variance. Backward: Σ dy and Σ dy·x̂, nothing else (the ops' own rules made four or
    five reductions in backward, the mean's gradient waiting for the variance's)."""
    x = vkml.tensor(r(8, 4, 5, 5).astype(np.float32), device=device).requires_grad_()
    w = vkml.tensor(r(4, seed=1).astype(np.float32), device=device).requires_grad_()
    b = vkml.tensor(r(4, seed=2).astype(np.float32), device=device).requires_grad_()
    t = vkml.tensor(r(8, 4, 5, 5, seed=3).astype(np.float32), device=device)
    y = F.batch_norm(x, None, None, w, b, training=True)
    gx, gw, gb = grad((y * t).sum(), (x, w, b))
    assert _reductions(y) == 2
    assert _reductions(gx, gw, gb) == 2 + 2        # the forward's two (the gradients need them), backward's two


def test_an_input_rewritten_in_place_before_backward_is_an_error():
    "PyTorch's batch_norm saves its input: rewriting it between forward and backward raises, here too."
    x = vkml.tensor(r(4, 3).astype(np.float32)).requires_grad_()
    h = x * 1.0
    y = F.batch_norm(h, None, None, training=True)
    h.add_(1.0)
    with pytest.raises(InplaceError, match="modified by an inplace operation"):
        y.sum().backward()


def ln_grads_numpy(x, w, g, k, eps=1e-5):
    "LayerNorm's gradients in closed form (float64), normalising over the last `k` dims."
    dims, rows = tuple(range(x.ndim - k, x.ndim)), tuple(range(x.ndim - k))
    mu = x.mean(dims, keepdims=True); var = ((x - mu) ** 2).mean(dims, keepdims=True)
    r_ = 1 / np.sqrt(var + eps); xhat = (x - mu) * r_
    gw = g * w
    dx = r_ * (gw - gw.mean(dims, keepdims=True) - xhat * (gw * xhat).mean(dims, keepdims=True))
    return dx, (g * xhat).sum(rows), g.sum(rows)


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
@pytest.mark.parametrize("shape,k", [((6, 5), 1), ((2, 3, 4), 1), ((2, 3, 4), 2), ((7,), 1)])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_gradients_match_the_closed_form(device, shape, k, affine):
    ns = shape[len(shape) - k:]
    x, w, b, g = r(*shape), r(*ns, seed=1), r(*ns, seed=2), r(*shape, seed=3)
    X = vkml.tensor(x.astype(np.float32), device=device).requires_grad_()
    W = vkml.tensor(w.astype(np.float32), device=device).requires_grad_() if affine != "none" else None
    B = vkml.tensor(b.astype(np.float32), device=device).requires_grad_() if affine == "both" else None
    F.layer_norm(X, ns, W, B).backward(vkml.tensor(g.astype(np.float32), device=device))
    dx, dw, db = ln_grads_numpy(x, w if W is not None else np.ones(ns), g, k)
    np.testing.assert_allclose(X.grad.numpy(), dx, rtol=1e-4, atol=1e-5)
    if W is not None: np.testing.assert_allclose(W.grad.numpy(), dw, rtol=1e-4, atol=1e-5)
    if B is not None: np.testing.assert_allclose(B.grad.numpy(), db, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_second_derivatives(affine):
    if affine:
        assert gradgradcheck(lambda x, w, b: F.layer_norm(x, 4, w, b), [r(3, 4), r(4, seed=1), r(4, seed=2)])
        assert gradgradcheck(lambda x, w: F.layer_norm(x, (2, 3), w), [r(2, 2, 3), r(2, 3, seed=1)])
    else:
        assert gradgradcheck(lambda x: F.layer_norm(x, 5), [r(3, 5)])
        assert gradcheck(lambda x: F.layer_norm(x, 5), [r(3, 5)])


@pytest.mark.vulkan
def test_a_layer_norm_step_is_three_kernels_on_vulkan():
    """The forward's statistics and backward's row sums and dx in one row kernel, then the weight's and the bias's
    sums over the rows: 3 kernels (the ops' own rules made 5: two row kernels, dx's row sum written between them)."""
    x = vkml.tensor(r(8, 16, 32).astype(np.float32), device="vulkan").requires_grad_()
    w = vkml.tensor(r(32, seed=1).astype(np.float32), device="vulkan").requires_grad_()
    b = vkml.tensor(r(32, seed=2).astype(np.float32), device="vulkan").requires_grad_()
    t = vkml.tensor(r(8, 16, 32, seed=3).astype(np.float32), device="vulkan")
    gx, gw, gb = grad((F.layer_norm(x, 32, w, b) * t).sum(), (x, w, b))
    assert [k.kind for k in schedule(gx, gw, gb).kernels if k.kind != "view"] == ["row", "reduce", "reduce"]


def test_layer_norm_input_rewritten_in_place_before_backward_is_an_error():
    x = vkml.tensor(r(4, 3).astype(np.float32)).requires_grad_()
    h = x * 1.0
    y = F.layer_norm(h, 3)
    h.add_(1.0)
    with pytest.raises(InplaceError, match="modified by an inplace operation"):
        y.sum().backward()
