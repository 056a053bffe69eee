"""The operators and modules of issue 23's second part (nbs/10a_tensor_more.ipynb, nbs/15_functional.ipynb's random
sampling, nbs/17_nn_functional.ipynb's resampling, vectors and losses, nbs/30h_nn_more.ipynb): PyTorch's own results,
recorded in tests/fixtures/torch_misc.npz by tests/fixtures/make_torch_misc.py (the fixture tests FAIL while it is
missing), forward on the CPU and on Vulkan (or, for the CPU-only operators, the typed error naming the transfer) and
gradients (float64 on the CPU, float32 on Vulkan); gradcheck in float64; Vulkan against the CPU; the random samplers'
distributions, seeds and devices; the typed errors."""
import numpy as np
import pytest

import vkml
import vkml.nn as nn
import vkml.nn.functional as F
import vkml.frontend.functions as VF
import vkml.frontend.registry as R
from vkml.frontend.gradcheck import gradcheck
import oracle
from torch_fixture import TorchFixture

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


FX = TorchFixture("misc")
MAKE = FX.make
npz, arrays, outputs = FX.npz, FX.arrays, FX.outputs
CASES = MAKE.CASES


def operator(c) -> str:
    "The operator table's name of a function case (None for a module)."
    return None if c["kind"] == "module" else c["name"]


TESTED_OPERATORS = {operator(c) for c in CASES.values() if c["kind"] == "F"}
"The nn.functional operators this file checks against PyTorch (the table's other new rows are in tests/test_reference.py)."


def build(name, device, dtype, requires_grad=False):
    "(module or None, the call's inputs as vkML tensors): float inputs in `dtype`."
    ts = []
    for a in arrays(name):
        t = vkml.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
        ts.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" else t)
    mod = None
    c = CASES[name]
    if c["kind"] == "module":
        mod = getattr(nn, c["name"])(*c["init"], **c["init_kw"], **({"device": device} if "Norm" in c["name"] or c["name"] == "PReLU" else {}))
        mod.train(c["train"])
    return mod, ts


def call(name, mod, ts):
    c = CASES[name]
    n = len(c["inputs"])
    pos, kw = ts[:n], dict(zip(MAKE.kwarg_inputs(c), ts[n:]))
    if c["seq"]: pos = [pos]
    kwargs = {**c["kwargs"], **kw}
    if mod is not None: out = mod(*pos)
    elif c["kind"] == "torch": out = getattr(vkml, c["name"])(*pos, *c["args"], **kwargs)
    else: out = getattr(F, c["name"])(*pos, *c["args"], **kwargs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def cpu_only(name) -> bool:
    "Whether the case's operator is off Vulkan in the operator table (its trace uses a CPU-only graph op)."
    op = operator(CASES[name])
    return op is not None and not R.runs_on(op, "vulkan")


def loss_of(name, outs):
    ws = outputs(name, "w")
    terms = [(o * vkml.tensor(w.astype(o.dtype.np), device=o.device)).sum() for o, w in zip(outs, ws) if w is not None]
    total = terms[0]
    for t in terms[1:]: total = total + t
    return total


def test_fixture_has_every_case():
    d = npz()
    assert str(d["meta/torch_version"]).startswith("2.")
    for name, c in CASES.items():
        assert f"{name}/in0" in d and f"{name}/out0" in d, name
        if c["grad"] and any(a.dtype.kind == "f" for a in arrays(name)):
            assert any(k.startswith(f"{name}/grad") or k.startswith(f"{name}/pgrad") for k in d), name


def test_every_new_function_has_a_torch_case():
    "Each row of the table's new functional and module rows is exercised against PyTorch here."
    new_f = {n for n in R.names("nn functional") + R.names("losses") if n in TESTED_OPERATORS}
    assert new_f == TESTED_OPERATORS
    assert {"PReLU", "GLU", "Upsample", "PixelShuffle", "PixelUnshuffle", "CosineSimilarity", "PairwiseDistance", "HuberLoss",
            "InstanceNorm1d", "InstanceNorm2d", "Unflatten"} <= {c["name"] for c in CASES.values() if c["kind"] == "module"}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, device):
    mod, ts = build(name, device, np.float32)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError, match=r"\.cpu\(\)"): call(name, mod, ts)
        return
    outs = call(name, mod, ts)
    want = outputs(name)
    assert len(outs) == len(want), name
    if CASES[name]["any_tie_order"]:      # (values, indices): vkML's indices point at the values, ties in index order
        x, (v, i) = arrays(name)[0], (o.numpy() for o in outs)
        np.testing.assert_array_equal(np.take_along_axis(x.astype(np.float32), i, -1), v)
        for row_v, row_i in zip(v, i):
            for val in set(row_v.tolist()): assert list(row_i[row_v == val]) == sorted(row_i[row_v == val]), (name, row_i)
        want = want[:1]
    for j, (o, w) in enumerate(zip(outs, want)):
        got = o.numpy()
        assert got.shape == w.shape, (name, j, got.shape, w.shape)
        if w.dtype.kind == "f": oracle.assert_close(got, w, rtol=1e-4, atol=1e-5, what=f"{name} out{j}", same_dtype=False)
        else: oracle.assert_close(got, w.astype(got.dtype), what=f"{name} out{j}")
    d = npz()
    for k in [k for k in d if k.startswith(f"{name}/buffer/")]:
        buf = getattr(mod, k.rsplit("/", 1)[1])
        oracle.assert_close(buf.numpy(), d[k], rtol=1e-4, atol=1e-5, what=k, same_dtype=False)


