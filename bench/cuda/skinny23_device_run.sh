#!/bin/bash
# A/B of skinny-GEMM harness libraries in one device call (issue 4, "M <= 16 at >= 80% of the D2D
# copy"): bench/cuda/skinny_packed_bench.py times the same variants with each library in turn, the
# libraries alternated over ROUNDS rounds (the GPU's speed drifts between calls), then the checks with
# CHECK_LIB. Session 23 used it for the weight loads' L2 prefetch-size hint (libraries built with
# ld_stream's asm as ld.global.nc.L1::no_allocate{,.L2::128B,.L2::256B}.v4.u32; docs/benchmarks.md).
#   bench/cuda/skinny23_device_run.sh "LIB_A.so LIB_B.so ..." "PACKED_VARIANTS" [CHECK_LIB]
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/skinny23_out}
device_setup "$OUT/gpu.txt"
LIBS="$1"; VARS="$2"; CHECK="${3:-}"
for r in $(seq ${ROUNDS:-2}); do
  for so in $LIBS; do
    tag=$(basename "$so" .so)
    echo "=== round $r: $tag"
    timeout ${BENCH_TIMEOUT:-240} python3 bench/cuda/skinny_packed_bench.py "$(readlink -f "$so")" --out "$OUT/${tag}_r$r" \
      --packed "$VARS" --base 18 --no-checks > "$OUT/${tag}_r$r.log" 2>&1; grep -v "^\s*$" "$OUT/${tag}_r$r.log" | tail -n ${TAILN:-30}
  done
done
if [ -n "$CHECK" ]; then
  echo "=== checks: $(basename "$CHECK")"
  timeout ${BENCH_TIMEOUT:-300} python3 bench/cuda/skinny_packed_bench.py "$(readlink -f "$CHECK")" --out "$OUT/checks" \
    --packed "$VARS" --base 18 2>&1 | tee "$OUT/checks.log" | tail -40
fi
