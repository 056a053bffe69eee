"""The "forms" rows of the operator table (nbs/10b_tensor_forms.ipynb: views, copies, conversions, reversed operators,
new tensors, splits, scatters): PyTorch's own results, recorded in tests/fixtures/torch_forms.npz by
tests/fixtures/make_torch_forms.py (the fixture tests FAIL while it is missing), forward on the CPU and on Vulkan
through the row's own function, gradients (float64 on the CPU, float32 on Vulkan), gradcheck in float64; then
what the forms promise beyond values: `view` refuses what PyTorch refuses, copies own their storage, the in-place
forms keep vkML's in-place rules, and bad input gets a typed error."""

import numpy as np
import pytest

import vkml
import vkml.frontend.functions as VF
import vkml.frontend.registry as R
from vkml.core.ops import Op
from vkml.frontend.gradcheck import gradcheck
from vkml.frontend.tensor_forms import tensor_methods as TM
import oracle
from torch_fixture import TorchFixture

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


FX = TorchFixture("forms")
MAKE = FX.make
npz, arrays, outputs = FX.npz, FX.arrays, FX.outputs
CASES = MAKE.CASES
FORMS = {o.name for o in R._FORMS_OPERATORS}

TESTED_OPERATORS = {c["op"] for c in CASES.values()}
"The operator table's rows this file checks against PyTorch: every row of the forms family."


def build(name, device, dtype, requires_grad=False) -> list:
    "The case's inputs as vkML tensors: float inputs in `dtype`."
    ts = []
    for a in arrays(name):
        t = vkml.tensor(a.astype(dtype) if a.dtype.kind == "f" else a, device=device)
        ts.append(t.requires_grad_() if requires_grad and a.dtype.kind == "f" else t)
    return ts


def call(name, ts, device="cpu") -> list:
    "The row's function on the case's arguments (a creation function: on `device`); its outputs as a list."
    c = CASES[name]
    pos, kw = MAKE.call_args(c, ts, lambda n: getattr(vkml, n))
    if R.OPERATORS[c["op"]].category == "creation" and not c["inputs"]: kw["device"] = device
    out = R.OPERATORS[c["op"]].fn(*pos, **kw)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def test_fixture_has_every_case():
    d = npz()
    assert str(d["meta/torch_version"]).startswith("2.")
    for name, c in CASES.items():
        assert f"{name}/out0" in d, name
        if c["grad"] and any(a.dtype.kind == "f" for a in arrays(name)): assert f"{name}/grad0" in d, name


def test_every_forms_row_has_a_torch_case():
    "A new row of the forms family without a case here (and torch's values in the npz) fails this test."
    assert FORMS == TESTED_OPERATORS
    assert len(FORMS) >= 60
    assert {n for n in FORMS if not R.runs_on(n, "vulkan")} == {"argwhere"}   # every other form is a composition Vulkan runs


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_torch(name, device):
    if device != "cpu" and not R.runs_on(CASES[name]["op"], "vulkan"):   # argwhere: a data-dependent shape, CPU only
        with pytest.raises(vkml.BackendError, match=r"\.cpu\(\)"): call(name, build(name, device, np.float32))
        return
    outs, want = call(name, build(name, device, np.float32), device), outputs(name)
    assert len(outs) == len(want), name
    for j, (o, w) in enumerate(zip(outs, want)):
        assert isinstance(o, vkml.Tensor) and o.device.startswith(device), (name, j)
        got = o.numpy()
        assert got.shape == w.shape, (name, j, got.shape, w.shape)
        assert got.dtype.kind == w.dtype.kind, (name, j, got.dtype, w.dtype)
        if w.dtype == np.float16 or (w.dtype.kind == "f" and got.dtype == np.float16):
            assert got.dtype == np.float16, name
            oracle.assert_close(got, w, rtol=1e-3, atol=1e-3, what=f"{name} out{j}", same_dtype=False)
        if not CASES[name]["values"] or w.dtype == np.float16: continue
        if w.dtype.kind == "f": oracle.assert_close(got, w, rtol=1e-4, atol=1e-5, what=f"{name} out{j}", same_dtype=False)
        else: oracle.assert_close(got, w.astype(got.dtype), what=f"{name} out{j}")


def test_conversions_keep_torch_dtypes():
    "float/double/half/int/long/bool give PyTorch's dtypes (vkML's int is int32, as torch.int)."
    x = vkml.tensor(np.array([[-1.7, 0.0, 2.5]], np.float64))
    got = {n: getattr(TM, n)(x).dtype for n in ("float", "double", "half", "int", "long", "bool")}
    assert got == {"float": vkml.float32, "double": vkml.float64, "half": vkml.float16, "int": vkml.int32,
                   "long": vkml.int64, "bool": vkml.bool_}
    np.testing.assert_array_equal(TM.int(x).numpy(), [[-1, 0, 2]])    # toward zero, as torch


