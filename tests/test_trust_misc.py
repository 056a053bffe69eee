"""Issue 21, "trust the training loop": the random generator past 2^32 numbers and its seeds, host arrays narrowed
into a dtype, binary_cross_entropy's range, transfers that keep the graph, checkpoints of every dtype and bad paths,
and optimisers whose hyper-parameters change between steps."""
import math
import numpy as np
import pytest

import vkml
import vkml.frontend.functions as VF
from vkml.core.dtypes import VkmlError
from vkml.core.operands import ArgumentError
from vkml.frontend.tensor import tensor
import oracle

vulkan = pytest.mark.vulkan


# ---------------------------------------------------------------- the generator's 64-bit offset and its seeds
def test_offset_past_2_32_is_a_new_stream():
    "Regression: the offset was taken mod 2^32, so the 2^32nd number started the seed's stream again."
    g = VF.Generator(5); g.offset = 2**32
    a = VF.rand(64, generator=g).numpy()
    b = VF.rand(64, generator=VF.Generator(5)).numpy()
    assert not np.isin(a, b).any()
    np.testing.assert_array_equal(a, oracle.uniform(5, 2**32, 64))


def test_a_draw_crossing_2_32_does_not_wrap():
    "Regression: a draw that crossed 2^32 wrapped its counters back to offset 0 halfway through."
    g = VF.Generator(5); g.offset = 2**32 - 2
    a = VF.rand(6, generator=g).numpy()
    first = VF.rand(4, generator=VF.Generator(5)).numpy()
    assert not np.isin(a, first).any()
    assert g.offset == 2**32 + 6          # the draw started the next block


@vulkan
def test_vulkan_matches_the_cpu_past_2_32():
    for off in (2**32 + 3, 7 * 2**32 - 2):           # inside a block, and a draw that starts the next one
        g1, g2 = VF.Generator(9), VF.Generator(9)
        g1.offset = g2.offset = off
        a, b = VF.rand(1000, generator=g1), VF.rand(1000, generator=g2, device="vulkan")
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(b.numpy(), oracle.uniform(9, b.node.arg[1], 1000).astype(np.float32))
        assert b.node.arg[1] >= 2**32


@vulkan
def test_a_replayed_draw_past_2_32_is_the_eager_one():
    "Regression: a replay wrote the offset's low word only, repeating the stream of offset mod 2^32."
    @vkml.jit
    def f(x): return x + VF.rand(8, device="vulkan")
    x = tensor(np.zeros(8, np.float32), device="vulkan")
    VF.manual_seed(3)
    f(x).numpy(); f(x).numpy()                         # warm-up and capture
    VF.default_generator.offset = 2**32 + 40
    got = f(x).numpy()                                 # a replay
    np.testing.assert_array_equal(got, oracle.uniform(3, 2**32 + 40, 8).astype(np.float32))
    assert VF.default_generator.offset == 2**32 + 48
    f.reset()


@pytest.mark.parametrize("seed", [2**64, 2**64 + 5, -2**63 - 1, 1.5, "7", True, None])
def test_a_seed_outside_pytorchs_range_is_an_error(seed):
    "Regression: manual_seed(2**64 + 5) was manual_seed(5)."
    offset = VF.default_generator.offset
    with pytest.raises(ArgumentError, match="seed"): vkml.manual_seed(seed)
    with pytest.raises(ArgumentError, match="seed"): VF.Generator(seed)
    assert VF.default_generator.offset == offset       # the default generator is untouched


def test_seeds_inside_the_range():
    assert vkml.manual_seed(-1).initial_seed() == 2**64 - 1      # PyTorch: two's complement
    assert vkml.manual_seed(-2**63).initial_seed() == 2**63
    assert vkml.manual_seed(np.int64(7)).initial_seed() == 7
    assert vkml.manual_seed(2**64 - 1).initial_seed() == 2**64 - 1


# ---------------------------------------------------------------- tensor(data, dtype=): one narrowing rule
I32 = (-2**31, 2**31 - 1)
NARROW_RAISES = [            # (data, dtype): every form raises what the list form raises
    (np.array([2**40]), vkml.int32), (np.array([-2**31 - 1]), vkml.int32), (np.array([2**32 - 1], np.uint32), vkml.int32),
    (np.array([2**63], np.uint64), vkml.int64), (np.array([1e20]), vkml.int32), (np.array([3e19], np.float32), vkml.int64),
    (np.array([np.nan, 1.0]), vkml.int64), (np.array([-np.inf], np.float16), vkml.int32), ([float("nan")], vkml.int32),
    ([2**40], vkml.int32), ([1e20], vkml.int32), ([2**63], None), (2**40, vkml.int32),
]

@pytest.mark.parametrize("data,dtype", NARROW_RAISES, ids=range(len(NARROW_RAISES)))
def test_a_value_the_int_dtype_cannot_hold_is_an_error(data, dtype):
    "Regression: tensor(np.array([2**40]), dtype=int32) was [0] (numpy wraps) while the list form raised."
    with pytest.raises(vkml.DTypeError, match="int"): tensor(data, dtype=dtype)


