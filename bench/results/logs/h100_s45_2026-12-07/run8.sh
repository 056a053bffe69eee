export PYTHONPATH="$PWD:$PYTHONPATH"
nvidia-smi --query-gpu=name --format=csv,noheader
[ -d .exp/old/vkml/spirv ] || cp -r vkml/spirv .exp/old/vkml/
for r in 1 2; do for v in old new; do
  if [ $v = old ]; then B=.exp/old/bench; else B=bench; fi
  echo "== $v"; VKML_COMMIT=$v timeout 150 python3 $B/eager_phases.py --cases gpt cnn_bn resnet20 --steps 10 --out "$OUT/phases_${v}_$r.json" 2>&1 | tail -3
done; done
for c in resnet20 cnn_bn; do
  timeout 100 python3 .exp/oneshot.py $c 2>&1 | tail -12
  VKML_SUBMIT_FIRST=0 timeout 100 python3 .exp/oneshot.py $c 2>&1 | tail -12
done
SMALL=0 timeout 120 python3 .exp/prof_eager.py resnet20 > "$OUT/prof_resnet_full.txt" 2>&1; head -50 "$OUT/prof_resnet_full.txt" | cut -c1-150
