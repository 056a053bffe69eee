"""`vkml.tensor(a, device="vulkan")` writes `a` to the device straight from the caller's array (no host copy first),
and copies it on the host only where it keeps a host copy (small inputs, on a discrete GPU's paths). Either way the
tensor keeps the values `a` had: a later write to `a` is not seen (tests/test_discrete_paths.py runs these on the
GPU's paths too)."""
import numpy as np
import pytest
import vkml
from vkml.core.graph import Node


@pytest.mark.vulkan
@pytest.mark.parametrize("n", [16, (1 << 20) // 4 + 16])     # kept on the host too (at most 1 MiB), and not
@pytest.mark.parametrize("layout", ["C", "F", "0-d"])
def test_a_vulkan_tensor_keeps_the_values_its_array_had(n, layout):
    a = np.float32(3.5) if layout == "0-d" else np.arange(n, dtype=np.float32).reshape(-1, 4)
    if layout == "F": a = np.asfortranarray(a)
    a = np.asarray(a)
    want = a.copy()
    t = vkml.tensor(a, device="vulkan")
    a[...] = -1                                  # the caller's array, written after
    assert t.shape == want.shape
    np.testing.assert_array_equal(t.numpy(), want)            # (through the host copy, where kept)
    np.testing.assert_array_equal((t + 0).numpy(), want)      # (through the device's memory)


@pytest.mark.vulkan
def test_the_host_copy_is_the_tensors_own():
    a = np.arange(8, dtype=np.int64)
    t = vkml.tensor(a, device="vulkan")
    host = t.node.buf.host
    assert host is None or (host is not a and not np.shares_memory(host, a))
