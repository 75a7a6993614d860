#!/bin/bash
# One device call of session 15's skinny-GEMM work (issue 4, "M <= 16 at >= 80% of the D2D copy"):
#   bench/cuda/skinny15_device_run.sh LIB.so "PACKED_VARIANTS" [skinny_packed_bench.py args...]
# LIB.so: the harness library as in bench/cuda/skinny8_device_run.sh (built off the device, carried).
# A smoke check of each new packed variant in its own process (a hang must not cost the rest), then
# bench/cuda/skinny_packed_bench.py (checks, D2D copy, timings). NCU="V:M ..." then profiles variant V
# at M x 4096 x 4096 bf16 with Nsight Compute (--clock-control none). Logs under $OUT.
set -o pipefail
. "$(dirname "$0")/device_env.sh"
OUT=${OUT:-/tmp/skinny15_out}
device_setup "$OUT/gpu.txt"
SO=$(readlink -f "$1")
VARS="$2"
shift 2
for v in ${SMOKE:-}; do
  timeout 60 python3 - "$SO" "$v" <<'PY' 2>&1 | tee -a "$OUT/smoke.log"
import sys, torch
sys.path.insert(0, "bench/cuda")
import gemv_bench as gb, skinny_packed_bench as sp
gb.NVAR = sp.NVAR
lib = gb.Lib(sys.argv[1]); v = int(sys.argv[2])
for dt in (torch.bfloat16, torch.float16):
    for (M, N, K) in [(1, 4096, 4096), (16, 4096, 4096), (5, 300, 520), (17, 4100, 1000)]:
        r = gb.variant_check(lib, dt, M, N, K, v, "none", True, pack=sp.pack, name="smoke", tag="smoke")
PY
done
timeout ${BENCH_TIMEOUT:-420} python3 bench/cuda/skinny_packed_bench.py "$SO" --out "$OUT" --packed "$VARS" "$@" 2>&1 | tee "$OUT/run.log"
for vm in ${NCU:-}; do
  v=${vm%%:*}; m=${vm##*:}
  cat > /tmp/ncu_drv.py <<'PY'
import sys, torch
sys.path.insert(0, "bench/cuda")
import gemv_bench as gb, skinny_packed_bench as sp
gb.NVAR = sp.NVAR
lib = gb.Lib(sys.argv[1]); v, M = int(sys.argv[2]), int(sys.argv[3])
a = torch.randn(M, 4096, device="cuda").bfloat16(); b = sp.pack((torch.randn(4096, 4096, device="cuda") / 64).bfloat16())
y = torch.empty(M, 4096, device="cuda", dtype=torch.bfloat16)
for _ in range(3):
    lib.skinny(a, b, None, None, y, "none", v, n=4096)
torch.cuda.synchronize()
PY
  timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section LaunchStats --section SchedulerStats -k regex:skinny --launch-skip 2 --launch-count 1 \
    python3 /tmp/ncu_drv.py "$SO" "$v" "$m" > "$OUT/ncu_v${v}_m${m}.txt" 2>&1
  echo "ncu v$v M=$m rc=$?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Warp Cycles|Issued" "$OUT/ncu_v${v}_m${m}.txt" | head -30
done
