"""Autograd on the CPU: gradcheck of every rule (several cases each), the conventions at kinks and ties,
the traversal (reused nodes, a 10,000-node chain), broadcasting, errors, detach, and the counts."""
import math
import numpy as np
import pytest

import vkml.frontend.autograd as ag
from vkml.frontend.autograd import vjp_rules, vjp_rule
from vkml.frontend.gradcheck import gradcheck, GradcheckError
from vkml.core.dtypes import GradError, DTypeError, float32, float16, float64, int64
from vkml.core.ops import Op, NO_GRAD_REASONS
from vkml.frontend.tensor import apply, tensor, realize, toposort, schedule
from vkml.core.graph import no_grad


# --- small inputs away from kinks --------------------------------------------------------------------

def r(*shape, lo=-1.0, hi=1.0, seed=0):
    "Distinct float64 values spread over [lo, hi], shuffled (no ties, no zeros unless lo/hi ask)."
    n = math.prod(shape)
    v = np.linspace(lo, hi, n) + np.random.default_rng(seed).uniform(-0.2, 0.2, n) * (hi - lo) / max(n, 1)
    v[np.abs(v) < 1e-3] += 0.05  # keep clear of 0 (relu, abs, sign)
    return np.random.default_rng(seed + 1).permutation(v).reshape(shape)

def pos(*shape, seed=0): return r(*shape, lo=0.3, hi=2.0, seed=seed)
def u(op, arg=None): return lambda x: apply(op, x, arg=arg)
def b(op, arg=None): return lambda x, y: apply(op, x, y, arg=arg)
def cast(dt): return lambda x: apply(Op.CAST, x, shape=x.shape, dtype=dt)
def conv(arg): return lambda x, w: apply(Op.CONV2D, x, w, arg=arg)
def attn(causal, scale): return lambda q, k, v: apply(Op.ATTENTION, q, k, v, arg=(causal, scale))
def convt(arg): return lambda x, w: apply(Op.CONV_TRANSPOSE2D, x, w, arg=arg)
def const(a, device="cpu"): return tensor(np.asarray(a, np.float32), device=device)  # a float input gradcheck leaves alone

IDX = np.array([[0, 2, 1], [1, 1, 0]])

def sym(a): return a + a.transpose(-1, -2)
def spd(a): return a @ a.transpose(-1, -2) + tensor(np.eye(a.shape[-1], dtype=np.float32) * 3)
def well(n, seed=0): return r(n, n, seed=seed) + 3 * np.eye(n)   # far from singular

