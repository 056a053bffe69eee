"""Every graph op of the CPU oracle against independent references: numpy/scipy formulas and explicit
loops written here (nothing from vkml.backends.cpu's implementations is used as a reference)."""
import itertools, math, zlib
import numpy as np
import pytest
import scipy.special as sp

import vkml
from vkml.core.dtypes import (float32, float16, float64, int32, int64, bool_, DTYPES, FLOATS, EmptyReductionError,
                         IndexOutOfRangeError, ShapeError, DTypeError, to_dtype)
from vkml.core.ops import Op, ACCEPTED_DTYPES
from vkml.core.elementwise import FLOAT_UNARY_OPS, COMPARE_OPS
from vkml.frontend.tensor import tensor, apply, make_node, wrap, Node
import vkml.backends.cpu
from vkml.backends.cpu import numpy_impl, float64_mode, CPUBackend
import oracle

NUMERIC = (float32, float16, float64, int32, int64)
SHAPES = [(), (0,), (1,), (5,), (2, 0), (1, 3), (3, 4), (2, 3, 4), (1, 2, 0, 3), (2, 1, 3, 2)]
RNG = [np.random.default_rng(0)]

@pytest.fixture(autouse=True)
def _seeded(request):
    "Each test draws from its own stream, so a failure reproduces alone."
    RNG[0] = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))

def rand(shape, dt, lo=-3.0, hi=3.0, rng=None):
    "Random test data of a vkml dtype."
    rng = rng or RNG[0]
    if dt is bool_: return np.asarray(rng.random(shape) < 0.5)
    if dt.is_float: return np.asarray(rng.uniform(lo, hi, shape).astype(dt.np))
    return np.asarray(rng.integers(int(lo) - 2, int(hi) + 3, shape).astype(dt.np))

def inp(a):
    "A realized INPUT tensor holding a copy of `a` (built directly: `tensor()` turns 0-d arrays into shape (1,))."
    a = np.array(a, copy=True, order="C")
    return wrap(Node(Op.INPUT, (), None, a.shape, to_dtype(a.dtype), "cpu", buf=a))

def run(op, *arrays, arg=None, shape=None, dtype=None):
    "The op applied through the graph to inputs holding `arrays`, as numpy."
    return apply(op, *[inp(a) for a in arrays], arg=arg, shape=shape, dtype=dtype).numpy()

def source(op, arg, shape, dt):
    n = make_node(op, (), arg, shape, dt); n.device = "cpu"
    return wrap(n).numpy()

TOL = {float32: dict(rtol=2e-6, atol=1e-30), float16: dict(rtol=1e-3, atol=1e-7), float64: dict(rtol=4e-15, atol=1e-300)}
ACC_EPS = {float32: 2.0**-23, float16: 2.0**-23, float64: 2.0**-52}   # the accumulator's epsilon (f16 adds in f32)

def check(got, ref, dt, scale=1.0, absref=None, k=1):
    """Compare against a float64 reference rounded to `dt` (ints/bools exactly). Floats: a few ulps of the result
    (`scale`), plus, for sums of `k` terms, k·ε·Σ|terms| (`absref`), the accumulation bound (ε of f32, or f64)."""
    assert got.dtype == dt.np, (got.dtype, dt)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if not dt.is_float:
        np.testing.assert_array_equal(got, ref.astype(dt.np)); return
    with np.errstate(all="ignore"): g, r = got.astype(np.float64), ref.astype(dt.np).astype(np.float64)
    tol = TOL[dt]["rtol"] * scale * np.abs(r) + TOL[dt]["atol"]
    if absref is not None: tol = tol + k * ACC_EPS[dt] * np.asarray(absref, np.float64)
    oracle.assert_close(g, r, bound=tol)

# ---------------------------------------------------------------- completeness
def test_every_op_has_an_implementation():
    from vkml.core.elementwise import ELEMENTWISE
    assert set(numpy_impl) | set(ELEMENTWISE) == set(Op)

def test_zero_d_tensor_keeps_its_shape():
    assert tensor(np.float32(1.5)).shape == () and tensor(np.array(2, np.int64)).numpy().shape == ()

def test_input_cannot_be_computed():
    with pytest.raises(vkml.BackendError, match="cannot be computed"):
        from vkml.backends.cpu import compute
        compute(Node(Op.INPUT, (), None, (2,), float32, "cpu"))

# ---------------------------------------------------------------- sources
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("seed,offset", [(0, 0), (42, 7), (2**64 - 1, 2**32 - 3), (0x123456789ABCDEF0, 123456)])
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 1, 2, 3)])
def test_rand_bits(dt, seed, offset, shape):
    got = source(Op.RAND, (seed, offset), shape, dt)
    assert got.dtype == dt.np and got.shape == shape
    ref = oracle.uniform(seed, offset, math.prod(shape), dt).reshape(shape)
    np.testing.assert_array_equal(got.astype(np.float64), ref)   # exact: the values are representable

def test_rand_is_uniformish():
    r = source(Op.RAND, (1, 0), (20000,), float32)
    assert 0 <= r.min() and r.max() < 1 and abs(r.mean() - 0.5) < 0.01
    assert len(np.unique(source(Op.RAND, (1, 0), (4096,), float16))) > 1000

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3), (1, 2, 1, 2)])
def test_full_const(dt, shape):
    v = {float32: -1.5, float16: 0.1, float64: 0.1, int32: -7, int64: 2**40, bool_: True}[dt]
    check(source(Op.FULL, v, shape, dt), np.full(shape, v, dt.np), dt)
    check(source(Op.CONST, v, (), dt), np.array(v, dt.np), dt)

@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("start,step,n", [(0, 1, 0), (0, 1, 6), (3, -2, 5), (1, 3, 4)])
def test_arange(dt, start, step, n):
    ref = np.array([start + i * step for i in range(n)], np.float64)
    check(source(Op.ARANGE, (start, step), (n,), dt), ref, dt)

def test_arange_float_step():
    got = source(Op.ARANGE, (0.5, 0.25, ), (5,), float32)
    check(got, [0.5, 0.75, 1.0, 1.25, 1.5], float32)

# ---------------------------------------------------------------- unary
def _gelu_tanh(x): return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
def _softplus(x, b, t): return np.where(b * x > t, x, np.log1p(np.exp(b * x)) / b)

