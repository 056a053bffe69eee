"""Where an eager training step's host time goes (a diagnostic for the step-path work):
    python bench/diag_step.py OUTDIR     # timings on stdout, cProfile listings in OUTDIR"""
import cProfile, gc, io, pstats, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import vs_torch as V

out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)

def timing(label, run, n=20):
    for _ in range(3): run()
    w0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n): run()
    print(f"{label}: wall {(time.perf_counter() - w0) / n * 1e3:.3f} ms, main-thread cpu {(time.thread_time() - c0) / n * 1e3:.3f} ms per step", flush=True)

def profile(label, run, n=5):
    pr = cProfile.Profile(); pr.enable()
    for _ in range(n): run()
    pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(35)
    (out / f"profile_{label}.txt").write_text(s.getvalue())

mlp = V.vk_stepper(V.vk_mlp((784, 1024, 1024, 10)), V.batches((512, 784), 10), jit=False)
timing("mlp eager", mlp)
gc.disable(); timing("mlp eager, gc off", mlp); gc.enable()
profile("mlp_eager", mlp)
cnn = V.vk_stepper(V.vk_cifar(), V.batches((128, 3, 32, 32), 10), jit=False)
timing("cifar eager", cnn, 10)
profile("cifar_eager", cnn, 3)
cj = V.vk_stepper(V.vk_cifar(), V.batches((128, 3, 32, 32), 10), jit=True)
timing("cifar jit", cj, 10)
from vkml.backends.vulkan.recorder import profile as gpu_profile
with gpu_profile() as p:
    for _ in range(3): cnn()
(out / "gpu_cifar_eager.txt").write_text(repr(p))
import vkml
x, b = vkml.tensor(np.ones((16, 16), np.float32), device="vulkan"), vkml.tensor(np.ones((16, 16), np.float32), device="vulkan")
def chain():
    y = x
    for _ in range(1000): y = y + b
    return y
for label in ("gc on", "gc off"):
    if label == "gc off": gc.disable()
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); chain(); ts.append(time.perf_counter() - t0)
    print(f"build 1000 adds, {label}: {min(ts) / 1000 * 1e6:.2f} us per op")
    gc.enable()
profile("build", chain, 5)
import torch   # does importing torch change the host cost?
timing("mlp eager, torch imported", mlp)
