"""The kernels against PyTorch on the same GPU: elementwise, reductions, norms and losses, matmul (f32, f16), bmm, conv2d.

    python bench/bench_kernels.py --out bench/results/kernels_h200.json            # the issue's cases (H200)
    python bench/bench_kernels.py --out /tmp/k.json --sweep                        # + every candidate tile shape
    python bench/bench_kernels.py --small --out /tmp/k.json                        # tiny sizes (lavapipe, CI)

Each case is timed with vkML (GPU timestamps from `vkml.backends.vulkan.profile()`, all of the case's dispatches
summed, one realize per repetition) and, when `torch` with CUDA is importable, with PyTorch in the same
process (CUDA events; TF32 off for f32 matmul and convolution). Both are medians after warm-up; ratio =
PyTorch time / vkML time (above 1: vkML is faster), and each case says whether it meets the issue's goal.
Without torch the script reports vkML alone. `--sweep` also times the candidate variants (matmul tiles
forced one by one, the tensor-core block shapes, the split thresholds of the weight gradient and the
column sums) so that one run on the GPU compares them; it stops sweeping when `--budget` seconds have
passed. The JSON (both figures, the ratio, the goal, met or not, device, driver, commit, date) goes to
`--out`; a short table is printed last. The JSON also holds a series per kernel family (rate against size,
both libraries: the performance notebook plots it; `--no-series` skips it) and the CPU backend's `prod` beside
numpy's (host wall time). Timings never go into tests.
"""
from __future__ import annotations
import argparse, datetime, json, os, platform, statistics, subprocess, sys, time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml
import vkml.backends.vulkan as vkv
import vkml.backends.vulkan.kernels as kr
import vkml.backends.vulkan.kernels_nn as kn
from vkml.frontend.tensor import tensor, apply, realize
import vkml.nn.functional as F
from vkml.core.ops import Op

T0 = time.perf_counter()


def _torch():
    "torch and a CUDA device, or (None, why)."
    try:
        import torch
    except Exception as e: return None, f"no torch ({type(e).__name__})"
    if not torch.cuda.is_available(): return None, "torch without CUDA"
    torch.backends.cuda.matmul.allow_tf32 = False   # f32 matmul in f32 (the comparison)
    torch.backends.cudnn.allow_tf32 = False
    return torch, f"torch {torch.__version__}, CUDA {torch.version.cuda}"


# ------------------------------------------------------------------------------------------ timing
def vk_time(build, reps: int):
    "Median GPU microseconds of one realize of `build()` (a list of unrealized tensors), and the shaders run."
    realize(*build())                       # warm-up: pipelines, allocations
    ts, names = [], set()
    for _ in range(reps):
        outs = build()
        with vkv.profile() as prof: realize(*outs)
        ts.append(sum(v["total_us"] for v in prof.values())); names |= set(prof)
        del outs
    return statistics.median(ts), sorted(names)


def torch_time(torch, fn, reps: int) -> float:
    "Median microseconds of `fn()` on the GPU (CUDA events), after warm-up."
    for _ in range(3): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e) * 1000.0)
    return statistics.median(ts)