UNARY_REF = {
    Op.ERF: (None, sp.erf), Op.ERFC: (None, sp.erfc), Op.EXP: (None, np.exp), Op.LOG: (None, np.log),
    Op.SQRT: (None, np.sqrt), Op.RSQRT: (None, lambda x: 1 / np.sqrt(x)), Op.RECIPROCAL: (None, lambda x: 1 / x),
    Op.SIN: (None, np.sin), Op.COS: (None, np.cos), Op.TANH: (None, np.tanh), Op.SIGMOID: (None, sp.expit),
    Op.GELU: ("none", lambda x: x * 0.5 * sp.erfc(-x / np.sqrt(2))), Op.SILU: (None, lambda x: x * sp.expit(x)),
    Op.LEAKY_RELU: (0.01, lambda x: np.where(x > 0, x, 0.01 * x)),
    Op.ELU: (1.3, lambda x: np.where(x > 0, x, 1.3 * (np.exp(x) - 1))),
    Op.SOFTPLUS: ((2.0, 3.0), lambda x: _softplus(x, 2.0, 3.0)),
    Op.HARDSHRINK: (0.5, lambda x: np.where(np.abs(x) > 0.5, x, 0.0)),
    Op.SOFTSHRINK: (0.5, lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0))),
    Op.THRESHOLD: ((0.5, -1.0), lambda x: np.where(x > 0.5, x, -1.0)),
    Op.CELU: (0.7, lambda x: np.where(x > 0, x, 0.7 * np.expm1(x / 0.7))),
    Op.LOGIT: ((0.2, 0.8), lambda x: np.log(np.clip(x, 0.2, 0.8) / (1 - np.clip(x, 0.2, 0.8)))),
}

def _from_operator_table() -> dict:
    "(None, reference) for the float unary ops without a parameter that a one-tensor row of the operator table names."
    import vkml.frontend.registry as R
    from vkml.core.elementwise import ELEMENTWISE as EW
    ops = {n: getattr(Op, n.upper(), None) for n in R.names(form="unary")}
    ops |= {n: getattr(Op, n.removeprefix("special.").upper(), None) for n in R.names(module="vkml.special")}   # vkml.special's rows
    ops["frexp"] = Op.FREXP_MANTISSA                                                 # (frexp's first output)
    return {op: (None, (lambda x: np.frexp(x)[0]) if n == "frexp" else R.OPERATORS[n].reference_fn()) for n, op in ops.items()
            if op in FLOAT_UNARY_OPS and EW[op].example_arg is None and EW[op].params is None}

UNARY_REF = {**_from_operator_table(), **UNARY_REF}   # a new op's case comes from its row; the hand-written ones add parameters

def test_unary_table_covers_float_unary_ops():
    assert set(UNARY_REF) == FLOAT_UNARY_OPS

@pytest.mark.parametrize("op", sorted(UNARY_REF, key=lambda o: o.name), ids=lambda o: o.name)
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
def test_float_unary(op, dt, shape):
    assert ACCEPTED_DTYPES[op] == FLOATS
    arg, f = UNARY_REF[op]
    x = rand(shape, dt, -4, 4)
    if op in (Op.LOG, Op.SQRT, Op.RSQRT): x = np.abs(x) + dt.np.type(0.01)
    with np.errstate(all="ignore"): ref = f(x.astype(np.float64))
    check(run(op, x, arg=arg), ref, dt, scale=2.0)

@pytest.mark.parametrize("dt", FLOATS)
def test_gelu_tanh(dt):
    x = rand((50,), dt, -5, 5)
    check(run(Op.GELU, x, arg="tanh"), _gelu_tanh(x.astype(np.float64)), dt, scale=2.0)

@pytest.mark.parametrize("op", [Op.ERF, Op.ERFC, Op.EXP, Op.LOG, Op.SQRT, Op.TANH, Op.SIGMOID, Op.GELU, Op.SILU, Op.ELU,
                                Op.SOFTPLUS, Op.LEAKY_RELU, Op.SIN], ids=lambda o: o.name)
@pytest.mark.parametrize("dt", FLOATS)
def test_float_unary_special_values(op, dt):
    arg = UNARY_REF[op][0]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30 if dt is float32 else 1e-6, 60.0], dt.np)
    got = run(op, x, arg=arg)
    assert np.isnan(got[0])                                 # NaN in, NaN out
    with np.errstate(all="ignore"): ref = UNARY_REF[op][1](x.astype(np.float64))
    check(got, ref, dt, scale=2.0)

def test_gelu_keeps_tiny_negative_values():
    x = np.array([-10.0, -5.0], np.float32)      # ½x(1 + erf(x/√2)) would cancel to 0; the value is representable
    check(run(Op.GELU, x, arg="none"), x.astype(np.float64) * 0.5 * sp.erfc(-x.astype(np.float64) / np.sqrt(2)), float32)
    assert run(Op.GELU, x, arg="none")[0] < 0

def test_maxpool_backward_checks_the_gradient_shape():
    with pytest.raises(ShapeError):
        run(Op.MAXPOOL2D_BACKWARD, np.zeros((1, 1, 3, 3), np.float32), np.zeros((1, 1, 4, 4), np.float32),
            arg=((2, 2), (2, 2), (0, 0), (1, 1), False))

def test_erf_extremes():
    x = np.array([-30, -6, -1e-3, 1e-3, 6, 30], np.float32)
    check(run(Op.ERF, x), sp.erf(x.astype(np.float64)), float32)
    check(run(Op.ERFC, x), sp.erfc(x.astype(np.float64)), float32)

INT_UNARY_REF = {Op.SIGN: (None, np.sign), Op.NEG: (None, np.negative), Op.ABS: (None, np.abs),
                 Op.RELU: (None, lambda x: np.where(x > 0, x, 0 * x)),
                 Op.CLAMP: ((-1, 2), lambda x: np.where(x < -1, -1, np.where(x > 2, 2, x)))}

@pytest.mark.parametrize("op", sorted(INT_UNARY_REF, key=lambda o: o.name), ids=lambda o: o.name)
@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", SHAPES)
def test_numeric_unary(op, dt, shape):
    assert set(ACCEPTED_DTYPES[op]) == set(NUMERIC)
    arg, f = INT_UNARY_REF[op]
    x = rand(shape, dt)
    check(run(op, x, arg=arg), f(x.astype(np.float64) if dt.is_float else x), dt)

@pytest.mark.parametrize("dt", FLOATS)
def test_nan_propagates_in_sign_relu_clamp(dt):
    x = np.array([np.nan, -np.inf, np.inf, -2, 0, 2], dt.np)
    assert np.isnan(run(Op.SIGN, x)[0]) and np.isnan(run(Op.RELU, x)[0])
    assert list(run(Op.RELU, x)[1:]) == [0, np.inf, 0, 0, 2]
    c = run(Op.CLAMP, x, arg=(-1, 1))
    assert np.isnan(c[0]) and list(c[1:]) == [-1, 1, -1, 0, 1]
    assert list(run(Op.CLAMP, x, arg=(None, 1))[1:]) == [-np.inf, 1, -2, 0, 1]
    assert list(run(Op.CLAMP, x, arg=(0.5, None))[1:]) == [0.5, np.inf, 0.5, 0.5, 2]

