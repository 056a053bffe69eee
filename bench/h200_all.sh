#!/usr/bin/env bash
# The experiments' H200 measurements in ONE device call (a few minutes):
#     . .gpu/setup.sh && bash bench/h200_all.sh $OUT
# writes $OUT/{prod,submission,fusion}_h200.json (+ the submission plot and a log); commit the JSON
# files into bench/results/, where nbs/40, nbs/41 and nbs/42 render them.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_all.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
TAIL=40
. bench/h200_lib.sh
step prod       90  $PY bench/prod_lanes.py      --out "$OUT/prod_h200.json"
step submission 180 $PY bench/submission_cost.py --out "$OUT/submission_h200.json" --plot "$OUT/submission_h200.png"
step fusion     150 $PY bench/fusion.py          --out "$OUT/fusion_h200.json"
ls -l "$OUT"
exit $status
