"""IEEE specials on Vulkan: inf, NaN and signed zero as the CPU oracle has them, in every op family.

Without the float controls (nbs/24_codegen.ipynb, "IEEE specials") a driver may assume finite math: lavapipe
folded `x - x` to 0 and glslc `(1/x)*x` to 1 for x = inf. Here every elementwise op of the table, the
reductions, softmax/log_softmax, matmul and cumsum run on inputs holding ±inf, NaN, ±0 and subnormals, in
f16/f32/f64, and the Vulkan result must have NaN where the oracle has NaN, the same infinities, a zero of
the oracle's sign where the oracle gives a zero, and finite values within tests/oracle.py's parity bound.

What vkML promises about subnormals (and tests): nothing beyond the Vulkan spec. Without DenormPreserve a
driver may flush a subnormal input or result to a zero of the same sign, so where an input is subnormal the
result may be the oracle's for that input or for the flushed one. Two orders are not promised either: the
sign of a zero that ties in max/min (numpy's depends on the order it visits them) and of a zero sum of
products in matmul (the oracle's BLAS picks).
"""
import math
import numpy as np
import pytest

from vkml.core.dtypes import float16, float32, float64
from vkml.core.elementwise import ELEMENTWISE
from vkml.core.ops import Op
from vkml.frontend.tensor import tensor, apply
import vkml
import vkml.nn.functional as F
import oracle

pytestmark = pytest.mark.vulkan
FLOATS = (float16, float32, float64)


def specials(dt) -> np.ndarray:
    "16 values of `dt`: NaN, ±inf, ±0, ± the smallest subnormal, the smallest normal, ordinary values, ± half the largest."
    fi = np.finfo(dt.np)
    sub = fi.smallest_subnormal
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, sub, -sub, fi.tiny, 1.0, -1.0, 2.5, -3.0,
                     fi.max / 2, -fi.max / 2, 0.5, -7.0], dt.np)


def subnormal(x) -> np.ndarray:
    x = np.asarray(x)
    return (x != 0) & np.isfinite(x) & (np.abs(x) < np.finfo(x.dtype).tiny) if x.dtype.kind == "f" else np.zeros(x.shape, bool)


def flushed(x) -> np.ndarray:
    "`x` with its subnormals replaced by zeros of their sign (what a driver may read them as)."
    if x.dtype.kind != "f": return x
    return np.where(subnormal(x), np.copysign(np.zeros_like(x), x), x)


def assert_specials(got, want, what, zero_sign=True, sign_free=None, **bound):
    """NaN, infinities and finite values as oracle.assert_close; and where both are zero, the oracle's sign
    (except where `sign_free`: a tie of +0 and -0 in max/min, whose sign is not promised)."""
    oracle.assert_close(got, want, what=what, **bound)
    if zero_sign and want.dtype.kind == "f":
        bad = (want == 0) & (got == 0) & (np.signbit(got) != np.signbit(want))
        if sign_free is not None: bad &= ~sign_free
        assert not bad.any(), f"{what}: zero of the wrong sign at {np.argwhere(bad)[:4].tolist()}: got {got[bad][:4]} want {want[bad][:4]}"


def _same(got, want) -> np.ndarray:
    "Close (tests/oracle.py), and zeros of one sign."
    with np.errstate(all="ignore"):
        return oracle.close_mask(got, want) & ~((got == 0) & (want == 0) & (np.signbit(got) != np.signbit(want)))


def assert_specials_or_flushed(build, arrays, what, **bound):
    "build(*tensors) on Vulkan against the oracle, where an element with a subnormal input may match the flushed input's result instead."
    vk = build(*[tensor(a, device="vulkan") for a in arrays]).numpy()
    cpu = build(*[tensor(a) for a in arrays]).numpy()
    sub = np.zeros(np.broadcast(*arrays).shape, bool)
    for a in arrays: sub |= np.broadcast_to(subnormal(a), sub.shape)
    if sub.shape == vk.shape and sub.any():
        cpu0 = build(*[tensor(flushed(a)) for a in arrays]).numpy()
        take0 = sub & ~_same(vk, cpu) & _same(vk, cpu0)
        cpu = np.where(take0, cpu0, cpu)
    assert_specials(vk, cpu, what, **bound)
    return cpu, vk


# ---------------------------------------------------------------- elementwise: every row of the table
def float_rows():
    return [r for r in ELEMENTWISE.values() if r.arity >= 1 and r.name not in ("CAST", "ASSIGN")]


def row_inputs(row, dt):
    "The specials for each input: every pair of them for a binary op (a third input: the second, shifted); WHERE's condition alternates."
    x = specials(dt)
    if row.arity == 1: return [x]
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    if row.name == "WHERE": return [np.arange(a.size) % 3 == 0, a, b]
    return [a, b, *[np.roll(b, k) for k in range(1, row.arity - 1)]]    # a third input (LERP's weight): b shifted


