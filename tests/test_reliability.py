"""Reliability: no silent wrong answers, typed errors, flat resources, the threading model, safe files.

One test (or one parametrized row) per item of the reliability issue; each fails on the code before the
fix (commit 956e649) — the docstrings say how. Vulkan tests run on the default device (lavapipe in CI).
"""
import copy, gc, json, math, os, pickle, signal, subprocess, sys, threading, time
from pathlib import Path
import numpy as np
import pytest
import vkml
import vkml.frontend.functions as VF
import vkml.nn as nn
import vkml.nn.functional as F
from vkml.core.dtypes import (VkmlError, DTypeError, ShapeError, IndexOutOfRangeError, EmptyReductionError, OutOfMemoryError,
                         BackendError, CheckpointError)
from vkml.frontend.functions import ArgumentError

ROOT = Path(__file__).resolve().parents[1]
DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


def t(data, device, dtype=None): return vkml.tensor(data, dtype=dtype, device=device)


# ---------------------------------------------------------------- counts past 2^31
@pytest.mark.vulkan
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_a_sum_over_2_to_the_32_broadcast_elements_counts_them_all(dtype):
    "Before: the Vulkan reduction counted terms with 32-bit words (2^32 wrapped to 0) and crashed on a constant."
    x = VF.ones(1, dtype=dtype, device="vulkan").expand(2**16, 2**16)
    want = 2**32
    assert x.sum().item() == want
    if dtype == "float32":
        assert x.mean().item() == 1.0 and x.amax().item() == 1.0
        y = t(np.array([[1.5], [-2.0]], np.float32), "vulkan").expand(2, 2**32)   # a stored tensor, broadcast
        np.testing.assert_allclose(y.sum(1).numpy(), [1.5 * 2**32, -2.0 * 2**32], rtol=1e-6)


@pytest.mark.vulkan
def test_more_than_2_31_elements_through_an_elementwise_kernel_is_a_typed_error():
    "A kernel that would index 2^32 elements with 32-bit integers refuses (on lavapipe: out of memory first)."
    x = VF.ones(1, device="vulkan").expand(2**16, 2**16)
    with pytest.raises((BackendError, OutOfMemoryError)): (x * 2).sum().item()
    assert (VF.ones(3, device="vulkan") * 2).sum().item() == 6.0    # the device keeps working


@pytest.mark.vulkan
def test_constants_seen_through_views_are_computed_for_every_kernel():
    "Before the fix these raised AttributeError: the schedule folded the constant away and the kernel read nothing."
    c = VF.ones(1, device="vulkan").expand(3)
    assert c.numpy().tolist() == [1.0] * 3
    assert VF.cat([c, c]).numpy().tolist() == [1.0] * 6 and c.cumsum(0).numpy().tolist() == [1.0, 2.0, 3.0]
    assert (VF.ones(1, 1, device="vulkan").expand(2, 3) @ VF.ones(3, 2, device="vulkan")).numpy().tolist() == [[3.0] * 2] * 2
    m = t(np.array([True, False]), "vulkan")
    x2 = VF.ones(device="vulkan")                       # computed first (held), then read as a constant's view
    assert VF.where(m, x2, -math.inf).numpy().tolist() == [1.0, -math.inf]


# ---------------------------------------------------------------- indices computed on the device
def _computed(values, device):
    "int64 indices the host does not know: computed from data on `device`."
    return t(np.asarray(values, np.int64) - 1, device) + 1