# ------------------------------------------------------------------------------------------ cases
def cases(small: bool):
    """(name, goal, work, vkML inputs as numpy, vkML build(*tensors) -> [outs], torch fn(torch, *tensors) or None,
    the unit of `work`). Sizes are the issue's (H200) or tiny ones (--small)."""
    rng = np.random.default_rng(0)
    f = lambda *s, dt=np.float32: rng.standard_normal(s).astype(dt)
    r = 512 if small else 16384
    yield ("sum over the last axis", 0.9, 4.0 * r * r, [f(r, r)], lambda a: [apply(Op.SUM, a, arg=((1,), False))],
           lambda t, a: a.sum(dim=1), "bytes")
    yield ("sum over the first axis", 0.9, 4.0 * r * r, [f(r, r)], lambda a: [apply(Op.SUM, a, arg=((0,), False))],
           lambda t, a: a.sum(dim=0), "bytes")
    yield ("argmax over the first axis", None, 4.0 * r * r, [f(r, r)], lambda a: [apply(Op.ARGMAX, a, arg=(0, False))],
           lambda t, a: a.argmax(dim=0), "bytes")
    # broadcast and strided elementwise (bytes: what must be read and written at least)
    b4 = (4, 8, 32, 32) if small else (64, 64, 128, 128)
    yield ("add, rank-4 broadcast", 0.9, 4.0 * (2 * np.prod(b4) + b4[0] * b4[2]), [f(*b4), f(b4[0], 1, b4[2], 1)],
           lambda a, b: [a + b], lambda t, a, b: a + b, "bytes")
    yield ("add, a row broadcast over a matrix", 0.9, 4.0 * (2 * r * r + r), [f(r, r), f(r)], lambda a, b: [a + b],
           lambda t, a, b: a + b, "bytes")
    yield ("mul with a transposed operand", 0.9, 4.0 * 3 * r * r, [f(r, r), f(r, r)], lambda a, b: [a * b.T],
           lambda t, a, b: a * b.t(), "bytes")
    e = 1 << (16 if small else 26)
    yield ("exp, 64M" if not small else "exp, 64K", 1.0, 4.0 * 2 * e, [f(e)], lambda a: [a.exp()], lambda t, a: a.exp(), "bytes")
    # norm layers and losses: one dispatch per row block (row kernels)
    yield ("softmax over the last axis", 0.9, 4.0 * 2 * r * r, [f(r, r)], lambda a: [F.softmax(a, -1)],
           lambda t, a: t.softmax(a, -1), "bytes")
    yield ("log_softmax over the last axis", None, 4.0 * 2 * r * r, [f(r, r)], lambda a: [F.log_softmax(a, -1)],
           lambda t, a: t.log_softmax(a, -1), "bytes")
    yield ("layer_norm over the last axis", 0.9, 4.0 * 2 * r * r, [f(r, r)], lambda a: [F.layer_norm(a, (a.shape[-1],))],
           lambda t, a: t.nn.functional.layer_norm(a, (a.shape[-1],)), "bytes")
    yield ("rms_norm over the last axis", 0.9, 4.0 * 2 * r * r, [f(r, r)], lambda a: [F.rms_norm(a, (a.shape[-1],))],
           lambda t, a: t.nn.functional.rms_norm(a, (a.shape[-1],)), "bytes")
    n_ce, c_ce = (64, 512) if small else (8192, 16384)
    tgt = rng.integers(0, c_ce, n_ce)
    yield (f"cross_entropy forward + backward {n_ce}x{c_ce}", 0.9, 4.0 * 2 * n_ce * c_ce, [f(n_ce, c_ce), tgt],
           vk_cross_entropy, torch_cross_entropy, "bytes")
    mm = lambda a, b: [apply(Op.MATMUL, a, b)]
    for n, dt, goal in ([(64, np.float32, 0.9), (128, np.float32, 0.8), (128, np.float16, 0.5)] if small else
                        [(1024, np.float32, 0.9), (4096, np.float32, 0.8), (4096, np.float16, 0.5)]):
        yield (f"matmul {np.dtype(dt).name} {n}^3", goal, 2.0 * n ** 3, [f(1, n, n, dt=dt), f(1, n, n, dt=dt)], mm,
               lambda t, a, b: a @ b, "flop")
    b, n = (4, 64) if small else (32, 512)
    yield (f"bmm f32 {b}x{n}^3", 0.8, 2.0 * b * n ** 3, [f(b, n, n), f(b, n, n)], mm, lambda t, a, b: torch_bmm(t, a, b), "flop")
    N, C, HW = (2, 8, 12) if small else (32, 64, 56)
    for dt, goal in ((np.float32, 0.8), (np.float16, None)):
        arg = ((1, 1), (1, 1), (1, 1), 1)
        def conv_fb(x, w, g):
            return [apply(Op.CONV2D, x, w, arg=arg),
                    apply(Op.CONV_TRANSPOSE2D, g, w, arg=((1, 1), (1, 1), (0, 0), (1, 1), 1)),
                    apply(Op.CONV2D_WEIGHT, g, x, arg=((3, 3), (1, 1), (1, 1), (1, 1), 1))]
        yield (f"conv2d fwd+bwd {np.dtype(dt).name} {C}->{C} {HW}x{HW} batch {N}", goal, 3 * 2.0 * N * C * C * HW * HW * 9,
               [f(N, C, HW, HW, dt=dt), f(C, C, 3, 3, dt=dt), f(N, C, HW, HW, dt=dt)], conv_fb, torch_conv_fb, "flop")


