#!/bin/bash
# One device call for the own sm_90a GEMM (run from the repository root or a copy holding
# kernels/, include/ and bench/cuda/): builds the kernel library (every kernels/cuda/*.cu, sm_90a
# only, linked with cuBLASLt) and checks dml_cuda_gemm/dml_cuda_bmm with DML_CUDA_GEMM_WGMMA
# (bench/cuda/wgmma_lib_check.py), then runs the kernel harness (bench/cuda/wgmma_bench.py:
# checks + timings vs torch.matmul). Logs under $OUT.
set -o pipefail
OUT=${OUT:-/tmp/wgmma_out}
mkdir -p "$OUT" /tmp/wgmma_lib
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee "$OUT/wgmma_gpu.txt"
LT=$(ls /usr/local/cuda/lib64/libcublasLt.so 2>/dev/null | head -1)
if [ -z "$LT" ]; then
  LT=$(python3 -c "import glob, site; print(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/libcublasLt.so*', recursive=True))[0])")
fi
echo "cuBLASLt: $LT"
export LD_LIBRARY_PATH=$(dirname "$LT"):$LD_LIBRARY_PATH
t0=$(date +%s)
ls kernels/cuda/*.cu | xargs -P 16 -I{} sh -c 'nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden \
  -gencode=arch=compute_90a,code=sm_90a -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Iinclude -c {} \
  -o /tmp/wgmma_lib/$(basename {}).o' 2>&1 | grep -v "^$" | tail -20
nvcc -shared -o /tmp/wgmma_lib/libdinoml_cuda_kernels.so /tmp/wgmma_lib/*.o "$LT" 2>&1 | tail -5
echo "library built in $(( $(date +%s) - t0 )) s"
timeout 120 python3 bench/cuda/wgmma_lib_check.py /tmp/wgmma_lib/libdinoml_cuda_kernels.so 2>&1 | tee "$OUT/wgmma_lib_check.log"
timeout 200 python3 bench/cuda/wgmma_bench.py --out "$OUT" "$@" 2>&1 | tee "$OUT/wgmma_run.log"