@pytest.mark.parametrize("row, dt", [(r, d) for r in float_rows() for d in FLOATS if d in r.dtypes],   # (bitwise rows: no floats)
                         ids=lambda v: getattr(v, "name", str(v)))
def test_elementwise_specials(row, dt):
    "Each op alone (the prebuilt kernel) and fused between negations (a generated kernel), on the specials."
    arrays = row_inputs(row, dt)
    rtol, atol = row.tol if row.tol and dt is float32 else (None, None)
    # max/min of +0 and -0: numpy's sign depends on its loop (SIMD or not), the NVIDIA driver's max gives +0
    ties = (arrays[0] == 0) & (arrays[1] == 0) if row.name in ("MAXIMUM", "MINIMUM", "FMAX", "FMIN") else None
    with np.errstate(all="ignore"):
        op = lambda *ts: apply(row.op, *ts, arg=row.example_arg)
        assert_specials_or_flushed(op, arrays, f"{row.name} {dt.name}", rtol=rtol, atol=atol, sign_free=ties)
        if row.out_dtype is None:           # fused: -op(-(-x)), negation is exact on every value, NaN included
            nn = lambda t: -(-t) if t.dtype.is_float else t
            fused = lambda *ts: -op(*[nn(t) for t in ts])
            assert_specials_or_flushed(fused, arrays, f"{row.name} {dt.name} fused", rtol=rtol, atol=atol, sign_free=ties)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_x_minus_x_is_nan_at_inf_and_nan(dt):
    "Regression: lavapipe folded x - x to 0 (inf - inf is NaN)."
    x = tensor(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0], dt.np), device="vulkan")
    d = (x - x).numpy()
    assert np.isnan(d[:3]).all(), d
    assert (d[3:] == 0).all() and not np.signbit(d[3:]).any(), d


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_fused_reciprocal_times_x(dt):
    "Regression: glslc and lavapipe folded (1/x)·x to 1 (at 0: inf·0, at inf: 0·inf, both NaN)."
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 4.0], dt.np)
    with np.errstate(all="ignore"): want = (1 / x) * x
    got = (lambda t: t.reciprocal() * t)(tensor(x, device="vulkan")).numpy()
    assert_specials(got, want, f"reciprocal*x {dt.name}")
    assert np.isnan(got[:5]).all() and got[5] == 1


# ---------------------------------------------------------------- reductions, rows, scans, matmul
def special_rows(dt) -> np.ndarray:
    "(12, 8): each row a mix of specials whose sum, max and min do not depend on the order of the terms."
    fi = np.finfo(dt.np)
    inf, nan, sub = np.inf, np.nan, fi.smallest_subnormal
    rows = [[1, 2, inf, 3, 0.5, -1, 2, 1], [1, -inf, inf, 2, 0, 0, 1, 1], [nan, 1, 2, 3, 4, 5, 6, 7],
            [-0.0] * 8, [-0.0, -0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0], [inf, inf, 1, 1, -2, 3, 0, 0],
            [-inf, 1, 2, 3, -inf, 0, -1, 2], [sub, -sub, 0, 1, sub, 2, -0.0, 3], [1, 2, 3, nan, inf, -inf, 0, 1],
            [-1, -2, -0.5, -3, -4, -0.25, -8, -1], [0.5, 0.25, 1.5, 2, 3, 1, 0.75, 1.25], [-inf] * 8]
    return np.array(rows, dt.np)


