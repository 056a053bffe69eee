"""The fusion measurement (nbs/42_experiment_fusion.ipynb) as a script, for the H200.

    python bench/fusion_norms.py                                       # 4096 x 4096 float32
    python bench/fusion_norms.py --rows 256 --cols 1024                # lavapipe-sized
    python bench/fusion_norms.py --out bench/results/fusion_h200.json

For layer_norm and rms_norm as composed in vkml.nn.functional: graph ops, dispatches, barriers and
submissions of one forward pass; host time to build the graph and to realize it (schedule + record +
submit); each dispatch's GPU time (vkml.vulkan.profile()) and the bytes it must move; the total
against the ideal fused kernel (x read once, y written once) and the achieved GB/s. The JSON carries
date, device, driver, command and commit; nbs/42 renders the committed file.
"""
import argparse, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vkml.experiments import save_result, show
from vkml.experiments.fusion import run, split, kernels

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()
    res = run(a.rows, a.cols, a.repeats)
    if a.out: print("wrote", save_result(res, a.out))
    for r in res["norms"]: print(f"\n{r['kind']} {r['rows']}x{r['cols']}:\n" + show(kernels(r)))
    print("\n" + show(split(res)))
