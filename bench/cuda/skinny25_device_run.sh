#!/usr/bin/env bash
# Issue 4 ("M <= 16 at >= 80% of the D2D copy"), the question left by session 25 for the H200: the
# replica of the packed skinny kernel (bench/cuda/skinny_timeline.cu, "loads batched, U2 W8") measured
# 79.5% of the copy at M = 16, N = K = 4096 (session 15), where the library's variant 51 measures
# 72-74% in the harness. The replica's a was one constant buffer (every element 0x3c3c), the harness's
# is random and rotated with the weights. This times the replica and the library's own kernel (51, 54)
# in one process, with a constant, a random and a rotated a, so the gap is either the data (power /
# clocks with constant operands), a's cache state, or the kernel's code.
#
# Build (off the device is fine; sm_90a):
#   nvcc -O3 -std=c++17 -arch=sm_90a -DSKTL_LIB -DDML_CUDA_LIBRARY_ARCHS='"sm_90a"' \
#        -Ikernels/cuda -Ikernels/common -Iinclude bench/cuda/skinny_timeline.cu kernels/cuda/status.cu -o gpu-s25/tl_lib
# Run on the GPU machine (carry gpu-s25):
#   bash bench/cuda/skinny25_device_run.sh gpu-s25/tl_lib [OUTDIR]
set -euo pipefail
BIN=${1:?usage: skinny25_device_run.sh TL_LIB_BINARY [OUTDIR]}
OUTDIR=${2:-${OUT:-.}}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv
for A in const random rotate; do
  SKTL_SET=gap SKTL_A=$A SKTL_M=1,8,16 "$BIN" 4096 2>&1 | tee "$OUTDIR/h200_session26_gap_$A.log"
done
