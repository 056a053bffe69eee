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
status=0
step() {   # step NAME TIMEOUT_S COMMAND...: run one measurement, keep going if it fails
    local name=$1 limit=$2; shift 2
    echo "=== $name: $*"
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    tail -n 40 "$OUT/$name.log"
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
}
step prod       90  $PY bench/prod_lanes.py      --out "$OUT/prod_h200.json"
step submission 180 $PY bench/submission_cost.py --out "$OUT/submission_h200.json" --plot "$OUT/submission_h200.png"
step fusion     150 $PY bench/fusion.py          --out "$OUT/fusion_h200.json"
ls -l "$OUT"
exit $status
