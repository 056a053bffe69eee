"""GPU time per shader in an eager training step of the real-model benchmark (bench/real_models.py's cases), the
table vkml.profile() prints, for finding the kernels a step spends its time in:
    python bench/step_shaders.py [cnn_bn resnet20 gpt] [--steps 2] [--small] [--mode eager|amp]
Three warm-up steps first (kernels compiled, plans remembered); then the profiled steps, each shader's time summed
over them and divided by their number (µs per step).
A second measure beside it: the same step replayed (vkml.jit), its wall time per step. The GPU time of a step cannot
exceed it by much; on some hosts the profile's timestamps counted every shader 4-5x long, and then the line says so."""
import argparse, statistics, sys, time
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
        gpu_us = sum(e['total_us'] for e in p.values())
        _model, replay = rm.vk_setup(spec, weights, "jit" if a.mode == "eager" else "amp_jit")
        for i in range(3): replay(data[i % 2])
        times = []
        for i in range(5):
            t0 = time.perf_counter(); replay(data[i % 2]); times.append(time.perf_counter() - t0)
        wall_us = statistics.median(times) * 1e6
        verdict = "" if rm.profile_trusted(gpu_us, wall_us) else "  NOT TRUSTED: more GPU time than the replayed step's wall time"
        print(f"== {case} ({a.mode}): {gpu_us:,.1f} us of GPU time per step; replayed step {wall_us:,.1f} us wall{verdict}", flush=True)
        print(p, flush=True)

if __name__ == "__main__": main()
