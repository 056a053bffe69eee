#!/usr/bin/env bash
# What waits for the next session with the H200 (each line fits one device call of at most 600 s):
#     . .gpu/setup.sh && VKML_COMMIT=<the commit you ran, by hand> bash bench/h200_next.sh STEP $OUT
# (the device's copy of the checkout can report a stale `git rev-parse HEAD`: it said 249d9fa at b73ba02.)
# Last H200 run: fc551cd (real, vs, phases, attn, memory; bench/results/*_h200.json). Since then (measured on an H100
# only, bench/results/logs/h100_ab_2026-12-06): split fused reductions as two generated kernels, 16-byte loads for
# BatchNorm's statistics, skinny 16x64 / 32x64 tiles for 16- and 32-channel convolutions, launch words kept with the
# plan, and earlier the split-memo and conv-placement commits; then (H100 logs: h100_vec_2026-12-06, h100_wgrad_2026-12-06)
# 16-byte loads for f32 products (<tile>_v<a><b> twins), the weight gradient's and the convolution's loads with their
# divisions hoisted, and tensor-core tiles with the layout fixed when compiling plus a 64-deep 128x128 block:
# rerun real, vs, phases, bn and `tests/test_deep_tiles.py` (its tensor-core layouts: the H100 run ended before the
# fixed test could run) on the H200 first. Stop 37 added f16 attention on tensor cores (attention_cm.comp; H100 logs:
# h100_attention_cm_2026-12-06): `attn` runs its GPU tests and bench/attention.py; then `real` for the GPT amp rows.
# Stop 38 (H100 logs: h100_dkv_2026-12-06, 74fa713): the prefetching attention_cm, DKV (dk and dv in one kernel), the
# gradients' heads-out layout, split K for the 128-thread tensor-core tiles and index_add_rows.comp ran on an H100:
# rerun `attn` and `real` here for the H200's rows.
# Stop 39 (not run on any GPU: no device time was left): attention's gradients written into the rows of qkv's gradient
# (the 18 copy_f16 of the amp GPT step gone; dispatch counts checked on lavapipe) and a split product's slabs summed
# a thread per output (reduce_slabs; predicted: the amp GPT step's 565 us of reduce_cols_final_f16 to under 190):
# run `attn` (its GPU tests cover both) and `bn` (bench/step_shaders.py's per-shader GPU time) to check the
# prediction, then `real`.
# Stop 40 (one H100 call, then every start refused): stop 39's kernels passed their GPU tests on an H100
# (bench/results/logs/h100_s40_2026-12-06), but its step profile was 4-5x long on that host (not a result), so the slab
# sums' prediction is unchecked. New: an eager realize is submitted in parts (ADR 0040): run `parts` (eager phases with
# one submission and with parts, both files rendered in RESULTS.md), then `real` (its eager rows now have the parts),
# `bn` (step_shaders now checks its profile against the replayed step's wall time) and `attn`.
# Stop 41 (two H100 calls, bench/results/logs/h100_s41_2026-12-07): the parts and stop 39's kernels measured on an H100
# (eager GPT 85 -> 50 ms in eager_phases, 0.47 of PyTorch eager in real_models; the slab sums 150 us, predicted < 190).
# New since: GradScaler skips on the device in eager mode (a scaled eager step is one realize, not three) and ~13% less
# host work per eager step (schedule, views, row words, index-check taints): on the H200 run `parts`, `real` and `vs`.
# The amp GPT's losses differed from run to run on the H100 (f32 did not): run `det` (bench/repeatable.py) first.
# Stop 42 (two H100 calls, bench/results/logs/h100_s42_2026-12-07): runs repeat bit for bit, but the GPT under amp does not
# train as float32 and PyTorch do (eager amp skips every step, amp_jit ends far below float32's loss; the CNN and ResNet-20
# train alike): run `amp` FIRST (bench/amp_check.py: the training, the gradients, then with tensor cores off and with the
# composed attention, to find the kernel), then `real`, `parts`, `vs`. Since those calls: a replayed step GradScaler skipped
# is no longer counted (f7190b7: amp_jit's losses after a skip now match eager's on lavapipe); the replay reads the scale
# each step for it (one small readback: see vs's replay_host).
# Stop 43 (H100 calls, bench/results/logs/h100_s43_2026-12-07): found and fixed (37a3491): a reduce kernel stored a
# recomputed prologue value at the outputs' index (LayerNorm's dx in a GPT of >= 6 layers): every amp mode of the GPT
# now trains as float32 and PyTorch do on the H100 (amp_check_h100.json); real, vs and eager phases rerun there on a
# slower host (PyTorch's host-bound rows 1.4-1.7x stop 42's). On the H200: `amp` (to confirm), then `real`, `vs`, `parts`.
# Stop 44 (H100 calls, bench/results/logs/h100_s44_2026-12-07): erfc with one exponential and no branch (GELU's kernels were
# compute-bound: 58 us for 12.6M float16 elements on a good H100; every prebuilt generated kernel renamed), an eager amp
# step schedules once (GradScaler.scale defers the loss), scalar operands build two nodes and no tensors. The H100 hosts
# it got were degraded or noisy: on the H200 run `amp`, `real`, `parts` (eager_phases --mode amp too) and `bn` (the GELU
# kernels' GPU time in step_shaders' amp table, against 58 us and 55 us at 5bc4501).
# Stop 46 (H200 calls at 4ebff22, bench/results/logs/h200_s46_2026-12-07): real, eager phases (with nodes a step and the
# host's µs a node), kernels, attention, vs, amp (the GPT trains alike: all four amp modes within 1e-4 of float32), bn
# stats, step_shaders, and an A/B of the batch-norm composite (old functional.py against new, alternating). Next on the
# H200: `parts` (one submission against parts), `memory`, and `bench/bench_kernels.py --sweep --budget 105`.
# Stop 47 (H100 calls only, bench/results/logs/h100_s47_2026-12-07; every H200 start was refused): the host now polls a
# GPU's fence for up to 50 ms (a blocked wait woke ms late on the H100's host: CNN jit 2.16 -> 1.86 ms), LayerNorm's
# gradient is one rule, uploads skip a host copy, and a replay checks its modules' guards only when a module changed.
# On the H200 run `real` and `vs` first (all four change its jit rows' host time), then `parts`, `memory` and the sweep.
# Stop 48 (no device came: every start was refused, then loans paused): the f32 tile's next experiment is ready. `frag`
# builds three variants of matmul128d from shaders/matmul.comp on the machine (FRAG2: the fragments double-buffered in
# registers; a 128x256 tile with 8x16 outputs a thread; both), checks each against numpy and times 4096^3 and the GPT's
# products beside PyTorch, alternating with the shipped kernel (bench/matmul_ab.py; all four passed parity on lavapipe
# as matmul128). A variant that wins by more than the base runs' spread ships (FRAG2 sums in the same order: the same
# bits). `upload` times the two upload paths of a CIFAR batch (the BAR's ~3 GB/s against staging; bench/upload_paths.py).
# On the H200 run `real` and `vs` first (stop 47's four changes are not on its rows yet), then `frag`, `upload`, `parts`.
# STEP: frag   f32 tile variants against the shipped matmul128d (bench/matmul_ab.py), alternating
#       upload the two upload paths of a CIFAR batch (bench/upload_paths.py)
#       amp    does the GPT train alike in float32 and under amp, and which gradients differ (bench/amp_check.py)
# STEP: det    is a training run repeatable bit for bit? eager, amp, amp_jit; then amp with one submission a step
#       parts  eager phases with VKML_SUBMIT_FIRST=0 (one submission a step) and the default parts (ADR 0040)
#       real   the real-model benchmark (GPT, BatchNorm CNN, ResNet-20; eager, jit, amp; PyTorch eager, autocast, CUDA graph)
#       vs     the step rows beside PyTorch (MLP and CNN, jit and eager) after this session's changes
#       gpt    the GPT demo at nanoGPT's character-model size
#       ddp    2 ranks on the one GPU: the host-staged and the shared-memory exchange, jitted (issue 24's rows)
#       tiles  matmul / skinny products after the CPU tile policy (must not move a GPU's choice)
#       lstm   the LSTM notebook at full size (VKML_LSTM_SIZE=full), its figures to lstm_h200.json
#       overlap DDP jitted, 2 ranks, 2 MiB buckets, both exchanges, overlapped and all at once (VKML_DDP_OVERLAP)
#       deep   matmul128d (the twin with 16-deep slabs, chosen where shared memory allows): its tests on the GPU,
#              4096^3 f32/f16, and the real-model benchmark again
#       split  what the last session could not run: the GPU tests of matmul128d and of the split fused reductions,
#              then the real-model benchmark after the split (GradScaler's inf check, BatchNorm's sums)
#       bk16   an experiment, not committed code: matmul128 with 16-deep slabs instead of 8 (fits 48 KiB of shared
#              memory, not lavapipe's 32), rebuilt on the machine; 4096^3 and the GPT step before and after
#       attn   fused attention: its GPU tests, bench/attention.py beside PyTorch's SDPA, the GPT benchmark with it
#       phases where an eager step's time goes (forward, backward's graph, schedule, record+submit, wait): on the H100
#              at b73ba02 (an ad-hoc twin of bench/eager_phases.py) GPT 81.5 ms = 7.0 backward + 11.7 schedule + 21.7
#              record + 33.3 wait; CNN-BN 15.6 ms = 1.6 + 1.3 + 7.9 + 1.5: record and submit is the host's largest part
#       bn     BatchNorm's statistics against bandwidth beside PyTorch (bench/bn_stats.py), and GPU time per shader of an
#              eager step of each real model (bench/step_shaders.py)
#       memory what each real-model mode leaves in device memory and what holds it (bench/memory_modes.py); on the
#              H100 at 8a3b6b0 every mode started and ended at 0 bytes in use (memory_modes_h100.json)
# Results go to $OUT; copy them into bench/results/ and run `python bench/render_results.py`. On an H100 (lent when
# no H200 is), commit them renamed *_h100.json: RESULTS.md renders those in sections of their own.
set -uo pipefail
STEP=${1:?usage: bash bench/h200_next.sh amp|det|parts|real|vs|gpt|ddp|tiles|memory|... OUTDIR}
OUT=${2:?usage: bash bench/h200_next.sh STEP OUTDIR}
cd "$(dirname "$0")/.."
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
case "$STEP" in
  frag)  for v in base frag wide widefrag base frag wide widefrag; do timeout 60 python3 bench/matmul_ab.py $v --out "$OUT/matmul_ab"; done ;;
  upload) timeout 120 python3 bench/upload_paths.py ;;
  real)  timeout 560 python3 bench/real_models.py --out "$OUT/real_models_h200.json" ;;
  vs)    timeout 560 python3 bench/vs_torch.py --out "$OUT/vs_torch_next_h200.json" ;;
  gpt)   timeout 560 python3 -m vkml.demo --model gpt --size full --no-progress --out "$OUT/gpt" ;;
  ddp)   timeout 280 python3 bench/ddp.py --jit --exchange mpi --out "$OUT/ddp_mpi_h200.json"
         timeout 280 python3 bench/ddp.py --jit --exchange shared --out "$OUT/ddp_shared_h200.json" ;;
  tiles) timeout 560 python3 bench/matmul_skinny.py --out "$OUT/matmul_skinny_h200.json" ;;
  lstm)  VKML_LSTM_SIZE=full VKML_LSTM_OUT="$OUT/lstm_h200.json" timeout 170 python3 bench/run_notebook.py nbs/38a_lstm.ipynb 2>&1 | tail -12 ;;
  overlap) for ex in shared mpi; do for ov in 1 0; do
             VKML_DDP_OVERLAP=$ov timeout 100 python3 bench/ddp.py --cases mlp --jit --no-torch --exchange $ex --bucket-cap-mb 2 \
               --out "$OUT/ddp_${ex}_overlap${ov}_h200.json" 2>&1 | grep -A1 "^case     jit"; done; done ;;
  deep)  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_deep_tiles.py 2>&1 | tail -3
         timeout 60 python3 bench/bench_matmul.py --sizes 4096 --dtypes float32,float16 --reps 5 --json "$OUT/matmul_deep_h200.json" 2>&1 | tail -3
         timeout 400 python3 bench/real_models.py --out "$OUT/real_models_h200.json" 2>&1 | tail -14 ;;
  split) timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_deep_tiles.py tests/test_fusion_regressions.py \
           tests/test_cuts.py "tests/test_amp.py::test_an_eager_scaled_step_computes_backward_once" 2>&1 | tail -4
         timeout 400 python3 bench/real_models.py --out "$OUT/real_models_h200.json" 2>&1 | tail -14 ;;
  bk16)  mm() { timeout 60 python3 bench/bench_matmul.py --sizes 4096 --dtypes float32 --reps 5 --variant matmul128 2>&1 | tail -2; }
         gpt() { timeout 100 python3 bench/real_models.py --cases gpt --vk-modes jit --torch-modes eager --steps 15 --warm 4 \
                   --profile-steps 0 --out "$OUT/bk16_$1.json" 2>&1 | grep "gpt vkml jit\|gpt torch"; }
         echo "BK 8:"; mm; gpt bk8
         sed -i 's/"matmul128": (128, 128, 8, 8, 8)/"matmul128": (128, 128, 16, 8, 8)/' shaders/variants_nn.py
         sed -i 's/"matmul128": (128, 128, 8)/"matmul128": (128, 128, 16)/' vkml/backends/vulkan/kernels_nn.py
         python3 shaders/build.py 2>&1 | tail -1
         echo "BK 16:"; mm; gpt bk16
         git checkout -q shaders/variants_nn.py vkml/backends/vulkan/kernels_nn.py ;;
  phases) timeout 300 python3 bench/eager_phases.py --out "$OUT/eager_phases_h200.json" ;;
  amp)   timeout 200 python3 bench/amp_check.py --grads --out "$OUT/amp_check_h200.json"
         for v in VKML_COOPMAT=off VKML_FUSED_ATTENTION=0; do echo "== $v"
           env $v timeout 150 python3 bench/amp_check.py --grads --steps 6 --out "$OUT/amp_check_${v//=/_}_h200.json"; done ;;
  det)   timeout 200 python3 bench/repeatable.py --out "$OUT/repeatable_h200.json"
         VKML_SUBMIT_FIRST=0 timeout 100 python3 bench/repeatable.py --modes amp --out "$OUT/repeatable_first0_h200.json" ;;
  parts) VKML_SUBMIT_FIRST=0 timeout 200 python3 bench/eager_phases.py --out "$OUT/eager_phases_first0_h200.json"
         timeout 200 python3 bench/eager_phases.py --out "$OUT/eager_phases_h200.json"
         timeout 100 python3 bench/eager_phases.py --cases gpt --mode amp --out "$OUT/eager_phases_amp_h200.json" ;;
  bn)    timeout 150 python3 bench/bn_stats.py --out "$OUT/bn_stats_h200.json" 2>&1 | grep -v "^   vk"
         timeout 200 python3 bench/step_shaders.py cnn_bn resnet20 gpt > "$OUT/step_shaders.txt" 2>&1; head -20 "$OUT/step_shaders.txt"
         timeout 120 python3 bench/step_shaders.py gpt --mode amp > "$OUT/step_shaders_amp.txt" 2>&1; head -20 "$OUT/step_shaders_amp.txt" ;;
  memory) timeout 560 python3 bench/memory_modes.py --cases cnn_bn gpt --out "$OUT/memory_modes_h200.json" ;;
  attn)  timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_attention.py tests/test_deep_tiles.py 2>&1 | tail -3
         timeout 200 python3 bench/attention.py --out "$OUT/attention_h200.json" 2>&1 | tail -6
         timeout 120 python3 bench/gpt_memory.py --batch 32 --out "$OUT/gpt_memory_h200.json" 2>&1 | tail -5
         timeout 60 python3 bench/gpt_memory.py --batch 32 --plan --out "$OUT/gpt_memory_plan_h200.json" 2>&1 | tail -2
         timeout 220 python3 bench/real_models.py --cases gpt --out "$OUT/real_models_gpt_h200.json" 2>&1 | tail -10 ;;
  *) echo "unknown step $STEP"; exit 2 ;;
esac
