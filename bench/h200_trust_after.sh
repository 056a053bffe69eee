#!/usr/bin/env bash
# Issue 21's closing H200 run in ONE device call (about 9 minutes), on the committed code:
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_trust_after.sh $OUT
# 1. the trust suites on the NVIDIA driver (writes against lazy reads, the jit contract, IEEE specials, the
#    mutation fuzzer's CI profile, the optimisers, the toolkit) -> trust_tests_h200.json;
# 2. the training steps beside PyTorch at the commit before the work (4248cf3, unpacked from .before/base.tar.gz:
#    `git archive 4248cf3 | gzip > .before/base.tar.gz`) and now -> vs_torch_{before,after}_h200.json; 3. what the write rule costs -> write_rule_h200.json.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_trust_after.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
. bench/h200_lib.sh
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_trust.py tests/test_trust_misc.py tests/test_ieee_specials.py \
tests/test_jit.py tests/test_optim.py tests/test_toolkit.py tests/test_fuzz.py::test_mutation_ci \
tests/test_fuzz.py::test_mutation_ci_ran_two_thousand_programs"
t0=$SECONDS
TAIL=6 step tests ${TESTS_S:-280} $TESTS; rc=$?
python3 bench/tests_json.py "$OUT" "$rc" "$((SECONDS - t0))" trust_tests_h200.json
rm -rf /tmp/before && mkdir -p /tmp/before && tar xzf .before/base.tar.gz -C /tmp/before
(cd /tmp/before && export PYTHONPATH="/tmp/before:$PYTHONPATH" VKML_COMMIT=4248cf3 && step vs_before 120 python3 bench/vs_torch.py \
  --cases mlp_jit mlp_eager cnn_jit cnn_eager --out "$OUT/vs_torch_before_h200.json")
step vs_after 120 python3 bench/vs_torch.py --cases mlp_jit mlp_eager cnn_jit cnn_eager --out "$OUT/vs_torch_after_h200.json"
step write_rule 90 python3 bench/write_rule.py --device vulkan --out "$OUT/write_rule_h200.json"
pack_logs
exit $status
