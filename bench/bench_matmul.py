"""Matmul throughput on the current Vulkan device: GFLOP/s for a few square sizes, f32 and f16.

    python bench/bench_matmul.py                       # 256 and 512 (lavapipe-friendly)
    python bench/bench_matmul.py --sizes 1024,2048,4096 --reps 10 --json _bench/matmul.json

For each size, `reps` independent products of the same operands are realized in ONE submission;
GPU time per dispatch comes from `vkml.backends.vulkan.profile()` (timestamp queries), wall time from the
submission to the readback of one result. GFLOP/s counts 2*M*N*K flops per product. Prints a
table; timings never go into tests.
"""
import argparse, json, platform, statistics, sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml.backends.vulkan as vkv
from vkml.frontend.tensor import tensor, apply, realize
from vkml.core.ops import Op
import vkml.backends.vulkan.kernels_nn as kn


def bench(n: int, dtype, reps: int, batch: int = 1):
    a = tensor(np.random.default_rng(0).standard_normal((batch, n, n)).astype(dtype), device="vulkan")
    b = tensor(np.random.default_rng(1).standard_normal((batch, n, n)).astype(dtype), device="vulkan")
    apply(Op.MATMUL, a, b).numpy()                     # warm-up: pipelines, allocations
    walls, gpu_us, variant = [], [], None
    for _ in range(3):
        outs = [apply(Op.MATMUL, a, b) for _ in range(reps)]
        with vkv.profile() as prof:
            t = time.perf_counter()
            realize(*outs); outs[-1].numpy()
            walls.append((time.perf_counter() - t) / reps)
        (variant, e), = [(k, v) for k, v in prof.items() if k.startswith("matmul")]
        gpu_us.append(e["total_us"] / e["count"])
    flop = 2.0 * batch * n ** 3
    g, w = statistics.median(gpu_us) * 1e-6, min(walls)
    return dict(n=n, dtype=np.dtype(dtype).name, batch=batch, variant=variant, gpu_s=g, wall_s=w,
                gflops_gpu=flop / g / 1e9 if g > 0 else float("nan"), gflops_wall=flop / w / 1e9)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="256,512")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--variant", default=None, choices=["matmul", "matmul128x64", "matmul64x128", "matmul128", "matmul_small"],
                    help="force one kernel variant (default: the kernel's own choice by size)")
    args = ap.parse_args()
    if args.variant: kn.FORCE_TILE = args.variant
    dev = vkv.get_device(vkv.default_index())
    name = f"{dev.info.name} ({dev.name})"
    rows = [bench(int(s), np.dtype(d).type, args.reps) for d in args.dtypes.split(",") for s in args.sizes.split(",")]
    print(f"matmul on {name}")
    print(f"{'dtype':<8} {'n':>6} {'variant':<18} {'GPU ms':>9} {'GFLOP/s (GPU)':>14} {'GFLOP/s (wall)':>15}")
    for r in rows:
        print(f"{r['dtype']:<8} {r['n']:>6} {r['variant']:<18} {r['gpu_s'] * 1e3:>9.2f} {r['gflops_gpu']:>14.1f} {r['gflops_wall']:>15.1f}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        import datetime, os
        Path(args.json).write_text(json.dumps(dict(date=datetime.date.today().isoformat(), device=name, host=platform.node(),
            commit=os.environ.get("VKML_COMMIT", ""), command="python bench/bench_matmul.py " + " ".join(sys.argv[1:]),
            results=rows), indent=1))


if __name__ == "__main__":
    main()