CASES = {
    Op.NEG: [(u(Op.NEG), [r(5)])],
    Op.ABS: [(u(Op.ABS), [r(2, 3)])],
    Op.EXP: [(u(Op.EXP), [r(5)])],
    Op.LOG: [(u(Op.LOG), [pos(5)])],
    Op.SQRT: [(u(Op.SQRT), [pos(5)])],
    Op.RSQRT: [(u(Op.RSQRT), [pos(5)])],
    Op.RECIPROCAL: [(u(Op.RECIPROCAL), [pos(5)]), (u(Op.RECIPROCAL), [-pos(3)])],
    Op.SIN: [(u(Op.SIN), [r(5, lo=-3, hi=3)])],
    Op.COS: [(u(Op.COS), [r(5, lo=-3, hi=3)])],
    Op.ERF: [(u(Op.ERF), [r(6, lo=-2.5, hi=2.5)])],
    Op.ERFC: [(u(Op.ERFC), [r(6, lo=-2.5, hi=2.5)])],
    Op.TANH: [(u(Op.TANH), [r(5, lo=-2, hi=2)])],
    Op.SIGMOID: [(u(Op.SIGMOID), [r(5, lo=-4, hi=4)])],
    Op.RELU: [(u(Op.RELU), [r(6)])],
    Op.GELU: [(u(Op.GELU, "none"), [r(7, lo=-3, hi=3)]), (u(Op.GELU, "tanh"), [r(7, lo=-3, hi=3)])],
    Op.SILU: [(u(Op.SILU), [r(7, lo=-4, hi=4)])],
    Op.LEAKY_RELU: [(u(Op.LEAKY_RELU, 0.1), [r(6)]), (u(Op.LEAKY_RELU, -0.5), [r(4)])],
    Op.ELU: [(u(Op.ELU, 1.0), [r(6, lo=-2, hi=2)]), (u(Op.ELU, 0.3), [r(4, lo=-2, hi=2)])],
    Op.SOFTPLUS: [(u(Op.SOFTPLUS, (1.0, 20.0)), [r(6, lo=-4, hi=4)]),
                  (u(Op.SOFTPLUS, (2.0, 1.5)), [np.array([-1.3, -0.2, 0.4, 0.6, 1.2, 2.0])])],  # both sides of βx = threshold
    Op.CLAMP: [(u(Op.CLAMP, (-0.5, 0.5)), [r(6)]), (u(Op.CLAMP, (None, 0.2)), [r(5)]), (u(Op.CLAMP, (0.1, None)), [r(5)])],
    Op.CAST: [(cast(float16), [r(4)]), (lambda x: apply(Op.SIN, cast(float32)(cast(float16)(x))), [r(3)])],
    Op.ADD: [(b(Op.ADD), [r(4), r(4, seed=1)])],
    Op.SUB: [(b(Op.SUB), [r(4), r(4, seed=1)])],
    Op.MUL: [(b(Op.MUL), [r(2, 3), r(2, 3, seed=1)])],
    Op.DIV: [(b(Op.DIV), [r(4), pos(4, seed=1)]), (b(Op.DIV), [r(3), -pos(3, seed=1)])],
    Op.POW: [(b(Op.POW), [pos(4), r(4, lo=-2, hi=2, seed=1)]),
             (b(Op.POW), [np.array([0.0, 0.0, 0.5]), np.array([2.0, 3.0, 2.5])]),   # a = 0 with b > 1
             (lambda a: apply(Op.POW, a, const([2.0, 3.0, 2.0], a.device)), [np.array([-1.5, -0.7, 0.8])])],  # negative base, integer b
    Op.MAXIMUM: [(b(Op.MAXIMUM), [r(5), r(5, seed=1)])],
    Op.MINIMUM: [(b(Op.MINIMUM), [r(5), r(5, seed=1)])],
    Op.WHERE: [(lambda x, y: apply(Op.WHERE, tensor([True, False, True, True], device=x.device), x, y), [r(4), r(4, seed=1)])],
    Op.SUM: [(u(Op.SUM, ((1,), False)), [r(2, 3)]), (u(Op.SUM, ((0, 2), True)), [r(2, 3, 2)]), (u(Op.SUM, ((), False)), [r(3)])],
    Op.MEAN: [(u(Op.MEAN, ((0,), True)), [r(2, 3)]), (u(Op.MEAN, ((0, 1, 2), False)), [r(2, 2, 2)])],
    Op.MAX: [(u(Op.MAX, ((1,), False)), [r(2, 3)]), (u(Op.MAX, ((0, 2), True)), [r(2, 3, 2)])],
    Op.MIN: [(u(Op.MIN, ((0,), False)), [r(3, 2)]), (u(Op.MIN, ((0, 1), True)), [r(2, 3)])],
    Op.PROD: [(u(Op.PROD, ((1,), False)), [r(2, 4, lo=0.5, hi=1.5)]),                                     # no zero
              (u(Op.PROD, ((1,), False)), [np.array([[0.5, 0.0, 2.0, 1.5], [1.5, -0.5, 0.8, 2.0]])]),     # one zero
              (u(Op.PROD, ((1,), True)), [np.array([[0.0, 0.7, 0.0, 1.5], [0.0, 0.0, 0.0, 2.0]])]),      # several zeros
              (u(Op.PROD, ((0, 1), False)), [np.array([[0.9, 0.0], [1.2, -1.1], [0.6, 1.3]])])],           # several axes
    Op.CUMSUM: [(u(Op.CUMSUM, 1), [r(2, 4)]), (u(Op.CUMSUM, 0), [r(3, 2)])],
    Op.RESHAPE: [(lambda x: apply(Op.RESHAPE, x, shape=(3, 2), dtype=x.dtype), [r(2, 3)])],
    Op.PERMUTE: [(u(Op.PERMUTE, (2, 0, 1)), [r(2, 3, 2)])],
    Op.EXPAND: [(lambda x: apply(Op.EXPAND, x, shape=(2, 2, 3), dtype=x.dtype), [r(2, 1)]),
                (lambda x: apply(Op.EXPAND, x, shape=(3, 2), dtype=x.dtype), [r(2)]),
                (lambda x: apply(Op.EXPAND, x, shape=(2, 3), dtype=x.dtype), [r()])],
    Op.SLICE: [(u(Op.SLICE, ((1, -1, -1), (0, 3, 2))), [r(2, 3)]), (u(Op.SLICE, ((1, 4, 2), (2, 0, -1))), [r(5, 3)])],
    Op.SLICE_BACKWARD: [(lambda g: apply(Op.SLICE_BACKWARD, g, arg=((1, 4, 2), (2, 0, -1)), shape=(5, 3), dtype=g.dtype), [r(2, 2)])],
    Op.PAD: [(u(Op.PAD, (((1, 0), (0, 2)), 0.5)), [r(2, 3)])],
    Op.CONCAT: [(lambda a, b_, c: apply(Op.CONCAT, a, b_, c, arg=1), [r(2, 1), r(2, 2, seed=1), r(2, 3, seed=2)]),
                (lambda a, b_: apply(Op.CONCAT, a, b_, arg=0), [r(1, 3), r(2, 3, seed=1)])],
    Op.CONTIGUOUS: [(lambda x: apply(Op.CONTIGUOUS, apply(Op.PERMUTE, x, arg=(1, 0))), [r(2, 3)])],
    Op.ASSIGN: [(b(Op.ASSIGN), [r(4), r(4, seed=1)])],   # d/d(target) = 0 (overwritten), d/d(value) = 1
    Op.GATHER: [(lambda x, i: apply(Op.GATHER, x, i, arg=1), [r(2, 3), IDX]),
                (lambda x, i: apply(Op.GATHER, x, i, arg=0), [r(3, 3), np.array([[2, 0], [2, 2]])])],  # smaller index
    Op.INDEX_ADD: [(lambda d, i, s: apply(Op.INDEX_ADD, d, i, s, arg=1), [r(2, 3), IDX, r(2, 3, seed=1)]),
                   (lambda d, i, s: apply(Op.INDEX_ADD, d, i, s, arg=0), [r(2, 3), np.array([[1, 1, 0]]), r(1, 3, seed=1)])],
    Op.SCATTER: [(lambda d, i, s: apply(Op.SCATTER, d, i, s, arg=1), [r(2, 3), np.array([[2, 0], [1, 0]]), r(2, 2, seed=1)]),
                 (lambda d, i, s: apply(Op.SCATTER, d, i, s, arg=0), [r(3, 2), np.array([[2, 0]]), r(1, 2, seed=1)])],
    Op.SLICE_BACKWARD: [(lambda g: apply(Op.SLICE_BACKWARD, g, arg=((1, 4, 2), (2, -1, -1)), shape=(5, 3), dtype=g.dtype),
                         [r(2, 3)])],
    Op.MATMUL: [(b(Op.MATMUL), [r(2, 2, 3), r(2, 3, 4, seed=1)])],
    Op.CONV2D: [(conv(((1, 1), (0, 0), (1, 1), 1)), [r(2, 2, 4, 4), r(3, 2, 3, 3, seed=1)]),
                (conv(((2, 1), (1, 0), (1, 1), 2)), [r(1, 4, 5, 3), r(2, 2, 2, 2, seed=1)]),     # groups, stride drops a row
                (conv(((2, 2), (1, 2), (2, 1), 1)), [r(1, 1, 6, 5), r(2, 1, 2, 2, seed=1)])],    # dilation
    Op.CONV_TRANSPOSE2D: [(convt(((1, 1), (0, 0), (0, 0), (1, 1), 1)), [r(1, 2, 3, 3), r(2, 3, 2, 2, seed=1)]),
                          (convt(((2, 1), (1, 0), (1, 0), (1, 1), 2)), [r(1, 4, 2, 2), r(4, 1, 2, 2, seed=1)]),
                          (convt(((1, 1), (0, 0), (1, 1), (2, 2), 1)), [r(1, 1, 3, 3), r(1, 2, 2, 2, seed=1)])],  # op ≥ stride
    Op.CONV2D_WEIGHT: [(lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=((3, 3), (1, 1), (1, 1), (1, 1), 1)),
                        [r(2, 3, 4, 4), r(2, 2, 4, 4, seed=1)]),
                       (lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=((2, 2), (2, 1), (1, 0), (1, 1), 2)),
                        [r(1, 2, 3, 2), r(1, 4, 5, 3, seed=1)]),     # groups, stride drops a row
                       (lambda g, x: apply(Op.CONV2D_WEIGHT, g, x, arg=((2, 2), (1, 1), (0, 0), (2, 2), 1)),
                        [r(1, 1, 2, 2), r(1, 2, 5, 5, seed=1)])],    # dilation; x has a window more than g covers
    Op.IM2COL: [(u(Op.IM2COL, ((2, 2), (1, 1), (1, 0), (2, 1))), [r(1, 2, 3, 3)]),
                (u(Op.IM2COL, ((2, 2), (2, 1), (1, 1), (1, 2))), [r(2, 1, 4, 4)])],
    Op.COL2IM: [(u(Op.COL2IM, ((3, 3), (2, 2), (1, 1), (0, 0), (1, 1))), [r(1, 4, 4)]),
                (u(Op.COL2IM, ((4, 5), (2, 2), (1, 1), (1, 1), (2, 2))), [r(1, 8, 9)])],
    Op.ATTENTION: [(attn(False, 0.5), [r(2, 3, 4), r(2, 5, 4, seed=1), r(2, 5, 3, seed=2)]),
                   (attn(True, 0.7), [r(1, 2, 4, 2), r(1, 2, 6, 2, seed=1), r(1, 2, 6, 3, seed=2)]),   # L < S: the last keys unseen
                   (attn(True, 1.0), [r(5, 3), r(3, 3, seed=1), r(3, 2, seed=2)])],                    # L > S
    Op.MAXPOOL2D: [(u(Op.MAXPOOL2D, ((2, 2), (2, 2), (0, 0), (1, 1), False)), [r(1, 2, 4, 4)]),
                   (u(Op.MAXPOOL2D, ((2, 2), (2, 2), (1, 1), (1, 1), True)), [r(1, 1, 4, 3)]),
                   (u(Op.MAXPOOL2D, ((3, 2), (1, 2), (1, 0), (2, 1), False)), [r(1, 1, 6, 5)])],
    Op.AVGPOOL2D: [(u(Op.AVGPOOL2D, ((k, 2), (2, 2), (1, 1), ceil, cip)), [r(1, 2, 5, 5)])
                   for k in (2, 3) for ceil in (False, True) for cip in (False, True)],
    # linear algebra: symmetric inputs built symmetric (the rules' convention), outputs free of sign choices
    Op.CHOLESKY: [(lambda a: apply(Op.CHOLESKY, spd(a), arg=False), [r(3, 3)]),
                  (lambda a: apply(Op.CHOLESKY, spd(a), arg=True), [r(2, 3, 3)])],                 # upper, a batch
    Op.INV: [(u(Op.INV), [well(3)]), (u(Op.INV), [np.stack([well(2), well(2, seed=1)])])],
    Op.SOLVE: [(b(Op.SOLVE), [well(3), r(3, 2, seed=1)]), (b(Op.SOLVE), [np.stack([well(2), well(2, seed=2)]), r(2, 2, 1, seed=1)])],
    Op.DET: [(u(Op.DET), [r(3, 3)]), (u(Op.DET), [r(2, 2, 2)])],
    Op.SLOGDET: [(u(Op.SLOGDET, 1), [r(3, 3)]), (u(Op.SLOGDET, 1), [-well(2)])],
    Op.EIGH: [(lambda a: apply(Op.EIGH, sym(a), arg=("L", 0)), [r(3, 3)]),
              (lambda a: apply(Op.EIGH, sym(a), arg=("U", 1)).abs(), [r(3, 3, seed=2)]),
              (lambda a: apply(Op.EIGH, sym(a), arg=("L", 0)), [r(2, 3, 3, seed=3)])],
    Op.QR: [(lambda a: tuple(apply(Op.QR, a, arg=("reduced", w)).abs() for w in (0, 1)), [r(4, 3)]),
            (lambda a: tuple(apply(Op.QR, a, arg=("reduced", w)).abs() for w in (0, 1)), [r(2, 4, seed=1)]),   # wide
            (lambda a: tuple(apply(Op.QR, a, arg=("complete", w)).abs() for w in (0, 1)), [r(3, 3, seed=2)])],
    Op.SVD: [(lambda a: tuple(apply(Op.SVD, a, arg=(False, w)).abs() for w in (0, 1, 2)), [r(4, 3)]),
             (lambda a: tuple(apply(Op.SVD, a, arg=(False, w)).abs() for w in (0, 1, 2)), [r(2, 4, seed=1)]),
             (lambda a: tuple(apply(Op.SVD, a, arg=(True, w)).abs() for w in (0, 1, 2)), [r(2, 3, 3, seed=2)])],
}


