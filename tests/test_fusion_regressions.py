"""Fused kernels that once went wrong: each test fails without its fix (found by the fusion experiment, nbs/42)."""
import numpy as np
import pytest
import vkml
import vkml.nn.functional as F
from vkml.frontend.tensor import schedule

pytestmark = pytest.mark.vulkan


@pytest.mark.parametrize("shape", [(1, 1), (4, 1), (2, 3, 1)])
def test_a_reduction_that_reduces_nothing_takes_no_epilogue(shape):
    """softmax over an axis of extent 1: SUM(keepdim) has its input's shape, so the schedule's shape test could not
    tell the division (after the sum) from the exponential (before it, in the sum's prologue), put both in one
    reduce kernel, and the generated GLSL read the prologue's value after the loop: glslc refused it."""
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    for f, ref in ((lambda t: F.softmax(t, -1), np.ones(shape)), (lambda t: F.log_softmax(t, -1), np.zeros(shape))):
        y = f(vkml.tensor(x, device="vulkan"))
        for k in schedule(y).dispatching:
            if k.kind == "reduce":
                r = k.reduce
                assert not any(n.shape == r.shape and r in n.srcs for n in k.nodes if n is not r), k
        np.testing.assert_allclose(y.numpy(), f(vkml.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_cross_entropy_of_one_class_on_vulkan():
    x = np.random.default_rng(1).standard_normal((5, 1)).astype(np.float32)
    t = np.zeros(5, np.int64)
    got = F.cross_entropy(vkml.tensor(x, device="vulkan"), vkml.tensor(t, device="vulkan")).item()
    assert got == pytest.approx(F.cross_entropy(vkml.tensor(x), vkml.tensor(t)).item(), abs=1e-6) and abs(got) < 1e-6
