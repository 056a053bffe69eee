"""The statistics family of the operator table (nbs/10c_tensor_stats.ipynb) against PyTorch's own results, recorded
in tests/fixtures/torch_stats.npz by tests/fixtures/make_torch_stats.py (the fixture tests FAIL while it is missing):
each case runs the table's function (`vkml.frontend.registry.OPERATORS[name].fn`) forward on the CPU and on Vulkan
(or, for the CPU-only operators, checks the typed error naming the transfer) and compares its gradients (float64 on
the CPU, float32 on Vulkan); gradcheck in float64 on a selection; the typed errors."""

import numpy as np
import pytest

import vkml
import vkml.frontend.functions as VF
import vkml.frontend.registry as R
from vkml.frontend.gradcheck import gradcheck
import oracle
from torch_fixture import TorchFixture

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


FX = TorchFixture("stats")
MAKE = FX.make
npz, arrays, outputs = FX.npz, FX.arrays, FX.outputs
CASES = MAKE.CASES

TESTED_OPERATORS = {c["op"] for c in CASES.values()}
"The operator-table rows this file checks against PyTorch."


def build(name, device, dtype, requires_grad=False) -> list:
    "The case's inputs as vkML tensors: float inputs in `dtype` (those in `const` without a gradient)."
    c, ts = CASES[name], []
    for i, a in enumerate(arrays(name)):
        t = vkml.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
        ts.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" and i not in c["const"] else t)
    return ts


def call(name, ts) -> list:
    "The operator table's function on the case's inputs and arguments, its outputs as a list (tuples flattened)."
    c = CASES[name]
    n = len(c["inputs"])
    return MAKE.flatten(R.OPERATORS[c["op"]].fn(*ts[:n], *c["args"], **MAKE.with_inputs(c, ts[n:])))


def cpu_only(name) -> bool:
    "Whether the case leaves Vulkan: its operator's trace uses a CPU-only graph op, or it reduces by `prod` (PROD)."
    c = CASES[name]
    return not R.runs_on(c["op"], "vulkan") or c["kwargs"].get("reduce") == "prod"


def test_fixture_has_every_case():
    d = npz()
    assert str(d["meta/torch_version"]).startswith("2.")
    for name, c in CASES.items():
        assert f"{name}/in0" in d and f"{name}/out0" in d, name
        if c["grad"]: assert any(k.startswith(f"{name}/grad") for k in d), name


def test_every_stats_row_has_a_torch_case():
    "Each row of the family's cell of the operator table is checked against PyTorch here (a new row without a case fails)."
    assert {o.name for o in R._STATS_OPERATORS} == TESTED_OPERATORS
    assert TESTED_OPERATORS <= set(R.OPERATORS)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, device):
    ts = build(name, device, np.float32)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError, match=r"cpu"): call(name, ts)
        return
    outs, want = call(name, ts), outputs(name)
    assert len(outs) == len(want), name
    for j, (o, w) in enumerate(zip(outs, want)):
        got = o.numpy()
        assert got.shape == w.shape, (name, j, got.shape, w.shape)
        if w.dtype.kind == "f": oracle.assert_close(got, w, rtol=1e-4, atol=1e-5, what=f"{name} out{j}", same_dtype=False)
        else:
            assert got.dtype == w.dtype or (w.dtype == np.int64 and got.dtype == np.int64), (name, j, got.dtype, w.dtype)
            oracle.assert_close(got, w, what=f"{name} out{j}")


GRAD_CASES = sorted(n for n, c in CASES.items() if c["grad"])


def loss_of(name, outs):
    terms = [(o * vkml.tensor(w.astype(o.dtype.np), device=o.device)).sum() for o, w in zip(outs, outputs(name, "w")) if w is not None]
    total = terms[0]
    for t in terms[1:]: total = total + t
    return total


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_torch(name, device):
    "float64 on the CPU, float32 on Vulkan."
    dtype = np.float64 if device == "cpu" else np.float32
    ts = build(name, device, dtype, requires_grad=True)
    if device != "cpu" and cpu_only(name):
        with pytest.raises(vkml.BackendError): call(name, ts)
        return
    loss_of(name, call(name, ts)).backward()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    d = npz()
    for i, t in enumerate(ts):
        if f"{name}/grad{i}" in d:
            oracle.assert_close(t.grad.numpy(), d[f"{name}/grad{i}"], what=f"{name} grad{i}", same_dtype=False, **tol)


