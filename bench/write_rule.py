"""What the write rule (ADR 0027) costs: the host time `track` adds per graph node, the time a step spends
finding lazy readers, and what copy-on-write would have cost instead (a copy of every written byte per step).

    python bench/write_rule.py --device vulkan --out bench/results/write_rule_h200.json"""
import argparse, json, sys, time, datetime, platform
import numpy as np
import vkml, vkml.nn as nn, vkml.optim as optim
import vkml.nn.functional as F

T = sys.modules["vkml.frontend.tensor"]


def median(xs): return float(np.median(xs))


def per_node_us(n=10000, rounds=9) -> dict:
    "Host µs to build one node of a long chain, with `track` and with it stubbed out (alternating rounds)."
    a, b = vkml.tensor(np.ones(4, np.float32)), vkml.tensor(np.ones(4, np.float32))
    def build():
        t0 = time.perf_counter(); x = a
        for _ in range(n): x = x + b
        return (time.perf_counter() - t0) / n * 1e6
    on, off, real = [], [], T.track
    try:
        for _ in range(rounds):
            T.track = real; on.append(build())
            T.track = lambda t: None; off.append(build())
    finally: T.track = real
    return {"tracked_us": median(on), "untracked_us": median(off), "track_us": median(on) - median(off)}


def mlp(device):
    vkml.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)


def step_ms(device, keep: int, steps=30) -> float:
    "Host+device ms of an eager Adam step (batch 512) that keeps `keep` lazy values of the weights across it."
    m = mlp(device); opt = optim.Adam(m.parameters(), lr=1e-3)
    x = vkml.tensor(np.random.default_rng(0).standard_normal((512, 784)).astype(np.float32), device=device)
    y = vkml.tensor(np.zeros(512, np.int64), device=device)
    ts = []
    for i in range(steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        kept = [p * 1.0 for p in list(m.parameters())[:keep]]   # lazy readers of the memory the step writes
        loss = F.cross_entropy(m(x), y); loss.backward(); opt.step()
        loss.item()
        for k in kept: k.realize()
        ts.append((time.perf_counter() - t0) * 1e3)
    return median(ts[5:])


def copy_ms(device, nbytes: int, reps=20) -> float:
    "ms to copy `nbytes` on the device (what copy-on-write adds to every step), read back to finish."
    src = vkml.zeros(nbytes // 4, device=device).realize()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); c = src.clone(); c[:1].numpy(); ts.append((time.perf_counter() - t0) * 1e3)
    return median(ts[3:])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(); ap.add_argument("--device", default="vulkan"); ap.add_argument("--out", required=True)
    a = ap.parse_args()
    m = mlp(a.device)
    pbytes = sum(p.numel() * 4 for p in m.parameters())
    res = {"per_node": per_node_us(),
           "step_no_readers_ms": step_ms(a.device, 0), "step_three_readers_ms": step_ms(a.device, 3),
           "written_bytes_per_adam_step": 3 * pbytes,
           "copy_on_write_ms": copy_ms(a.device, 3 * pbytes)}
    res["provenance"] = {"date": datetime.date.today().isoformat(), "device": vkml.get_backend(a.device).name
                         if hasattr(vkml, "get_backend") else a.device, "host": platform.node(),
                         "command": f"python bench/write_rule.py --device {a.device} --out {a.out}"}
    json.dump(res, open(a.out, "w"), indent=1)
    print(json.dumps(res, indent=1))