RULED = {op for op in Op if vjp_rule(op) is not None}

# Every other elementwise row with a gradient: one case drawn from its own row (domain, kinks, example arg), as
# tests/test_elementwise_table.py draws them, so a new row needs no hand-written case here.
from elementwise_rows import derived_rows, sample, _apply   # noqa: E402
for _row in derived_rows():
    if _row.op in RULED and _row.op not in CASES and _row.arity >= 1:
        _rng = np.random.default_rng(1)
        CASES[_row.op] = [(lambda *ts, row=_row: _apply(row, ts),
                           [sample(_row, float32, (2, 3), _rng, keep_off_kinks=0.05).astype(np.float64) for _ in range(_row.arity)])]

def test_every_rule_has_cases():
    assert set(CASES) == RULED


@pytest.mark.parametrize("op,i", [(op, i) for op, cases in CASES.items() for i in range(len(cases))],
                         ids=lambda v: v.name if isinstance(v, Op) else str(v))
def test_gradcheck(op, i):
    fn, inputs = CASES[op][i]
    # the case really exercises the rule under test
    ts = [tensor(np.asarray(a, np.float32 if np.asarray(a).dtype.kind == "f" else np.asarray(a).dtype)) for a in inputs]
    out = fn(*ts)
    assert op in {n.op for n in toposort([o.node for o in (out if isinstance(out, tuple) else (out,))])}
    assert gradcheck(fn, inputs)