def zero_ties(x, axis) -> np.ndarray:
    "Where max/min of `x` along `axis` is a zero that both signs of zero tie for (numpy's sign then depends on the order)."
    return (np.any(x == 0, axis=axis) & np.any(np.signbit(x) & (x == 0), axis=axis)
            & np.any(~np.signbit(x) & (x == 0), axis=axis))


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("red", ["sum", "mean", "amax", "amin"])
def test_reduction_specials(red, dt):
    "Along the rows (a thread or a workgroup per row), along the columns (strided), over everything, and a long row."
    x = special_rows(dt)
    long = np.concatenate([np.tile(np.array([0.5, -0.25, 1.0], dt.np), 700), [np.inf]]).astype(dt.np)
    for name, arr, dim in [("rows", x, 1), ("cols", x.T.copy(), 0), ("all", x[[0, 3, 5, 7]], None), ("long", long, None)]:
        with np.errstate(all="ignore"):
            cpu = getattr(tensor(arr), red)(dim).numpy()
            vk = getattr(tensor(arr, device="vulkan"), red)(dim).numpy()
            cpu0 = getattr(tensor(flushed(arr)), red)(dim).numpy()
        k = arr.size if dim is None else arr.shape[dim]
        terms = np.abs(arr.astype(np.float64)).sum(axis=dim)
        if red == "mean": terms = terms / k
        cpu = np.where(oracle.close_mask(vk, cpu) | ~oracle.close_mask(vk, cpu0), cpu, cpu0)   # a subnormal read as 0
        bound = {} if red in ("amax", "amin") else dict(k=k, terms=terms)
        assert_specials(vk, cpu, f"{red} {dt.name} {name}", **bound)
        if red in ("amax", "amin"):         # the sign of a tied zero is the order's (numpy's too): not compared
            assert_specials(np.where(zero_ties(arr, dim), 0.0, vk).astype(vk.dtype),
                            np.where(zero_ties(arr, dim), 0.0, cpu).astype(cpu.dtype), f"{red} {dt.name} {name}")


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_row_kernel_specials(fn, dt):
    "softmax and log_softmax (row kernels) over rows holding inf and NaN, as the oracle composes them."
    x = special_rows(dt)
    f = getattr(F, fn)
    with np.errstate(all="ignore"):
        cpu, vk = f(tensor(x), dim=-1).numpy(), f(tensor(x, device="vulkan"), dim=-1).numpy()
        cpu0 = f(tensor(flushed(x)), dim=-1).numpy()
    cpu = np.where(oracle.close_mask(vk, cpu) | ~oracle.close_mask(vk, cpu0), cpu, cpu0)
    assert_specials(vk, cpu, f"{fn} {dt.name}", k=x.shape[1])


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
def test_cumsum_specials(dt):
    x = special_rows(dt)
    for dim in (1, 0):
        with np.errstate(all="ignore"):
            cpu, vk = tensor(x).cumsum(dim).numpy(), tensor(x, device="vulkan").cumsum(dim).numpy()
            cpu0 = tensor(flushed(x)).cumsum(dim).numpy()
        cpu = np.where(oracle.close_mask(vk, cpu) | ~oracle.close_mask(vk, cpu0), cpu, cpu0)
        terms = np.cumsum(np.abs(x.astype(np.float64)), axis=dim)
        assert_specials(vk, cpu, f"cumsum {dt.name} dim {dim}", k=x.shape[dim], terms=terms)


@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(5, 7, 3), (33, 65, 17)], ids=str)
def test_matmul_specials(shape, dt):
    "A special in A or in B poisons exactly its row or column, as the oracle: no 0·inf from a padded tile edge."
    m, k, n = shape
    rng = np.random.default_rng(0)
    for which in ("a", "b"):
        a, b = rng.uniform(-1, 1, (m, k)).astype(dt.np), rng.uniform(-1, 1, (k, n)).astype(dt.np)
        t = a if which == "a" else b
        flat = t.reshape(-1)
        flat[rng.choice(flat.size, 6, replace=False)] = np.array([np.inf, -np.inf, np.nan, np.inf, -0.0, np.nan], dt.np)
        with np.errstate(all="ignore"):
            cpu = (tensor(a) @ tensor(b)).numpy()
            vk = (tensor(a, device="vulkan") @ tensor(b, device="vulkan")).numpy()
        terms = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        assert_specials(vk, cpu, f"matmul {dt.name} {shape} specials in {which}", zero_sign=False, k=k, terms=terms)


# ---------------------------------------------------------------- the functions over the whole range
HARD = np.array([6381956970095103 * 2.0 ** 797, 5.319372648326541e255, 1e22, np.finfo(np.float64).max,
                 np.pi / 2, np.pi, 2 * np.pi, 1e8 + 0.5, 1e18, np.pi / 2 * (2 ** 20 - 1), np.pi / 2 * (2 ** 20 + 1),
                 1647099.3291652855, 7074237752028440.0, np.finfo(np.float64).tiny, 5e-324])


def wide_inputs(dt) -> np.ndarray:
    """±10^-300..10^300 log-spaced (float64; the dtype's range for the others), the classic hard cases of argument
    reduction (near multiples of pi/2), and values near multiples of pi/2 below 2^20 pi/2 (Cody-Waite's range)."""
    fi, rng = np.finfo(dt.np), np.random.default_rng(0)
    e = int(np.log10(fi.max))
    near = np.pi / 2 * rng.integers(1, 2 ** 20, 400) + rng.choice([-1, 1], 400) * 10.0 ** rng.uniform(-12, -5, 400)
    x = np.concatenate([np.logspace(-min(e, 300), min(e, 300), 1201), HARD, near, rng.uniform(-1e7, 1e7, 1000)])
    with np.errstate(over="ignore"): x = x.astype(dt.np)
    return np.concatenate([x, -x])