@pytest.mark.parametrize("src", DTYPES)
@pytest.mark.parametrize("dst", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3)])
def test_cast(src, dst, shape):
    x = rand(shape, src, -100, 100)
    if src.is_float and dst is not bool_ and not dst.is_float:
        ref = np.trunc(x.astype(np.float64))                # toward zero
    elif dst is bool_:
        ref = x != 0
    else:
        ref = x.astype(np.float64) if src is not bool_ else np.where(x, 1.0, 0.0)
    got = run(Op.CAST, x, shape=shape, dtype=dst)
    assert got.dtype == dst.np
    np.testing.assert_array_equal(got, np.asarray(ref).astype(dst.np))

def test_cast_special():
    x = np.array([np.nan, 0.0, -0.0, 0.5, -2.9, 65504 * 2], np.float32)
    assert list(run(Op.CAST, x, shape=(6,), dtype=bool_)) == [True, False, False, True, True, True]
    assert list(run(Op.CAST, x[3:5], shape=(2,), dtype=int64)) == [0, -2]
    assert np.isinf(run(Op.CAST, x, shape=(6,), dtype=float16)[-1])   # overflow to inf in f16

# ---------------------------------------------------------------- binary
BIN_REF = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide, Op.POW: np.power,
           Op.MAXIMUM: np.fmax, Op.MINIMUM: np.fmin}   # fmax/fmin: NaN handled separately below

@pytest.mark.parametrize("op", sorted(BIN_REF, key=lambda o: o.name), ids=lambda o: o.name)
@pytest.mark.parametrize("shape", SHAPES)
def test_binary(op, shape):
    for dt in ACCEPTED_DTYPES[op]:
        a, b = rand(shape, dt), rand(shape, dt)
        if op is Op.POW: a = np.abs(a) + dt.np.type(0.5)
        if op is Op.DIV: b = np.where(b == 0, dt.np.type(1), b)
        if op is Op.POW and dt.is_int: ref = ipow_ref(a, b, dt)
        else: ref = BIN_REF[op](a.astype(np.float64), b.astype(np.float64)) if dt.is_float else BIN_REF[op](a, b)
        check(run(op, a, b), ref, dt, scale=2.0)

def ipow_ref(a, b, dt):
    """Integer power as PyTorch defines it, with Python's exact integers: a**b wrapped to the dtype's bits
    (two's complement, as every integer multiply wraps); for b < 0 (torch.pow on integer tensors): 1 when
    a == 1, (-1)**b when a == -1, else 0."""
    bits = 8 * dt.np.itemsize
    def one(x, e):
        x, e = int(x), int(e)
        if e < 0: return 1 if x == 1 else ((1 if e % 2 == 0 else -1) if x == -1 else 0)
        r = pow(x, e, 1 << bits)
        return r - (1 << bits) if r >= 1 << (bits - 1) else r
    return np.array([one(x, e) for x, e in zip(a.reshape(-1), b.reshape(-1))], dt.np).reshape(a.shape)

@pytest.mark.parametrize("dt", (int32, int64))
def test_integer_pow_wraps_and_negative_exponents(dt):
    a = np.array([3, -3, 2, 1, -1, -1, 0, 5, 7], dt.np)
    b = np.array([40, 41, 70, -5, -3, -4, -2, 0, 2 ** 30 + 1], dt.np)
    np.testing.assert_array_equal(run(Op.POW, a, b), ipow_ref(a, b, dt))

@pytest.mark.parametrize("dt", (int32, int64))
def test_integer_arith_wraps(dt):
    big = np.array([np.iinfo(dt.np).max], dt.np)
    assert run(Op.ADD, big, np.array([1], dt.np))[0] == np.iinfo(dt.np).min
    assert run(Op.MUL, big, np.array([2], dt.np))[0] == -2

@pytest.mark.parametrize("dt", FLOATS)
def test_binary_special_values(dt):
    a = np.array([0, 0, np.nan, 2, -8, 1, np.inf, 1], dt.np)
    b = np.array([0, np.nan, 0, np.nan, 1 / 3, np.inf, -np.inf, 0], dt.np)
    p = run(Op.POW, a, b)
    assert p[0] == 1 and np.isnan(p[1]) and p[2] == 1 and np.isnan(p[3]) and np.isnan(p[4])
    mx, mn = run(Op.MAXIMUM, a, b), run(Op.MINIMUM, a, b)
    nanpos = np.isnan(a) | np.isnan(b)
    assert (np.isnan(mx) == nanpos).all() and (np.isnan(mn) == nanpos).all()
    d = run(Op.DIV, a, b)
    assert np.isnan(d[0]) and d[7] == np.inf and np.isnan(d[6])   # 0/0, 1/0, inf/-inf
    assert run(Op.DIV, np.array([1, -1], dt.np), np.array([0, 0], dt.np)).tolist() == [np.inf, -np.inf]

CMP_REF = {Op.EQUAL: lambda a, b: a == b, Op.NOT_EQUAL: lambda a, b: a != b, Op.LESS: lambda a, b: a < b,
           Op.LESS_EQUAL: lambda a, b: a <= b, Op.GREATER: lambda a, b: a > b, Op.GREATER_EQUAL: lambda a, b: a >= b}

@pytest.mark.parametrize("op", sorted(COMPARE_OPS, key=lambda o: o.name), ids=lambda o: o.name)
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_compare(op, dt, shape):
    a, b = rand(shape, dt, -2, 2), rand(shape, dt, -2, 2)
    if dt.is_float and a.size: a.reshape(-1)[0] = np.nan
    ref = np.array([CMP_REF[op](x, y) for x, y in zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())], bool).reshape(shape)
    check(run(op, a, b), ref, bool_)

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_where(dt, shape):
    c, a, b = rand(shape, bool_), rand(shape, dt), rand(shape, dt)
    ref = np.array([x if k else y for k, x, y in zip(c.reshape(-1), a.reshape(-1), b.reshape(-1))], dt.np).reshape(shape)
    check(run(Op.WHERE, c, a, b), ref, dt)

# ---------------------------------------------------------------- reductions
def axes_sets(rank):
    return [tuple(c) for r in range(rank + 1) for c in itertools.combinations(range(rank), r)]

