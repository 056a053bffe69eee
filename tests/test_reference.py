"""Every operator of vkml.frontend.functions against an independent numpy/scipy reference.

`CASES[name]` lists the cases of one public operator: random inputs over several shapes (broadcasting,
size-1 and size-0 dims, ranks 0-4), each dtype the operator accepts, and (for tensor inputs) three
layouts: contiguous, a permuted view and a strided (step-2) slice. References compute in float64 from
the same inputs and never import vkML's numpy implementations. `TESTED_OPERATORS` is the set of
operator names exercised here, for the registry's completeness check.
"""
from __future__ import annotations
import math, zlib
from dataclasses import dataclass
from typing import Callable
import numpy as np
import pytest
from scipy import special
from hypothesis import given, settings, assume, HealthCheck, strategies as st
from hypothesis.extra import numpy as hnp

import vkml
import vkml.frontend.functions as VF
import vkml.frontend.registry as REG
from vkml.core.dtypes import float32, float16, int32, int64, bool_, RankError
from vkml.frontend.tensor import Tensor, tensor
import oracle

FLOAT = (float32, float16)
INT = (int32, int64)
NUM = FLOAT + INT
ALL = NUM + (bool_,)
HYP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- inputs -------------------------------------------------------------------------------------

SPECIAL = oracle.SPECIAL

def gen(shape, dtype, domain, rng) -> np.ndarray:
    "Random values of `dtype` from `domain` (tests/oracle.py's domains)."
    return oracle.sample(shape, dtype, domain, rng)

def layouts(arr: np.ndarray):
    "(name, builder) pairs: each builder makes a vkML tensor holding `arr`'s values in another layout."
    yield "contiguous", lambda: tensor(arr)
    if arr.ndim >= 2:
        perm = tuple(reversed(range(arr.ndim)))
        base = np.ascontiguousarray(arr.transpose(perm))
        yield "permuted", lambda: tensor(base).permute(perm)
    if arr.ndim >= 1:
        big = np.zeros((2 * arr.shape[0],) + arr.shape[1:], arr.dtype)
        big[1::2] = arr
        yield "strided", lambda: tensor(big)[1::2]
        yield "reversed", lambda: tensor(np.ascontiguousarray(arr[::-1]))[::-1]

def ref_in(a: np.ndarray) -> np.ndarray:
    "The reference's view of an input: floats widened to float64, ints to int64."
    if a.dtype.kind == "f": return a.astype(np.float64)
    if a.dtype.kind == "i": return a.astype(np.int64)
    return a

def check(out: Tensor, ref, want_dtype, tol=1.0, what=""):
    "Compare a vkML result with a reference: shape and dtype exactly, values within the dtype's tolerance."
    assert isinstance(out, Tensor), f"{what}: got {type(out)}"
    assert out.dtype is want_dtype, f"{what}: dtype {out.dtype} != {want_dtype}"
    o, r = out.numpy(), np.asarray(ref)
    assert o.dtype == want_dtype.np, what
    assert o.shape == r.shape, f"{what}: shape {o.shape} != {r.shape}"
    rtol, atol = oracle.REFERENCE.get(want_dtype.name, (0, 0))
    oracle.assert_close(o, r.astype(want_dtype.np) if not want_dtype.is_float else r, rtol=rtol * tol, atol=atol * tol,
                        what=what, same_dtype=False)

@dataclass
class Case:
    f: Callable                  # (*tensors) -> Tensor (or a tuple of tensors)
    ref: Callable                # (*float64/int64 arrays) -> array (or tuple)
    shapes: list                 # one tuple of input shapes per run
    dtypes: tuple = FLOAT        # the input dtypes to run (all inputs share one); (None,) for no inputs
    domain: str = "any"
    out: Callable = None         # input dtype -> output dtype (default: the input dtype)
    tol: float = 1.0             # multiplies the dtype's tolerance
    views: bool = True           # also run the non-contiguous layouts

# --- shapes ---------------------------------------------------------------------------------------

U = [((),), ((5,),), ((2, 3),), ((1, 4, 1),), ((2, 0, 3),), ((2, 3, 2, 2),)]
B = [((), ()), ((4,), ()), ((), (2, 3)), ((2, 3), (3,)), ((2, 1, 4), (3, 1)), ((2, 3), (2, 3)),
     ((0, 3), (3,)), ((2, 1, 3, 1), (1, 2, 1, 4)), ((1,), (3, 1))]
R = [((2, 3), None), ((2, 3), 1), ((2, 3), (0, 1)), ((4,), 0), ((), None), ((3, 1, 4), (0, 2)),
     ((2, 3, 2, 2), -1), ((2, 3, 4), (1,))]
R_EMPTY = [((0, 3), 0), ((2, 0), 1), ((0,), None), ((2, 0, 3), (1, 2))]
R_NONEMPTY_OF_EMPTY = [((0, 3), 1), ((2, 0), 0)]   # reducing a non-empty axis of an empty tensor

def _bool_out(_): return bool_
def _same(d): return d
def _widen(d): return int64 if d in (int32, bool_) else d

def unary(f, ref, dtypes=FLOAT, domain="any", tol=1.0, out=None, shapes=U):
    return Case(f, ref, shapes, dtypes, domain, out, tol)

def binary(f, ref, dtypes=NUM, domain="any", tol=1.0, out=None, shapes=B):
    return Case(f, ref, shapes, dtypes, domain, out, tol)

def red_shapes(rs): return [((s,),) for s, _ in rs]

def reduction(f, ref, rs, dtypes=FLOAT, out=None, tol=1.0, domain="any", keepdims=(False, True)):
    "One case per (shape, dim, keepdim); f(x, dim, keepdim), ref(x, axis, keepdims)."
    cases = []
    for shape, dim in rs:
        for kd in keepdims:
            ax = dim if dim is None or isinstance(dim, int) else tuple(dim)
            cases.append(Case(lambda x, dim=dim, kd=kd: f(x, dim, kd), lambda x, ax=ax, kd=kd: ref(x, ax, kd),
                              [(shape,)], dtypes, domain, out, tol))
    return cases

# --- independent references ------------------------------------------------------------------------

def softplus(x, beta=1.0, th=20.0):
    with np.errstate(over="ignore"): return np.where(beta * x > th, x, np.log1p(np.exp(beta * x)) / beta)

def ref_uniform(seed, offset, shape, dtype=float32):
    return oracle.uniform(seed, offset, math.prod(shape), dtype).reshape(shape)

def ref_norm(x, p, axis, kd):
    a = np.abs(x)
    if p in (2, "fro"): return np.sqrt(np.sum(a * a, axis=axis, keepdims=kd))
    if p == 1: return np.sum(a, axis=axis, keepdims=kd)
    if p == math.inf: return np.max(a, axis=axis, keepdims=kd)
    if p == -math.inf: return np.min(a, axis=axis, keepdims=kd)
    if p == 0: return np.sum(a != 0, axis=axis, keepdims=kd).astype(np.float64)
    return np.sum(a ** p, axis=axis, keepdims=kd) ** (1 / p)

def ref_pad(x, pad, value=0):
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2): widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    crop = tuple(slice(max(0, -b), n - max(0, -a)) for n, (b, a) in zip(x.shape, widths))
    return np.pad(x[crop], [(max(0, b), max(0, a)) for b, a in widths], constant_values=value)

def ref_index_add(x, dim, idx, src, alpha=1):
    out = x.copy()
    for j, i in enumerate(idx):
        sl = [slice(None)] * x.ndim; sl[dim] = i
        ss = [slice(None)] * x.ndim; ss[dim] = j
        out[tuple(sl)] += alpha * src[tuple(ss)]
    return out

def ref_logsumexp(x, axis, kd):
    shape = np.sum(x, axis=axis, keepdims=kd).shape   # scipy gives 0-d inputs with keepdims a (1,) shape
    return np.reshape(special.logsumexp(x, axis=axis, keepdims=kd), shape) if x.size else np.full(shape, -np.inf)

def amax_ref(x, axis, kd): return np.max(x, axis=axis, keepdims=kd, initial=-np.inf) if x.dtype.kind == "f" else np.max(x, axis=axis, keepdims=kd)
def amin_ref(x, axis, kd): return np.min(x, axis=axis, keepdims=kd, initial=np.inf) if x.dtype.kind == "f" else np.min(x, axis=axis, keepdims=kd)

def argref(fn, x, axis, kd):
    if axis is None:
        r = fn(x.reshape(-1)) if x.ndim else np.int64(0)
        return np.reshape(r, (1,) * x.ndim) if kd else np.asarray(r)
    return fn(x, axis=axis, keepdims=kd) if x.ndim else np.asarray(0)

# fixed index data for the indexing cases
IDX3 = np.array([2, 0, 2, 1], dtype=np.int64)
GIDX = np.random.default_rng(1).integers(0, 4, size=(3, 2)).astype(np.int64)
MASK23 = np.array([[True, False, True], [False, False, True]])
MASK3 = np.array([True, False, True])
ADV_MASK = np.random.default_rng(2).random((3, 4)) < 0.5
ADV_MASK2 = np.array([True, False, False, True])
SIDX = np.array([[0, 2, 1], [3, 1, 0], [1, 0, 2]], np.int64)   # no repeats within a row or a column

def ref_scatter(x, dim, idx, src, add):
    out = x.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos); tgt[dim] = idx[pos]
        if add: out[tuple(tgt)] += src[pos]
        else: out[tuple(tgt)] = src[pos]
    return out

def ref_put(x, indices, v, accumulate):
    out = x.copy()
    idx = tuple(np.asarray(i) for i in indices)
    if accumulate: np.add.at(out, idx, np.broadcast_to(v, out[idx].shape))
    else: out[idx] = v
    return out

# --- the table -------------------------------------------------------------------------------------

