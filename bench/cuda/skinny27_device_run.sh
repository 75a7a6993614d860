#!/usr/bin/env bash
# Issue 4 ("M <= 16 at >= 80% of the D2D copy"), session 27, one device call: the sweep probe
# (bench/cuda/skinny27_probe.cu: register-kernel shapes, what is fetched before griddepcontrol.wait,
# the library's new packed kernel, variants 59..68), then the harness (skinny_packed_bench.py) on the
# library's variants 51 / 54 and 59..68 over two rounds, then every check of them.
# Build both here (sm_90a; docs/benchmarks.md session 27 "Reproduce"), carry gpu-s27, then:
#   bash bench/cuda/skinny27_device_run.sh gpu-s27 [PROBE_ONLY]
set -o pipefail
D=${1:-gpu-s27}
OUT=${OUT:-/tmp/skinny27_out}
mkdir -p "$OUT"
echo "=== probe, N = K = 4096"
timeout ${PROBE_TIMEOUT:-240} "$D/skinny27_probe" 4096 2>&1 | tee "$OUT/probe_4096.log"
[ -n "${2:-}" ] && exit 0
VARS=${VARS:-51,54,59,60,61,62,63,64,65,66,67,68}
OUT=$OUT TAILN=40 bash "$(dirname "$0")/skinny23_device_run.sh" "$D/libs27.so" "$VARS" "$D/libs27.so"
