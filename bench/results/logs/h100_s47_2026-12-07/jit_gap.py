"""Where a replayed (vkml.jit) step's wall time goes beyond its GPU time: upload, call, wait; cProfile of the host."""
import sys, time, statistics, cProfile, pstats, io, os
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import numpy as np, vkml
import real_models as rm
small = os.environ.get('SMALL', '0') == '1'
for case in sys.argv[1:] or ['cnn_bn']:
    spec = rm.case_specs(small)[case]
    weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
    data = spec["data"](4)
    _m, run = rm.vk_setup(spec, weights, "jit")
    for i in range(5): run(data[i % 4])

    # split a step: upload x, y; call; item

    step_fn = [c.cell_contents for c in run.__closure__ if callable(getattr(c.cell_contents, '__call__', None)) and hasattr(c.cell_contents, 'captures')][0]
    up, call, item, tot = [], [], [], []
    for i in range(40):
        x, y = data[i % 4]
        t0 = time.perf_counter()
        xv, yv = vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")
        t1 = time.perf_counter(); loss = step_fn(xv, yv); t2 = time.perf_counter(); loss.item(); t3 = time.perf_counter()
        up.append(t1 - t0); call.append(t2 - t1); item.append(t3 - t2); tot.append(t3 - t0)
    med = lambda v: round(statistics.median(v) * 1e6, 1)
    print(case, "us: upload", med(up), "call", med(call), "item(wait)", med(item), "total", med(tot), flush=True)
    # pre-uploaded inputs: the same tensors each step
    xs = [(vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")) for x, y in data]
    tot2 = []
    for i in range(40):
        t0 = time.perf_counter(); step_fn(*xs[i % 4]).item(); tot2.append(time.perf_counter() - t0)
    print(case, "us: pre-uploaded step", med(tot2), flush=True)
    # back to back, no item between (the replay waits for the previous one itself)
    t0 = time.perf_counter()
    for i in range(40): l = step_fn(*xs[i % 4])
    l.item(); print(case, "us: back-to-back step", round((time.perf_counter() - t0) / 40 * 1e6, 1), flush=True)
    pr = cProfile.Profile(); pr.enable()
    for i in range(20): run(data[i % 4])
    pr.disable(); s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats('tottime').print_stats(30); print(s.getvalue()[:6000])
# the same steps with the host spinning on the fence until done (no blocking vkWaitForFences)
from vkml.backends.vulkan import device as D
def spin_wait(self, serial, timeout_s):
    lib, h = self.lib, self.handle
    while self._inflight and self._inflight[0][0] <= serial:
        fence = self._inflight[0][1]
        while lib.vkGetFenceStatus(h, fence) != 0: pass
        self._retire()
D.Device._wait = spin_wait
for case in sys.argv[1:] or ['cnn_bn']:
    spec = rm.case_specs(small)[case]
    weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
    data = spec["data"](4)
    _m, run = rm.vk_setup(spec, weights, "jit")
    for i in range(5): run(data[i % 4])
    step_fn = [c.cell_contents for c in run.__closure__ if hasattr(c.cell_contents, 'captures')][0]
    xs = [(vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")) for x, y in data]
    tot, tot2 = [], []
    for i in range(40):
        t0 = time.perf_counter(); run(data[i % 4]); tot.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); step_fn(*xs[i % 4]).item(); tot2.append(time.perf_counter() - t0)
    print(case, "spin-wait us: bench step", round(statistics.median(tot) * 1e6, 1), "pre-uploaded", round(statistics.median(tot2) * 1e6, 1), flush=True)
