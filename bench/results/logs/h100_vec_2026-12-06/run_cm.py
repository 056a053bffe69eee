import sys, numpy as np
sys.path.insert(0, "bench")
import vkml.backends.vulkan.kernels_nn as kn
from bench_matmul import bench
if sys.argv[1] == "torch":
    import torch
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16); b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    for _ in range(3): a @ b
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(10):
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    print("torch f16 4096", round(2 * 4096**3 / min(ts) / 1e12, 1), "TFLOP/s")
else:
    kn.FORCE_TILE = sys.argv[1] if sys.argv[1] != "auto" else None
    r = bench(4096, np.float16, 10)
    print(sys.argv[1:], r["variant"], round(r["gflops_gpu"] / 1e3, 1), "TFLOP/s")
