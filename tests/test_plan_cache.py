"""Remembered plans (vkml.schedule's plan cache): a graph whose signature was seen before gets the same
kernels rebuilt over its own nodes, with its own numbers, on every backend; what the signature leaves
out (values) never changes a result, and what it must hold (the dtypes of sources computed before)
does."""
import os
import numpy as np
import pytest

import vkml
from vkml.ops import Op
from vkml.tensor import apply, tensor, schedule
import sys
S = sys.modules["vkml.schedule"]

DEVICES = ["cpu", pytest.param("vulkan", marks=pytest.mark.vulkan)]


def graph(a, b, c, scale):
    return ((a * scale + b).exp().sum(1, keepdim=True) / c).relu()


@pytest.mark.parametrize("device", DEVICES)
def test_a_remembered_plan_gives_the_fresh_results(device, monkeypatch):
    rng = np.random.default_rng(0)
    outs = {}
    for flag in ("0", "1", "1"):                    # fresh, then remembered twice
        monkeypatch.setenv("VKML_PLAN_CACHE", flag)
        got = []
        for scale in (0.5, -1.25):                  # other constants: same signature, other numbers
            a, b = rng.standard_normal((2, 3, 4)).astype(np.float32), rng.standard_normal((2, 3, 4)).astype(np.float32)
            c = rng.uniform(1, 2, (2, 3, 1)).astype(np.float32)
            t = graph(*(tensor(x, device=device) for x in (a, b, c)), scale)
            want = np.maximum(np.exp(a * scale + b).sum(1, keepdims=True) / c, 0)
            np.testing.assert_allclose(t.numpy(), want, rtol=1e-5)
            got.append(repr(schedule(graph(*(tensor(x, device=device) for x in (a, b, c)), scale))))
        outs.setdefault(flag, []).append(got)
    assert outs["0"][0] == outs["1"][0] == outs["1"][1]          # the same kernels, remembered or not


@pytest.mark.vulkan
def test_sources_of_another_dtype_get_their_own_program():
    "Regression: a comparison's signature held only its result dtype (bool), so int32 inputs reused the float32 program."
    a, b = np.array([1, 2, 3, -1], np.int32), np.array([1, 0, 3, 2], np.int32)
    for dt in (np.float32, np.int32, np.float16, np.int64):
        got = apply(Op.EQUAL, tensor(a.astype(dt), device="vulkan"), tensor(b.astype(dt), device="vulkan")).numpy()
        np.testing.assert_array_equal(got, a == b, err_msg=str(dt))


def test_signatures_see_structure_not_values():
    x, y = tensor(np.ones(3, np.float32)), tensor(np.zeros(3, np.float32))
    sig = lambda t: S.signature(S.order([t.node]), [t.node], True, False)
    assert sig(x * 2.0 + y) == sig(y * 3.0 + x)                   # values and which inputs: not structure
    assert sig(x * 2.0 + y) != sig(x * 2.0 - y)                   # another op
    assert sig(x * 2.0 + x) != sig(x * 2.0 + y)                   # one input read twice is another graph
    assert sig(x.reshape(3, 1) * 1.0) != sig(x.reshape(1, 3) * 1.0)
    held = x * 2.0
    a = sig(held + 1.0)
    b = sig(x * 2.0 + 1.0)          # (outside the assert: pytest's rewriting would hold the temporary)
    assert a != b                   # a held intermediate must be stored