def torch_bmm(t, a, b): return t.bmm(a, b)


def vk_cross_entropy(x, target):
    "The loss and its gradient with respect to the logits (what a training step computes)."
    x = x.detach().requires_grad_(True)
    loss = F.cross_entropy(x, target)
    return [loss, vkml.frontend.autograd.grad(loss, x)[0]]


def torch_cross_entropy(t, x, target):
    x = x.detach().requires_grad_(True)
    loss = t.nn.functional.cross_entropy(x, target)
    return loss, t.autograd.grad(loss, x)[0]


def torch_conv_fb(t, x, w, g):
    "conv2d forward, then its input and weight gradients (what vkML's three ops compute)."
    import torch.nn.functional as F
    x.requires_grad_(True); w.requires_grad_(True)
    y = F.conv2d(x, w, padding=1)
    return t.autograd.grad(y, (x, w), g)


def rate(work: float, unit: str, us: float) -> str:
    if not us or us != us: return "-"
    return f"{work / us / 1e6:8.1f} TFLOP/s" if unit == "flop" else f"{work / us / 1e3:8.1f} GB/s"


# ------------------------------------------------------------------------------------------ sweep
def sweep_entries(small: bool):
    "(group, variant, setup(), teardown(), inputs, build, work, unit): candidate kernels to compare in one run."
    rng = np.random.default_rng(1)
    f = lambda *s, dt=np.float32: rng.standard_normal(s).astype(dt)
    mm = lambda a, b: [apply(Op.MATMUL, a, b)]
    def force(name):
        return (lambda: setattr(kn, "FORCE_TILE", name)), (lambda: setattr(kn, "FORCE_TILE", None))
    # in order of what matters most (the sweep stops at --budget): row kernels, then tensor cores
    from vkml.backends.vulkan import codegen
    for rows, cols in (((64, 512),) if small else ((16384, 16384), (16384, 4096))):
        x = f(rows, cols)
        for local in (128, 256, 512, 1024):
            for cache in (16, 32):
                def setup(local=local, cache=cache): codegen.ROW_LOCAL_MAX, codegen.ROW_CACHE = local, cache
                def teardown(saved=(codegen.ROW_LOCAL_MAX, codegen.ROW_CACHE)): codegen.ROW_LOCAL_MAX, codegen.ROW_CACHE = saved
                for name, fn in (("softmax", lambda a: [F.softmax(a, -1)]), ("layer_norm", lambda a: [F.layer_norm(a, a.shape[-1:])])):
                    yield (f"{name} {rows}x{cols}", f"{local} threads, {cache} kept", setup, teardown, [x], fn,
                           8.0 * rows * cols, "bytes")
    n_ce, c_ce = (64, 512) if small else (8192, 16384)
    xs, ts = f(n_ce, c_ce), rng.integers(0, c_ce, n_ce)
    for local in (256, 512, 1024):
        def setup(local=local): codegen.ROW_LOCAL_MAX = local
        def teardown(saved=codegen.ROW_LOCAL_MAX): codegen.ROW_LOCAL_MAX = saved
        yield (f"cross_entropy fwd+bwd {n_ce}x{c_ce}", f"{local} threads", setup, teardown, [xs, ts], vk_cross_entropy,
               8.0 * n_ce * c_ce, "bytes")
    cm = list(kn.COOPMAT_TILES) + list(kn.COOPMAT_MORE)
    for n in ((128,) if small else (1024, 4096, 8192)):
        a16 = [f(1, n, n, dt=np.float16), f(1, n, n, dt=np.float16)]
        off = (lambda: setattr(kn, "COOPMAT", "off")), (lambda: setattr(kn, "COOPMAT", "auto"))
        yield (f"matmul f16 {n}^3", "plain (no tensor cores)", *off, a16, mm, 2.0 * n ** 3, "flop")
        for name in cm:
            yield (f"matmul f16 {n}^3", name, *force(name), a16, mm, 2.0 * n ** 3, "flop")
    orig = (kn.matmul_variant, kn.split_k)
    def split(name, parts):   # a tile with K split into `parts` chunks on the z grid (+ a pass summing them)
        def setup():
            kn.matmul_variant = lambda M, N, batch: name
            kn.split_k = lambda nm, M, N, K, nb: parts
        def teardown(): kn.matmul_variant, kn.split_k = orig
        return setup, teardown
    for n in ((64, 128) if small else (1024, 4096)):
        for name in kn.MATMUL_TILES:
            yield (f"matmul f32 {n}^3", name, *force(name), [f(1, n, n), f(1, n, n)], mm, 2.0 * n ** 3, "flop")
        for parts in (2, 4):
            yield (f"matmul f32 {n}^3", f"matmul128, K split {parts}", *split("matmul128", parts),
                   [f(1, n, n), f(1, n, n)], mm, 2.0 * n ** 3, "flop")
    N, C, HW = (2, 8, 12) if small else (32, 64, 56)
    x, w, g = f(N, C, HW, HW), f(C, C, 3, 3), f(N, C, HW, HW)
    flop = 2.0 * N * C * C * HW * HW * 9
    fwd = lambda x, w, g: [apply(Op.CONV2D, x, w, arg=((1, 1), (1, 1), (1, 1), 1))]
    dx = lambda x, w, g: [apply(Op.CONV_TRANSPOSE2D, g, w, arg=((1, 1), (1, 1), (0, 0), (1, 1), 1))]
    dw = lambda x, w, g: [apply(Op.CONV2D_WEIGHT, g, x, arg=((3, 3), (1, 1), (1, 1), (1, 1), 1))]
    for name in kn.MATMUL_TILES:
        yield (f"conv2d forward {C}->{C} {HW}x{HW} batch {N}", name, *force(name), [x, w, g], fwd, flop, "flop")
        yield (f"conv2d input grad {C}->{C} {HW}x{HW} batch {N}", name, *force(name), [x, w, g], dx, flop, "flop")
    for fill in (60, 120, 264, 528, 1056):   # the weight gradient's K split: FILL_GROUPS decides how many chunks
        yield (f"conv2d weight grad {C}->{C} {HW}x{HW} batch {N}", f"FILL_GROUPS={fill}",
               lambda fill=fill: setattr(kn, "FILL_GROUPS", fill), lambda: setattr(kn, "FILL_GROUPS", 120),
               [x, w, g], dw, flop, "flop")
    r = 512 if small else 16384
    a = f(r, r)
    for groups in (256, 1024, 4096):   # column sums: SPLIT_GROUPS decides the parts of the first pass
        def setup(groups=groups): kr.SPLIT_GROUPS = groups; kr._plans.clear()
        def teardown(): kr.SPLIT_GROUPS = 1024; kr._plans.clear()
        yield ("sum over the first axis", f"SPLIT_GROUPS={groups}", setup, teardown, [a],
               lambda a: [apply(Op.SUM, a, arg=((0,), False))], 4.0 * r * r, "bytes")
    b, n = (4, 64) if small else (32, 512)
    for name in kn.MATMUL_TILES:
        yield (f"bmm f32 {b}x{n}^3", name, *force(name), [f(b, n, n), f(b, n, n)], mm, 2.0 * b * n ** 3, "flop")


