"""Causal attention beside PyTorch's in one process: vkML's fused kernels, vkML's composed path (matmul, masked
softmax, matmul: the L x S matrix in memory) and torch.nn.functional.scaled_dot_product_attention, forward and
forward + backward, in GPU time.

    python bench/attention.py --small                         # lavapipe and CPU torch (shapes that run in seconds)
    python bench/attention.py --out bench/results/attention_h200.json

Shapes (batch, heads, T, head dim): the GPT notebook's (32, 6, 256, 64) and (8, 12, 1024, 64). vkML's GPU time is
the sum of its dispatches' timestamps (`vkml.backends.vulkan.profile()`); PyTorch's the sum of its CUDA kernels'
device time (torch.profiler). TFLOP/s counts the causal half of q kᵀ and p v (forward 2, backward 5 of those
products: 4·B·H·T²·d/2 forward, 2.5× that backward), whatever each implementation recomputes. Timings never go
into tests.
"""
import argparse, json, math, statistics, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml
import vkml.backends.vulkan as vkv
import vkml.nn.functional as F
from vkml.frontend.autograd import grad
from vkml.frontend.tensor import realize

try:
    import torch
except ImportError:
    torch = None

SHAPES = [(32, 6, 256, 64), (8, 12, 1024, 64)]
SMALL = [(2, 2, 128, 64), (1, 2, 256, 32)]


def composed(q, k, v):
    "softmax(q kᵀ / √d + causal mask) v with the scores in memory (what vkML ran before the fused kernels)."
    T = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(q.shape[-1]))
    mask = vkml.tensor(np.tril(np.ones((T, T), bool)), device=q.device)
    return F.softmax(vkml.where(mask, s, -math.inf), -1) @ v


def vk_gpu_ms(step, reps):
    "Median over 3 rounds of the GPU time of `reps` steps realized in one submission, per step."
    realize(*step())   # warm-up: pipelines, memory
    ts = []
    for _ in range(3):
        outs = [t for _ in range(reps) for t in step()]
        with vkv.profile() as prof:
            realize(*outs); outs[-1].numpy()
        ts.append(sum(v["total_us"] for v in prof.values()) / 1e3 / reps)
        del outs
    return statistics.median(ts), sorted(prof)


def vk_rows(shape, dtype, reps, fn, name):
    rng = np.random.default_rng(0)
    q, k, v = (vkml.tensor(rng.standard_normal(shape).astype(dtype), device="vulkan", requires_grad=True) for _ in range(3))
    g = vkml.tensor(rng.standard_normal(shape).astype(dtype), device="vulkan")
    fwd, kernels = vk_gpu_ms(lambda: [fn(q, k, v)], reps)
    both, kernels_b = vk_gpu_ms(lambda: list(grad(fn(q, k, v), (q, k, v), g)), reps)
    vkv.reset_peak_memory_stats()
    realize(*grad(fn(q, k, v), (q, k, v), g))
    peak = vkv.memory_stats()["peak_bytes_in_use"]
    return {f"{name}_fwd_ms": fwd, f"{name}_fwd_bwd_ms": both, f"{name}_kernels": kernels_b, f"{name}_peak_bytes": peak}


def torch_rows(shape, dtype, reps):
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tdt = getattr(torch, np.dtype(dtype).name)
    gen = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(shape, generator=gen, dtype=torch.float32).to(dev, tdt).requires_grad_() for _ in range(3))
    g = torch.randn(shape, generator=gen).to(dev, tdt)
    fwd = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    both = lambda: torch.autograd.grad(fwd(), (q, k, v), g)

    def ms(f):
        f()
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if dev == "cuda" else [])
        ts = []
        for _ in range(3):
            with torch.profiler.profile(activities=acts) as prof:
                for _ in range(reps): f()
                if dev == "cuda": torch.cuda.synchronize()
            ev = prof.key_averages()
            if dev == "cuda": ts.append(sum(e.self_device_time_total for e in ev) / 1e3 / reps)
            else: ts.append(sum(e.self_cpu_time_total for e in ev) / 1e3 / reps)
        return statistics.median(ts)

    if dev == "cuda": torch.cuda.reset_peak_memory_stats()
    both()
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else None
    return {"torch_fwd_ms": ms(fwd), "torch_fwd_bwd_ms": ms(both), "torch_peak_bytes": peak, "torch_device": dev}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--dtypes", default="float32,float16")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--no-composed", action="store_true", help="skip vkML's composed path")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    reps = a.reps or (2 if a.small else 10)
    rows = []
    for shape in (SMALL if a.small else SHAPES):
        B, H, T, d = shape
        fl_fwd = 4 * B * H * T * T * d / 2
        for dt in a.dtypes.split(","):
            r = dict(shape=list(shape), dtype=dt, causal=True, flop_fwd=fl_fwd, flop_fwd_bwd=3.5 * fl_fwd)
            r.update(vk_rows(shape, np.dtype(dt), reps, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), "fused"))
            if not a.no_composed: r.update(vk_rows(shape, np.dtype(dt), reps, composed, "composed"))
            if torch is not None: r.update(torch_rows(shape, np.dtype(dt), reps))
            for part in ("fwd", "fwd_bwd"):
                r[f"fused_{part}_tflops"] = r[f"flop_{part}"] / r[f"fused_{part}_ms"] / 1e9
                if "torch_fwd_ms" in r: r[f"ratio_{part}"] = r[f"torch_{part}_ms"] / r[f"fused_{part}_ms"]
                if f"composed_{part}_ms" in r: r[f"speedup_{part}"] = r[f"composed_{part}_ms"] / r[f"fused_{part}_ms"]
            rows.append(r)
            print(f"{shape} {dt}: fused fwd {r['fused_fwd_ms']:.3f} ms ({r['fused_fwd_tflops']:.1f} TF/s), fwd+bwd "
                  f"{r['fused_fwd_bwd_ms']:.3f} ms ({r['fused_fwd_bwd_tflops']:.1f} TF/s)"
                  + (f"; composed {r['composed_fwd_ms']:.3f} / {r['composed_fwd_bwd_ms']:.3f} ms" if "composed_fwd_ms" in r else "")
                  + (f"; torch {r['torch_fwd_ms']:.3f} / {r['torch_fwd_bwd_ms']:.3f} ms, ratio {r['ratio_fwd']:.2f} / {r['ratio_fwd_bwd']:.2f}"
                     if "ratio_fwd" in r else ""), flush=True)
    if a.out:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import vs_torch
        prov = dict(vs_torch.provenance(argv), command=" ".join(["python", "bench/attention.py"] + argv),
                    torch=getattr(torch, "__version__", None))
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(dict(provenance=prov, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
