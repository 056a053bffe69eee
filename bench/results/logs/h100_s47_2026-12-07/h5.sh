export PYTHONPATH="$PWD:$PYTHONPATH" MPLBACKEND=Agg PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 .exp/jit_gap.py cnn_bn resnet20 2>&1 | tee "$OUT/jit_gap.txt" | grep -v "^ \{3,\}[0-9]" | head -12
grep -A22 "Ordered" "$OUT/jit_gap.txt" | head -50
timeout 100 python3 .exp/replay_host.py prof 2>&1 | tee "$OUT/replay_host.txt" | head -40
timeout 150 python3 bench/eager_phases.py --cases gpt cnn_bn resnet20 --out "$OUT/eager_phases_h200.json" 2>&1 | tail -4
