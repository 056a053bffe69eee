set -uo pipefail
C=$1; export VKML_COMMIT=$C MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PYTHONPATH"
S=$SECONDS; t() { echo "== $* ($((SECONDS-S)) s)"; }
t shaders f32; timeout 100 python3 bench/step_shaders.py gpt cnn_bn resnet20 > $OUT/shaders_f32.txt 2>&1; grep -A12 "==" $OUT/shaders_f32.txt | head -45
t bn; timeout 100 python3 bench/bn_stats.py --out "$OUT/bn_stats.json" 2>&1 | grep -v "^   vk" | tail -8
t attention; timeout 150 python3 bench/attention.py --out "$OUT/attention.json" 2>&1 | tail -8
t gemm; timeout 60 python3 bench/bench_matmul.py --sizes 4096 --dtypes float32,float16 --reps 5 --json "$OUT/matmul.json" 2>&1 | tail -4
t end
