"""The elementwise table drives the tests: every row's Vulkan kernel against its numpy oracle, every
gradient rule by central differences and on Vulkan. A throw-away op defined by one `elementwise(...)` call
gets all of it with no other edit, and is gone again after `remove_elementwise`."""
import numpy as np
import pytest

import vkml
from vkml.core.elementwise import ELEMENTWISE, elementwise, remove_elementwise
from vkml.core.ops import Op, ACCEPTED_DTYPES
from vkml.core.dtypes import float32, float64
from vkml.frontend.tensor import apply, tensor
from elementwise_rows import derived_rows, parity, check_gradient, vulkan_gradient

ROWS = derived_rows()
GRADS = [r for r in ROWS if r.vjp is not None]


def test_the_derived_suite_covers_the_table():
    names = {r.name for r in ROWS}
    assert {"EXP", "ADD", "CLAMP", "GELU", "EQUAL", "CONTIGUOUS"} <= names and len(names) >= 35


@pytest.mark.vulkan
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_parity(row):
    parity(row)


@pytest.mark.parametrize("row", GRADS, ids=lambda r: r.name)
def test_gradient_rule(row):
    check_gradient(row)


@pytest.mark.vulkan
@pytest.mark.parametrize("row", GRADS, ids=lambda r: r.name)
def test_gradient_on_vulkan(row):
    vulkan_gradient(row)


@pytest.mark.vulkan
@pytest.mark.parametrize("row", [r for r in GRADS if float64 in r.dtypes], ids=lambda r: r.name)
def test_float64_gradient_on_vulkan(row):
    "The rule's nodes run as float64 kernels (math64.glsl) and agree with the CPU's to ADR 0023's bound."
    vulkan_gradient(row, float64)


def test_every_float_row_is_tested_in_float64():
    "parity() runs every dtype a row takes: a float row without float64 would drop out of the f64 suite silently."
    assert all(float64 in r.dtypes for r in ROWS if float32 in r.dtypes)


@pytest.fixture
def softsign():
    "A throw-away op: x / (1 + |x|), with its gradient 1 / (1 + |x|)², in one call."
    row = elementwise("THROWAWAY_SOFTSIGN", 1, lambda n, x: x / (1 + np.abs(x)), "({a} / (1.0 + abs({a})))",
                      vjp=lambda g, y, x: (g / ((x.abs() + 1.0) * (x.abs() + 1.0)),), kinks=(0.0,))
    yield row
    remove_elementwise("THROWAWAY_SOFTSIGN")


@pytest.mark.vulkan
def test_a_throwaway_op_gets_cpu_vulkan_gradient_and_parity(softsign):
    x = np.array([-2.0, -0.5, 0.0, 1.0, 3.0], np.float32)
    want = x / (1 + np.abs(x))
    for d in ("cpu", "vulkan"):
        np.testing.assert_allclose(apply(Op.THROWAWAY_SOFTSIGN, tensor(x, device=d)).numpy(), want, rtol=1e-6)
        y = apply(Op.THROWAWAY_SOFTSIGN, tensor(x, device=d).exp() * 0.5) + 1.0     # fused with its neighbours
        np.testing.assert_allclose(y.numpy(), np.exp(x) * 0.5 / (1 + np.exp(x) * 0.5) + 1, rtol=1e-6)
    assert softsign in derived_rows()
    parity(softsign)
    check_gradient(softsign)
    vulkan_gradient(softsign)


def test_removing_the_throwaway_op_leaves_no_trace(softsign):
    remove_elementwise("THROWAWAY_SOFTSIGN")
    assert "THROWAWAY_SOFTSIGN" not in [o.name for o in Op] and all(r.name != "THROWAWAY_SOFTSIGN" for r in ELEMENTWISE.values())
    elementwise("THROWAWAY_SOFTSIGN", 1, lambda n, x: x, "{a}")   # (the fixture removes it again)


@pytest.mark.vulkan
def test_a_row_whose_kernel_or_gradient_disagrees_fails():
    "The derived checks can fail: a shader that is not its oracle, a gradient off by a factor."
    from vkml.frontend.gradcheck import GradcheckError
    row = elementwise("THROWAWAY_WRONG", 1, lambda n, x: x * 2, "({a} * 3.0)", vjp=lambda g, y, x: (g * 3.0,))
    try:
        with pytest.raises(AssertionError, match="THROWAWAY_WRONG"): parity(row)
        with pytest.raises((AssertionError, GradcheckError)): check_gradient(row)
    finally:
        remove_elementwise("THROWAWAY_WRONG")