GRAD_CASES = sorted(n for n, c in CASES.items() if c["grad"] and not c["any_tie_order"])   # (torch's tie order: its own)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_torch(name, device):
    "float64 on the CPU (modules: their float32 parameters), float32 on Vulkan."
    module = CASES[name]["kind"] == "module"
    dtype = np.float64 if device == "cpu" and not module else np.float32
    mod, ts = build(name, device, dtype, requires_grad=True)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError): call(name, mod, ts)
        return
    loss_of(name, call(name, mod, ts)).backward()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    d = npz()
    for i, t in enumerate(ts):
        if f"{name}/grad{i}" in d:
            oracle.assert_close(t.grad.numpy(), d[f"{name}/grad{i}"], what=f"{name} grad{i}", same_dtype=False, **tol)
    if mod is not None:
        for pname, p in mod.named_parameters():
            oracle.assert_close(p.grad.numpy(), d[f"{name}/pgrad/{pname}"], what=f"{name} {pname}", same_dtype=False, **tol)


GRADCHECK = [n for n in GRAD_CASES if CASES[n]["kind"] != "module" and "ties" not in n]   # at a tie, no derivative


@pytest.mark.parametrize("name", GRADCHECK)
def test_gradcheck(name):
    "Central differences in float64 against the rules of the composition."
    c = CASES[name]
    ins = arrays(name)
    def fn(*ts): return tuple(o for o in call(name, None, list(ts)) if o.dtype.is_float)
    assert gradcheck(fn, ins)


@pytest.mark.vulkan
@pytest.mark.parametrize("name", sorted(n for n in CASES if not cpu_only(n)))
def test_vulkan_matches_cpu(name):
    "The same float32 call on both devices, within the parity bound."
    res = {}
    for dev in ("cpu", "vulkan"):
        mod, ts = build(name, dev, np.float32)
        res[dev] = [o.numpy() for o in call(name, mod, ts)]
    for j, (c, v) in enumerate(zip(res["cpu"], res["vulkan"])):
        oracle.assert_close(v, c, k=16, what=f"{name} out{j}")


def test_interpolate_against_the_formula():
    "The source positions written out apart from vkML's code: nearest at ⌊dst·in/out⌋, bilinear's neighbours and weights."
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 1, 5, 3)).astype(np.float32)
    y = F.interpolate(vkml.tensor(x), size=(3, 7)).numpy()
    rows = [min(int(np.floor(np.float32(i) * np.float32(5 / 3))), 4) for i in range(3)]
    cols = [min(int(np.floor(np.float32(j) * np.float32(3 / 7))), 2) for j in range(7)]
    oracle.assert_close(y[0, 0], x[0, 0][np.ix_(rows, cols)], what="nearest")
    z = F.interpolate(vkml.tensor(x), size=(5, 5), mode="bilinear", align_corners=True).numpy()
    src = np.arange(5) * (2 / 4)
    i0 = np.floor(src).astype(int); i1 = np.minimum(i0 + 1, 2); lam = src - i0
    oracle.assert_close(z[0, 0], x[0, 0][:, i0] * (1 - lam) + x[0, 0][:, i1] * lam, rtol=1e-6, atol=1e-6, what="bilinear",
                        same_dtype=False)