CASES: dict[str, list] = {
    # creation (inputs are ignored: dtypes=(None,))
    "tensor": [Case(lambda: tensor([[1.5, 2.0], [3.0, 4.0]]), lambda: np.array([[1.5, 2.0], [3.0, 4.0]]), [()], (None,), out=lambda _: float32),
               Case(lambda: tensor([1, 2, 3]), lambda: np.array([1, 2, 3]), [()], (None,), out=lambda _: int64)],
    "zeros": [Case(lambda d=d: VF.zeros(2, 3, dtype=d), lambda d=d: np.zeros((2, 3)), [()], (None,), out=lambda _, d=d: d) for d in ALL]
             + [Case(lambda: VF.zeros((0, 2)), lambda: np.zeros((0, 2)), [()], (None,), out=lambda _: float32)],
    "ones": [Case(lambda d=d: VF.ones((4,), dtype=d), lambda: np.ones(4), [()], (None,), out=lambda _, d=d: d) for d in ALL],
    "full": [Case(lambda: VF.full((2, 2), 7), lambda: np.full((2, 2), 7), [()], (None,), out=lambda _: int64),
             Case(lambda: VF.full((3,), -1.5), lambda: np.full(3, -1.5), [()], (None,), out=lambda _: float32),
             Case(lambda: VF.full((), True), lambda: np.array(True), [()], (None,), out=lambda _: bool_),
             Case(lambda: VF.full((2,), 2.5, dtype=float16), lambda: np.full(2, 2.5), [()], (None,), out=lambda _: float16)],
    "zeros_like": [Case(lambda x: VF.zeros_like(x), lambda x: np.zeros_like(x), [((2, 3),), ((),)], ALL)],
    "ones_like": [Case(lambda x: VF.ones_like(x), lambda x: np.ones_like(x), [((2, 3),), ((0, 2),)], ALL)],
    "full_like": [Case(lambda x: VF.full_like(x, 3), lambda x: np.full_like(x, 3), [((2, 3),), ((4,),)], NUM)],
    "arange": [Case(lambda: VF.arange(5), lambda: np.arange(5), [()], (None,), out=lambda _: int64),
               Case(lambda: VF.arange(2, 11, 3), lambda: np.arange(2, 11, 3), [()], (None,), out=lambda _: int64),
               Case(lambda: VF.arange(5, -4, -2), lambda: np.arange(5, -4, -2), [()], (None,), out=lambda _: int64),
               Case(lambda: VF.arange(0.0, 1.0, 0.1), lambda: np.arange(0.0, 1.0, 0.1), [()], (None,), out=lambda _: float32),
               Case(lambda: VF.arange(3, 3), lambda: np.arange(3, 3), [()], (None,), out=lambda _: int64),
               Case(lambda: VF.arange(4, dtype=int32), lambda: np.arange(4), [()], (None,), out=lambda _: int32),
               Case(lambda: VF.arange(6, dtype=float16), lambda: np.arange(6), [()], (None,), out=lambda _: float16)],
    "linspace": [Case(lambda n=n: VF.linspace(-2.0, 3.0, n), lambda n=n: np.linspace(-2.0, 3.0, n), [()], (None,),
                      out=lambda _: float32) for n in (0, 1, 2, 5, 50)]
                + [Case(lambda: VF.linspace(0, 1, 11, dtype=float16), lambda: np.linspace(0, 1, 11), [()], (None,), out=lambda _: float16)],
    "empty": [Case(lambda: VF.empty(2, 3), lambda: np.zeros((2, 3)), [()], (None,), out=lambda _: float32, tol=0)],
    "scalar_tensor": [Case(lambda: VF.scalar_tensor(3), lambda: np.float32(3), [()], (None,), out=lambda _: float32, tol=0)],
    "logspace": [Case(lambda: VF.logspace(-1.0, 2.0, 7), lambda: np.logspace(-1.0, 2.0, 7), [()], (None,), out=lambda _: float32),
                 Case(lambda: VF.logspace(0.0, 4.0, 5, 2.0, dtype=vkml.float64), lambda: np.logspace(0.0, 4.0, 5, base=2.0), [()],
                      (None,), out=lambda _: vkml.float64)],
    "tril_indices": [Case(lambda: VF.tril_indices(4, 3, 1), lambda: np.stack(np.tril_indices(4, 1, 3)), [()], (None,),
                          out=lambda _: int64, tol=0)],
    "triu_indices": [Case(lambda: VF.triu_indices(3, 5, -1), lambda: np.stack(np.triu_indices(3, -1, 5)), [()], (None,),
                          out=lambda _: int64, tol=0)],
    "eye": [Case(lambda: VF.eye(3), lambda: np.eye(3), [()], (None,), out=lambda _: float32),
            Case(lambda: VF.eye(2, 4, dtype=int64), lambda: np.eye(2, 4), [()], (None,), out=lambda _: int64),
            Case(lambda: VF.eye(3, 2, dtype=bool_), lambda: np.eye(3, 2).astype(bool), [()], (None,), out=lambda _: bool_),
            Case(lambda: VF.eye(0), lambda: np.eye(0), [()], (None,), out=lambda _: float32)],
    "rand": [Case(lambda: (VF.manual_seed(7), VF.rand(2, 3))[1], lambda: ref_uniform(7, 0, (2, 3)), [()], (None,),
                  out=lambda _: float32, tol=0),
             Case(lambda: (VF.manual_seed(2**40 + 5), VF.rand(4), VF.rand(3, dtype=float16))[2],
                  lambda: ref_uniform(2**40 + 5, 4, (3,), float16), [()], (None,), out=lambda _: float16, tol=0)],
    "randn": [Case(lambda: (VF.manual_seed(3), VF.randn(2, 5))[1],
                   lambda: np.sqrt(-2 * np.log(1 - ref_uniform(3, 0, (2, 5)))) * np.cos(2 * np.pi * ref_uniform(3, 10, (2, 5))),
                   [()], (None,), out=lambda _: float32, tol=20)],
    # unary math
    "neg": [unary(VF.neg, np.negative, NUM), unary(lambda x: -x, np.negative, FLOAT, "special")],
    "abs": [unary(VF.abs, np.abs, NUM), unary(lambda x: abs(x), np.abs, FLOAT, "special")],
    "sign": [unary(VF.sign, np.sign, NUM), unary(VF.sign, np.sign, FLOAT, "ties")],
    "exp": [unary(VF.exp, np.exp, tol=2), unary(lambda x: x.exp(), np.exp, tol=2)],
    "clamp": [unary(lambda x: VF.clamp(x, -1, 2), lambda x: np.clip(x, -1, 2), NUM),
              unary(lambda x: VF.clamp(x, min=0.5), lambda x: np.maximum(x, 0.5)),
              unary(lambda x: x.clamp(max=-0.25), lambda x: np.minimum(x, -0.25)),
              unary(lambda x: VF.clamp(x, -1.0, 1.0), lambda x: np.clip(x, -1, 1), domain="special"),
              binary(lambda x, lo: VF.clamp(x, lo, 1.0), lambda x, lo: np.minimum(np.maximum(x, lo), 1.0), FLOAT,
                     shapes=[((2, 3), (3,)), ((4,), ())])],
    # activations
    "relu": [unary(VF.relu, lambda x: np.maximum(x, 0), NUM), unary(lambda x: x.relu(), lambda x: np.maximum(x, 0), domain="special")],
    "leaky_relu": [unary(VF.leaky_relu, lambda x: np.where(x > 0, x, 0.01 * x)),
                   unary(lambda x: VF.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x))],
    "elu": [unary(VF.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
            unary(lambda x: VF.elu(x, 0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x)))],
    "gelu": [unary(VF.gelu, lambda x: 0.5 * x * (1 + special.erf(x / np.sqrt(2)))),
             unary(lambda x: VF.gelu(x, approximate="tanh"),
                   lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), tol=2)],
    "softplus": [unary(VF.softplus, softplus),
                 unary(lambda x: VF.softplus(x, beta=2.0, threshold=3.0), lambda x: softplus(x, 2.0, 3.0))],
    "hardtanh": [unary(VF.hardtanh, lambda x: np.clip(x, -1, 1)),
                 unary(lambda x: VF.hardtanh(x, -2, 3), lambda x: np.clip(x, -2, 3), NUM)],
    # binary
    "add": [binary(VF.add, np.add), binary(lambda a, b: a + b, np.add, FLOAT),
            binary(lambda a, b: VF.add(a, b, alpha=2), lambda a, b: a + 2 * b),
            unary(lambda x: x + 1, lambda x: x + 1, NUM), unary(lambda x: 1 + x, lambda x: x + 1, NUM),
            unary(lambda x: x + np.ones(x.shape[-1:], x.dtype.np), lambda x: x + 1, NUM, shapes=U[1:])],
    "sub": [binary(VF.sub, np.subtract), binary(lambda a, b: VF.sub(a, b, alpha=3), lambda a, b: a - 3 * b),
            unary(lambda x: 2 - x, lambda x: 2 - x, NUM), unary(lambda x: x - 0.5, lambda x: x - 0.5)],
    "mul": [binary(VF.mul, np.multiply), binary(lambda a, b: a * b, np.multiply, FLOAT),
            unary(lambda x: x * 2, lambda x: x * 2, NUM), unary(lambda x: 0.5 * x, lambda x: 0.5 * x)],
    "div": [binary(VF.div, np.divide, FLOAT, "nz"), binary(lambda a, b: a / b, np.divide, FLOAT, "nz"),
            unary(lambda x: 2 / x, lambda x: 2 / x, domain="nz"), unary(lambda x: x / 4, lambda x: x / 4)],
    "pow": [binary(VF.pow, np.power, FLOAT, "pos", tol=4), unary(lambda x: x ** 2, np.square),
            unary(lambda x: 2 ** x, lambda x: 2.0 ** x, tol=2), unary(lambda x: x ** 0.5, np.sqrt, domain="pos")],
    "maximum": [binary(VF.maximum, np.maximum), binary(VF.maximum, np.maximum, FLOAT, "special"),
                unary(lambda x: x.maximum(x * 0), lambda x: np.maximum(x, 0))],
    "minimum": [binary(VF.minimum, np.minimum), binary(VF.minimum, np.minimum, FLOAT, "special")],
    "where": [binary(lambda a, b: VF.where(a > 0, a, b), lambda a, b: np.where(a > 0, a, b), ALL[:4]),
              binary(lambda a, b: VF.where(tensor(MASK3), a, b), lambda a, b: np.where(MASK3, a, b), ALL,
                     shapes=[((2, 3), (3,)), ((3,), ()), ((1, 3), (2, 1))]),
              unary(lambda x: VF.where(x > 0, x, 0.0), lambda x: np.where(x > 0, x, 0.0)),
              unary(lambda x: x.where(x < 0, 1), lambda x: np.where(x < 0, x, 1), NUM),
              unary(lambda x: VF.where(x > 0, 1.0, -1.0), lambda x: np.where(x > 0, 1.0, -1.0), out=lambda _: float32),
              unary(lambda x: VF.where(x > 0, 2, 0), lambda x: np.where(x > 0, 2, 0), out=lambda _: int64)],
    # comparison
    **{name: [binary(getattr(VF, name), ref, ALL, "ties", out=_bool_out), binary(getattr(VF, name), ref, FLOAT, "special", out=_bool_out),
              unary(lambda x, name=name: getattr(VF, name)(x, 0), lambda x, ref=ref: ref(x, 0), NUM, "ties", out=_bool_out)]
       for name, ref in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                         ("gt", np.greater), ("ge", np.greater_equal)]},
    "isnan": [unary(VF.isnan, np.isnan, INT + (bool_,), out=_bool_out)],
    "isinf": [unary(VF.isinf, np.isinf, INT + (bool_,), out=_bool_out)],
    # reductions
    "sum": reduction(VF.sum, lambda x, a, k: np.sum(x, axis=a, keepdims=k), R + R_EMPTY + R_NONEMPTY_OF_EMPTY, ALL, out=_widen, tol=3)
           + [unary(lambda x: x.sum(), np.sum, ALL, out=_widen, tol=3),
              unary(lambda x: x.sum(-1, dtype=float32), lambda x: np.sum(x, -1), FLOAT + INT, out=lambda _: float32, shapes=U[1:])],
    "mean": reduction(VF.mean, lambda x, a, k: np.mean(x, axis=a, keepdims=k), R + R_NONEMPTY_OF_EMPTY, tol=3),
    "amax": reduction(VF.amax, amax_ref, R, NUM + (bool_,)) + reduction(VF.amax, amax_ref, R_EMPTY + R_NONEMPTY_OF_EMPTY, FLOAT)
            + reduction(VF.amax, amax_ref, [((3, 4), 1), ((6,), None)], FLOAT, domain="special", keepdims=(False,)),
    "amin": reduction(VF.amin, amin_ref, R, NUM) + reduction(VF.amin, amin_ref, R_EMPTY, FLOAT)
            + reduction(VF.amin, amin_ref, R, (bool_,)),   # over bools: all (PyTorch's amin of bool)
    # any/all: PyTorch tests "nonzero" for every dtype (NaN is nonzero); an empty extent gives False / True
    "any": reduction(VF.any, lambda x, a, k: np.any(x != 0, axis=a, keepdims=k), R + R_EMPTY + R_NONEMPTY_OF_EMPTY, ALL, out=_bool_out)
           + reduction(VF.any, lambda x, a, k: np.any(x != 0, axis=a, keepdims=k), [((3, 4), 1)], FLOAT, out=_bool_out, domain="special"),
    "all": reduction(VF.all, lambda x, a, k: np.all(x != 0, axis=a, keepdims=k), R + R_EMPTY + R_NONEMPTY_OF_EMPTY, ALL, out=_bool_out, domain="ties")
           + reduction(VF.all, lambda x, a, k: np.all(x != 0, axis=a, keepdims=k), [((3, 4), 1)], FLOAT, out=_bool_out, domain="special"),
    "prod": reduction(VF.prod, lambda x, a, k: np.prod(x, axis=a, keepdims=k), R + R_EMPTY, NUM, out=_widen, domain="unit", tol=3)
            + reduction(VF.prod, lambda x, a, k: np.prod(x, axis=a, keepdims=k), [((2, 3), 1)], (bool_,), out=_widen),
    "argmax": reduction(VF.argmax, lambda x, a, k: argref(np.argmax, x, a, k),
                        [((2, 3), None), ((2, 3), 1), ((4,), 0), ((), None), ((3, 1, 4), 0), ((2, 3, 2, 2), -1), ((0, 3), 1)],
                        NUM, out=lambda _: int64, domain="ties"),
    "argmin": reduction(VF.argmin, lambda x, a, k: argref(np.argmin, x, a, k),
                        [((2, 3), None), ((2, 3), 0), ((5,), -1), ((2, 3, 4), 2)], NUM, out=lambda _: int64, domain="ties"),
    "var": reduction(lambda x, d, k: VF.var(x, d, keepdim=k), lambda x, a, k: np.var(x, axis=a, keepdims=k, ddof=1), [r for r in R if r[0] not in ((), (4,))], tol=5)
           + [unary(lambda x: VF.var(x, 1, correction=0), lambda x: np.var(x, axis=1), shapes=[((3, 4),), ((2, 5, 2),)], tol=5),
              unary(lambda x: x.var(0, unbiased=False, keepdim=True), lambda x: np.var(x, axis=0, keepdims=True), shapes=[((4, 2),)], tol=5)],
    "std": reduction(lambda x, d, k: VF.std(x, d, keepdim=k), lambda x, a, k: np.std(x, axis=a, keepdims=k, ddof=1), [((2, 3), 1), ((3, 4), None), ((2, 3, 4), (0, 2))], tol=5),
    "logsumexp": reduction(VF.logsumexp, ref_logsumexp, R + R_EMPTY, tol=3)
                 + [unary(lambda x: VF.logsumexp(x * 100, 1), lambda x: special.logsumexp(x * 100, axis=1), shapes=[((3, 4),)], tol=5),
                    unary(lambda x: VF.logsumexp(x, 0), lambda x: special.logsumexp(x, axis=0), domain="special", shapes=[((6,),)])],
    "cumsum": [Case(lambda x, d=d: VF.cumsum(x, d), lambda x, d=d: np.cumsum(x, axis=d), [(s,)], ALL, out=_widen, tol=3)
               for s, d in [((5,), 0), ((2, 3), 1), ((2, 3), -2), ((2, 0, 3), 2), ((2, 3, 2, 2), 2)]]
              + [Case(lambda x: VF.cumsum(x, 0), lambda x: np.cumsum(x.reshape(1)).reshape(()), [((),)], NUM, out=_widen)],
    "norm": [Case(lambda x, p=p, d=d: VF.norm(x, p, d), lambda x, p=p, d=d: ref_norm(x, p, d, False), [(s,)], tol=3)
             for p in (2, "fro", 1, math.inf, -math.inf, 0, 3, 0.5, -1, -2.5) for s, d in [((2, 3), None), ((3, 4), 1), ((2, 2, 3), (0, 2))]]
            + [Case(lambda x: VF.norm(x, -2, 1), lambda x: ref_norm(x, -2, 1, False), [((3, 4),)], domain="ties", tol=3)]   # zeros: the norm is 0
            + [Case(lambda x: x.norm(dim=0, keepdim=True), lambda x: ref_norm(x, 2, 0, True), [((4, 2),)], tol=3)],
    # shape / indexing
    "reshape": [Case(lambda x, t=t: VF.reshape(x, t), lambda x, t=t: np.reshape(x, t), [(s,)], ALL)
                for s, t in [((2, 3), (3, 2)), ((2, 3), (-1,)), ((6,), (1, 2, 1, 3)), ((), (1, 1)), ((2, 0), (0, 5)), ((4, 3), (2, -1))]]
               + [Case(lambda x: x.reshape(3, 2), lambda x: x.reshape(3, 2), [((2, 3),)], NUM),
                  Case(lambda x: x.view(-1), lambda x: x.reshape(-1), [((2, 3),)], NUM)],
    "flatten": [Case(lambda x, a=a: VF.flatten(x, *a), lambda x, a=a, s=s: x.reshape(s[:a[0] % max(1, len(s))] + (-1,) + s[(a[1] % max(1, len(s))) + 1:]) if s else x.reshape(1),
                     [(s,)], ALL) for s, a in [((2, 3, 4), (0, -1)), ((2, 3, 4), (1, 2)), ((2, 3, 4, 5), (1, 2)), ((), (0, -1)), ((3,), (0, 0))]],
    "squeeze": [Case(lambda x: VF.squeeze(x), np.squeeze, [((1, 3, 1),), ((1,),), ((2, 3),)], ALL),
                Case(lambda x: x.squeeze(0), lambda x: np.squeeze(x, 0), [((1, 3, 1),)], ALL),
                Case(lambda x: x.squeeze(1), lambda x: x, [((2, 3),)], NUM),
                Case(lambda x: x.squeeze((0, 2)), lambda x: np.squeeze(x, (0, 2)), [((1, 3, 1),)], NUM)],
    "unsqueeze": [Case(lambda x, d=d: VF.unsqueeze(x, d), lambda x, d=d: np.expand_dims(x, d), [(s,)], ALL)
                  for s, d in [((2, 3), 0), ((2, 3), -1), ((2, 3), 1), ((), 0), ((2, 0, 3), 3)]],
    "permute": [Case(lambda x, p=p: VF.permute(x, p), lambda x, p=p: np.transpose(x, p), [(s,)], ALL)
                for s, p in [((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)), ((2, 3, 4), (-1, 0, 1)), ((), ())]]
               + [Case(lambda x: x.permute(1, 2, 0), lambda x: np.transpose(x, (1, 2, 0)), [((2, 0, 3),)], NUM)],
    "transpose": [Case(lambda x: VF.transpose(x, 0, 1), lambda x: np.swapaxes(x, 0, 1), [((2, 3),), ((2, 3, 4),)], ALL),
                  Case(lambda x: x.transpose(-1, 1), lambda x: np.swapaxes(x, -1, 1), [((2, 3, 4, 5),)], NUM),
                  Case(lambda x: x.T, lambda x: x.T, [((2, 3),), ((4,),)], NUM),
                  Case(lambda x: x.t(), lambda x: x.T, [((2, 3),)], NUM)],
    "expand": [Case(lambda x, t=t: VF.expand(x, t), lambda x, t=t, s=s: np.broadcast_to(x, tuple(d if d != -1 else s[i - (len(t) - len(s))] for i, d in enumerate(t))), [(s,)], ALL)
               for s, t in [((1, 3), (2, 3)), ((3,), (4, 3)), ((), (2, 2)), ((2, 1), (-1, 4)), ((1, 1), (2, 0, 5)), ((2, 1, 3), (2, 2, 4, 3))]]
              + [Case(lambda x: x.expand(3, -1, 2), lambda x: np.broadcast_to(x, (3, 2, 2)), [((2, 1),)], NUM)],
    "contiguous": [Case(lambda x: VF.contiguous(x), lambda x: x, U, ALL), Case(lambda x: x.permute(1, 0).contiguous(), lambda x: x.T, [((2, 3),)], NUM)],
    "cat": [Case(lambda a, b, d=d: VF.cat([a, b], d), lambda a, b, d=d: np.concatenate([a, b], d), [(sa, sb)], ALL)
            for sa, sb, d in [((2, 3), (1, 3), 0), ((2, 3), (2, 4), 1), ((2, 3), (2, 0), -1), ((4,), (4,), 0), ((1, 2, 3, 4), (1, 2, 1, 4), 2)]]
           + [Case(lambda a: VF.cat([a, a, a], 1), lambda a: np.concatenate([a, a, a], 1), [((2, 2),)], NUM),
              Case(lambda a: VF.cat([a]), lambda a: a, [((3,),)], NUM)],
    "stack": [Case(lambda a, b, d=d: VF.stack([a, b], d), lambda a, b, d=d: np.stack([a, b], d), [(s, s)], ALL)
              for s, d in [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((), 0), ((0, 3), 1), ((2, 3, 4), 1)]],
    "split": [Case(lambda x, a=a, d=d: VF.split(x, a, d), lambda x, a=a, d=d: tuple(np.split(x, np.cumsum(a)[:-1], d)) if isinstance(a, list)
                   else tuple(np.split(x, range(a, x.shape[d], a), d)), [(s,)], ALL)
              for s, a, d in [((5, 2), 2, 0), ((6,), 3, 0), ((2, 7), [1, 4, 2], 1), ((3, 4), [0, 3], 0), ((2, 3), 5, 1)]]
             + [Case(lambda x: x.split(1, -1), lambda x: tuple(np.split(x, 3, -1)), [((2, 3),)], NUM)],
    "__getitem__": [Case(lambda x, i=i: x[i], lambda x, i=i: x[i], [((3, 4, 5),)], ALL)
                    for i in [0, -1, (1, 2), (slice(None), 1), (slice(1, None), slice(None, None, 2)), (slice(None, None, -1),),
                              (Ellipsis, -2), (None, 0), (0, None, slice(None), None), (slice(-2, None), Ellipsis, slice(4, 0, -2)),
                              (slice(5, 1),), (2, 3, 4), (Ellipsis,), (slice(None, None, -3), slice(None, None, -1))]]
                   + [Case(lambda x: x[tensor(IDX3)], lambda x: x[IDX3], [((3, 2),)], ALL),
                      Case(lambda x: x[1:, tensor(IDX3[:2])], lambda x: x[1:, IDX3[:2]], [((3, 4),)], NUM),
                      Case(lambda x: x[..., tensor(IDX3)], lambda x: x[..., IDX3], [((2, 3),)], NUM),
                      Case(lambda x: x[None, 1, tensor(IDX3)], lambda x: x[None, 1, IDX3], [((2, 3),)], NUM),
                      Case(lambda x: x[()], lambda x: x, [((),), ((2,),)], NUM), Case(lambda x: x[None], lambda x: x[None], [((),)], NUM)]
                   # advanced indexing (NumPy's rules, which PyTorch's follow in these cases): lists, several index
                   # tensors broadcast together, 2-D index tensors, masks, and index dims moved first when separated
                   + [Case(lambda x, i=i: x[i], lambda x, i=i: x[i], [((3, 4, 5),)], ALL)
                      for i in [[0, 2], ([0, 2], [1, 1]), ([[0], [2]], [1, 3]), ([0, 1], slice(None), [4, 0]), (Ellipsis, [0, -1]),
                                (slice(1, None), [[0, 1], [2, 3]]), ([-1, 0], None, slice(None, None, 2)), ([1, 0, 1], [3, 3, 0], [4, 0, 1]),
                                (ADV_MASK,), (1, ADV_MASK2), ([], slice(None))]]
                   + [Case(lambda x: x[tensor(ADV_MASK)], lambda x: x[ADV_MASK], [((3, 4, 5),)], NUM),
                      Case(lambda x: x[tensor(IDX3)[:2], :, tensor([1, 0])], lambda x: x[IDX3[:2], :, [1, 0]], [((3, 4, 2),)], NUM),
                      Case(lambda x: x[x > 0], lambda x: x[x > 0], [((2, 3),), ((4,),)], FLOAT),
                      Case(lambda x: x[True], lambda x: x[None], [((2, 3),)], NUM),                    # PyTorch: a new dim of 1
                      Case(lambda x: x[:, False], lambda x: x[:, None][:, :0], [((2, 3),)], NUM)],     # ... or of 0
    "pad": [Case(lambda x, p=p, v=v: VF.pad(x, p, value=v), lambda x, p=p, v=v: ref_pad(x, p, v), [(s,)], NUM)
            for s, p, v in [((2, 3), (1, 2), 0), ((2, 3), (0, 1, 2, 0), 5), ((4,), (-1, 2), 0), ((2, 3, 4), (1, -2, 0, 0, 2, 1), 1),
                            ((2, 3), (0, 0), 0), ((0, 3), (1, 1, 1, 1), 2), ((2, 3), (-3, 1), 0)]]
           + [Case(lambda x: VF.pad(x, (1, 1), value=-1.5), lambda x: ref_pad(x, (1, 1), -1.5), [((2, 2),)], FLOAT),
              Case(lambda x: VF.pad(x, (1, 0), value=True), lambda x: ref_pad(x, (1, 0), True), [((2, 2),)], (bool_,))],
    "flip": [Case(lambda x, d=d: VF.flip(x, d), lambda x, d=d: np.flip(x, d), [(s,)], ALL)
             for s, d in [((5,), 0), ((2, 3), (0, 1)), ((2, 3, 4), (-1,)), ((2, 0, 3), 1), ((2, 3), [1]), ((2, 3, 4, 2), (0, 3))]],
    "repeat": [Case(lambda x, r=r: VF.repeat(x, r), lambda x, r=r: np.tile(x, r), [(s,)], ALL)
               for s, r in [((2, 3), (2, 1)), ((2, 3), (1, 3)), ((3,), (2, 2)), ((2, 3), (2, 1, 2)), ((), (3,)), ((2, 1, 2), (1, 0, 2)),
                            ((2, 2), (2, 2, 2, 2))]]
              + [Case(lambda x: x.repeat(2, 3), lambda x: np.tile(x, (2, 3)), [((2, 2),)], NUM)],
    "tril": [Case(lambda x, k=k: VF.tril(x, k), lambda x, k=k: np.tril(x, k), [(s,)], ALL)
             for s, k in [((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 0), ((2, 2, 3, 4), 2), ((0, 3), 0)]],
    "triu": [Case(lambda x, k=k: VF.triu(x, k), lambda x, k=k: np.triu(x, k), [(s,)], ALL)
             for s, k in [((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((2, 3, 3), 0), ((2, 2, 3, 4), -2)]]
            + [Case(lambda x: x.triu(), np.triu, [((3, 3),)], NUM)],
    "index_select": [Case(lambda x, d=d: VF.index_select(x, d, tensor(IDX3)), lambda x, d=d: np.take(x, IDX3, d), [(s,)], ALL)
                     for s, d in [((3,), 0), ((3, 2), 0), ((2, 3), 1), ((2, 3, 4), 1), ((2, 2, 3, 2), -2)]]
                    + [Case(lambda x: x.index_select(0, tensor(np.zeros(0, np.int64))), lambda x: x[:0], [((3, 2),)], NUM)],
    "gather": [Case(lambda x: VF.gather(x, 1, tensor(GIDX)), lambda x: np.take_along_axis(x, GIDX, 1), [((3, 4),), ((3, 5),)], ALL),
               Case(lambda x: x.gather(0, tensor(GIDX[:, :1] % 3)), lambda x: np.take_along_axis(x[:, :1], GIDX[:, :1] % 3, 0), [((3, 3),)], NUM)],
    "index_add": [Case(lambda x, s, d=d: VF.index_add(x, d, tensor(IDX3), s), lambda x, s, d=d: ref_index_add(x, d, IDX3, s), [(sx, ss)], NUM)
                  for sx, ss, d in [((3,), (4,), 0), ((3, 2), (4, 2), 0), ((2, 3), (2, 4), 1), ((2, 3, 2), (2, 4, 2), 1)]]
                 + [Case(lambda x, s: x.index_add(0, tensor(IDX3), s, alpha=2), lambda x, s: ref_index_add(x, 0, IDX3, s, 2), [((3, 2), (4, 2))], NUM)],
    # scatter: torch.scatter writes src[i][j] at [i][index[i][j]] (dim 1); the cases hold no repeated index
    "scatter": [Case(lambda x, s, d=d: VF.scatter(x, d, tensor(SIDX), s), lambda x, s, d=d: ref_scatter(x, d, SIDX, s, False), [(sx, ss)], ALL)
                for sx, ss, d in [((3, 4), (3, 3), 1), ((4, 3), (3, 3), 0)]]
               + [Case(lambda x: x.scatter(1, tensor(SIDX), value=2), lambda x: ref_scatter(x, 1, SIDX, np.full(SIDX.shape, 2), False), [((3, 4),)], NUM)],
    "scatter_add": [Case(lambda x, s, d=d: VF.scatter_add(x, d, tensor(SIDX % 2), s), lambda x, s, d=d: ref_scatter(x, d, SIDX % 2, s, True), [(sx, ss)], NUM)
                    for sx, ss, d in [((3, 4), (3, 3), 1), ((2, 3), (3, 3), 0)]],
    # index_put: torch.index_put(x, indices, values, accumulate) is x[indices] = values (or += with repeats adding up)
    "index_put": [Case(lambda x, v: VF.index_put(x, (tensor([0, 2]), tensor([1, 3])), v), lambda x, v: ref_put(x, ([0, 2], [1, 3]), v, False), [((3, 4), (2,)), ((3, 4), ())], ALL),
                  Case(lambda x, v: VF.index_put(x, (tensor([0, 0, 2]),), v, accumulate=True), lambda x, v: ref_put(x, ([0, 0, 2],), v, True), [((3, 4), (3, 4)), ((3, 4), (4,))], NUM),
                  Case(lambda x: x.index_put((tensor(MASK23),), VF.zeros(())), lambda x: ref_put(x, (MASK23,), 0, False), [((2, 3),)], FLOAT)],
    "masked_fill": [Case(lambda x: VF.masked_fill(x, tensor(MASK23), 0), lambda x: np.where(MASK23, 0, x), [((2, 3),)], NUM),
                    Case(lambda x: x.masked_fill(tensor(MASK3), -2.5), lambda x: np.where(MASK3, -2.5, x), [((2, 3),), ((4, 2, 3),)], FLOAT),
                    Case(lambda x: x.masked_fill(tensor(MASK3), False), lambda x: np.where(MASK3, False, x), [((2, 3),)], (bool_,)),
                    Case(lambda x: x.masked_fill(x > 0, VF.zeros(())), lambda x: np.where(x > 0, 0, x), [((2, 3),)], (float32,)),
                    # out of place, PyTorch broadcasts the tensor and the mask together (expand_outplace)
                    Case(lambda x: x.masked_fill(tensor(MASK23), 1), lambda x: np.where(MASK23, 1, x), [((3,),), ((1, 3),)], NUM)],
    "one_hot": [Case(lambda: VF.one_hot(tensor([0, 2, 1, 2]), 4), lambda: np.eye(4)[[0, 2, 1, 2]], [()], (None,), out=lambda _: int64),
                Case(lambda: VF.one_hot(tensor([[1, 0], [2, 2]])), lambda: np.eye(3)[[[1, 0], [2, 2]]], [()], (None,), out=lambda _: int64),
                Case(lambda: VF.one_hot(tensor(np.zeros(0, np.int64)), 2), lambda: np.zeros((0, 2)), [()], (None,), out=lambda _: int64)],
    "to": [Case(lambda x, d=d: x.to(d), lambda x, d=d: x.astype(d.np), U, NUM, out=lambda _, d=d: d) for d in ALL]
          + [Case(lambda x: x.to("cpu"), lambda x: x, [((2, 3),)], ALL),
             Case(lambda x: x.float(), lambda x: x, [((2, 3),)], ALL, out=lambda _: float32),
             Case(lambda x: x.half(), lambda x: x, [((2, 3),)], INT, out=lambda _: float16),
             Case(lambda x: x.int(), lambda x: x, [((2, 3),)], INT + (bool_,), out=lambda _: int32),
             Case(lambda x: x.long(), lambda x: np.trunc(x), [((2, 3),)], ALL, out=lambda _: int64),
             Case(lambda x: x.bool(), lambda x: x != 0, [((2, 3),)], ALL, out=lambda _: bool_),
             Case(lambda x: VF.cast(x, "int32"), lambda x: np.trunc(x), [((2, 3),)], FLOAT, out=lambda _: int32)],
    # einsum
    "einsum": [Case(lambda a, b, e=e: VF.einsum(e, a, b), lambda a, b, e=e: np.einsum(e, a, b), [(sa, sb)], NUM, tol=5)
               for e, sa, sb in [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)), ("i,i->", (5,), (5,)),
                                 ("ij,kj->ki", (2, 3), (4, 3)), ("i,j->ij", (3,), (4,)), ("ij,ij->ij", (2, 3), (2, 3)),
                                 ("abc,cd->dba", (2, 3, 4), (4, 2)), ("ij,jk->", (2, 3), (3, 2)), ("ij,k->ik", (2, 3), (4,)),
                                 ("ij,jk->ik", (2, 0), (0, 3)), ("bij,jk->bik", (2, 3, 1), (1, 5))]]
              + [Case(lambda a, e=e: VF.einsum(e, a), lambda a, e=e: np.einsum(e, a), [(s,)], NUM, tol=5)
                 for e, s in [("ij->ji", (2, 3)), ("ij->", (2, 3)), ("ijk->kj", (2, 3, 4)), ("ij->ij", (2, 3)), ("i->", (0,))]]
              + [Case(lambda a, e=e: VF.einsum(e, a), lambda a, e=e: np.einsum(e, a), [(s,)], NUM, tol=5)   # diagonals, traces, implicit, ...
                 for e, s in [("ii->i", (3, 3)), ("ii", (3, 3)), ("iji->j", (2, 3, 2)), ("ji", (2, 3)), ("...ij->...ji", (2, 3, 4)),
                              ("i...", (2, 3, 4)), ("bii->bi", (2, 3, 3)), ("a...a", (2, 3, 2))]]
              + [Case(lambda a, b, e=e: VF.einsum(e, a, b), lambda a, b, e=e: np.einsum(e, a, b), [(sa, sb)], NUM, tol=5)
                 for e, sa, sb in [("ij,jk", (2, 3), (3, 4)), ("ij,jh", (2, 3), (3, 4)), ("...ij,...jk->...ik", (2, 2, 3), (2, 3, 4)),
                                   ("...ij,jk", (2, 2, 3), (3, 4)), ("ij,ij->i", (2, 3), (2, 3)), ("ii,i->i", (3, 3), (3,))]]
              + [Case(lambda a, b, c: VF.einsum("ij,jk,kl->il", a, b, c), lambda a, b, c: np.einsum("ij,jk,kl->il", a, b, c), [((2, 3), (3, 4), (4, 2))], NUM, tol=10),
                 Case(lambda a, b, c: VF.einsum("i,i,i", a, b, c), lambda a, b, c: np.einsum("i,i,i", a, b, c), [((4,), (4,), (4,))], NUM, tol=10),
                 Case(lambda a, b, c: VF.einsum("bi,bj,bk->bijk", a, b, c), lambda a, b, c: np.einsum("bi,bj,bk->bijk", a, b, c), [((2, 2), (2, 3), (2, 2))], NUM, tol=10),
                 # PyTorch (unlike NumPy) sums the dims an ellipsis covers when the explicit output leaves it out
                 Case(lambda a: VF.einsum("...ij->ij", a), lambda a: a.sum(0), [((2, 3, 4),)], NUM, tol=5)]
              + [Case(lambda a, b: VF.einsum("ij,jk->ik", [a, b]), lambda a, b: a @ b, [((1, 3), (3, 3))], FLOAT, tol=5),
                 Case(lambda a, b: VF.einsum("ij,jk->ik", a, b), lambda a, b: np.broadcast_to(a, (2, 3)) @ b, [((2, 1), (3, 2))], FLOAT, tol=5)],
}

