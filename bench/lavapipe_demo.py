"""The digits demo's training step where there is no GPU: vkML on lavapipe (Mesa's Vulkan on the CPU)
beside PyTorch on the same CPU, in one process, and what the lavapipe step spends its time on:
    PYTHONPATH=<torch's site-packages> python bench/lavapipe_demo.py [--steps N] [--out FILE]
ratio = PyTorch's time / vkML's (issue goal: >= 0.1)."""
import argparse, datetime, json, os, platform, statistics, sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml, vkml.demo, vkml.optim as optim
import vkml.nn.functional as F
from vkml.backends.vulkan import profile, devices, default_index

def vk_step_fn(model, opt):
    def step(x, y):
        opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward(); opt.step(); return loss
    return step

def main(argv=None):
    ap = argparse.ArgumentParser(); ap.add_argument("--steps", type=int, default=30); ap.add_argument("--out")
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 1, 8, 8), dtype=np.float32); y = rng.integers(0, 10, 32)
    res = dict(date=datetime.date.today().isoformat(), device=devices()[default_index()].name, cpus=os.cpu_count(),
               machine=platform.machine(), batch=32)
    for mode in ("eager", "jit"):
        model = vkml.demo.build_model("cnn").to("vulkan"); opt = optim.Adam(model.parameters(), 1e-3)
        step = vk_step_fn(model, opt)
        if mode == "jit": step = vkml.jit(step)
        xv, yv = vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")
        for _ in range(3): step(xv, yv).item()
        ts = []
        for _ in range(a.steps):
            t0 = time.perf_counter(); step(xv, yv).item(); ts.append(time.perf_counter() - t0)
        res[f"vkml_{mode}_ms"] = statistics.median(ts) * 1e3
        if mode == "eager":
            with profile() as p: step(xv, yv).item()
            res["kernels_us"] = {k: round(v["total_us"], 1) for k, v in sorted(p.items(), key=lambda kv: -kv[1]["total_us"])[:12]}
    try:
        import torch
        torch.manual_seed(0); T = torch.nn
        m = T.Sequential(T.Conv2d(1, 16, 3, padding=1), T.ReLU(), T.MaxPool2d(2), T.Conv2d(16, 32, 3, padding=1), T.ReLU(),
                         T.MaxPool2d(2), T.Flatten(), T.Linear(32 * 2 * 2, 10))
        o = torch.optim.Adam(m.parameters(), 1e-3); xt, yt = torch.tensor(x), torch.tensor(y)
        def tstep():
            o.zero_grad(); l = torch.nn.functional.cross_entropy(m(xt), yt); l.backward(); o.step(); return l.item()
        for _ in range(3): tstep()
        ts = []
        for _ in range(a.steps):
            t0 = time.perf_counter(); tstep(); ts.append(time.perf_counter() - t0)
        res["torch_cpu_ms"] = statistics.median(ts) * 1e3; res["torch_threads"] = torch.get_num_threads()
        res["ratio_jit"] = res["torch_cpu_ms"] / res["vkml_jit_ms"]; res["ratio_eager"] = res["torch_cpu_ms"] / res["vkml_eager_ms"]
    except ImportError: res["torch_cpu_ms"] = None
    print(json.dumps(res, indent=1))
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1))

if __name__ == "__main__": main()
