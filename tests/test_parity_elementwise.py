"""Vulkan against the CPU oracle for the elementwise, source, copy, reduction and scan kernels
(vkml.backends.vulkan.kernels): every op x dtype it accepts, over layouts that exercise the strided reads
(broadcast, permuted, flipped, offset, size-1, size-0, rank 0-4).

Bounds (tests/oracle.py, the parity bound), per element, |vk - cpu| <= atol + rtol*|cpu|:
- f32: rtol 1e-5, atol 1e-6. f16: rtol 1e-3, atol 1e-4 (one f16 ulp is <= 2^-10 relative: the oracle
  rounds float64 results to f16, the GPU rounds float32 ones, so they may differ by one ulp).
- f64: rtol 1e-13, atol 1e-15 (ADR 0023: the double functions of math64.glsl are within 4 ulp of numpy's;
  the margin covers cancellation such as gelu's 1 + tanh near -3).
- reductions over k terms: atol + rtol*sqrt(k)*sum|terms| (MEAN: divided by k); MAX/MIN exact.
- ints and bools exact; RAND bit-identical; NaN where the oracle has NaN, infinities equal.
"""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

pytestmark = pytest.mark.vulkan

from vkml.core.dtypes import float32, float16, float64, int32, int64, bool_, DTYPES, to_dtype, prod
from vkml.core.ops import Op, ACCEPTED_DTYPES
from vkml.frontend.tensor import Node, Tensor, tensor, apply, canonical_device
import oracle

DEVICES = ("cpu", "vulkan")
NP = {d: d.np for d in DTYPES}
RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- helpers
def check(cpu, vk, dtype=None, rtol=None, atol=None, bound=None, what=""):
    "Vulkan's `vk` against the oracle's `cpu`: tests/oracle.py's parity bound (or `bound`); ints and bools exact."
    oracle.assert_close(vk, cpu, rtol=rtol, atol=atol, bound=bound, what=what)


close_mask = oracle.close_mask


def both(build, *arrays):
    "build(*tensors) on each device (inputs uploaded there) -> (cpu result, vulkan result) as numpy."
    return tuple(build(*[tensor(a, device=d) for a in arrays]).numpy() for d in DEVICES)


def source(op, arg, shape, dtype, device):
    return Tensor(Node(op, (), arg, shape, dtype, canonical_device(device)))


def values(dtype, shape, lo=-3.0, hi=3.0):
    "Random values of `dtype`: floats uniform in [lo, hi), ints in a range that exercises signs, bools."
    if dtype is bool_: return RNG.random(shape) < 0.5
    if dtype is int32: return RNG.integers(-1000, 1000, shape, dtype=np.int32)
    if dtype is int64: return RNG.integers(-(1 << 40), 1 << 40, shape, dtype=np.int64)
    return RNG.uniform(lo, hi, shape).astype(dtype.np)


def expand(t, shape): return apply(Op.EXPAND, t, shape=shape, dtype=t.dtype)
def reshape(t, shape): return apply(Op.RESHAPE, t, shape=shape, dtype=t.dtype)


# A layout builds a view of `shape` from a stored array: it returns (stored shape, view function).
def _contig(shape): return shape, lambda t: t
def _permuted(shape):
    r = len(shape); perm = tuple(reversed(range(r)))
    return tuple(reversed(shape)), lambda t: apply(Op.PERMUTE, t, arg=perm)
def _flipped(shape):   # last axis read backwards with step -2 from a stored axis twice as long
    n = shape[-1]
    return shape[:-1] + (2 * n,), lambda t: apply(Op.SLICE, t, arg=tuple((0, d, 1) for d in shape[:-1]) + ((2 * n - 1, -1, -2),))
def _broadcast(shape):  # first axis of extent > 1 broadcast from 1 (stride 0)
    i = next(i for i, d in enumerate(shape) if d > 1)
    stored = shape[:i] + (1,) + shape[i + 1:]
    return stored, lambda t: expand(t, shape)
def _offset(shape):     # a contiguous view starting one element in: misaligned for vec4
    n = prod(shape)
    return (n + 1,), lambda t: reshape(apply(Op.SLICE, t, arg=((1, n + 1, 1),)), shape)

LAYOUTS = {"contig": _contig, "permuted": _permuted, "flipped": _flipped, "broadcast": _broadcast, "offset": _offset}
SHAPES = [(), (1,), (7,), (2, 3, 4), (3, 1, 5), (2, 3, 2, 8), (0, 3)]


def cases(shape):
    "The layouts that make sense for `shape`."
    out = ["contig"]
    if len(shape) >= 2 and prod(shape): out.append("permuted")
    if shape and shape[-1] > 0: out.append("flipped")
    if any(d > 1 for d in shape): out.append("broadcast")
    if prod(shape): out.append("offset")
    return out


def run_layouts(op, dtype, gen, arg=None, nin=1, shapes=SHAPES, **tol):
    "op over every shape x layout (all inputs in that layout), checked against the oracle."
    for shape in shapes:
        for lay in cases(shape):
            stored, view = LAYOUTS[lay](shape)
            arrays = [gen(dtype, stored) for _ in range(nin)]
            cpu, vk = both(lambda *ts: apply(op, *(view(t) for t in ts), arg=arg), *arrays)
            check(cpu, vk, what=f"{op.name} {dtype.name} {shape} {lay}", **tol)


