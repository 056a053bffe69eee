"""GPU time per shader in an eager training step of the real-model benchmark (bench/real_models.py's cases), the
table vkml.profile() prints, for finding the kernels a step spends its time in:
    python bench/step_shaders.py [cnn_bn resnet20 gpt] [--steps 2] [--small] [--mode eager|amp]
Three warm-up steps first (kernels compiled, plans remembered); then the profiled steps, each shader's time summed
over them and divided by their number (µs per step)."""
import argparse, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1])); sys.path.insert(0, str(Path(__file__).resolve().parent))
import vkml
import real_models as rm

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=["cnn_bn", "resnet20"]); ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--small", action="store_true"); ap.add_argument("--mode", default="eager", choices=["eager", "amp"])
    a = ap.parse_args(argv)
    for case in a.cases:
        spec = rm.case_specs(a.small)[case]
        weights = rm.init_weights(spec["build"](rm.Lib("vkml")))
        data = spec["data"](2)
        _model, run = rm.vk_setup(spec, weights, a.mode)
        for i in range(3): run(data[i % 2])
        with vkml.profile() as p:
            for i in range(a.steps): run(data[i % 2])
        for e in p.values(): e["total_us"] /= a.steps; e["count"] /= a.steps
        print(f"== {case} ({a.mode}): {sum(e['total_us'] for e in p.values()):,.1f} us of GPU time per step", flush=True)
        print(p, flush=True)

if __name__ == "__main__": main()
