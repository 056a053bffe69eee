import sys
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import numpy as np, vkml, real_models as rm
g = dict(n_layer=6, n_head=2, n_embd=32, block_size=16, vocab_size=65)
spec = dict(build=lambda lib: rm.gpt_model(lib, **g), loss="lm", opt=("AdamW", dict(lr=3e-4)))
rng = np.random.default_rng(0)
data = [(rng.integers(0, 65, (2, 16)), rng.integers(0, 65, (2, 16))) for _ in range(4)]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
_m, run = rm.vk_setup(spec, weights, "eager")
losses = [run(data[i % 4]) for i in range(3)]
with vkml.profile() as p: run(data[0])
print("dispatches", sum(e['count'] for e in p.values()), "losses", losses)
