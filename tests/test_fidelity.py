"""PyTorch fidelity: in-place ops and views, indexing and writes through indices, the signatures PyTorch users
write, on the CPU oracle and on Vulkan.

The reference for storage semantics is numpy: a numpy view shares memory with its base exactly as a PyTorch
view does ("y = x[0]; x += 1 changes y"; "values computed before a write keep what they read"), so the same
sequence of operations on numpy arrays and their views gives the values PyTorch would. Where PyTorch's
documented behaviour is not numpy's, the test quotes it.
"""
import math, sys
import numpy as np
import pytest
import vkml
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.nn.functional as F
from vkml.core.dtypes import (ShapeError, DTypeError, GradError, InplaceError, IndexOutOfRangeError, CheckpointError,
                         float32, float16, int32, int64, bool_)
from vkml.frontend.functions import ArgumentError, IndexingError, EinsumError
from vkml.core.ops import Op
from vkml.frontend.tensor import tensor, realize, Tensor

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]
TENSOR = sys.modules["vkml.frontend.tensor"]


def T(a, device="cpu", **kw): return tensor(a, device=device, **kw)   # Python floats: float32, as PyTorch


# ---------------------------------------------------------------- storage semantics against numpy views

def _views(x, a):
    "Pairs (vkML view, numpy view) of a (3, 4) base: rows, columns, a transpose, strided and reshaped views."
    return [(x[1], a[1]), (x[:, 2], a[:, 2]), (x.T, a.T), (x[1:, ::2], a[1:, ::2]), (x.reshape(2, 6), a.reshape(2, 6)),
            (x[::-1], a[::-1]), (x.detach(), a), (x[2].unsqueeze(0), a[2][None]), (x.T[1:3], a.T[1:3])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("seed", range(6))
def test_random_in_place_programs_match_numpy_views(device, seed):
    "Random writes into a base and its views: every live tensor, and every value computed before a write, as numpy."
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    x = T(a, device)
    if seed % 2: x.realize()                       # realized (ASSIGN may apply) or lazy (always functional)
    pairs = _views(x, a)
    olds = []
    for step in range(8):
        k = int(rng.integers(len(pairs)))
        v, av = pairs[k]
        olds.append((v * 2.0, av * 2))              # computed before the write: must keep the old values
        kind = int(rng.integers(6))
        if kind == 0: v.add_(1.5); av += np.float32(1.5)
        elif kind == 1: v.mul_(-2.0); av *= np.float32(-2.0)
        elif kind == 2: v.zero_(); av[...] = 0
        elif kind == 3:
            src = rng.standard_normal(av.shape).astype(np.float32)
            v.copy_(T(src, device)); av[...] = src
        elif kind == 4: v.clamp_(-0.5, 0.5); np.clip(av, -0.5, 0.5, out=av)
        else:
            v[..., :1] = 7.0; av[..., :1] = 7.0
        if rng.random() < 0.3: realize(x)           # realize in the middle: later writes may go in place
    np.testing.assert_allclose(x.numpy(), a, rtol=1e-6)
    for v, av in pairs: np.testing.assert_allclose(v.numpy(), av, rtol=1e-6)
    for t, ref in olds: np.testing.assert_allclose(t.numpy(), ref, rtol=1e-6)
    assert x._version == 8 and pairs[0][0]._version == 8


@pytest.mark.parametrize("device", DEVICES)
def test_a_write_into_a_realized_tensor_nothing_reads_is_an_assign(device):
    x = T(np.arange(6, dtype=np.float32), device)
    x.add_(1); x.mul_(2)
    assert x.node.op is Op.ASSIGN and x.node.srcs[0].op is Op.ASSIGN      # a chain of writes into one buffer
    x[2:4] = 0.0
    assert x.node.op is Op.ASSIGN
    np.testing.assert_array_equal(x.numpy(), [2, 4, 0, 0, 10, 12])
    x.add_(1)
    assert x.node.op is Op.ASSIGN and x.node.srcs[0].buf is not None         # realized: the write goes into it
    np.testing.assert_array_equal(x.numpy(), [3, 5, 1, 1, 11, 13])


@pytest.mark.parametrize("device", DEVICES)
def test_writes_stay_functional_when_something_else_reads_the_memory(device):
    x = T(np.ones(4, np.float32), device)
    pending = x + 0.0                       # a lazy reader of x's buffer
    x.add_(1)
    assert x.node.op is not Op.ASSIGN
    w = T(np.ones(4, np.float32), device)
    p = nn.Parameter(w)                     # shares w's buffer (as PyTorch's Parameter(w) shares its storage)
    with vkml.no_grad(): p.add_(1)
    assert p.node.op is not Op.ASSIGN       # the buffer has another holder: not provably ours
    v = x[1:]; v.realize()                  # a realized view aliases the memory
    x.mul_(3)
    assert x.node.op is not Op.ASSIGN
    np.testing.assert_array_equal(pending.numpy(), [1, 1, 1, 1])
    np.testing.assert_array_equal(w.numpy(), [1, 1, 1, 1]); np.testing.assert_array_equal(p.numpy(), [2, 2, 2, 2])
    np.testing.assert_array_equal(x.numpy(), [6, 6, 6, 6]); np.testing.assert_array_equal(v.numpy(), [6, 6, 6])


@pytest.mark.parametrize("device", DEVICES)
def test_reading_the_written_buffer_through_a_view_is_never_fused_with_the_write(device):
    "Regression: a kernel reading an ASSIGN's target reversed was merged with the write (a race on the GPU)."
    p = T(np.arange(8, dtype=np.float32), device)
    p.add_(1)
    q = p.flip(0) * 2
    np.testing.assert_array_equal(q.numpy(), (np.arange(8)[::-1] + 1) * 2)
    np.testing.assert_array_equal(p.numpy(), np.arange(8) + 1)
    r = T(np.arange(8, dtype=np.float32), device)
    before = r.flip(0) * 1.0                # read reversed before the write, realized with it
    r.add_(10)
    realize(before, r)
    np.testing.assert_array_equal(before.numpy(), np.arange(8)[::-1])


def test_in_place_rules_as_pytorch():
    x = T(np.zeros((2, 3), np.float32))
    with pytest.raises(ShapeError, match="single memory location"): x[0].expand(2, 3).add_(1)
    with pytest.raises(ShapeError, match="cannot change"): T(np.zeros(3, np.float32)).add_(T(np.ones((2, 3), np.float32)))
    with pytest.raises(DTypeError, match="keeps its tensor's dtype"): T(np.zeros(3, np.int64))._write(T(np.zeros(3, np.float32)), "t")
    y = T([1.0, 2.0]); alias = y
    y += 1                                  # in place: every name for the tensor sees it
    assert alias is y and y.tolist() == [2.0, 3.0]
    z = T(np.arange(6, dtype=np.float32)).reshape(2, 3).permute(1, 0).reshape(6)   # a copy in PyTorch: not a view
    assert z._base is None
    f = T([1.0, 2.0]); g = f.flip(0); g.add_(1)                                     # flip is a copy
    assert f.tolist() == [1.0, 2.0]


# ---------------------------------------------------------------- autograd

def test_leaves_and_views_of_leaves_refuse_in_place_ops_outside_no_grad():
    w = T([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(InplaceError, match="a leaf tensor that requires grad"): w.mul_(2)
    with pytest.raises(InplaceError, match="a view of a leaf"): w[0] = 5.0
    with vkml.no_grad():
        w[0] = 5.0; w.sub_(1)
    assert w.is_leaf and w.requires_grad and w.tolist() == [4.0, 1.0, 2.0]
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [8.0, 2.0, 4.0])


def test_a_detached_view_of_a_leaf_may_be_written():
    "PyTorch: `x.detach()` shares x's storage but does not require grad, so writing into it is allowed (and x sees it)."
    x = T([1.0, 2.0], requires_grad=True)
    x.detach().mul_(3)
    assert x.tolist() == [3.0, 6.0] and x.is_leaf and x.requires_grad and x._version == 1
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


@pytest.mark.parametrize("device", DEVICES)
def test_overlapping_copies_read_before_they_write(device):
    "x[1:] = x[:-1] shifts, as numpy's (and PyTorch's) copy of overlapping memory does."
    a = np.arange(6, dtype=np.float32)
    x = T(a, device); x.realize()
    x[1:] = x[:-1]; a[1:] = a[:-1].copy()
    np.testing.assert_array_equal(x.numpy(), a)
    y = T(np.arange(6, dtype=np.float32).reshape(2, 3), device); y.realize()
    y.T.add_(y.T)                                            # a write through a transpose reading it
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(6).reshape(2, 3))


def test_backward_refuses_a_saved_value_that_was_overwritten():
    "PyTorch: 'one of the variables needed for gradient computation has been modified by an inplace operation'."
    x = T([0.5, 1.5], requires_grad=True)
    h = x * 1.0
    y = h * h                               # MUL saves both inputs
    h.add_(1)
    with pytest.raises(InplaceError, match="modified by an inplace operation"): y.sum().backward()
    w = T([1.0, 2.0], requires_grad=True)
    out = (w * T([3.0, 4.0])).sum()
    with vkml.no_grad(): w.add_(1)          # an optimiser step between forward and backward: w was saved by MUL...
    out.backward()                          # ...but only for the other input's gradient, which nobody needs
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 4.0])


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_through_writes(device):
    "x[idx] = v and x[mask] = v: the overwritten elements pass no gradient to x; v gets the gradient of where it went."
    a = T(np.arange(12, dtype=np.float32).reshape(3, 4), device, requires_grad=True)
    v = T(np.array([10.0, 20.0], np.float32), device, requires_grad=True)
    x = a * 1.0
    x[[0, 2], [1, 3]] = v
    x[0, 2:] = 0.0
    x.add_(1)
    gout = np.arange(12, dtype=np.float32).reshape(3, 4)
    (x * T(gout, device)).sum().backward()
    want_a = gout.copy(); want_a[0, 1] = want_a[2, 3] = 0; want_a[0, 2:] = 0
    np.testing.assert_allclose(a.grad.numpy(), want_a)
    np.testing.assert_allclose(v.grad.numpy(), [gout[0, 1], gout[2, 3]])