BAD_INDEX = {
    "indexing": lambda d: t(np.arange(12.0, dtype=np.float32).reshape(4, 3), d)[_computed([0, -5], d)],   # (-1 is the last row)
    "indexing, two dims": lambda d: t(np.arange(12.0, dtype=np.float32).reshape(4, 3), d)[_computed([0, 1], d), _computed([0, 3], d)],
    "setitem": lambda d: _setitem(t(np.zeros((4, 3), np.float32), d), _computed([1, 4], d), 1.0),
    "index_put_": lambda d: t(np.zeros(3, np.float32), d).index_put_((_computed([0, 3], d),), t(np.ones(2, np.float32), d), accumulate=True),
    "scatter": lambda d: t(np.zeros((2, 3), np.float32), d).scatter(1, _computed([[0], [5]], d).reshape(2, 1), 1.0),
    "index_select": lambda d: t(np.ones((4, 3), np.float32), d).index_select(1, _computed([3], d)),
    "gather": lambda d: t(np.ones((2, 3), np.float32), d).gather(1, _computed([[0], [5]], d).reshape(2, 1)),
    "index_add": lambda d: t(np.zeros(3, np.float32), d).index_add(0, _computed([0, 7], d), t(np.ones(2, np.float32), d)),
    "embedding": lambda d: F.embedding(_computed([1, 9], d), t(np.ones((4, 2), np.float32), d)),
    "one_hot": lambda d: VF.one_hot(_computed([0, 4], d), 3),
    "cross_entropy": lambda d: F.cross_entropy(t(np.zeros((2, 3), np.float32), d), _computed([1, 3], d)),
    "nll_loss": lambda d: F.nll_loss(t(np.zeros((2, 3), np.float32), d), _computed([-7, 0], d)),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(BAD_INDEX))
def test_an_out_of_range_index_computed_on_the_device_is_a_typed_error(op, device):
    """Before: on Vulkan the kernels clamped computed indices (index -1 read row 0) and returned an answer;
    one_hot gave a row of zeros on both devices. Now the error names the op and the bad value."""
    with pytest.raises(IndexOutOfRangeError, match=op.split(",")[0]) as e:
        BAD_INDEX[op](device).numpy()
    assert re_bad(str(e.value))
    # the device keeps working, and what did not read the bad indices is unaffected
    assert (t([1.0, 2.0], device) * 3).numpy().tolist() == [3.0, 6.0]

def re_bad(msg): return any(f"index {v}" in msg for v in (-5, 3, 5, 7, 9, 4, -7))

def _setitem(x, idx, v):
    x[idx] = v
    return x


@pytest.mark.vulkan
def test_results_of_a_realize_with_a_bad_index_raise_when_read():
    "Every result of the realize that read a bad computed index raises; later realizes that do not read them are fine."
    x = t(np.arange(6.0, dtype=np.float32).reshape(3, 2), "vulkan")
    y = x[_computed([0, 5], "vulkan")] * 2       # bad
    z = y.sum()                                  # depends on it
    vkml.realize(y, z)
    for r in (y, z):
        with pytest.raises(IndexOutOfRangeError, match="index 5"): r.numpy()
    with pytest.raises(IndexOutOfRangeError): (z + 1).numpy()      # a later realize that reads it
    assert (x + 1).numpy()[2].tolist() == [5.0, 6.0]
    empty = t(np.zeros((0, 2, 1), np.float32), "vulkan").index_select(1, _computed([0, 3], "vulkan"))
    with pytest.raises(IndexOutOfRangeError): empty.numpy()           # even when the result is empty


@pytest.mark.vulkan
def test_a_replayed_step_with_a_bad_index_raises():
    """vkml.jit replays a captured step without its Python, so indices the host has are checked on the device
    there. Before (the merge with main): a replay's error flags were set but never read, and an embedding row
    or class target out of range gave a clamped answer. Now the replay raises when its result is read, and the
    next replay with good indices is right."""
    emb = t(np.arange(10.0, dtype=np.float32).reshape(5, 2), "vulkan")
    step = vkml.jit(lambda i: F.embedding(i, emb) * 2)
    for k in range(3): assert step(t([1, k], "vulkan")).numpy().tolist() == [[4.0, 6.0], [4.0 * k, 4.0 * k + 2]]
    assert step.captured == 1
    with pytest.raises(IndexOutOfRangeError, match="embedding: index 7"): step(t([1, 7], "vulkan")).numpy()
    assert step(t([4, 0], "vulkan")).numpy().tolist() == [[16.0, 18.0], [0.0, 2.0]]

    vkml.manual_seed(0)
    model = nn.Linear(4, 3).to("vulkan")
    opt = vkml.optim.SGD(model.parameters(), lr=0.1)
    def train(x, y):
        opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step()
        return loss
    train = vkml.jit(train)
    x = t(np.ones((2, 4), np.float32), "vulkan")
    for _ in range(3): train(x, t([0, 2], "vulkan")).item()
    with pytest.raises(IndexOutOfRangeError, match="index 3"): train(x, t([0, 3], "vulkan")).item()
    assert math.isfinite(train(x, t([1, 2], "vulkan")).item())


