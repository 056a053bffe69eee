"""The library rows of the operator table (issue 23's OpInfo growth: nbs/18_linalg.ipynb, nbs/18b_masked.ipynb,
nbs/18c_signal.ipynb and nbs/17_nn_functional.ipynb's additions): PyTorch's own results, recorded in
tests/fixtures/torch_library.npz by tests/fixtures/make_torch_library.py (the fixture tests FAIL while it is missing),
forward on the CPU and on Vulkan (or, for the CPU-only calls, the typed error naming the transfer), gradients
(float64 on the CPU, float32 on Vulkan), gradcheck in float64, Vulkan against the CPU, and the typed errors."""
import math
import numpy as np
import pytest

import vkml
import vkml.frontend.registry as R
from vkml.frontend.gradcheck import gradcheck
import oracle
from torch_fixture import TorchFixture

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


FX = TorchFixture("library")
MAKE = FX.make
npz, arrays, outputs = FX.npz, FX.arrays, FX.outputs
CASES = MAKE.CASES

F = vkml.nn.functional
TESTED_OPERATORS = {c["op"] for c in CASES.values()}
"The operator table's rows this file checks against PyTorch."
FAMILY = {o.name for o in R._LIBRARY_OPERATORS}
"The rows of the library family (16_registry's `_LIBRARY_OPERATORS`)."


def build(name, device, dtype, requires_grad=False) -> list:
    "The call's inputs as vkML tensors: float inputs in `dtype`."
    ts = []
    for i, a in enumerate(arrays(name)):
        t = vkml.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
        ts.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" and i not in CASES[name]["nograd"] else t)
    return ts


def call(name, ts, device="cpu"):
    "The table row's function on the case's inputs, args and kwargs."
    c = CASES[name]
    n = len(c["inputs"])
    pos, kw = ts[:n], dict(zip(MAKE.kwarg_inputs(c), ts[n:]))
    if c["pre"]: pos = [F.log_softmax(pos[0], -1), *pos[1:]]
    if c["seq"]: pos = [pos]
    kwargs = {**c["kwargs"], **kw, **({"device": device} if c["factory"] else {})}
    out = R.OPERATORS[c["op"]].fn(*pos, *c["args"], **kwargs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def cpu_only(name) -> bool:
    "Whether the call runs on the CPU alone: its row's trace uses a CPU-only graph op, or the case says so."
    return CASES[name]["cpu_only"] or not R.runs_on(CASES[name]["op"], "vulkan")


TRANSFER = r"\.to\('cpu'\)|\.cpu\(\)"


def loss_of(name, outs):
    terms = [(o * vkml.tensor(w.astype(o.dtype.np), device=o.device)).sum() for o, w in zip(outs, outputs(name, "w")) if w is not None]
    total = terms[0]
    for t in terms[1:]: total = total + t
    return total


def test_fixture_has_every_case():
    d = npz()
    assert str(d["meta/torch_version"]).startswith("2.")
    for name, c in CASES.items():
        assert f"{name}/out0" in d and (c["factory"] or f"{name}/in0" in d), name
        if c["grad"] and any(a.dtype.kind == "f" for a in arrays(name)):
            assert any(k.startswith(f"{name}/grad") for k in d), name


def test_every_row_of_the_family_has_a_torch_case():
    "A new row of `_LIBRARY_OPERATORS` without a case here fails; so does a case of no row."
    assert FAMILY == TESTED_OPERATORS


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, device):
    ts = build(name, device, np.float32)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError, match=TRANSFER): [o.numpy() for o in call(name, ts, device)]
        return
    outs = call(name, ts, device)
    want = outputs(name)
    assert len(outs) == len(want), name
    for j, (o, w) in enumerate(zip(outs, want)):
        assert o.device.split(":")[0] == device, (name, j, o.device)
        got = o.numpy()
        if CASES[name]["abs_out"]: got, w = np.abs(got), np.abs(w)
        assert got.shape == w.shape, (name, j, got.shape, w.shape)
        if w.dtype.kind == "f":
            assert o.dtype.is_float, (name, j, o.dtype)
            oracle.assert_close(got, w, rtol=1e-4, atol=1e-5, what=f"{name} out{j}", same_dtype=False)
        else:
            assert o.dtype.np == w.dtype, (name, j, o.dtype, w.dtype)
            oracle.assert_close(got, w, what=f"{name} out{j}")


