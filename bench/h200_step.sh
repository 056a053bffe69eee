#!/usr/bin/env bash
# The step-path measurements on the H200 in ONE device call:
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_step.sh $OUT
# 1. the suites the step path changed (jit, optimisers, memory, one-submission graphs, the elementwise
#    table, runtime) on the NVIDIA driver; 2. bench/vs_torch.py (vkML beside PyTorch, same GPU, same
#    process); 3. bench/host_overhead.py; 4. a pure-Python reference of the host CPU's speed.
# Results: $OUT/*.json and logs; commit vs_torch_h200.json and host_h200.json into bench/results/.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_step.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 bench/cpu_speed.py > "$OUT/cpu_speed.txt" 2>&1
step() {   # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"; tail -n ${TAIL:-12} "$OUT/$name.log"
}
step tests ${TESTS_S:-170} python3 -m pytest -q -x -p no:cacheprovider tests/test_jit.py tests/test_optim.py \
    tests/test_one_submission_graph.py tests/test_elementwise_table.py tests/test_memory.py tests/test_vk_runtime.py
step vs_torch ${VS_S:-300} python3 bench/vs_torch.py --out "$OUT/vs_torch_h200.json" ${VS_ARGS:-}
step host ${HOST_S:-60} python3 bench/host_overhead.py --devices vulkan --json "$OUT/host_h200.json"
cat "$OUT/cpu_speed.txt" "$OUT/gpu.txt"