def reduce_ref(x, axes, keep, f, init):
    "Reduce by an explicit loop over the output positions, combining in index order."
    xr = np.moveaxis(x, axes, list(range(x.ndim - len(axes), x.ndim)))
    kept = xr.shape[:x.ndim - len(axes)]
    out = np.empty(kept, object)
    for pos in itertools.product(*map(range, kept)):
        acc = init
        for v in np.asarray(xr[pos]).reshape(-1).tolist(): acc = f(acc, v)
        out[pos] = acc
    if keep: out = out.reshape(tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return out

def _max(a, b): return a if (a != a or a >= b) else b   # NaN sticks, like torch
def _min(a, b): return a if (a != a or a <= b) else b

@pytest.mark.parametrize("op", [Op.SUM, Op.MAX, Op.MIN, Op.PROD, Op.MEAN], ids=lambda o: o.name)
@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 0), (3, 1), (2, 3, 4), (2, 0, 3), (1, 2, 3, 2)])
def test_reductions(op, shape):
    for dt in ACCEPTED_DTYPES[op]:
        if op is Op.SUM and dt is bool_: continue           # bool sums go through a CAST in the tensor layer
        x = rand(shape, dt, -2, 2)
        if op is Op.PROD and dt.is_float: x = (np.sign(x) * (0.5 + np.abs(x) / 2)).astype(dt.np)
        xf = x.astype(np.float64) if dt.is_float else x.astype(object)
        for axes in axes_sets(len(shape)):
            for keep in (False, True):
                empty = any(shape[a] == 0 for a in axes)
                if empty and (op is Op.MEAN or (op in (Op.MAX, Op.MIN) and not dt.is_float)):
                    with pytest.raises(EmptyReductionError): run(op, x, arg=(axes, keep))
                    continue
                got = run(op, x, arg=(axes, keep))
                absref = None
                if op in (Op.SUM, Op.MEAN) and dt.is_float:
                    absref = np.asarray(reduce_ref(np.abs(xf), axes, keep, lambda a, b: a + b, 0.0), np.float64)
                if op is Op.SUM: ref = reduce_ref(xf, axes, keep, lambda a, b: a + b, 0)
                elif op is Op.PROD: ref = reduce_ref(xf, axes, keep, lambda a, b: a * b, 1)
                elif op is Op.MAX: ref = reduce_ref(xf, axes, keep, _max, -math.inf if dt.is_float else -2**70)
                elif op is Op.MIN: ref = reduce_ref(xf, axes, keep, _min, math.inf if dt.is_float else 2**70)
                else:
                    k = math.prod(shape[a] for a in axes)
                    ref = np.asarray(reduce_ref(xf, axes, keep, lambda a, b: a + b, 0.0) / k, dtype=object)
                if not dt.is_float:   # wrap like the device
                    bits = 32 if dt is int32 else 64
                    ref = np.vectorize(lambda v: (v + 2**(bits - 1)) % 2**bits - 2**(bits - 1), otypes=[object])(ref) if ref.size else ref
                ref = np.asarray(ref.astype(np.float64) if dt.is_float else ref.astype(dt.np)).reshape(got.shape)
                k = max(1, math.prod(shape[a] for a in axes))
                if absref is not None: absref = absref.reshape(got.shape) / (k if op is Op.MEAN else 1)
                check(got, ref, dt, scale=2.0 * k if op is Op.PROD else 2.0, absref=absref, k=k)

def test_bool_sum_and_cumsum_in_a_bool_node_are_or():
    # the graph rule keeps bool for a bool SUM/CUMSUM (the tensor layer casts to int64 first); computed, it is "any"
    x = np.array([[False, True, True], [False, False, False]])
    check(run(Op.SUM, x, arg=((1,), False)), np.array([True, False]), bool_)
    check(run(Op.CUMSUM, x, arg=1), np.array([[False, True, True], [False, False, False]]), bool_)

def test_empty_reduction_identities():
    e = np.zeros((0, 2), np.float32)
    assert run(Op.SUM, e, arg=((0,), False)).tolist() == [0, 0]
    assert run(Op.MAX, e, arg=((0, 1), False)) == -np.inf
    assert run(Op.MIN, e, arg=((0,), True)).tolist() == [[np.inf, np.inf]]
    assert run(Op.PROD, e, arg=((0,), False)).tolist() == [1, 1]
    assert run(Op.SUM, np.zeros((0,), np.int64), arg=((0,), False)) == 0
    assert run(Op.PROD, np.zeros((0, 3), np.int32), arg=((0,), False)).tolist() == [1, 1, 1]
    assert run(Op.MEAN, e, arg=((1,), False)).shape == (0,)
    with pytest.raises(EmptyReductionError): run(Op.MEAN, e, arg=((0,), False))
    with pytest.raises(EmptyReductionError): run(Op.ARGMAX, e, arg=(0, False))
    with pytest.raises(EmptyReductionError): run(Op.MAX, np.zeros((0,), np.int32), arg=((0,), False))

@pytest.mark.parametrize("n", [2, 8, 64, 1001])
def test_prod_index_order(n):
    v = np.array([1e20, 1e-20] * (n // 2) + [1e20] * (n % 2), np.float32)
    got = run(Op.PROD, v, arg=((0,), False))
    assert got.dtype == np.float32 and got == np.float32(1e20 if n % 2 else 1.0)
    # the same values along axis 1 of a 2-D tensor, and as a keepdim reduction of several axes
    assert run(Op.PROD, v[None, :].repeat(3, 0), arg=((1,), True)).tolist() == [[float(got)]] * 3
    if n % 4 == 0:
        assert run(Op.PROD, v.reshape(1, -1, 2), arg=((1, 2), False)).tolist() == [1.0]
    with np.errstate(all="ignore"):
        lanes = v[: n - n % 2].reshape(-1, 2).prod(axis=0).prod()   # grouped by 2 lanes: inf * 0
    if n >= 8: assert np.isnan(lanes)

@pytest.mark.parametrize("shape,axes", [((1 << 20,), (0,)), ((64, 999), (1,)), ((999, 64), (0,)), ((8, 30, 40), (0, 2))])
def test_prod_is_a_running_product_bit_for_bit(shape, axes):
    "The oracle's product is numpy's product loop; this checks that it is one running product in index order."
    x = np.random.default_rng(7).uniform(0.5, 1.5, shape).astype(np.float32)
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim)).reshape(*(d for i, d in enumerate(shape) if i not in axes), -1)
    running = np.cumprod(moved, axis=-1)[..., -1]
    assert np.array_equal(run(Op.PROD, x, arg=(axes, False)), running)

def test_prod_f16_accumulates_in_f32():
    v = np.array([300, 300, 1 / 300, 1 / 300], np.float16)   # 9e4 overflows f16 (max 65504) but not f32
    assert abs(float(run(Op.PROD, v, arg=((0,), False))) - 1.0) < 2e-3

@pytest.mark.parametrize("dt", FLOATS)
def test_reduction_nan(dt):
    x = np.array([[1, np.nan, 3], [4, 5, 6]], dt.np)
    for op in (Op.SUM, Op.MAX, Op.MIN, Op.PROD, Op.MEAN):
        r = run(op, x, arg=((1,), False))
        assert np.isnan(r[0]) and not np.isnan(r[1]), op
    assert run(Op.MAX, np.array([-np.inf, np.inf], dt.np), arg=((0,), False)) == np.inf

