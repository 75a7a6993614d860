#!/bin/bash
# One device call for session 8's skinny-GEMM bandwidth work (issue 4, branch `skinny`; run from the
# repository root or a copy holding kernels/, include/, bench/cuda/ and python/dinoml/tools/):
#   bench/cuda/skinny8_device_run.sh [PREBUILT.so] [skinny8_bench.py args...]
# PREBUILT.so: the harness library (sm_90a: gemm.cu, gemm_mma.cu, gemm_wgmma.cu, gemm_wgmma_pp.cu,
# gemm_skinny.cu, status.cu, bench/cuda/gemv_bench_entry.cu, linked with cuBLASLt), built with the
# nvcc line below here when missing or not loadable. Then a smoke check of the bulk-copy ring variants
# in their own process (a hang must not cost the rest; SMOKE_VARIANTS="25 26 ..." picks them), then
# bench/cuda/skinny8_bench.py (checks, D2D copy, timings). Logs under $OUT; the table is printed last.
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/skinny8_out}
mkdir -p /tmp/skinny8_lib
device_setup "$OUT/gpu.txt"
SO="$1"
shift
if [ -z "$SO" ] || ! python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1]).gemv_bench_skinny" "$SO"; then
  t0=$(date +%s)
  for f in kernels/cuda/gemm.cu kernels/cuda/gemm_mma.cu kernels/cuda/gemm_wgmma.cu kernels/cuda/gemm_wgmma_pp.cu \
           kernels/cuda/gemm_skinny.cu kernels/cuda/status.cu bench/cuda/gemv_bench_entry.cu; do echo $f; done | xargs -P 8 -I{} sh -c \
    'nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
     -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Ikernels/common -Iinclude -c {} -o /tmp/skinny8_lib/$(basename {}).o' 2>&1 | tail -20
  nvcc -shared -o /tmp/skinny8_lib/libskinny8.so /tmp/skinny8_lib/*.o "$LT" 2>&1 | tail -5
  SO=/tmp/skinny8_lib/libskinny8.so
  echo "library built in $(( $(date +%s) - t0 )) s"
fi
echo "library: $SO"
timeout 60 python3 - "$SO" <<'PY' 2>&1 | tee "$OUT/smoke.log"
import sys, os, torch
sys.path.insert(0, "bench/cuda")
import gemv_bench as gb
lib = gb.Lib(sys.argv[1])
for v in [int(x) for x in os.environ.get("SMOKE_VARIANTS", " ".join(map(str, range(12, 25)))).split()]:
    for (M, N, K) in [(1, 4096, 4096), (16, 300, 520)]:
        a = torch.randn(M, K, device="cuda").bfloat16(); b = (torch.randn(N, K, device="cuda") / K ** 0.5).bfloat16()
        y = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        lib.skinny(a, b, None, None, y, "none", v); torch.cuda.synchronize()
        r = a.double() @ b.double().t()
        print(f"smoke v{v} M={M} N={N} K={K} rel_l2={((y.double() - r).norm() / r.norm()).item():.2e}", flush=True)
PY
timeout ${BENCH_TIMEOUT:-300} python3 bench/cuda/skinny8_bench.py "$SO" --out "$OUT" "$@" 2>&1 | tee "$OUT/skinny8_run.log"