# --- random sampling ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_multinomial_distribution_and_devices(device):
    w = np.array([[1.0, 0.0, 3.0, 6.0], [5.0, 5.0, 0.0, 0.0]], np.float32)
    s = VF.multinomial(vkml.tensor(w, device=device), 20_000, replacement=True, generator=VF.Generator(3)).numpy()
    assert s.shape == (2, 20_000) and s.dtype == np.int64
    for r in range(2):
        freq = np.bincount(s[r], minlength=4) / s.shape[1]
        np.testing.assert_allclose(freq, w[r] / w[r].sum(), atol=0.015)   # ~4.5 standard deviations of a frequency
    first = [VF.multinomial(vkml.tensor(w, device=device), 2, generator=VF.Generator(s_)).numpy() for s_ in range(4000)]
    firsts = np.bincount([f[0, 0] for f in first], minlength=4) / len(first)
    np.testing.assert_allclose(firsts, w[0] / w[0].sum(), atol=0.035)
    for f in first[:50]: assert f[0, 0] != f[0, 1] and set(f[1]) == {0, 1}     # without replacement: no repeats


@pytest.mark.vulkan
@pytest.mark.parametrize("replacement", [True, False])
def test_multinomial_same_seed_same_samples_on_vulkan(replacement):
    w = np.random.default_rng(0).uniform(0.0, 1.0, (3, 7)).astype(np.float32)
    got = [VF.multinomial(vkml.tensor(w, device=d), 5, replacement, generator=VF.Generator(11)).numpy() for d in ("cpu", "vulkan")]
    oracle.assert_close(got[1], got[0], what="multinomial")


def test_multinomial_second_order_statistics_without_replacement():
    "The probability that category i comes second is Σ_j p_j p_i / (1 − p_j), PyTorch's (sequential) law."
    p = np.array([0.5, 0.3, 0.2])
    n = 6000
    second = np.bincount([VF.multinomial(vkml.tensor(p.astype(np.float32)), 2, generator=VF.Generator(s)).numpy()[1]
                          for s in range(n)], minlength=3) / n
    want = [sum(p[j] * p[i] / (1 - p[j]) for j in range(3) if j != i) for i in range(3)]
    np.testing.assert_allclose(second, want, atol=0.03)


def test_multinomial_errors():
    with pytest.raises(vkml.ArgumentError, match="replacement=True"): VF.multinomial(vkml.tensor([1.0, 2.0]), 3)
    with pytest.raises(vkml.ArgumentError, match=">= 0"): VF.multinomial(vkml.tensor([1.0, -2.0]), 1)
    with pytest.raises(vkml.DTypeError): VF.multinomial(vkml.tensor([1, 2]), 1)
    with pytest.raises(vkml.ShapeError): VF.multinomial(vkml.tensor(np.ones((2, 2, 2), np.float32)), 1)
    with pytest.raises(vkml.ArgumentError, match="num_samples"): VF.multinomial(vkml.tensor([1.0]), 0)


@pytest.mark.parametrize("device", DEVICES)
def test_randint_and_likes(device):
    r = VF.randint(-3, 4, (50_000,), generator=VF.Generator(5), device=device).numpy()
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 3
    np.testing.assert_allclose(np.bincount(r + 3) / r.size, np.full(7, 1 / 7), atol=0.01)
    big = VF.randint(0, 2**40, (1000,), generator=VF.Generator(5), device=device).numpy()
    assert big.min() >= 0 and big.max() < 2**40 and big.max() > 2**39
    x = vkml.tensor(np.zeros((2, 3), np.float16), device=device)
    assert VF.rand_like(x).dtype is vkml.float16 and VF.randn_like(x).shape == (2, 3) and VF.rand_like(x).device == x.device
    assert VF.randint_like(x, 5).dtype is vkml.float16
    a = VF.randint(10, (4,), generator=VF.Generator(9), device=device).numpy()
    b = VF.randint(0, 10, size=(4,), generator=VF.Generator(9), device=device).numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_fills(device):
    x = VF.zeros(20_000, device=device)
    x.normal_(3.0, 0.5, generator=VF.Generator(2))
    v = x.numpy()
    assert abs(v.mean() - 3.0) < 0.02 and abs(v.std() - 0.5) < 0.02
    x.uniform_(-1.0, 2.0)
    v = x.numpy()
    assert v.min() >= -1.0 and v.max() < 2.0 and abs(v.mean() - 0.5) < 0.03
    with pytest.raises(vkml.DTypeError): VF.zeros(3, dtype=vkml.int64, device=device).normal_()


# --- typed errors ------------------------------------------------------------------------------------------------

