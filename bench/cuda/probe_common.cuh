// What the standalone CUDA probes (bench/cuda/read_floor.cu, bench/cuda/skinny_timeline.cu) share:
// error checks, the streaming load and programmatic-dependent-launch controls of the skinny GEMM,
// the D2D-copy yardstick and the harness's graph timing. No PyTorch, no DinoML library.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// 16 bytes of a weight read once: non-coherent, no L1 allocation (gemm_skinny.cu's ld_stream).
__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
__device__ __forceinline__ void dep_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void dep_launch() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }

// The yardstick, as gemv_bench.py's d2d_copy: a 1 GiB device-to-device copy, 3 warm + 20 timed eager
// copies, (read + write) bytes per second.
inline double d2d_copy_bw(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  const size_t n = size_t(1) << 30;
  void *src, *dst;
  CK(cudaMalloc(&src, n));
  CK(cudaMalloc(&dst, n));
  CK(cudaMemset(src, 1, n));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(e0, s));
  for (int i = 0; i < 20; ++i) CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
  CK(cudaEventRecord(e1, s));
  CK(cudaEventSynchronize(e1));
  float ms;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaFree(src));
  CK(cudaFree(dst));
  return 2.0 * n / (ms / 20 * 1e-3);
}

// µs per call of the `calls` launches `issue()` makes, captured in one CUDA graph, as the GEMM
// harness times them: one warm replay, then the median of 7 replays between two events.
template <class F>
double graph_median_us(cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1, int calls, F issue) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  issue();
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  std::vector<float> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(e0, s));
    CK(cudaGraphLaunch(ge, s));
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms / calls);
  }
  std::sort(t.begin(), t.end());
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return t[3] * 1e3;
}

// cudaLaunchKernelEx's configuration, with programmatic dependent launch (stream serialization
// relaxed: the kernel may start while the previous one finishes) when `pdl`; `at` holds the attribute.
inline cudaLaunchConfig_t launch_config(dim3 grid, int threads, size_t smem, cudaStream_t s, bool pdl, cudaLaunchAttribute (&at)[1]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

// Device 0, a non-blocking stream, two events and the D2D yardstick, with the GPU and the copy's
// bandwidth printed.
struct ProbeEnv {
  cudaDeviceProp prop;
  cudaStream_t s;
  cudaEvent_t e0, e1;
  double copy_bw;
};
inline ProbeEnv probe_start() {
  ProbeEnv env;
  CK(cudaSetDevice(0));
  CK(cudaGetDeviceProperties(&env.prop, 0));
  std::printf("[env] %s, %d SMs, L2 %d MB\n", env.prop.name, env.prop.multiProcessorCount, env.prop.l2CacheSize >> 20);
  CK(cudaStreamCreateWithFlags(&env.s, cudaStreamNonBlocking));
  CK(cudaEventCreate(&env.e0));
  CK(cudaEventCreate(&env.e1));
  env.copy_bw = d2d_copy_bw(env.s, env.e0, env.e1);
  std::printf("[copy] D2D 1 GiB: %.0f GB/s (read + write)\n", env.copy_bw / 1e9);
  return env;
}
