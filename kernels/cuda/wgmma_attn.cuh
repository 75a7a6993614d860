// wgmma.mma_async wrappers with A from registers (RS) and B transposed (MN-major in shared memory),
// for the sm_90a flash-attention kernel (attention_wgmma.cu), internal: one warpgroup computes
// d[64xN] += A[64x16]·B[16xN] with A as 4 packed 16-bit pairs per thread (the mma.sync m16n8k16 A
// fragment of each warp's 16 rows), B by descriptor (imm-trans-b = 1), fp32 accumulators, scale-d = 1.
// The SS forms (both operands by descriptor) are wgmma.cuh's. sm_90a device code only.
#pragma once
#include <cstdint>

#include "wgmma.cuh"

#if DML_WGMMA_DEVICE
namespace dml_cuda::wgmma {
// RS, B transposed: A as 4 registers (operands A), then B's descriptor DB and the predicate P.
#define DML_WGMMA_RS_TB(N, T, REGS, A, DB, P, DLIST)                                                       \
  __device__ __forceinline__ void wgmma_rs_m64n##N##k16_##T##_tb(float* d, const uint32_t* a, uint64_t db) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " P ", 0;\n"                                           \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " {" REGS "}, {" A "}, " DB    \
                 ", p, 1, 1, 1;\n}\n"                                                                     \
                 : DLIST                                                                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));                         \
  }
DML_WGMMA_RS_TB(64, bf16, DML_WG_R32, "%32,%33,%34,%35", "%36", "%37", DML_WG_D32(0))
DML_WGMMA_RS_TB(64, f16, DML_WG_R32, "%32,%33,%34,%35", "%36", "%37", DML_WG_D32(0))
DML_WGMMA_RS_TB(128, bf16, DML_WG_R64, "%64,%65,%66,%67", "%68", "%69", DML_WG_D64)
DML_WGMMA_RS_TB(128, f16, DML_WG_R64, "%64,%65,%66,%67", "%68", "%69", DML_WG_D64)
#undef DML_WGMMA_RS_TB

}  // namespace dml_cuda::wgmma
#endif  // DML_WGMMA_DEVICE