# ------------------------------------------------------------------------------------------ series
def series_entries(small: bool):
    """(family, unit, size label, work, inputs, vkML build, torch fn): each family over a range of sizes, for the
    performance notebook's plots of rate against size."""
    rng = np.random.default_rng(2)
    f = lambda *s, dt=np.float32: (rng.random(s, dtype=np.float32) - 0.5).astype(dt)
    for n in ([1 << 12, 1 << 14, 1 << 16] if small else [1 << k for k in range(16, 29, 2)]):
        yield ("add (contiguous)", "bytes", n, 12.0 * n, [f(n), f(n)], lambda a, b: [a + b], lambda t, a, b: a + b)
    rows = [64, 128, 256] if small else [256, 1024, 4096, 16384]
    for r in rows:
        yield ("add, a row broadcast", "bytes", r * r, 4.0 * (2 * r * r + r), [f(r, r), f(r)], lambda a, b: [a + b],
               lambda t, a, b: a + b)
    for r in rows:
        yield ("sum over the last axis", "bytes", r * r, 4.0 * r * r, [f(r, r)],
               lambda a: [apply(Op.SUM, a, arg=((1,), False))], lambda t, a: a.sum(dim=1))
    for r in rows:
        yield ("softmax over the last axis", "bytes", r * r, 8.0 * r * r, [f(r, r)], lambda a: [F.softmax(a, -1)],
               lambda t, a: t.softmax(a, -1))
    for r in rows:
        yield ("layer_norm over the last axis", "bytes", r * r, 8.0 * r * r, [f(r, r)],
               lambda a: [F.layer_norm(a, (a.shape[-1],))], lambda t, a: t.nn.functional.layer_norm(a, (a.shape[-1],)))
    mm = lambda a, b: [apply(Op.MATMUL, a, b)]
    for dt, sizes in ((np.float32, [64, 128] if small else [256, 512, 1024, 2048, 4096]),
                      (np.float16, [64, 128] if small else [256, 512, 1024, 2048, 4096, 8192])):
        for n in sizes:
            yield (f"matmul {np.dtype(dt).name}", "flop", n, 2.0 * n ** 3, [f(1, n, n, dt=dt), f(1, n, n, dt=dt)], mm,
                   lambda t, a, b: a @ b)


