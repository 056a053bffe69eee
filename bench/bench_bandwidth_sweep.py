"""Elementwise bandwidth against tensor size: where does `a + b` fall off?

    python bench/bench_bandwidth_sweep.py                     # sizes for the H200 (up to 256M float32)
    python bench/bench_bandwidth_sweep.py --sizes 1,4         # millions of elements, lavapipe-friendly

For each size, the best of a few realizes of `a + b` in GPU time (timestamp queries), once with the
operands in two allocations and once as two halves of one allocation. On the H200 the add lost more
than half its bandwidth once one allocation grew past a few hundred MiB, whatever the memory type
(VKML_DEVICE_MEMORY=plain picks device-local memory that is not host-visible): a lead for the
performance work, not yet explained.
Prints a table; timings never go into tests.
"""
import argparse, os, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml, vkml.backends.vulkan as vkv


def gbps(n, us): return 12 * n / (us * 1e-6) / 1e9


def best(a, b, n, reps):
    (a + b).realize()
    out = 0.0
    for _ in range(reps):
        o = a + b
        with vkv.profile() as p: o.realize()
        out = max(out, gbps(n, sum(e["total_us"] for e in p.values())))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="32,64,96,128,192,256", help="millions (2**20) of float32 elements")
    ap.add_argument("--reps", type=int, default=4)
    a_ = ap.parse_args()
    print(f"device: {vkv.devices()[vkv.default_index()].name}; memory: {os.environ.get('VKML_DEVICE_MEMORY', 'default')}")
    print(f"{'M elements':>10}{'two allocations GB/s':>22}{'one allocation GB/s':>22}")
    for m in map(int, a_.sizes.split(",")):
        n = m << 20
        a, b = (vkml.tensor(np.ones(n, np.float32), device="vulkan") for _ in range(2))
        ab = vkml.tensor(np.ones(2 * n, np.float32), device="vulkan")
        print(f"{m:>10}{best(a, b, n, a_.reps):>22.0f}{best(ab[:n], ab[n:], n, a_.reps):>22.0f}", flush=True)
        del a, b, ab


if __name__ == "__main__":
    main()
