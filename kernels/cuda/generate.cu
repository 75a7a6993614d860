// Generator ops: fill (`full`) and arange, for every DinoML dtype. Values are computed in double
// per element (start + i * step) and converted once, like the CPU kernels (dml_cpu_fill/arange).
#include "common.cuh"

namespace dml_cuda {
namespace {

template <class T> __device__ __forceinline__ T from_d(double v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_d<__half>(double v) { return __float2half_rn(static_cast<float>(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}
template <> __device__ __forceinline__ bool from_d<bool>(double v) { return v != 0.0; }

template <class T>
__global__ void generate_kernel(double start, double step, int64_t n, T* __restrict__ y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = from_d<T>(start + static_cast<double>(i) * step);
}

template <class T>
int launch(double start, double step, int64_t n, void* y, void* stream, const char* what) {
  if (n <= 0) return 0;
  generate_kernel<T><<<blocks_for(n, 256), 256, 0, as_stream(stream)>>>(start, step, n, static_cast<T*>(y));
  return check_launch(what);
}

int generate(int dtype, double start, double step, int64_t n, void* y, void* stream, const char* what) {
  if (n < 0) return fail(std::string(what) + ": negative element count");
  if (n > 0 && !y) return fail(std::string(what) + ": y is NULL");
  switch (dtype) {  // dinoml_dtype codes
    case 0: return launch<float>(start, step, n, y, stream, what);
    case 1: return launch<__half>(start, step, n, y, stream, what);
    case 2: return launch<__nv_bfloat16>(start, step, n, y, stream, what);
    case 3: return launch<int8_t>(start, step, n, y, stream, what);
    case 4: return launch<uint8_t>(start, step, n, y, stream, what);
    case 5: return launch<int32_t>(start, step, n, y, stream, what);
    case 6: return launch<int64_t>(start, step, n, y, stream, what);
    case 7: return launch<bool>(start, step, n, y, stream, what);
    default: return fail(std::string(what) + ": unknown dtype code " + std::to_string(dtype));
  }
}

}  // namespace
}  // namespace dml_cuda

extern "C" int dml_cuda_fill(int dtype, double value, int64_t n, void* y, void* stream) {
  return dml_cuda::generate(dtype, value, 0.0, n, y, stream, "dml_cuda_fill");
}

extern "C" int dml_cuda_arange(int dtype, double start, double step, int64_t n, void* y, void* stream) {
  return dml_cuda::generate(dtype, start, step, n, y, stream, "dml_cuda_arange");
}
