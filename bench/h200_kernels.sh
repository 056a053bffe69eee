#!/usr/bin/env bash
# The hand-written kernels on the H200 in ONE device call (about 5 minutes):
#     . .gpu/setup.sh && bash bench/h200_kernels.sh $OUT
# 1. the parity suites of the kernels this work touched (matmul, tensor cores for real, conv, reductions),
#    so the first run of the cooperative-matrix kernels on hardware is checked against the CPU oracle;
# 2. bench/bench_kernels.py with --sweep: every case against PyTorch, then the candidate tiles.
# Writes $OUT/kernels_h200.json and a log per step; commit the JSON into bench/results/.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_kernels.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VKML_REQUIRE_VULKAN=1
PY=${PYTHON:-python3}
TAIL=25
. bench/h200_lib.sh
step parity_nn      150 $PY -m pytest tests/test_parity_nn.py -q -x -k "matmul or conv or coopmat or tensor_cores"
step parity_reduce  90  $PY -m pytest tests/test_parity_elementwise.py -q -x -k "reduce or argmax"
step kernels        200 $PY bench/bench_kernels.py --sweep --budget 150 --out "$OUT/kernels_h200.json"
ls -l "$OUT"
exit $status
