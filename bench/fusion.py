"""The fusion measurement (nbs/42_experiment_fusion.ipynb) in one command, for the H200.

    python bench/fusion.py --out bench/results/fusion_h200.json     # 4096 x 4096 float32: well under a minute on the H200
    python bench/fusion.py --rows 128 --cols 1024 --repeats 3       # lavapipe-sized: seconds
    python bench/fusion.py --only layer_norm adam                   # some workloads

For each workload (layer_norm, rms_norm, softmax, cross_entropy, gelu(x*w+b), an Adam step), with
fusion on and off (VKML_FUSION=0): kernels, dispatches, barriers and submissions of one pass
(vkml.stats()); the bytes the dispatches move (from their bindings) against the ideal single pass;
each dispatch's GPU time (vkml.profile()); the host's time to build the graph and to realize it.
Fused and unfused results are both checked against the CPU oracle (on the first --check-rows rows of
the row-wise workloads: the oracle takes seconds per workload at 4096 x 4096). The JSON carries date,
device, driver, command and commit; nbs/42 and the limitations page render the committed file.
"""
import argparse, sys, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vkml.lab.experiments import save_result, show
from vkml.lab.experiments.fusion import WORKLOADS, run, table, savings, host, kernels, describe_device

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=5, help="timed and profiled passes per workload and mode (medians)")
    ap.add_argument("--check-rows", type=int, default=512, help="rows the CPU oracle checks (row-wise workloads); 0: all")
    ap.add_argument("--only", nargs="+", choices=[w.name for w in WORKLOADS], help="measure only these workloads")
    ap.add_argument("--kernels", action="store_true", help="also print every dispatch of every workload")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()
    t0 = time.perf_counter()
    res = run(a.rows, a.cols, a.repeats, only=a.only, check_rows=a.check_rows or None)
    if a.out: print("wrote", save_result(res, a.out))
    print(describe_device(res))
    if a.kernels:
        for r in res["workloads"]:
            for mode in ("fused", "unfused"): print(f"\n{r['name']}, {mode}:\n" + show(kernels(r, mode)))
    print("\n" + show(table(res)) + "\n\n" + show(savings(res)) + "\n\n" + show(host(res)))
    print(f"\n{time.perf_counter() - t0:.1f} s")