GRAD_CASES = sorted(n for n, c in CASES.items() if c["grad"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_torch(name, device):
    "float64 on the CPU, float32 on Vulkan."
    dtype = np.float64 if device == "cpu" else np.float32
    ts = build(name, device, dtype, requires_grad=True)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError, match=TRANSFER): loss_of(name, call(name, ts, device)).backward()
        return
    loss_of(name, call(name, ts, device)).backward()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-4)
    d = npz()
    for i, t in enumerate(ts):
        if f"{name}/grad{i}" in d:
            got = np.zeros(t.shape) if t.grad is None else t.grad.numpy()     # no gradient reached t: zeros, as PyTorch's
            oracle.assert_close(got, d[f"{name}/grad{i}"], what=f"{name} grad{i}", same_dtype=False, **tol)


SYMMETRIC = {"linalg.eigvalsh", "linalg.cholesky_ex", "linalg.matrix_sqrth"}
"Rows that read one triangle of a symmetric matrix: their gradient is that of a function of a symmetric matrix."
FACTOR = {"cholesky_solve": 1, "cholesky_inverse": 0}
"Rows that read one triangle of a Cholesky factor (input i) and, as PyTorch, pass the gradient to all of it."


THROUGH_A_CLAMP = {"nnf_gaussian_nll_loss_clamped"}
"Cases whose gradient passes through a clamp as if it were not there (PyTorch's var.clamp_ under no_grad): no finite difference."


@pytest.mark.parametrize("name", sorted(set(GRAD_CASES) - THROUGH_A_CLAMP))
def test_gradcheck(name):
    "Central differences in float64 against the rules of the composition (infinite outputs, masked-out ones, left out)."
    sym = CASES[name]["op"] in SYMMETRIC
    def fn(*ts):
        if sym: ts = [(ts[0] + ts[0].transpose(-1, -2)) * 0.5, *ts[1:]]
        if (i := FACTOR.get(CASES[name]["op"])) is not None:    # differences along the triangle it reads
            ts = list(ts); ts[i] = ts[i].triu() if CASES[name]["args"] else ts[i].tril()
        outs = [o for o in call(name, list(ts)) if o.dtype.is_float and o.numel()]
        return tuple(vkml.where(o.isfinite(), o, 0.0) for o in outs)
    assert gradcheck(fn, arrays(name))


@pytest.mark.vulkan
@pytest.mark.parametrize("name", sorted(n for n in CASES if not cpu_only(n)))
def test_vulkan_matches_cpu(name):
    "The same float32 call on both devices, within the parity bound."
    res = {dev: [o.numpy() for o in call(name, build(name, dev, np.float32), dev)] for dev in ("cpu", "vulkan")}
    for j, (c, v) in enumerate(zip(res["cpu"], res["vulkan"])):
        oracle.assert_close(v, c, k=16, what=f"{name} out{j}")


# --- typed errors ------------------------------------------------------------------------------------------------