# --- the registry ------------------------------------------------------------------------------------

def test_rules_and_reasons_partition_the_ops():
    assert RULED | set(NO_GRAD_REASONS) == set(Op)
    assert not RULED & set(NO_GRAD_REASONS)
    from vkml.frontend.registry import counts
    assert counts()["graph_ops_with_grad"] >= 51
    assert {Op.ERF, Op.ERFC, Op.PROD} <= RULED


# --- conventions at kinks and ties (numbers worked out by hand) ---------------------------------------

def grad_of(fn, *xs, gradient=None):
    ts = [tensor(np.asarray(x, np.float32), requires_grad=True) for x in xs]
    out = fn(*ts)
    out.backward(gradient=gradient)
    return [t.grad.numpy() for t in ts]

def total(t): return apply(Op.SUM, t, arg=(tuple(range(t.ndim)), False))

def test_relu_derivative_at_zero_is_zero():
    (g,) = grad_of(lambda x: total(apply(Op.RELU, x)), [-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(g, [0.0, 0.0, 1.0])

def test_abs_derivative_at_zero_is_zero():
    (g,) = grad_of(lambda x: total(apply(Op.ABS, x)), [-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(g, [-1.0, 0.0, 1.0])

@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM])
def test_maximum_minimum_split_ties(op):
    ga, gb = grad_of(lambda a, b_: total(apply(op, a, b_)), [1.0, 2.0, 3.0], [1.0, 5.0, -3.0])
    win_a = [0.5, 0.0, 1.0] if op is Op.MAXIMUM else [0.5, 1.0, 0.0]
    np.testing.assert_array_equal(ga, win_a)
    np.testing.assert_array_equal(gb, [0.5, 1.0 - win_a[1], 1.0 - win_a[2]])

@pytest.mark.parametrize("op", [Op.MAX, Op.MIN])
def test_amax_amin_split_ties(op):
    x = [[3.0, 1.0, 3.0, 3.0], [-2.0, 5.0, -2.0, 0.0]]
    (g,) = grad_of(lambda t: total(apply(op, t, arg=((1,), False))), x)
    want = [[1 / 3, 0, 1 / 3, 1 / 3], [0, 1, 0, 0]] if op is Op.MAX else [[0, 1, 0, 0], [0.5, 0, 0.5, 0]]
    np.testing.assert_allclose(g, want, rtol=1e-6)

def test_amax_over_all_axes_splits_a_tie():
    (g,) = grad_of(lambda t: apply(Op.MAX, t, arg=((0, 1), False)), [[1.0, 4.0], [4.0, 0.0]])
    np.testing.assert_array_equal(g, [[0, 0.5], [0.5, 0]])

def test_max_pool2d_routes_a_tie_to_the_first_maximum():
    x = np.array([[[[1.0, 2.0], [2.0, 0.0]]]])   # one window, two equal maxima: the first in row-major order wins
    (g,) = grad_of(lambda t: total(apply(Op.MAXPOOL2D, t, arg=((2, 2), (2, 2), (0, 0), (1, 1), False))), x)
    np.testing.assert_array_equal(g, [[[[0.0, 1.0], [0.0, 0.0]]]])

def test_clamp_passes_the_gradient_at_its_bounds():
    (g,) = grad_of(lambda t: total(apply(Op.CLAMP, t, arg=(-1.0, 1.0))), [-2.0, -1.0, 0.0, 1.0, 2.0])
    np.testing.assert_array_equal(g, [0, 1, 1, 1, 0])

def test_pow_at_zero_has_no_nan():
    a, b_ = [0.0, 0.0, 0.0, 2.0], [0.0, 1.0, 2.0, 0.0]
    ga, gb = grad_of(lambda x, y: total(apply(Op.POW, x, y)), a, b_)
    np.testing.assert_array_equal(ga, [0.0, 1.0, 0.0, 0.0])      # d/da a^0 = 0, d/da a = 1, d/da a² = 0 at 0
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0, math.log(2.0)], rtol=1e-6)  # y·ln a only where a > 0

