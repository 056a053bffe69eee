import sys, time, statistics, os
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import numpy as np, vkml
import real_models as rm
from vkml.backends.vulkan import device as D
small = os.environ.get('SMALL', '1') == '1'
case = sys.argv[1] if len(sys.argv) > 1 else 'cnn_bn'
spec = rm.case_specs(small)[case]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
data = spec["data"](4)
_m, run = rm.vk_setup(spec, weights, "jit")
for i in range(5): run(data[i % 4])
step_fn = [c.cell_contents for c in run.__closure__ if hasattr(c.cell_contents, 'captures')][0]
xs = [(vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")) for x, y in data]
q = [0.0]
f = D.Device._queue
def g(*a, **k):
    t0 = time.perf_counter()
    try: return f(*a, **k)
    finally: q[0] += time.perf_counter() - t0
D.Device._queue = g
calls, qs = [], []
for i in range(40):
    l = step_fn(*xs[i % 4]); l.item()
    q[0] = 0; t0 = time.perf_counter(); l = step_fn(*xs[i % 4]); calls.append(time.perf_counter() - t0); qs.append(q[0]); l.item()
print(case, "call us", round(statistics.median(calls) * 1e6), "of which vkQueueSubmit", round(statistics.median(qs) * 1e6))