# ---------------------------------------------------------------- unary
DOMAIN = {Op.LOG: (0.01, 50.0), Op.SQRT: (0.0, 50.0), Op.RSQRT: (0.01, 50.0), Op.EXP: (-20.0, 20.0),
          Op.SIN: (-50.0, 50.0), Op.COS: (-50.0, 50.0), Op.ERF: (-5.0, 5.0), Op.ERFC: (-4.0, 9.0),
          Op.RECIPROCAL: (0.1, 5.0), Op.TANH: (-6.0, 6.0), Op.SIGMOID: (-30.0, 30.0), Op.SOFTPLUS: (-30.0, 30.0)}
FLOAT_UNARY = [Op.NEG, Op.ABS, Op.SIGN, Op.RELU, Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.RECIPROCAL, Op.SIN, Op.COS,
               Op.TANH, Op.SIGMOID, Op.SILU, Op.ERF, Op.ERFC]
ARGS = {Op.LEAKY_RELU: 0.01, Op.ELU: 1.0, Op.SOFTPLUS: (1.0, 20.0), Op.GELU: "none", Op.CLAMP: (-0.5, 0.75)}


@pytest.mark.parametrize("dtype", [float32, float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op", FLOAT_UNARY + list(ARGS), ids=lambda o: o.name)
def test_unary_float(op, dtype):
    lo, hi = DOMAIN.get(op, (-4.0, 4.0))
    if dtype is float16 and op is Op.EXP: hi = 10.0
    run_layouts(op, dtype, lambda dt, s: values(dt, s, lo, hi), arg=ARGS.get(op))


@pytest.mark.parametrize("op,arg", [(Op.GELU, "tanh"), (Op.LEAKY_RELU, 0.2), (Op.ELU, 0.5), (Op.SOFTPLUS, (2.0, 5.0)),
                                    (Op.SOFTPLUS, (0.5, 1.0)), (Op.CLAMP, (None, 0.5)), (Op.CLAMP, (-0.5, None)),
                                    (Op.CLAMP, (1.0, -1.0)), (Op.CLAMP, (None, None))], ids=str)
def test_unary_args(op, arg):
    for dt in (float32, float16):
        x = values(dt, (4, 33), -6, 6)
        cpu, vk = both(lambda t: apply(op, t, arg=arg), x)
        check(cpu, vk, what=f"{op.name}{arg} {dt.name}")


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 3e38, -3e38, 1e-40, 88.0, -88.0,
                    100.0, -104.0, 0.5, 10.0, -10.0, 27.0], np.float32)

@pytest.mark.parametrize("op,arg", [(op, None) for op in FLOAT_UNARY] + list(ARGS.items()) + [(Op.GELU, "tanh")], ids=str)
def test_unary_specials(op, arg):
    "NaN in, NaN out; infinities, zeros, denormals and extremes as the oracle (torch) has them."
    for dt in (float32, float16):
        with np.errstate(over="ignore"): x = SPECIAL.astype(dt.np)
        cpu, vk = both(lambda t: apply(op, t, arg=arg), x)
        # f32 denormals may be flushed to zero by the device (Vulkan leaves it to the implementation
        # unless the shader asks for DenormPreserve, which lavapipe does not offer; NVIDIA flushes):
        # a denormal input may give the oracle's result for the input or for a zero of its sign.
        tiny = (x != 0) & (np.abs(x.astype(np.float64)) < 2.0**-126) if dt is float32 else np.zeros(x.shape, bool)
        if tiny.any():
            flushed = np.where(tiny, np.copysign(np.zeros_like(x), x), x)
            cpu0 = apply(op, tensor(flushed), arg=arg).numpy()
            ok = close_mask(cpu, vk) | close_mask(cpu0, vk)
            assert ok[tiny].all(), f"{op.name} denormal: vk {vk[tiny]} cpu {cpu[tiny]} / flushed {cpu0[tiny]}"
            cpu, vk = cpu[~tiny], vk[~tiny]
        check(cpu, vk, what=f"{op.name} {dt.name} specials")


@pytest.mark.parametrize("dtype", [int32, int64], ids=lambda d: d.name)
@pytest.mark.parametrize("op,arg", [(Op.NEG, None), (Op.ABS, None), (Op.SIGN, None), (Op.RELU, None),
                                    (Op.CLAMP, (-100, 300)), (Op.CLAMP, (None, -5)), (Op.CLAMP, (7, None))], ids=str)
def test_unary_int(op, arg, dtype):
    if dtype is int64 and op is Op.CLAMP and arg[0] is not None: arg = (arg[0] - (1 << 35), arg[1])
    run_layouts(op, dtype, values, arg=arg, shapes=[(), (5,), (3, 4, 5)])


