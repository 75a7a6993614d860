// softmax / log_softmax, layer_norm and rms_norm. Statistics in float; inputs are re-read from
// global memory per pass (rows are short enough to stay in L1/L2), except layer_norm's
// register-resident warp-per-row kernel for rows of at most 32·8 16-byte vectors.
#include "common.cuh"

namespace dml_cuda {
namespace {

// Softmax over contiguous rows (inner == 1): one warp (wavefront) per row.
template <class T>
__global__ void softmax_warp_kernel(int64_t rows, int64_t L, int log, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const T* xr = x + row * L;
  T* yr = y + row * L;
  float m = -INFINITY;
  for (int64_t i = lane; i < L; i += kWarp) m = fmaxf(m, to_f(xr[i]));
  m = warp_max(m);
  float s = 0.0f;
  for (int64_t i = lane; i < L; i += kWarp) s += expf(to_f(xr[i]) - m);
  s = warp_sum(s);
  if (log) {
    const float ls = logf(s);
    for (int64_t i = lane; i < L; i += kWarp) yr[i] = from_f<T>(to_f(xr[i]) - m - ls);
  } else {
    const float inv = 1.0f / s;
    for (int64_t i = lane; i < L; i += kWarp) yr[i] = from_f<T>(expf(to_f(xr[i]) - m) * inv);
  }
}

// Long contiguous rows: one block per row.
template <class T>
__global__ void softmax_block_kernel(int64_t L, int log, const T* __restrict__ x, T* __restrict__ y) {
  const T* xr = x + blockIdx.x * L;
  T* yr = y + blockIdx.x * L;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) m = fmaxf(m, to_f(xr[i]));
  m = block_reduce<true>(m);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) s += expf(to_f(xr[i]) - m);
  s = block_reduce<false>(s);
  const float ls = logf(s), inv = 1.0f / s;
  for (int64_t i = threadIdx.x; i < L; i += blockDim.x) {
    const float v = to_f(xr[i]) - m;
    yr[i] = from_f<T>(log ? v - ls : expf(v) * inv);
  }
}

// Strided rows (inner > 1): one thread per (outer, inner) column.
template <class T>
__global__ void softmax_strided_kernel(int64_t outer, int64_t L, int64_t inner, int log, const T* __restrict__ x,
                                       T* __restrict__ y) {
  const int64_t n = outer * inner;
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < n; c += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = c / inner, in = c % inner;
    const T* xr = x + o * L * inner + in;
    T* yr = y + o * L * inner + in;
    float m = -INFINITY;
    for (int64_t i = 0; i < L; ++i) m = fmaxf(m, to_f(xr[i * inner]));
    float s = 0.0f;
    for (int64_t i = 0; i < L; ++i) s += expf(to_f(xr[i * inner]) - m);
    const float ls = logf(s), inv = 1.0f / s;
    for (int64_t i = 0; i < L; ++i) {
      const float v = to_f(xr[i * inner]) - m;
      yr[i * inner] = from_f<T>(log ? v - ls : expf(v) * inv);
    }
  }
}

template <class T>
__global__ void layer_norm_kernel(int64_t cols, const T* __restrict__ x, const T* __restrict__ g,
                                  const T* __restrict__ b, float eps, T* __restrict__ y) {
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) s += to_f(xr[i]);
  const float mean = block_reduce<false>(s) / (float)cols;
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float t = to_f(xr[i]) - mean;
    v += t * t;
  }
  const float rstd = rsqrtf(block_reduce<false>(v) / (float)cols + eps);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float t = (to_f(xr[i]) - mean) * rstd;
    if (g) t *= to_f(g[i]);
    if (b) t += to_f(b[i]);
    yr[i] = from_f<T>(t);
  }
}

// layer_norm for rows of at most kWarp·V 16-byte vectors (E = 16 / sizeof(T) elements each; cols a
// multiple of E, every pointer 16-byte aligned): one warp per row, the row read once into
// registers (two-pass statistics on the registers: the same float math as the block kernel, up to
// summation order), gamma/beta and the result moved as 16-byte vectors. The block kernel above
// reads x three times with 2-byte loads (bf16 [8192, 1024] on the H200: 34 us per call).
constexpr int kLnRowsPerBlock = 8;
template <class T, int V>
__global__ void layer_norm_warp_kernel(int64_t rows, int cols, const T* __restrict__ x, const T* __restrict__ g,
                                       const T* __restrict__ b, float eps, T* __restrict__ y) {
  constexpr int E = 16 / sizeof(T);
  const int64_t row = blockIdx.x * (int64_t)kLnRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int nv = cols / E;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
  float v[V][E];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int j = lane + k * kWarp;
    if (j < nv) {
      const uint4 u = xr[j];
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int i = 0; i < E; ++i) {
        v[k][i] = to_f(e[i]);
        s += v[k][i];
      }
    }
  }
  const float mean = warp_sum(s) / (float)cols;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (lane + k * kWarp < nv) {
#pragma unroll
      for (int i = 0; i < E; ++i) {
        const float t = v[k][i] - mean;
        q += t * t;
      }
    }
  const float rstd = rsqrtf(warp_sum(q) / (float)cols + eps);
  uint4* yr = reinterpret_cast<uint4*>(y + row * cols);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const int j = lane + k * kWarp;
    if (j >= nv) continue;
    uint4 gu{}, bu{}, o;
    if (g) gu = reinterpret_cast<const uint4*>(g)[j];
    if (b) bu = reinterpret_cast<const uint4*>(b)[j];
    const T* ge = reinterpret_cast<const T*>(&gu);
    const T* be = reinterpret_cast<const T*>(&bu);
    T* oe = reinterpret_cast<T*>(&o);
