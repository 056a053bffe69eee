"""Reductions on a CPU device (lavapipe): the GPU's plan (a workgroup of 256 per row, or two passes) against the CPU's
(a thread per row: kernels.cpu_serial), each timed in alternation (GPU timestamps, median of `--reps`):
    python bench/lavapipe_reduce.py [--reps N] [--out bench/results/lavapipe_reduce.json]
The prediction it tests: lavapipe runs a workgroup as fibres of 8 lanes on one core and loads every word lane by lane,
so a row's workgroup pays for its combine (subgroup shuffles, shared memory, a barrier) on top of the same loads a
lone thread makes; with 8 or more rows to fill a vector's lanes, a thread per row should win by the combine's cost,
several times over on rows of a few thousand terms. With fewer rows than lanes, long rows lose that edge."""
import argparse, datetime, json, os, platform, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.backends.vulkan.kernel_api as kapi
from vkml.backends.vulkan import devices, default_index, profile

# (shape, reduced axes, what): the digits CNN step's reductions first, then rows of other lengths and counts
CASES = [((32, 16, 8, 8), (0, 2, 3), "conv1 bias gradient"), ((32, 32, 4, 4), (0, 2, 3), "conv2 bias gradient"),
         ((32, 10), (0,), "linear bias gradient"), ((32, 10), (1,), "a loss's rows"), ((256, 1024), (1,), "256 rows of 1024"),
         ((16, 8192), (1,), "16 rows of 8192"), ((4, 16384), (1,), "4 rows of 16384"), ((2048,), (0,), "one row of 2048"),
         ((65536,), (0,), "one row of 65536")]

def time_sum(x, axes, policy: str) -> tuple:
    "GPU time of one sum under `policy` (µs) and the shaders it ran."
    kept, kapi.TILE_POLICY = kapi.TILE_POLICY, policy
    try:
        with profile() as p: x.sum(dim=axes).numpy()
        return sum(e["total_us"] for e in p.values()), sorted(p)
    finally: kapi.TILE_POLICY = kept

def main(argv=None):
    ap = argparse.ArgumentParser(); ap.add_argument("--reps", type=int, default=9); ap.add_argument("--out")
    a = ap.parse_args(argv)
    assert devices()[default_index()].type == "cpu", "a CPU device (lavapipe)"
    rng = np.random.default_rng(0)
    rows = []
    for shape, axes, what in CASES:
        x = vkml.tensor(rng.standard_normal(shape, dtype=np.float32), device="vulkan")
        ts, names = {"gpu": [], "auto": []}, {}
        for _ in range(a.reps):
            for pol in ts:
                t, names[pol] = time_sum(x, axes, pol)
                ts[pol].append(t)
        g, c = statistics.median(ts["gpu"]), statistics.median(ts["auto"])
        rows.append(dict(what=what, shape=list(shape), axes=list(axes), gpu_plan=names["gpu"], cpu_plan=names["auto"],
                         gpu_plan_us=round(g, 1), cpu_plan_us=round(c, 1), speedup=round(g / c, 2)))
        print(rows[-1], flush=True)
    demo = [r for r in rows if r["what"].startswith(("conv", "linear"))]
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, cpus=os.cpu_count(),
               machine=platform.machine(), load_average=os.getloadavg()[0], reps=a.reps,
               demo_gpu_plan_us=round(sum(r["gpu_plan_us"] for r in demo), 1),
               demo_cpu_plan_us=round(sum(r["cpu_plan_us"] for r in demo), 1), rows=rows)
    print(json.dumps({k: v for k, v in res.items() if k != "rows"}))
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")

if __name__ == "__main__": main()
