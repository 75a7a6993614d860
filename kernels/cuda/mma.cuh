// Tensor-core and async-copy helpers shared by the conv and attention kernels (internal).
// Every PTX block sits behind `#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800` so the same
// sources compile elsewhere (hipcc, host pass); callers only launch these paths on sm_80+.
#pragma once
#include <cstdint>

#include "common.cuh"

namespace dml_cuda {

template <class T> struct IsBf16 { static constexpr bool value = false; };
template <> struct IsBf16<__nv_bfloat16> { static constexpr bool value = true; };

// c[4] += a[4] (16x16 row-major fragment) * b[2] (16x8 col-major fragment), float accumulation.
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float* c, const uint32_t* a, const uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (IsBf16<T>::value) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  (void)c; (void)a; (void)b;
#endif
}

// Four 8x8 b16 matrices from shared memory, transposed (ldmatrix .x4 .trans); lane l gives the
// row address of matrix l/8, row l%8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* smem_row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  (void)r; (void)smem_row;
#endif
}

// Four 8x8 b16 matrices from shared memory (ldmatrix .x4, not transposed).
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem_row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(smem_row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
#else
  (void)r; (void)smem_row;
#endif
}

// 2^x with the hardware approximation (ex2.approx.ftz; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return exp2f(x);
#endif
}

// One online-softmax step for a thread's two accumulator rows (in the mma.sync and wgmma layouts
// the four lanes of a quad share a row): mx holds this key block's per-thread row maxima; they are
// reduced over the quad, the running max mrow and sum lrow are updated, alpha is the factor for the
// output accumulators and msafe the max to subtract before exp2 (0 for a row with nothing
// unmasked yet). `scale` multiplies (max difference, msafe) for scores kept unscaled (1: scaled).
__device__ __forceinline__ void online_softmax_rows(float* mx, float* mrow, float* lrow, float* alpha,
                                                    float* msafe, float scale = 1.0f) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullMask, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(kFullMask, mx[r], 2));
    const float mnew = fmaxf(mrow[r], mx[r]);
    msafe[r] = mnew == -INFINITY ? 0.0f : mnew;
    alpha[r] = fast_exp2((mrow[r] - msafe[r]) * scale);
    mrow[r] = mnew;
    lrow[r] *= alpha[r];
    msafe[r] *= scale;
  }
}

// 16-byte global -> shared copy that bypasses registers; `valid` false writes zeros.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(n));
#else
  (void)smem; (void)gmem; (void)valid;
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group 0;\n" ::);
#endif
}

// Two floats -> one packed 16-bit pair (low half = first).
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
#if DML_GPU_CUDA
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
#else  // ROCm 5.2 has no bfloat16 pair type (never reached there: the mma paths are CUDA-only)
  return static_cast<uint32_t>(__float2bfloat16_rn(lo).data) | (static_cast<uint32_t>(__float2bfloat16_rn(hi).data) << 16);
#endif
}

// Device compute capability major of the current device (cached per call site by the caller).
// On ROCm there is no NVIDIA compute capability: 0, so the sm_80+ (mma.sync) paths are never chosen.
inline int device_cc_major() {
#if DML_GPU_ROCM
  return 0;
#else
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return 0;
  return major;
#endif
}

}  // namespace dml_cuda
