#!/usr/bin/env bash
# Issue 12 (reliability) on the H200 in ONE device call (about 6-8 minutes), under the Khronos validation
# layer with synchronization validation, carried here because the machine lacks it:
#
#   before the call, in the checkout (the layer is Debian 12's package, the version of the kit's loader):
#     apt-get download vulkan-validationlayers && mkdir -p .gpu/layers && mv vulkan-validationlayers_*.deb .gpu/layers/
#   the call (carry .gpu):
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200_reliability.sh $OUT
#
# 1. a real allocation failure: bench/h200_reliability.py fills the 141 GB heap in 2 GiB tensors until the
#    driver refuses, three rounds, and one request of twice the heap: each an OutOfMemoryError, everything
#    freed, the library working after (-> oom_h200.json);
# 2. the reliability, fuzz (CI profile, 10,000 programs), memory (1,000 steps, eager and replayed), jit and
#    fidelity suites on the NVIDIA driver (-> reliability_h200.json, with the validation messages counted:
#    the suites fail on any).
# Commit $OUT/{oom,reliability}_h200.json into bench/results/.
set -uo pipefail
OUT=${1:?usage: bash bench/h200_reliability.sh OUTDIR}
cd "$(dirname "$0")/.."
deb=${VVL_DEB:-$(ls .gpu/layers/vulkan-validationlayers_*.deb .gpu/debs/vulkan-validationlayers_*.deb 2>/dev/null | head -1)}
if [ -z "$deb" ]; then
  echo "no vulkan-validationlayers .deb in .gpu/layers/: apt-get download vulkan-validationlayers (see the top of this file)" >&2
  exit 2
fi
rm -rf /tmp/vvl && dpkg -x "$deb" /tmp/vvl || exit 2
export VK_LAYER_PATH=/tmp/vvl/usr/share/vulkan/explicit_layer.d
export LD_LIBRARY_PATH="/tmp/vvl/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# VKML_COOPMAT=off: Debian 12's layer (1.3.239) predates VK_KHR_cooperative_matrix and reports its feature
# struct as unknown at vkCreateDevice; the tensor-core kernels' parity runs without the layer (h200_kernels.sh)
export VKML_VALIDATION=1 VKML_REQUIRE_VULKAN=1 VKML_COOPMAT=off PYTHONUNBUFFERED=1 MPLBACKEND=Agg
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "
from vkml.backends.vulkan.device import instance, get_device
print('validation layer on:', instance().validation, '| device:', get_device().info.name)" || exit 2

. bench/h200_lib.sh
step oom ${OOM_S:-240} python3 bench/h200_reliability.py --out "$OUT/oom_h200.json"
export TESTS="python3 -m pytest -q -p no:cacheprovider tests/test_reliability.py tests/test_fuzz.py tests/test_memory.py \
tests/test_jit.py tests/test_fidelity.py"
t0=$SECONDS
TAIL=4 step tests ${TESTS_S:-330} $TESTS; rc=$?
python3 bench/tests_json.py "$OUT" "$rc" "$((SECONDS - t0))" reliability_h200.json --layer "$deb" --oom "$OUT/oom_h200.json"
cat "$OUT/reliability_h200.json"
cat "$OUT/gpu.txt"
