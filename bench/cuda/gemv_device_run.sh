#!/bin/bash
# One device call for the own skinny GEMM (run from the repository root or a copy holding kernels/,
# include/ and bench/cuda/): uses a prebuilt harness library when given (built elsewhere with the
# same nvcc line, sm_90a) and otherwise builds it: the GEMM files of the kernel library
# (gemm.cu, gemm_mma.cu, gemm_wgmma.cu, gemm_wgmma_pp.cu, gemm_skinny.cu, status.cu; linked with cuBLASLt) plus
# bench/cuda/gemv_bench_entry.cu. Then runs bench/cuda/gemv_bench.py (checks, D2D copy, skinny
# timings vs cuBLASLt and torch.matmul, fused gemm+bias+GELU vs torch). Logs under $OUT.
#   bench/cuda/gemv_device_run.sh [PREBUILT.so]
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/gemv_out}
mkdir -p /tmp/gemv_lib
device_setup "$OUT/gemv_gpu.txt"
echo "cuBLASLt: $LT"
SO="$1"
if [ -z "$SO" ] || ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$SO"; then
  t0=$(date +%s)
  for f in kernels/cuda/gemm.cu kernels/cuda/gemm_mma.cu kernels/cuda/gemm_wgmma.cu kernels/cuda/gemm_wgmma_pp.cu kernels/cuda/gemm_skinny.cu \
           kernels/cuda/status.cu bench/cuda/gemv_bench_entry.cu; do echo $f; done | xargs -P 6 -I{} sh -c \
    'nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
     -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Ikernels/common -Iinclude -c {} -o /tmp/gemv_lib/$(basename {}).o' 2>&1 | tail -20
  nvcc -shared -o /tmp/gemv_lib/libgemv.so /tmp/gemv_lib/*.o "$LT" 2>&1 | tail -5
  SO=/tmp/gemv_lib/libgemv.so
  echo "library built in $(( $(date +%s) - t0 )) s"
fi
timeout 420 python3 bench/cuda/gemv_bench.py "$SO" --out "$OUT" 2>&1 | tee "$OUT/gemv_run.log"