# --- issue 23's tensor operators (nbs/10a_tensor_more.ipynb) and random sampling (nbs/15_functional.ipynb) ----------

def _chunks(x, n, axis):
    s = -(-x.shape[axis] // n)
    return tuple(np.take(x, range(i, min(i + s, x.shape[axis])), axis=axis) for i in range(0, x.shape[axis], s))

def _diag_embed(x, k=0):
    return np.stack([np.diag(r, k) for r in x.reshape(-1, x.shape[-1])]).reshape(x.shape[:-1] + (x.shape[-1] + abs(k),) * 2)

def _stable(x, axis=-1, descending=False):
    "Positions that sort `x` stably, ties in index order both ways (vkML's and PyTorch's stable sort)."
    _, rank = np.unique(x.reshape(-1), return_inverse=True)
    rank = rank.reshape(x.shape)
    return np.argsort(-rank if descending else rank, axis=axis, kind="stable")

def _i64(_): return int64
MISC = [((2, 5),), ((3, 4),), ((4, 1),)]
CASES.update({
    "chunk": [Case(lambda x: VF.chunk(x, 2, 1), lambda x: _chunks(x, 2, 1), [((2, 5),), ((3, 4),)], NUM),
              Case(lambda x: VF.chunk(x, 3, 0), lambda x: _chunks(x, 3, 0), [((7, 2),)], FLOAT)],
    "unbind": [Case(lambda x: VF.unbind(x, 1), lambda x: tuple(np.moveaxis(x, 1, 0)), [((2, 3),), ((2, 3, 2),)], ALL)],
    "roll": [unary(lambda x: VF.roll(x, (1, -3), (0, 1)), lambda x: np.roll(x, (1, -3), (0, 1)), NUM, shapes=MISC),
             unary(lambda x: VF.roll(x, 4), lambda x: np.roll(x, 4), FLOAT, shapes=MISC)],
    "movedim": [unary(lambda x: VF.movedim(x, (0, 1), (2, 0)), lambda x: np.moveaxis(x, (0, 1), (2, 0)), ALL, shapes=[((2, 3, 4),)])],
    "hstack": [binary(lambda a, b: VF.hstack([a, b]), lambda a, b: np.hstack([a, b]), NUM, shapes=[((2, 3), (2, 1)), ((3,), (2,))])],
    "vstack": [binary(lambda a, b: VF.vstack([a, b]), lambda a, b: np.vstack([a, b]), NUM, shapes=[((3,), (2, 3)), ((1, 2), (4, 2))])],
    "dstack": [binary(lambda a, b: VF.dstack([a, b]), lambda a, b: np.dstack([a, b]), NUM, shapes=[((2, 3), (2, 3)), ((3,), (3,))])],
    "column_stack": [binary(lambda a, b: VF.column_stack([a, b]), lambda a, b: np.column_stack([a, b]), NUM, shapes=[((3,), (3, 2))])],
    "repeat_interleave": [unary(lambda x: VF.repeat_interleave(x, 2, dim=1), lambda x: np.repeat(x, 2, 1), ALL, shapes=MISC),
                          unary(lambda x: VF.repeat_interleave(x, 3), lambda x: np.repeat(x, 3), FLOAT, shapes=MISC),
                          unary(lambda x: VF.repeat_interleave(x, tensor(np.array([2, 0, 1], np.int64)), dim=0),
                                lambda x: np.repeat(x, [2, 0, 1], 0), NUM, shapes=[((3, 2),)])],
    "diagonal": [unary(lambda x: VF.diagonal(x, 1, 0, 2), lambda x: np.diagonal(x, 1, 0, 2), ALL, shapes=[((3, 2, 4),)]),
                 unary(lambda x: VF.diagonal(x, -1), lambda x: np.diagonal(x, -1), NUM, shapes=MISC)],
    "diag": [unary(lambda x, k=k: VF.diag(x, k), lambda x, k=k: np.diag(x, k), NUM, shapes=[((4,),), ((3, 5),)]) for k in (-2, 0, 1)],
    "diag_embed": [unary(lambda x, k=k: VF.diag_embed(x, k), lambda x, k=k: _diag_embed(x, k), NUM, shapes=[((2, 3),), ((4,),)])
                   for k in (0, -1, 2)],
    "nonzero": [unary(lambda x: VF.nonzero(x > 0), lambda x: np.argwhere(x > 0), NUM, out=_i64, shapes=U)],
    "masked_select": [unary(lambda x: VF.masked_select(x, x > 0), lambda x: x[x > 0], NUM, shapes=U),
                      unary(lambda x: VF.masked_select(x, tensor(MASK3)), lambda x: x[..., MASK3].reshape(-1), FLOAT, shapes=[((2, 3),)])],
    "unique": [unary(lambda x: VF.unique(x), np.unique, ALL, shapes=U),
               unary(lambda x: VF.unique(x, return_inverse=True)[1], lambda x: np.unique(x, return_inverse=True)[1].reshape(x.shape),
                     NUM, out=_i64, shapes=U),
               unary(lambda x: VF.unique(x, return_counts=True)[1], lambda x: np.unique(x, return_counts=True)[1], INT + (bool_,),
                     out=_i64, shapes=U)],
    "cumprod": [unary(lambda x: VF.cumprod(x, 1), lambda x: np.cumprod(x, 1), FLOAT, "unit", tol=4, shapes=MISC + [((2, 9, 2),)]),
                unary(lambda x: VF.cumprod(x, 0), lambda x: np.cumprod(x, 0), INT + (bool_,), out=_widen, shapes=[((5, 2),)])],
    "argsort": [unary(lambda x: VF.argsort(x, 1), lambda x: _stable(x, 1), NUM, out=_i64, shapes=MISC),
                unary(lambda x: VF.argsort(x, 0, descending=True), lambda x: _stable(x, 0, True), ALL, out=_i64, shapes=MISC)],
    "sort": [unary(lambda x: VF.sort(x, 1).values, lambda x: np.sort(x, 1), NUM, shapes=MISC),
             unary(lambda x: VF.sort(x, 0, descending=True).indices, lambda x: _stable(x, 0, True), NUM, out=_i64, shapes=MISC),
             unary(lambda x: VF.sort(x).values, np.sort, FLOAT, "special", shapes=[((6,),)])],
    "msort": [unary(VF.msort, lambda x: np.sort(x, 0), NUM, shapes=MISC)],
    "topk": [unary(lambda x: VF.topk(x, 2).values, lambda x: -np.sort(-x, -1)[..., :2], NUM, shapes=[((2, 5),), ((3, 4),)]),
             unary(lambda x: VF.topk(x, 2, 0, largest=False).indices, lambda x: _stable(x, 0)[:2], NUM, out=_i64, shapes=MISC)],
    "kthvalue": [unary(lambda x: VF.kthvalue(x, 2, 1).values, lambda x: np.sort(x, 1)[:, 1], NUM, shapes=[((2, 5),), ((3, 4),)]),
                 unary(lambda x: VF.kthvalue(x, 1, 0, keepdim=True).indices, lambda x: _stable(x, 0)[:1], NUM, out=_i64, shapes=MISC)],
    "mm": [binary(VF.mm, np.matmul, FLOAT, tol=5, shapes=[((2, 3), (3, 4)), ((1, 5), (5, 1))])],
    "bmm": [binary(VF.bmm, np.matmul, FLOAT, tol=5, shapes=[((2, 2, 3), (2, 3, 4))])],
    "mv": [binary(VF.mv, np.matmul, FLOAT, tol=5, shapes=[((2, 3), (3,))])],
    "dot": [binary(VF.dot, np.dot, FLOAT, tol=5, shapes=[((5,), (5,))]), binary(VF.dot, np.dot, INT, shapes=[((4,), (4,))])],
    "outer": [binary(VF.outer, np.outer, NUM, shapes=[((3,), (4,)), ((1,), (2,))])],
    "addmm": [Case(lambda a, b, c: VF.addmm(a, b, c, beta=0.5, alpha=2), lambda a, b, c: 0.5 * a + 2 * (b @ c),
                   [((2, 4), (2, 3), (3, 4)), ((4,), (2, 3), (3, 4))], FLOAT, tol=8)],
    "baddbmm": [Case(lambda a, b, c: VF.baddbmm(a, b, c, beta=0), lambda a, b, c: b @ c, [((2, 2, 4), (2, 2, 3), (2, 3, 4))], FLOAT, tol=5)],
    "randint": [Case(lambda: (VF.manual_seed(7), VF.randint(3, 10, (2, 5)))[1],
                     lambda: (ref_uniform(7, 0, (2, 5)) * np.float32(7)).astype(np.int64) + 3, [()], (None,), out=_i64, tol=0)],
    "randint_like": [Case(lambda x: (VF.manual_seed(2), VF.randint_like(x, 4))[1],
                          lambda x: (ref_uniform(2, 0, x.shape) * np.float32(4)).astype(np.int64), [((2, 3),)], NUM, tol=0)],
    "rand_like": [Case(lambda x: (VF.manual_seed(4), VF.rand_like(x))[1], lambda x: ref_uniform(4, 0, x.shape), [((2, 3),)], (float32,), tol=0)],
    "randn_like": [Case(lambda x: (VF.manual_seed(5), VF.randn_like(x))[1],
                        lambda x: np.sqrt(-2 * np.log(1 - ref_uniform(5, 0, x.shape))) * np.cos(2 * np.pi * ref_uniform(5, 6, x.shape)),
                        [((2, 3),)], (float32,), tol=20)],
    "multinomial": [Case(lambda: VF.multinomial(tensor([[0.0, 0.0, 2.0, 0.0]]), 5, True), lambda: np.full((1, 5), 2), [()], (None,), out=_i64),
                    Case(lambda: VF.multinomial(tensor([0.0, 3.0, 0.0]), 1), lambda: np.array([1]), [()], (None,), out=_i64)],
    "uniform_": [Case(lambda: (VF.manual_seed(6), VF.zeros(2, 3).uniform_(2.0, 5.0))[1], lambda: ref_uniform(6, 0, (2, 3)) * 3.0 + 2.0,
                      [()], (None,), out=lambda _: float32)],
    "normal_": [Case(lambda: (VF.manual_seed(3), VF.zeros(2, 5).normal_(1.0, 2.0))[1],
                     lambda: 1 + 2 * np.sqrt(-2 * np.log(1 - ref_uniform(3, 0, (2, 5)))) * np.cos(2 * np.pi * ref_uniform(3, 10, (2, 5))),
                     [()], (None,), out=lambda _: float32, tol=40)],
})

def table_case(o) -> Case:
    "The default case of a one- or two-tensor row of the operator table: its reference, over its domain, on every float dtype."
    out = _bool_out if o.category == "comparison" else None
    if o.form == "binary": return binary(lambda x, y, f=o.fn: f(x, y), o.reference_fn(), FLOAT, o.domain, o.tol, out=out)
    return unary(lambda x, f=o.fn: f(x), o.reference_fn(), FLOAT, o.domain, o.tol, out=out)

# the later elementwise operators whose rows carry no reference of their own
CASES.update({
    "lerp": [Case(lambda a, b, w: VF.lerp(a, b, w), lambda a, b, w: np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w)),
                  [((2, 3), (3,), (2, 1)), ((4,), (4,), (4,))], FLOAT, tol=4),
             unary(lambda x: VF.lerp(x, x * 0 + 1, 0.25), lambda x: x + 0.25 * (1 - x), tol=4)],
    "threshold": [unary(lambda x: VF.threshold(x, 0.5, -2.0), lambda x: np.where(x > 0.5, x, -2.0))],
    "clamp_min": [unary(lambda x: VF.clamp_min(x, 0.5), lambda x: np.maximum(x, 0.5)), unary(lambda x: x.clamp_min(2), lambda x: np.maximum(x, 2), NUM)],
    "clamp_max": [unary(lambda x: VF.clamp_max(x, 0.5), lambda x: np.minimum(x, 0.5), FLOAT)],
    **{n: [binary(getattr(VF, n), ref, INT + (bool_,))] for n, ref in
       (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor))},
    "bitwise_not": [unary(VF.bitwise_not, np.invert, INT + (bool_,)), unary(lambda x: ~x, np.invert, INT + (bool_,))],
    "fmod": [binary(lambda a, b: a % b, lambda a, b: np.remainder(a, b), INT, "nz", shapes=[((2, 3), (3,)), ((2, 1, 4), (3, 1))])],
})

