"""Host cost per op: building the lazy graph and realizing it, phase by phase (the goal: <= 10 us per op).

    python bench/host_overhead.py                       # N = 1000 and 100, print a table
    python bench/host_overhead.py --json out.json       # also write the figures as JSON
    python bench/host_overhead.py --profile add         # cProfile of building + realizing one chain

Chains (each op reads the previous one's result; tensors are tiny, so device time is negligible):
  add    x = x + b, N times (1 node and 1 dispatch per op)
  mixed  a cycle of add, mul by a Python scalar, exp, permute (a view), sum(dim=0, keepdim) and a
         broadcast add of that sum, N user ops in all

Phases, in microseconds per user op (median of `--reps` runs, each on a freshly built graph):
  build      the Python calls that build the graph through the public API
  realize    `vkml.realize(x)` end to end, un-instrumented
  and, from a second, instrumented realize, its split:
  schedule   `Schedule(...)`: order, fusion regions, kernels, memory plan
  codegen    `codegen.describe`: a fused kernel's program (operands, parameters) from its nodes
  record     `Recorder.record` (binding, barrier planning, vkCmd* calls)
  submit     `Recorder.submit` plus the wait for the fence (includes the device's own run time)
  other      the rest: the backend's checks, argument words, allocation, views, bookkeeping
  host       build + the realize split without submit: the Python cost per op (on lavapipe "submit"
             is the CPU device itself running the dispatches, and noisy)
On "cpu" the split is schedule / numpy (the backend's run) / other, and host is build + realize.
An add chain fuses: about one generated kernel per 64 adds.
"""
import argparse, cProfile, datetime, json, platform, pstats, statistics, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import numpy as np
import vkml
T = sys.modules["vkml.frontend.tensor"]   # (`vkml.tensor` the attribute is the function)


SHAPE = (16, 16)


def inputs(device):
    rng = np.random.default_rng(0)
    x = vkml.tensor(rng.random(SHAPE, dtype=np.float32) * 0.1, device=device)
    b = vkml.tensor(rng.random(SHAPE, dtype=np.float32) * 0.1, device=device)
    return x, b


def chain_add(x, b, n):
    for _ in range(n): x = x + b
    return x


def chain_mixed(x, b, n):
    steps = [lambda x: x + b, lambda x: x * 0.5, lambda x: x.exp(), lambda x: x.permute(1, 0),
             lambda x: x.sum(0, keepdim=True), None]
    i, s = 0, None
    while i < n:
        k = i % 6
        if k == 4: s = x.sum(0, keepdim=True)
        elif k == 5: x = x + s
        else: x = steps[k](x)
        i += 1
    return x


CHAINS = dict(add=chain_add, mixed=chain_mixed)


class Timers:
    "Accumulating wall-clock timers put around the runtime's phases (monkeypatched, undone on exit)."
    def __init__(self):
        self.t = dict(schedule=0.0, codegen=0.0, record=0.0, submit=0.0, numpy=0.0)
        self._undo = []

    def wrap(self, obj, name, key, wait_after=None):
        f = getattr(obj, name)
        t, pc = self.t, time.perf_counter
        def timed(*a, **k):
            t0 = pc()
            try:
                r = f(*a, **k)
                if wait_after is not None: wait_after(a, r)
                return r
            finally: t[key] += pc() - t0
        setattr(obj, name, timed)
        self._undo.append((obj, name, f))

    def __enter__(self): return self

    def __exit__(self, *exc):
        for obj, name, f in reversed(self._undo): setattr(obj, name, f)


def realize_split(device, chain, n):
    "One instrumented realize: seconds per phase."
    x, b = inputs(device)
    y = CHAINS[chain](x, b, n)
    with Timers() as tm:
        tm.wrap(T, "Schedule", "schedule")
        if device == "vulkan":
            from vkml.backends.vulkan import recorder as D, codegen
            tm.wrap(codegen, "describe", "codegen")
            tm.wrap(D.Recorder, "record", "record")
            tm.wrap(D.Recorder, "submit", "submit", wait_after=lambda a, s: a[0].dev.wait(s))
        else:
            be = T.get_backend("cpu")
            tm.wrap(type(be), "run", "numpy")
        t0 = time.perf_counter()
        T.realize(y)
        if device == "vulkan": T.get_backend(y.device).device.wait()
        total = time.perf_counter() - t0
    t = dict(tm.t)
    if device == "vulkan":
        del t["numpy"]
        t["other"] = total - sum(t.values())
    else:
        for k in ("codegen", "record", "submit"): del t[k]
        t["other"] = total - t["schedule"] - t["numpy"]
    return t