def host_us(fn, reps: int) -> float:
    "Median wall microseconds of `fn()` on the host, after a warm-up."
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); ts.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(ts)


def cpu_prod(small: bool, reps: int) -> dict:
    "prod of 1M float32 on vkML's CPU backend (graph, realize, result) beside numpy's `prod` (the issue's goal: within 2x)."
    n = 1 << (16 if small else 20)
    a = np.random.default_rng(3).uniform(0.5, 1.5, n).astype(np.float32)
    x = tensor(a)
    vk = host_us(lambda: x.prod().numpy(), reps)
    ref = host_us(lambda: np.prod(a), reps)
    return dict(case=f"prod on the CPU backend, {n:,} float32", vkml_us=vk, numpy_us=ref, ratio=ref / vk, goal=0.5,
                met=ref / vk >= 0.5)


# ------------------------------------------------------------------------------------------ main
def commit() -> str:
    if os.environ.get("VKML_COMMIT"): return os.environ["VKML_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except Exception: return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="write the JSON results here")
    ap.add_argument("--small", action="store_true", help="tiny sizes (lavapipe, CI)")
    ap.add_argument("--sweep", action="store_true", help="also time every candidate variant")
    ap.add_argument("--reps", type=int, default=None, help="timed repetitions per case (default 10, --small 2)")
    ap.add_argument("--budget", type=float, default=150.0, help="stop sweeping after this many seconds in all")
    ap.add_argument("--no-torch", action="store_true", help="vkML alone, even where torch is importable")
    ap.add_argument("--no-series", action="store_true", help="skip the rate-against-size series (the plots' data)")
    a = ap.parse_args(argv)
    reps = a.reps or (2 if a.small else 10)
    torch, why = (None, "--no-torch") if a.no_torch else _torch()
    info = vkv.devices()[vkv.default_index()]
    tdev = torch.device("cuda") if torch else None
    def both(arrays, build, tfn):
        "(vkML µs, its shaders, PyTorch µs or None) of one computation on `arrays`."
        vts = [tensor(x, device="vulkan") for x in arrays]
        realize(*vts)
        vk_us, shaders = vk_time(lambda: build(*vts), reps)
        del vts
        t_us = None
        if torch:
            tts = [torch.from_numpy(x).to(tdev) for x in arrays]
            t_us = torch_time(torch, lambda: tfn(torch, *tts), reps)
            del tts
            torch.cuda.empty_cache()
        return vk_us, shaders, t_us
    rows = []
    for name, goal, work, arrays, build, tfn, unit in cases(a.small):
        vk_us, shaders, t_us = both(arrays, build, tfn)
        ratio = t_us / vk_us if t_us and vk_us else None
        rows.append(dict(case=name, goal=goal, vkml_us=vk_us, torch_us=t_us, ratio=ratio,
                         met=None if ratio is None or goal is None else ratio >= goal, shaders=shaders,
                         work=work, unit=unit, vkml_rate=rate(work, unit, vk_us).strip(),
                         torch_rate=rate(work, unit, t_us).strip() if t_us else None))
    series = []
    if not a.no_series:
        for family, unit, size, work, arrays, build, tfn in series_entries(a.small):
            vk_us, shaders, t_us = both(arrays, build, tfn)
            series.append(dict(family=family, unit=unit, size=size, work=work, vkml_us=vk_us, torch_us=t_us, shaders=shaders))
    prod_row = cpu_prod(a.small, max(5, reps))
    sweep = []
    if a.sweep:
        for group, variant, setup, teardown, arrays, build, work, unit in sweep_entries(a.small):
            if time.perf_counter() - T0 > a.budget:
                sweep.append(dict(group=group, variant=variant, skipped="out of time (--budget)")); continue
            setup()
            try:
                vts = [tensor(x, device="vulkan") for x in arrays]
                realize(*vts)
                us, shaders = vk_time(lambda: build(*vts), max(2, reps // 2))
                sweep.append(dict(group=group, variant=variant, vkml_us=us, rate=rate(work, unit, us).strip(), shaders=shaders))
            except Exception as e:   # a variant that fails to build or run is a finding, not the end of the run
                sweep.append(dict(group=group, variant=variant, error=f"{type(e).__name__}: {e}"[:300]))
            finally:
                teardown()
                vts = None
    result = dict(date=datetime.datetime.now().isoformat(timespec="seconds"), commit=commit(), device=info.name,
                  driver=info.driver, host=platform.node(), torch=why, coopmat_f16=info.features.get("coopmat_f16"),
                  command="python bench/bench_kernels.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  small=a.small, reps=reps, seconds=round(time.perf_counter() - T0, 1), cases=rows, sweep=sweep,
                  series=series, cpu_prod=prod_row)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    if sweep:
        print(f"{'sweep':<44} {'variant':<26} {'vkML us':>10} {'rate':>17}")
        for s in sweep:
            print(f"{s['group']:<44} {s['variant']:<26} " + (f"{s['vkml_us']:>10.1f} {s['rate']:>17}" if "vkml_us" in s
                                                             else s.get("error", s.get("skipped", ""))[:60]))
    print(f"{prod_row['case']}: vkML {prod_row['vkml_us']:.0f} us, numpy {prod_row['numpy_us']:.0f} us "
          f"(ratio {prod_row['ratio']:.2f}, goal {prod_row['goal']})")
    print(f"{info.name} ({info.driver}); {why}; {result['seconds']} s")
    print(f"{'case':<44} {'vkML us':>10} {'torch us':>10} {'ratio':>6} {'goal':>5} {'met':>4}  vkML rate")
    for r in rows:
        t = f"{r['torch_us']:>10.1f}" if r["torch_us"] else f"{'-':>10}"
        q = f"{r['ratio']:>6.2f}" if r["ratio"] else f"{'-':>6}"
        g = f"{r['goal']:>5}" if r["goal"] else f"{'-':>5}"
        m = {True: "yes", False: "NO", None: "-"}[r["met"]]
        print(f"{r['case']:<44} {r['vkml_us']:>10.1f} {t} {q} {g} {m:>4}  {r['vkml_rate']}")
    return result


if __name__ == "__main__":
    main()
