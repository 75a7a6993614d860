// mbarrier and shared-address helpers for the sm_90 kernels that wait on asynchronous copies
// (TMA / cp.async.bulk complete_tx): the sm_90a GEMM, conv and attention through wgmma.cuh, and the
// skinny GEMM's bulk-copy ring (gemm_skinny.cu, plain sm_90). Internal; device code for
// compute 9.0+ only (DML_MBARRIER_DEVICE).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DML_MBARRIER_DEVICE 1
#else
#define DML_MBARRIER_DEVICE 0
#endif

#if DML_MBARRIER_DEVICE
namespace dml_cuda::mbar {

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

}  // namespace dml_cuda::mbar
#endif  // DML_MBARRIER_DEVICE
