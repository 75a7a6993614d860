#!/usr/bin/env bash
# The CUDA kernel benchmarks in one device call. Run on the GPU machine from the repository root (or a
# copy holding kernels/, include/, bench/cuda/, python/dinoml/tools/ and, for `resnet50`, scripts/ and
# tests/gpu/):
#
#   bench/cuda/device_run.sh SUITE [SUITE ...] [-- ARGS for the last suite's harness]
#
# Suites (each prints its table last; logs and JSON under $OUT, default /tmp/dml_bench):
#   lib       build the harness library only: every kernels/cuda/*.cu plus bench/cuda/*_bench_entry.cu,
#             sm_90a, linked with cuBLASLt, into $OUT/lib/libdinoml_bench.so. The suites below build it
#             when LIB is unset and reuse it within one call; LIB=PATH uses one built elsewhere with the
#             same nvcc line.
#   gemv      gemv_bench.py: skinny GEMM checks, D2D copy yardstick, M <= 16 timings vs cuBLASLt and
#             torch.matmul, fused gemm + bias + GELU vs torch.
#   skinny    skinny_packed_bench.py: ROUNDS (2) rounds of the acceptance rows for the variants in VARS,
#             the M sweep of 7B-class weights, dependent chains with every check.
#   gemm      wgmma_lib_check.py (dml_cuda_gemm / dml_cuda_bmm through the C ABI) then wgmma_bench.py:
#             the sm_90a GEMM's checks and TFLOP/s vs torch.matmul.
#   gelu      gelu_bench.py --smoke in its own process (a hang must not cost the rest), then the full
#             fused erf-GELU GEMM checks and timings vs torch.
#   attention fa3_bench.py: the sm_90a flash-attention kernel vs float64 and torch SDPA (builds its own
#             small library).
#   conv      conv_nhwc_bench.py: channels-last conv checks vs torch and per-layer ResNet-50 timings vs
#             cuDNN.
#   resnet50  needs BUNDLE=DIR, a gpu-check bundle made off the device with
#               DINOML_GPU_ONLY="resnet50_bench conv_nhwc" DINOML_GPU_QUANT=0 scripts/gpu-check prepare DIR
#             runs `conv` with the kernel library the artifact ships, scripts/gpu-check run DIR (parity,
#             ResNet-50 vs eager channels-last and torch.compile), then resnet50_conv_ab.py (the same
#             artifact under each DML_CUDA_CONV_NHWC_AUTO rule).
#
# Example: bench/cuda/device_run.sh gemv gemm attention
set -o pipefail
export PYTHONUNBUFFERED=1  # a log cut off by a timeout keeps what was printed
OUT=${OUT:-/tmp/dml_bench}
mkdir -p "$OUT"
HERE=bench/cuda

SUITES=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do SUITES+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#SUITES[@]} -eq 0 ]; then
  sed -n '2,/^set -o/p' "$0" | sed '$d'
  exit 2
fi

# The GPU (name, driver, clocks, power) goes into every result folder; cuBLASLt comes from the toolkit,
# else from PyTorch's NVIDIA wheels (the harness libraries link it but do not ship it).
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv,noheader \
  | tee "$OUT/gpu.txt"
LT=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 /usr/local/cuda/lib64/libcublasLt.so 2>/dev/null | head -1)
if [ -z "$LT" ]; then
  LT=$(python3 -c "import glob, site; print(sorted(glob.glob(site.getsitepackages()[0] + '/nvidia/**/libcublasLt.so*', recursive=True))[0])")
fi
export LD_LIBRARY_PATH=$(dirname "$LT")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

