"""vkML beside PyTorch on the same GPU, in the same process: the step-path goals.

    python bench/vs_torch.py --out bench/results/vs_torch_h200.json        # every case
    python bench/vs_torch.py --quick --out /tmp/vs.json                     # small sizes, a smoke run

Each case times vkML and (when `torch` with CUDA imports) PyTorch eager on the same GPU: medians of
wall-clock times after warm-up, each step ending with the loss read on the host (both sides sync the
same way). The ratio is PyTorch's time divided by vkML's (above 1: vkML is faster). Without torch the
vkML figures are written alone. The JSON names the date, device, driver, commit and command;
bench/render_results.py renders it into bench/RESULTS.md.

Cases (the goals of the step-path work):
  mlp_jit, mlp_eager    MLP 784-1024-1024-10, batch 512, Adam: a step with vkml.jit / without
  cnn_jit, cnn_eager    the digits CNN (the demo's), batch 32, Adam
  cifar_bn              a CNN on 3x32x32 with BatchNorm, batch 128, 1,000 steps: device memory after
                        every step (flat after step 2?), time per step
  dispatches            dispatches and submissions in one eager Adam step of a 3-layer MLP
  host_per_op           a chain of 1,000 adds (16x16) built and realized, per op
  replay_host           host time of one replayed MLP step (the call, with the GPU idle before it)
  demo                  the digits demo, ms per step on vulkan and on cpu
"""
import argparse, datetime, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
import vkml.nn as nn
import vkml.optim as optim
import vkml.frontend.functions as VF
from vkml.backends.vulkan import device as vkdev

try:
    import torch
    HAVE_TORCH = torch.cuda.is_available()
except Exception:
    torch, HAVE_TORCH = None, False

DEV = "vulkan"


def med(xs): return statistics.median(xs)


def samples(fn, n):
    "Wall seconds of each of n calls of fn() (fn syncs itself)."
    out = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); out.append(time.perf_counter() - t0)
    return out


def timed(fn, n, warm):
    "Median wall seconds of fn() over n calls after `warm` calls (fn syncs itself)."
    for _ in range(warm): fn()
    return med(samples(fn, n))


# ------------------------------------------------------------------ models, both libraries
def vk_mlp(sizes):
    VF.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]): layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1]).to(DEV)

def th_mlp(sizes):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]): layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1]).cuda()

def vk_digits_cnn():
    import vkml.demo
    return vkml.demo.build_model("cnn").to(DEV)

def th_digits_cnn():
    torch.manual_seed(0)
    T = torch.nn
    return T.Sequential(T.Conv2d(1, 16, 3, padding=1), T.ReLU(), T.MaxPool2d(2), T.Conv2d(16, 32, 3, padding=1), T.ReLU(),
                        T.MaxPool2d(2), T.Flatten(), T.Linear(32 * 2 * 2, 10)).cuda()

def _cifar_layers(M, widths=(32, 64, 128)):
    layers, c = [], 3
    for w in widths:
        layers += [M.Conv2d(c, w, 3, padding=1), M.BatchNorm2d(w), M.ReLU(), M.MaxPool2d(2)]
        c = w
    return layers + [M.Flatten(), M.Linear(c * 4 * 4, 10)]

def vk_cifar(widths=(32, 64, 128)):
    VF.manual_seed(0)
    return nn.Sequential(*_cifar_layers(nn, widths)).to(DEV)

def th_cifar(widths=(32, 64, 128)):
    torch.manual_seed(0)
    return torch.nn.Sequential(*_cifar_layers(torch.nn, widths)).cuda()


def batches(shape, classes, k=4, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, classes, shape[0])) for _ in range(k)]


def vk_stepper(model, data, jit):
    "A function running one vkML step on the next batch (uploaded from numpy), reading the loss."
    opt = optim.Adam(model.parameters(), lr=1e-3)
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward(); opt.step()
        return loss
    f = vkml.jit(step, enabled=jit)
    it = [0]
    def run():
        x, y = data[it[0] % len(data)]; it[0] += 1
        return f(vkml.tensor(x, device=DEV), vkml.tensor(y, device=DEV)).item()
    return run

def th_stepper(model, data):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    it = [0]
    def run():
        x, y = data[it[0] % len(data)]; it[0] += 1
        xb, yb = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward(); opt.step()
        return loss.item()
    return run


def row(case, what, vk_s, th_s, goal, unit="ms", note=""):
    "One result: both times, the ratio (PyTorch time / vkML time), and whether it meets `goal` (a ratio)."
    r = dict(case=case, what=what, vkml=vk_s, torch=th_s, unit=unit, goal=goal, note=note)
    if th_s is not None and vk_s:
        r["ratio"] = th_s / vk_s
        if isinstance(goal, (int, float)): r["met"] = r["ratio"] >= goal
    return r