def test_a_tensor_as_data_narrows_by_the_same_rule():
    with pytest.raises(vkml.DTypeError, match="does not fit in int32"): tensor(tensor([2**40]), dtype=vkml.int32)


@pytest.mark.parametrize("form", [list, np.array])
def test_narrowing_that_pytorch_converts(form):
    "Floats truncate toward zero into ints; a float beyond a float dtype's range is inf; nonzero is True."
    assert tensor(form([-2.7, 2.7, I32[1] + 0.5]), dtype=vkml.int32).tolist() == [-2, 2, I32[1]]
    assert tensor(form([1e300, -1e300]), dtype=vkml.float16).tolist() == [math.inf, -math.inf]
    assert tensor(form([1e300]), dtype=vkml.float32).tolist() == [math.inf]
    assert tensor(form([70000]), dtype=vkml.float16).tolist() == [math.inf]
    assert tensor(form([-1, 0, 2]), dtype=vkml.bool).tolist() == [True, False, True]
    assert tensor(form([I32[0], I32[1]]), dtype=vkml.int32).tolist() == list(I32)


# ---------------------------------------------------------------- binary_cross_entropy's input range
F = vkml.nn.functional
BAD_P = [[0.2, 1.5, 0.3], [0.2, -0.5, 0.3], [0.2, float("nan"), 0.3]]

@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=vulkan)])
@pytest.mark.parametrize("p", BAD_P, ids=["above", "below", "nan"])
def test_bce_of_a_value_outside_0_1_is_an_error(device, p):
    "Regression: binary_cross_entropy(1.5) was NaN; PyTorch raises. From the host: at once, naming the value."
    y = tensor([0.0, 1.0, 0.0], device=device)
    with pytest.raises(vkml.IndexOutOfRangeError, match="between 0 and 1.*position \\(1,\\)"):
        F.binary_cross_entropy(tensor(p, device=device), y)


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=vulkan)])
@pytest.mark.parametrize("p", BAD_P, ids=["above", "below", "nan"])
def test_bce_of_a_computed_value_outside_0_1_is_an_error_when_read(device, p):
    "A probability computed lazily is checked where it is computed (ADR 0025): reading the loss or the gradient raises."
    x = tensor(p, device=device, requires_grad=True)
    loss = F.binary_cross_entropy(x * 1.0, tensor([0.0, 1.0, 0.0], device=device))
    with pytest.raises(vkml.IndexOutOfRangeError, match="between 0 and 1.*position \\(1,\\)"): loss.item()


@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=vulkan)])
def test_bce_of_probabilities_is_unchanged(device):
    "In range (0 and 1 included), lazy or not, the loss and its gradient are PyTorch's."
    p, y = np.float32([0.0, 0.2, 0.9, 1.0]), np.float32([0.0, 1.0, 0.0, 1.0])
    with np.errstate(divide="ignore"):                               # log(0): -inf, clamped at -100 as PyTorch
        ref = -(y * np.maximum(np.log(np.float64(p)), -100) + (1 - y) * np.maximum(np.log1p(-np.float64(p)), -100))
    for lazy in (False, True):
        x = tensor(p, device=device, requires_grad=True)
        loss = F.binary_cross_entropy(x * 1.0 if lazy else x, tensor(y, device=device), reduction="sum")
        loss.backward()
        np.testing.assert_allclose(loss.item(), ref.sum(), rtol=1e-5)
        assert np.isfinite(x.grad.numpy()[1:3]).all()
        np.testing.assert_allclose(x.grad.numpy()[1:3], (p[1:3] - y[1:3]) / (p[1:3] * (1 - p[1:3])), rtol=1e-5)


@vulkan
def test_bce_checked_in_a_replayed_step():
    "A replay runs the device check again: a bad probability in a later step raises when its loss is read."
    y = tensor(np.float32([0.0, 1.0, 0.0]), device="vulkan")
    @vkml.jit
    def f(x): return F.binary_cross_entropy(x * 1.0, y)
    good = tensor(np.float32([0.2, 0.7, 0.1]), device="vulkan")
    ref = F.binary_cross_entropy(good, y).item()
    for _ in range(3): assert f(good).item() == pytest.approx(ref, rel=1e-6)
    with pytest.raises(vkml.IndexOutOfRangeError, match="between 0 and 1"):
        f(tensor(np.float32([0.2, 1.5, 0.1]), device="vulkan")).item()
    assert f(good).item() == pytest.approx(ref, rel=1e-6)
    f.reset()


# ---------------------------------------------------------------- .to(): a differentiable copy
@vulkan
@pytest.mark.parametrize("src,dst", [("cpu", "vulkan"), ("vulkan", "cpu")])
def test_to_another_device_carries_the_gradient_back(src, dst):
    "Regression: x.to('vulkan') of a leaf that requires grad was a new, unconnected leaf: x.grad stayed None."
    x = tensor([1.0, -2.0, 3.0], device=src, requires_grad=True)
    y = x.to(dst)
    assert y.device.startswith(dst) and y.requires_grad and not y.is_leaf
    (y * y * tensor([1.0, 2.0, 3.0], device=dst)).sum().backward()
    assert y.grad is None and x.grad is not None and x.grad.device == x.device
    np.testing.assert_allclose(x.grad.numpy(), [2.0, -8.0, 18.0])


