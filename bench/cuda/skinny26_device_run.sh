#!/usr/bin/env bash
# Issue 4 ("M <= 16 at >= 80% of the D2D copy"), session 26's question for the H200: does the skinny kernel
# with its in-K loop steps unguarded (bench/cuda/skinny26_unguarded_steps.patch: no zero fill and no
# ISETP chains per step; rows past M / N read clamped valid rows whose outputs are never stored) close
# the gap to the replica (M = 16: replica 79.4-79.6%, library 51 74.7-75.0%, the replica with the
# library's load guards 77.5-77.8%: bench/cuda/h200_session26_feat_r{1,2}.log)?
# Build the two harness libraries here (sm_90a), A at HEAD, B with the patch applied, as in
# docs/benchmarks.md session 15 "Reproduce" (objects of gemm, gemm_mma, gemm_wgmma*, gemm_skinny, status and
# bench/cuda/gemv_bench_entry.cu linked with libcublasLt), carry gpu-s26, then on the GPU machine:
#   bash bench/cuda/skinny26_device_run.sh gpu-s26/libA.so gpu-s26/libB.so
# (A/B over two rounds of the acceptance rows, then every check with B: parity of M = 1..40, the N / K
# tails, the 7B shapes, every epilogue, both dtypes.)
set -euo pipefail
ROUNDS=${ROUNDS:-2} bash "$(dirname "$0")/skinny23_device_run.sh" "$1 $2" "51,54" "$2"
