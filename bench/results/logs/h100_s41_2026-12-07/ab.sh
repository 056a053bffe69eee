set -uo pipefail
export MPLBACKEND=Agg PYTHONUNBUFFERED=1
cp -r vkml/spirv .exp/old/vkml/ 2>/dev/null
S=$SECONDS
for r in 1 2 3; do
  for tree in old new; do
    if [ $tree = old ]; then D=.exp/old; else D=.; fi
    echo "== round $r $tree ($((SECONDS-S)) s)"
    (cd $D && PYTHONPATH="$PWD:/tmp/gpu-site:$PYTHONPATH" timeout 100 python3 bench/real_models.py --cases gpt cnn_bn --vk-modes eager amp --torch-modes eager --steps 10 --warm 3 --profile-steps 0 --out /tmp/ab_$tree$r.json 2>&1 | grep -E "(vkml|torch) (eager|amp):|Error|error" | tail -8 )
  done
done
echo "== end ($((SECONDS-S)) s)"