# ---------------------------------------------------------------- out=

def test_out_writes_into_a_tensor_and_follows_pytorchs_rules():
    out = T(np.zeros((2, 2), np.float32)); view = out[0]
    r = VF.matmul(T(np.eye(2, dtype=np.float32)), T([[1.0, 2.0], [3.0, 4.0]]), out=out)
    assert r is out and view.tolist() == [1.0, 2.0]
    VF.sum(T([[1.0, 2.0], [3.0, 4.0]]), 0, out=view)
    assert out.tolist() == [[4.0, 6.0], [3.0, 4.0]]
    VF.cat([T([1]), T([2])], out=(i := T([0, 0])))
    assert i.tolist() == [1, 2]
    with pytest.raises(ShapeError, match="does not resize"): VF.exp(T([1.0, 2.0]), out=T([0.0]))
    with pytest.raises(DTypeError, match="never casts"): VF.add(T([1, 2]), 1, out=T([0.0, 0.0]))
    with pytest.raises(InplaceError, match="automatic differentiation"): VF.exp(T([1.0], requires_grad=True), out=T([0.0]))


# ---------------------------------------------------------------- indexing: reads and writes, every device

INDEXES = [([0, 2], [1, 1]), ([[0], [2]], [1, 3]), ([1, 0], slice(None), [3, 0]), (slice(1, None), [[0, 1], [2, 3]]),
           (Ellipsis, [-1, 0]), ([True, False, True],), (1, [True, False, False, True]), (None, [2, 0]), ([], slice(None))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("i", range(len(INDEXES)))
def test_advanced_read_and_write_match_numpy(device, i):
    idx = INDEXES[i]
    a = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    x = T(a, device)
    np.testing.assert_array_equal(x[idx].numpy(), a[idx])
    b = a.copy(); b[idx] = -1.0
    y = T(a, device); y[idx] = -1.0
    np.testing.assert_array_equal(y.numpy(), b)
    vals = np.full(a[idx].shape, 3.0, np.float32) + np.arange(a[idx].size, dtype=np.float32).reshape(a[idx].shape)
    c = a.copy(); c[idx] = vals
    z = T(a, device); z[idx] = T(vals, device)
    np.testing.assert_array_equal(z.numpy(), c)


def test_pytorchs_rules_where_they_are_not_numpys():
    "PyTorch applies ints as basic indices (x[:, [0], :, 0] keeps the index dim in place); NumPy moves it first."
    x = T(np.zeros((2, 3, 5, 7), np.float32))
    assert x[:, [0], :, 0].shape == (2, 1, 5)
    assert np.zeros((2, 3, 5, 7))[:, [0], :, 0].shape == (1, 2, 5)     # (NumPy's, for the record)
    assert x[0, True].shape == (1, 3, 5, 7) and x[0, :, False].shape == (3, 0, 5, 7)   # a Python bool: a new dim of 1 (or 0)


@pytest.mark.parametrize("device", DEVICES)
def test_index_put_and_scatter_repeats(device):
    "index_put_(accumulate=True) adds repeats (PyTorch); without it, vkML's SCATTER takes the last (PyTorch: undefined)."
    x = T(np.zeros(5, np.float32), device)
    x.index_put_((T([1, 1, 3], device),), T([1.0, 2.0, 4.0], device), accumulate=True)
    np.testing.assert_array_equal(x.numpy(), [0, 3, 0, 4, 0])
    y = T(np.zeros(5, np.float32), device)
    y[T([1, 1, 3], device)] = T([1.0, 2.0, 4.0], device)
    np.testing.assert_array_equal(y.numpy(), [0, 2, 0, 4, 0])
    b = T(np.zeros((2, 3), bool), device).scatter(1, T([[2, 0], [1, 1]], device), True)
    np.testing.assert_array_equal(b.numpy(), [[True, False, True], [False, True, False]])


@pytest.mark.parametrize("device", DEVICES)
def test_a_lazy_mask_write_reads_nothing(device):
    x = T(np.arange(6, dtype=np.float32), device)
    m = (x + 0.0) > 2.0
    x[m] = 0.0
    assert not m.node.realized                       # a WHERE: no host read of the mask
    np.testing.assert_array_equal(x.numpy(), [0, 1, 2, 0, 0, 0])
    y = T(np.arange(6, dtype=np.float32), device)
    assert y[(y + 0.0) > 3.0].tolist() == [4.0, 5.0]  # a read needs the mask's values: realized (documented)


def test_zero_d_index_tensors():
    x = T([1.0, 2.0, 3.0])
    assert x.index_select(0, T(np.int64(1))).tolist() == [2.0]
    assert T(np.float32(4.0)).gather(0, T(np.int64(0))).shape == ()
    assert T(np.float32(4.0)).scatter(0, T(np.int64(0)), T(np.float32(9.0))).tolist() == 9.0
    assert T(np.float32(4.0)).index_add(0, T([0]), T([2.0])).tolist() == 6.0


# ---------------------------------------------------------------- signatures

@pytest.mark.parametrize("device", DEVICES)
def test_integer_pow_on_every_device(device):
    "torch.pow of integers: exact (wrapping), and for a negative exponent 1 for 1, ±1 for -1, else 0."
    a = np.array([3, -3, 2, 1, -1, -1, 0, 5, 7, 2], np.int64)
    b = np.array([40, 41, 70, -5, -3, -4, -2, 0, 2 ** 30 + 1, 62], np.int64)
    want = []
    for x, e in zip(a.tolist(), b.tolist()):
        if e < 0: want.append(1 if x == 1 else ((1 if e % 2 == 0 else -1) if x == -1 else 0))
        else: r = pow(x, e, 1 << 64); want.append(r - (1 << 64) if r >= 1 << 63 else r)
    np.testing.assert_array_equal((T(a, device) ** T(b, device)).numpy(), want)
    np.testing.assert_array_equal((T(a[:4], device).int() ** 3).numpy(), a[:4].astype(np.int32) ** 3)
    s = (T(np.arange(300, dtype=np.int64) % 7, device) ** 3).sum()        # a reduction with pow in its prologue
    assert s.item() == int(((np.arange(300) % 7) ** 3).sum())


@pytest.mark.parametrize("device", DEVICES)
def test_einsum_in_full(device):
    r = np.random.default_rng(0)
    a, b, c = (r.standard_normal(s).astype(np.float32) for s in ((2, 3, 3), (3, 4), (4, 2)))
    for eq, ops in [("bii->bi", (a,)), ("bii", (a,)), ("...ij,jk", (a, b)), ("bij,jk,kl->bil", (a, b, c)), ("ij,ij", (b, b)),
                    ("ji", (b,))]:
        got = VF.einsum(eq, *(T(o, device) for o in ops)).numpy()
        np.testing.assert_allclose(got, np.einsum(eq, *ops), rtol=1e-4, atol=1e-5)
    # PyTorch, unlike NumPy, sums the dims an ellipsis covers when the explicit output leaves it out
    np.testing.assert_allclose(VF.einsum("...j->j", T(a, device)).numpy(), a.sum((0, 1)), rtol=1e-5)
    with pytest.raises(EinsumError): VF.einsum("ij->ii", T(b, device))


@pytest.mark.parametrize("device", DEVICES)
def test_bool_reductions(device):
    m = T(np.array([[True, False, True], [False, False, False]]), device)
    assert m.amax(1).tolist() == [True, False] and m.amin(0).tolist() == [False, False, False]
    assert m.any().item() and not m.all().item() and m.any(1).tolist() == [True, False]
    assert T(np.array([[1.0, 0.0], [2.0, 3.0]]).astype(np.float32), device).all(1).tolist() == [False, True]


def test_squeeze_masked_fill_and_norm_signatures():
    x = T(np.zeros((1, 3, 1, 2), np.float32))
    assert x.squeeze((0, 2)).shape == (3, 2) and x.squeeze((1,)).shape == (1, 3, 1, 2) and x.squeeze(()).shape == x.shape
    y = T([1.0, 2.0, 3.0]).masked_fill(T(np.array([[True], [False]])), 0.0)   # out of place: both broadcast (PyTorch)
    assert y.tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]
    v = np.array([3.0, 4.0, 0.5], np.float32)
    for p in (-2, -0.5, 0.5, 3, math.inf, -math.inf, 0):
        ref = {math.inf: np.abs(v).max(), -math.inf: np.abs(v).min(), 0: 3.0}[p] if p in (math.inf, -math.inf, 0) \
            else (np.abs(v) ** p).sum() ** (1 / p)
        assert math.isclose(T(v).norm(p).item(), ref, rel_tol=1e-5), p


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_padding_idx_gets_no_gradient(device):
    vkml.manual_seed(0)
    emb = nn.Embedding(5, 3, padding_idx=1).to(device)
    assert emb.weight.numpy()[1].tolist() == [0.0, 0.0, 0.0]
    emb(T([[1, 2], [1, 4]], device)).sum().backward()
    g = emb.weight.grad.numpy()
    assert g[1].tolist() == [0.0, 0.0, 0.0] and g[2].tolist() == [1.0, 1.0, 1.0] and g[0].tolist() == [0.0, 0.0, 0.0]


