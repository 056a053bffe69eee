"""How the host waits for a submission: it polls the fence first, then blocks. A GPU's driver can wake a blocked waiter
milliseconds late, so on a GPU the host polls for up to `GPU_SPIN_S`; lavapipe runs its kernels on the host's cores,
so there it polls for 200 µs only. Checked on a stand-in for the driver, whose fence signals a few ms after the wait
begins."""
import time
from collections import deque
from types import SimpleNamespace
import pytest
from vkml.backends.vulkan.device import _Completion


class _Driver:
    "vkGetFenceStatus says VK_NOT_READY (1) until `after_s` from now, then VK_SUCCESS; a blocking wait is counted."
    def __init__(self, after_s):
        self.ready_at, self.blocked = time.perf_counter() + after_s, 0
    def vkGetFenceStatus(self, h, fence): return 0 if time.perf_counter() >= self.ready_at else 1
    def vkWaitForFences(self, h, n, fences, all_, timeout):
        self.blocked += 1
        while time.perf_counter() < self.ready_at: time.sleep(1e-4)
        return 0


class _Device(_Completion):
    def __init__(self, kind, lib):
        self.info, self.lib, self.handle = SimpleNamespace(type=kind, name=kind), lib, None
        self._inflight, self._wait_fence, self.completed = deque([(1, "fence", None, None)]), [None], 0
    def _retire(self):
        self.completed = self._inflight.popleft()[0]


@pytest.mark.parametrize("kind", ["discrete", "integrated", "virtual"])
def test_on_a_gpu_the_host_polls_a_fence_that_signals_within_milliseconds(kind):
    d = _Device(kind, _Driver(0.003))
    d._wait(1, 600.0)
    assert d.completed == 1 and d.lib.blocked == 0, "the host blocked, and a GPU's driver may wake it late"


def test_on_lavapipe_the_host_polls_briefly_then_blocks():
    d = _Device("cpu", _Driver(0.003))
    assert d.spin_s <= 200e-6
    d._wait(1, 600.0)
    assert d.completed == 1 and d.lib.blocked == 1, "a polling host takes a core from lavapipe's kernels"


def test_a_long_wait_on_a_gpu_blocks_after_polling():
    d = _Device("discrete", _Driver(_Device.GPU_SPIN_S + 0.05))
    d._wait(1, 600.0)
    assert d.completed == 1 and d.lib.blocked == 1
