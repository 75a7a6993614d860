// Target spec of the GPU source set. The kernel library (kernels/cuda/*.cu) and every generated
// module.cu are written once, in CUDA spelling, and compiled
//   * by nvcc for the CUDA target (DML_GPU_CUDA), and
//   * by hipcc (-x hip, Debian's ROCm 5.2) for the ROCm target (DML_GPU_ROCM).
// This header is the only place where the two differ: it includes the vendor headers, maps the
// CUDA runtime names the sources use (stream/event/error types, copies, memory, devices) to HIP,
// and names the hardware differences:
//   DML_GPU_WARP_SIZE   threads that execute in lock-step: 32 (NVIDIA warp), 64 (CDNA wavefront,
//                       gfx90a) or 32 (RDNA wave32, gfx1030/gfx1100: HIP has no wave64 on GFX10+).
//                       A ROCm library is built for one arch, so the build passes it and the
//                       device pass checks it against the compiler's __AMDGCN_WAVEFRONT_SIZE.
//   dml_lane_mask_t     a ballot result (one bit per lane): 32 or 64 bits.
//   dml_shfl_xor(v, o)  butterfly exchange within the warp/wavefront (full mask).
//   dml_ballot(p)       ballot over the whole warp/wavefront.
//   DML_GPU_HAS_CUBLASLT / DML_GPU_HAS_MMA_SYNC / DML_GPU_VENDOR_BLAS: NVIDIA-only candidates
//                       (cuBLASLt, mma.sync PTX) exist only on CUDA. Debian 12 ships neither
//                       rocBLAS nor hipBLASLt, so ROCm has no vendor BLAS candidate.
// Include it (through common.cuh) instead of <cuda_runtime.h>; new .cu files then build for both.
#pragma once

#include <stdint.h>
#include <stdio.h>

#if defined(__HIP__) || defined(__HIPCC__)
#define DML_GPU_ROCM 1
#define DML_GPU_CUDA 0
#include <hip/hip_bfloat16.h>
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#ifndef DML_GPU_WARP_SIZE
#error "DML_GPU_WARP_SIZE must be set by the build (64 for gfx90a, 32 for gfx1030/gfx1100)"
#endif
#if defined(__HIP_DEVICE_COMPILE__) && defined(__AMDGCN_WAVEFRONT_SIZE) && __AMDGCN_WAVEFRONT_SIZE != DML_GPU_WARP_SIZE
#error "DML_GPU_WARP_SIZE does not match the wavefront size of the arch being compiled"
#endif
#define DML_GPU_HAS_CUBLASLT 0
#define DML_GPU_HAS_MMA_SYNC 0
#define DML_GPU_VENDOR_BLAS "none"
#define DML_GPU_NAME "ROCm"

#if DML_GPU_WARP_SIZE == 64
typedef uint64_t dml_lane_mask_t;
#else
typedef uint32_t dml_lane_mask_t;
#endif
#define dml_shfl_xor(v, o) __shfl_xor((v), (o), DML_GPU_WARP_SIZE)
#define dml_ballot(p) ((dml_lane_mask_t)__ballot(p))
// CUDA's *_sync warp intrinsics (ROCm 5.2 has none): whole-wavefront shuffles; the mask is not
// used (every lane of the wavefront takes part, as in the kernels that call them).
#define __shfl_xor_sync(mask, v, o) __shfl_xor((v), (o), DML_GPU_WARP_SIZE)
#define __shfl_sync(mask, v, l) __shfl((v), (l), DML_GPU_WARP_SIZE)
#define __shfl_down_sync(mask, v, d) __shfl_down((v), (d), DML_GPU_WARP_SIZE)
#define __shfl_up_sync(mask, v, d) __shfl_up((v), (d), DML_GPU_WARP_SIZE)

// CUDA runtime spelling → HIP (only names the GPU sources use; add here, never in a .cu file).
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaGetLastError hipGetLastError
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaStream_t hipStream_t
#define cudaEvent_t hipEvent_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaEventCreate hipEventCreate
#define cudaEventRecord hipEventRecord
#define cudaEventDestroy hipEventDestroy
#define cudaEventSynchronize hipEventSynchronize
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaSetDevice hipSetDevice
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaGetDevice hipGetDevice
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
// hipFuncSetAttribute takes the kernel as const void*.
template <class F>
inline hipError_t dml_hip_func_set_attribute(F* kernel, hipFuncAttribute attr, int value) {
  return hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), attr, value);
}
#define cudaFuncSetAttribute dml_hip_func_set_attribute
#define cudaPointerAttributes hipPointerAttribute_t
#define cudaPointerGetAttributes hipPointerGetAttributes

// bfloat16: ROCm 5.2's hip_bfloat16 (round-to-nearest-even from float, like __float2bfloat16_rn).
typedef hip_bfloat16 __nv_bfloat16;
__host__ __device__ inline float __bfloat162float(hip_bfloat16 v) { return static_cast<float>(v); }
__host__ __device__ inline hip_bfloat16 __float2bfloat16_rn(float v) { return hip_bfloat16(v); }

#else  // CUDA
#define DML_GPU_ROCM 0
#define DML_GPU_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#ifndef DML_GPU_WARP_SIZE
#define DML_GPU_WARP_SIZE 32
#endif
#define DML_GPU_HAS_CUBLASLT 1
#define DML_GPU_HAS_MMA_SYNC 1
#define DML_GPU_VENDOR_BLAS "cublasLt"
#define DML_GPU_NAME "CUDA"

typedef uint32_t dml_lane_mask_t;
#define dml_shfl_xor(v, o) __shfl_xor_sync(0xffffffffu, (v), (o))
#define dml_ballot(p) __ballot_sync(0xffffffffu, (p))
#endif

// Host helpers used by generated modules (both targets).
// Whether p is device (or managed) memory; a host pointer is not an error.
static inline int dml_gpu_pointer_is_device(const void* p) {
  cudaPointerAttributes at;
  if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
#if DML_GPU_ROCM
  return at.memoryType == hipMemoryTypeDevice || at.isManaged;
#else
  return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
#endif
}
// The current device's architecture name: "sm_90" style on CUDA (compute capability), the
// gcnArchName without feature suffixes ("gfx90a") on ROCm. Returns cudaSuccess or the error.
static inline cudaError_t dml_gpu_device_arch(int dev, char* out, size_t n) {
#if DML_GPU_ROCM
  hipDeviceProp_t prop;
  hipError_t e = hipGetDeviceProperties(&prop, dev);
  if (e != hipSuccess) return e;
  size_t i = 0;
  for (; i + 1 < n && prop.gcnArchName[i] && prop.gcnArchName[i] != ':'; ++i) out[i] = prop.gcnArchName[i];
  if (n) out[i] = 0;
  return hipSuccess;
#else
  int major = 0, minor = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e != cudaSuccess) return e;
  snprintf(out, n, "sm_%d%d", major, minor);
  return cudaSuccess;
#endif
}

