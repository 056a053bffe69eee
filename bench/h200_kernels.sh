#!/usr/bin/env bash
# The kernels on the H200 in ONE device call (about 9 minutes):
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_kernels.sh $OUT
# 1. the parity suites of the kernels this work touched (matmul, tensor cores for real, conv, norms, reductions,
#    row kernels, broadcast elementwise), checked against the CPU oracle on the hardware;
# 2. bench/bench_kernels.py with --sweep: every case against PyTorch, the size series, then the candidate tiles;
# 3. bench/fusion.py: the fusion measurement.
# Writes $OUT/kernels_h200.json, $OUT/fusion_h200.json and logs.tgz; commit the JSONs into bench/results/.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_kernels.sh OUTDIR}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" VKML_REQUIRE_VULKAN=1
PY=${PYTHON:-python3}
TAIL=25
. bench/h200_lib.sh
step parity_nn      150 $PY -m pytest tests/test_parity_nn.py -q -x -k "matmul or conv or coopmat or tensor_cores or norm or softmax or entropy"
step parity_rows    150 $PY -m pytest tests/test_parity_elementwise.py tests/test_row_kernels.py tests/test_elementwise_forms.py tests/test_fusion_regressions.py tests/test_cpu_ops.py -q -x
step kernels        ${KERNELS_S:-300} $PY bench/bench_kernels.py --sweep --budget ${SWEEP_S:-200} --out "$OUT/kernels_h200.json"
step fusion         60  $PY bench/fusion.py --out "$OUT/fusion_h200.json"
pack_logs
ls -l "$OUT"
exit $status
