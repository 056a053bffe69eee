"""What a vkml.jit replay assumes of the modules its step called (their mode, parameters, buffers, submodules and
plain settings) is checked again only when `settings_epoch()` has moved; every change made through a module moves
it. Each change below, made between replays, is honoured: the replayed call equals the same call made eagerly."""
import gc
import numpy as np
import pytest
import vkml
import vkml.nn as nn
from vkml.nn.module import settings_epoch, Module

pytestmark = pytest.mark.vulkan


class Scale(Module):
    "y = x·k + b: a plain setting and a buffer."
    def __init__(self, k):
        super().__init__()
        self.k = k
        self.register_buffer("b", vkml.tensor(np.zeros(3, np.float32), device="vulkan"))
    def forward(self, x): return x * self.k + self.b


class Net(Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3).to("vulkan")
        self.act = Scale(2.0)
    def forward(self, x): return self.act(self.lin(x))


def x(): return vkml.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="vulkan")


def replayed(net):
    "A jitted forward of `net`, captured and replayed (warm-up, capture, replay)."
    f = vkml.jit(lambda x: net(x))
    for _ in range(3): f(x())
    return f


def same_as_eager(f, net):
    np.testing.assert_allclose(f(x()).numpy(), net(x()).numpy(), rtol=1e-6)
    np.testing.assert_allclose(f(x()).numpy(), net(x()).numpy(), rtol=1e-6)   # (and replayed again)


CHANGES = {
    "a setting": lambda net, keep: setattr(net.act, "k", 3.0),
    "a buffer replaced": lambda net, keep: setattr(net.act, "b", vkml.tensor(np.ones(3, np.float32), device="vulkan")),
    "a buffer registered again": lambda net, keep: net.act.register_buffer("b", vkml.tensor(np.full(3, 2, np.float32), device="vulkan")),
    "a parameter through the dict": lambda net, keep: net.lin._parameters.__setitem__(
        "bias", nn.Parameter(vkml.tensor(np.ones(3, np.float32), device="vulkan"))),
    "a submodule swapped, the old one kept alive": lambda net, keep: (keep.append(net.act), setattr(net, "act", Scale(5.0))),
    "a submodule swapped through the dict": lambda net, keep: (keep.append(net.act), net._modules.update(act=Scale(7.0))),
    "eval": lambda net, keep: net.eval(),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_between_replays_is_honoured(change):
    net, keep = Net(), []
    f = replayed(net)
    CHANGES[change](net, keep)
    same_as_eager(f, net)


def test_a_replay_of_an_untouched_model_reads_no_module_settings():
    net = Net()
    f = replayed(net)
    (st,), = f.captures.values()
    assert st.seen.get(settings_epoch) == settings_epoch()
    def boom(): raise AssertionError("a module guard was read though no module changed")
    st.watched[settings_epoch] = [(boom, v) for _, v in st.watched[settings_epoch]]
    f(x())                                             # replayed without reading them
    net.act.k = 4.0                                    # ... and read once a module changed
    with pytest.raises(AssertionError, match="no module changed"): f(x())


def test_a_model_replaced_outside_any_module_is_called_anew():
    "The step reads its model through a plain object; replacing the model there kills the old one: the epoch moves."
    class Holder: pass
    h = Holder(); h.net = Net()
    f = vkml.jit(lambda x: h.net(x))
    for _ in range(3): f(x())
    before = settings_epoch()
    h.net.act.__dict__["k"] = 2.0                       # (a write into __dict__ moves nothing: documented)
    assert settings_epoch() == before
    h.net = Net(); h.net.act.k = 9.0
    gc.collect()
    assert settings_epoch() > before
    same_as_eager(f, h.net)