def test_errors_are_typed():
    LA, MK, W = vkml.linalg, vkml.masked, vkml.signal.windows
    x = vkml.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(vkml.ShapeError, match="same rank"): LA.cross(vkml.ones(3), vkml.ones(2, 3))
    with pytest.raises(vkml.ShapeError, match="size 3"): LA.cross(x, x, dim=0)
    with pytest.raises(vkml.ArgumentError, match="two"): LA.multi_dot([x])
    with pytest.raises(vkml.ShapeError, match="2-D"): LA.multi_dot([x, vkml.ones(3), vkml.ones(3)])
    with pytest.raises(vkml.ShapeError, match="square"): LA.matrix_power(x, 2)
    with pytest.raises(vkml.ArgumentError, match="int"): LA.matrix_power(vkml.ones(2, 2), 1.5)
    with pytest.raises(vkml.ArgumentError, match="ord"): LA.matrix_norm(x, 3)
    with pytest.raises(vkml.AxisError): LA.matrix_norm(x, dim=(0, 0))
    with pytest.raises(vkml.ShapeError, match="1-D or 2-D"): LA.norm(vkml.ones(2, 2, 2), 1)
    with pytest.raises(vkml.DTypeError): LA.pinv(vkml.ones(2, 2, dtype=vkml.float16))
    with pytest.raises(vkml.ShapeError, match="must be equal"): LA.tensorinv(vkml.ones(2, 3, 2), 1)
    with pytest.raises(vkml.ArgumentError, match="driver"): LA.lstsq(x, x, driver="gelsd")
    with pytest.raises(vkml.ShapeError): LA.lstsq(x, vkml.ones(3, 1))
    with pytest.raises(vkml.ArgumentError, match="out="): LA.vector_norm(x, out=x)
    with pytest.raises(vkml.DTypeError, match="mask.bool"): MK.sum(x, mask=vkml.tensor(np.ones((2, 3), np.int64)))
    with pytest.raises(vkml.ShapeError, match="broadcast"): MK.sum(x, mask=vkml.tensor([True, False]))
    with pytest.raises(vkml.DTypeError, match="dtype="): MK.mean(vkml.tensor([1, 2]))
    with pytest.raises(vkml.ArgumentError, match="not both"): MK.var(x, 1, True, correction=0)
    with pytest.raises(vkml.ArgumentError, match=">= 0"): W.hann(-1)
    with pytest.raises(vkml.DTypeError, match="float32 or float64"): W.hamming(3, dtype=vkml.int64)
    with pytest.raises(vkml.ArgumentError, match="sym=False"): W.exponential(4, center=1.0)
    with pytest.raises(vkml.ArgumentError, match="positive"): W.gaussian(4, std=0.0)
    with pytest.raises(vkml.ArgumentError, match="empty"): W.general_cosine(4, a=[])


@pytest.mark.vulkan
def test_cpu_only_library_calls_name_the_transfer():
    A = vkml.tensor(np.eye(3, dtype=np.float32) * 2, device="vulkan")
    for f in (lambda: vkml.linalg.pinv(A), lambda: vkml.linalg.lstsq(A, A), lambda: vkml.linalg.cond(A),
              lambda: vkml.linalg.matrix_norm(A, "nuc"), lambda: vkml.linalg.matrix_power(A, -1),
              lambda: vkml.linalg.cholesky_solve(A, A), lambda: vkml.linalg.solve_ex(A, A)):
        with pytest.raises(vkml.BackendError, match=r"\.to\('cpu'\)"): f()
    got = vkml.linalg.pinv(A.to("cpu")).to("vulkan")          # the transfer the message names works
    np.testing.assert_allclose(got.numpy(), np.eye(3) / 2, rtol=1e-6)
    w = vkml.signal.windows.hann(6, device="vulkan")           # the windows are made where they are asked for
    assert w.device.startswith("vulkan") and w.dtype is vkml.float32


# --- the random rows: their statistics (the eval / p = 0 values are compared with PyTorch's above) ----------------


