/* The fragment-packed weight of the CUDA skinny GEMM (kernels/cuda/gemm_skinny.cu, C ABI code
 * DML_CUDA_GEMM_SKINNY_PACKED): b[N, K] as [ceil(N/8)][ceil(K/32)][8][32] two-byte elements, zero
 * padded, so that one warp load of the mma kernel is 512 contiguous bytes. Its element count, shared
 * by the kernel library (dml_cuda_skinny_packed_bytes, the packing kernel) and the CUDA lowering
 * (which reserves the packed copy in the module's init-time buffer). */
#ifndef DINOML_SKINNY_PACK_H
#define DINOML_SKINNY_PACK_H
#include <stdint.h>

static inline int64_t dml_skinny_packed_elems(int64_t N, int64_t K) { return (N + 7) / 8 * 8 * ((K + 31) / 32 * 32); }

#endif