def test_math_accuracy_against_float64():
    "The hand-written erf/erfc/exp/sin/cos against float64 references (math.erf, np.sin...): the errors nbs/13 documents."
    x = np.linspace(-10, 10, 200_001).astype(np.float32)
    t = tensor(x, device="vulkan")
    x64 = x.astype(np.float64)
    e = apply(Op.ERF, t).numpy().astype(np.float64); ref = np.vectorize(math.erf)(x64)
    erf_rel = np.max(np.abs(e - ref) / np.maximum(np.abs(ref), 1e-300))
    e = apply(Op.ERFC, t).numpy().astype(np.float64); ref = np.vectorize(math.erfc)(x64); m = ref > 1.2e-38
    erfc_rel = np.max(np.abs(e - ref)[m] / ref[m])
    xs = np.linspace(-1e4, 1e4, 200_001).astype(np.float32)
    ts = tensor(xs, device="vulkan")
    sin_abs = np.max(np.abs(apply(Op.SIN, ts).numpy() - np.sin(xs.astype(np.float64))))
    cos_abs = np.max(np.abs(apply(Op.COS, ts).numpy() - np.cos(xs.astype(np.float64))))
    xe = np.linspace(-87, 88, 200_001).astype(np.float32)
    exp_rel = np.max(np.abs(apply(Op.EXP, tensor(xe, device="vulkan")).numpy() / np.exp(xe.astype(np.float64)) - 1))
    print(f"\nmax error vs float64: erf rel {erf_rel:.2e}, erfc rel {erfc_rel:.2e} (normal range), exp rel {exp_rel:.2e}, "
          f"sin abs {sin_abs:.2e}, cos abs {cos_abs:.2e} (|x| <= 1e4)")
    assert erf_rel < 3e-7 and erfc_rel < 1e-6 and exp_rel < 3e-7 and sin_abs < 3e-7 and cos_abs < 3e-7


def ulps(got, ref):
    "|got - ref| in units in the last place of ref (float64), over the finite references in the normal range."
    m = np.isfinite(ref) & (np.abs(ref) >= np.finfo(np.float64).tiny)   # (a subnormal result has fewer bits to be right in)
    return float(np.max(np.abs(got[m] - ref[m]) / np.spacing(np.abs(ref[m]))))


def test_math64_accuracy_in_ulps():
    "math64.glsl's double functions on the device against numpy/scipy (ADR 0023 states these bounds)."
    import scipy.special as sp
    rng = np.random.default_rng(0)
    def on_vk(op, x, arg=None): return apply(op, tensor(x, device="vulkan"), arg=arg).numpy()
    wide = lambda lo, hi, n=100_000: np.concatenate([rng.uniform(lo, hi, n), rng.uniform(-3, 3, n)])
    pos = np.concatenate([np.exp(rng.uniform(-700, 700, 100_000)), rng.uniform(0.01, 4, 100_000), [5e-324, 1e-310]])
    err = {
        "exp": ulps(on_vk(Op.EXP, x := wide(-700, 700)), np.exp(x)),
        "log": ulps(on_vk(Op.LOG, pos), np.log(pos)),
        "expm1 (elu)": ulps(on_vk(Op.ELU, x := -np.abs(wide(-30, 30)), 1.0), np.expm1(x)),
        "sin": ulps(on_vk(Op.SIN, x := wide(-1e5, 1e5)), np.sin(x)),
        "cos": ulps(on_vk(Op.COS, x), np.cos(x)),
        "tanh": ulps(on_vk(Op.TANH, x := wide(-30, 30)), np.tanh(x)),
        "sigmoid": ulps(on_vk(Op.SIGMOID, x := wide(-30, 30)), sp.expit(x)),
        "erf": ulps(on_vk(Op.ERF, x := wide(-7, 7)), np.vectorize(math.erf)(x)),      # libm's: scipy's erfc is
        "erfc": ulps(on_vk(Op.ERFC, x := wide(-6, 27)), np.vectorize(math.erfc)(x)),  # ~500 ulp off beyond 20
    }
    print("\nfloat64 max error in ulps: " + ", ".join(f"{k} {v:.0f}" for k, v in err.items()))
    assert all(v <= 4 for v in err.values()), err        # lavapipe: exp, log, expm1, erf 1; sin, cos, sigmoid 2; tanh 3; erfc 4


# ---------------------------------------------------------------- binary, compare, where, cast
BIN = [Op.ADD, Op.SUB, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.DIV, Op.POW]

def accepted(ops, dtypes):
    "(op, dtype) cases for the dtypes each op accepts (the registry's column), so nothing is skipped."
    return [pytest.param(o, d, id=f"{o.name}-{d.name}") for o in ops for d in dtypes if d in ACCEPTED_DTYPES[o]]

@pytest.mark.parametrize("op,dtype", accepted(BIN, [float32, float16, int32, int64]))
def test_binary(op, dtype):
    lo, hi = {Op.DIV: (0.2, 5.0), Op.POW: (0.1, 4.0)}.get(op, (-3.0, 3.0))
    gen = lambda dt, s: values(dt, s, lo, hi)
    run_layouts(op, dtype, gen, nin=2, shapes=[(), (1,), (9,), (2, 3, 4), (2, 3, 2, 8), (0, 3)])
    # mixed layouts: a broadcast row against a transposed matrix
    a, b = gen(dtype, (1, 6)), gen(dtype, (6, 5))
    cpu, vk = both(lambda x, y: apply(op, expand(x, (5, 6)), apply(Op.PERMUTE, y, arg=(1, 0))), a, b)
    check(cpu, vk, what=f"{op.name} {dtype.name} mixed")