def test_f16_sum_accumulates_in_f32():
    x = np.full(4096, 1.0, np.float16)                   # an f16 running sum stalls at 2048
    assert run(Op.SUM, x, arg=((0,), False)) == 4096
    assert run(Op.CUMSUM, x, arg=0)[-1] == 4096
    assert run(Op.MEAN, x, arg=((0,), False)) == 1

def argref(x, axis, keep, better):
    xr = np.moveaxis(x, axis, -1)
    out = np.zeros(xr.shape[:-1], np.int64)
    for pos in itertools.product(*map(range, xr.shape[:-1])):
        row, best = xr[pos].tolist(), 0
        for i, v in enumerate(row):
            b = row[best]
            if b != b: break                                 # NaN already found: it is the extreme
            if v != v or better(v, b): best = i
        out[pos] = best
    return np.expand_dims(out, axis) if keep else out

@pytest.mark.parametrize("op", [Op.ARGMAX, Op.ARGMIN], ids=lambda o: o.name)
@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", [(), (1,), (6,), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
def test_argmax_argmin(op, dt, shape):
    x = rand(shape, dt, -2, 2)                               # small range: ties are common
    if dt.is_float:
        x = np.round(x).astype(dt.np)
        if x.size > 3: x.reshape(-1)[3] = np.nan
    better = (lambda v, b: v > b) if op is Op.ARGMAX else (lambda v, b: v < b)
    for axis in range(max(1, len(shape))):
        for keep in (False, True):
            got = run(op, x, arg=(axis, keep))
            ref = argref(x.reshape(1) if x.ndim == 0 else x, axis, keep, better)
            check(got, ref.reshape(got.shape) if x.ndim == 0 else ref, int64)

@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 0), (3, 4), (2, 3, 4), (2, 1, 3, 2)])
def test_cumsum(dt, shape):
    x = rand(shape, dt)
    for axis in range(max(1, len(shape))):
        if not shape: ref = x.astype(np.float64)
        else:
            xm = np.moveaxis(x.astype(np.float64 if dt.is_float else np.int64), axis, 0)
            acc = np.zeros(xm.shape[1:], xm.dtype); rows = []
            for r in xm: acc = acc + r; rows.append(acc)
            ref = np.moveaxis(np.array(rows).reshape(xm.shape), 0, axis)
        n = max(1, shape[axis] if shape else 1)
        absref = np.cumsum(np.abs(x.astype(np.float64)), axis=axis) if shape else np.abs(x.astype(np.float64))
        check(run(Op.CUMSUM, x, arg=axis), ref, dt, scale=2, absref=absref, k=n)

# ---------------------------------------------------------------- movement
@pytest.mark.parametrize("dt", DTYPES)
def test_reshape_permute_expand_detach_contiguous(dt):
    x = rand((2, 3, 4), dt)
    check(run(Op.RESHAPE, x, shape=(4, 6), dtype=dt), x.reshape(4, 6), dt)
    check(run(Op.RESHAPE, x, shape=(2, 1, 12, 1), dtype=dt), x.reshape(2, 1, 12, 1), dt)
    for perm in itertools.permutations(range(3)):
        ref = np.empty(tuple(x.shape[p] for p in perm), x.dtype)
        for idx in itertools.product(*map(range, x.shape)): ref[tuple(idx[p] for p in perm)] = x[idx]
        check(run(Op.PERMUTE, x, arg=perm), ref, dt)
        pc = apply(Op.CONTIGUOUS, apply(Op.PERMUTE, tensor(x), arg=perm))
        check(pc.numpy(), ref, dt)
    y = rand((3, 1), dt)
    ref = np.array([[[y[j, 0]] * 5 for j in range(3)]] * 2, dt.np)
    check(run(Op.EXPAND, y, shape=(2, 3, 5), dtype=dt), ref, dt)
    check(run(Op.EXPAND, rand((), dt), shape=(0, 2), dtype=dt), np.zeros((0, 2)), dt)
    check(run(Op.DETACH, x), x, dt)
    check(run(Op.RESHAPE, np.zeros((0, 3), dt.np), shape=(3, 0), dtype=dt), np.zeros((3, 0)), dt)

def test_reshape_of_a_permuted_view_and_contiguous_copies():
    t = tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    p = apply(Op.PERMUTE, t, arg=(1, 0))
    r = apply(Op.RESHAPE, p, shape=(6,), dtype=float32)
    assert r.numpy().tolist() == [0, 3, 1, 4, 2, 5]
    c = apply(Op.CONTIGUOUS, t).realize()
    assert not np.shares_memory(c.node.buf, t.node.buf)

def slice_ref(x, arg):
    "Index lists built from the counting rule, one axis at a time."
    for ax, (start, stop, step) in enumerate(arg):
        n = max(0, math.ceil((stop - start) / step))
        x = np.take(x, [start + i * step for i in range(n)], axis=ax)
    return x

def random_slices(shape, rng):
    arg = []
    for d in shape:
        step = int(rng.choice([1, 2, 3, -1, -2]))
        if step > 0:
            start = int(rng.integers(0, d + 1)); stop = int(rng.integers(start, d + 1))
        else:
            start = int(rng.integers(-1, d)) if d else -1; stop = int(rng.integers(-1, start + 1)) if start >= 0 else -1
            if d == 0: start = stop = -1
        arg.append((start, stop, step))
    return tuple(arg)

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 0), (4, 5), (2, 3, 4), (3, 1, 4, 5)])
def test_slice_and_backward(dt, shape):
    rng = np.random.default_rng(len(shape) * 10 + shape[0])
    x = rand(shape, dt)
    for _ in range(6):
        arg = random_slices(shape, rng)
        got = run(Op.SLICE, x, arg=arg)
        ref = slice_ref(x, arg)
        check(got, ref, dt)
        # SLICE_BACKWARD: zeros of x's shape with g written where the slice read
        g = rand(ref.shape, dt)
        back = np.zeros(shape, dt.np)
        lists = [[s + i * st for i in range(max(0, math.ceil((e - s) / st)))] for s, e, st in arg]
        for pos in itertools.product(*[range(len(l)) for l in lists]):
            back[tuple(l[p] for l, p in zip(lists, pos))] = g[pos]
        check(run(Op.SLICE_BACKWARD, g, arg=arg, shape=shape, dtype=dt), back, dt)

