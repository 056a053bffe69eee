set -uo pipefail
C=$1; export VKML_COMMIT=$C MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD:$PYTHONPATH"
nvidia-smi --query-gpu=name,clocks.sm,pstate --format=csv,noheader; S=$SECONDS
t() { echo "== $* ($((SECONDS-S)) s)"; }
left() { echo $((585 - (SECONDS-S))); }
t tests; timeout 60 python3 -m pytest -q -p no:cacheprovider -x tests/test_submit_parts.py tests/test_attention.py tests/test_parity_nn.py -k "parts or capture or read_waits or tensor_cores_where or slab or attention" > $OUT/tests.log 2>&1; tail -2 $OUT/tests.log
t real; timeout 170 python3 bench/real_models.py --out "$OUT/real_models.json" > $OUT/real.log 2>&1; grep -v "^ *$" $OUT/real.log | tail -26
for e in 0 32; do t phases first $e; VKML_SUBMIT_FIRST=$e timeout 75 python3 bench/eager_phases.py --out "$OUT/eager_phases_$e.json" 2>&1 | tail -4; done
t shaders; timeout 70 python3 bench/step_shaders.py gpt --mode amp > $OUT/shaders_amp_gpt.txt 2>&1; head -18 $OUT/shaders_amp_gpt.txt
t vs; timeout $(left) python3 bench/vs_torch.py --out "$OUT/vs_torch.json" 2>&1 | tail -10
t end
