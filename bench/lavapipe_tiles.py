"""Which matrix-product kernel is faster on a CPU device (lavapipe): the untiled `matmul_small` or the 64x64 tile,
over shapes from the digits demo up to 512³, each timed in alternation (best of `--reps`):
    python bench/lavapipe_tiles.py [--reps N] [--out bench/results/lavapipe_tiles.json]
`kernels_nn.cpu_untiled` (a CPU device takes the untiled kernel for every product) is read from it."""
import argparse, datetime, json, os, platform, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.backends.vulkan.kernels_nn as kn
from vkml.backends.vulkan import devices, default_index

SHAPES = [(1, 32, 10, 128), (32, 144, 32, 16), (1, 64, 64, 64), (1, 128, 128, 128), (1, 256, 256, 64),
          (1, 256, 256, 128), (1, 256, 256, 256), (8, 64, 256, 64), (1, 2048, 64, 64), (1, 128, 2048, 128),
          (1, 1024, 512, 128), (1, 512, 512, 512)]   # (batch, M, K, N)

def time_product(a, b, variant, reps):
    kn.FORCE_TILE = variant
    try:
        (a @ b).numpy(); best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter(); (a @ b).numpy(); best = min(best, time.perf_counter() - t0)
        return best * 1e3
    finally: kn.FORCE_TILE = None

def main(argv=None):
    ap = argparse.ArgumentParser(); ap.add_argument("--reps", type=int, default=5); ap.add_argument("--out")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for B, M, K, N in SHAPES:
        x = vkml.tensor(rng.standard_normal((B, M, K), dtype=np.float32), device="vulkan")
        w = vkml.tensor(rng.standard_normal((B, K, N), dtype=np.float32), device="vulkan")
        small, tiled = time_product(x, w, "matmul_small", a.reps), time_product(x, w, "matmul", a.reps)
        rows.append(dict(shape=[B, M, K, N], macs=B * M * K * N, small_ms=round(small, 3), tiled_ms=round(tiled, 3),
                         chosen=kn.variant_for(vkml.float32, M, N, B, K, "cpu")))
        print(rows[-1], flush=True)
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, cpus=os.cpu_count(),
               machine=platform.machine(), load_average=os.getloadavg()[0], rows=rows)   # (other work on the CPUs skews it)
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")

if __name__ == "__main__": main()
