"""The forms of a generated elementwise kernel (nbs/24_codegen): vec4 over broadcast operands, and tiles for transposed
ones. Which form a launch takes, and that each agrees with the CPU oracle (elementwise: the 1e-5 relative bound)."""
import numpy as np
import pytest
import vkml
from vkml.core.dtypes import View
from vkml.backends.vulkan import codegen
from oracle import assert_parity

pytestmark = pytest.mark.vulkan
rng = np.random.default_rng(5)
C = View.contiguous


def form(views, shape, written=(0,)):
    return codegen.elementwise_form(views, shape, set(written))[1]


def test_the_form_a_launch_takes():
    s = (64, 48)
    assert form([C(s), C(s), C(s)], s) == "vec4"
    assert form([C(s), C(s), View(s, (0, 1), 0)], s) == "vec4"                 # a row broadcast over the rows
    assert form([C(s), C(s), View(s, (1, 0), 0)], s) == "vec4"                 # a column broadcast: one value per four
    assert form([C(s), C(s), View(s, (1, 64), 0)], s) == "tile:2"              # a transposed operand
    assert form([C(s), View(s, (1, 64), 0), View(s, (1, 64), 0)], s) == "tile:1,2"
    assert form([C(s), C(s), View(s, (0, 1), 2)], s) == "scalar"               # a row off the 4-element grid
    assert form([C((4, 6)), C((4, 6)), View((4, 6), (1, 4), 0)], (4, 6)) == "scalar"   # too small to tile


SHAPES = [(64, 64), (33, 70), (3, 40, 9), (2, 3, 17, 40)]


@pytest.mark.parametrize("shape", SHAPES)
def test_a_transposed_operand(shape):
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[:-2] + shape[-2:][::-1]).astype(np.float32)
    assert_parity(lambda x, y: x * y.transpose(-1, -2), a, b, what=f"mul {shape}")
    assert_parity(lambda x, y: (y.transpose(-1, -2) - x).exp(), a, b, what=f"sub exp {shape}")


def test_two_transposed_operands_and_a_condition():
    a, b, c = (rng.standard_normal((40, 56)).astype(np.float32) for _ in range(3))
    assert_parity(lambda x, y, z: vkml.where(x.T > 0, y.T, z.T + 1.0), a, b, c)
    assert_parity(lambda x, y: x.T + y.T, a, b)


@pytest.mark.parametrize("dtype", ["float16", "int32", "int64"])
def test_a_transposed_operand_of_each_dtype(dtype):
    a = (rng.standard_normal((48, 40)) * 50).astype(dtype)
    b = (rng.standard_normal((40, 48)) * 50).astype(dtype)
    assert_parity(lambda x, y: x + y.T, a, b, what=dtype)
    assert_parity(lambda x, y: x > y.T, a, b, what=f"{dtype} compare")


@pytest.mark.parametrize("shape,row", [((8, 64), (64,)), ((3, 5, 32), (1, 5, 32)), ((2, 4, 6, 8), (4, 1, 8)),
                                       ((16, 12), (16, 1))])
def test_broadcast_operands_in_the_vec4_form(shape, row):
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(row).astype(np.float32)
    assert_parity(lambda x, y: x + y, a, b, what=f"{shape} + {row}")
    assert_parity(lambda x, y: (x * y).relu(), a, b, what=f"{shape} * {row}")


def test_an_in_place_update_through_the_tile_form():
    a = rng.standard_normal((40, 40)).astype(np.float32)
    b = rng.standard_normal((40, 40)).astype(np.float32)
    def f(x, y):
        x = x.clone()
        x.add_(y.T)
        return x
    assert_parity(f, a, b)
