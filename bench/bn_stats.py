"""BatchNorm's statistics against memory bandwidth (issue 22, row 5: >= 60 %), beside PyTorch in one process:
    python bench/bn_stats.py [--reps 20] [--out FILE]
For each activation of the real-model CNNs (batch 128, f32), the GPU time (vkml.profile; torch.profiler's CUDA
kernels) of: the per-channel sum over (N, H, W); batch_norm's forward in training (mean, variance, normalised
output); and forward + backward. Bandwidth is what the statistics must read (x once per pass: the sum reads it once,
the mean and variance twice) over the time; the reference is a copy's bandwidth measured here (read + write)."""
import argparse, datetime, json, os, platform, statistics, subprocess, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.nn.functional as F
from vkml.backends.vulkan import devices, default_index, profile

SHAPES = [(128, 32, 32, 32), (128, 64, 16, 16), (128, 128, 8, 8), (128, 16, 32, 32)]

def vk_time(fn, reps):
    "Median GPU time (µs) of fn() and its shaders' share, from vkml.profile."
    for _ in range(2): fn()
    runs, per = [], {}
    for _ in range(reps):
        with profile() as p: fn()
        runs.append(sum(e["total_us"] for e in p.values()))
        for k, e in p.items(): per[k] = per.get(k, 0.0) + e["total_us"] / reps
    return statistics.median(runs), {k: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}

def th_time(fn, reps, torch):
    "Median CUDA kernel time (µs) of fn() per call, and per kernel name."
    for _ in range(2): fn()
    torch.cuda.synchronize()
    from torch.profiler import profile as tprof, ProfilerActivity
    with tprof(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps): fn(); torch.cuda.synchronize()
    per = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t and e.key and not e.key.startswith("cuda"): per[e.key[:60]] = per.get(e.key[:60], 0.0) + t / reps
    return sum(per.values()), {k: round(v, 1) for k, v in sorted(per.items(), key=lambda kv: -kv[1])}

def main(argv=None):
    ap = argparse.ArgumentParser(); ap.add_argument("--reps", type=int, default=20); ap.add_argument("--out")
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args(argv)
    torch = None
    if not a.no_torch:
        try:
            import torch
            if not torch.cuda.is_available(): torch = None
        except ImportError: torch = None
    rng = np.random.default_rng(0)
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, machine=platform.machine(),
               commit=os.environ.get("VKML_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                                      text=True).stdout.strip(), rows=[])
    big = vkml.tensor(rng.standard_normal(1 << 24, dtype=np.float32), device="vulkan")     # 64 MiB: a copy's bandwidth
    us, _ = vk_time(lambda: (big * 1.0).numpy()[:1], a.reps)
    res["vk_copy_gbps"] = round(2 * big.numel() * 4 / us / 1e3, 1)
    if torch is not None:
        tb = torch.from_numpy(big.numpy()).cuda()
        us, _ = th_time(lambda: tb.clone(), a.reps, torch)
        res["torch_copy_gbps"] = round(2 * tb.numel() * 4 / us / 1e3, 1)
    print("copy GB/s", res.get("vk_copy_gbps"), res.get("torch_copy_gbps"), flush=True)
    for shape in SHAPES:
        xn = rng.standard_normal(shape, dtype=np.float32)
        gn = rng.standard_normal(shape, dtype=np.float32)
        C, nbytes = shape[1], xn.nbytes
        x = vkml.tensor(xn, device="vulkan"); g = vkml.tensor(gn, device="vulkan")
        w = vkml.tensor(np.ones(C, np.float32), device="vulkan", requires_grad=True)
        b = vkml.tensor(np.zeros(C, np.float32), device="vulkan", requires_grad=True)
        xg = vkml.tensor(xn, device="vulkan", requires_grad=True)
        def bn_fwd():
            y, mu, var = F.batch_norm_stats(x, w.detach(), b.detach())
            vkml.realize(y, mu, var) if hasattr(vkml, "realize") else (y.numpy(), mu.numpy())
        def bn_fwd_bwd():
            y = F.batch_norm(xg, None, None, w, b, training=True)
            (y * g).sum().backward()
            xg.grad.numpy()[:1]; xg.grad = w.grad = b.grad = None
        row = dict(shape=list(shape), mb=round(nbytes / 2**20, 2))
        row["vk_sum_us"], row["vk_sum_shaders"] = vk_time(lambda: x.sum((0, 2, 3)).numpy(), a.reps)
        row["vk_bn_fwd_us"], row["vk_bn_fwd_shaders"] = vk_time(bn_fwd, a.reps)
        row["vk_bn_fwd_bwd_us"], row["vk_bn_fwd_bwd_shaders"] = vk_time(bn_fwd_bwd, a.reps)
        row["vk_sum_gbps"] = round(nbytes / row["vk_sum_us"] / 1e3, 1)
        if torch is not None:
            tx, tg = torch.from_numpy(xn).cuda(), torch.from_numpy(gn).cuda()
            tw = torch.ones(C, device="cuda", requires_grad=True); tbias = torch.zeros(C, device="cuda", requires_grad=True)
            txg = tx.clone().requires_grad_(True)
            def t_bwd():
                y = torch.nn.functional.batch_norm(txg, None, None, tw, tbias, training=True)
                (y * tg).sum().backward(); txg.grad = tw.grad = tbias.grad = None
            row["torch_sum_us"], row["torch_sum_kernels"] = th_time(lambda: tx.sum((0, 2, 3)), a.reps, torch)
            row["torch_bn_fwd_us"], row["torch_bn_fwd_kernels"] = th_time(
                lambda: torch.nn.functional.batch_norm(tx, None, None, tw.detach(), tbias.detach(), training=True), a.reps, torch)
            row["torch_bn_fwd_bwd_us"], row["torch_bn_fwd_bwd_kernels"] = th_time(t_bwd, a.reps, torch)
            row["torch_sum_gbps"] = round(nbytes / row["torch_sum_us"] / 1e3, 1)
        res["rows"].append(row)
        print(shape, {k: v for k, v in row.items() if not k.endswith(("shaders", "kernels"))}, flush=True)
        print("   vk fwd+bwd:", list(row["vk_bn_fwd_bwd_shaders"].items())[:8], flush=True)
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")

if __name__ == "__main__": main()
