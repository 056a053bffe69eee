"""An eager realize goes to the device in parts as it is recorded (backend.SUBMIT_FIRST commands first, each next
part twice as long), so the device starts while the host records the rest: the values are those of one submission,
a read waits only for the part that computed what it reads, and a `vkml.jit` capture stays one recording."""
import numpy as np
import pytest
import vkml
import vkml.backends.vulkan as V
import vkml.backends.vulkan.backend as B
import vkml.nn.functional as F
from vkml import nn, optim

pytestmark = pytest.mark.vulkan


def batches(steps):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((32, 8)).astype(np.float32), rng.integers(0, 4, 32)) for _ in range(steps)]


def model_and_opt():
    vkml.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 4)).to("vulkan")
    return model, optim.Adam(model.parameters(), lr=1e-2)


def step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()          # one realize: the step and the loss (backward deferred it)
    return loss


def on_device(xb, yb): return vkml.tensor(xb, device="vulkan"), vkml.tensor(yb, device="vulkan")


def train(first, monkeypatch, steps=3):
    "Losses, parameters, submissions and realizes per step of an eager loop whose realizes submit `first` commands first."
    monkeypatch.setattr(B, "SUBMIT_FIRST", first)
    model, opt = model_and_opt()
    losses, subs, realizes = [], [], []
    for xb, yb in batches(steps):
        s0 = V.stats()
        loss = step(model, opt, *on_device(xb, yb))
        s1 = V.stats()
        subs.append(s1["submissions"] - s0["submissions"]); realizes.append(s1["realizes"] - s0["realizes"])
        losses.append(loss.item())
    return losses, [p.numpy() for p in model.parameters()], subs, realizes


def test_a_realize_in_parts_computes_what_one_submission_computes(monkeypatch):
    losses, params, subs, realizes = train(0, monkeypatch)
    assert subs == realizes == [1, 1, 1]                     # 0: the whole step in one submission
    for first in (1, 3, 32):
        l, p, s, r = train(first, monkeypatch)
        assert r == [1, 1, 1], (first, r)                    # still one realize a step...
        if first == 1: assert min(s) >= 4, s                 # ...in parts of 1, 2, 4, ... commands
        assert l == losses, (first, l, losses)               # bit for bit
        for a, b in zip(p, params): np.testing.assert_array_equal(a, b)


def test_a_read_waits_only_for_the_part_that_computed_it(monkeypatch):
    monkeypatch.setattr(B, "SUBMIT_FIRST", 2)
    model, opt = model_and_opt()
    (xb, yb), = batches(1)
    x, y = on_device(xb, yb)
    dev = x.node.buf.device
    s0 = dev.submitted
    loss = step(model, opt, x, y)
    assert dev.submitted - s0 >= 3                            # the forward, backward and update went in parts...
    t = loss.node.buf                                        # what reading the loss waits for: its readback copy's
    part = t.fetch[0] if t.fetch is not None else t.alloc.use[0]   # submission (a discrete GPU), else its memory's
    assert part < dev.submitted, (part, dev.submitted)       # ...and the loss's part came before the last
    dev.wait(part)
    v = V.stats()["waits"]
    loss.item()                                              # its part is done: reading it waits for nothing more
    assert V.stats()["waits"] == v


def test_a_captured_step_is_one_recording_whatever_the_parts(monkeypatch):
    monkeypatch.setattr(B, "SUBMIT_FIRST", 1)
    model, opt = model_and_opt()
    jitted = vkml.jit(lambda x, y: step(model, opt, x, y))
    data = batches(5)
    ref_model, ref_opt = model_and_opt()
    for i, (xb, yb) in enumerate(data):
        s0 = V.stats()["submissions"]
        loss = jitted(*on_device(xb, yb))
        if i >= 2: assert V.stats()["submissions"] - s0 == 1     # a replay: the capture's one recording
        want = step(ref_model, ref_opt, *on_device(xb, yb))
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    assert jitted.captured == 1
