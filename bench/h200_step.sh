#!/usr/bin/env bash
# The step-path measurements on the H200 in ONE device call (about 6 minutes):
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_step.sh $OUT
# 1. the Vulkan suites (parity, runtime, jit, optimisers, memory, remembered plans, fidelity) on the NVIDIA
#    driver -> tests_h200.json; 2. bench/vs_torch.py (vkML beside PyTorch, same GPU, same process);
# 3. bench/fusion.py (fused against unfused); 4. bench/host_overhead.py; 5. the host's Python speed.
# Commit $OUT/{tests,vs_torch,fusion,host}_h200.json into bench/results/ and run bench/render_results.py.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_step.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 bench/cpu_speed.py > "$OUT/cpu_speed.txt" 2>&1
python3 bench/micro_host.py > "$OUT/micro_host.txt" 2>&1
. bench/h200_lib.sh
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_parity_elementwise.py tests/test_parity_nn.py \
tests/test_vk_runtime.py tests/test_jit.py tests/test_optim.py tests/test_plan_cache.py tests/test_one_submission_graph.py \
tests/test_elementwise_table.py tests/test_memory.py tests/test_fidelity.py tests/test_autograd_vulkan.py tests/test_demo.py \
tests/test_parity_f64.py tests/test_higher_order.py"
t0=$SECONDS
TAIL=4 step tests ${TESTS_S:-200} $TESTS; rc=$?
python3 bench/tests_json.py "$OUT" "$rc" "$((SECONDS - t0))" tests_h200.json
step vs_torch ${VS_S:-200} python3 bench/vs_torch.py --out "$OUT/vs_torch_h200.json" ${VS_ARGS:-}
step fusion ${FUSION_S:-100} python3 bench/fusion.py --out "$OUT/fusion_h200.json"
step host ${HOST_S:-40} python3 bench/host_overhead.py --devices vulkan --json "$OUT/host_h200.json"
cat "$OUT/cpu_speed.txt" "$OUT/gpu.txt"
pack_logs