#pragma unroll
    for (int i = 0; i < E; ++i) {
      float t = (v[k][i] - mean) * rstd;
      if (g) t *= to_f(ge[i]);
      if (b) t += to_f(be[i]);
      oe[i] = from_f<T>(t);
    }
    yr[j] = o;
  }
}

// The warp kernel's V for `cols` (0: does not fit, or cols is not a whole number of vectors).
template <class T>
int layer_norm_vectors(int64_t cols) {
  constexpr int E = 16 / sizeof(T);
  if (cols % E != 0) return 0;
  const int64_t nv = cols / E;
  for (int v = 1; v <= 8; v *= 2)
    if (nv <= (int64_t)v * kWarp) return v;
  return 0;
}

template <class T>
__global__ void rms_norm_kernel(int64_t cols, const T* __restrict__ x, const T* __restrict__ w, float eps,
                                T* __restrict__ y) {
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    const float t = to_f(xr[i]);
    s += t * t;
  }
  const float r = rsqrtf(block_reduce<false>(s) / (float)cols + eps);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float t = to_f(xr[i]) * r;
    if (w) t *= to_f(w[i]);
    yr[i] = from_f<T>(t);
  }
}

int row_threads(int64_t cols) {
  int t = kWarp;
  while (t < 1024 && t * 4 < cols) t *= 2;
  return t;
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_softmax(int dtype, int64_t outer, int64_t axis, int64_t inner, int log, const void* x, void* y,
                                void* stream) {
  const cudaStream_t s = as_stream(stream);
  if (outer * axis * inner == 0) return 0;
  return dispatch_float(dtype, "dml_cuda_softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (inner != 1) {
      softmax_strided_kernel<T><<<blocks_for(outer * inner, 128), 128, 0, s>>>(outer, axis, inner, log, xp, yp);
    } else if (axis <= 1024) {
      const int64_t rows = outer;
      constexpr int per_block = 256 / kWarp;
      if ((rows + per_block - 1) / per_block > INT32_MAX) return fail("dml_cuda_softmax: too many rows");
      softmax_warp_kernel<T><<<static_cast<unsigned>((rows + per_block - 1) / per_block), 256, 0, s>>>(rows, axis, log, xp, yp);
    } else {
      if (outer > INT32_MAX) return fail("dml_cuda_softmax: too many rows");
      softmax_block_kernel<T><<<static_cast<unsigned>(outer), 512, 0, s>>>(axis, log, xp, yp);
    }
    return check_launch("dml_cuda_softmax");
  });
}

extern "C" int dml_cuda_layer_norm(int dtype, int64_t rows, int64_t cols, const void* x, const void* gamma,
                                   const void* beta, float eps, void* y, void* stream) {
  if (rows == 0 || cols == 0) return 0;
  if (rows > INT32_MAX) return fail("dml_cuda_layer_norm: too many rows");
  return dispatch_float(dtype, "dml_cuda_layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const int v = layer_norm_vectors<T>(cols);
    const bool aligned = ((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(gamma) |
                           reinterpret_cast<uintptr_t>(beta) | reinterpret_cast<uintptr_t>(y)) % 16) == 0;
    if (v != 0 && aligned) {
      const unsigned blocks = static_cast<unsigned>((rows + kLnRowsPerBlock - 1) / kLnRowsPerBlock);
      const int threads = kLnRowsPerBlock * kWarp;
      const T* xp = static_cast<const T*>(x);
      const T* gp = static_cast<const T*>(gamma);
      const T* bp = static_cast<const T*>(beta);
      T* yp = static_cast<T*>(y);
      const int c = static_cast<int>(cols);
      cudaStream_t s = as_stream(stream);
      switch (v) {
        case 1: layer_norm_warp_kernel<T, 1><<<blocks, threads, 0, s>>>(rows, c, xp, gp, bp, eps, yp); break;
        case 2: layer_norm_warp_kernel<T, 2><<<blocks, threads, 0, s>>>(rows, c, xp, gp, bp, eps, yp); break;
        case 4: layer_norm_warp_kernel<T, 4><<<blocks, threads, 0, s>>>(rows, c, xp, gp, bp, eps, yp); break;
        default: layer_norm_warp_kernel<T, 8><<<blocks, threads, 0, s>>>(rows, c, xp, gp, bp, eps, yp); break;
      }
      return check_launch("dml_cuda_layer_norm");
    }
    layer_norm_kernel<T><<<static_cast<unsigned>(rows), row_threads(cols), 0, as_stream(stream)>>>(
        cols, static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta), eps, static_cast<T*>(y));
    return check_launch("dml_cuda_layer_norm");
  });
}

extern "C" int dml_cuda_rms_norm(int dtype, int64_t rows, int64_t cols, const void* x, const void* weight, float eps,
                                 void* y, void* stream) {
  if (rows == 0 || cols == 0) return 0;
  if (rows > INT32_MAX) return fail("dml_cuda_rms_norm: too many rows");
  return dispatch_float(dtype, "dml_cuda_rms_norm", [&](auto tag) {
    using T = decltype(tag);
    rms_norm_kernel<T><<<static_cast<unsigned>(rows), row_threads(cols), 0, as_stream(stream)>>>(
        cols, static_cast<const T*>(x), static_cast<const T*>(weight), eps, static_cast<T*>(y));
    return check_launch("dml_cuda_rms_norm");
  });
}