def test_binary_vec4_paths():
    "The vec4 fast path (aligned, contiguous, n % 4 == 0) and its fallbacks agree with the oracle."
    for dt in (float32, float16, int32, int64):
        for n in (4, 64, 4096, 4097):
            a, b = values(dt, (n,)), values(dt, (n,))
            if not dt.is_float:
                for op in (Op.ADD, Op.MUL, Op.MINIMUM):
                    cpu, vk = both(lambda x, y: apply(op, x, y), a, b)
                    check(cpu, vk, what=f"{op.name} {dt.name} n={n}")
                cpu, vk = both(lambda x: apply(Op.NEG, x), a)
                check(cpu, vk, what=f"NEG {dt.name} n={n}")
                continue
            for op in (Op.ADD, Op.MUL, Op.MAXIMUM, Op.DIV):
                cpu, vk = both(lambda x, y: apply(op, x, y), a, b)
                check(cpu, vk, what=f"{op.name} {dt.name} n={n}")
            cpu, vk = both(lambda x: apply(Op.EXP, x), a)
            check(cpu, vk, what=f"EXP {dt.name} n={n}")


def test_maximum_minimum_propagate_nan():
    a = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0, -0.0, 2.0], np.float32)
    b = np.array([1.0, np.nan, np.nan, np.inf, -0.0, 0.0, 2.0], np.float32)
    for op in (Op.MAXIMUM, Op.MINIMUM):
        for dt in (float32, float16):
            for n in (7, 8):   # 8: the vec4 path
                x, y = np.resize(a, n).astype(dt.np), np.resize(b, n).astype(dt.np)
                cpu, vk = both(lambda p, q: apply(op, p, q), x, y)
                check(cpu, vk, what=f"{op.name} {dt.name} n={n}")
                assert np.isnan(vk[[0, 1, 2] + ([7] if n == 8 else [])]).all()


def test_pow_special_cases():
    "C99/numpy pow on a grid of bases and exponents with signs, zeros, infinities and NaN."
    xs = [-np.inf, -3.0, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, np.inf, np.nan]
    ys = [-np.inf, -3.0, -2.0, -1.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, np.inf, np.nan]
    x, y = np.meshgrid(np.array(xs, np.float32), np.array(ys, np.float32))
    for dt in (float32, float16):
        cpu, vk = both(lambda p, q: apply(Op.POW, p, q), x.astype(dt.np), y.astype(dt.np))
        check(cpu, vk, what=f"POW specials {dt.name}")
        # signed zeros and infinities are part of the convention
        fin = np.isfinite(cpu) & (cpu == 0)
        assert (np.signbit(cpu[fin]) == np.signbit(vk[fin])).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_compare(dtype):
    for op in (Op.EQUAL, Op.NOT_EQUAL, Op.LESS, Op.LESS_EQUAL, Op.GREATER, Op.GREATER_EQUAL):
        gen = (lambda dt, s: RNG.integers(-2, 3, s).astype(dt.np)) if dtype is not bool_ else values
        run_layouts(op, dtype, gen, nin=2, shapes=[(), (9,), (2, 3, 4), (0, 2)])
        if dtype.is_float:
            a = np.array([np.nan, 1, np.nan, np.inf, -np.inf, 0.0], dtype.np)
            b = np.array([1, np.nan, np.nan, np.inf, np.inf, -0.0], dtype.np)
            cpu, vk = both(lambda p, q: apply(op, p, q), a, b)
            check(cpu, vk, what=f"{op.name} {dtype.name} NaN")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_where(dtype):
    for shape in [(), (7,), (3, 4, 5), (0, 2)]:
        c, a, b = values(bool_, shape), values(dtype, shape), values(dtype, shape)
        cpu, vk = both(lambda p, q, r: apply(Op.WHERE, p, q, r), c, a, b)
        check(cpu, vk, what=f"WHERE {dtype.name} {shape}")
    # broadcast condition and a permuted operand
    c, a, b = values(bool_, (1, 5)), values(dtype, (5, 4)), values(dtype, (4, 5))
    cpu, vk = both(lambda p, q, r: apply(Op.WHERE, expand(p, (4, 5)), apply(Op.PERMUTE, q, arg=(1, 0)), r), c, a, b)
    check(cpu, vk, what=f"WHERE {dtype.name} strided")


@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_cast_every_pair(src):
    "Every dtype pair, on values every target can hold (float -> int out of range is undefined, as in numpy)."
    base = np.array([0, 1, -1, 2, -7, 100, -100, 1000, 2047, -2048], np.float64)
    for dst in DTYPES:
        if src is bool_: x = values(bool_, (3, 10))
        elif src.is_float: x = np.concatenate([base, base + 0.75, -base - 0.25]).astype(src.np).reshape(3, 10)
        else: x = np.resize(base, (3, 10)).astype(src.np)
        cpu, vk = both(lambda t: apply(Op.CAST, apply(Op.PERMUTE, t, arg=(1, 0)), shape=(10, 3), dtype=dst), x)
        check(cpu, vk, what=f"cast {src.name} -> {dst.name}")
    if src.is_float:   # NaN/inf to floats and to bool (NaN is true)
        x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-5], src.np)
        for dst in (float32, float16, bool_):
            cpu, vk = both(lambda t: apply(Op.CAST, t, shape=x.shape, dtype=dst), x)
            check(cpu, vk, what=f"cast specials {src.name} -> {dst.name}")
    if src is int64:   # wrap to int32, round to floats
        x = np.array([2**40 + 5, -(2**40) - 5, 2**31, 2**53 + 1, -(2**33)], np.int64)
        for dst in (int32, float32, bool_):
            cpu, vk = both(lambda t: apply(Op.CAST, t, shape=x.shape, dtype=dst), x)
            check(cpu, vk, what=f"cast int64 big -> {dst.name}")


