#!/bin/bash
# One device call for the channels-last conv (kernels/cuda/conv_nhwc.cu, conv_nhwc_wgmma.cu,
# pool_nhwc.cu): builds a small library (those, the GEMM files the plain-1x1 route calls, the old
# NCHW conv.cu, status.cu; sm_90a; linked with cuBLASLt) and runs
# bench/cuda/conv_nhwc_bench.py (checks vs torch, per-layer ResNet-50 timings). Logs under $OUT.
#   bench/cuda/conv_nhwc_device_run.sh [PREBUILT.so] [bench args]
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/conv_out}
mkdir -p /tmp/conv_lib
# cuBLASLt (the plain-1x1 GEMM route): the system's, else the one PyTorch's wheels carry.
device_setup "$OUT/conv_gpu.txt"
echo "cuBLASLt: $LT"
# A prebuilt kernel library (e.g. the libdinoml_cuda_kernels.so an artifact ships) as first argument
# skips the build.
SO=""
if [ -n "$1" ] && [ "${1#--}" = "$1" ]; then SO="$1"; shift; fi
if [ -z "$SO" ] || ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$SO"; then
  t0=$(date +%s)
  for f in conv conv_nhwc conv_nhwc_wgmma pool_nhwc status gemm gemm_mma gemm_wgmma gemm_skinny; do
    nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
      -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Iinclude -c kernels/cuda/$f.cu -o /tmp/conv_lib/$f.o &
  done
  wait
  nvcc -shared -o /tmp/conv_lib/libconv.so /tmp/conv_lib/*.o "$LT" || exit 1
  SO=/tmp/conv_lib/libconv.so
  echo "library built in $(( $(date +%s) - t0 )) s"
fi
timeout 300 python3 bench/cuda/conv_nhwc_bench.py "$SO" --out "$OUT" "$@" 2>&1 | tee "$OUT/conv_nhwc_run.log"
