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
step() {   # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
    echo "=== $name: exit $rc after $((SECONDS - t0)) s"; tail -n ${TAIL:-12} "$OUT/$name.log"
    return $rc
}
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_parity_elementwise.py tests/test_parity_nn.py \
tests/test_vk_runtime.py tests/test_jit.py tests/test_optim.py tests/test_plan_cache.py tests/test_one_submission_graph.py \
tests/test_elementwise_table.py tests/test_memory.py tests/test_fidelity.py tests/test_autograd_vulkan.py tests/test_demo.py \
tests/test_parity_f64.py tests/test_higher_order.py"
t0=$SECONDS
TAIL=4 step tests ${TESTS_S:-200} $TESTS; rc=$?
python3 - "$OUT" "$rc" "$((SECONDS - t0))" <<'PY'
import datetime, json, os, re, sys
R, rc, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
log = open(f"{R}/tests.log").read().splitlines()
summary = next((l for l in reversed(log) if re.search(r"\d+ (passed|failed)", l)), log[-1] if log else "")
counts = {k: int(v) for v, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", summary)}
gpu = open(f"{R}/gpu.txt").read().strip()
json.dump(dict(date=datetime.date.today().isoformat(), device=gpu, commit=os.environ.get("VKML_COMMIT", "unknown"),
               command=os.environ["TESTS"], exit_code=rc, seconds=secs, summary=summary.strip("= "), **counts,
               failures=[l for l in log if l.startswith("FAILED") or l.startswith("ERROR")][:50],
               skips=[l for l in log if l.startswith("SKIPPED")]), open(f"{R}/tests_h200.json", "w"), indent=1)
PY
step vs_torch ${VS_S:-200} python3 bench/vs_torch.py --out "$OUT/vs_torch_h200.json" ${VS_ARGS:-}
step fusion ${FUSION_S:-100} python3 bench/fusion.py --out "$OUT/fusion_h200.json"
step host ${HOST_S:-40} python3 bench/host_overhead.py --devices vulkan --json "$OUT/host_h200.json"
cat "$OUT/cpu_speed.txt" "$OUT/gpu.txt"
# the device tool brings back a handful of files: the JSONs, and every log in one archive
(cd "$OUT" && tar czf logs.tgz *.log *.txt && rm -f *.log *.txt)