@pytest.mark.parametrize("x,want", [([2.0, 3.0, 4.0], [12.0, 8.0, 6.0]), ([2.0, 0.0, 4.0], [0.0, 8.0, 0.0]),
                                    ([0.0, 3.0, 0.0], [0.0, 0.0, 0.0])])
def test_prod_gradient_with_zero_one_or_two_zeros(x, want):
    (g,) = grad_of(lambda t: apply(Op.PROD, t, arg=((0,), False)), x)
    np.testing.assert_array_equal(g, want)


# --- gradcheck itself ---------------------------------------------------------------------------------

def test_a_flipped_sign_fails_gradcheck(monkeypatch):
    good = vjp_rule(Op.EXP)
    monkeypatch.setitem(vjp_rules, Op.EXP, lambda node, g, srcs: (apply(Op.NEG, good(node, g, srcs)[0]),))
    with pytest.raises(GradcheckError, match="input 0 at index"):
        gradcheck(lambda x: apply(Op.EXP, x), [r(3)])

def test_a_rule_off_by_a_factor_fails_gradcheck(monkeypatch):
    good = vjp_rule(Op.MATMUL)
    monkeypatch.setitem(vjp_rules, Op.MATMUL, lambda node, g, srcs: (good(node, g, srcs)[0], None))
    with pytest.raises(GradcheckError, match="input 1"):  # b's gradient is missing: analytic 0 against numeric
        gradcheck(b(Op.MATMUL), [r(1, 2, 2), r(1, 2, 2, seed=1)])

def test_gradcheck_reports_the_worst_element(monkeypatch):
    monkeypatch.setitem(vjp_rules, Op.SIN, lambda node, g, srcs: (g,))  # claims sin' = 1: off by 1 − cos x
    with pytest.raises(GradcheckError, match=r"index \(2,\)"):        # worst at the largest |x|
        gradcheck(lambda x: total(apply(Op.SIN, x)), [np.array([0.1, -0.5, 2.5, 1.0])])

def test_gradcheck_runs_float32_graphs_in_float64():
    seen = []
    def fn(x):
        out = apply(Op.EXP, x)
        seen.append(out)
        return out
    gradcheck(fn, [r(3)])
    assert seen[0].numpy().dtype == np.float64
    assert tensor(np.zeros(3, np.float64)).dtype is float64   # float64 itself is a public dtype
    x = tensor([1.0, 2.0], requires_grad=True)
    apply(Op.SUM, apply(Op.EXP, x), arg=((0,), False)).backward()
    assert x.grad.numpy().dtype == np.float32   # outside the mode everything is float32 again

def test_gradcheck_leaves_integer_and_non_grad_inputs_alone():
    w = const([1.0, 2.0, 3.0])
    assert gradcheck(lambda x, i, c: apply(Op.MUL, apply(Op.GATHER, x, i, arg=0), c),
                     [r(4), np.array([3, 0, 3]), w])
    with pytest.raises(GradError, match="float input"):
        gradcheck(lambda i: i, [np.array([1, 2])])


# --- the traversal ------------------------------------------------------------------------------------

def test_reused_node_accumulates():
    a = tensor([1.0, -3.0], requires_grad=True)
    b_ = apply(Op.ADD, a, a)
    c = apply(Op.ADD, b_, b_)
    total(c).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [4.0, 4.0])

def test_diamond_with_different_paths():
    x = tensor([2.0], requires_grad=True)
    y = apply(Op.MUL, x, x)                 # x²
    z = apply(Op.MUL, y, apply(Op.EXP, y))  # y·e^y: dz/dx = (1 + y)e^y · 2x
    z.backward(gradient=tensor([1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [(1 + 4) * math.exp(4) * 4], rtol=1e-6)

def test_ten_thousand_node_chain():
    x = tensor([0.25], requires_grad=True)
    y, c = x, tensor([1.0])
    for _ in range(10_000): y = apply(Op.ADD, y, c)     # y = x + 10000
    y = apply(Op.MUL, y, y)
    y.backward(gradient=tensor([1.0]))
    np.testing.assert_allclose(x.grad.numpy(), [2 * 10_000.25], rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), [10_000.25 ** 2], rtol=1e-6)

def test_grad_is_lazy_and_accumulates_on_leaves_only():
    x = tensor([1.0, 2.0], requires_grad=True)
    h = apply(Op.EXP, x)
    loss = total(h)
    loss.backward()
    assert not x.grad.node.realized            # nothing ran
    assert h.grad is None and loss.grad is None  # non-leaves keep no .grad
    assert not x.grad.requires_grad             # backward builds its graph under no_grad
    first = x.grad.numpy()
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)