# the forms family (nbs/10b_tensor_forms.ipynb; PyTorch's own values: tests/test_torch_forms.py)
def _into(x, where, v): out = x.copy(); out[where] = v; return out
def _combos(x, r=2): import itertools; return np.array(list(itertools.combinations(x, r))).reshape(-1, r)
def _shapes(*s): return [tuple(s)]
_TAKE, _ALONG, _PUT = np.array([[0, -1], [5, 7]]), np.array([[3], [0], [1]]), np.array([0, -1, 5])
CASES.update({
    "rsub": [binary(lambda x, y: VF.rsub(x, y, alpha=2), lambda x, y: y - 2 * x, NUM, tol=2)],
    "argwhere": [unary(lambda x: VF.argwhere(x > 0), lambda x: np.argwhere(x > 0), NUM, out=_i64, shapes=U)],
    "t": [unary(VF.t, lambda x: x.T, shapes=[((2, 3),), ((3,),), ((),)])], "clone": [unary(VF.clone, lambda x: x, NUM)],
    "ravel": [unary(VF.ravel, lambda x: x.reshape(-1), NUM)],
    **{f"atleast_{k}d": [unary(getattr(VF, f"atleast_{k}d"), getattr(np, f"atleast_{k}d"), shapes=[((),), ((3,),), ((2, 3),)])] for k in (1, 2, 3)},
    "broadcast_to": [unary(lambda x: VF.broadcast_to(x, (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4)), shapes=[((3, 1),)])],
    "broadcast_tensors": [binary(VF.broadcast_tensors, lambda x, y: tuple(np.broadcast_arrays(x, y)), shapes=[((2, 1), (3,))])],
    "narrow": [unary(lambda x: VF.narrow(x, 1, 1, 2), lambda x: x[:, 1:3], NUM, shapes=_shapes((3, 4)))],
    "select": [unary(lambda x: VF.select(x, 1, -1), lambda x: x[:, -1], NUM, shapes=_shapes((3, 4)))],
    "unflatten": [unary(lambda x: VF.unflatten(x, 1, (3, -1)), lambda x: x.reshape(2, 3, 2), shapes=_shapes((2, 6)))],
    "tensor_split": [unary(lambda x: VF.tensor_split(x, 3), lambda x: tuple(np.array_split(x, 3)), shapes=_shapes((7, 2))),
                     unary(lambda x: VF.tensor_split(x, [1, 4, 9], 1), lambda x: tuple(np.array_split(x, [1, 4, 9], 1)), shapes=_shapes((2, 5)))],
    "hsplit": [unary(lambda x: VF.hsplit(x, 2), lambda x: tuple(np.hsplit(x, 2)), shapes=_shapes((2, 4)))],
    "vsplit": [unary(lambda x: VF.vsplit(x, [1, 3]), lambda x: tuple(np.vsplit(x, [1, 3])), shapes=_shapes((4, 2)))],
    "dsplit": [unary(lambda x: VF.dsplit(x, 2), lambda x: tuple(np.dsplit(x, 2)), shapes=_shapes((1, 2, 4)))],
    "split_with_sizes": [unary(lambda x: VF.split_with_sizes(x, [2, 3]), lambda x: tuple(np.split(x, [2])), shapes=_shapes((5, 2)))],
    "unsafe_split": [unary(lambda x: VF.unsafe_split(x, 2), lambda x: tuple(np.split(x, [2, 4])), shapes=_shapes((5, 2)))],
    "unsafe_chunk": [unary(lambda x: VF.unsafe_chunk(x, 3, 1), lambda x: tuple(np.split(x, [2, 4], 1)), shapes=_shapes((2, 5)))],
    "fliplr": [unary(VF.fliplr, np.fliplr, NUM, shapes=[((2, 3),), ((2, 3, 2, 2),)])], "flipud": [unary(VF.flipud, np.flipud, NUM, shapes=[((3,),), ((2, 3, 2),)])],
    "rot90": [unary(lambda x, k=k: VF.rot90(x, k, (2, 0)), lambda x, k=k: np.rot90(x, k, (2, 0)), shapes=_shapes((2, 3, 4))) for k in (1, 2, 3)],
    "tile": [unary(lambda x: VF.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)), NUM)],
    "diagflat": [unary(lambda x: VF.diagflat(x, -1), lambda x: np.diagflat(x, -1), shapes=[((2, 2),), ((3,),)])],
    "take": [unary(lambda x: VF.take(x, tensor(_TAKE)), lambda x: np.take(x, _TAKE), NUM, shapes=_shapes((3, 4)))],
    "take_along_dim": [unary(lambda x: VF.take_along_dim(x, tensor(_ALONG), 1), lambda x: np.take_along_axis(x, _ALONG, 1), shapes=_shapes((3, 4)))],
    "constant_pad_nd": [unary(lambda x: VF.constant_pad_nd(x, (-1, 2, 1, 0), 0.5), lambda x: ref_pad(x, (-1, 2, 1, 0), 0.5), shapes=_shapes((3, 4)))],
    "meshgrid": [binary(lambda a, b, i=i: VF.meshgrid(a, b, indexing=i), lambda a, b, i=i: tuple(np.meshgrid(a, b, indexing=i)), shapes=[((2,), (3,))]) for i in ("ij", "xy")],
    "cartesian_prod": [binary(VF.cartesian_prod, lambda a, b: np.stack(np.meshgrid(a, b, indexing="ij"), -1).reshape(-1, 2), shapes=[((2,), (3,))])],
    "combinations": [unary(VF.combinations, _combos, NUM, shapes=_shapes((4,)))],
    "block_diag": [binary(VF.block_diag, lambda a, b: np.block([[a, np.zeros((2, 3))], [np.zeros((1, 2)), b[None]]]), shapes=[((2, 2), (3,))])],
    "select_scatter": [binary(lambda x, s: VF.select_scatter(x, s, 1, 1), lambda x, s: _into(x, (slice(None), 1), s), shapes=[((3, 4), (3,))])],
    "slice_scatter": [binary(lambda x, s: VF.slice_scatter(x, s, 1, 1, 5, 2), lambda x, s: _into(x, (slice(None), slice(1, 5, 2)), s), shapes=[((3, 5), (3, 2))])],
    "diagonal_scatter": [binary(lambda x, s: VF.diagonal_scatter(x, s, 1), lambda x, s: _into(x, (np.arange(3), np.arange(1, 4)), s), shapes=[((3, 4), (3,))])],
    "index_copy": [binary(lambda x, s: VF.index_copy(x, 1, tensor([2, 0]), s), lambda x, s: _into(x, (slice(None), [2, 0]), s), shapes=[((3, 4), (3, 2))])],
    "index_fill": [unary(lambda x: VF.index_fill(x, 1, tensor([2, 0]), -1.5), lambda x: _into(x, (slice(None), [2, 0]), -1.5), shapes=_shapes((3, 4)))],
    "masked_scatter": [binary(lambda x, s: VF.masked_scatter(x, tensor(MASK23), s), lambda x, s: _into(x, MASK23, s[:3]), shapes=[((2, 3), (4,))])],
    "put": [binary(lambda x, s: VF.put(x, tensor(_PUT), s), lambda x, s: _into(x.reshape(-1), _PUT, s).reshape(x.shape), shapes=[((3, 4), (3,))])],
    "fill": [unary(lambda x: VF.fill(x, 1.5), lambda x: np.full_like(x, 1.5))],
    "alias_copy": [unary(VF.alias_copy, lambda x: x, ALL)],
    "diagonal_copy": [unary(lambda x: VF.diagonal_copy(x, 1, 0, 2), lambda x: np.diagonal(x, 1, 0, 2), shapes=_shapes((2, 3, 4)))],
    "expand_copy": [unary(lambda x: VF.expand_copy(x, (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4)), shapes=_shapes((3, 1)))],
    "narrow_copy": [unary(lambda x: VF.narrow_copy(x, 0, 1, 2), lambda x: x[1:3], shapes=_shapes((3, 4)))],
    "permute_copy": [unary(lambda x: VF.permute_copy(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)), shapes=_shapes((2, 3, 4)))],
    "squeeze_copy": [unary(lambda x: VF.squeeze_copy(x, 1), lambda x: np.squeeze(x, 1), shapes=_shapes((2, 1, 3)))],
    "split_with_sizes_copy": [unary(lambda x: VF.split_with_sizes_copy(x, [1, 4]), lambda x: tuple(np.split(x, [1])), shapes=_shapes((5, 2)))],
    "t_copy": [unary(VF.t_copy, lambda x: x.T, shapes=_shapes((2, 3)))],
    "transpose_copy": [unary(lambda x: VF.transpose_copy(x, 0, 2), lambda x: np.swapaxes(x, 0, 2), shapes=_shapes((2, 3, 4)))],
    "unbind_copy": [unary(lambda x: VF.unbind_copy(x, 1), lambda x: tuple(np.moveaxis(x, 1, 0)), shapes=_shapes((2, 3)))],
    "unfold_copy": [unary(lambda x: VF.unfold_copy(x, 1, 3, 2), lambda x: np.lib.stride_tricks.sliding_window_view(x, 3, 1)[:, ::2], shapes=_shapes((2, 7)))],
    "unsqueeze_copy": [unary(lambda x: VF.unsqueeze_copy(x, -1), lambda x: np.expand_dims(x, -1), shapes=_shapes((2, 3)))],
    "view_copy": [unary(lambda x: VF.view_copy(x, (2, 6)), lambda x: x.reshape(2, 6), shapes=_shapes((3, 4)))],
})