def test_pool_arguments_are_typed_errors():
    x = T(np.zeros((1, 1, 4, 4), np.float32))
    for bad in [lambda: F.max_pool2d("x", 2), lambda: F.max_pool2d(x, 2, padding=-1), lambda: F.max_pool2d(x, 2, dilation=0),
                lambda: F.max_pool2d(x, 2, ceil_mode="yes"), lambda: F.avg_pool2d(x, 2, divisor_override=1.5),
                lambda: F.adaptive_avg_pool2d(x, "2"), lambda: F.adaptive_max_pool2d(x, (2,)), lambda: F.max_pool2d(x, (2, 2, 2)),
                lambda: F.max_unpool2d(x, T(np.zeros((1, 1, 4, 4), np.int32)), 2), lambda: F.max_unpool2d(x, x.long(), 2, output_size=(99, 99))]:
        with pytest.raises(vkml.VkmlError): bad()


# ---------------------------------------------------------------- weights from elsewhere

def test_load_reads_plain_safetensors_files(tmp_path):
    from safetensors.numpy import save_file
    import json, struct
    save_file({"a.weight": np.ones((2, 3), np.float32), "a.n": np.array(5, np.int64), "m": np.array([True, False])},
              tmp_path / "plain.safetensors")
    sd = vkml.load(tmp_path / "plain.safetensors", device="cpu")
    assert list(sd) == ["a.n", "a.weight", "m"] and sd["a.n"].shape == () and sd["m"].dtype is bool_
    vals = np.array([1.5, -2.0, 3.25, 1e-3], np.float32)                     # bfloat16: float32's top 16 bits
    raw = (vals.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    hdr = json.dumps({"w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, len(raw)]}}).encode()
    (tmp_path / "bf16.safetensors").write_bytes(struct.pack("<Q", len(hdr)) + hdr + raw)
    w = vkml.load(tmp_path / "bf16.safetensors")["w"]
    np.testing.assert_array_equal(w.numpy(), ((vals.view(np.uint32) >> 16) << 16).view(np.float32).reshape(2, 2))
    save_file({"q": np.ones(2, np.int8)}, tmp_path / "i8.safetensors")
    with pytest.raises(CheckpointError, match="I8"): vkml.load(tmp_path / "i8.safetensors")


def test_load_state_dict_reports_like_pytorch():
    m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    sd = {k: v.numpy() for k, v in m.state_dict().items()}
    del sd["1.num_batches_tracked"]                                         # an old checkpoint: not reported missing
    r = m.load_state_dict(sd | {"extra": np.zeros(1, np.float32)}, strict=False)
    assert r.missing_keys == [] and r.unexpected_keys == ["extra"] and m[1].num_batches_tracked.item() == 0
    del sd["0.bias"]
    with pytest.raises(nn.StateDictError) as e: m.load_state_dict(sd | {"extra": np.zeros(1, np.float32)})
    assert 'Missing key(s) in state_dict: "0.bias".' in str(e.value) and 'Unexpected key(s) in state_dict: "extra".' in str(e.value)
    v = m[0].weight[0]                                                       # a view of a parameter sees a load
    m.load_state_dict(sd | {"0.bias": np.zeros(3, np.float32), "0.weight": np.full((3, 2), 2.0, np.float32)})
    assert v.tolist() == [2.0, 2.0]
