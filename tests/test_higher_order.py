"""Higher-order gradients: `vkml.frontend.autograd.grad` with PyTorch's semantics, `backward(create_graph=True)`, a
second-order gradcheck of every rule (or the typed error `NO_HIGHER_ORDER` announces), and Hessian-vector
products of a small MLP against central differences in float64, and on Vulkan against the CPU."""
import math
import numpy as np
import pytest

from vkml.frontend.autograd import grad, backward, vjp_rule
from vkml.frontend.gradcheck import gradgradcheck, gradcheck
from vkml.core.dtypes import GradError, float32, float64
from vkml.core.ops import Op, NO_HIGHER_ORDER, NO_GRAD_REASONS
from vkml.frontend.tensor import apply, tensor
from vkml.core.graph import no_grad
from test_autograd import CASES


def total(t): return apply(Op.SUM, t, arg=(tuple(range(t.ndim)), False)) if t.ndim else t


# --- every rule's second derivative ------------------------------------------------------------------

@pytest.mark.parametrize("op,i", [(op, i) for op, cases in CASES.items() for i in range(len(cases))],
                         ids=lambda v: v.name if isinstance(v, Op) else str(v))
def test_gradgradcheck(op, i):
    fn, inputs = CASES[op][i]
    if op in NO_HIGHER_ORDER:   # its rule emits an op without a rule: the second pass says so, by name
        with pytest.raises(GradError, match="cannot differentiate through"):
            gradgradcheck(fn, inputs)
    else:
        assert gradgradcheck(fn, inputs)


def test_higher_order_table_names_only_ruled_ops():
    assert all(vjp_rule(op) is not None for op in NO_HIGHER_ORDER)
    assert all(cat is not None and why for cat, why in NO_HIGHER_ORDER.values())


def test_prod_second_derivative_at_zeros():
    "d²/dx_i dx_j of Π x is Π_{k≠i,j} x_k, also where x_i = 0 (the rule's zero branches are constants to it)."
    x = tensor([0.0, 2.0, 3.0], dtype=float64, requires_grad=True)
    (g,) = grad(apply(Op.PROD, x, arg=((0,), False)), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [6.0, 0.0, 0.0])
    rows = [grad(g[i], x, retain_graph=True)[0].numpy() for i in range(3)]
    np.testing.assert_array_equal(np.stack(rows), [[0, 3, 2], [3, 0, 0], [2, 0, 0]])


def test_abs_second_derivative_is_zero_off_the_kink():
    "abs's rule multiplies by sign(x), built under no_grad: a second derivative sees 0 through it (not an error)."
    x = tensor([-1.5, 2.0], dtype=float64, requires_grad=True)
    (g,) = grad((x.abs() + x * x).sum(), x, create_graph=True)
    np.testing.assert_array_equal(g.numpy(), [-1 - 3.0, 1 + 4.0])
    np.testing.assert_array_equal(grad(g.sum(), x)[0].numpy(), [2.0, 2.0])


def test_pow_second_derivative_at_zero_base_is_finite():
    "pow's rule masks ln a (a <= 0) and a^(b-1) (b = 0); the masked lanes see safe values, so no NaN comes back."
    a = tensor([0.0, 0.0, 2.0], dtype=float64, requires_grad=True)
    b = tensor([2.0, 0.0, 3.0], dtype=float64, requires_grad=True)
    ga, gb = grad((a ** b).sum(), [a, b], create_graph=True)
    h = grad((ga + gb).sum(), [a, b])
    assert all(np.isfinite(t.numpy()).all() for t in h)
    np.testing.assert_allclose(h[0].numpy()[[0, 2]], [2.0, 3 * 2 * 2.0 + (4 + 3 * 4 * np.log(2))])


# --- grad(): PyTorch's semantics ----------------------------------------------------------------------
# torch.autograd.grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
#   allow_unused=None, is_grads_batched=False, materialize_grads=False): "Compute and return the sum of
#   gradients of outputs with respect to the inputs." ... "allow_unused: If False, specifying inputs that
#   were not used when computing outputs (and therefore their grad is always zero) is an error."
#   "materialize_grads: If True, set the gradient for unused inputs to zero instead of None."

