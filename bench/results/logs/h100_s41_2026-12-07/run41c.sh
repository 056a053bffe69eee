set -uo pipefail
C=$1; export VKML_COMMIT=$C MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PYTHONPATH"
nvidia-smi --query-gpu=name --format=csv,noheader; S=$SECONDS
t() { echo "== $* ($((SECONDS-S)) s)"; }
t tests; timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_amp.py 2>&1 | tail -2
t real; timeout 200 python3 bench/real_models.py --out "$OUT/real_models.json" > $OUT/real.log 2>&1; grep -v "^ *$" $OUT/real.log | tail -13
t jitgap; timeout 120 python3 .exp/jitgap.py cnn_bn resnet20 gpt 2>&1 | tail -3
t gc; timeout 60 python3 .exp/gctest.py default 2>&1 | tail -2; timeout 60 python3 .exp/gctest.py freeze 2>&1 | tail -2
t end