@pytest.mark.vulkan
def test_index_check_error_names_the_position_and_ignore_index():
    tgt = _computed([1, -100, 4], "vulkan")
    with pytest.raises(IndexOutOfRangeError) as e:
        F.cross_entropy(t(np.zeros((3, 3), np.float32), "vulkan"), tgt).item()
    assert "index 4 at position (2,)" in str(e.value) and "ignore_index=-100" in str(e.value)
    ok = F.cross_entropy(t(np.zeros((3, 3), np.float32), "vulkan"), _computed([1, -100, 2], "vulkan")).item()
    assert abs(ok - math.log(3)) < 1e-6


# ---------------------------------------------------------------- silent wrong answers the restructure fixed
@pytest.mark.parametrize("device", DEVICES)
def test_clamp_with_a_nan_bound_gives_nan(device):
    "Before: the Vulkan clamp ignored a NaN bound (GLSL's min/max return the other operand)."
    x = t([1.0, -2.0, 5.0], device)
    assert np.isnan(x.clamp(min=math.nan).numpy()).all() and np.isnan(x.clamp(max=math.nan).numpy()).all()


@pytest.mark.parametrize("device", DEVICES)
def test_python_ints_beyond_the_dtype_and_arange_past_int32_are_refused(device):
    "Before: tensor([2**40], dtype=int32) wrapped, and arange past int32 wrapped."
    with pytest.raises(DTypeError): t([2**40], device, vkml.int32)
    with pytest.raises(DTypeError): t([2**64], device)
    with pytest.raises(DTypeError): VF.arange(2**31 - 2, 2**31 + 2, dtype=vkml.int32, device=device)
    assert VF.arange(2**31 - 2, 2**31 + 2, device=device).numpy()[-1] == 2**31 + 1


@pytest.mark.parametrize("call", [
    lambda: VF.arange(0, math.nan), lambda: VF.arange(0, math.inf), lambda: VF.arange(-3, 10**400),
    lambda: VF.arange(0.0, 10**400, 1.5), lambda: VF.linspace([1, 2], 3.0, 4), lambda: VF.linspace(-10**400, 1.0, 2)],
    ids=["nan", "inf", "10**400", "float 10**400", "linspace list", "linspace 10**400"])
def test_arange_and_linspace_refuse_what_is_not_a_finite_number(call):
    "Before: ValueError/OverflowError/TypeError from Python (or a wrapped size)."
    with pytest.raises(VkmlError): call()


@pytest.mark.parametrize("device", DEVICES)
def test_hardtanh_and_maximum_refuse_bad_arguments(device):
    "Before: hardtanh(1, -1) and maximum(x, 2.0) raised nothing (or a TypeError from Python)."
    x = t([0.5, 2.0], device)
    with pytest.raises(ArgumentError): VF.hardtanh(x, 1.0, -1.0)
    with pytest.raises(DTypeError): VF.hardtanh(x, "a", 1.0)
    with pytest.raises(DTypeError): VF.maximum(x, 2.0)
    with pytest.raises(DTypeError): VF.minimum(x, [1.0, 2.0])
    with pytest.raises(DTypeError): VF.maximum(x, t([1, 2], device))


CONV_POOL = {
    "conv2d dilation 0": lambda x, w: F.conv2d(x, w, dilation=0),
    "conv2d padding -1": lambda x, w: F.conv2d(x, w, padding=-1),
    "conv2d stride 0": lambda x, w: F.conv2d(x, w, stride=0),
    "conv2d groups 'x'": lambda x, w: F.conv2d(x, w, groups="x"),
    "conv_transpose2d stride 0": lambda x, w: F.conv_transpose2d(x, w.permute(1, 0, 2, 3), stride=0),
    "conv_transpose2d padding -1": lambda x, w: F.conv_transpose2d(x, w.permute(1, 0, 2, 3), padding=-1),
    "max_pool2d dilation 0": lambda x, w: F.max_pool2d(x, 2, dilation=0),
    "max_pool2d padding -1": lambda x, w: F.max_pool2d(x, 2, padding=-1),
    "avg_pool2d stride 0": lambda x, w: F.avg_pool2d(x, 2, stride=0),
    "unfold stride 0": lambda x, w: F.unfold(x, 2, stride=0),
    "fold dilation 0": lambda x, w: F.fold(F.unfold(x, 2), (5, 5), 2, dilation=0),
    "adaptive_avg_pool2d 'x'": lambda x, w: F.adaptive_avg_pool2d(x, "x"),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(CONV_POOL))