WIDE_ROWS = [r for r in ELEMENTWISE.values() if r.arity == 1 and float64 in r.dtypes and r.name not in ("CAST", "CONTIGUOUS")]

@pytest.mark.parametrize("dt", FLOATS, ids=lambda d: d.name)
@pytest.mark.parametrize("row", WIDE_ROWS, ids=lambda r: r.name)
def test_functions_over_the_whole_range(row, dt):
    "Every function within the parity bound of numpy's over its dtype's range, |x| up to 1e300 in float64 (sin/cos: Payne-Hanek)."
    rtol, atol = row.tol if row.tol and dt is float32 else (None, None)
    with np.errstate(all="ignore"):
        op = lambda t: apply(row.op, t, arg=row.example_arg)
        assert_specials_or_flushed(op, [wide_inputs(dt)], f"{row.name} {dt.name} over the whole range", rtol=rtol, atol=atol)


# ---------------------------------------------------------------- norm's gradient at the zero vector
@pytest.mark.parametrize("device", ["cpu", "vulkan"])
@pytest.mark.parametrize("p", [2, 3, "fro"])
def test_norm_gradient_at_zero_is_zero(p, device):
    "Regression: d‖x‖/dx at x = 0 was NaN (sqrt's infinite slope times 2x = 0); PyTorch's subgradient is 0. Elsewhere unchanged."
    x = tensor(np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]]), device=device, requires_grad=True)
    y = x.norm(p, dim=1)
    y.sum().backward()
    g = x.grad.numpy()
    assert (g[0] == 0).all(), g
    want = np.abs([3.0, 4.0, 0.0]) ** (1 if p in (2, "fro") else 2) / (5.0 if p in (2, "fro") else 91.0 ** (2 / 3))
    np.testing.assert_allclose(g[1], want, rtol=1e-12)
    assert math.isnan(tensor(np.array([np.nan, 1.0]), device=device).norm().item())   # NaN is not a zero
    assert tensor(np.array([np.inf, 1.0]), device=device).norm().item() == np.inf


def test_norm_gradcheck_off_zero():
    from vkml.frontend.gradcheck import gradcheck
    rng = np.random.default_rng(0)
    assert gradcheck(lambda t: t.norm(dim=1), [rng.standard_normal((3, 4))])
    assert gradcheck(lambda t: t.norm(3, dim=0), [rng.standard_normal((3, 4))])


def test_close_mask_takes_no_finite_value_for_an_infinity():
    """Regression: the bound around an infinite oracle value was infinite, so any finite value was 'close' to it and
    the subnormal-flush allowance above never applied where the flushed input's result was finite (the NVIDIA
    driver's pow(inf, 1e-45) is pow(inf, 0) = 1)."""
    got, want = np.array([1.0, np.inf, -np.inf, 2.0], np.float32), np.array([np.inf, np.inf, np.inf, 2.0], np.float32)
    assert oracle.close_mask(got, want).tolist() == [False, True, False, True]


@pytest.mark.parametrize("op", ["trunc", "round", "frac", "floor", "ceil"])
def test_double_rounding_between_2_24_and_2_52(op):
    """lavapipe on a CPU without AVX-512 rounds an 8-lane double vector as if it held floats: its trunc and roundEven
    gave back every |x| from 2^24 up unchanged, so trunc, round, frac, fmod and digamma of such doubles were wrong.
    The kernels round doubles in exact arithmetic instead (vtrunc, vround_even); this holds on any device."""
    x = np.array([2.0 ** 24 + 0.5, 2.0 ** 24 + 1.5, 3e7 + 0.25, -3e7 - 0.75, 2.0 ** 40 + 0.5, -(2.0 ** 51) - 0.5, 2.0 ** 52 - 0.5,
                  2.0 ** 52, 2.0 ** 60, -0.3, -0.0, 0.5, 1.5, 2.5, -2.5, np.inf, -np.inf, np.nan])
    got = getattr(tensor(x, device="vulkan"), op)().numpy()
    want = getattr(tensor(x), op)().numpy()
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()


@pytest.mark.vulkan
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_arange_element_zero_is_start_when_the_step_overflows_the_dtype(dtype):
    "Regression (found by the long fuzz profile): a step of 1e308 is inf in float32, and element 0 was 0 * inf = NaN."
    for dev in ("cpu", "vulkan"):
        np.testing.assert_array_equal(vkml.arange(0, 1, 1e308, dtype=dtype, device=dev).numpy(), [0.0], err_msg=dev)
        np.testing.assert_array_equal(vkml.arange(2, 3, 1e300, dtype=dtype, device=dev).numpy(), [2.0], err_msg=dev)