def test_slice_negative_step_through_zero():
    x = np.arange(6, dtype=np.int32)
    assert run(Op.SLICE, x, arg=((5, -1, -1),)).tolist() == [5, 4, 3, 2, 1, 0]
    assert run(Op.SLICE, x, arg=((4, -1, -2),)).tolist() == [4, 2, 0]
    assert run(Op.SLICE, x, arg=((5, 0, -3),)).tolist() == [5, 2]
    assert run(Op.SLICE, x, arg=((0, 0, -1),)).tolist() == []

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0), (2, 3), (1, 2, 3), (2, 1, 2, 1)])
def test_pad(dt, shape):
    rng = np.random.default_rng(len(shape))
    widths = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in shape)
    value = {float32: -1.5, float16: 2.0, float64: 0.1, int32: 7, int64: -3, bool_: True}[dt]
    x = rand(shape, dt)
    ref = np.full(tuple(d + b + a for d, (b, a) in zip(shape, widths)), value, dt.np)
    ref[tuple(slice(b, b + d) for d, (b, a) in zip(shape, widths))] = x
    check(run(Op.PAD, x, arg=(widths, value)), ref, dt)

@pytest.mark.parametrize("dt", DTYPES)
def test_concat(dt):
    parts = [rand((2, k, 3), dt) for k in (1, 0, 4)]
    rows = [p[:, j] for p in parts for j in range(p.shape[1])]
    ref = np.stack(rows, axis=1)
    check(run(Op.CONCAT, *parts, arg=1), ref, dt)
    a, b = rand((3,), dt), rand((2,), dt)
    check(run(Op.CONCAT, a, b, arg=0), np.array(list(a) + list(b), dt.np), dt)

# ---------------------------------------------------------------- indexing
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("xshape,ishape,axis", [((5,), (3,), 0), ((3, 4), (3, 6), 1), ((3, 4), (2, 4), 0),
                                                ((3, 4), (2, 2), 1), ((2, 3, 4), (2, 2, 5), 2), ((2, 3, 1, 2), (1, 3, 1, 2), 0),
                                                ((3, 4), (0, 4), 0), ((1,), (1,), 0), ((), (), 0)])
def test_gather(dt, xshape, ishape, axis):
    rng = np.random.default_rng(1)
    x = rand(xshape, dt)
    size = xshape[axis] if xshape else 1
    idx = rng.integers(0, size, ishape).astype(np.int64)
    ref = np.zeros(ishape, dt.np)
    for pos in itertools.product(*map(range, ishape)):
        if not xshape: ref[pos] = x; continue
        src = list(pos); src[axis] = idx[pos]
        ref[pos] = x[tuple(src)]
    check(run(Op.GATHER, x, idx, arg=axis), ref, dt)

@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("dshape,ishape,axis", [((5,), (8,), 0), ((3, 4), (3, 6), 1), ((4, 3), (6, 3), 0),
                                                ((3, 4), (2, 2), 1), ((2, 3, 4), (2, 3, 7), 2), ((3, 2, 2, 2), (4, 2, 1, 2), 0),
                                                ((3, 4), (0, 4), 0), ((), (), 0)])
def test_index_add(dt, dshape, ishape, axis):
    rng = np.random.default_rng(2)
    dst, src = rand(dshape, dt), rand(ishape, dt)
    size = dshape[axis] if dshape else 1
    idx = rng.integers(0, size, ishape).astype(np.int64)
    acc = dst.astype(np.float64 if dt.is_float else np.int64).copy()
    absacc = np.array(np.abs(dst.astype(np.float64)))
    for pos in itertools.product(*map(range, ishape)):   # row-major order over the index
        tgt = list(pos)
        if dshape: tgt[axis] = idx[pos]
        tgt = tuple(tgt)
        acc[tgt] += src[pos]; absacc[tgt] += abs(float(src[pos]))
    d = inp(dst)
    got = apply(Op.INDEX_ADD, d, inp(idx), inp(src), arg=axis).numpy()
    check(got, acc, dt, scale=2.0, absref=absacc, k=max(1, math.prod(ishape)))
    assert np.array_equal(d.node.buf, dst)                # dst's buffer is not modified

@pytest.mark.parametrize("dt", NUMERIC + (bool_,))
@pytest.mark.parametrize("dshape,ishape,axis", [((5,), (8,), 0), ((3, 4), (3, 6), 1), ((4, 3), (6, 3), 0),
                                                ((3, 4), (2, 2), 1), ((2, 3, 4), (2, 3, 7), 2), ((3, 4), (0, 4), 0), ((), (), 0)])
def test_scatter(dt, dshape, ishape, axis):
    "torch.scatter: self[...idx[pos]...] = src[pos]; where an index repeats, the last position in row-major order wins."
    rng = np.random.default_rng(3)
    dst, src = rand(dshape, dt), rand(ishape, dt)
    size = dshape[axis] if dshape else 1
    idx = rng.integers(0, size, ishape).astype(np.int64)
    ref = dst.copy()
    for pos in itertools.product(*map(range, ishape)):   # row-major order: a later write replaces an earlier one
        tgt = list(pos)
        if dshape: tgt[axis] = idx[pos]
        ref[tuple(tgt)] = src[pos]
    d = inp(dst)
    got = apply(Op.SCATTER, d, inp(idx), inp(src), arg=axis).numpy()
    assert got.dtype == dst.dtype and np.array_equal(got, ref, equal_nan=dt.is_float)
    assert np.array_equal(d.node.buf, dst, equal_nan=dt.is_float)   # dst's buffer is not modified

def test_index_add_f16_accumulates_in_f32():
    dst = np.zeros(1, np.float16); src = np.ones(4096, np.float16); idx = np.zeros(4096, np.int64)
    assert run(Op.INDEX_ADD, dst, idx, src, arg=0)[0] == 4096

@pytest.mark.parametrize("bad", [-1, 4, 100])
def test_index_out_of_range(bad):
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    idx = np.array([[0, 1], [bad, 2]], np.int64)
    with pytest.raises(IndexOutOfRangeError, match=rf"index {bad}.*valid: 0 \.\. 3"):
        run(Op.GATHER, x, idx, arg=1)
    with pytest.raises(IndexOutOfRangeError, match=rf"index {bad}"):
        run(Op.INDEX_ADD, x, idx, np.ones((2, 2), np.float32), arg=1)
    with pytest.raises(IndexOutOfRangeError):
        run(Op.GATHER, np.zeros((2, 0), np.float32), np.zeros((2, 1), np.int64), arg=1)

def test_gather_index_larger_than_source_is_a_shape_error():
    with pytest.raises(ShapeError):
        run(Op.GATHER, np.zeros((2, 3), np.float32), np.zeros((3, 3), np.int64), arg=1)

# ---------------------------------------------------------------- matmul
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("b,m,k,n", [(1, 1, 1, 1), (2, 3, 4, 5), (1, 0, 3, 2), (2, 3, 0, 2), (3, 5, 7, 1), (1, 17, 33, 9)])
def test_matmul(dt, b, m, k, n):
    a, c = rand((b, m, k), dt), rand((b, k, n), dt)
    ref = np.zeros((b, m, n))
    for i, r, s in itertools.product(range(b), range(m), range(n)):
        ref[i, r, s] = sum(float(a[i, r, t]) * float(c[i, t, s]) for t in range(k))
    absref = np.abs(a.astype(np.float64)) @ np.abs(c.astype(np.float64))
    check(run(Op.MATMUL, a, c), ref, dt, scale=2, absref=absref, k=max(1, k))