GRADCHECK = ["addcdiv", "addbmm", "cdist_broadcast_pinf", "cdist", "tensordot", "kron_3d", "cross", "dist", "nanmean", "std_mean", "median", "nanmedian",
             "quantile_vector", "median_all", "cummax", "logcumsumexp", "gradient_2d_edge2", "gradient_coordinates_edge2", "cumulative_trapezoid_x", "cov_weights",
             "corrcoef", "renorm", "scatter_reduce_mean", "index_reduce_amax_exclude", "scatter_reduce_prod"]


@pytest.mark.parametrize("name", GRADCHECK)
def test_gradcheck(name):
    "Central differences in float64 against the rules of the composition (inputs away from ties and kinks)."
    c = CASES[name]
    ins = [vkml.tensor(a) if i in c["const"] else a for i, a in enumerate(arrays(name))]   # a tensor: held constant
    def fn(*ts): return tuple(o for o in call(name, list(ts)) if o.dtype.is_float)
    assert gradcheck(fn, ins)


@pytest.mark.vulkan
@pytest.mark.parametrize("name", sorted(n for n in CASES if not cpu_only(n)))
def test_vulkan_matches_cpu(name):
    "The same float32 call on both devices, within the parity bound (√k-scaled for the reductions)."
    res = {dev: [o.numpy() for o in call(name, build(name, dev, np.float32))] for dev in ("cpu", "vulkan")}
    for j, (c, v) in enumerate(zip(res["cpu"], res["vulkan"])):
        oracle.assert_close(v, c, k=16, what=f"{name} out{j}")


def test_errors_are_typed():
    x = vkml.tensor(np.ones((2, 3), np.float32))
    i = vkml.tensor(np.array([0, 2, 1]))
    with pytest.raises(vkml.DTypeError, match="floats"): VF.addcdiv(i, i, i)
    with pytest.raises(vkml.DTypeError): VF.addcmul(x, x, x.double())
    with pytest.raises(vkml.ShapeError, match="size 3"): VF.cross(VF.ones(2, 2), VF.ones(2, 2))
    with pytest.raises(vkml.ShapeError): VF.addbmm(VF.ones(2, 2), VF.ones(2, 2, 3), VF.ones(3, 3, 2))
    with pytest.raises(vkml.ShapeError): VF.tensordot(x, x, ([0], [1]))
    with pytest.raises(vkml.ShapeError): VF.trace(VF.ones(3))
    with pytest.raises(vkml.ShapeError): VF.cdist(x, VF.ones(2, 4))
    with pytest.raises(vkml.ArgumentError, match="compute_mode"): VF.cdist(x, x, compute_mode="fast")
    with pytest.raises(vkml.ArgumentError): VF.cdist(x, x, -1.0)
    with pytest.raises(vkml.ArgumentError, match=r"\[0, 1\]"): VF.quantile(x, 1.5)
    with pytest.raises(vkml.ArgumentError, match="interpolation"): VF.quantile(x, 0.5, interpolation="cubic")
    with pytest.raises(vkml.DTypeError): VF.quantile(x, vkml.tensor([0.5], dtype=vkml.float64))
    with pytest.raises(vkml.DTypeError, match="floats"): VF.logcumsumexp(i, 0)
    with pytest.raises(vkml.ArgumentError, match="non-negative"): VF.bincount(vkml.tensor([1, -1]))
    with pytest.raises(vkml.DTypeError): VF.bincount(x)
    with pytest.raises(vkml.ShapeError): VF.bucketize(x, x)
    with pytest.raises(vkml.ArgumentError): VF.histc(x, 0)
    with pytest.raises(vkml.ArgumentError, match="reduce"): VF.scatter_reduce(x, 1, vkml.tensor([[0, 1, 2]] * 2), x, "max")
    with pytest.raises(vkml.ShapeError): VF.index_reduce(x, 0, vkml.tensor([0, 1, 1]), x, "amax")
    with pytest.raises(vkml.ArgumentError, match="dim"): VF.unique_consecutive(x, dim=0)
    with pytest.raises(vkml.IndexOutOfRangeError): VF.scatter_reduce(x, 1, vkml.tensor([[0, 5, 1], [0, 0, 0]]), x, "sum").numpy()
    with pytest.raises(vkml.IndexOutOfRangeError): VF.index_reduce(x, 1, vkml.tensor([0, 3, 1]), x, "amax").numpy()
    with pytest.raises(vkml.ArgumentError, match="q must be"): VF.quantile(x, "half")
    with pytest.raises(vkml.ArgumentError, match=r"\[0, 1\]"): VF.quantile(x, vkml.tensor([0.5, 2.0]) * 1.0)   # read on the host
    with pytest.raises(vkml.DTypeError): VF.median([1.0, 2.0])
    with pytest.raises(vkml.DTypeError): VF.bucketize([1.0], vkml.tensor([0.0, 1.0]))
    with pytest.raises(vkml.DTypeError): VF.searchsorted(vkml.tensor([0, 1]), vkml.tensor([0.5]))     # vkML never promotes
    with pytest.raises(vkml.IndexOutOfRangeError): VF.unravel_index(vkml.tensor([6]), (2, 3))
    with pytest.raises(vkml.ShapeError): x.sum_to_size(4, 3)
    with pytest.raises(vkml.ShapeError): VF.gradient(VF.ones(1))
    with pytest.raises(vkml.ArgumentError): VF.gradient(x, spacing=[1.0, 2.0, 3.0])
    with pytest.raises(vkml.EmptyReductionError): VF.median(VF.ones(0))      # PyTorch gives NaN; vkML raises, as its `mean` does
    with pytest.raises(vkml.EmptyReductionError): VF.mode(VF.ones(2, 0), 1)
    with pytest.raises(vkml.DTypeError, match="bools"): VF.trace(vkml.tensor([[True, False], [False, True]]))


