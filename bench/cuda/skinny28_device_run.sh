#!/usr/bin/env bash
# Issue 4 ("M <= 16 at >= 80% of the D2D copy"), session 28, one device call: the harness
# (skinny_packed_bench.py) on the packed kernel's WN variants (75..82) and the shared-memory-a kernel
# (83..90) against 51 / 54 / 59 / 67, ROUNDS rounds, then every check of them.
# Build the harness library here for sm_90a (docs/benchmarks.md session 15 "Reproduce": the objects of
# gemm, gemm_mma, gemm_wgmma, gemm_wgmma_pp, gemm_wgmma_epi, gemm_skinny, status and
# bench/cuda/gemv_bench_entry.cu linked with libcublasLt into gpu-s27/libs27.so), carry gpu-s27, then:
#   bash bench/cuda/skinny28_device_run.sh [LIB]
set -o pipefail
LIB=${1:-gpu-s27/libs27.so}
VARS=${VARS:-51,54,59,67,75,76,77,78,79,80,81,82,83,84,85,86,87,88,89,90}
OUT=${OUT:-/tmp/skinny28_out} TAILN=${TAILN:-0} bash "$(dirname "$0")/skinny23_device_run.sh" "$LIB" "$VARS" "$LIB"
