import sys, time, gc, collections
sys.path.insert(0, 'bench'); sys.path.insert(0, '.')
import numpy as np, vkml, real_models as rm
from vkml.core import graph as G
from vkml.frontend import tensor as T
g = dict(n_layer=6, n_head=2, n_embd=32, block_size=16, vocab_size=65)
spec = dict(build=lambda lib: rm.gpt_model(lib, **g), loss="lm", opt=("AdamW", dict(lr=3e-4)))
rng = np.random.default_rng(0)
data = [(rng.integers(0, 65, (2, 16)), rng.integers(0, 65, (2, 16))) for _ in range(4)]
weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
ops = collections.Counter()
orig_init = G.Node.__init__
def init(self, op, *a, **k):
    ops[op.name] += 1; orig_init(self, op, *a, **k)
for mode in sys.argv[1:]:
    _m, run = rm.vk_setup(spec, weights, mode)
    for i in range(3): run(data[i % 4])
    G.Node.__init__ = init; ops.clear()
    run(data[0])
    G.Node.__init__ = orig_init
    print(mode, 'nodes per step', sum(ops.values()))
    print('  ', ops.most_common(25))