def test_conv_and_pool_refuse_zero_dilation_zero_stride_and_negative_padding(case, device):
    "Before: dilation=0 and negative padding computed something; stride=0 raised ZeroDivisionError."
    x, w = t(np.ones((1, 3, 5, 5), np.float32), device), t(np.ones((2, 3, 2, 2), np.float32), device)
    with pytest.raises(ArgumentError): CONV_POOL[case](x, w)


# ---------------------------------------------------------------- untyped errors
UNTYPED = {
    "tensor + 10**400": (lambda d: t([1.0], d) + 10**400, DTypeError),
    "ragged list": (lambda d: t([[1, 2], [3]], d), ShapeError),
    "group_norm, empty batch": (lambda d: F.group_norm(t(np.zeros((0, 4, 2), np.float32), d), 2), None),
    "cross_entropy, empty batch": (lambda d: F.cross_entropy(t(np.zeros((0, 3), np.float32), d), t(np.zeros(0, np.int64), d)), EmptyReductionError),
    "nll_loss, empty batch": (lambda d: F.nll_loss(t(np.zeros((0, 3), np.float32), d), t(np.zeros(0, np.int64), d)), EmptyReductionError),
    "kl_div batchmean, empty batch": (lambda d: F.kl_div(t(np.zeros((0, 3), np.float32), d), t(np.zeros((0, 3), np.float32), d), reduction="batchmean"), EmptyReductionError),
    "cross_entropy, a non-tensor target": (lambda d: F.cross_entropy(t(np.zeros((2, 3), np.float32), d), object()), DTypeError),
    "leaky_relu, a list slope": (lambda d: F.leaky_relu(t([1.0], d), [1, 2]), DTypeError),
    "tensor / 'x'": (lambda d: t([1.0], d) / "x", DTypeError),
    "None - tensor": (lambda d: None - t([1.0], d), DTypeError),
    "tensor < ()": (lambda d: t([1.0], d) < (), DTypeError),
    "tensor * [1, 2]": (lambda d: t([1.0], d) * [1, 2], DTypeError),
    "tensor @ ndarray": (lambda d: t([[1.0]], d) @ np.ones((1, 1), np.float32), DTypeError),
    "to('int8')": (lambda d: t([1.0], d).to("int8"), DTypeError),
    "softplus beta None": (lambda d: F.softplus(t([1.0], d), beta=None), DTypeError),
}

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", sorted(UNTYPED))
def test_bad_input_raises_a_typed_error(case, device):
    "Before: OverflowError, ValueError, ZeroDivisionError, TypeError from Python, AttributeError, or NaN."
    f, exc = UNTYPED[case]
    if exc is None:                                                  # works: an empty batch stays empty
        assert f(device).shape == (0, 4, 2); return
    with pytest.raises(exc):
        r = f(device)
        if isinstance(r, vkml.Tensor): r.numpy()
    assert t([2.0], device).item() == 2.0


def test_tensor_equals_none_keeps_pythons_fallback():
    assert (t([1.0], "cpu") == None) is False and (t([1.0], "cpu") != "x") is True   # noqa: E711


def test_host_out_of_memory_is_a_typed_error():
    "Before: numpy's MemoryError (or ValueError 'array is too big') escaped from the CPU backend."
    with pytest.raises(OutOfMemoryError, match="CPU"): VF.zeros(2**40, 2**10).numpy()
    assert VF.ones(3).sum().item() == 3.0


