import sys, collections, os
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import vkml, real_models as rm
case = sys.argv[1]
spec = rm.case_specs(os.environ.get('SMALL', '1') == '1')[case]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
data = spec["data"](4)
_m, run = rm.vk_setup(spec, weights, "eager")
for i in range(3): run(data[i % 4])
with vkml.profile() as p: run(data[0])
for name, e in sorted(p.items(), key=lambda kv: -kv[1]['count']): print(f"{name:36s} {e['count']:4d} {e['total_us']:10.1f}")
print('total', sum(e['count'] for e in p.values()))
