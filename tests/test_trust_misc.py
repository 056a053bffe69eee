"""Issue 21, "trust the training loop": the random generator past 2^32 numbers and its seeds, host arrays narrowed
into a dtype, binary_cross_entropy's range, transfers that keep the graph, checkpoints of every dtype and bad paths,
and optimisers whose hyper-parameters change between steps."""
import math
import numpy as np
import pytest

import vkml
import vkml.functional as VF
from vkml.dtypes import VkmlError
from vkml.operands import ArgumentError
from vkml.tensor import tensor
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