GRAD_CASES = sorted(n for n, c in CASES.items() if c["grad"] and f"{n}/grad0" in npz())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_torch(name, device):
    "float64 on the CPU, float32 on Vulkan; an input the output does not depend on gets zeros (or no gradient)."
    dtype = np.float64 if device == "cpu" else np.float32
    ts = build(name, device, dtype, requires_grad=True)
    d, terms = npz(), []
    for j, o in enumerate(call(name, ts)):
        if f"{name}/w{j}" in d: terms.append((o * vkml.tensor(d[f"{name}/w{j}"].astype(o.dtype.np), device=device)).sum())
    loss = terms[0]
    for t in terms[1:]: loss = loss + t.to(loss.dtype)
    if not loss.requires_grad:   # (fill with a number: the output depends on no input; torch's gradients are zeros)
        for i in range(len(ts)): assert not d.get(f"{name}/grad{i}", np.zeros(1)).any(), (name, i)
        return
    loss.backward()
    tol = dict(rtol=1e-7, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    for i, t in enumerate(ts):
        if f"{name}/grad{i}" not in d: continue
        g = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
        oracle.assert_close(g, d[f"{name}/grad{i}"], what=f"{name} grad{i}", same_dtype=False, **tol)


GRADCHECK = ["diagonal_scatter_offset", "select_scatter", "slice_scatter", "index_copy", "index_fill_tensor", "masked_scatter",
             "put_accumulate", "take", "take_along_dim_broadcast", "rot90_k3", "unfold_copy", "block_diag", "combinations",
             "meshgrid_xy", "fill_tensor", "__rmatmul___batch", "__rpow___tensor", "tensor_split_indices"]


@pytest.mark.parametrize("name", GRADCHECK)
def test_gradcheck(name):
    "Central differences in float64 against the gradients autograd derives for the composition."
    ins = arrays(name)
    floats = [i for i, a in enumerate(ins) if a.dtype.kind == "f"]
    def fn(*fs):
        ts = [vkml.tensor(a) for a in ins]
        for i, f in zip(floats, fs): ts[i] = f
        return tuple(o for o in call(name, ts) if o.dtype.is_float)
    assert gradcheck(fn, [ins[i] for i in floats])


# --- what the forms promise beyond values ---------------------------------------------------------------------------

@pytest.mark.parametrize("device", DEVICES)
def test_view_refuses_what_torch_refuses(device):
    "PyTorch's view never copies: a transposed tensor cannot be flattened (a ShapeError naming reshape), but can be viewed at its own shape."
    x = vkml.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), device=device)
    with pytest.raises(vkml.ShapeError, match="reshape"): TM.view(x.t(), 12)
    with pytest.raises(vkml.ShapeError, match="reshape"): TM.view_as(x[:, 1:3], vkml.tensor(np.zeros(6)))
    assert TM.view(x.t(), 4, 3)._base is x                                # no reshape: a view of the same storage
    assert TM.view(x[1:], 2, 4)._base is x                                # a contiguous slice views
    np.testing.assert_array_equal(TM.view(x.t().contiguous(), 12).numpy(), np.arange(12.0).reshape(3, 4).T.reshape(12))
    v = TM.view(x, 2, 6)
    x.zero_()                                                             # a view sees the write, as PyTorch's
    assert v.numpy().sum() == 0
    with pytest.raises(vkml.ArgumentError, match="reinterpret"): TM.view(x, vkml.int32)