def test_grad_returns_a_tuple_and_touches_no_grad():
    x = tensor([1.0, 2.0], requires_grad=True)
    out = grad((x * x).sum(), x)
    assert isinstance(out, tuple) and len(out) == 1 and x.grad is None
    np.testing.assert_allclose(out[0].numpy(), [2.0, 4.0])
    assert not out[0].requires_grad          # create_graph=False: a plain gradient


def test_grad_sums_over_outputs_with_grad_outputs():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    y1, y2 = x * 2.0, x * x
    (g,) = grad([y1, y2], x, grad_outputs=[tensor([1.0, 0.0, 1.0]), tensor([0.5, 0.5, 0.5])])
    np.testing.assert_allclose(g.numpy(), [2 + 1, 0 + 2, 2 + 3])


def test_grad_of_an_intermediate():
    x = tensor([1.0, -2.0], requires_grad=True)
    h = x * 3.0
    y = (h * h).sum()
    gh, gx = grad(y, [h, x])
    np.testing.assert_allclose(gh.numpy(), 2 * h.numpy())
    np.testing.assert_allclose(gx.numpy(), 18 * x.numpy())


def test_grad_errors():
    x, z = tensor([1.0, 2.0], requires_grad=True), tensor([3.0], requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(GradError, match="allow_unused=True"): grad(y, [x, z])
    assert grad(y, [x, z], allow_unused=True)[1] is None
    np.testing.assert_array_equal(grad(y, [x, z], materialize_grads=True)[1].numpy(), [0.0])
    with pytest.raises(GradError, match="materialize_grads"): grad(y, z, allow_unused=False, materialize_grads=True)
    with pytest.raises(GradError, match="does not require grad"): grad(y, tensor([1.0]))
    with pytest.raises(GradError, match="outputs\\[0\\] does not require grad"): grad(tensor([1.0]).sum(), x)
    with pytest.raises(GradError, match="one-element output"): grad(x * x, x)          # a non-scalar needs grad_outputs
    with pytest.raises(GradError, match="2 outputs but 1"): grad([y, y], x, grad_outputs=[None])
    with pytest.raises(GradError, match="is_grads_batched"): grad(y, x, is_grads_batched=True)


def test_backward_create_graph_and_inputs():
    x, w = tensor([0.5, -1.0], requires_grad=True), tensor([2.0, 3.0], requires_grad=True)
    y = (x * x * w).sum()
    y.backward(create_graph=True)
    assert x.grad.requires_grad and w.grad.requires_grad
    np.testing.assert_allclose(grad(x.grad.sum(), w)[0].numpy(), 2 * x.numpy())     # d/dw Σ 2xw = 2x
    a, c = tensor([1.0, 2.0], requires_grad=True), tensor([3.0, 4.0], requires_grad=True)
    (a * c).sum().backward(inputs=[a])                                                # only a's .grad
    assert c.grad is None
    np.testing.assert_allclose(a.grad.numpy(), [3.0, 4.0])


def test_second_backward_accumulates_and_retain_graph_is_accepted():
    x = tensor([2.0], requires_grad=True)
    y = (x * x * x).sum()
    y.backward(retain_graph=True)
    y.backward()                                  # the lazy graph is kept: no retain_graph needed
    np.testing.assert_allclose(x.grad.numpy(), [24.0])


def test_first_order_backward_builds_no_graph():
    x = tensor([1.0, 2.0], requires_grad=True)
    (x.exp().sum()).backward()
    assert not x.grad.requires_grad


# --- Hessian-vector products of a small MLP -------------------------------------------------------------

RNG = np.random.default_rng(7)
SHAPES = [(4, 6), (6,), (6, 3), (3,)]
X, T = RNG.standard_normal((8, 4)), RNG.standard_normal((8, 3))
P = [RNG.standard_normal(s) * 0.7 for s in SHAPES]
V = [RNG.standard_normal(s) for s in SHAPES]


def mlp_loss(x, t, w1, b1, w2, b2):
    d = (x @ w1 + b1).tanh() @ w2 + b2 - t
    return (d * d).mean()


def grads(device="cpu", dtype=float64, shift=0.0, create_graph=False):
    ps = [tensor((p + shift * v).astype(dtype.np), device=device, requires_grad=True) for p, v in zip(P, V)]
    data = [tensor(a.astype(dtype.np), device=device) for a in (X, T)]
    return grad(mlp_loss(*data, *ps), ps, create_graph=create_graph), ps


def hvp(device="cpu", dtype=float64):
    gs, ps = grads(device, dtype, create_graph=True)
    vs = [tensor(v.astype(dtype.np), device=device) for v in V]
    dot = gs[0].mul(vs[0]).sum()
    for g, v in zip(gs[1:], vs[1:]): dot = dot + (g * v).sum()
    return [h.numpy() for h in grad(dot, ps)]


def test_mlp_hvp_against_central_differences_in_float64():
    "H·v against (∇L(θ+εv) − ∇L(θ−εv))/2ε: the difference shrinks as ε² (the truncation error), so it is the HVP."
    hv = hvp()
    errs = []
    for eps in (1e-3, 1e-4):
        hi, lo = grads(shift=eps)[0], grads(shift=-eps)[0]
        fd = [(a.numpy() - b.numpy()) / (2 * eps) for a, b in zip(hi, lo)]
        errs.append(max(np.max(np.abs(h - f)) / np.max(np.abs(f)) for h, f in zip(hv, fd)))
    assert errs[1] < 1e-6 and 80 < errs[0] / errs[1] < 120, errs     # ε 10x smaller: error 100x smaller


def test_mlp_hvp_gradgradcheck():
    "gradgradcheck runs float32-typed graphs in float64 (float64_mode): the data are float32 tensors there."
    data = [tensor(a.astype(np.float32)) for a in (X, T)]
    assert gradgradcheck(lambda w1, b1, w2, b2: mlp_loss(*data, w1, b1, w2, b2), P)


@pytest.mark.vulkan
@pytest.mark.parametrize("dtype,rtol", [(float64, 1e-13), (float32, 1e-5)], ids=["f64", "f32"])
def test_mlp_hvp_on_vulkan(vulkan, dtype, rtol):
    "The same HVP on Vulkan against the CPU oracle, within the √k-scaled parity bound (k = 8 rows x 6 hidden)."
    cpu, vk = hvp("cpu", dtype), hvp("vulkan", dtype)
    for a, b in zip(cpu, vk):
        assert a.dtype == b.dtype == dtype.np
        np.testing.assert_allclose(b, a, rtol=0, atol=rtol * math.sqrt(8 * 6) * np.max(np.abs(a)))


# --- create_graph under the schedule's remembered plans and vkml.jit ---------------------------------

def _penalty_setup(seed=0):
    import vkml.frontend.functions as VF
    import vkml.nn as nn
    import vkml.optim as optim
    VF.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1)).to("vulkan")
    return model, optim.Adam(model.parameters(), lr=0.01)


