export PYTHONPATH="$PWD:$PYTHONPATH" MPLBACKEND=Agg PYTHONUNBUFFERED=1
G=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$G"
case "$G" in *H200*) S=h200;; *) S=h100;; esac
T0=$(date +%s)
for r in 1 2; do for spin in 0.0002 0.05; do
  echo "== spin $spin run $r $(( $(date +%s) - T0 ))s"
  SPIN=$spin timeout 90 python3 .exp/rm_spin.py --cases cnn_bn resnet20 --vk-modes jit --torch-modes eager graph \
     --steps 20 --warm 4 --profile-steps 0 --out "$OUT/wait_ab_${spin}_$r.json" 2>&1 | grep -iE "jit|graph|eager" | head -8
done; done
R=$(( 470 - ($(date +%s) - T0) )); echo "real with ${R}s left"
[ $R -gt 60 ] && timeout $R python3 bench/real_models.py --out "$OUT/real_models_$S.json" 2>&1 | tail -16
R=$(( 560 - ($(date +%s) - T0) )); echo "vs with ${R}s left"
[ $R -gt 40 ] && timeout $R python3 bench/vs_torch.py --out "$OUT/vs_torch_$S.json" 2>&1 | tail -8
echo "done $(( $(date +%s) - T0 ))s"