# ---------------------------------------------------------------- sources
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_full_and_const(dtype):
    vals = {float32: [1.5, -0.1, np.inf, np.nan, 3e38], float16: [0.1, -2.5, 65504.0, np.inf],
            float64: [0.1, -1e300, np.inf, np.nan, 5e-324], int32: [7, -(2**31), 2**31 - 1],
            int64: [2**40 + 3, -(2**62), -1], bool_: [True, False]}[dtype]
    for v in vals:
        for op, shape in ((Op.FULL, (3, 5)), (Op.CONST, ()), (Op.FULL, (0, 2))):
            cpu, vk = (source(op, v, shape, dtype, d).numpy() for d in DEVICES)
            check(cpu, vk, what=f"{op.name} {v!r} {dtype.name}")


@pytest.mark.parametrize("dtype", [float32, float16, int32, int64], ids=lambda d: d.name)
def test_arange(dtype):
    args = [(0, 1), (5, -2), (-3, 7)] + ([(0.5, 0.25), (-1.0, 0.1)] if dtype.is_float else [(2**40, -3)] if dtype is int64 else [])
    for arg in args:
        for n in (0, 1, 17, 1000):
            cpu, vk = (source(Op.ARANGE, arg, (n,), dtype, d).numpy() for d in DEVICES)
            check(cpu, vk, what=f"ARANGE {arg} n={n} {dtype.name}")


@pytest.mark.parametrize("dtype", [float32, float16], ids=lambda d: d.name)
def test_rand_bit_identical(dtype):
    "CPU and Vulkan give the same bits, also across the 2^32 counter wrap and with a 64-bit seed."
    for seed, offset, shape in [(0, 0, (1000,)), (12345, 7, (3, 33)), (2**40 + 99, 2**32 - 5, (10,)), (-1, 123, (2, 2, 2, 2)),
                                (7, 0, ())]:
        cpu, vk = (source(Op.RAND, (seed, offset), shape, dtype, d).numpy() for d in DEVICES)
        assert cpu.dtype == vk.dtype and cpu.tobytes() == vk.tobytes(), f"RAND {seed} {offset} {dtype.name}"
        assert ((vk >= 0) & (vk < 1)).all()
    # an independent statement of the contract (tests/oracle.py, not vkml's code): element 3 of seed 5
    assert source(Op.RAND, (5, 3), (1,), dtype, "vulkan").numpy()[0] == oracle.uniform(5, 3, 1, dtype)[0]


# ---------------------------------------------------------------- copies
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_contiguous_and_reshape(dtype):
    for shape in [(2, 3, 4), (3, 1, 5), (2, 3, 2, 8), (5,), ()]:
        for lay in cases(shape):
            stored, view = LAYOUTS[lay](shape)
            x = values(dtype, stored)
            cpu, vk = both(lambda t: apply(Op.CONTIGUOUS, view(t)), x)
            check(cpu, vk, what=f"CONTIGUOUS {dtype.name} {shape} {lay}")
            if lay in ("permuted", "flipped", "broadcast"):   # a RESHAPE that needs a copy
                cpu, vk = both(lambda t: reshape(view(t), (prod(shape),)), x)
                check(cpu, vk, what=f"RESHAPE {dtype.name} {shape} {lay}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_pad(dtype):
    value = {bool_: True, int32: -7, int64: 2**40}.get(dtype, -1.5)
    for shape, pads in [((3,), ((2, 1),)), ((2, 3), ((0, 0), (1, 2))), ((2, 3, 4), ((1, 0), (0, 2), (3, 1))),
                        ((1, 2, 2, 2), ((1, 1), (0, 0), (2, 0), (0, 1))), ((0, 2), ((1, 1), (0, 1)))]:
        for lay in cases(shape)[:3]:
            stored, view = LAYOUTS[lay](shape)
            cpu, vk = both(lambda t: apply(Op.PAD, view(t), arg=(pads, value)), values(dtype, stored))
            check(cpu, vk, what=f"PAD {dtype.name} {shape} {pads} {lay}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_concat(dtype):
    for shapes, axis in [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 0), (2, 4)], 1), ([(2, 3, 4), (2, 3, 4)], 2),
                         ([(1, 2, 2, 3), (2, 2, 2, 3)], 0), ([(0, 3), (0, 3)], 0)]:
        arrays = [values(dtype, s) for s in shapes]
        cpu, vk = both(lambda *ts: apply(Op.CONCAT, *ts, arg=axis), *arrays)
        check(cpu, vk, what=f"CONCAT {dtype.name} {shapes} axis {axis}")
    # strided inputs
    a, b = values(dtype, (3, 2)), values(dtype, (4, 3))
    cpu, vk = both(lambda p, q: apply(Op.CONCAT, apply(Op.PERMUTE, p, arg=(1, 0)),
                                      apply(Op.SLICE, q, arg=((3, -1, -1), (0, 3, 1))), arg=0), a, b)
    check(cpu, vk, what=f"CONCAT {dtype.name} strided")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_slice_backward(dtype):
    for shape, sl in [((5,), ((4, -1, -2),)), ((6, 4), ((1, 5, 2), (3, -1, -1))), ((3, 4, 5), ((0, 3, 1), (2, 3, 1), (4, 0, -3))),
                      ((2, 2, 3, 4), ((1, 2, 1), (0, 2, 1), (0, 3, 2), (3, -1, -2))), ((4,), ((2, 2, 1),))]:
        gshape = tuple(len(range(a, b, s)) for a, b, s in sl)   # the sliced shape (stop -1 means "before 0")
        g = values(dtype, gshape)
        cpu, vk = both(lambda t: apply(Op.SLICE_BACKWARD, t, arg=sl, shape=shape, dtype=dtype), g)
        check(cpu, vk, what=f"SLICE_BACKWARD {dtype.name} {shape} {sl}")


