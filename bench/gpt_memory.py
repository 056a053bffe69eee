"""Device memory of the GPT benchmark's training step (bench/real_models.py's model: nanoGPT's shape, dropout 0, AdamW)
at a chosen batch, on the current Vulkan device: the bytes in use between steps and the peak of one step, eager and
jitted, with the fused attention and with the composed one (`vkml.nn.functional.FUSED_ATTENTION`).

    python bench/gpt_memory.py --batch 2                 # lavapipe: a step takes some seconds
    python bench/gpt_memory.py --batch 32 --out FILE     # the benchmark's batch (a GPU; lavapipe: minutes a step)
    python bench/gpt_memory.py --batch 32 --modes eager --attention fused   # one row
    python bench/gpt_memory.py --batch 32 --plan         # the memory plan only: the step's graph scheduled, not run

Memory counts come from `vkml.memory_stats()` (every pool of the device together); they do not depend on timing.
"""
import argparse, gc, json, sys
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vkml
import vkml.nn.functional as vF
import vkml.optim as voptim
import real_models as R

MiB = 2 ** 20


def measure(batch: int, mode: str, fused: bool, steps: int = 3) -> dict:
    vF.FUSED_ATTENTION = fused
    model = R.gpt_model(R.Lib("vkml"), 6, 6, 384, 256, 65).to("vulkan")
    opt = voptim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    x, y = (vkml.tensor(rng.integers(0, 65, (batch, 256)), device="vulkan") for _ in range(2))
    def step(x, y):
        opt.zero_grad()
        out = model(x)
        loss = vF.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss
    f = vkml.jit(step) if mode == "jit" else step
    for _ in range(steps - 1): f(x, y).item()       # (a jitted step is captured on its second call)
    before = vkml.memory_stats()["bytes_in_use"]
    vkml.reset_peak_memory_stats()
    f(x, y).item()
    s = vkml.memory_stats()
    r = dict(batch=batch, mode=mode, attention="fused" if fused else "composed", in_use_before=before,
             peak=s["peak_bytes_in_use"], in_use_after=s["bytes_in_use"])
    return r   # (the model, optimiser and capture go with this frame: main collects before the next)


def planned(batch: int, fused: bool) -> dict:
    """The memory plan of one eager step at `batch`, without running it (`Schedule.planned_peak`): two steps at batch 2
    make the optimiser's flat buffers, then the step's graph at `batch` is built and scheduled, not realized. The plan
    counts the step's intermediates; a run adds kernels' scratch and copies made while recording."""
    vF.FUSED_ATTENTION = fused
    model = R.gpt_model(R.Lib("vkml"), 6, 6, 384, 256, 65).to("vulkan")
    opt = voptim.AdamW(model.parameters(), lr=3e-4)
    rng = np.random.default_rng(0)
    def graph(b):
        x, y = (vkml.tensor(rng.integers(0, 65, (b, 256)), device="vulkan") for _ in range(2))
        opt.zero_grad()
        out = model(x)
        loss = vF.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        return loss
    for _ in range(2):
        graph(2); opt.step()
    loss = graph(batch)
    with vkml.no_grad(): outs, _ = opt._step_fused()      # (what step() would realize, built, not run)
    s = vkml.schedule(*outs, loss)
    return dict(batch=batch, mode="plan", attention="fused" if fused else "composed",
                in_use_before=vkml.memory_stats()["bytes_in_use"], planned_peak=s.planned_peak(), kernels=len(s.dispatching))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--modes", nargs="+", choices=["eager", "jit"], default=["eager", "jit"])
    ap.add_argument("--attention", nargs="+", choices=["fused", "composed"], default=["fused", "composed"])
    ap.add_argument("--plan", action="store_true", help="schedule the step at --batch without running it (seconds)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    rows = []
    for mode in ["plan"] if a.plan else a.modes:
        for attention in a.attention:
            rows.append(planned(a.batch, attention == "fused") if a.plan else measure(a.batch, mode, attention == "fused"))
            gc.collect()
    if a.plan:
        for r in rows:
            print(f"batch {a.batch}, {r['attention']} attention: {r['in_use_before'] / MiB:.1f} MiB in use + a planned peak of "
                  f"{r['planned_peak'] / MiB:.1f} MiB of intermediates ({r['kernels']} kernels)")
    else:
        print(f"{'mode':6} {'attention':9} {'in use before':>14} {'peak':>9} {'in use after':>13}  (MiB, batch {a.batch})")
        for r in rows:
            print(f"{r['mode']:6} {r['attention']:9} {r['in_use_before'] / MiB:14.1f} {r['peak'] / MiB:9.1f} {r['in_use_after'] / MiB:13.1f}")
    if a.out:
        import vs_torch
        prov = dict(vs_torch.provenance(argv or []), command=" ".join(["python", "bench/gpt_memory.py"] + (argv or sys.argv[1:])))
        Path(a.out).write_text(json.dumps(dict(provenance=prov, rows=rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