@pytest.mark.parametrize("device", DEVICES)
def test_channel_dropouts_drop_whole_channels(device):
    vkml.manual_seed(1)
    y = F.dropout2d(vkml.ones(400, 16, 2, 3, device=device), 0.3).numpy()
    assert (y == y[:, :, :1, :1]).all()                                    # a channel is kept or dropped as a whole
    np.testing.assert_allclose((y[:, :, 0, 0] == 0).mean(), 0.3, atol=0.02)
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.7))}
    u = F.dropout2d(vkml.ones(3000, 2, 2, device=device), 0.5).numpy()     # unbatched (C, H, W): one draw per channel
    assert (u == u[:, :1, :1]).all() and abs((u[:, 0, 0] == 0).mean() - 0.5) < 0.04
    v = F.dropout3d(vkml.ones(3000, 2, 2, 2, device=device), 0.5).numpy()
    assert (v == v[:, :1, :1, :1]).all() and abs((v[:, 0, 0, 0] == 0).mean() - 0.5) < 0.04
    assert F.dropout2d(vkml.ones(2, 3, 2, 2, device=device), 1.0).numpy().sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_alpha_dropouts_keep_mean_and_variance(device):
    vkml.manual_seed(2)
    x = vkml.randn(300_000, device=device)
    for p in (0.1, 0.5):
        y = F.alpha_dropout(x, p, training=True).numpy()
        assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01, (p, y.mean(), y.std())
        a = 1 / math.sqrt((1 - p) * (1 + p * MAKE_ALPHA ** 2))
        dropped = np.isclose(y, a * (MAKE_ALPHA * p - MAKE_ALPHA), atol=1e-6)
        assert abs(dropped.mean() - p) < 0.01
    z = F.feature_alpha_dropout(vkml.randn(20_000, 4, 3, device=device), 0.5, training=True).numpy()
    same = np.isclose(z, z[:, :, :1]).all(2)                                # a dropped channel is constant
    assert abs(same.mean() - 0.5) < 0.03


MAKE_ALPHA = 1.7580993408473766


@pytest.mark.parametrize("device", DEVICES)
def test_rrelu_slopes_are_uniform(device):
    vkml.manual_seed(3)
    x = -vkml.ones(200_000, device=device)
    s = -F.rrelu(x, 0.1, 0.3, training=True).numpy()
    assert 0.1 <= s.min() and s.max() <= 0.3 and abs(s.mean() - 0.2) < 0.002 and abs(s.var() - 0.2 ** 2 / 12) < 1e-4
    assert (F.rrelu(-x, training=True).numpy() == 1).all()                  # the positive part is kept


@pytest.mark.vulkan
def test_random_rows_draw_the_same_on_both_devices():
    got = {}
    for dev in ("cpu", "vulkan"):
        vkml.manual_seed(5)
        x = vkml.tensor(np.linspace(-1, 1, 48, dtype=np.float32).reshape(2, 4, 2, 3), device=dev)
        got[dev] = [F.dropout2d(x, 0.4).numpy(), F.alpha_dropout(x, 0.3, training=True).numpy(), F.rrelu(x, training=True).numpy()]
    for c, v in zip(got["cpu"], got["vulkan"]): oracle.assert_close(v, c, k=4, what="random rows")


def test_random_rows_refuse_bad_arguments():
    x = vkml.ones(2, 3, 2, 2)
    with pytest.raises(vkml.ArgumentError, match=r"\[0, 1\]"): F.dropout2d(x, 1.5)
    with pytest.raises(vkml.ShapeError, match="rank 3 or 4"): F.dropout2d(vkml.ones(2, 3))
    with pytest.raises(vkml.ShapeError, match="rank 4 or 5"): F.dropout3d(x[0])
    with pytest.raises(vkml.ArgumentError, match="lower"): F.rrelu(x, 0.5, 0.1)
    with pytest.raises(vkml.DTypeError): F.alpha_dropout(vkml.tensor([1, 2]), 0.5, training=True)


def test_nn_functional_errors_are_typed():
    x = vkml.ones(3, 4)
    with pytest.raises(vkml.ShapeError, match="groups"): F.channel_shuffle(vkml.ones(1, 5, 2), 2)
    with pytest.raises(vkml.ShapeError, match=r"\(N, M\)"): F.pdist(vkml.ones(2, 2, 2))
    with pytest.raises(vkml.ShapeError, match="weight"): F.bilinear(x, x, vkml.ones(2, 3, 3))
    with pytest.raises(vkml.ShapeError): F.gaussian_nll_loss(x, x, vkml.ones(2))
    with pytest.raises(vkml.ArgumentError, match="p must be 1 or 2"): F.multi_margin_loss(x, vkml.tensor([0, 1, 2]), p=3)
    with pytest.raises(vkml.DTypeError, match="long"): F.multilabel_margin_loss(x, x)
    with pytest.raises(vkml.IndexOutOfRangeError): F.multi_margin_loss(x, vkml.tensor([0, 1, 4])).numpy()
    with pytest.raises(vkml.ArgumentError, match="margin"): F.triplet_margin_loss(x, x, x, margin=0.0)
    with pytest.raises(vkml.ArgumentError, match="reduction"): F.soft_margin_loss(x, x, reduction="avg")
    with pytest.raises(vkml.ShapeError, match="conv_transpose1d's weight"): F.conv_transpose1d(vkml.ones(1, 2, 3), vkml.ones(2, 3))
    with pytest.raises(vkml.ShapeError): F.local_response_norm(x, 2)