@pytest.mark.parametrize("device", DEVICES)
def test_copies_own_their_storage(device):
    "A *_copy form does not change when its source is written, nor the source when the copy is."
    x = vkml.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3), device=device)
    copies = [VF.t_copy(x), VF.narrow_copy(x, 1, 0, 2), VF.alias_copy(x), VF.view_copy(x, (6,)), *VF.unbind_copy(x)]
    views = [x.t(), VF.narrow(x, 1, 0, 2), VF.select(x, 0, 1)]
    before = [c.numpy().copy() for c in copies]
    x.fill_(-1.0)
    for c, b in zip(copies, before): np.testing.assert_array_equal(c.numpy(), b)
    for v in views: assert (v.numpy() == -1.0).all()                       # the views see the write
    copies[0].zero_()
    assert (x.numpy() == -1.0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_in_place_forms_keep_the_rules(device):
    "zero_ writes in place (a lazy value that read the tensor keeps what it read); fill returns a new tensor."
    x = vkml.tensor(np.ones((2, 2), np.float32), device=device)
    before = x * 2.0
    assert TM.zero_(x) is x and x.numpy().sum() == 0 and before.numpy().sum() == 8.0
    y = vkml.tensor(np.ones(3, np.float32), device=device)
    z = VF.fill(y, 4.0)
    assert z is not y and (y.numpy() == 1).all() and (z.numpy() == 4).all()
    leaf = vkml.tensor(np.ones(3, np.float32), device=device, requires_grad=True)
    with pytest.raises(vkml.InplaceError): TM.zero_(leaf)
    with vkml.no_grad(): TM.zero_(leaf)
    assert leaf.numpy().sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_masked_scatter_reads_nothing_on_the_host(device):
    "The source positions are a running count of the mask: lazy, so a short source (PyTorch: an error) repeats its last element."
    x = vkml.tensor(np.zeros((2, 3), np.float32), device=device)
    mask = vkml.tensor(np.array([[True, True, False], [True, False, True]]), device=device)
    y = VF.masked_scatter(x, mask, vkml.tensor(np.array([1.0, 2.0], np.float32), device=device))
    assert y.node.op is not Op.INPUT and not y.node.realized
    np.testing.assert_array_equal(y.numpy(), [[1, 2, 0], [2, 0, 2]])


def test_functions_and_methods_agree():
    "The function forms are vkml's names and call the Tensor methods."
    x = vkml.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    for n in ("narrow", "select", "rot90", "tile", "take", "fliplr", "clone", "meshgrid", "block_diag", "t_copy", "fill"):
        assert getattr(vkml, n) is getattr(VF, n), n
    np.testing.assert_array_equal(vkml.narrow(x, 1, 1, 2).numpy(), x.narrow(1, 1, 2).numpy())
    np.testing.assert_array_equal(x.mT.numpy(), x.numpy().T)
    np.testing.assert_array_equal(x.unfold(1, 2, 2).numpy(), x.numpy().reshape(3, 2, 2))


def test_errors_are_typed():
    x = vkml.tensor(np.ones((2, 3, 4), np.float32))
    m = vkml.tensor(np.ones((2, 3), np.float32))
    cases = [
        (vkml.ShapeError, lambda: x.H), (vkml.ShapeError, lambda: m[0].mT), (vkml.ShapeError, lambda: VF.t(x)),
        (vkml.IndexOutOfRangeError, lambda: VF.select(m, 1, 3)), (vkml.IndexOutOfRangeError, lambda: VF.narrow(m, 0, 3, 1)),
        (vkml.ArgumentError, lambda: VF.narrow(m, 1, 2, 2)), (vkml.ArgumentError, lambda: VF.hsplit(m, 2)),
        (vkml.ShapeError, lambda: VF.vsplit(m[0], 1)), (vkml.ShapeError, lambda: VF.dsplit(m, 1)),
        (vkml.ArgumentError, lambda: VF.tensor_split(m, 0)), (vkml.ShapeError, lambda: VF.fliplr(m[0])),
        (vkml.ArgumentError, lambda: VF.rot90(m, 1, (0, 0))), (vkml.IndexOutOfRangeError, lambda: VF.take(m, vkml.tensor([6]))),
        (vkml.DTypeError, lambda: VF.take(m, vkml.tensor([0.0]))), (vkml.ShapeError, lambda: VF.take_along_dim(x, vkml.tensor([[0]]), 1)),
        (vkml.ShapeError, lambda: VF.select_scatter(m, vkml.tensor(np.ones(3, np.float32)), 1, 0)),
        (vkml.ShapeError, lambda: VF.slice_scatter(m, m, 1, 0, 2)), (vkml.ShapeError, lambda: VF.diagonal_scatter(m, m[0])),
        (vkml.ShapeError, lambda: VF.index_copy(m, 0, vkml.tensor([0]), m)), (vkml.ShapeError, lambda: VF.index_fill(m, 0, vkml.tensor([0]), m)),
        (vkml.DTypeError, lambda: VF.masked_scatter(m, m, m)), (vkml.DTypeError, lambda: VF.masked_scatter(m, m > 0, m.double())),
        (vkml.ShapeError, lambda: VF.put(m, vkml.tensor([0, 1]), m)), (vkml.ShapeError, lambda: VF.meshgrid(m)),
        (vkml.ArgumentError, lambda: VF.meshgrid(m[0], indexing="yx")), (vkml.ShapeError, lambda: VF.cartesian_prod(m)),
        (vkml.ShapeError, lambda: VF.combinations(m)), (vkml.ShapeError, lambda: VF.block_diag(x)),
        (vkml.ArgumentError, lambda: x.unfold(2, 5, 1)), (vkml.ArgumentError, lambda: VF.unflatten(m, 1, ())),
        (vkml.ShapeError, lambda: VF.broadcast_to(m, (3, 3))), (vkml.ShapeError, lambda: VF.broadcast_tensors(m, x[:, :2])),
        (vkml.ShapeError, lambda: m.new_zeros(-1)), (vkml.DTypeError, lambda: m.long().new_full((2,), 0.5)),
        (vkml.DTypeError, lambda: VF.clone([1.0])), (vkml.ArgumentError, lambda: VF.split_with_sizes(m, 1)),
    ]
    for err, f in cases:
        with pytest.raises(err): f()