def scale(s, unit): return s * (1e3 if unit == "ms" else 1e6)


# ------------------------------------------------------------------ cases
def case_steps(name, what, vk_model, th_model, shape, classes, jit, goal, n, warm, rounds=3):
    "Both libraries' steps timed in alternating rounds, so that a GPU clock that drifts meets both alike."
    data = batches(shape, classes)
    runs = {"vk": vk_stepper(vk_model(), data, jit)}
    if HAVE_TORCH: runs["th"] = th_stepper(th_model(), data)
    times = {k: [] for k in runs}
    for run in runs.values():
        for _ in range(warm): run()
    for _ in range(rounds):
        for k, run in runs.items(): times[k] += samples(run, -(-n // rounds))
    vk = scale(med(times["vk"]), "ms")
    th = scale(med(times["th"]), "ms") if HAVE_TORCH else None
    return row(name, what, vk, th, goal)


def warm_gpu(seconds):
    "Keep the GPU busy for `seconds` (both libraries) so that the first case does not meet idle clocks."
    a = vkml.randn(2048, 2048, device=DEV)
    t_end = time.perf_counter() + seconds / (2 if HAVE_TORCH else 1)
    while time.perf_counter() < t_end: (a @ a).sum().item()
    if HAVE_TORCH:
        b = torch.randn(2048, 2048, device="cuda")
        t_end = time.perf_counter() + seconds / 2
        while time.perf_counter() < t_end: (b @ b).sum().item()


def case_cifar(steps, shape):
    data = batches(shape, 10)
    model = vk_cifar()
    run = vk_stepper(model, data, jit=False)
    mem, times = [], []
    for i in range(steps):
        t0 = time.perf_counter(); run(); times.append(time.perf_counter() - t0)
        mem.append(vkml.memory_stats()["bytes_in_use"])
    flat = len(set(mem[2:])) == 1
    jrun = vk_stepper(vk_cifar(), data, jit=True)
    jit_ms = scale(timed(jrun, min(steps, 200), 3), "ms")
    th = scale(timed(th_stepper(th_cifar(), data), min(steps, 200), 3), "ms") if HAVE_TORCH else None
    r = row("cifar_bn", f"CNN with BatchNorm on {shape[1:]} images, batch {shape[0]}, Adam, {steps} eager steps",
            scale(med(times[2:]), "ms"), th, "memory flat after step 2",
            note=f"device bytes in use after step 2: {mem[2]:,}; after step {steps}: {mem[-1]:,}; jit: {jit_ms:.3f} ms per step")
    r.update(met=flat, memory_first=mem[:3], memory_last=mem[-1], jit_ms=jit_ms, steps=steps)
    if th is not None: r["jit_ratio"] = th / jit_ms
    return r


def case_dispatches():
    model = vk_mlp((784, 1024, 1024, 10))
    run = vk_stepper(model, batches((512, 784), 10), jit=False)
    for _ in range(3): run()
    vkdev.reset_stats(); run(); s = vkdev.stats()
    r = row("dispatches", "dispatches in one eager Adam step of the 3-layer MLP", s["dispatches"], None, "<= 30, in 1 submission",
            unit="dispatches", note=f"{s['submissions']} submission(s)")
    r["met"] = s["dispatches"] <= 30 and s["submissions"] == 1
    return r


def case_host_per_op(n=1000, reps=7):
    rng = np.random.default_rng(0)
    a, b = rng.random((16, 16), dtype=np.float32), rng.random((16, 16), dtype=np.float32)
    x, y = vkml.tensor(a, device=DEV), vkml.tensor(b, device=DEV)
    def vk_chain():
        z = x
        for _ in range(n): z = z + y
        z.realize(); vkml.backends.vulkan.device.get_device().wait()
    vk = scale(timed(vk_chain, reps, 2) / n, "us")
    th = None
    if HAVE_TORCH:
        tx, ty = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
        def th_chain():
            z = tx
            for _ in range(n): z = z + ty
            torch.cuda.synchronize()
        th = scale(timed(th_chain, reps, 2) / n, "us")
    r = row("host_per_op", f"a chain of {n} adds built and realized, per op", vk, th, "<= 10 us", unit="us")
    r["met"] = vk <= 10
    return r


def case_replay_host(n=50):
    model = vk_mlp((784, 1024, 1024, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    def step(x, y):
        opt.zero_grad(); loss = nn.functional.cross_entropy(model(x), y); loss.backward(); opt.step(); return loss
    f = vkml.jit(step)
    (xa, ya), = batches((512, 784), 10, k=1)
    x, y = vkml.tensor(xa, device=DEV), vkml.tensor(ya, device=DEV)
    for _ in range(3): f(x, y).item()
    out = []
    for _ in range(n):
        t0 = time.perf_counter(); loss = f(x, y); t1 = time.perf_counter()
        loss.item(); out.append(t1 - t0)
    (st,), = f.captures.values()         # (one capture, for one argument signature)
    cap = st.captured
    r = row("replay_host", "host time of one replayed MLP Adam step", scale(med(out), "us"), None, "<= 100 us", unit="us",
            note=f"{cap.commands} commands recorded once, replayed in one submission")
    r["met"] = r["vkml"] <= 100
    return r


def case_demo(epochs):
    import vkml.demo
    res = {}
    for dev in ("cpu", "vulkan"):
        with tempfile.TemporaryDirectory() as d:
            r = vkml.demo.main(["--device", dev, "--epochs", str(epochs), "--out", d, "--no-progress"])
        res[dev] = r["train_s"] / len(r["hist"]["step_loss"]) * 1e3
    r = row("demo", f"the digits demo (CNN, {epochs} epochs), ms per step: vulkan vs cpu", res["vulkan"], None,
            "vulkan faster than cpu", note=f"cpu: {res['cpu']:.3f} ms per step")
    r.update(cpu=res["cpu"], met=res["vulkan"] < res["cpu"])
    return r


def provenance(argv):
    name = driver = "unknown"
    try:
        info = vkml.backends.vulkan.devices()[vkml.backends.vulkan.default_index()]
        name, driver = info.name, info.driver
    except Exception: pass
    try: commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except Exception: commit = "unknown"
    return dict(date=datetime.date.today().isoformat(), device=name, driver=driver,
                commit=os.environ.get("VKML_COMMIT", commit), host=platform.node(),
                torch=(torch.__version__ if HAVE_TORCH else None),
                command=" ".join(["python", "bench/vs_torch.py"] + argv))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="small sizes and few steps (a smoke run, e.g. on lavapipe)")
    ap.add_argument("--cases", nargs="+", default=None)
    ap.add_argument("--warm-s", type=float, default=3.0, help="seconds of GPU work before the first case (clocks up)")
    a = ap.parse_args(argv)
    q = a.quick
    mlp = (784, 1024, 1024, 10) if not q else (64, 64, 64, 10)
    batch = 512 if not q else 32
    n, warm = (50, 5) if not q else (3, 2)
    cases = {
        "mlp_jit": lambda: case_steps("mlp_jit", f"MLP {'-'.join(map(str, mlp))}, batch {batch}, Adam, step with vkml.jit",
                                      lambda: vk_mlp(mlp), lambda: th_mlp(mlp), (batch, mlp[0]), 10, True, 1.0, n, warm),
        "mlp_eager": lambda: case_steps("mlp_eager", "the same MLP step, eager", lambda: vk_mlp(mlp), lambda: th_mlp(mlp),
                                        (batch, mlp[0]), 10, False, 0.5, n, warm),
        "cnn_jit": lambda: case_steps("cnn_jit", "digits CNN, batch 32, Adam, step with vkml.jit", vk_digits_cnn, th_digits_cnn,
                                      (32, 1, 8, 8), 10, True, 1.0, n, warm),
        "cnn_eager": lambda: case_steps("cnn_eager", "the same CNN step, eager", vk_digits_cnn, th_digits_cnn,
                                        (32, 1, 8, 8), 10, False, 0.5, n, warm),
        "cifar_bn": lambda: case_cifar(1000 if not q else 5, (128, 3, 32, 32) if not q else (4, 3, 32, 32)),
        "dispatches": case_dispatches,
        "host_per_op": lambda: case_host_per_op(1000 if not q else 100, 7 if not q else 2),
        "replay_host": lambda: case_replay_host(50 if not q else 5),
        "demo": lambda: case_demo(5 if not q else 1),
    }
    todo = a.cases or list(cases)
    warm_gpu(a.warm_s)
    rows = []
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in todo:
        t0 = time.perf_counter()
        try: r = cases[name]()
        except Exception as e:
            r = dict(case=name, error=f"{type(e).__name__}: {e}")
        r["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(r)
        print(json.dumps(r), flush=True)
        out.write_text(json.dumps(dict(provenance=provenance(argv), quick=q, results=rows), indent=1))
    print(f"{'case':<12}{'vkML':>12}{'PyTorch':>12}{'ratio':>8}  goal / met")
    for r in rows:
        if "error" in r: print(f"{r['case']:<12} ERROR {r['error']}"); continue
        f = lambda v: "-" if v is None else f"{v:.3f}"
        print(f"{r['case']:<12}{f(r['vkml']):>12}{f(r['torch']):>12}{f(r.get('ratio')):>8}  {r['goal']} / {r.get('met')}")


if __name__ == "__main__":
    main()
