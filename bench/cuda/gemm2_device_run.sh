#!/bin/bash
# One device call for session 7's GEMM work (issue 4; run from the repository root or a copy holding
# kernels/, include/, bench/cuda/ and python/dinoml/tools/): the skinny GEMM's prefetch / PDL
# variants and the persistent ping-pong wgmma GEMM (gemm_wgmma_pp.cu) with its fused erf GELU.
#   bench/cuda/gemm2_device_run.sh [PREBUILT.so]
# PREBUILT.so: the harness library built elsewhere with the nvcc line below (sm_90a: gemm.cu,
# gemm_mma.cu, gemm_wgmma.cu, gemm_wgmma_pp.cu, gemm_skinny.cu, status.cu and both bench entries,
# linked with cuBLASLt); built here when missing or not loadable. Steps, logs under $OUT:
#   1. a smoke check of the persistent kernel in its own process (a hang or failure must not cost
#      the rest: the later steps then leave it out with --no-pp);
#   2. bench/cuda/gemv_bench.py --quick: all checks through the C ABI (skinny variants, PDL chains,
#      the persistent kernel), D2D copy, fused gemm+bias+GELU vs torch, skinny M = 1 / 16 timings;
#   3. bench/cuda/wgmma_bench.py --quick --lib: kernel checks and TFLOP/s vs torch.matmul.
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/gemm2_out}
mkdir -p /tmp/gemm2_lib
device_setup "$OUT/gpu.txt"
SO="$1"
if [ -z "$SO" ] || ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1]); ctypes.CDLL(sys.argv[1]).wgmma_bench_gemm" "$SO"; then
  t0=$(date +%s)
  for f in kernels/cuda/gemm.cu kernels/cuda/gemm_mma.cu kernels/cuda/gemm_wgmma.cu kernels/cuda/gemm_wgmma_pp.cu \
           kernels/cuda/gemm_skinny.cu kernels/cuda/status.cu bench/cuda/gemv_bench_entry.cu bench/cuda/wgmma_bench_entry.cu; do
    echo $f
  done | xargs -P 8 -I{} sh -c \
    'nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
     -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Ikernels/common -Iinclude -c {} -o /tmp/gemm2_lib/$(basename {}).o' 2>&1 | tail -20
  nvcc -shared -o /tmp/gemm2_lib/libgemm2.so /tmp/gemm2_lib/*.o "$LT" 2>&1 | tail -5
  SO=/tmp/gemm2_lib/libgemm2.so
  echo "library built in $(( $(date +%s) - t0 )) s"
fi
echo "library: $SO"
NOPP=""
timeout 60 python3 bench/cuda/gemv_bench.py "$SO" --smoke --out /tmp/gemm2_smoke 2>&1 || NOPP="--no-pp"
echo "persistent kernel smoke: ${NOPP:-ok}"
timeout ${GEMV_TIMEOUT:-170} python3 bench/cuda/gemv_bench.py "$SO" --quick $NOPP --out "$OUT" 2>&1 | tee "$OUT/gemv_run.log"
timeout ${WGMMA_TIMEOUT:-110} python3 bench/cuda/wgmma_bench.py --quick --lib "$SO" $NOPP --out "$OUT" 2>&1 | tee "$OUT/wgmma_run.log"