# the statistics family (nbs/10c_tensor_stats.ipynb): each row against numpy (PyTorch's values: tests/test_torch_stats.py)
F32 = (float32,)
ROWS = [((3, 5),), ((4, 6),), ((1, 3),)]
_BOUNDS = np.array([-0.5, 0.0, 0.3, 1.0])

def _lower_median(x, axis=None):
    x = x.reshape(-1) if axis is None else x
    axis = 0 if axis is None else axis
    return np.take(np.sort(x, axis), (x.shape[axis] - 1) // 2, axis)

def _mode(x):
    def one(r):
        v, c = np.unique(r, return_counts=True)
        return v[c == c.max()].min()
    return np.apply_along_axis(one, -1, x)

def _scatter_ref(x, index, src, how):
    out = x.copy()
    for r in range(index.shape[0]):
        getattr(np, how).at(out[r], index[r], src[r])
    return out

def _runs(x):
    f = x.reshape(-1)
    return f[np.r_[True, f[1:] != f[:-1]]] if f.size else f

def _renorm(x, p, axis, maxnorm):
    other = tuple(d for d in range(x.ndim) if d != axis)
    n = np.sum(np.abs(x) ** p, axis=other, keepdims=True) ** (1 / p)
    return x * np.where(n > maxnorm, maxnorm / (n + 1e-7), 1.0)

def _cumtrapz(y): return np.cumsum((y[..., 1:] + y[..., :-1]) / 2, -1)

_IDX = np.array([[0, 4, 0, 2], [1, 1, 3, 1], [2, 2, 2, 0]])
CASES.update({
    "addcmul": [Case(lambda a, b, c: VF.addcmul(a, b, c, value=2), lambda a, b, c: a + 2 * b * c, [((2, 3), (3,), (2, 1))], NUM)],
    "addcdiv": [Case(lambda a, b, c: VF.addcdiv(a, b, c, value=2.0), lambda a, b, c: a + 2.0 * b / c, [((2, 3), (3,), (2, 1))], FLOAT, "nz", tol=4)],
    "cross": [binary(lambda a, b: VF.cross(a, b, dim=1), lambda a, b: np.cross(a, b, axis=1), NUM, shapes=[((4, 3), (4, 3)), ((2, 3, 2), (1, 3, 2))])],
    "addmv": [Case(lambda a, m, v: VF.addmv(a, m, v, beta=0.5, alpha=2), lambda a, m, v: 0.5 * a + 2 * (m @ v), [((2,), (2, 3), (3,))], F32, tol=8)],
    "addr": [Case(lambda a, u, v: VF.addr(a, u, v, beta=2, alpha=-1), lambda a, u, v: 2 * a - np.outer(u, v), [((3, 4), (3,), (4,))], F32, tol=4)],
    "addbmm": [Case(lambda a, b, c: VF.addbmm(a, b, c), lambda a, b, c: a + (b @ c).sum(0), [((2, 4), (3, 2, 3), (3, 3, 4))], F32, tol=16)],
    "tensordot": [binary(lambda a, b: VF.tensordot(a, b, ([1, 2], [1, 0])), lambda a, b: np.tensordot(a, b, ([1, 2], [1, 0])), F32, tol=16, shapes=[((2, 3, 4), (4, 3))]),
                  binary(lambda a, b: VF.tensordot(a, b, 1), lambda a, b: np.tensordot(a, b, 1), INT, shapes=[((2, 3), (3, 4))])],
    "inner": [binary(VF.inner, np.inner, F32, tol=8, shapes=[((2, 3), (4, 3)), ((3,), (3,)), ((), (2, 2))])],
    "vdot": [binary(VF.vdot, np.vdot, F32, tol=8, shapes=[((5,), (5,))])],
    "kron": [binary(VF.kron, np.kron, NUM, shapes=[((2, 3), (2, 2)), ((2, 1, 2), (1, 3, 2)), ((3,), (2, 2))])],
    "cdist": [binary(lambda a, b: VF.cdist(a, b, 1.5), lambda a, b: np.sum(np.abs(a[..., :, None, :] - b[..., None, :, :]) ** 1.5, -1) ** (1 / 1.5),
                     F32, tol=8, shapes=[((3, 2), (4, 2)), ((2, 3, 4), (5, 4))])],
    "trace": [unary(VF.trace, np.trace, NUM, out=_widen, tol=4, shapes=[((3, 3),), ((3, 5),)])],
    "dist": [binary(lambda a, b: VF.dist(a, b, 3), lambda a, b: np.sum(np.abs(a - b) ** 3) ** (1 / 3), F32, tol=8, shapes=[((2, 3), (3,))])],
    "nansum": [unary(lambda x: VF.nansum(x, 1), lambda x: np.nansum(x, 1), F32, "special", tol=8, shapes=ROWS)],
    "nanmean": [unary(lambda x: VF.nanmean(x, 1), lambda x: np.nanmean(x, 1), F32, tol=8, shapes=ROWS)],
    "count_nonzero": [unary(lambda x: VF.count_nonzero(x, 1), lambda x: np.count_nonzero(x, 1), ALL, "ties", out=_i64, shapes=ROWS)],
    "aminmax": [unary(lambda x: VF.aminmax(x, dim=1).max, lambda x: np.max(x, 1), NUM, shapes=ROWS),
                unary(lambda x: VF.aminmax(x).min, np.min, NUM, shapes=ROWS)],
    "var_mean": [unary(lambda x: VF.var_mean(x, 1), lambda x: (np.var(x, 1, ddof=1), np.mean(x, 1)), F32, tol=8, shapes=ROWS[:2])],
    "std_mean": [unary(lambda x: VF.std_mean(x, 0, correction=0), lambda x: (np.std(x, 0), np.mean(x, 0)), F32, tol=8, shapes=ROWS)],
    "max": [unary(lambda x: VF.max(x, 1).values, lambda x: np.max(x, 1), NUM, shapes=ROWS), unary(VF.max, np.max, NUM, shapes=ROWS),
            binary(VF.max, np.maximum, NUM, shapes=[((2, 3), (3,))])],
    "min": [unary(lambda x: VF.min(x, 0).values, lambda x: np.min(x, 0), NUM, shapes=ROWS), unary(VF.min, np.min, NUM, shapes=ROWS),
            binary(VF.min, np.minimum, NUM, shapes=[((2, 3), (3,))])],
    "median": [unary(lambda x: VF.median(x, 1).values, lambda x: _lower_median(x, 1), NUM, shapes=ROWS), unary(VF.median, _lower_median, F32, shapes=ROWS)],
    "nanmedian": [unary(lambda x: VF.nanmedian(x, 1).values, lambda x: _lower_median(x, 1), F32, shapes=ROWS)],
    "quantile": [unary(lambda x: VF.quantile(x, 0.3, dim=1), lambda x: np.quantile(x, 0.3, axis=1), F32, tol=4, shapes=ROWS),
                 unary(lambda x: VF.quantile(x, [0.1, 0.9], dim=0, interpolation="midpoint"),
                       lambda x: np.quantile(x, [0.1, 0.9], axis=0, method="midpoint"), F32, tol=4, shapes=ROWS)],
    "nanquantile": [unary(lambda x: VF.nanquantile(x, 0.6), lambda x: np.nanquantile(x, 0.6), F32, tol=4, shapes=ROWS)],
    "mode": [unary(lambda x: VF.mode(x, 1).values, lambda x: _mode(x), NUM, "ties", shapes=ROWS)],
    "cummax": [unary(lambda x: VF.cummax(x, 1).values, lambda x: np.maximum.accumulate(x, 1), NUM, shapes=ROWS)],
    "cummin": [unary(lambda x: VF.cummin(x, 0).values, lambda x: np.minimum.accumulate(x, 0), NUM, shapes=ROWS)],
    "logcumsumexp": [unary(lambda x: VF.logcumsumexp(x, 1), lambda x: np.logaddexp.accumulate(x, 1), F32, tol=8, shapes=ROWS)],
    "diff": [unary(lambda x: VF.diff(x, 2, 1), lambda x: np.diff(x, 2, 1), NUM, shapes=ROWS)],
    "gradient": [unary(lambda x: VF.gradient(x, dim=1, spacing=0.5)[0], lambda x: np.gradient(x, 0.5, axis=1), F32, tol=4, shapes=ROWS[:2])],
    "trapezoid": [unary(lambda x: VF.trapezoid(x, dx=0.5), lambda x: np.trapezoid(x, dx=0.5), F32, tol=8, shapes=ROWS)],
    "trapz": [unary(lambda x: VF.trapz(x, dim=0), lambda x: np.trapezoid(x, axis=0), F32, tol=8, shapes=ROWS)],
    "cumulative_trapezoid": [unary(VF.cumulative_trapezoid, _cumtrapz, F32, tol=8, shapes=ROWS)],
    "cov": [unary(VF.cov, np.cov, F32, tol=16, shapes=ROWS[:2])],
    "corrcoef": [unary(VF.corrcoef, np.corrcoef, F32, tol=16, shapes=ROWS[:2])],
    "renorm": [unary(lambda x: VF.renorm(x, 2, 0, 1.0), lambda x: _renorm(x, 2, 0, 1.0), F32, tol=8, shapes=ROWS)],
    "histc": [unary(lambda x: VF.histc(x, 4, -1, 1), lambda x: np.histogram(x, 4, (-1, 1))[0], F32, shapes=[((20,),)])],
    "histogram": [unary(lambda x: VF.histogram(x, 3, range=(-1.0, 1.0)).hist, lambda x: np.histogram(x, 3, (-1, 1))[0], F32, shapes=[((20,),)])],
    "histogramdd": [unary(lambda x: VF.histogramdd(x, [2, 3], range=[-1.0, 1.0, -1.0, 1.0]).hist,
                          lambda x: np.histogramdd(x, [2, 3], range=[(-1, 1), (-1, 1)])[0], F32, shapes=[((12, 2),)])],
    "bincount": [unary(lambda x: VF.bincount(x.abs().long().reshape(-1), minlength=3), lambda x: np.bincount(np.abs(x).astype(np.int64).reshape(-1), minlength=3),
                       INT, out=_i64, shapes=[((7,),), ((2, 3),)])],
    "bucketize": [unary(lambda x: VF.bucketize(x, tensor(_BOUNDS.astype(np.float32))), lambda x: np.searchsorted(_BOUNDS, x), F32, out=_i64, shapes=ROWS)],
    "searchsorted": [unary(lambda x: VF.searchsorted(tensor(_BOUNDS.astype(np.float32)), x, right=True),
                           lambda x: np.searchsorted(_BOUNDS, x, side="right"), F32, out=_i64, shapes=ROWS)],
    "sum_to_size": [unary(lambda x: x.sum_to_size(1, x.shape[1]), lambda x: x.sum(0, keepdims=True), F32, tol=4, shapes=ROWS)],
    "scatter_reduce": [unary(lambda x: VF.scatter_reduce(x, 1, tensor(_IDX[:x.shape[0]]), x[:, :4], "amax"),
                             lambda x: _scatter_ref(x, _IDX[:x.shape[0]], x[:, :4], "maximum"), NUM, shapes=[((3, 5),), ((2, 6),)]),
                       unary(lambda x: VF.scatter_reduce(x, 1, tensor(_IDX[:x.shape[0]]), x[:, :4], "sum"),
                             lambda x: _scatter_ref(x, _IDX[:x.shape[0]], x[:, :4], "add"), F32, shapes=[((3, 5),)])],
    "index_reduce": [unary(lambda x: VF.index_reduce(x, 0, tensor(np.array([2, 0, 2])), x, "amin"),
                           lambda x: _scatter_ref(x.T, np.tile([2, 0, 2], (x.shape[1], 1)), x.T, "minimum").T, NUM, shapes=[((3, 4),)])],
    "unique_consecutive": [unary(VF.unique_consecutive, _runs, ALL, "ties", shapes=U)],
    "unravel_index": [unary(lambda x: VF.unravel_index(x.abs() % 12, (3, 4)), lambda x: np.unravel_index(np.abs(x) % 12, (3, 4)), INT, out=_i64, shapes=ROWS[:2])],
})

for _name in [*REG.names(form="unary"), *REG.names(form="binary")]:   # a new operator's first case is its row
    CASES[_name] = [table_case(REG.OPERATORS[_name]), *CASES.get(_name, [])]

TESTED_OPERATORS = frozenset(CASES)
"The public operators this file checks against a reference."

PARAMS = [(name, i) for name, cases in CASES.items() for i in range(len(cases))]

def _run(case: Case, rng):
    for shapes in case.shapes:
        for dt in case.dtypes:
            arrays = [gen(s, dt, case.domain, rng) for s in shapes]
            want = (case.out or _same)(dt)
            ref = case.ref(*(ref_in(a) for a in arrays))
            variants = [("contiguous", [lambda a=a: tensor(a) for a in arrays])]
            if case.views and arrays:
                per = [dict(layouts(a)) for a in arrays]
                for name in ("permuted", "strided", "reversed"):
                    if all(name in p for p in per) and all(a.ndim for a in arrays):
                        variants.append((name, [p[name] for p in per]))
            for name, builders in variants:
                out = case.f(*(b() for b in builders))
                what = f"dtype {dt}, shapes {shapes}, layout {name}"
                if isinstance(ref, tuple):
                    assert isinstance(out, tuple) and len(out) == len(ref), what
                    for o, r in zip(out, ref): check(o, r, want, case.tol, what)
                elif case.tol == 0:  # bit-exact
                    assert out.dtype is want, what
                    np.testing.assert_array_equal(out.numpy(), np.asarray(ref).astype(want.np), err_msg=what)
                else: check(out, ref, want, case.tol, what)

@pytest.mark.parametrize("name,i", PARAMS, ids=[f"{n}-{i}" for n, i in PARAMS])
def test_reference(name, i):
    with np.errstate(all="ignore"):
        _run(CASES[name][i], np.random.default_rng([zlib.crc32(name.encode()), i]))

def test_every_category_is_covered():
    "Every operator of the table whose function lives in vkml.frontend.functions or on Tensor has cases here, and nothing else does."
    mine = {n for n, o in REG.OPERATORS.items() if o.fn.module in ("vkml.frontend.functions", "vkml.frontend.tensor")}
    assert mine == set(TESTED_OPERATORS)

# --- properties (hypothesis) -----------------------------------------------------------------------

@HYP
@given(st.data())
def test_getitem_matches_numpy(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
    idx = data.draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    a = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    ref = a[idx]
    if ref.ndim > 4:
        with pytest.raises(RankError): tensor(a)[idx]
        return
    out = tensor(a)[idx].numpy()
    np.testing.assert_array_equal(out, ref); assert out.shape == ref.shape

@HYP
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=3),
       st.sampled_from(["add", "sub", "mul", "maximum", "lt"]), st.sampled_from([float32, int32]))
