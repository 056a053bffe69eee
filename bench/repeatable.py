"""Is a training run repeatable bit for bit? The same starting weights and batches, trained three times in one
process in each mode; the parameters' bytes are hashed after the last step:

    python bench/repeatable.py [--modes eager amp amp_jit] [--steps 6] [--small] [--out FILE]

vkML's kernels use no atomics, so every sum has one order and a run should repeat exactly. A mode whose hashes differ
reads something that is not the same from run to run: memory a kernel does not own, or a result that depends on
timing. On the H100 (stop 41) the amp GPT's losses differed between runs while the float32 ones did not; lavapipe,
which has no cooperative-matrix kernels, repeats in every mode. The case is bench/real_models.py's GPT with 2 of its
6 layers (--small: its tiny sizes)."""
import argparse, hashlib, json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np
import real_models as rm


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", default=["eager", "amp", "amp_jit"], choices=["eager", "jit", "amp", "amp_jit"])
    ap.add_argument("--steps", type=int, default=6); ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--small", action="store_true"); ap.add_argument("--out")
    a = ap.parse_args(argv)
    g = dict(n_layer=2, n_head=2, n_embd=32, block_size=16, vocab_size=65) if a.small else \
        dict(n_layer=2, n_head=6, n_embd=384, block_size=256, vocab_size=65)
    batch = 2 if a.small else 8
    rng = np.random.default_rng(0)
    data = [tuple(rng.integers(0, 65, (batch, g["block_size"])) for _ in range(2)) for _ in range(3)]
    spec = dict(build=lambda lib: rm.gpt_model(lib, **g), loss="lm", opt=("AdamW", dict(lr=3e-4)))
    weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
    res = {}
    for mode in a.modes:
        runs = []
        for _ in range(a.runs):
            model, run = rm.vk_setup(spec, weights, mode)
            losses, scales = [], []
            for i in range(a.steps):
                losses.append(run(data[i % len(data)])); scales.append(run.scaler.get_scale())
            digest = hashlib.sha1(b"".join(p.numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
            runs.append(dict(losses=losses, scales=scales, params_sha1=digest))
        same = len({r["params_sha1"] for r in runs}) == 1
        res[mode] = dict(repeatable=same, runs=runs)
        first = next((i for i in range(a.steps) if len({r["losses"][i] for r in runs}) > 1), None)   # first step whose loss differs
        print(f"{mode:8s} {'repeatable' if same else 'DIFFERS'}: last losses {[round(r['losses'][-1], 6) for r in runs]}, "
              f"parameters {[r['params_sha1'][:8] for r in runs]}, losses differ from step {first}, "
              f"scales {[r['scales'] for r in runs] if mode.startswith('amp') else '-'}", flush=True)
    if a.out: Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__": main()