def test_geqrf_is_differentiable():
    "PyTorch has no derivative for geqrf; vkML's composition has one, checked against central differences."
    a = np.random.default_rng(11).standard_normal((4, 3))
    assert gradcheck(lambda t: tuple(vkml.linalg.geqrf(t)), [a])


@pytest.mark.parametrize("device", DEVICES)
def test_fractional_max_pool_draws_its_own_samples(device):
    "Without _random_samples the windows move with the generator's draws, and each output is the max of its window."
    x = vkml.tensor(np.random.default_rng(12).standard_normal((2, 3, 9, 9)).astype(np.float32), device=device)
    vkml.manual_seed(0)
    y, i = F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)
    got, idx = y.numpy(), i.numpy()
    np.testing.assert_array_equal(np.take_along_axis(x.numpy().reshape(2, 3, 81), idx.reshape(2, 3, 16), 2).reshape(got.shape), got)
    rows, cols = idx // 9, idx % 9
    assert (np.diff(rows, axis=2) >= 0).all() and (np.diff(cols, axis=3) >= 0).all()
    vkml.manual_seed(1)
    assert not np.array_equal(F.fractional_max_pool2d(x, 2, output_size=4, return_indices=True)[1].numpy(), idx)


def test_more_nn_functional_errors_are_typed():
    lp = F.log_softmax(vkml.ones(4, 2, 3), -1)
    with pytest.raises(vkml.ArgumentError, match="blank"): F.ctc_loss(lp, vkml.tensor([[1], [2]]), [4, 4], [1, 1], blank=3)
    with pytest.raises(vkml.ShapeError, match="one length per sample"): F.ctc_loss(lp, vkml.tensor([[1], [2]]), [4], [1, 1])
    with pytest.raises(vkml.ArgumentError, match="mode"): F.grid_sample(vkml.ones(1, 1, 2, 2), vkml.zeros(1, 1, 1, 2), mode="bicubic")
    with pytest.raises(vkml.ShapeError, match="rank 5"): F.grid_sample(vkml.ones(1, 1, 2, 2), vkml.zeros(1, 1, 1, 3))
    with pytest.raises(vkml.ArgumentError, match="per_sample_weights"): F.embedding_bag(vkml.tensor([[0, 1]]), vkml.ones(2, 2), per_sample_weights=vkml.ones(1, 2))
    with pytest.raises(vkml.ArgumentError, match="one of them"): F.fractional_max_pool2d(vkml.ones(1, 1, 4, 4), 2)
    with pytest.raises(vkml.ShapeError, match="does not fit"): F.fractional_max_pool2d(vkml.ones(1, 1, 4, 4), 3, output_size=3)
    with pytest.raises(vkml.ShapeError, match="embed_dim_to_check"):
        F.multi_head_attention_forward(vkml.ones(2, 1, 4), vkml.ones(2, 1, 4), vkml.ones(2, 1, 4), 4, 3, vkml.ones(12, 4), None,
                                       None, None, False, 0.0, vkml.ones(4, 4), None)
    with pytest.raises(vkml.ShapeError, match="m >= n"): vkml.linalg.polar(vkml.ones(2, 3))
    with pytest.raises(vkml.ShapeError, match="square"): vkml.linalg.matrix_exp(vkml.ones(2, 3))
    with pytest.raises(vkml.ShapeError, match="pivots"): vkml.linalg.lu_unpack(vkml.ones(3, 3), vkml.tensor([1, 2], dtype=vkml.int32))