def test_optimisers_refuse_hyperparameters_that_are_not_numbers():
    "Before: lr='x' raised TypeError from a comparison."
    p = nn.Linear(2, 2).parameters()
    for make in (lambda: vkml.optim.SGD(p, lr="x"), lambda: vkml.optim.Adam(p, lr=math.nan),
                 lambda: vkml.optim.Adam(p, betas="ab"), lambda: vkml.optim.RMSprop(p, alpha=None),
                 lambda: vkml.optim.AdamW(p, weight_decay=[0.1])):
        with pytest.raises(vkml.optim.OptimizerError): make()


@pytest.mark.parametrize("device", DEVICES)
def test_deepcopy_and_pickle_of_tensors_and_modules(device):
    "Before: deepcopy/pickle of a Vulkan tensor raised (cdata cannot be pickled)."
    m = nn.Sequential(nn.Linear(3, 2), nn.ReLU()).to(device)
    x = t(np.ones((1, 3), np.float32), device)
    for m2 in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):
        np.testing.assert_array_equal(m2(x).numpy(), m(x).numpy())
        assert m2[0].weight.device == m[0].weight.device and m2[0].weight.requires_grad
    y = pickle.loads(pickle.dumps(x * 2))
    assert y.device == x.device and y.numpy().tolist() == [[2.0] * 3]


# ---------------------------------------------------------------- messages that name the fix, and what was wrong
@pytest.mark.vulkan
def test_a_view_of_a_tensor_larger_than_one_binding_binds_just_its_range(monkeypatch):
    "Before (lavapipe, 128 MiB bindings): `big[:10].contiguous()` failed because the view bound all of `big`."
    from vkml.backends.vulkan.recorder import runtime
    from vkml.backends.vulkan.device import get_device
    rt = runtime(get_device())
    monkeypatch.setattr(rt, "max_range", 1 << 20)             # 1 MiB bindings: the same code path on every device
    a = np.arange(3 << 18, dtype=np.float32)                  # 3 MiB, uploaded
    big = t(a, "vulkan")
    assert big[:10].contiguous().numpy().tolist() == a[:10].tolist()
    assert (big[-5:] * 2).numpy().tolist() == (a[-5:] * 2).tolist()
    assert big[2**19:2**19 + 3].sum().item() == float(a[2**19:2**19 + 3].sum())
    with pytest.raises(BackendError, match="split the tensor"): big.sum().item()   # all of it: the message names the fix


# ---------------------------------------------------------------- checkpoints
def test_checkpoint_keeps_int_keys_and_tells_1_from_the_string_1(tmp_path):
    "Before: int keys came back as strings, and {1: a, '1': b} failed ('both named')."
    state = {1: t([1.0], "cpu"), "1": t([2.0], "cpu"), "a.b": t([3.0], "cpu"), "a": {"b": t([4.0], "cpu")},
             "opt": {0: {"step": 3}, 2.5: None, None: "x"}}
    vkml.save(state, tmp_path / "c.safetensors")
    back = vkml.load(tmp_path / "c.safetensors")
    assert set(back) == {1, "1", "a.b", "a", "opt"} and back[1].item() == 1.0 and back["1"].item() == 2.0
    assert back["a.b"].item() == 3.0 and back["a"]["b"].item() == 4.0
    assert back["opt"] == {0: {"step": 3}, 2.5: None, None: "x"}


def _with_metadata(path, tree):
    from safetensors.numpy import save_file
    save_file({"w": np.zeros(2, np.float32)}, str(path), metadata={"vkml": json.dumps(tree)})

@pytest.mark.parametrize("tree", [
    {"dict": "oops"}, {"dict": [[["unhashable"], {"value": 1}]]}, {"dict": [["k", {"value": 1}], ["k", {"value": 2}]]},
    {"tensor": ["w"]}, {"list": 3}, {"tensor": "w", "ndarray": False, "extra": {"list": [{"tensor": "w"}]}},
    {"list": [{"tensor": "w"}, {"tensor": "w"}]}, 7, {"dict": [[1]]},
], ids=["dict not a list", "unhashable key", "key twice", "tensor name not a str", "list not a list", "extra keys",
        "tensor twice", "a number", "pair of one"])