def test_explicit_gradient_and_its_checks():
    x = tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = apply(Op.MUL, x, x)
    y.backward(gradient=tensor([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, -6.0])
    with pytest.raises(GradError, match="one-element"):
        y.backward()
    with pytest.raises(GradError, match="must match"):
        y.backward(gradient=tensor([1.0, 2.0]))

def test_backward_of_a_tensor_without_grad():
    with pytest.raises(GradError, match="does not require grad"):
        tensor([1.0]).backward()
    x = tensor([1.0], requires_grad=True)
    with no_grad(): y = apply(Op.EXP, x)
    with pytest.raises(GradError, match="does not require grad"):
        y.backward()

@pytest.mark.parametrize("op", [Op.SIGN])
def test_backward_through_an_op_without_rule_names_it(op):
    x = tensor([1.0, -2.0], requires_grad=True)
    y = apply(Op.MUL, apply(op, x), x)
    with pytest.raises(GradError, match=f"{op.name}: .*by design"):
        y.backward(gradient=tensor([1.0, 1.0]))

def test_a_cast_to_integer_or_a_comparison_stops_the_gradient():
    x = tensor([1.5, -2.0], requires_grad=True)
    mask = apply(Op.CAST, apply(Op.GREATER, x, tensor([0.0, 0.0])), shape=(2,), dtype=float32)
    y = apply(Op.MUL, x, mask)
    y.backward(gradient=tensor([1.0, 1.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0])

def test_leaf_made_from_a_computation_stops_there():
    x = tensor([1.0, 2.0], requires_grad=True)
    with no_grad(): w = apply(Op.MUL, x, x)
    w.requires_grad_()                          # a new leaf whose node still has sources
    total(apply(Op.EXP, w)).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.exp([1.0, 4.0]), rtol=1e-6)
    assert x.grad is None


# --- through the public operators -----------------------------------------------------------------------

VF = pytest.importorskip("vkml.frontend.functions")

def test_broadcasting_grads_sum_back():
    a = tensor(np.arange(3, dtype=np.float32).reshape(3, 1), requires_grad=True)
    b_ = tensor(np.arange(4, dtype=np.float32), requires_grad=True)
    ((a * b_) + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 1), 6.0 + 4))
    np.testing.assert_array_equal(b_.grad.numpy(), np.full(4, 3.0))

def test_grads_through_views_slices_and_cat():
    x = tensor(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    y = VF.cat([x[1:, ::2], x.permute(1, 0)[::-1, :2]], 0).reshape(3, 4)   # (2, 2) and (4, 2) -> (6, 2) -> (3, 4)
    w = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    (y * tensor(w)).sum().backward()
    idx = np.arange(12).reshape(3, 4)                  # where each element of y came from
    src = np.concatenate([idx[1:, ::2], idx.T[::-1, :2]], 0).reshape(-1)
    want = np.zeros(12, np.float32)
    np.add.at(want, src, w.reshape(-1))
    np.testing.assert_array_equal(x.grad.numpy(), want.reshape(3, 4))

def test_grads_through_gather():
    x = tensor(np.arange(6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    idx = tensor(np.array([[2, 2], [0, 1]]))
    x.gather(1, idx).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 2], [1, 1, 0]])

def test_grads_through_batch_broadcast_matmul():
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((4, 5)).astype(np.float32)
    a, b_ = tensor(A, requires_grad=True), tensor(B, requires_grad=True)
    (a @ b_).sum().backward()
    G = np.ones((2, 3, 5), np.float32)
    np.testing.assert_allclose(a.grad.numpy(), G @ B.T, rtol=1e-5)
    np.testing.assert_allclose(b_.grad.numpy(), np.einsum("bmk,bmn->kn", A, G), rtol=1e-5)


# --- independent references for the pooling/convolution rules -------------------------------------------

def _avgpool_grad_ref(x_shape, g, k, s, p, ceil, cip):
    "PyTorch's avg_pool2d backward, written as loops from its documented divisor rule."
    N, C, H, W = x_shape
    dx = np.zeros(x_shape)
    Ho, Wo = g.shape[2:]
    for oh in range(Ho):
        for ow in range(Wo):
            hs, ws = oh * s[0] - p[0], ow * s[1] - p[1]
            he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
            div = size if cip else (he - hs) * (we - ws)
            dx[:, :, hs:he, ws:we] += g[:, :, oh:oh + 1, ow:ow + 1] / div
    return dx

@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("cip", [False, True])
def test_avg_pool2d_grad_matches_torch_semantics(ceil, cip):
    k, s, p = (3, 2), (2, 2), (1, 1)
    x = tensor(r(2, 1, 6, 5).astype(np.float32), requires_grad=True)
    y = apply(Op.AVGPOOL2D, x, arg=(k, s, p, ceil, cip))
    g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    y.backward(gradient=tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), _avgpool_grad_ref(x.shape, g, k, s, p, ceil, cip), rtol=1e-5, atol=1e-6)