@pytest.mark.vulkan
def test_cpu_only_operators_name_the_transfer():
    x = vkml.tensor(np.array([[3.0, 1.0, 2.0]], np.float32), device="vulkan")
    with pytest.raises(vkml.BackendError, match=r"x\.cpu\(\)"): x.unique_consecutive()
    with pytest.raises(vkml.BackendError, match="PROD"): x.scatter_reduce(1, vkml.tensor([[0, 0, 1]], device="vulkan"), x, "prod")
    np.testing.assert_array_equal(x.cpu().unique_consecutive().to("vulkan").numpy(), [3.0, 1.0, 2.0])
    # the order statistics sort on the device (ARGSORT's bitonic kernel)
    np.testing.assert_array_equal(x.median(1).values.numpy(), [2.0])
    np.testing.assert_array_equal(x.quantile(0.5).numpy(), np.float32(2.0))


@pytest.mark.vulkan
def test_elementwise_compositions_fuse_on_vulkan():
    "addcmul and addcdiv are one fused elementwise kernel; nansum and count_nonzero fold their WHERE / comparison into one reduction."
    from vkml.frontend.tensor import schedule
    rng = np.random.default_rng(0)
    x, y, z = (rng.uniform(0.5, 1.5, s).astype(np.float32) for s in ((4, 5), (5,), (4, 1)))
    a, b, c = (vkml.tensor(t, device="vulkan") for t in (x, y, z))
    cases = ((VF.addcmul(a, b, c, value=0.5), ["fused"], x + 0.5 * y * z), (VF.addcdiv(a, b, c, value=2.0), ["fused"], x + 2 * y / z),
             (VF.nansum(a, 1), ["reduce"], x.sum(1)), (VF.count_nonzero(a - 1.0, 1), ["reduce"], np.count_nonzero(x - 1, 1)))
    for got, kinds, want in cases:
        assert [k.kind for k in schedule(got).dispatching] == kinds
        oracle.assert_close(got.numpy(), want.astype(got.dtype.np), rtol=1e-6, atol=1e-6, what=str(kinds))


def test_methods_are_the_function_forms():
    "Every row is also a Tensor method where PyTorch has one (its values are the function's)."
    x = vkml.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    for name, args, kw in (("diff", (), {}), ("cov", (), {}), ("corrcoef", (), {}), ("histogram", (3,), {}), ("nansum", (1,), {}),
                           ("cummax", (0,), {}), ("quantile", (0.5,), dict(dim=1)), ("renorm", (2, 0, 1.0), {}), ("kron", (x,), {}),
                           ("aminmax", (), dict(dim=0)), ("logcumsumexp", (1,), {}), ("count_nonzero", (), {}), ("trace", (), {})):
        got, want = MAKE.flatten(getattr(x, name)(*args, **kw)), MAKE.flatten(getattr(VF, name)(x, *args, **kw))
        for g, w in zip(got, want): np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=name)
