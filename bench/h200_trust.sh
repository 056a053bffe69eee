#!/usr/bin/env bash
# Issue 21's H200 measurements in ONE device call (about 8 minutes):
#     . .gpu/setup.sh && bash bench/h200_trust.sh $OUT
# 1. PyTorch's digits-MLP losses (the fixture of tests/test_trust.py) -> digits_mlp_torch.json;
# 2. what the write rule costs (bench/write_rule.py) -> write_rule_h200.json;
# 3. the training steps beside PyTorch (bench/vs_torch.py) at the commit before the trust work (unpacked from
#    .before/base.tar.gz) and now, in the same call -> vs_torch_before_h200.json, vs_torch_after_h200.json.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_trust.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1
. bench/h200_lib.sh
CASES="mlp_jit mlp_eager cnn_jit cnn_eager"
step fixture 120 python3 bench/torch_digits_losses.py "$OUT/digits_mlp_torch.json"
step write_rule 150 python3 bench/write_rule.py --device vulkan --out "$OUT/write_rule_h200.json"
rm -rf /tmp/before && mkdir -p /tmp/before && tar xzf .before/base.tar.gz -C /tmp/before
(cd /tmp/before && export PYTHONPATH="/tmp/before:$PYTHONPATH" VKML_COMMIT=4248cf3 && step vs_before 150 python3 bench/vs_torch.py --cases $CASES --out "$OUT/vs_torch_before_h200.json")
step vs_after 150 python3 bench/vs_torch.py --cases $CASES --out "$OUT/vs_torch_after_h200.json"
pack_logs
exit $status