loads() { python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$1" 2>/dev/null; }

build_lib() {
  if [ -n "${LIB:-}" ] && loads "$LIB"; then return 0; fi
  local dir="$OUT/lib" t0
  t0=$(date +%s)
  mkdir -p "$dir"
  ls kernels/cuda/*.cu $HERE/*_bench_entry.cu | xargs -P "$(nproc)" -I{} sh -c \
    'nvcc -O3 -std=c++17 -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -gencode=arch=compute_90a,code=sm_90a \
     -DDML_CUDA_LIBRARY_ARCHS="\"sm_90a\"" -Ikernels/cuda -Ikernels/common -Iinclude -c {} -o '"$dir"'/$(basename {}).o' \
    2>&1 | grep -v "^$" | tail -20
  nvcc -shared -o "$dir/libdinoml_bench.so" "$dir"/*.o "$LT" 2>&1 | tail -5
  LIB="$dir/libdinoml_bench.so"
  loads "$LIB" || { echo "harness library did not build"; exit 1; }
  echo "harness library built in $(( $(date +%s) - t0 )) s: $LIB"
}

quiet_tail() { grep -v "^\s*$" "$1" | grep -v "^\[time\]\|^\[chain\]\|^\[check" | tail -n "$2"; }

run_suite() {
  local s=$1; shift
  echo "=== $s"
  case $s in
    lib) build_lib ;;
    gemv)
      build_lib
      timeout ${TIMEOUT:-420} python3 $HERE/gemv_bench.py "$LIB" --out "$OUT/gemv" "$@" 2>&1 | tee "$OUT/gemv.log" ;;
    skinny)
      build_lib
      local vars=${VARS:-51,54,59,67,69,78,91,96,99,103,104,105,106} r
      for r in $(seq ${ROUNDS:-2}); do
        echo "--- round $r: acceptance rows"
        timeout 240 python3 $HERE/skinny_packed_bench.py "$LIB" --out "$OUT/skinny_rows_r$r" --packed "$vars" --base 18 \
          --no-checks "$@" > "$OUT/skinny_rows_r$r.log" 2>&1
        quiet_tail "$OUT/skinny_rows_r$r.log" 24
      done
      echo "--- M sweep"
      timeout 300 python3 $HERE/skinny_packed_bench.py "$LIB" --out "$OUT/skinny_msweep" --packed "$vars" --base 18 \
        --no-checks --rows msweep > "$OUT/skinny_msweep.log" 2>&1
      quiet_tail "$OUT/skinny_msweep.log" 47
      echo "--- chains + checks"
      timeout 300 python3 $HERE/skinny_packed_bench.py "$LIB" --out "$OUT/skinny_chain" --packed "$vars" --base 18 \
        --chain > "$OUT/skinny_chain.log" 2>&1
      quiet_tail "$OUT/skinny_chain.log" 24 ;;
    gemm)
      build_lib
      timeout 120 python3 $HERE/wgmma_lib_check.py "$LIB" 2>&1 | tee "$OUT/gemm_lib_check.log"
      timeout ${TIMEOUT:-200} python3 $HERE/wgmma_bench.py --lib "$LIB" --out "$OUT/gemm" "$@" 2>&1 | tee "$OUT/gemm.log" ;;
    gelu)
      build_lib
      if ! timeout 60 python3 $HERE/gelu_bench.py "$LIB" --smoke --out "$OUT/gelu_smoke" > "$OUT/gelu_smoke.log" 2>&1; then
        tail -20 "$OUT/gelu_smoke.log"; echo "gelu smoke check FAILED"; return 1
      fi
      timeout ${TIMEOUT:-240} python3 $HERE/gelu_bench.py "$LIB" --out "$OUT/gelu" "$@" > "$OUT/gelu.log" 2>&1
      grep FAIL "$OUT/gelu.log" | head -20
      sed -n '/^== checks/,$p' "$OUT/gelu.log" | tail -25 ;;
    attention)
      timeout ${TIMEOUT:-220} python3 $HERE/fa3_bench.py --out "$OUT/attention" "$@" 2>&1 | tee "$OUT/attention.log" ;;
    conv)
      build_lib
      timeout ${TIMEOUT:-300} python3 $HERE/conv_nhwc_bench.py "$LIB" --out "$OUT/conv" "$@" 2>&1 | tee "$OUT/conv.log" ;;
    resnet50)
      local dir=${BUNDLE:?resnet50 needs BUNDLE=DIR (a gpu-check bundle)}
      if [ ! -d "$dir" ]; then
        python3 -c "import tarfile, sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$dir.tar.xz" "$(dirname "$dir")" \
          || return 2
      fi
      LIB=$(ls "$dir"/resnet50_bench_bfloat16/artifact/lib/libdinoml_cuda_kernels.so | head -1) run_suite conv
      echo "--- gpu-check run"
      OUT="$OUT" timeout 240 scripts/gpu-check run "$dir" 2>&1 | tee "$OUT/gpu_check.log" | grep -v "^\[profile\]   " | tail -n 40
      echo "--- A/B of the run-time conv rule"
      timeout 150 python3 $HERE/resnet50_conv_ab.py "$dir" --modes "${AB_MODES:-default,mma,wgmma,wgmma_gemm}" \
        --rounds "${AB_ROUNDS:-1}" --json "$OUT/resnet50_ab.json" 2>&1 | tee "$OUT/resnet50_ab.log" ;;
    *) echo "unknown suite '$s' (run without arguments for the list)"; return 2 ;;
  esac
}

rc=0
last=$(( ${#SUITES[@]} - 1 ))
for i in "${!SUITES[@]}"; do
  if [ "$i" -eq "$last" ]; then run_suite "${SUITES[$i]}" "$@" || rc=1
  else run_suite "${SUITES[$i]}" || rc=1; fi
done
exit $rc
