#!/usr/bin/env bash
# What waits for the next session with the H200 (each line fits one device call of at most 600 s):
#     . .gpu/setup.sh && VKML_COMMIT=$(git rev-parse --short HEAD) bash bench/h200_next.sh STEP $OUT
# STEP: real   the real-model benchmark (GPT, BatchNorm CNN, ResNet-20; eager, jit, amp; PyTorch eager, autocast, CUDA graph)
#       vs     the step rows beside PyTorch (MLP and CNN, jit and eager) after this session's changes
#       gpt    the GPT demo at nanoGPT's character-model size
#       ddp    2 ranks on the one GPU: the host-staged and the shared-memory exchange, jitted (issue 24's rows)
#       tiles  matmul / skinny products after the CPU tile policy (must not move a GPU's choice)
# Results go to $OUT; copy them into bench/results/ and run `python bench/render_results.py`.
set -uo pipefail
STEP=${1:?usage: bash bench/h200_next.sh real|vs|gpt|ddp|tiles OUTDIR}
OUT=${2:?usage: bash bench/h200_next.sh STEP OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$STEP" in
  real)  timeout 560 python3 bench/real_models.py --out "$OUT/real_models_h200.json" ;;
  vs)    timeout 560 python3 bench/vs_torch.py --out "$OUT/vs_torch_next_h200.json" ;;
  gpt)   timeout 560 python3 -m vkml.demo --model gpt --size full --no-progress --out "$OUT/gpt" ;;
  ddp)   timeout 280 python3 bench/ddp.py --jit --exchange mpi --out "$OUT/ddp_mpi_h200.json"
         timeout 280 python3 bench/ddp.py --jit --exchange shared --out "$OUT/ddp_shared_h200.json" ;;
  tiles) timeout 560 python3 bench/matmul_skinny.py --out "$OUT/matmul_skinny_h200.json" ;;
  *) echo "unknown step $STEP"; exit 2 ;;
esac
