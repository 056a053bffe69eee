"""Tests derived from the elementwise table: for any row, CPU-vs-Vulkan parity over its dtypes and a few
layouts, a float64 gradcheck of its gradient rule, and the gradient on Vulkan against the CPU's. The
table-driven suite (test_elementwise_table.py) runs them for every row, and a throw-away row gets them
with no other edit."""
import numpy as np

from vkml.core.dtypes import float16, float32, float64, bool_, int32, int64
from vkml.core.elementwise import ELEMENTWISE
from vkml.frontend.gradcheck import gradcheck
from vkml.core.ops import Op
from vkml.frontend.tensor import apply, tensor
import oracle

SPECIAL = {"CAST", "WHERE", "ASSIGN"}     # their own signatures: tested by the hand-written parity suite


def derived_rows() -> list:
    "The rows whose tests the table alone defines: every elementwise op with tensor inputs but the special ones."
    return [r for r in ELEMENTWISE.values() if r.arity >= 1 and r.name not in SPECIAL]


def sample(row, dtype, shape, rng, keep_off_kinks=0.0):
    "Inputs of `dtype` from the row's domain (floats at least `keep_off_kinks` away from its kinks)."
    if dtype is bool_: return rng.random(shape) < 0.5
    lo, hi = row.domain
    if not dtype.is_float: return rng.integers(int(np.floor(lo)), int(np.ceil(hi)) + 1, shape).astype(dtype.np)
    x = rng.uniform(lo, hi, shape)
    for k in row.kinks:
        near = np.abs(x - k) < keep_off_kinks
        x[near] = k + np.copysign(keep_off_kinks, x[near] - k + 1e-12)
    return x.astype(dtype.np)


def _apply(row, xs):
    return apply(row.op, *xs, arg=row.example_arg)


def parity(row, rng=None):
    "The row's op on Vulkan against the CPU oracle, for each dtype it takes, contiguous, transposed and broadcast."
    rng = rng or np.random.default_rng(0)
    for dtype in row.dtypes:
        shapes = [(7,), (3, 5)]
        for shape in shapes:
            arrays = [sample(row, dtype, shape, rng) for _ in range(row.arity)]
            layouts = {"contiguous": lambda t: t}
            if len(shape) == 2:
                layouts["transposed"] = lambda t: apply(Op.PERMUTE, apply(Op.CONTIGUOUS, apply(Op.PERMUTE, t, arg=(1, 0))), arg=(1, 0))
                layouts["broadcast"] = lambda t: apply(Op.EXPAND, apply(Op.SLICE, t, arg=((0, 1, 1), (0, shape[1], 1))),
                                                       shape=shape, dtype=t.dtype)
            for name, lay in layouts.items():
                out = {d: _apply(row, [lay(tensor(a, device=d)) for a in arrays]).numpy() for d in ("cpu", "vulkan")}
                _close(out["cpu"], out["vulkan"], row, dtype, f"{row.name} {dtype.name} {shape} {name}")


def _close(cpu, vk, row, dtype, what):
    assert cpu.shape == vk.shape and cpu.dtype == vk.dtype, f"{what}: {vk.shape} {vk.dtype} vs {cpu.shape} {cpu.dtype}"
    rtol, atol = row.tol if row.tol and dtype is float32 else (None, None)   # a row may loosen float32's bound
    oracle.assert_close(vk, cpu, rtol=rtol, atol=atol, what=what)


def check_gradient(row):
    "Central differences in float64 against the row's gradient rule (inputs kept off its kinks)."
    rng = np.random.default_rng(1)
    arrays = [sample(row, float32, (2, 3), rng, keep_off_kinks=0.05).astype(np.float64) for _ in range(row.arity)]
    assert gradcheck(lambda *ts: _apply(row, ts), arrays), row.name


def vulkan_gradient(row, dtype=float32):
    "The gradient of Σ w·op(x) on Vulkan against the CPU's, in `dtype` (float32 or float64)."
    rng = np.random.default_rng(2)
    arrays = [sample(row, dtype, (3, 4), rng, keep_off_kinks=0.05) for _ in range(row.arity)]
    w = rng.standard_normal((3, 4)).astype(dtype.np)
    grads = {}
    for d in ("cpu", "vulkan"):
        xs = [tensor(a, device=d, requires_grad=True) for a in arrays]
        (_apply(row, xs) * tensor(w, device=d)).sum().backward()
        grads[d] = [x.grad.numpy() for x in xs]
    for i, (c, v) in enumerate(zip(grads["cpu"], grads["vulkan"])):
        _close(c, v, row, dtype, f"{row.name} {dtype.name} gradient of input {i}")
