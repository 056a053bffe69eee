#!/usr/bin/env bash
# Everything vkML measures on the H200 in ONE device call:
#     . .gpu/setup.sh && bash bench/h200_session.sh $OUT
# 1. the Vulkan test suites (parity against the CPU oracle, runtime, autograd, nn, demo, experiments);
# 2. the experiments' measurements (bench/h200_all.sh: prod, submission cost, fusion);
# 3. operator benchmarks (bandwidth of a + b, sum, softmax, norms; matmul; conv) and the demo on both devices.
# Results land in $OUT/h200.tgz (one file: the device tool returns at most 8); logs print a summary.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_session.sh OUTDIR}
cd "$(dirname "$0")/.."
R=/tmp/h200-results; rm -rf "$R"; mkdir -p "$R"
pack() { tar czf "$OUT/h200.tgz" -C "$R" . ; }   # after every step: a command cut short still returns what it measured
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$R/gpu.txt" 2>&1
t0=$SECONDS
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_parity_elementwise.py tests/test_parity_nn.py \
tests/test_parity_long_loops.py tests/test_vk_runtime.py tests/test_autograd_vulkan.py tests/test_nn.py tests/test_demo.py \
tests/test_experiments.py"
timeout 220 $TESTS > "$R/tests.log" 2>&1
rc=$?
echo "tests: exit $rc after $((SECONDS - t0)) s: $(tail -n 1 "$R/tests.log")"
python3 bench/tests_json.py "$R" "$rc" "$((SECONDS - t0))" tests_h200.json
pack
timeout 150 bash bench/h200_all.sh "$R" > "$R/experiments.log" 2>&1; echo "experiments: exit $?"; pack
timeout 60 python3 bench/demo_timing.py --devices cpu vulkan --out "$R/demo_h200.json" > "$R/demo.log" 2>&1; echo "demo: exit $?"; pack
timeout 40 python3 -m vkml.demo --out "$R/demo_out" --no-progress > "$R/demo_main.log" 2>&1; echo "demo main: exit $?"; pack
timeout 60 python3 bench/bench_ops.py --big --json "$R/ops_h200.json" > "$R/ops.log" 2>&1; echo "ops: exit $?"; pack
timeout 60 python3 bench/bench_matmul.py --sizes 1024,4096 --reps 5 --json "$R/matmul_h200.json" > "$R/matmul.log" 2>&1; echo "matmul: exit $?"; pack
timeout 40 python3 bench/bench_conv.py --n 32 --c 256 --hw 14 > "$R/conv.log" 2>&1; echo "conv: exit $?"
pack
tail -n 3 "$R/tests.log"; tail -n 4 "$R/demo_main.log"; cat "$R/ops.log" "$R/matmul.log"