def test_errors_are_typed():
    x = vkml.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(vkml.ShapeError, match="ranks"): VF.mm(x, vkml.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(vkml.ShapeError, match="batch"): VF.bmm(VF.ones(2, 2, 3), VF.ones(3, 3, 2))
    with pytest.raises(vkml.ShapeError): VF.dot(VF.ones(3), VF.ones(4))
    with pytest.raises(vkml.ArgumentError): VF.chunk(x, 0)
    with pytest.raises(vkml.ArgumentError): VF.topk(x, 4)
    with pytest.raises(vkml.ArgumentError): VF.kthvalue(x, 0)
    with pytest.raises(vkml.ShapeError): VF.repeat_interleave(x, vkml.tensor([1, 2]), dim=1)
    with pytest.raises(vkml.ArgumentError, match="dim"): VF.unique(x, dim=0)
    with pytest.raises(vkml.DTypeError): VF.masked_select(x, vkml.tensor(np.ones((2, 3), np.int64)))
    with pytest.raises(vkml.ShapeError): VF.diag(VF.ones(2, 2, 2))
    with pytest.raises(vkml.ArgumentError): F.interpolate(VF.ones(1, 1, 2, 2), size=3, scale_factor=2)
    with pytest.raises(vkml.ArgumentError, match="align_corners"): F.interpolate(VF.ones(1, 1, 2, 2), size=3, align_corners=True)
    with pytest.raises(vkml.ArgumentError, match="mode"): F.interpolate(VF.ones(1, 1, 2, 2), size=3, mode="bicubic")
    with pytest.raises(vkml.ShapeError): F.interpolate(VF.ones(1, 2, 2), size=3, mode="bilinear")
    with pytest.raises(vkml.ShapeError): F.pixel_shuffle(VF.ones(1, 3, 2, 2), 2)
    with pytest.raises(vkml.ShapeError): F.glu(VF.ones(2, 3))
    with pytest.raises(vkml.ShapeError): F.prelu(x, VF.ones(2))
    with pytest.raises(vkml.ArgumentError): F.huber_loss(x, x, delta=0.0)
    with pytest.raises(vkml.ArgumentError): F.instance_norm(VF.ones(2, 3, 4), VF.zeros(3))
    with pytest.raises(vkml.DTypeError): F.normalize(vkml.tensor([1, 2]))


@pytest.mark.vulkan
def test_cpu_only_operators_name_the_transfer():
    x = vkml.tensor(np.array([[3.0, 1.0, 2.0]], np.float32), device="vulkan")
    for f in (lambda: x.nonzero(), lambda: x.masked_select(x > 1), lambda: x.unique()):
        with pytest.raises(vkml.BackendError, match=r"x\.cpu\(\)"): f()
    y = x.cpu().unique().to("vulkan")       # the transfer the message names works
    np.testing.assert_array_equal(y.numpy(), [1.0, 2.0, 3.0])


@pytest.mark.vulkan
def test_sorting_runs_on_vulkan_as_on_the_cpu():
    "ARGSORT's bitonic kernel: stable in both directions, NaN largest, -0 equal to +0, every dtype, any axis, padded rows."
    rng = np.random.default_rng(3)
    for dt in (np.float32, np.float16, np.float64, np.int32, np.int64, np.bool_):
        for shape, dim in [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 33), 2), ((2, 1000), 1), ((4, 3, 2, 5), 1)]:
            a = rng.integers(-3, 4, shape).astype(dt)
            if np.dtype(dt).kind == "f": a.flat[0], a.flat[-1] = np.nan, -0.0
            for desc in (False, True):
                c, v = vkml.tensor(a), vkml.tensor(a, device="vulkan")
                np.testing.assert_array_equal(v.argsort(dim, descending=desc).numpy(), c.argsort(dim, descending=desc).numpy())
    x = rng.standard_normal((4, 65)).astype(np.float32)
    got, want = vkml.tensor(x, device="vulkan").topk(5), vkml.tensor(x).topk(5)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    np.testing.assert_array_equal(got.values.numpy(), want.values.numpy())


def test_linspace_past_float32s_range_agrees_with_the_cpu():
    """linspace(1e308, 0, 2) in float32 (the fuzzer's case): its ARANGE params rounded to float32 made the end inf and
    the step -inf, so the device computed inf + 0 * -inf = NaN where the CPU (float64, rounded once) gives [inf, 0]. Past
    float32's range the values are now computed in float64 and cast, on every device."""
    import vkml
    for args in [(1e308, 0.0, 2), (1e308, 0.0, 3), (-3e38, 3e38, 2), (0.0, -1e39, 4)]:
        want = vkml.linspace(*args).numpy()
        got = vkml.linspace(*args, device="vulkan").numpy()
        assert got.dtype == np.float32 and want.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(vkml.linspace(1e308, 0.0, 2).numpy(), np.float32([np.inf, 0.0]))