def _penalty_step(model, opt):
    "A gradient-penalty step: the loss holds d(output)/d(input), so backward differentiates a gradient."
    def step(x):
        opt.zero_grad()
        x = x.detach().requires_grad_()        # (a jit's arguments are data: the input to differentiate is made here)
        y = model(x)
        (gx,) = grad(y.sum(), x, create_graph=True)
        loss = (y * y).mean() + (gx * gx).sum(1).mean()
        loss.backward()
        opt.step()
        return loss
    return step


@pytest.mark.vulkan
def test_a_gradient_penalty_step_replayed_by_jit_equals_eager():
    "Backward with create_graph builds graph nodes: remembered plans and a captured replay must give the eager numbers."
    import vkml
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(6)]
    runs = {}
    for use_jit in (False, True):
        model, opt = _penalty_setup()
        step = _penalty_step(model, opt)
        if use_jit: step = vkml.jit(step)
        losses = [step(tensor(x, device="vulkan")).item() for x in xs]
        runs[use_jit] = (np.array(losses), [p.numpy() for p in model.parameters()])
        if use_jit: assert step.captured == 1 and step.calls == 6
    np.testing.assert_allclose(runs[True][0], runs[False][0], rtol=1e-5)
    for a, b in zip(runs[True][1], runs[False][1]): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert runs[False][0][-1] < runs[False][0][0]          # and it trains
