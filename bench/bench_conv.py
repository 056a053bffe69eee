"""Convolution throughput on the current Vulkan device: conv2d forward and conv_transpose2d (the input
gradient of the same layer), direct and lowered, in GFLOP/s of GPU time.

    python bench/bench_conv.py                          # a small layer (lavapipe-friendly)
    python bench/bench_conv.py --n 32 --c 256 --hw 14   # a ResNet-sized 3x3 layer

GPU time per op comes from `vkml.backends.vulkan.profile()` (all of an op's dispatches summed). Prints a table.
"""
import argparse, statistics, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml.backends.vulkan as vkv
from vkml.frontend.tensor import tensor, apply, realize
from vkml.core.ops import Op
import vkml.backends.vulkan.kernels_nn as kn


def gpu_seconds(build, reps):
    build().numpy()   # warm-up
    ts = []
    for _ in range(3):
        outs = [build() for _ in range(reps)]
        with vkv.profile() as prof:
            realize(*outs); outs[-1].numpy()
        ts.append(sum(v["total_us"] for v in prof.values()) * 1e-6 / reps)
    return statistics.median(ts), sorted(prof)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2); ap.add_argument("--c", type=int, default=32)
    ap.add_argument("--hw", type=int, default=14); ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--dtype", default="float32"); ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    x = tensor(rng.standard_normal((a.n, a.c, a.hw, a.hw)).astype(a.dtype), device="vulkan")
    w = tensor(rng.standard_normal((a.c, a.c, a.k, a.k)).astype(a.dtype), device="vulkan")
    pad = a.k // 2
    flop = 2.0 * a.n * a.c * a.c * a.hw * a.hw * a.k * a.k
    dev = vkv.get_device(vkv.default_index())
    print(f"conv {a.n}x{a.c}x{a.hw}x{a.hw}, {a.c} filters {a.k}x{a.k}, {a.dtype}, on {dev.info.name}")
    print(f"{'op':<28} {'GPU ms':>9} {'GFLOP/s':>10}  shaders")
    rows = [("conv2d", lambda: apply(Op.CONV2D, x, w, arg=((1, 1), (pad, pad), (1, 1), 1)), None)]
    for path, knob in (("direct", 10**9), ("lowered", 0)):
        rows.append((f"conv_transpose2d ({path})", lambda: apply(Op.CONV_TRANSPOSE2D, x, w, arg=((1, 1), (pad, pad), (0, 0), (1, 1), 1)), knob))
    for name, build, knob in rows:
        if knob is not None: kn.CT_LOWER_MIN_K = knob
        s, shaders = gpu_seconds(build, a.reps)
        print(f"{name:<28} {s * 1e3:>9.3f} {flop / s / 1e9:>10.1f}  {','.join(shaders)}")


if __name__ == "__main__":
    main()
