#!/usr/bin/env bash
# Session 7, branch attn2 (strided attention operands): one batched H200 call. Runs from a folder
# that holds scripts/gpu-check, tests/gpu/, python/dinoml/tools/, the sdpa parity bundle
# (gpu-sdpa: DINOML_GPU_ONLY=sdpa DINOML_GPU_QUANT=0 scripts/gpu-check prepare gpu-sdpa) and the
# GPT-2 bundle (gpu-gpt2: scripts/gpu-check gpt2-prepare gpu-gpt2):
#   1. the sdpa parity cases (plain and strided, every kernel) against PyTorch in float64;
#   2. GPT-2-medium end to end: DinoML (head permutes as strided views) vs the same model with
#      DINOML_CUDA_STRIDED_ATTENTION=0 vs eager vs torch.compile, 11 alternating rounds + CUPTI.
# Logs: $OUT/h200_session7_attn2_{sdpa,gpt2}.log, $OUT/gpu_check.json, $OUT/h200_session7_attn2_gpt2*.json.
set -u
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/attn2_out}
mkdir -p "$OUT"
export OUT
t0=$(date +%s)
DINOML_GPU_QUANT=0 scripts/gpu-check run gpu-sdpa > "$OUT/h200_session7_attn2_sdpa.log" 2>&1
echo "sdpa parity rc $? after $(( $(date +%s) - t0 )) s"
python3 gpu-gpt2/gpt2_run.py gpu-gpt2 "$OUT" --no-profile --ab-strided --tag h200_session7_attn2_gpt2 \
  > "$OUT/h200_session7_attn2_gpt2.log" 2>&1
echo "gpt2 rc $? after $(( $(date +%s) - t0 )) s"
echo "==== sdpa parity (tail) ===="
tail -n 45 "$OUT/h200_session7_attn2_sdpa.log"
echo "==== gpt2 (tail) ===="
tail -n 60 "$OUT/h200_session7_attn2_gpt2.log"
