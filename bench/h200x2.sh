#!/usr/bin/env bash
# Data-parallel training on the two H200 GPUs of one host (the nvidia-h200-x2 kind) in ONE device call
# (a few minutes):
#     . .gpu/setup.sh && VKML_COMMIT=<sha> bash bench/h200x2.sh $OUT
# 1. bench/ddp.py: vkml.distributed with 1 and 2 ranks under mpiexec (MPICH from .gpu/mpi), each rank on its own
#    GPU, the equality check, PyTorch DDP (NCCL) on the same GPUs -> ddp_h200x2.json;
# 2. the demo's --distributed mode on the two GPUs (a log only).
# What comes back: ddp_h200x2.json and logs.tgz. Commit the JSON into bench/results/ and render it
# (bench/render_ddp.py's render_ddp, hooked into bench/render_results.py).
set -uo pipefail
OUT=${1:?usage: bash bench/h200x2.sh OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# NVLink multicast stays off on the lent machines (KINDS.md): for NCCL, PyTorch and NVSHMEM, in every rank
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader > "$OUT/gpu.txt" 2>&1
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
{ echo "mpiexec: $(command -v mpiexec)"; python3 - <<'PY'
import mpi4py, sys
from mpi4py import MPI
print("python", sys.version.split()[0], "| mpi4py", mpi4py.__version__, "|", MPI.Get_library_version().splitlines()[0])
try:
    import torch, torch.distributed as d
    print("torch", torch.__version__, "| cuda devices", torch.cuda.device_count(), "| nccl", d.is_nccl_available())
except Exception as e: print("torch:", e)
import vkml
print("vulkan devices:", [f"{d.index}: {d.name}" for d in vkml.devices()])
PY
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt" "$OUT/gpu.txt"
. bench/h200_lib.sh
step ddp ${DDP_S:-420} python3 bench/ddp.py --out "$OUT/ddp_h200x2.json" --timeout 200 ${DDP_ARGS:-}
TAIL=8 step demo ${DEMO_S:-90} mpiexec -n 2 python3 -m vkml.demo --distributed --no-progress --out "$OUT/demo"
# the device tool brings back a handful of files: the JSON, and every log in one archive
(cd "$OUT" && tar czf logs.tgz *.log *.txt demo 2>/dev/null; rm -rf *.log *.txt demo)
ls "$OUT"
