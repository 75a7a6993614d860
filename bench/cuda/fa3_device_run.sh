#!/bin/bash
# One device call for the sm_90a flash-attention kernel (run from the repository root or a copy
# holding kernels/, include/, bench/cuda/ and python/dinoml/tools/): bench/cuda/fa3_bench.py builds the harness library,
# checks correctness vs float64 and times vs torch SDPA. Logs under $OUT.
set -o pipefail
OUT=${OUT:-/tmp/fa3_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader | tee "$OUT/fa3_gpu.txt"
timeout ${FA3_TIMEOUT:-220} python3 bench/cuda/fa3_bench.py --out "$OUT" "$@" 2>&1 | tee "$OUT/fa3_run.log"
