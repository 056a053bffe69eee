export PYTHONPATH="$PWD:$PYTHONPATH" MPLBACKEND=Agg PYTHONUNBUFFERED=1
G=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$G"
case "$G" in *H200*) S=h200;; *) S=h100;; esac
T0=$(date +%s)
cp vkml/nn/functional.py .exp/new_functional.py
for r in 1 2; do for v in old new; do
  cp .exp/${v}_functional.py vkml/nn/functional.py
  echo "== $v $r $(( $(date +%s) - T0 ))s"
  VKML_COMMIT=$v timeout 100 python3 bench/real_models.py --cases cnn_bn resnet20 --vk-modes jit eager --torch-modes eager \
     --steps 20 --warm 4 --out "$OUT/bn_ab_${v}_$r.json" 2>&1 | tail -7
done; done
cp .exp/new_functional.py vkml/nn/functional.py
export VKML_COMMIT=${VKML_COMMIT:-unknown}
echo "phases $(( $(date +%s) - T0 ))s"
timeout 100 python3 bench/eager_phases.py --out "$OUT/eager_phases_$S.json" 2>&1 | tail -3
R=$(( 575 - ($(date +%s) - T0) )); echo "real with ${R}s left"
[ $R -gt 60 ] && timeout $R python3 bench/real_models.py --out "$OUT/real_models_$S.json" 2>&1 | tail -16
echo "done $(( $(date +%s) - T0 ))s"
