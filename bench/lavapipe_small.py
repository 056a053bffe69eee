"""The untiled matrix-product kernel on a CPU device (lavapipe): the GPU's 4x4 block per thread against the CPU's 8x16
and 16x16 (kernels_nn.SMALL_BLOCKS), on the products of the digits demo's training step, each timed in alternation (GPU
timestamps, median of `--reps`), and the one kernels_nn.cpu_small_block chooses:
    python bench/lavapipe_small.py [--reps N] [--out bench/results/lavapipe_small.json]
The prediction it tests: Mesa 22's lavapipe loads a buffer word by looping over the 8 lanes of a SIMD vector, some 20
cycles a lane, so a product's time goes with the words its threads load, M*N*K*(1/TM + 1/TN) (the multiply-adds are
cheap beside them): 8x16 loads 0.1875 words per multiply-add against 4x4's 0.5, 2.7 times fewer."""
import argparse, datetime, json, os, platform, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.backends.vulkan.kernels_nn as kn
import vkml.backends.vulkan.kernel_api as kapi
from vkml.backends.vulkan import devices, default_index, profile

# (batch, M, K, N, A transposed, B transposed): the digits CNN's products, forward and backward
SHAPES = [(32, 16, 9, 64, 0, 0), (32, 32, 144, 16, 0, 0), (1, 32, 128, 10, 0, 1), (1, 10, 32, 128, 1, 0),
          (1, 32, 10, 128, 0, 0), (32, 32, 16, 144, 0, 1), (32, 144, 32, 16, 1, 0), (32, 16, 64, 9, 0, 1)]

def words_per_mac(variant: str) -> float:
    tm, tn, _ = kn.SMALL_BLOCKS[variant]
    return 1 / tm + 1 / tn

def time_product(a, b, variant: str) -> float:
    "GPU time of one product on `variant` (µs)."
    kept, kn.cpu_small_block = kn.cpu_small_block, lambda M, N, nb: variant
    try:
        with profile() as p: (a @ b).numpy()
        assert set(p) == {f"{variant}_f32"}, sorted(p)
        return p[f"{variant}_f32"]["total_us"]
    finally: kn.cpu_small_block = kept

def main(argv=None):
    ap = argparse.ArgumentParser(); ap.add_argument("--reps", type=int, default=9); ap.add_argument("--out")
    a = ap.parse_args(argv)
    assert kapi.TILE_POLICY == "auto" and devices()[default_index()].type == "cpu", "a CPU device under its own tile policy"
    rng = np.random.default_rng(0)
    def operand(B, r, c, t):
        v = vkml.tensor(rng.standard_normal((B, c, r) if t else (B, r, c), dtype=np.float32), device="vulkan")
        return v.transpose(-1, -2) if t else v
    rows = []
    for B, M, K, N, ta, tb in SHAPES:
        x, w = operand(B, M, K, ta), operand(B, K, N, tb)
        ts = {"matmul_small": [], "matmul_small_cpu": [], "matmul_small_cpu16": []}
        for _ in range(a.reps):
            for v in ts: ts[v].append(time_product(x, w, v))
        gpu_us, cpu_us, cpu16_us = (statistics.median(ts[v]) for v in ts)
        chosen = kn.cpu_small_block(M, N, B)
        rows.append(dict(shape=[B, M, K, N], transposed=[ta, tb], macs=B * M * K * N, block4x4_us=round(gpu_us, 1),
                         block8x16_us=round(cpu_us, 1), speedup=round(gpu_us / cpu_us, 2), block16x16_us=round(cpu16_us, 1),
                         chosen="16×16" if chosen == "matmul_small_cpu16" else "8×16",
                         chosen_us=round(cpu16_us if chosen == "matmul_small_cpu16" else cpu_us, 1)))
        print(rows[-1], flush=True)
    tot = lambda k: sum(r[k] for r in rows)
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, cpus=os.cpu_count(),
               machine=platform.machine(), load_average=os.getloadavg()[0], reps=a.reps,
               predicted_speedup=round(words_per_mac("matmul_small") / words_per_mac("matmul_small_cpu"), 2),
               total_block4x4_us=round(tot("block4x4_us"), 1), total_block8x16_us=round(tot("block8x16_us"), 1),
               total_block16x16_us=round(tot("block16x16_us"), 1), total_chosen_us=round(tot("chosen_us"), 1), rows=rows)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")

if __name__ == "__main__": main()
