"""The prod experiment (nbs/40_experiment_prod.ipynb) as a script, for the H200.

    python bench/prod_lanes.py                                         # print the tables
    python bench/prod_lanes.py --out bench/results/prod_h200.json

The lane products of float32 values alternating 1e20 and 1e-20 (4 in 2 lanes, 8 in 2, 8 in 4, and
one lane) against the CPU's index-order product, the device's denormal mode (its float-controls
properties and a measurement), and the one-lane kernel timed against the CPU on 2^20 elements.
"""
import argparse, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vkml.lab.experiments import (save_result, provenance, prod_table, time_index_order, denormals,
                              float_controls, show)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--length", type=int, default=2**20, help="elements of the timed index-order product")
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()
    res = dict(provenance=provenance(), denormals=denormals(), float_controls=float_controls(),
               values=prod_table(), timing=time_index_order(a.length, repeats=5))
    if a.out: print("wrote", save_result(res, a.out))
    print(f"{res['provenance']['device']}: denormals {res['denormals']}, {res['float_controls']}")
    print(show(res["values"])); print(show(res["timing"]))