def test_crafted_checkpoint_metadata_is_a_checkpoint_error(tmp_path, tree):
    "Before: TypeError, ValueError or a silent merge of duplicate keys."
    _with_metadata(tmp_path / "c.safetensors", tree)
    try: vkml.load(tmp_path / "c.safetensors")
    except CheckpointError: pass
    else: assert tree == {"tensor": "w", "ndarray": False, "extra": {"list": [{"tensor": "w"}]}}   # extra keys ignored


def test_deeply_nested_checkpoint_metadata_is_a_checkpoint_error(tmp_path):
    from safetensors.numpy import save_file     # the JSON itself is nested past Python's recursion limit
    save_file({"w": np.zeros(1, np.float32)}, str(tmp_path / "c.safetensors"),
              metadata={"vkml": '{"list": [' * 5000 + '{"value": 1}' + ']}' * 5000})
    with pytest.raises(CheckpointError): vkml.load(tmp_path / "c.safetensors")


def test_saving_an_object_that_contains_itself_is_a_checkpoint_error(tmp_path):
    "Before: RecursionError."
    a = [t([1.0], "cpu")]; a.append(a)
    with pytest.raises(CheckpointError, match="contains itself"): vkml.save({"a": a}, tmp_path / "c.safetensors")
    d = {}; d["me"] = d
    with pytest.raises(CheckpointError): vkml.save(d, tmp_path / "c.safetensors")
    shared = [1, 2]
    vkml.save({"x": shared, "y": shared}, tmp_path / "ok.safetensors")      # shared but not cyclic: fine
    assert vkml.load(tmp_path / "ok.safetensors") == {"x": [1, 2], "y": [1, 2]}


KILLED_SAVE = r"""
import os, signal, sys, numpy as np, vkml, safetensors.numpy as sn
def dies(arrays, path, metadata=None):
    open(path, "wb").write(b"half a checkpoint")
    os.kill(os.getpid(), signal.SIGKILL)
sn.save_file = dies
vkml.save({"w": vkml.tensor([1.0])}, sys.argv[1])
"""

def test_a_killed_save_leaves_no_temporary_file_behind(tmp_path):
    "Before: a save killed between writing and renaming left its .tmp file forever."
    path = tmp_path / "c.safetensors"
    r = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], cwd=ROOT)
    assert r.returncode == -signal.SIGKILL
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]    # the kill left one
    vkml.save({"w": t([2.0], "cpu")}, path)                                    # the next save cleans it up
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.safetensors"]
    assert vkml.load(path)["w"].item() == 2.0


# ---------------------------------------------------------------- leftovers
def test_dead_weak_references_do_not_pile_up_in_the_deferred_list():
    "Before: every `backward()` whose loss was dropped unread left a dead reference until the next realize."
    from vkml.core.graph import defer, _deferred
    for _ in range(10_000):
        x = VF.ones(2) * 2
        defer(x)
        del x
    assert len(_deferred.get("cpu", ())) <= 64
    _deferred.pop("cpu", None)


# ---------------------------------------------------------------- threads
@pytest.mark.parametrize("device", DEVICES)
def test_two_threads_realizing_on_one_device_get_right_answers(device):
    """The threading model: one lock per device serializes realize, upload and read. Before: wrong sums, or an
    AssertionError in dispatch.py (two recorders took the same submission serial)."""
    errors, wrong = [], []
    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in range(150):
                a = rng.standard_normal((17, 5)).astype(np.float32)
                x = t(a, device)
                s = ((x * 2 + 1).sum(0) + x.amax()).numpy()
                if not np.allclose(s, (a * 2 + 1).sum(0) + a.max(), rtol=1e-4, atol=1e-4): wrong.append((seed, i))
        except Exception as e: errors.append(repr(e))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads: th.start()
    for th in threads: th.join()
    assert not errors and not wrong, (errors[:3], wrong[:3])