def measure(device, chain, n, reps):
    "Median seconds of building and of realizing (plain), and the median instrumented split."
    build, real, splits = [], [], []
    for _ in range(reps + 1):   # the first run warms pipelines and the allocator
        x, b = inputs(device)
        t0 = time.perf_counter()
        y = CHAINS[chain](x, b, n)
        t1 = time.perf_counter()
        T.realize(y)
        if device == "vulkan": T.get_backend(y.device).device.wait()
        t2 = time.perf_counter()
        build.append(t1 - t0); real.append(t2 - t1)
        del y, x, b
    for _ in range(reps): splits.append(realize_split(device, chain, n))
    med = lambda xs: statistics.median(xs[1:] if len(xs) > 1 else xs)
    split = {k: statistics.median(s[k] for s in splits) for k in splits[0]}
    nodes = len(T.schedule(CHAINS[chain](*inputs(device), n)))
    return dict(build=med(build), realize=med(real), split=split, nodes=nodes)


def check(device):
    "The chains compute what numpy computes (a benchmark of wrong answers is worthless)."
    x, b = inputs(device)
    xn, bn = x.numpy().astype(np.float64), b.numpy().astype(np.float64)
    np.testing.assert_allclose(chain_add(x, b, 50).numpy(), xn + 50 * bn, rtol=1e-5)
    y = chain_mixed(x, b, 12).numpy()
    r = xn
    for _ in range(2):
        r = np.exp((r + bn) * 0.5).T
        r = r + r.sum(0, keepdims=True)
    np.testing.assert_allclose(y, r, rtol=1e-4)


def profile(device, chain, n, top):
    x, b = inputs(device)
    T.realize(CHAINS[chain](x, b, n))   # warm up
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(3):
        y = CHAINS[chain](x, b, n)
        T.realize(y)
        if device == "vulkan": T.get_backend(y.device).device.wait()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 100])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--devices", nargs="+", default=["vulkan", "cpu"])
    ap.add_argument("--chains", nargs="+", default=list(CHAINS))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--profile", choices=list(CHAINS), help="print a cProfile of this chain instead")
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    if a.profile:
        profile(a.devices[0], a.profile, a.n[0], a.top); return
    rows = []
    for device in a.devices:
        check(device)
        for chain in a.chains:
            for n in a.n:
                m = measure(device, chain, n, a.reps)
                us = lambda s: round(s / n * 1e6, 2)
                sp = m["split"]
                host = m["build"] + (sum(v for k, v in sp.items() if k != "submit") if device != "cpu" else m["realize"])
                rows.append(dict(device=device, chain=chain, n=n, nodes=m["nodes"], build_us=us(m["build"]),
                                 realize_us=us(m["realize"]), **{f"{k}_us": us(v) for k, v in sp.items()},
                                 host_us=us(host)))
    dev_name = "cpu"
    if "vulkan" in a.devices:
        import vkml.backends.vulkan as vkv
        dev_name = vkv.devices()[vkv.default_index()].name
    cols = ["build_us", "realize_us", "schedule_us", "codegen_us", "record_us", "submit_us", "numpy_us", "other_us"]
    print(f"vulkan device: {dev_name}; host: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print("microseconds per op (realize's split is from a second, instrumented run)")
    print(f"{'device':<8}{'chain':<7}{'N':>6}{'nodes':>7}" + "".join(f"{c[:-3]:>10}" for c in cols)
          + f"{'total':>10}{'host':>10}")
    for r in rows:
        print(f"{r['device']:<8}{r['chain']:<7}{r['n']:>6}{r['nodes']:>7}"
              + "".join(f"{r[c]:>10.2f}" if c in r else f"{'':>10}" for c in cols)
              + f"{r['build_us'] + r['realize_us']:>10.2f}{r['host_us']:>10.2f}")
    if a.json:
        out = dict(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   command=" ".join(sys.argv), vulkan_device=dev_name, python=platform.python_version(),
                   shape=list(SHAPE), rows=rows)
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1))
        print("wrote", a.json)


if __name__ == "__main__":
    main()
