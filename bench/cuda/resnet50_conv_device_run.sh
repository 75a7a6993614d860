#!/bin/bash
# One device call for the channels-last conv work on a gpu-check bundle made here with
#   DINOML_GPU_ONLY="resnet50_bench conv_nhwc" DINOML_GPU_QUANT=0 scripts/gpu-check prepare DIR
# (1) bench/cuda/conv_nhwc_device_run.sh with the kernel library the artifacts ship: odd-shape and
#     ResNet-50 layer checks of every tile vs torch, per-layer CUDA-graph timings vs cuDNN;
# (2) scripts/gpu-check run DIR: parity of the bundle's cases, ResNet-50 vs eager channels-last and
#     torch.compile in one process, per-kernel tables;
# (3) bench/cuda/resnet50_conv_ab.py: the same artifact under each DML_CUDA_CONV_NHWC_AUTO rule.
#   OUT=... [SKIP_KERNELS=1] [AB_MODES=default,mma] [AB_ROUNDS=2] bench/cuda/resnet50_conv_device_run.sh DIR
set -o pipefail
. "$(dirname "$0")/device_env.sh"
DIR=${1:?bundle dir}
OUT=${OUT:-/tmp/r50_out}
if [ ! -d "$DIR" ]; then
  python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$DIR.tar.xz" "$(dirname "$DIR")" || exit 2
fi
device_setup "$OUT/gpu.txt"
SO=$(ls "$DIR"/resnet50_bench_bfloat16/artifact/lib/libdinoml_cuda_kernels.so | head -1)
if [ -z "${SKIP_KERNELS:-}" ]; then  # SKIP_KERNELS=1: only (2) and (3)
  echo "== (1) kernels: $SO"
  timeout 200 bash bench/cuda/conv_nhwc_device_run.sh "$SO" 2>&1 | tail -n 80
fi
echo "== (2) gpu-check run"
OUT="$OUT" timeout 240 scripts/gpu-check run "$DIR" 2>&1 | tee "$OUT/gpu_check.log" | grep -v "^\[profile\]   " | tail -n 40
echo "== (3) A/B of the run-time rule"
timeout 150 python3 bench/cuda/resnet50_conv_ab.py "$DIR" --modes "${AB_MODES:-default,mma,wgmma,wgmma_gemm}" \
  --rounds "${AB_ROUNDS:-1}" --json "$OUT/ab.json" 2>&1 | tee "$OUT/ab.log"