@vulkan
def test_to_of_a_computed_tensor_and_both_ways():
    "Regression: a non-leaf's .to(device) did not require grad at all. There and back again, with a cast on the way."
    x = tensor([0.5, 1.5], requires_grad=True)
    y = (x * 2).to("vulkan", vkml.float64)
    assert y.requires_grad and y.dtype == vkml.float64
    z = (y.exp() * 1.0).to("cpu").float()
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.exp(2 * np.float32([0.5, 1.5])), rtol=1e-6)


def test_to_dtype_is_differentiable():
    x = tensor([1.0, 2.0], requires_grad=True)
    y = x.to(vkml.float64)
    assert not y.is_leaf and y.requires_grad
    (y * y).sum().backward()
    assert x.grad.dtype == vkml.float32
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    assert x.to(vkml.float32) is x and x.to("cpu") is x             # nothing to do: the tensor itself, as PyTorch


@vulkan
def test_to_under_no_grad_and_second_order():
    x = tensor([1.0, 2.0], requires_grad=True)
    with vkml.no_grad(): assert not x.to("vulkan").requires_grad
    (g,) = vkml.frontend.autograd.grad((x.to("vulkan") ** 3).sum(), x, create_graph=True)     # 3x^2, on the CPU
    assert g.device == "cpu"
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])              # 6x


# ---------------------------------------------------------------- checkpoints: every dtype, and paths save cannot write
from vkml.core.dtypes import CheckpointError

@pytest.mark.parametrize("dt", [vkml.float32, vkml.float16, vkml.float64, vkml.int32, vkml.int64, vkml.bool_],
                         ids=lambda d: d.name)
@pytest.mark.parametrize("device", ["cpu", pytest.param("vulkan", marks=vulkan)])
def test_every_dtype_round_trips(tmp_path, dt, device):
    "Regression: vkml.save wrote a float64 tensor that vkml.load refused."
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 4)) * 1e3).astype(dt.np) if dt.is_float else rng.integers(-5, 5, (3, 4)).astype(dt.np)
    if dt is vkml.float64: a[0, 0] = 0.1                           # every bit of the double, not a float32 in disguise
    t = tensor(a, device=device)
    vkml.save({"t": t, "nested": [t[0]], "arr": a}, tmp_path / "ck.safetensors")
    back = vkml.load(tmp_path / "ck.safetensors", device=device)
    assert back["t"].dtype == dt and back["t"].device == t.device and back["nested"][0].dtype == dt
    assert back["arr"].dtype == a.dtype
    for got, want in ((back["t"].numpy(), a), (back["nested"][0].numpy(), a[0]), (back["arr"], a)):
        np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))   # bit for bit


def test_save_refuses_an_array_load_would_refuse(tmp_path):
    with pytest.raises(CheckpointError, match="astype"): vkml.save({"x": np.zeros(2, np.uint8)}, tmp_path / "a.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_saving_to_a_directory_is_a_typed_error(tmp_path):
    "Regression: saving to a directory path raised a bare IsADirectoryError (after writing a temporary file)."
    with pytest.raises(CheckpointError, match="is a directory.*checkpoint.safetensors"): vkml.save({"a": tensor([1.0])}, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_saving_into_a_missing_directory_is_a_typed_error(tmp_path):
    "Regression: saving into a directory that does not exist raised a bare FileNotFoundError."
    with pytest.raises(CheckpointError, match="does not exist.*makedirs"):
        vkml.save({"a": tensor([1.0])}, tmp_path / "missing" / "ck.safetensors")


def test_saving_where_it_cannot_write_is_a_typed_error(tmp_path, monkeypatch):
    "An OS error while writing (permissions, a full disk) is a CheckpointError, and the old checkpoint survives."
    path = tmp_path / "ck.safetensors"
    vkml.save({"a": tensor([1.0])}, path)
    import safetensors.numpy
    def full_disk(*a, **k): raise OSError(28, "No space left on device")
    monkeypatch.setattr(safetensors.numpy, "save_file", full_disk)
    with pytest.raises(CheckpointError, match="No space left"): vkml.save({"a": tensor([2.0])}, path)
    monkeypatch.undo()
    assert vkml.load(path)["a"].tolist() == [1.0] and sorted(p.name for p in tmp_path.iterdir()) == ["ck.safetensors"]


@pytest.mark.parametrize("sd", [[1, 2], [("weight", np.zeros((2, 2), np.float32))], None, "weights.safetensors"],
                         ids=["list", "pairs", "None", "str"])
def test_load_state_dict_of_a_non_mapping_is_a_typed_error(sd):
    "Regression: load_state_dict([1, 2]) raised a bare TypeError from dict()."
    with pytest.raises(vkml.nn.StateDictError, match="mapping"): vkml.nn.Linear(2, 2).load_state_dict(sd)
