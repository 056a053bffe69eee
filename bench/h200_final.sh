#!/usr/bin/env bash
# The closing H200 run in ONE device call (about 6 minutes; a session has little device time):
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_final.sh $OUT
# 1. bench/vs_torch.py (the step path beside PyTorch) -> vs_torch_h200.json
# 2. bench/h200_reliability.py: a real allocation failure, typed, the library working after -> oom_h200.json
# 3. the reliability, fuzz, float64 and higher-order suites under the carried validation layer -> reliability_h200.json
# 4. bench/fusion.py -> fusion_h200.json; bench/host_overhead.py -> host_h200.json
# The longer per-issue scripts (bench/h200_step.sh, bench/h200_reliability.sh) run each part in full.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_final.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
. bench/h200_lib.sh
step vs_torch ${VS_S:-120} python3 bench/vs_torch.py --out "$OUT/vs_torch_h200.json"
TAIL=6 step oom ${OOM_S:-90} python3 bench/h200_reliability.py --rounds 1 --limit-s 45 --out "$OUT/oom_h200.json"
deb=$(ls .gpu/debs/vulkan-validationlayers_*.deb .gpu/layers/vulkan-validationlayers_*.deb 2>/dev/null | head -1)
if [ -n "$deb" ]; then
    rm -rf /tmp/vvl && dpkg -x "$deb" /tmp/vvl
    export VK_LAYER_PATH=/tmp/vvl/usr/share/vulkan/explicit_layer.d
    export LD_LIBRARY_PATH="/tmp/vvl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_reliability.py tests/test_fuzz.py tests/test_parity_f64.py \
tests/test_higher_order.py tests/test_jit.py"
t0=$SECONDS
# VKML_COOPMAT=off: the carried layer (Debian 12's 1.3.239) predates VK_KHR_cooperative_matrix and reports
# the extension's feature struct as unknown; the tensor-core kernels' parity runs without the layer (kernels_h200.json)
TAIL=4 VKML_VALIDATION=1 VKML_REQUIRE_VULKAN=1 VKML_COOPMAT=off step tests ${TESTS_S:-200} $TESTS; rc=$?
python3 bench/tests_json.py "$OUT" "$rc" "$((SECONDS - t0))" reliability_h200.json --layer "${deb:-}" --oom "$OUT/oom_h200.json"
step fusion ${FUSION_S:-60} python3 bench/fusion.py --out "$OUT/fusion_h200.json"
step host ${HOST_S:-30} python3 bench/host_overhead.py --devices vulkan --json "$OUT/host_h200.json"
pack_logs
