"""Where the MLP Adam step's time goes on a GPU (a diagnostic for the step-path work):
    python bench/diag_mlp.py      # wall per step (jit and eager), GPU time per shader of one eager step"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_torch as V
import vkml
from vkml.backends.vulkan import profile

def per_step(run, n=30):
    "Median milliseconds per call after a warm-up (vs_torch's timing)."
    return V.timed(run, n, 5) * 1e3

data = V.batches((512, 784), 10)
for jit in (True, False):
    run = V.vk_stepper(V.vk_mlp((784, 1024, 1024, 10)), data, jit=jit)
    print(f"mlp {'jit' if jit else 'eager'}: {per_step(run):.3f} ms per step", flush=True)
x, y = data[0]
up = lambda: vkml.tensor(x, device=V.DEV).realize()
print(f"upload 512x784 f32 alone: {per_step(up):.3f} ms", flush=True)
run = V.vk_stepper(V.vk_mlp((784, 1024, 1024, 10)), data, jit=False)
for _ in range(3): run()
with profile() as p: run()
print(p)
print(f"GPU total of one eager step: {sum(v['total_us'] for v in p.values()) / 1e3:.3f} ms")
