export PYTHONPATH="$PWD:$PYTHONPATH" MPLBACKEND=Agg PYTHONUNBUFFERED=1
export VKML_COMMIT=${VKML_COMMIT:-unknown}
T0=$(date +%s)
timeout 170 python3 bench/bench_kernels.py --no-series --out "$OUT/kernels_h200.json" 2>&1 | tail -28; echo "kernels done $(( $(date +%s) - T0 ))s"
R=$(( 330 - ($(date +%s) - T0) )); [ $R -gt 40 ] && timeout $R python3 bench/attention.py --out "$OUT/attention_h200.json" 2>&1 | tail -8; echo "attn done $(( $(date +%s) - T0 ))s"