# ---------------------------------------------------------------- reductions
def reduce_bound(x, axes, keep, mean=False):
    "atol + rtol*sqrt(k)*sum|terms| per output (divided by k for MEAN)."
    x64 = np.abs(np.asarray(x, np.float64)).reshape(x.shape)
    if x64.ndim == 0: x64, axes = x64.reshape(1), (0,) if axes else ()
    k = max(1, prod(x64.shape[a] for a in axes))
    r, a = oracle.parity_bound(to_dtype(x.dtype))
    s = np.sum(x64, axis=tuple(axes), keepdims=keep)
    return a + r * math.sqrt(k) * (s / k if mean else s)


AXES = [((), False), ((0,), False), ((1,), True), ((0, 2), False), ((1, 2), True), ((0, 1, 2), False), ((2,), False)]

@pytest.mark.parametrize("op,dtype", accepted([Op.SUM, Op.MEAN, Op.MAX, Op.MIN], DTYPES))
def test_reduce(op, dtype):
    for shape in [(3, 4, 5), (2, 1, 300), (5, 600, 2), (300, 40, 3)]:
        for axes, keep in AXES:
            for lay in ("contig", "permuted", "flipped"):
                stored, view = LAYOUTS[lay](shape)
                x = values(dtype, stored)
                cpu, vk = both(lambda t: apply(op, view(t), arg=(axes, keep)), x)
                xv = both(lambda t: view(t), x)[0]
                bound = reduce_bound(xv, axes, keep, op is Op.MEAN) if op in (Op.SUM, Op.MEAN) and dtype.is_float else None
                if op in (Op.MAX, Op.MIN): check(cpu, vk, rtol=1e-30, atol=1e-30, what=f"{op.name} exact")
                check(cpu, vk, bound=bound, what=f"{op.name} {dtype.name} {shape} {axes} {keep} {lay}")


def test_reduce_rank0_long_rows_and_determinism():
    x = values(float32, ())
    for op in (Op.SUM, Op.MAX, Op.MEAN):
        for axes in ((), (0,)):
            cpu, vk = both(lambda t: apply(op, t, arg=(axes, False)), x)
            check(cpu, vk, what=f"{op.name} rank 0 {axes}")
    big = values(float32, (3, 100_000), -1, 1)
    t = tensor(big, device="vulkan")
    s1, s2 = (apply(Op.SUM, t, arg=((1,), False)).numpy() for _ in range(2))
    assert s1.tobytes() == s2.tobytes(), "the same reduction gave different bits"
    cpu = apply(Op.SUM, tensor(big), arg=((1,), False)).numpy()
    check(cpu, s1, bound=reduce_bound(big, (1,), False))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_reduce_split_two_passes(dtype):
    "Few very long rows: partials per chunk in a scratch buffer, then a second pass (also strided rows)."
    for op in (Op.SUM, Op.MEAN, Op.MAX, Op.MIN):
        if dtype not in ACCEPTED_DTYPES[op]: continue
        for shape, axes, lay in [((100_003,), (0,), "contig"), ((3, 40_000), (1,), "contig"), ((9000, 2), (0,), "contig"),
                                 ((5000, 40), (0,), "contig"), ((3000, 70), (0,), "flipped"),
                                 ((2, 20_000), (1,), "permuted"), ((50, 400), (0, 1), "flipped")]:
            stored, view = LAYOUTS[lay](shape)
            x = values(dtype, stored, -1, 1)
            cpu, vk = both(lambda t: apply(op, view(t), arg=(axes, False)), x)
            bound = None
            if dtype.is_float and op in (Op.SUM, Op.MEAN):
                bound = reduce_bound(both(lambda t: view(t), x)[0], axes, False, op is Op.MEAN)
            check(cpu, vk, bound=bound, what=f"split {op.name} {dtype.name} {shape} {axes} {lay}")
    if dtype.is_float:   # a NaN in one chunk reaches the result; the same bits twice
        x = values(dtype, (2, 60_000)); x[1, 33_333] = np.nan
        t = tensor(x, device="vulkan")
        m = apply(Op.MAX, t, arg=((1,), False)).numpy()
        assert np.isnan(m[1]) and not np.isnan(m[0])
        s1, s2 = (apply(Op.SUM, t, arg=((1,), False)).numpy() for _ in range(2))
        assert s1.tobytes() == s2.tobytes()


def _shaders(build, *arrays):
    "(cpu, vulkan, names of the shaders the vulkan run dispatched)."
    import vkml.backends.vulkan as vkv
    cpu = build(*[tensor(a) for a in arrays]).numpy()
    ts = [tensor(a, device="vulkan") for a in arrays]
    with vkv.profile() as prof: vk = build(*ts).numpy()
    return cpu, vk, set(prof)