@pytest.mark.vulkan
def test_a_jit_capture_and_replays_beside_other_threads():
    """A vkml.jit capture holds the device's lock from start to end, and so does each replay. Before: another
    thread's realize in the middle of a capture was recorded into it (and its .numpy() raised JitError), so
    the replays ran the other thread's work too."""
    errors, wrong = [], []
    def jitted(seed):
        rng = np.random.default_rng(seed)
        w = t(rng.standard_normal((5, 3)).astype(np.float32), "vulkan")
        step = vkml.jit(lambda x: (x @ w).relu().sum(0))
        try:
            for i in range(40):
                a = rng.standard_normal((4, 5)).astype(np.float32)
                got = step(t(a, "vulkan")).numpy()
                if not np.allclose(got, np.maximum(a @ w.numpy(), 0).sum(0), rtol=1e-4, atol=1e-4): wrong.append(("jit", seed, i))
        except Exception as e: errors.append(repr(e))
    def eager(seed):
        rng = np.random.default_rng(seed)
        try:
            for i in range(60):
                a = rng.standard_normal(33).astype(np.float32)
                if not np.isclose((t(a, "vulkan") * 3).sum().item(), (a * 3).sum(), rtol=1e-4, atol=1e-4): wrong.append(("eager", seed, i))
        except Exception as e: errors.append(repr(e))
    ths = [threading.Thread(target=f, args=(s,)) for s, f in enumerate([jitted, jitted, eager, eager])]
    for th in ths: th.start()
    for th in ths: th.join()
    assert not errors and not wrong, (errors[:3], wrong[:3])


@pytest.mark.parametrize("device", DEVICES)
def test_threads_sharing_a_lazy_graph_compute_it_once(device):
    "Two threads reading the same unrealized tensor: both get its value (the second finds it realized)."
    a = np.arange(1000, dtype=np.float32)
    y = (t(a, device) * 3).sum()
    out = []
    ths = [threading.Thread(target=lambda: out.append(y.item())) for _ in range(4)]
    for th in ths: th.start()
    for th in ths: th.join()
    assert out == [float(a.sum() * 3)] * 4


# ---------------------------------------------------------------- resources
# 1,000 training, inference and replayed steps keep memory, RSS and Vulkan object counts flat: tests/test_memory.py.
from test_memory import vk_objects as _vk_objects   # (the reliability table in nbs/52_fuzz.ipynb uses it)


CLOSE_CYCLES = r"""
import gc, json, os, sys, numpy as np, vkml, vkml.backends.vulkan as V
def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
out = []
for cycle in range(12):
    m = vkml.nn.Linear(64, 64).to("vulkan")
    x = vkml.tensor(np.ones((16, 64), np.float32), device="vulkan")
    for _ in range(20): (m(x).relu() * 2).sum().item()
    del m, x; gc.collect()
    V.close()
    assert not V.device._open and V.device._instance is None
    out.append(rss())
print(json.dumps(dict(rss=out, msgs=V.validation_messages())))
"""

