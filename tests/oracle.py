"""The one test oracle: how a result is compared with the CPU's (or with a float64 reference), the
parity bound, random inputs by domain, and the counter-based random numbers stated independently of
vkML's code. Every test that compares numbers imports from here.

The parity bound, per element, `|got - want| <= atol + rtol * |want|`:
- float32: rtol 1e-5, atol 1e-6; float64: rtol 1e-13, atol 1e-15; float16: rtol 1e-3, atol 1e-4 (one f16 ulp is <= 2^-10 relative: the
  oracle rounds float64 results to f16, the GPU rounds float32 ones, so they may differ by one ulp);
- a reduction or contraction over `k` terms: `atol + rtol * sqrt(k) * sum|terms|` (`terms`: the same
  operation applied to |inputs|);
- ints and bools exactly; NaN where the reference has NaN; infinities equal, sign included.
"""
import math
import numpy as np

PARITY = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-4), "float64": (1e-13, 1e-15)}   # (rtol, atol): Vulkan vs the CPU oracle (f64: ADR 0023)
REFERENCE = {"float32": (1e-5, 1e-6), "float16": (2e-3, 2e-3)}  # (rtol, atol): vkML vs a float64 reference (f16 rounds twice)

DEVICES = ("cpu", "vulkan")


def _name(dtype) -> str:
    "The dtype's name, for a vkml DType, a numpy dtype or a numpy scalar type."
    return getattr(dtype, "name", None) if not isinstance(dtype, (type, np.dtype)) else np.dtype(dtype).name


def parity_bound(dtype, k: int = 1) -> tuple:
    "(rtol, atol) of the parity bound for `dtype`; rtol scaled by sqrt(k) for a sum of `k` terms."
    rtol, atol = PARITY[_name(dtype)]
    return rtol * math.sqrt(max(k, 1)), atol


def close_mask(got, want, rtol=None, atol=None, bound=None) -> np.ndarray:
    "Per element: within the bound (float), equal (otherwise), NaN where `want` is NaN, or the same infinity."
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind not in "fc": return got == want
    r, a = PARITY.get(want.dtype.name, PARITY["float32"])
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        lim = ((atol if atol is not None else a) + (rtol if rtol is not None else r) * np.abs(w)) if bound is None else bound
        ok = np.isfinite(w) & (np.abs(g - w) <= lim)     # (an infinite `want` makes the bound infinite)
    return ok | (np.isnan(g) & np.isnan(w)) | (np.isinf(w) & (g == w))


def assert_close(got, want, dtype=None, rtol=None, atol=None, k=1, terms=None, bound=None, what="", same_dtype=True,
                 same_shape=True):
    """Assert `got` matches `want` within the parity bound of `dtype` (default: `want`'s): shapes equal, dtypes
    equal (unless `same_dtype=False`: a float64 reference), ints and bools exact, NaN and infinities matched
    exactly. `rtol`/`atol` replace the dtype's; `k` and `terms` (sum|terms|) give a reduction's bound; `bound`
    gives the per-element limit outright. `same_shape=False` lets numpy broadcast the two."""
    got, want = np.asarray(got), np.asarray(want)
    if same_shape: assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    else: got, want = np.broadcast_arrays(got, want)
    if same_dtype: assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind not in "fc" and got.dtype.kind not in "fc":
        bad = got != want.astype(got.dtype)
        assert not bad.any(), f"{what}: {bad.sum()} of {bad.size} differ, e.g. at {np.argwhere(bad)[0]}: got {got[bad][0]} want {want[bad][0]}"
        return
    name = _name(dtype) if dtype is not None else (got.dtype.name if got.dtype.kind == "f" else want.dtype.name)
    r, a = PARITY.get(name, PARITY["float32"])
    rtol, atol = (r if rtol is None else rtol), (a if atol is None else atol)
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        nan = np.isnan(w) != np.isnan(g)
        assert not nan.any(), f"{what}: NaN mismatch at {np.argwhere(nan)[:3].tolist()}: got {g[nan][:3]} want {w[nan][:3]}"
        inf = (np.isinf(w) | np.isinf(g)) & ~np.isnan(w)
        assert (g[inf] == w[inf]).all(), f"{what}: infinity mismatch: got {g[inf][g[inf] != w[inf]][:3]} want {w[inf][g[inf] != w[inf]][:3]}"
        if bound is None:
            scale = np.abs(w) if terms is None else np.asarray(terms, np.float64)
            bound = atol + rtol * math.sqrt(max(k, 1)) * scale
        err = np.abs(g - w)
        bad = np.isfinite(w) & np.isfinite(g) & ~(err <= bound)
    assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} outside the bound; worst at {np.argwhere(bad)[0]}: "
                           f"got {g[bad][np.argmax(err[bad])]!r} want {w[bad][np.argmax(err[bad])]!r}")


