"""The MLP Adam step (784-1024-1024-10, batch 512) under different matmul tile policies, each in a fresh
process (a diagnostic: which policy fills a big GPU for these mid-sized products):
    python bench/matmul_sweep.py"""
import json, subprocess, sys
from pathlib import Path

CONFIGS = {"default": {}, "small": {"FORCE_TILE": "matmul_small"},
           "split128": {"FILL_GROUPS": 528, "SPLIT_K_MIN": 128}, "split256": {"FILL_GROUPS": 528, "SPLIT_K_MIN": 256},
           "fill264": {"FILL_GROUPS": 264, "SPLIT_K_MIN": 128}}

def child(cfg):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import vkml.backends.vulkan.kernels_nn as K
    for k, v in cfg.items(): setattr(K, k, v)
    import vs_torch as V
    from vkml.backends.vulkan import profile
    data = V.batches((512, 784), 10)
    run = V.vk_stepper(V.vk_mlp((784, 1024, 1024, 10)), data, jit=True)
    jit = V.timed(run, 40, 5) * 1e3
    run = V.vk_stepper(V.vk_mlp((784, 1024, 1024, 10)), data, jit=False)
    for _ in range(3): run()
    with profile() as p: run()
    mm = {k: round(v["total_us"], 1) for k, v in p.items() if "matmul" in k or "reduce_cols" in k}
    print(json.dumps(dict(jit_ms=round(jit, 3), gpu_ms=round(sum(v["total_us"] for v in p.values()) / 1e3, 3), mm=mm)))

if __name__ == "__main__":
    if len(sys.argv) > 1: child(json.loads(sys.argv[1])); sys.exit()
    for name, cfg in CONFIGS.items():
        r = subprocess.run([sys.executable, __file__, json.dumps(cfg)], capture_output=True, text=True, timeout=120)
        print(name, r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else r.stderr[-600:], flush=True)