@pytest.mark.vulkan
def test_close_releases_everything_and_reopening_leaks_nothing():
    "vkml.close() destroys every Vulkan object (the validation layer reports any left) and RSS stays flat over cycles."
    env = dict(os.environ, VKML_VALIDATION="1")
    r = subprocess.run([sys.executable, "-c", CLOSE_CYCLES], capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["msgs"] == [], out["msgs"][:3]
    rss = out["rss"]
    assert rss[-1] - rss[3] < 48, f"RSS over open/close cycles: {[round(v) for v in rss]} MiB"


@pytest.mark.vulkan
def test_out_of_device_memory_is_typed_and_the_device_keeps_working():
    from vkml.backends.vulkan.device import get_device
    heap = max(s for s, _ in get_device().info.memory["heaps"])
    base = vkml.memory_stats("vulkan")["bytes_in_use"]
    keep = t(np.arange(10, dtype=np.float32), "vulkan") * 2
    keep.numpy()
    for _ in range(3):
        with pytest.raises(OutOfMemoryError, match="cannot allocate"):
            (VF.ones(heap // 2, device="vulkan") + keep.sum()).numpy()     # 2x the heap, in one realize with other work
    gc.collect()
    assert vkml.memory_stats("vulkan")["bytes_in_use"] <= base + 1 << 20
    assert (keep + 1).numpy().tolist() == [2.0 * i + 1 for i in range(10)]
    assert F.softmax(t([0.0, 0.0], "vulkan"), 0).numpy().tolist() == [0.5, 0.5]


@pytest.mark.vulkan
def test_filling_the_heap_is_a_typed_error_and_frees_everything():
    """Many allocations, each fine, until the heap is full. Before: lavapipe's driver granted blocks past its
    2 GiB heap from the host's RAM until the kernel killed the process; now the pools count every block against
    its heap and the allocation past it is an OutOfMemoryError (a GPU driver refuses near there too: the H200
    run shows it, bench/h200_reliability.py)."""
    from vkml.backends.vulkan.device import get_device
    heap = max(s for s, _ in get_device().info.memory["heaps"])
    if heap > 8 << 30: pytest.skip("a device heap larger than 8 GiB: filled on the H200 run instead")
    base = vkml.memory_stats("vulkan")["bytes_in_use"]
    held, chunk = [], 64 << 20
    with pytest.raises(OutOfMemoryError, match="cannot allocate"):
        for _ in range(int(1.5 * heap / chunk) + 1):     # (without the check: 1.5x the heap, granted)
            held.append(VF.ones(chunk // 4, device="vulkan")); vkml.realize(held[-1])
    assert 0 < len(held) * chunk <= heap
    del held; gc.collect()
    assert vkml.memory_stats("vulkan")["bytes_in_use"] <= base + (1 << 20)
    assert (VF.ones(3, device="vulkan") * 2).sum().item() == 6.0


@pytest.mark.vulkan
def test_softmax_over_a_dim_of_size_one_compiles_on_vulkan():
    "Before: the fused reduce kernel read a prologue value outside its loop ('v1: undeclared identifier')."
    for shape, d in [((3, 1), 1), ((1,), 0), ((), 0)]:
        x = t(np.full(shape, 0.3, np.float32), "vulkan")
        assert np.allclose(F.softmax(F.softmax(x, d), d).numpy(), np.ones(shape))


@pytest.mark.vulkan
def test_scalars_past_float32_become_inf_as_in_the_oracle():
    "Before: `x - 1e308` raised OverflowError packing the push constant; leaky_relu's slope was unrounded on the CPU."
    for dev in ("cpu", "vulkan"):
        x = t([0.0, -1.0, 2.0], dev)
        assert (x - 1e308).numpy().tolist() == [-math.inf] * 3
        r = F.leaky_relu(x, 1e308).numpy()
        assert np.isnan(r[0]) and r[1] == -math.inf and r[2] == 2.0, (dev, r)
        h = t(np.array([np.inf, 1.0], np.float16), dev)       # 2**63 is inf in float16: a kernel compared in float32
        assert (h != 2**63).numpy().tolist() == [False, True], dev


# ---------------------------------------------------------------- the validation layer in CI
@pytest.mark.vulkan
def test_ci_runs_every_vulkan_test_under_the_validation_layer_with_sync_validation():
    "CI (VKML_REQUIRE_VULKAN=1) runs `make test`, which sets VKML_VALIDATION=1: the layer must really be loaded."
    from conftest import env_flag
    if not env_flag("VKML_REQUIRE_VULKAN") and not env_flag("VKML_VALIDATION"):
        pytest.skip("outside CI and without VKML_VALIDATION=1 (make test sets it)")
    from vkml.backends.vulkan.device import instance
    vk = vkml.backends.vulkan.device.vk_module()
    inst = instance()
    assert os.environ.get("VKML_VALIDATION") == "1" and inst.validation and inst.messenger is not None
    assert list(inst._enables) == [vk.VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT]
    assert os.environ.get("VKML_VALIDATION_LOG"), "child processes' messages would be lost"


LEAKY_CHILD = r"""
import vkml.backends.vulkan as V
from vkml.backends.vulkan.device import get_device
dev = get_device(); vk = dev.vk
vk.vkCreateBuffer(dev.handle, vk.VkBufferCreateInfo(size=256, usage=vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT), None)
V.close()
"""

@pytest.mark.vulkan
def test_a_child_process_validation_message_reaches_the_suite(tmp_path):
    "The messages of a process a test starts go to VKML_VALIDATION_LOG, which the autouse fixture reads."
    log = tmp_path / "v.log"
    env = dict(os.environ, VKML_VALIDATION="1", VKML_VALIDATION_LOG=str(log))
    r = subprocess.run([sys.executable, "-c", LEAKY_CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "VK_OBJECT_TYPE_BUFFER" in log.read_text()
