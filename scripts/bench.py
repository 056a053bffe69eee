"""`make bench`: time a few operations on every available device, then run every `bench/bench_*.py`.

The elementwise timings here go to `_bench/results.json` (one record per op, size and device: median
seconds and GB/s); each benchmark script in bench/ runs with its defaults and prints its own table.
Timings never go into tests.
"""
import json, platform, statistics, subprocess, sys, time
from pathlib import Path
import numpy as np
import vkml
from vkml.core.ops import Op
from vkml.frontend.tensor import apply

ROOT = Path(__file__).resolve().parents[1]


def devices() -> list:
    out = ["cpu"]
    try:
        vkml.tensor([0.0], device="vulkan").numpy(); out.append("vulkan")
    except Exception as e: print(f"(no Vulkan: {type(e).__name__}: {e})")
    return out


def timeit(f, reps=5) -> float:
    "Median wall time of `f()` after one warm-up call."
    f(); ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    results = []
    for dev in devices():
        for n in (1 << 16, 1 << 20, 1 << 22):
            a = vkml.tensor(np.random.rand(n).astype(np.float32), device=dev)
            b = vkml.tensor(np.random.rand(n).astype(np.float32), device=dev)
            s = timeit(lambda: apply(Op.ADD, a, b).numpy())
            results.append(dict(op="add", n=n, dtype="float32", device=dev, seconds=s, gbps=3 * 4 * n / s / 1e9))
    print(f"{'op':<6}{'device':<8}{'n':>10}{'ms':>10}{'GB/s':>8}")
    for r in results: print(f"{r['op']:<6}{r['device']:<8}{r['n']:>10}{r['seconds'] * 1e3:>10.3f}{r['gbps']:>8.2f}")
    out = ROOT / "_bench" / "results.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(dict(machine=platform.platform(), python=sys.version.split()[0],
                                   vkml=vkml.__version__, results=results), indent=1))
    print(f"wrote {out.relative_to(ROOT)}")
    failed = []
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        print(f"\n== {script.relative_to(ROOT)}", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=ROOT).returncode != 0: failed.append(script.name)
    if failed: sys.exit(f"benchmarks failed: {failed}")


if __name__ == "__main__": main()
