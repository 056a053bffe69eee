import sys, time, os, collections, functools
sys.path.insert(0, 'bench'); sys.path.insert(0, '.'); import os
import vkml, real_models as rm
from vkml.backends.vulkan import backend as B, device as D
import vkml.backends.vulkan.recorder as R
case = sys.argv[1] if len(sys.argv) > 1 else 'resnet20'
spec = rm.case_specs(os.environ.get('SMALL', '0') == '1')[case]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
data = spec["data"](4)
_m, run = rm.vk_setup(spec, weights, os.environ.get("MODE", "eager"))
for i in range(4): run(data[i % 4])
spent = collections.defaultdict(float); calls = collections.Counter()
def wrap(owner, name, key):
    f = getattr(owner, name)
    @functools.wraps(f)
    def g(*a, **k):
        t0 = time.perf_counter()
        try: return f(*a, **k)
        finally: spent[key] += time.perf_counter() - t0; calls[key] += 1
    setattr(owner, name, g)
wrap(D.Device, "_wait", "_wait (fence + retire)"); wrap(D.Device, "_retire", "_retire"); wrap(D.Device, "_queue", "_queue (vkQueueSubmit)")
wrap(B._Running, "_run", "_run (record+submit)"); wrap(R.Recorder, "record", "record"); wrap(B._FusedKernels, "_fused", "_fused")
wrap(B._Operands, "_op", "_op"); wrap(B._Sources, "_view", "_view")
import vkml.backends.vulkan.memory as M
wrap(M.Pool, "alloc", "alloc"); wrap(M.Pool, "_new_block", "_new_block")
N = 10
st0 = dict(R.STATS)
t0 = time.perf_counter()
for i in range(N): run(data[i % 4])
step = (time.perf_counter() - t0) / N * 1e3
print(f"{case} SUBMIT_FIRST={B.SUBMIT_FIRST} step {step:.2f} ms", {k: (R.STATS[k] - st0.get(k, 0)) / N for k in ("submissions", "dispatches", "barriers", "waits")})
for k in spent: print(f"  {k:28s} {spent[k] / N * 1e3:8.2f} ms/step  {calls[k] / N:8.1f} calls/step")
with R.profile() as p:
    for i in range(3): run(data[i % 4])
print(f"  GPU kernel sum {sum(v['total_us'] for v in p.values()) / 3 / 1e3:.2f} ms/step")
