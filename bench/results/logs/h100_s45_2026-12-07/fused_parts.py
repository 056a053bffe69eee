import sys, time, os, collections
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import vkml, real_models as rm
from vkml.backends.vulkan import backend as B, codegen
spec = rm.case_specs(True)[sys.argv[1] if len(sys.argv) > 1 else 'resnet20']
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
data = spec["data"](4)
_m, run = rm.vk_setup(spec, weights, "eager")
for i in range(4): run(data[i % 4])
T = collections.defaultdict(float); C = collections.Counter()
orig = B._FusedKernels._fused
def fused(self, rec, k):
    t0 = time.perf_counter(); prog = codegen.describe(k); T['describe'] += time.perf_counter() - t0
    t0 = time.perf_counter(); h = hash((prog.desc, 'x')); T['hash desc'] += time.perf_counter() - t0
    views = k.memo.get('launch')
    if views:
        v = views[0]
        t0 = time.perf_counter(); v == v; T['eq same obj'] += time.perf_counter() - t0
        import copy
        v2 = copy.deepcopy(v)
        t0 = time.perf_counter(); v == v2; T['eq copy'] += time.perf_counter() - t0
    C['n'] += 1
    return orig(self, rec, k)
B._FusedKernels._fused = fused
for i in range(5): run(data[i % 4])
for k, v in T.items(): print(f"{k:14s} {v / C['n'] * 1e6:7.2f} us per fused kernel")