@pytest.mark.parametrize("dtype", [float32, float16, int32, int64], ids=lambda d: d.name)
def test_reduce_vec_and_cols_paths(dtype):
    "The 4-element-load variants (row tails, split rows, cols blocks of 4, split cols) and argreduce_cols."
    s = {float32: "f32", float16: "f16", int32: "i32", int64: "i64"}[dtype]
    sl = lambda t, a, b: apply(Op.SLICE, t, arg=((0, t.shape[0], 1), (a, b, 1)))
    cases_ = [  # (shape, build, axes, a shader that must run)
        ((3, 1028), lambda t: sl(t, 0, 1027), (1,), f"reduce_row_vec_{s}"),           # k % 4 == 3: a scalar tail
        ((5, 1031), lambda t: sl(t, 4, 1031), (1,), f"reduce_row_vec_{s}"),            # offset 4, row stride 1031: not vec
        ((2, 1036), lambda t: sl(t, 4, 1035), (1,), f"reduce_row_vec_{s}"),            # offset 4, stride 1036, k 1031
        ((1, 9999), lambda t: t, (1,), f"reduce_part_vec_{s}"),                        # one long row: split, 4-aligned chunks
        ((300, 36), lambda t: t, (0,), f"reduce_cols_vec_{s}"),                        # 9 blocks of 4 outputs
        ((40, 6, 8), lambda t: t, (0,), f"reduce_cols_vec_{s}"),                       # outputs over two axes
        ((3000, 40), lambda t: t, (0,), f"reduce_cols_part_vec_{s}"),                  # few outputs, long columns: split
        ((3000, 41), lambda t: t, (0,), f"reduce_cols_part_{s}"),                      # odd width: scalar cols, split
        ((64, 3, 8, 16), lambda t: t, (0, 2, 3), f"reduce_part_vec_{s}"),             # BatchNorm's statistic: rows of
        ((9, 2, 7, 12), lambda t: t, (0, 2, 3), f"reduce_row_vec_{s}"),               # runs of H*W over the batch
        ((100, 3, 5, 5), lambda t: t, (0, 2, 3), f"reduce_part_{s}"),                  # runs of 25: scalar loads
    ]
    for shape, view, axes, want in cases_:
        x = values(dtype, shape, -1, 1)
        for op in (Op.SUM, Op.MAX, Op.MIN) + ((Op.MEAN,) if dtype.is_float else ()):
            cpu, vk, names = _shaders(lambda t: apply(op, view(t), arg=(axes, False)), x)
            xv = view(tensor(x)).numpy()
            bound = reduce_bound(xv, axes, False, op is Op.MEAN) if dtype.is_float and op in (Op.SUM, Op.MEAN) else None
            check(cpu, vk, bound=bound, what=f"{op.name} {dtype.name} {shape} {axes}")
            if shape != (5, 1031): assert want in names, (shape, names)
    for op in (Op.ARGMAX, Op.ARGMIN):   # arg-reductions over the first axis: the cols variant, ties and all
        x = RNG.integers(-3, 4, (300, 45)).astype(dtype.np)
        if dtype.is_float: x[100, 3] = x[7, 4] = x[200, 4] = np.nan
        cpu, vk, names = _shaders(lambda t: apply(op, t, arg=(0, False)), x)
        check(cpu, vk, what=f"{op.name} cols {dtype.name}")
        assert f"argreduce_cols_{s}" in names, names


def test_reduce_empty_extents_and_nan():
    for op, want in ((Op.SUM, 0.0), (Op.MAX, -np.inf), (Op.MIN, np.inf)):
        for dt in (float32, float16):
            x = np.zeros((3, 0), dt.np)
            cpu, vk = both(lambda t: apply(op, t, arg=((1,), False)), x)
            check(cpu, vk, what=f"{op.name} empty")
            assert (vk == want).all()
            cpu, vk = both(lambda t: apply(op, t, arg=((0,), True)), x)   # a non-empty axis of an empty tensor
            assert vk.shape == cpu.shape == (1, 0)
    x = np.array([[1.0, np.nan, 3.0], [np.inf, 2.0, -np.inf]] * 200, np.float32)   # 400 rows: thread variant
    for op in (Op.SUM, Op.MEAN, Op.MAX, Op.MIN):
        for axes in ((1,), (0,)):   # (0,): 400 terms per output, the workgroup-per-row variant
            cpu, vk = both(lambda t: apply(op, t, arg=(axes, False)), x)
            check(cpu, vk, what=f"{op.name} NaN {axes}")
    cpu, vk = both(lambda t: apply(Op.SUM, t, arg=((0,), False)), np.zeros((0,), np.int64))
    check(cpu, vk, what="SUM empty int64")


