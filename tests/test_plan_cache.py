"""Remembered plans (vkml.schedule's plan cache): a graph whose signature was seen before gets the same
kernels rebuilt over its own nodes, with its own numbers, on every backend; what the signature leaves
out (values) never changes a result, and what it must hold (the dtypes of sources computed before)
does."""
import os
import numpy as np
import pytest

import vkml
from vkml.core.ops import Op
from vkml.frontend.tensor import apply, tensor, schedule
import sys
S = sys.modules["vkml.engine.schedule"]

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


def test_the_compiler_is_looked_up_once_per_path(monkeypatch):
    "Every realize asks whether glslc exists; a PATH search per realize cost more than a dispatch (seen in a profile)."
    from vkml.backends.vulkan import codegen
    import shutil
    calls = []
    real = shutil.which
    monkeypatch.setattr(shutil, "which", lambda *a, **k: calls.append(a) or real(*a, **k))
    codegen._which.cache_clear()
    first = codegen.compiler()
    for _ in range(5): assert codegen.compiler() == first
    assert len(calls) == 1
    monkeypatch.setenv("PATH", "/nonexistent")          # a different PATH is searched again
    assert codegen.compiler()[0] is None and len(calls) == 2
    codegen._which.cache_clear()


@pytest.mark.parametrize("device", DEVICES)
def test_float64_graphs_get_their_own_plans(device):
    "The same graph in float32 and float64 (same shapes, same numbers): each keeps its own precision and constants."
    a = np.array([1.0 + 1e-12, 2.0, -3.0, 0.1])
    x32, x64 = tensor(a.astype(np.float32)), tensor(a)
    sig = lambda t: S.signature(S.order([t.node]), [t.node], True, False)
    assert sig(x32 * 0.1 + 1e-9) != sig(x64 * 0.1 + 1e-9)
    for dt in (np.float32, np.float64, np.float32, np.float64):     # each remembered plan recalled once
        got = ((tensor(a.astype(dt), device=device) * 0.1 + 1e-9) * 3.0).exp().numpy()
        want = np.exp((a.astype(dt) * dt(0.1) + dt(1e-9)) * dt(3.0))
        assert got.dtype == dt
        np.testing.assert_allclose(got, want, rtol=1e-14 if dt is np.float64 else 1e-6)
