"""Does the GPT train alike in float32 and under amp, here and in PyTorch? A diagnostic for stop 42's finding (on an
H100 the GPT under amp trained differently from float32 and from PyTorch's amp; the CNN and ResNet-20 did not). It
found the cause in stop 43: from 6 layers on, a reduce kernel stored a prologue value at the outputs' index (fixed):

    python bench/amp_check.py [--layers 6] [--batch 32] [--steps 13] [--grads] [--out FILE]

1. Training: bench/real_models.py's GPT from the same weights on the same 4 batches, `--steps` steps each in vkML
   float32, amp, amp with one submission a step (VKML_SUBMIT_FIRST=0 for that mode only) and amp under vkml.jit, and in
   PyTorch amp_f16 where PyTorch is importable: every step's loss and the loss scale after it. A mode trains alike when
   its losses stay within 2e-2 of float32's and its scale never falls (nothing overflows at these sizes).
2. --grads: one batch, forward and backward in float32 and under amp (the loss times 1024, then the gradients divided
   by it): per parameter, whether every amp gradient is finite and its relative error against float32's (f16's
   rounding gives about 1e-3): the parameters whose gradients are wrong point at the kernels that made them.
"""
import argparse, json, os, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import vkml
import vkml.nn.functional as vF
import vkml.backends.vulkan.backend as vbackend
import real_models as rm


def train(spec, weights, data, mode, steps, lib="vkml"):
    model, run = (rm.vk_setup if lib == "vkml" else rm.th_setup)(spec, weights, mode)
    losses, scales = [], []
    for i in range(steps):
        losses.append(run(data[i % len(data)]))
        s = run.scaler
        scales.append(float(s.get_scale()) if s.is_enabled() else 1.0)
    return dict(losses=losses, scales=scales)


def grads(g, weights, x, y, amp, scale=1024.0):
    model = rm.gpt_model(rm.Lib("vkml"), **g).to(rm.DEV); model.load_state_dict(weights)
    with vkml.amp.autocast(rm.DEV, enabled=amp):
        out = model(vkml.tensor(x, device=rm.DEV))
        loss = vF.cross_entropy(out.reshape(-1, out.shape[-1]), vkml.tensor(y, device=rm.DEV).reshape(-1))
    (loss * scale).backward()
    return {n: p.grad.numpy().astype(np.float64) / scale for n, p in model.named_parameters()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6); ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=13); ap.add_argument("--small", action="store_true")
    ap.add_argument("--grads", action="store_true"); ap.add_argument("--out")
    a = ap.parse_args(argv)
    g = dict(n_layer=a.layers, n_head=6, n_embd=384, block_size=256, vocab_size=65)
    if a.small: g = dict(n_layer=a.layers, n_head=2, n_embd=32, block_size=16, vocab_size=65)
    rng = np.random.default_rng(0)
    data = [tuple(rng.integers(0, 65, (a.batch, g["block_size"])) for _ in range(2)) for _ in range(4)]
    spec = dict(build=lambda lib: rm.gpt_model(lib, **g), loss="lm", opt=("AdamW", dict(lr=3e-4)))
    weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
    res = dict(sizes=g, batch=a.batch, runs={})
    runs = [("vkml", "eager"), ("vkml", "amp"), ("vkml", "amp_first0"), ("vkml", "amp_jit")] + \
           ([("torch", "amp_f16")] if rm.torch is not None else [])
    for lib, mode in runs:
        first = vbackend.SUBMIT_FIRST
        if mode == "amp_first0": vbackend.SUBMIT_FIRST = 0
        try: r = train(spec, weights, data, mode.replace("_first0", ""), a.steps, lib)
        finally: vbackend.SUBMIT_FIRST = first
        res["runs"][f"{lib} {mode}"] = r
    ref = res["runs"]["vkml eager"]["losses"]
    for name, r in res["runs"].items():
        gap = max(abs(l - f) for l, f in zip(r["losses"], ref))
        r["alike"] = bool(gap < 2e-2 and min(r["scales"]) >= r["scales"][0])
        print(f"{name:16s} {'alike' if r['alike'] else 'DIFFERS'} (largest gap to float32 {gap:.4f}): losses "
              f"{' '.join(f'{l:.4f}' for l in r['losses'])}; scales {sorted(set(r['scales']))}", flush=True)
    if a.grads:
        x, y = data[0]
        g32, g16 = grads(g, weights, x, y, False), grads(g, weights, x, y, True)
        rows = {n: dict(finite=bool(np.isfinite(g16[n]).all()),
                        rel_err=float(np.linalg.norm(np.nan_to_num(g16[n]) - g32[n]) / (np.linalg.norm(g32[n]) + 1e-30)))
                for n in g32}
        res["grads"] = rows
        worst = sorted(rows.items(), key=lambda kv: (kv[1]["finite"], -kv[1]["rel_err"]))[:8]
        print("gradients, amp against float32 (worst first):", flush=True)
        for n, r in worst: print(f"   {n:28s} {'finite' if r['finite'] else 'NOT FINITE'} rel err {r['rel_err']:.2e}")
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__": main()