@pytest.mark.parametrize("dtype", [float32, float16, int32, int64], ids=lambda d: d.name)
def test_argmax_argmin(dtype):
    for op in (Op.ARGMAX, Op.ARGMIN):
        for shape, axis, keep in [((4, 7), 1, False), ((4, 7), 0, True), ((2, 3, 5), 1, False), ((3, 1000), 1, False),
                                  ((700, 3), 0, False), ((5,), 0, False), ((), 0, False)]:
            for lay in cases(shape)[:3]:
                stored, view = LAYOUTS[lay](shape)
                x = RNG.integers(-3, 4, stored).astype(dtype.np)   # many ties: the first one must win
                cpu, vk = both(lambda t: apply(op, view(t), arg=(axis, keep)), x)
                check(cpu, vk, what=f"{op.name} {dtype.name} {shape} {axis} {lay}")
    if dtype.is_float:   # NaN is the extreme, the first NaN wins, also across the threads of a row
        x = np.zeros((2, 1000), dtype.np); x[0, 700] = x[0, 900] = np.nan; x[1, 5] = 1; x[1, 600] = 1
        for op in (Op.ARGMAX, Op.ARGMIN):
            cpu, vk = both(lambda t: apply(op, t, arg=(1, False)), x)
            check(cpu, vk, what=f"{op.name} NaN")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_cumsum(dtype):
    for shape, axis in [((7,), 0), ((3, 4, 5), 1), ((3, 4, 5), 2), ((2, 3, 2, 8), 0), ((), 0), ((0, 3), 1), ((2, 500), 1),
                        ((3, 1000), 0), ((2, 2, 3000), 2)]:
        for lay in cases(shape)[:3]:
            stored, view = LAYOUTS[lay](shape)
            x = values(dtype, stored, -1, 1)
            cpu, vk = both(lambda t: apply(Op.CUMSUM, view(t), arg=axis), x)
            bound = None
            if dtype.is_float:
                xv = np.abs(both(lambda t: view(t), x)[0].astype(np.float64)).reshape(shape)
                k = shape[axis] if shape else 1
                r, a = oracle.parity_bound(dtype)
                bound = a + r * math.sqrt(max(k, 1)) * (np.cumsum(xv, axis=axis) if shape else xv)
            check(cpu, vk, bound=bound, what=f"CUMSUM {dtype.name} {shape} {axis} {lay}")


def test_launches_past_65535_groups():
    "More than 65,535 workgroups fold into (gx, gy): the global index must still cover every element once."
    n = 65535 * 256 + 1001
    x = RNG.integers(-100, 100, n, dtype=np.int32)
    cpu, vk = both(lambda t: apply(Op.NEG, t), x)
    check(cpu, vk, what="NEG folded")
    rows = 65600   # a workgroup per row: 65,600 groups
    y = RNG.integers(-100, 100, (rows, 256), dtype=np.int32)
    cpu, vk = both(lambda t: apply(Op.SUM, t, arg=((1,), False)), y)
    check(cpu, vk, what="SUM rows folded")


# ---------------------------------------------------------------- random shapes
shapes4 = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)

@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=shapes4, data=st.data())
def test_random_broadcast_and_reduce(shape, data):
    "a + b with b broadcast on random axes, then a sum over random axes."
    bshape = tuple(1 if data.draw(st.booleans()) else d for d in shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, max(len(shape) - 1, 0)), max_size=len(shape))))) if shape else ()
    a, b = values(float32, shape), values(float32, bshape)
    cpu, vk = both(lambda p, q: apply(Op.ADD, p, expand(q, shape)), a, b)
    check(cpu, vk, what=f"ADD {shape} {bshape}")
    s = a + np.broadcast_to(b, shape)
    cpu, vk = both(lambda p: apply(Op.SUM, p, arg=(axes, True)), s)
    check(cpu, vk, bound=reduce_bound(s, axes, True), what=f"SUM {shape} {axes}")


@st.composite
def strided_views(draw):
    "A random stored shape and the ops that make a strided view of it: a permutation and a slice per axis."
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=4)))
    perm = tuple(draw(st.permutations(range(len(shape)))))
    sl = []
    for d in (shape[p] for p in perm):
        step = draw(st.sampled_from([1, 2, -1, -2]))
        start = draw(st.integers(0, d - 1))
        sl.append((start, d, step) if step > 0 else (start, -1, step))
    return shape, perm, tuple(sl)

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(v=strided_views(), dtype=st.sampled_from([float32, float16, int32, int64]), data=st.data())
def test_random_strided_views(v, dtype, data):
    "Permuted, flipped, stepped views through elementwise, copy, reduction, scan and arg-reduction kernels."
    shape, perm, sl = v
    view = lambda t: apply(Op.SLICE, apply(Op.PERMUTE, t, arg=perm), arg=sl)
    x, y = values(dtype, shape), values(dtype, shape)
    vshape = tuple(len(range(*s)) for s in sl)
    axis = data.draw(st.integers(0, len(vshape) - 1))
    builds = {"ADD": lambda p, q: apply(Op.ADD, view(p), view(q)),
              "NEG": lambda p, q: apply(Op.NEG, view(p)),
              "CONTIGUOUS": lambda p, q: apply(Op.CONTIGUOUS, view(p)),
              "MAX": lambda p, q: apply(Op.MAX, view(p), arg=((axis,), True)),
              "ARGMIN": lambda p, q: apply(Op.ARGMIN, view(p), arg=(axis, False)),
              "PAD": lambda p, q: apply(Op.PAD, view(p), arg=(tuple((1, 0) for _ in vshape), 0))}
    for name, build in builds.items():
        cpu, vk = both(build, x, y)
        check(cpu, vk, what=f"{name} {dtype.name} {shape} {perm} {sl}")
    cpu, vk = both(lambda p: apply(Op.SUM, view(p), arg=((axis,), False)), x)
    xv = both(view, x)[0]
    check(cpu, vk, bound=reduce_bound(xv, (axis,), False) if dtype.is_float else None, what=f"SUM {shape} {sl}")
