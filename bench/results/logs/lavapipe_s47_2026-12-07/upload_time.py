import sys, time, statistics; sys.path.insert(0, '.')
import numpy as np, vkml
x = np.random.default_rng(0).standard_normal((128, 3, 32, 32)).astype(np.float32)
y = np.random.default_rng(0).integers(0, 10, 128)
for _ in range(20): vkml.tensor(x, device="vulkan")
ts = []
for _ in range(200):
    t0 = time.perf_counter(); a = vkml.tensor(x, device="vulkan"); b = vkml.tensor(y, device="vulkan"); ts.append(time.perf_counter() - t0); del a, b
print("upload x, y us", round(statistics.median(ts) * 1e6, 1))
