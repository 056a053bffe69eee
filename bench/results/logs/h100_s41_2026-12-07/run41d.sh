set -uo pipefail
C=$1; export VKML_COMMIT=$C MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PYTHONPATH"
nvidia-smi --query-gpu=name --format=csv,noheader; S=$SECONDS
t() { echo "== $* ($((SECONDS-S)) s)"; }
t tests; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_amp.py tests/test_submit_parts.py 2>&1 | tail -2
t real; timeout 200 python3 bench/real_models.py --out "$OUT/real_models.json" > $OUT/real.log 2>&1; grep -v "^ *$" $OUT/real.log | tail -13
t phases; timeout 75 python3 bench/eager_phases.py --out "$OUT/eager_phases.json" 2>&1 | tail -3
t vs; timeout 110 python3 bench/vs_torch.py --out "$OUT/vs_torch.json" 2>&1 | tail -10
t jitgap; timeout 60 python3 .exp/jitgap.py cnn_bn resnet20 2>&1 | tail -2
t gc; timeout 40 python3 .exp/gcsplit.py gpt 2>&1 | tail -1; timeout 30 python3 .exp/gcsplit.py cnn_bn 2>&1 | tail -1
t end
