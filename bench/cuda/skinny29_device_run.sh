#!/usr/bin/env bash
# Issue 4 ("M <= 16 at >= 80% of the D2D copy"), session 29, one device call: the harness
# (skinny_packed_bench.py) with skinny_variant_packed's (M, N, K) rule ("packed") against the variants it
# picks from, ROUNDS rounds of the acceptance rows, the M sweep of the 7B-class weights, the dependent
# chains, every check; then the artifact parity bundle if one was carried (gpu-skp: DINOML_GPU_ONLY=gemm_skinny
# DINOML_GPU_QUANT=0 scripts/gpu-check prepare gpu-skp). Build the harness library as in
# skinny28_device_run.sh's header, carry gpu-s27 (and gpu-skp), then:
#   OUT=$OUT/h bash bench/cuda/skinny29_device_run.sh [LIB]
set -o pipefail
. "$(dirname "$0")/device_env.sh"
LIB=$(readlink -f "${1:-gpu-s27/libs27.so}")
VARS=${VARS:-51,54,59,67,69,78,91,96,99,103,104,105,106}
OUT=${OUT:-/tmp/skinny29_out}
device_setup "$OUT/gpu.txt"
B=bench/cuda/skinny_packed_bench.py
for r in $(seq ${ROUNDS:-2}); do
  echo "=== round $r: acceptance rows"
  timeout 240 python3 $B "$LIB" --out "$OUT/rows_r$r" --packed "$VARS" --base 18 --no-checks > "$OUT/rows_r$r.log" 2>&1
  grep -v "^\s*$" "$OUT/rows_r$r.log" | grep -v "^\[time\]" | tail -n ${TAILN:-24}
done
echo "=== M sweep"
timeout 300 python3 $B "$LIB" --out "$OUT/msweep" --packed "$VARS" --base 18 --no-checks --rows msweep > "$OUT/msweep.log" 2>&1
grep -v "^\s*$" "$OUT/msweep.log" | grep -v "^\[time\]" | tail -n 47
echo "=== chains + checks"
timeout 300 python3 $B "$LIB" --out "$OUT/chain" --packed "$VARS" --base 18 --chain > "$OUT/chain.log" 2>&1
grep -v "^\s*$" "$OUT/chain.log" | grep -v "^\[chain\]\|^\[check" | tail -n 24
if [ -d gpu-skp ] || [ -f gpu-skp.tar.xz ]; then
  echo "=== artifact parity bundle"
  timeout 300 scripts/gpu-check run gpu-skp > "$OUT/gpu_skp.log" 2>&1; echo "rc $?"
  grep "^\[gpu-check\]\|FAIL" "$OUT/gpu_skp.log" | tail -n 12
fi
