import sys, time, statistics, gc; sys.path.insert(0, "bench"); sys.path.insert(0, ".")
import vkml, real_models as rm
from vkml.backends.vulkan import device as D
from vkml.backends.vulkan.recorder import STATS
small = "--small" in sys.argv
med = lambda xs: statistics.median(xs) * 1e3
for case in [c for c in sys.argv[1:] if not c.startswith("--")]:
    spec = rm.case_specs(small)[case]
    w = rm.init_weights(spec["build"](rm.Lib("vkml")))
    data = spec["data"](2)
    model, run = rm.vk_setup(spec, w, "jit")
    for i in range(5): run(data[i % 2])
    A = []
    for i in range(30):
        t = time.perf_counter(); run(data[i % 2]); A.append(time.perf_counter() - t)
    # the jitted function itself: vk_setup's f is in run's closure
    f = run.__closure__[[c.cell_contents.__class__.__name__ for c in run.__closure__].index("jit")].cell_contents if False else None
    import inspect
    cv = inspect.getclosurevars(run).nonlocals; f = cv["f"]
    xs = [(vkml.tensor(x, device="vulkan"), vkml.tensor(y, device="vulkan")) for x, y in data]
    for x, y in xs: x.realize(); y.realize()
    dev = D.get_device(); dev.wait()
    B, Dh, U = [], [], []
    for i in range(30):
        t = time.perf_counter(); l = f(*xs[i % 2]); t1 = time.perf_counter(); l.item(); B.append(time.perf_counter() - t); Dh.append(t1 - t)
    for i in range(30):
        x, y = data[i % 2]
        t = time.perf_counter(); a = vkml.tensor(x, device="vulkan"); b = vkml.tensor(y, device="vulkan"); U.append(time.perf_counter() - t)
    dev.wait()
    b0, s0 = STATS["barriers"], STATS["submissions"]
    n = 30; t = time.perf_counter()
    ls = [f(*xs[i % 2]) for i in range(n)]
    ls[-1].item(); C = (time.perf_counter() - t) / n * 1e3
    print(f"{case}: run(batch) {med(A):.3f} ms | on-device inputs, item each step {med(B):.3f} | host of the call {med(Dh):.3f} | "
          f"upload x,y {med(U):.3f} | {n} back to back {C:.3f} ms/step | barriers/step {(STATS['barriers']-b0)/n:.0f} subs/step {(STATS['submissions']-s0)/n:.1f}", flush=True)
    del model, run, f, xs, ls; gc.collect()
