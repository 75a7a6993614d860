#!/bin/bash
# One device call for the channels-last conv (kernels/cuda/conv_nhwc.cu, conv_nhwc_wgmma.cu,
# pool_nhwc.cu): builds a small library (those, the GEMM files the plain-1x1 route calls, the old
# NCHW conv.cu, status.cu; sm_90a; linked with cuBLASLt) and runs
# bench/cuda/conv_nhwc_bench.py (checks vs torch, per-layer ResNet-50 timings). Logs under $OUT.
set -o pipefail
OUT=${OUT:-/tmp/conv_out}
mkdir -p "$OUT" /tmp/conv_lib
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee "$OUT/conv_gpu.txt"
t0=$(date +%s)
for f in conv conv_nhwc conv_nhwc_wgmma pool_nhwc status gemm gemm_mma gemm_wgmma gemm_skinny; do
  nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
    -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Iinclude -c kernels/cuda/$f.cu -o /tmp/conv_lib/$f.o &
done
wait
nvcc -shared -o /tmp/conv_lib/libconv.so /tmp/conv_lib/*.o -lcublasLt || exit 1
echo "library built in $(( $(date +%s) - t0 )) s"
timeout 300 python3 bench/cuda/conv_nhwc_bench.py /tmp/conv_lib/libconv.so --out "$OUT" "$@" 2>&1 | tee "$OUT/conv_nhwc_run.log"