def test_matmul_f16_accumulates_in_f32():
    a = np.ones((1, 1, 4096), np.float16); b = np.ones((1, 4096, 1), np.float16)
    assert run(Op.MATMUL, a, b)[0, 0, 0] == 4096

# ---------------------------------------------------------------- conv / im2col / col2im
def conv_ref(x, w, stride, pad, dil, g):
    N, C, H, W = x.shape; O, Cg, kh, kw = w.shape
    oh = (H + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (W + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((N, O, oh, ow))
    for n, o, i, j in itertools.product(range(N), range(O), range(oh), range(ow)):
        grp = o // (O // g); s = 0.0
        for c, a, b in itertools.product(range(Cg), range(kh), range(kw)):
            h, v = i * stride[0] - pad[0] + a * dil[0], j * stride[1] - pad[1] + b * dil[1]
            if 0 <= h < H and 0 <= v < W: s += float(x[n, grp * Cg + c, h, v]) * float(w[o, c, a, b])
        out[n, o, i, j] = s
    return out

CONV_CASES = [  # x shape, w shape, stride, padding, dilation, groups
    ((1, 1, 4, 4), (1, 1, 3, 3), (1, 1), (0, 0), (1, 1), 1),
    ((2, 3, 5, 6), (4, 3, 3, 2), (2, 1), (1, 0), (1, 1), 1),
    ((1, 4, 7, 7), (6, 2, 3, 3), (2, 2), (1, 2), (2, 1), 2),
    ((2, 4, 5, 5), (4, 1, 2, 3), (1, 3), (0, 1), (1, 2), 4),
    ((1, 2, 1, 1), (3, 2, 1, 1), (1, 1), (0, 0), (1, 1), 1),
    ((0, 2, 4, 4), (3, 2, 3, 3), (1, 1), (1, 1), (1, 1), 1),
]

@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d(dt, case):
    xs, ws, st, pd, dl, g = case
    x, w = rand(xs, dt), rand(ws, dt)
    check(run(Op.CONV2D, x, w, arg=(st, pd, dl, g)), conv_ref(x, w, st, pd, dl, g), dt, scale=2,
          absref=conv_ref(np.abs(x), np.abs(w), st, pd, dl, g), k=ws[1] * ws[2] * ws[3])

def conv_t_ref(x, w, stride, pad, opad, dil, g):
    N, Cin, H, W = x.shape; _, Cog, kh, kw = w.shape
    ho = (H - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + opad[0] + 1
    wo = (W - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + opad[1] + 1
    out = np.zeros((N, Cog * g, ho, wo)); cig = Cin // g
    for n, ci, i, j in itertools.product(range(N), range(Cin), range(H), range(W)):
        grp = ci // cig
        for co, a, b in itertools.product(range(Cog), range(kh), range(kw)):
            h, v = i * stride[0] - pad[0] + a * dil[0], j * stride[1] - pad[1] + b * dil[1]
            if 0 <= h < ho and 0 <= v < wo: out[n, grp * Cog + co, h, v] += float(x[n, ci, i, j]) * float(w[ci, co, a, b])
    return out

CONVT_CASES = [  # x, w (Cin, Cout/g, kh, kw), stride, padding, output_padding, dilation, groups
    ((1, 1, 3, 3), (1, 1, 2, 2), (1, 1), (0, 0), (0, 0), (1, 1), 1),
    ((2, 3, 4, 3), (3, 2, 3, 3), (2, 2), (1, 0), (1, 0), (1, 1), 1),
    ((1, 4, 3, 4), (4, 3, 3, 2), (2, 3), (1, 1), (1, 2), (1, 2), 2),
    ((1, 2, 2, 2), (2, 1, 2, 2), (1, 1), (0, 0), (1, 1), (2, 2), 2),   # output_padding < dilation, = stride
    ((1, 2, 1, 1), (2, 2, 1, 1), (1, 1), (0, 0), (0, 0), (1, 1), 1),
]

@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CONVT_CASES)
def test_conv_transpose2d(dt, case):
    xs, ws, st, pd, op, dl, g = case
    x, w = rand(xs, dt), rand(ws, dt)
    check(run(Op.CONV_TRANSPOSE2D, x, w, arg=(st, pd, op, dl, g)), conv_t_ref(x, w, st, pd, op, dl, g), dt, scale=2,
          absref=conv_t_ref(np.abs(x), np.abs(w), st, pd, op, dl, g), k=xs[1] * ws[2] * ws[3])

def unfold_ref(x, k, d, p, s):
    N, C, H, W = x.shape
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((N, C * k[0] * k[1], oh * ow), x.dtype)
    for n, c, a, b, i, j in itertools.product(range(N), range(C), range(k[0]), range(k[1]), range(oh), range(ow)):
        h, v = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
        if 0 <= h < H and 0 <= v < W: out[n, (c * k[0] + a) * k[1] + b, i * ow + j] = x[n, c, h, v]
    return out, (oh, ow)

def fold_ref(cols, size, k, d, p, s):
    N, CK, L = cols.shape; C = CK // (k[0] * k[1]); H, W = size
    oh = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    out = np.zeros((N, C, H, W))
    for n, c, a, b, i, j in itertools.product(range(N), range(C), range(k[0]), range(k[1]), range(oh), range(ow)):
        h, v = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
        if 0 <= h < H and 0 <= v < W: out[n, c, h, v] += float(cols[n, (c * k[0] + a) * k[1] + b, i * ow + j])
    return out

UNFOLD_CASES = [((1, 1, 4, 4), (2, 2), (1, 1), (0, 0), (1, 1)), ((2, 3, 5, 4), (3, 2), (1, 2), (1, 1), (2, 1)),
                ((1, 2, 6, 6), (2, 3), (2, 1), (2, 0), (3, 2)), ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1))]

@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", UNFOLD_CASES)
def test_im2col_col2im(dt, case):
    xs, k, d, p, s = case
    x = rand(xs, dt)
    ref, (oh, ow) = unfold_ref(x, k, d, p, s)
    check(run(Op.IM2COL, x, arg=(k, d, p, s)), ref, dt)
    cols = rand(ref.shape, dt)
    check(run(Op.COL2IM, cols, arg=(xs[2:], k, d, p, s)), fold_ref(cols, xs[2:], k, d, p, s), dt, scale=2,
          absref=fold_ref(np.abs(cols), xs[2:], k, d, p, s), k=k[0] * k[1])

# ---------------------------------------------------------------- pooling
def pool_out(n, k, s, p, d, ceil):
    num = n + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= n + p: o -= 1
    return o

def maxpool_ref(x, k, s, p, d, ceil):
    "torch's CPU loop: valid positions only, first strictly greater, NaN wins (first NaN here)."
    N, C, H, W = x.shape
    oh, ow = pool_out(H, k[0], s[0], p[0], d[0], ceil), pool_out(W, k[1], s[1], p[1], d[1], ceil)
    out = np.full((N, C, oh, ow), -np.inf); arg = np.zeros((N, C, oh, ow, 2), int)
    for n, c, i, j in itertools.product(range(N), range(C), range(oh), range(ow)):
        best, at = -math.inf, None
        for a, b in itertools.product(range(k[0]), range(k[1])):
            h, v = i * s[0] - p[0] + a * d[0], j * s[1] - p[1] + b * d[1]
            if not (0 <= h < H and 0 <= v < W): continue
            val = float(x[n, c, h, v])
            if at is None or (best == best and (val > best or val != val)): best, at = val, (h, v)
        out[n, c, i, j] = best; arg[n, c, i, j] = at
    return out, arg

POOL_CASES = [  # x shape, kernel, stride, padding, dilation, ceil
    ((1, 1, 4, 4), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((2, 3, 5, 7), (3, 2), (2, 1), (1, 1), (1, 1), False),
    ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True),
    ((1, 1, 6, 7), (3, 3), (2, 3), (1, 1), (2, 1), True),
    ((1, 1, 7, 5), (3, 2), (3, 2), (1, 1), (1, 2), True),
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), (1, 1), False),
]

