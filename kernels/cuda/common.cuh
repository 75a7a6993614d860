// Shared helpers of libdinoml_cuda_kernels: error reporting, dtype load/store in float, launch
// checks. Internal to the library (not installed).
#pragma once
#include <cstdint>
#include <string>

#include "dinoml_cuda_kernels.h"
#include "gpu_target.h"

namespace dml_cuda {

// Threads of one warp (CUDA) / wavefront (ROCm): kernels size rows-per-warp and reductions by it.
constexpr int kWarp = DML_GPU_WARP_SIZE;
// The full-warp lane mask of CUDA's *_sync intrinsics; on ROCm gpu_target.h maps those to HIP's
// whole-wavefront shuffles and the mask is not used.
constexpr unsigned kFullMask = 0xffffffffu;

// Sets the thread-local message and returns a non-zero status.
int fail(const std::string& msg);
// Turns a CUDA error (of the call or of the last launch) into a status + message naming `what`.
int check(cudaError_t e, const char* what);
inline int check_launch(const char* what) { return check(cudaGetLastError(), what); }

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// Device scratch that lives on after the call (workspace.cu): grow-only, one buffer per slot, device
// and stream; a pointer handed out stays valid for the life of the process.
enum class WorkspaceSlot { qgemm_dequant = 0, sdpa_split = 1 };
int stream_workspace(WorkspaceSlot slot, cudaStream_t s, size_t bytes, void** out);

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// Calls f.template operator()<T>() for the float dtype code; returns an error for others.
template <class F>
int dispatch_float(int dtype, const char* what, F&& f) {
  switch (dtype) {
    case 0: return f(float{});
    case 1: return f(__half{});
    case 2: return f(__nv_bfloat16{});
    default: return fail(std::string(what) + ": dtype code " + std::to_string(dtype) + " is not float32/float16/bfloat16");
  }
}

inline unsigned blocks_for(int64_t n, int threads, int64_t cap = 65535LL * 16) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > cap ? cap : b);
}

// Warp/wavefront-wide and block-wide sum / max of one float per thread (blockDim.x a multiple of
// kWarp, <= 1024).
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v += dml_shfl_xor(v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, dml_shfl_xor(v, o));
  return v;
}
template <bool Max>
__device__ float block_reduce(float v) {
  static_assert(1024 / kWarp <= kWarp, "one warp must hold the partial results of a 1024-thread block");
  __shared__ float sh[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, nw = (blockDim.x + kWarp - 1) / kWarp;
  v = Max ? warp_max(v) : warp_sum(v);
  __syncthreads();  // sh may still be read by a previous call
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  v = lane < nw ? sh[lane] : (Max ? -INFINITY : 0.0f);
  if (warp == 0) v = Max ? warp_max(v) : warp_sum(v);
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  return sh[0];
}

}  // namespace dml_cuda