def test_broadcasting_matches_numpy(shapes, op, dt):
    rng = np.random.default_rng(0)
    a, b = (gen(s, dt, "ties", rng) for s in shapes.input_shapes)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "lt": np.less}[op](a, b)
    out = getattr(VF, op)(tensor(a), tensor(b)).numpy()
    assert out.shape == ref.shape; np.testing.assert_array_equal(out, ref)

@HYP
@given(st.data())
def test_reductions_over_random_dims(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    kd = data.draw(st.booleans())
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    x, ax = tensor(a), tuple(dims)
    np.testing.assert_allclose(VF.sum(x, dims, kd).numpy(), a.astype(np.float64).sum(ax, keepdims=kd), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(VF.mean(x, dims, kd).numpy(), a.astype(np.float64).mean(ax, keepdims=kd), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(VF.amax(x, dims, kd).numpy(), a.max(ax, keepdims=kd))
    np.testing.assert_allclose(VF.logsumexp(x, dims, kd).numpy(), special.logsumexp(a.astype(np.float64), ax, keepdims=kd), rtol=1e-5, atol=1e-5)

@HYP
@given(st.data())
def test_reshape_permute_roundtrip(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
    perm = data.draw(st.permutations(range(len(shape))))
    a = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    y = tensor(a).permute(perm)
    np.testing.assert_array_equal(y.reshape(-1).numpy() if math.prod(shape) else y.flatten().numpy(), a.transpose(perm).reshape(-1))
    np.testing.assert_array_equal(y.contiguous().numpy(), a.transpose(perm))

@HYP
@given(st.data())
def test_einsum_random_two_operand(data):
    letters = "abcd"
    sa = "".join(data.draw(st.permutations(letters)))[:data.draw(st.integers(1, 3))]
    sb = "".join(data.draw(st.permutations(letters)))[:data.draw(st.integers(1, 3))]
    pool = sorted(set(sa) | set(sb))
    out = "".join(data.draw(st.permutations(pool)))[:data.draw(st.integers(0, min(4, len(pool))))]
    size = {c: data.draw(st.integers(1, 3)) for c in letters}
    rng = np.random.default_rng(0)
    a = rng.standard_normal([size[c] for c in sa]).astype(np.float32)
    b = rng.standard_normal([size[c] for c in sb]).astype(np.float32)
    eq = f"{sa},{sb}->{out}"
    got = VF.einsum(eq, tensor(a), tensor(b)).numpy()
    np.testing.assert_allclose(got, np.einsum(eq, a.astype(np.float64), b.astype(np.float64)), rtol=1e-4, atol=1e-4)

# --- semantics worth their own test ------------------------------------------------------------------

def test_rand_seed_and_offsets():
    "manual_seed resets the offset; each RAND node advances it by its element count; randn takes two draws."
    VF.manual_seed(11)
    a, b = VF.rand(3, 2), VF.rand(5)
    c = VF.randn(4)
    d = VF.rand(1)
    assert [t.node.arg for t in (a, b, d)] == [(11, 0), (11, 6), (11, 19)]
    np.testing.assert_array_equal(b.numpy(), ref_uniform(11, 6, (5,)).astype(np.float32))
    VF.manual_seed(11)
    np.testing.assert_array_equal(VF.rand(3, 2).numpy(), a.numpy())
    g = VF.Generator(11)
    np.testing.assert_array_equal(VF.rand(3, 2, generator=g).numpy(), a.numpy())
    u = VF.rand(100_000).numpy()
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01

def test_reused_node_and_long_chain():
    "b = a + a; c = b + b evaluates each node once; a 10,000-long chain evaluates (iterative traversal)."
    a = tensor([1.0, -2.0]); b = a + a; c = b + b
    np.testing.assert_array_equal(c.numpy(), [4.0, -8.0])
    t = tensor(np.float32(0.5))
    for _ in range(10_000): t = t * 1.0 + 1
    assert t.item() == 10_000.5

def test_max_min_methods():
    x = tensor(np.array([[1., 5., 5.], [7., 0., -1.]], np.float32))
    assert x.max().item() == 7 and x.min().item() == -1
    v, i = x.max(1)
    np.testing.assert_array_equal(v.numpy(), [5, 7]); np.testing.assert_array_equal(i.numpy(), [1, 0])
    v, i = x.min(dim=0, keepdim=True)
    np.testing.assert_array_equal(v.numpy(), [[1, 0, -1]]); np.testing.assert_array_equal(i.numpy(), [[0, 1, 1]])
    np.testing.assert_array_equal(x.max(tensor(np.float32(4))).numpy(), np.maximum(x.numpy(), 4))

def test_numpy_operands_defer_to_tensor():
    x = tensor(np.array([1., 2.], np.float32))
    out = np.array([1., 1.], np.float32) + x
    assert isinstance(out, Tensor) and out.numpy().tolist() == [2., 3.]

def test_comparisons_and_hash():
    x = tensor([1.0, 2.0])
    assert len({x, x}) == 1 and (x == x).numpy().all() and (x == None) is False