def on_devices(build, *arrays, devices=DEVICES) -> tuple:
    "`build(*tensors)` with the inputs uploaded to each device: the results as numpy, one per device."
    from vkml.frontend.tensor import tensor
    return tuple(build(*[tensor(a, device=d) for a in arrays]).numpy() for d in devices)


def assert_parity(build, *arrays, k=1, what="", **kw) -> tuple:
    "`build` on the CPU and on Vulkan agree within the parity bound: returns (cpu, vulkan)."
    cpu, vk = on_devices(build, *arrays)
    assert_close(vk, cpu, k=k, what=what, **kw)
    return cpu, vk


# --- random inputs by domain ---------------------------------------------------------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 3.0])
DOMAINS = ("any", "pos", "nz", "unit", "ties", "special", "ge1", "prob")


def sample(shape, dtype, domain="any", rng=None, lo=None, hi=None) -> np.ndarray:
    """Random values of `dtype` (a vkml DType or numpy dtype) from `domain`: 'any' (normal, scale 2), 'pos'
    (0.1..3), 'nz' (|x| in 0.3..3), 'unit' (-0.9..0.9), 'ties' (a few repeated values), 'special' (NaN, ±inf,
    ±0 and a few ordinary values), 'ge1' (1..4), 'prob' (0.02..0.98), or uniform in [lo, hi) when both are given."""
    rng = rng if rng is not None else np.random.default_rng(0)
    np_dt = np.dtype(getattr(dtype, "np", dtype))
    if np_dt == np.bool_: return rng.random(shape) < 0.5
    if np_dt.kind in "iu":
        if lo is not None: return rng.integers(int(lo), int(hi), size=shape).astype(np_dt)
        a, b = {"pos": (1, 6), "nz": (1, 6), "ties": (-2, 3)}.get(domain, (-6, 7))
        x = rng.integers(a, b, size=shape)
        if domain == "nz": x = x * rng.choice([-1, 1], size=shape)
        return x.astype(np_dt)
    if lo is not None: return np.asarray(rng.uniform(lo, hi, shape)).astype(np_dt)
    x = {"any": lambda: rng.standard_normal(shape) * 2,
         "pos": lambda: rng.uniform(0.1, 3.0, shape),
         "nz": lambda: rng.uniform(0.3, 3.0, shape) * rng.choice([-1, 1], size=shape),
         "unit": lambda: rng.uniform(-0.9, 0.9, shape),
         "ge1": lambda: rng.uniform(1.0, 4.0, shape), "prob": lambda: rng.uniform(0.02, 0.98, shape),
         "ties": lambda: rng.choice([-1.0, 0.0, 0.5, 2.0], size=shape),
         "special": lambda: rng.choice(SPECIAL, size=shape)}[domain]()
    return np.asarray(x).astype(np_dt)


# --- the counter-based random numbers (RAND), stated apart from vkml.core.elementwise ---------------------

M32 = 0xFFFFFFFF


def lowbias32(x):
    "Chris Wellons' lowbias32 integer hash on uint64 arrays or ints holding 32-bit values."
    x = np.asarray(x, dtype=np.uint64) & M32
    x ^= x >> 16; x = (x * 0x21F0AAAD) & M32
    x ^= x >> 15; x = (x * 0x735A2D97) & M32
    x ^= x >> 15
    return x


def rand_bits(seed: int, offset: int, n: int) -> np.ndarray:
    "The 32 random bits of elements offset..offset+n-1 of a 64-bit `seed` (counters wrap mod 2^32; the offset's high word is xored into k1 by its hash)."
    c = (np.arange(n, dtype=np.uint64) + offset % 2**32) & M32
    seed %= 2**64
    k0, k1 = lowbias32(seed & M32), lowbias32((((seed >> 32) & M32) + 0x9E3779B9) & M32) ^ lowbias32((offset >> 32) & M32)
    return lowbias32(lowbias32(c ^ k0) ^ k1)


def uniform(seed: int, offset: int, n: int, dtype="float32") -> np.ndarray:
    "RAND's uniforms in [0, 1) as float64: the top 24 bits (float32) or 11 bits (float16)."
    b = rand_bits(seed, offset, n)
    if _name(dtype) == "float16": return (b >> 21).astype(np.float64) * 2.0 ** -11
    return (b >> 8).astype(np.float64) * 2.0 ** -24
