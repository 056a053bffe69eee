import cProfile, pstats, sys, time, os
from pathlib import Path
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import vkml, real_models as rm
case = sys.argv[1] if len(sys.argv) > 1 else 'resnet20'
small = os.environ.get('SMALL', '1') == '1'
spec = rm.case_specs(small)[case]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
data = spec["data"](4)
_m, run = rm.vk_setup(spec, weights, os.environ.get("MODE", "eager"))
for i in range(4): run(data[i % 4])
from vkml.backends.vulkan import backend as B
import vkml.backends.vulkan.recorder as R
st0 = dict(R.STATS)
t0 = time.perf_counter()
for i in range(5): run(data[i % 4])
print('step ms', (time.perf_counter() - t0) / 5 * 1e3)
print({k: (R.STATS[k] - st0.get(k, 0)) / 5 for k in R.STATS if isinstance(R.STATS[k], (int, float))})
pr = cProfile.Profile(); pr.enable()
for i in range(5): run(data[i % 4])
pr.disable()
ps = pstats.Stats(pr); ps.sort_stats('tottime').print_stats(30)
ps.sort_stats('cumtime').print_stats(45)
