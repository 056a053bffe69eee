import sys, time, statistics, gc, os; sys.path.insert(0, "bench"); sys.path.insert(0, ".")
import numpy as np, vkml, real_models as rm
case = sys.argv[1]
if case == "gpt":
    g = dict(n_layer=6, n_head=6, n_embd=24, block_size=8, vocab_size=65)
    rng = np.random.default_rng(0)
    data = [(rng.integers(0, 65, (1, 8)), rng.integers(0, 65, (1, 8))) for _ in range(2)]
    spec = dict(build=lambda lib: rm.gpt_model(lib, **g), data=None, loss="lm", opt=("AdamW", dict(lr=3e-4)))
else:
    spec = rm.case_specs(True)[case]; data = spec["data"](2)
w = rm.init_weights(spec["build"](rm.Lib("vkml")))
_m, run = rm.vk_setup(spec, w, "eager")
for i in range(4): run(data[i % 2])
cb = []
gc.callbacks.append(lambda phase, info: cb.append((phase, info["generation"], time.perf_counter())))
N = 30; t = time.perf_counter()
for i in range(N): run(data[i % 2])
wall = (time.perf_counter() - t) / N
per = {0: 0.0, 1: 0.0, 2: 0.0}; cnt = {0: 0, 1: 0, 2: 0}
for ph, gen, tt in cb:
    if ph == "start": st = tt
    else: per[gen] += tt - st; cnt[gen] += 1
print(f"{case}: step {wall*1e3:.2f} ms; gc per step: " + ", ".join(f"gen{g} {per[g]/N*1e3:.2f} ms ({cnt[g]/N:.1f}x)" for g in per) + f"; objects tracked {len(gc.get_objects())}")
