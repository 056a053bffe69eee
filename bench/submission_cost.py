"""The submission-cost experiment (nbs/41_experiment_submission.ipynb) as a script, for the H200.

    python bench/submission_cost.py                                    # print the table
    python bench/submission_cost.py --out bench/results/submission_h200.json --plot submission.png
    python bench/submission_cost.py --quick                            # the shortened protocol

Records command buffers of n = 1, 2, 4 ... 1024 dependent 64-thread dispatches once each, times
submit + blocking (and polled) fence wait, fits t = a + b*n; adds the host cost of recording one
dispatch, the eager cost per op and the batching comparison. The JSON carries date, device, driver,
command and commit; nbs/41 renders the committed file. Runs from the repository root without
installing vkML.
"""
import argparse, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vkml.lab.experiments import save_result, load_result
from vkml.lab.experiments.submission import run, comparison, plot

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--plot", help="save the figure here (PNG)")
    ap.add_argument("--quick", action="store_true", help="few n values and repeats (a smoke test)")
    a = ap.parse_args()
    res = run(quick=a.quick)
    if a.out: print("wrote", save_result(res, a.out))
    if a.plot:
        import matplotlib; matplotlib.use("Agg")
        plot(res).savefig(a.plot, dpi=120); print("wrote", a.plot)
    print(comparison(res, None))
