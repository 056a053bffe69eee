"""Bandwidth of a few operators on the current Vulkan device, from GPU timestamps.

    python bench/bench_ops.py                  # small sizes (lavapipe-friendly)
    python bench/bench_ops.py --big --json bench/results/ops_h200.json   # the H200's sizes

For each case the graph is realized once to warm up, then `reps` times inside `vkml.backends.vulkan.profile()`;
the GPU time is the sum of the case's kernels per realize (median), and GB/s counts the bytes an
ideal kernel must move (read each input once, write the output once). Composed operators (softmax,
layer_norm, rms_norm) run several kernels today: their GB/s against that ideal is what fusion would buy.
Prints a table; timings never go into tests.
"""
import argparse, datetime, json, platform, statistics, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml
import vkml.nn.functional as F
import vkml.backends.vulkan as vkv


def cases(big: bool):
    n = 256 << 20 if big else 1 << 20            # a + b: 256M elements on the H200
    r, c = (16384, 16384) if big else (512, 512)  # sum over the last axis
    s = (4096, 4096) if big else (256, 256)       # softmax / norms
    b4 = (64, 64, 128, 128) if big else (4, 8, 32, 32)
    rng = np.random.default_rng(0)
    f = lambda *sh: vkml.tensor(rng.standard_normal(sh, dtype=np.float32), device="vulkan")
    yield "add f32 (contiguous, vec4)", lambda a, b: a + b, (f(n), f(n)), 3 * 4 * n
    yield "add f32 rank-4 broadcast", lambda a, b: a + b, (f(*b4), f(b4[0], 1, b4[2], 1)), 4 * (2 * np.prod(b4) + b4[0] * b4[2])
    yield "sum over last axis", lambda a: a.sum(dim=-1), (f(r, c),), 4 * (r * c + r)
    yield "softmax (last axis)", lambda a: F.softmax(a, dim=-1), (f(*s),), 4 * 2 * s[0] * s[1]
    w = vkml.ones(s[1], device="vulkan"); z = vkml.zeros(s[1], device="vulkan")
    yield "layer_norm", lambda a: F.layer_norm(a, (s[1],), w, z), (f(*s),), 4 * 2 * s[0] * s[1]
    yield "rms_norm", lambda a: F.rms_norm(a, (s[1],), w), (f(*s),), 4 * 2 * s[0] * s[1]


def run(fn, args, reps):
    fn(*args).realize(); vkv.stats()
    gpu, disp = [], 0
    for _ in range(reps):
        out = fn(*args)
        with vkv.profile() as prof:
            out.realize()
        gpu.append(sum(e["total_us"] for e in prof.values()))
        disp = sum(e["count"] for e in prof.values())
    return statistics.median(gpu), disp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = vkv.devices()[vkv.default_index()]
    rows = []
    print(f"device: {dev.name}")
    print(f"{'case':<30}{'dispatches':>11}{'GPU us':>12}{'GB/s':>10}")
    for name, fn, args, nbytes in cases(a.big):
        us, disp = run(fn, args, a.reps)
        gbps = nbytes / (us * 1e-6) / 1e9 if us > 0 else float("nan")
        rows.append(dict(case=name, dispatches=disp, gpu_us=us, ideal_bytes=int(nbytes), gbps=gbps))
        print(f"{name:<30}{disp:>11}{us:>12.1f}{gbps:>10.1f}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(dict(date=datetime.date.today().isoformat(), device=dev.name,
            driver=getattr(dev, "driver", ""), command="python bench/bench_ops.py " + " ".join(sys.argv[1:]),
            results=rows), indent=1))


if __name__ == "__main__":
    main()