def test_conv2d_grads_match_a_direct_reference():
    rng = np.random.default_rng(0)
    X, Wt = rng.standard_normal((2, 4, 5, 6)), rng.standard_normal((6, 2, 3, 2))
    stride, pad, dil, groups = (2, 1), (1, 0), (1, 2), 2
    x, w = tensor(X.astype(np.float32), requires_grad=True), tensor(Wt.astype(np.float32), requires_grad=True)
    y = apply(Op.CONV2D, x, w, arg=(stride, pad, dil, groups))
    G = rng.standard_normal(y.shape)
    y.backward(gradient=tensor(G.astype(np.float32)))
    # y[n, o, i, j] = Σ_c,a,b x_pad[n, g·C/G + c, i·s + a·d, j·s + b·d] · w[o, c, a, b]
    Xp = np.pad(X, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dXp, dW = np.zeros_like(Xp), np.zeros_like(Wt)
    O, Cg, kh, kw = Wt.shape
    Og = O // groups
    for o in range(O):
        grp = o // Og
        for c in range(Cg):
            for a in range(kh):
                for b_ in range(kw):
                    hs, ws = a * dil[0], b_ * dil[1]
                    patch = Xp[:, grp * Cg + c, hs:hs + stride[0] * (y.shape[2] - 1) + 1:stride[0],
                               ws:ws + stride[1] * (y.shape[3] - 1) + 1:stride[1]]
                    dW[o, c, a, b_] = np.sum(patch * G[:, o])
                    dXp[:, grp * Cg + c, hs:hs + stride[0] * (y.shape[2] - 1) + 1:stride[0],
                        ws:ws + stride[1] * (y.shape[3] - 1) + 1:stride[1]] += G[:, o] * Wt[o, c, a, b_]
    np.testing.assert_allclose(w.grad.numpy(), dW, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(x.grad.numpy(), dXp[:, :, pad[0]:pad[0] + 5, pad[1]:pad[1] + 6], rtol=1e-4, atol=1e-4)


# --- detach -------------------------------------------------------------------------------------------

def test_lazy_detach_stops_the_gradient_and_aliases_its_source():
    x = tensor([1.0, 2.0], requires_grad=True)
    y = apply(Op.EXP, x)
    z = y.detach()
    assert z.node.op is Op.DETACH and not z.requires_grad and not z.node.realized
    realize(y, z)
    assert np.shares_memory(y.node.buf, z.node.buf)
    total(apply(Op.MUL, y, z)).backward()       # d/dx (e^x · stop(e^x)) = e^2x
    np.testing.assert_allclose(x.grad.numpy(), np.exp([2.0, 4.0]), rtol=1e-6)

def test_eager_detach_realizes_and_shares_the_buffer(monkeypatch):
    monkeypatch.setattr(ag, "EAGER_DETACH", True)
    x = tensor([1.0, 2.0], requires_grad=True)
    y = apply(Op.EXP, x)
    z = y.detach()
    assert z.node.op is Op.INPUT and z.node.realized and not z.requires_grad
    assert y.node.realized and z.node.buf is y.node.buf
    np.testing.assert_allclose(z.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


# --- one schedule ---------------------------------------------------------------------------------------

def test_forward_and_backward_share_one_schedule():
    x = tensor(r(2, 3).astype(np.float32), requires_grad=True)
    w = tensor(r(1, 3, 2, seed=1).astype(np.float32), requires_grad=True)
    h = apply(Op.TANH, apply(Op.MATMUL, apply(Op.RESHAPE, x, shape=(1, 2, 3), dtype=float32), w))
    loss = total(h)
    loss.backward()
    sched = schedule(loss, x.grad, w.grad)
    assert sum(n.op is Op.TANH for n in sched.nodes) == 1 and sum(n.op is Op.MATMUL for n in sched.nodes) == 3
    realize(loss, x.grad, w.grad)
    assert loss.node.realized and x.grad.node.realized and w.grad.node.realized


def _nonzero_gradient(op) -> bool:
    "Does the first case of `op` have a gradient that is not all zeros (a rule scaled by 1.1 can then be noticed)?"
    fn, inputs = CASES[op][0]
    ts = [tensor(np.asarray(a, np.float32), requires_grad=True) if np.asarray(a).dtype.kind == "f" else tensor(np.asarray(a))
          for a in inputs]
    out = fn(*ts)
    if isinstance(out, tuple): return True          # (the linear-algebra factorizations: gradients everywhere)
    total(out).backward()
    return any(t.grad is not None and np.any(t.grad.numpy() != 0) for t in ts)

ZERO_GRADIENT = {op for op in CASES if not _nonzero_gradient(op)}   # floor, round...: PyTorch's zero gradient


def test_zero_gradient_rules_are_the_rounding_ones():
    rounding = {getattr(Op, n) for n in ("FLOOR", "CEIL", "ROUND", "TRUNC", "SIGN", "FLOOR_DIVIDE") if hasattr(Op, n)}
    assert ZERO_GRADIENT and ZERO_GRADIENT <= rounding, ZERO_GRADIENT


@pytest.mark.parametrize("op", [op for op in CASES if op not in ZERO_GRADIENT], ids=lambda op: op.name)
def test_the_cases_catch_a_rule_ten_percent_off(op, monkeypatch):
    "Mutation check: scale every gradient of one rule by 1.1; some case of that op must fail."
    good = vjp_rule(op)
    def off(node, g, srcs):
        return tuple(None if t is None else apply(Op.MUL, t, ag._k(1.1, t)) for t in good(node, g, srcs))
    monkeypatch.setitem(vjp_rules, op, off)
    failed = 0
    for fn, inputs in CASES[op]:
        try: gradcheck(fn, inputs)
        except GradcheckError: failed += 1
    assert failed, f"no case of {op.name} noticed its rule scaled by 1.1"


def test_backward_defers_its_output_to_the_next_realize():
    x = tensor([1.0, 2.0], requires_grad=True)
    loss = total(apply(Op.EXP, x))
    loss.backward()
    assert not loss.node.realized
    realize(x.grad)                    # e.g. the optimiser's realize of the new parameters
    assert loss.node.realized          # the loss was computed in the same schedule


def test_post_accumulate_grad_hooks_run_once_per_backward_after_the_output_is_deferred():
    "Each hooked leaf's hook runs once per backward, with the whole accumulated .grad; a hook that realizes a"
    "gradient computes the deferred loss in the same schedule; a removed hook stops."
    a = tensor([1.0, 2.0], requires_grad=True)
    b = tensor([3.0], requires_grad=True)
    y = apply(Op.MUL, a, a)                            # a is used twice: two contributions, one accumulation
    loss = apply(Op.ADD, total(apply(Op.MUL, y, a)), total(b))
    calls = []
    def on_a(p):
        calls.append("a")
        realize(p.grad)
        assert loss.node.realized                      # backward deferred the loss before calling the hooks
    ha = a.register_post_accumulate_grad_hook(on_a)
    b.register_post_accumulate_grad_hook(lambda p: calls.append("b"))
    loss.backward()
    assert sorted(calls) == ["a", "b"]
    np.testing.assert_allclose(a.grad.numpy(), 3 * np.array([1.0, 4.0]))
    ha.remove()
    total(apply(Op.MUL, a, a)).backward()              # b takes no part and a's hook is gone
    assert sorted(calls) == ["a", "b"]


def test_backward_of_an_integer_output_is_refused():
    x = tensor([1.5, -2.0], requires_grad=True)
    n = apply(Op.CAST, x, shape=(2,), dtype=int64)
    with pytest.raises(GradError, match="does not require grad|float output"):
        n.backward(gradient=tensor(np.array([1, 1])))


# --- gradcheck of the public operators (compositions of the rules) ---------------------------------------

F = pytest.importorskip("vkml.nn.functional")
LAB = np.array([1, 0, 2])

PUBLIC = {
    "softmax": (lambda x: F.softmax(x, -1), [r(3, 4)]),
    "log_softmax": (lambda x: F.log_softmax(x, 1), [r(3, 4)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, tensor(LAB), label_smoothing=0.1), [r(3, 4)]),
    "mse_loss": (lambda x, y: F.mse_loss(x, y), [r(3, 4), r(3, 4, seed=1)]),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y), [r(3, 4), r(3, 4, seed=1)]),
    "binary_cross_entropy_with_logits": (lambda x, y: F.binary_cross_entropy_with_logits(x, y),
                                         [r(3, 4), r(3, 4, lo=0, hi=1, seed=1)]),
    "layer_norm": (lambda x, w, b_: F.layer_norm(x, (4,), w, b_), [r(3, 4), r(4, seed=1), r(4, seed=2)]),
    "batch_norm": (lambda x, w, b_: F.batch_norm(x, None, None, w, b_, training=True),
                   [r(4, 3, 2, 2), r(3, seed=1), r(3, seed=2)]),
    "linear": (lambda x, w, b_: F.linear(x, w, b_), [r(3, 4), r(5, 4, seed=1), r(5, seed=2)]),
    "matmul (batch broadcast)": (lambda a, b_: a @ b_, [r(2, 3, 4), r(4, 2, seed=1)]),
    "conv2d": (lambda x, w, b_: F.conv2d(x, w, b_, stride=2, padding=1), [r(2, 3, 5, 5), r(4, 3, 3, 3, seed=1), r(4, seed=2)]),
    "conv_transpose2d": (lambda x, w, b_: F.conv_transpose2d(x, w, b_, stride=2, padding=1, output_padding=1),
                         [r(1, 3, 3, 3), r(3, 2, 3, 3, seed=1), r(2, seed=2)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2, 2, ceil_mode=True), [r(1, 2, 5, 5)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [r(1, 2, 6, 6)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [r(1, 2, 5, 7)]),
    "scaled_dot_product_attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                     [r(1, 3, 4), r(1, 3, 4, seed=1), r(1, 3, 4, seed=2)]),
    "embedding": (lambda w: F.embedding(tensor(np.array([0, 2, 2])), w), [r(4, 3)]),
    "var / logsumexp / norm": (lambda x: x.var(1) + x.logsumexp(1) + x.norm(), [r(3, 4)]),
    "einsum": (lambda a, b_: VF.einsum("ij,jk->ik", a, b_), [r(2, 3), r(3, 2, seed=1)]),
    "getitem / flip / repeat": (lambda x: x[1:, ::-2].flip(0).repeat(2, 1), [r(3, 4)]),
}

@pytest.mark.parametrize("name", list(PUBLIC))
def test_public_operator_gradients(name):
    fn, inputs = PUBLIC[name]
    assert gradcheck(fn, inputs)


# --- the gradients of slices that tile an axis ---------------------------------------------------------

def _kernel_ops(t) -> list:
    return [n.op for k in schedule(t).kernels for n in k.nodes]

@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_the_gradients_of_a_split_are_concatenated(device):
    """split / chunk (a fused q, k, v projection): the parts' gradients tile the axis, so the input's gradient is their
    concatenation, as PyTorch's split backward makes it; adding three zero-padded full-size copies cost three times the
    memory and traffic. The values: each part's own rule, in place."""
    xv = r(4, 9).astype(np.float32)
    x = tensor(xv, device=device, requires_grad=True)
    a, b_, c = x.split(3, dim=1)
    (a * 2 + b_.exp() * 3 + c.sin()).sum().backward()
    ops = _kernel_ops(x.grad)
    assert Op.CONCAT in ops and Op.SLICE_BACKWARD not in ops, ops
    want = np.concatenate([np.full((4, 3), 2.0), 3 * np.exp(xv[:, 3:6]), np.cos(xv[:, 6:])], 1)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-6)

@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)])
def test_slices_tiling_a_run_inside_an_axis_are_concatenated_and_padded_once(device):
    yv = r(4, 9).astype(np.float32)
    y = tensor(yv, device=device, requires_grad=True)
    p, q = y[:, 2:5], y[:, 5:7]
    (p.sum() * 2 + (q * q).sum()).backward()
    ops = _kernel_ops(y.grad)
    assert ops.count(Op.SLICE_BACKWARD) == 1 and Op.CONCAT in ops, ops
    want = np.zeros((4, 9)); want[:, 2:5] = 2; want[:, 5:7] = 2 * yv[:, 5:7]
    np.testing.assert_allclose(y.grad.numpy(), want, rtol=1e-6, atol=1e-6)

def test_slices_with_a_gap_or_an_overlap_are_added():
    zv = r(3, 8).astype(np.float32)
    for parts in ([(0, 2), (4, 8)], [(0, 5), (3, 8)]):
        z = tensor(zv, requires_grad=True)
        sum((z[:, a:b_] * (i + 2)).sum() for i, (a, b_) in enumerate(parts)).backward()
        want = np.zeros((3, 8))
        for i, (a, b_) in enumerate(parts): want[:, a:b_] += i + 2
        np.testing.assert_allclose(z.grad.numpy(), want)
