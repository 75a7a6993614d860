#!/bin/bash
# One device call for session 8's fused erf-GELU GEMM (issue 4; branch gelu): the own sm_90a GEMM
# with the overlapped fused epilogue (kernels/cuda/gemm_wgmma_epi.cu).
#   bench/cuda/gelu_device_run.sh PREBUILT.so
# PREBUILT.so: the harness library built elsewhere by nvcc 13 for sm_90a (gemm.cu, gemm_mma.cu,
# gemm_wgmma.cu, gemm_wgmma_pp.cu, gemm_wgmma_epi.cu, gemm_skinny.cu, status.cu and
# bench/cuda/{gemv,wgmma,gelu}_bench_entry.cu, linked with cuBLASLt); nothing is built here.
# Steps, logs under $OUT: a smoke check in its own process (a hang must not cost the rest), then
# bench/cuda/gelu_bench.py (all checks, fused GELU and plain GEMM timings; table printed last).
# Session 9: GELU_ARGS="--repeats R --rounds N" (alternating timing), GELU_TIMEOUT=400 for the full
# check set with variants 1-6 (~1150 checks, ~40 s).
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/gelu_out}
device_setup "$OUT/gpu.txt"
SO="$1"
cuobjdump --dump-resource-usage "$SO" 2>/dev/null | grep -A1 wgmma2 | grep -o "REG:[0-9]*\|STACK:[0-9]*\|SHARED:[0-9]*\|LOCAL:[0-9]*" | sort | uniq -c > "$OUT/resource.txt"
if ! timeout 60 python3 bench/cuda/gelu_bench.py "$SO" --smoke --out "$OUT/smoke" > "$OUT/smoke.log" 2>&1; then
  tail -20 "$OUT/smoke.log"; echo "SMOKE FAILED"; exit 1
fi
tail -1 "$OUT/smoke.log"
timeout ${GELU_TIMEOUT:-240} python3 bench/cuda/gelu_bench.py "$SO" --out "$OUT" ${GELU_ARGS} > "$OUT/gelu_run.log" 2>&1
rc=$?
grep FAIL "$OUT/gelu_run.log" | head -20
sed -n '/^== checks/,$p' "$OUT/gelu_run.log" | tail -25
echo "rc=$rc"