@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", POOL_CASES)
def test_maxpool_and_backward(dt, case):
    xs, k, s, p, d, ceil = case
    x = np.round(rand(xs, dt, -2, 2)).astype(dt.np)          # rounding makes ties
    arg = (k, s, p, d, ceil)
    ref, where = maxpool_ref(x, k, s, p, d, ceil)
    check(run(Op.MAXPOOL2D, x, arg=arg), ref, dt)
    g = rand(ref.shape, dt)
    back, absback = np.zeros(xs), np.zeros(xs)
    for n, c, i, j in itertools.product(*map(range, ref.shape)):
        h, v = where[n, c, i, j]; back[n, c, h, v] += float(g[n, c, i, j]); absback[n, c, h, v] += abs(float(g[n, c, i, j]))
    check(run(Op.MAXPOOL2D_BACKWARD, g, x, arg=arg), back, dt, scale=2, absref=absback, k=k[0] * k[1])

def test_maxpool_nan_and_inf():
    x = np.array([[[[1, np.nan], [-np.inf, 2]]]], np.float32)
    assert np.isnan(run(Op.MAXPOOL2D, x, arg=((2, 2), (1, 1), (0, 0), (1, 1), False))).all()
    y = np.full((1, 1, 2, 2), -np.inf, np.float32)
    r = run(Op.MAXPOOL2D, y, arg=((2, 2), (1, 1), (1, 1), (1, 1), False))   # padding never wins
    assert (r == -np.inf).all()
    b = run(Op.MAXPOOL2D_BACKWARD, np.ones((1, 1, 1, 1), np.float32), np.array([[[[3, 3], [3, 3]]]], np.float32),
            arg=((2, 2), (1, 1), (0, 0), (1, 1), False))
    assert b.tolist() == [[[[1, 0], [0, 0]]]]                   # the first of four tied maxima

def avgpool_ref(x, k, s, p, ceil, include_pad):
    N, C, H, W = x.shape
    oh, ow = pool_out(H, k[0], s[0], p[0], 1, ceil), pool_out(W, k[1], s[1], p[1], 1, ceil)
    out = np.zeros((N, C, oh, ow))
    for n, c, i, j in itertools.product(range(N), range(C), range(oh), range(ow)):
        hs, ws = i * s[0] - p[0], j * s[1] - p[1]
        he, we = min(hs + k[0], H + p[0]), min(ws + k[1], W + p[1])
        size = (he - hs) * (we - ws)
        hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, H), min(we, W)
        tot = sum(float(x[n, c, h, v]) for h in range(hs, he) for v in range(ws, we))
        out[n, c, i, j] = tot / (size if include_pad else (he - hs) * (we - ws))
    return out

AVG_CASES = [((1, 1, 4, 4), (2, 2), (2, 2), (0, 0), False), ((2, 3, 5, 7), (3, 2), (2, 1), (1, 1), False),
             ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0), True), ((1, 1, 6, 7), (3, 3), (2, 2), (1, 1), True),
             ((1, 1, 7, 5), (3, 2), (3, 2), (1, 1), True), ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0), False)]

@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("include_pad", [True, False])
def test_avgpool(dt, case, include_pad):
    xs, k, s, p, ceil = case
    x = rand(xs, dt)
    check(run(Op.AVGPOOL2D, x, arg=(k, s, p, ceil, include_pad)), avgpool_ref(x, k, s, p, ceil, include_pad), dt, scale=2,
          absref=avgpool_ref(np.abs(x), k, s, p, ceil, include_pad), k=k[0] * k[1])

def test_avgpool_ceil_window_past_padding_uses_clipped_count():
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    # kernel 2, stride 2, ceil: the last window covers only column/row 2 (no padding) -> divided by its clipped size
    assert run(Op.AVGPOOL2D, x, arg=((2, 2), (2, 2), (0, 0), True, True))[0, 0].tolist() == [[2, 3.5], [6.5, 8]]

# ---------------------------------------------------------------- float64 mode
def test_float64_mode():
    x64 = np.array([0.1, 0.7, -1.3])
    assert tensor(x64).dtype is float64                # a float64 array is a float64 tensor (no mode needed)
    with float64_mode():
        leaf = wrap(Node(Op.INPUT, (), None, (3,), float32, "cpu", buf=CPUBackend().from_numpy(x64)))
        y = apply(Op.MUL, apply(Op.EXP, leaf), leaf)
        s = apply(Op.SUM, y, arg=((0,), False))
        c = apply(Op.CAST, leaf, shape=(3,), dtype=float16)
        i = apply(Op.ARGMAX, leaf, arg=(0, False))
        vals = y.numpy(), s.numpy(), c.numpy(), i.numpy()
    assert vals[0].dtype == np.float64 and np.array_equal(vals[0], np.exp(x64) * x64)
    assert vals[1].dtype == np.float64 and abs(vals[1] - (np.exp(x64) * x64).sum()) < 1e-15
    assert vals[2].dtype == np.float64 and np.array_equal(vals[2], x64)   # no f16 rounding in float64 mode
    assert vals[3].dtype == np.int64 and vals[3] == 1
    # outside the mode the same graph is float32 again
    assert apply(Op.EXP, tensor(np.float32(1))).numpy().dtype == np.float32
