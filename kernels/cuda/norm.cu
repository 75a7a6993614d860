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

// Mean and 1/sqrt(variance + eps) of n contiguous elements, the whole block cooperating: two
// passes over x (biased variance of the centred values, as the CPU kernels compute it).
template <class T>
__device__ __forceinline__ void block_mean_rstd(const T* __restrict__ x, int64_t n, float eps, float& mean, float& rstd) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += to_f(x[i]);
  mean = block_reduce<false>(s) / (float)n;
  float v = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float c = to_f(x[i]) - mean;
    v += c * c;
  }
  rstd = rsqrtf(block_reduce<false>(v) / (float)n + eps);
}

template <class T>
__global__ void layer_norm_kernel(int64_t cols, const T* __restrict__ x, const T* __restrict__ g,
                                  const T* __restrict__ b, float eps, T* __restrict__ y) {
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  float mean, rstd;
  block_mean_rstd(xr, cols, eps, mean, rstd);
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

// group_norm: one block per (sample, group); the group's channels are one contiguous block of
// channels_per_group * spatial elements, read three times (mean, variance, normalise: two-pass
// variance like the CPU kernel).
template <class T>
__global__ void group_norm_kernel(int64_t C, int64_t S, int64_t G, const T* __restrict__ x, const T* __restrict__ gamma,
                                  const T* __restrict__ beta, float eps, T* __restrict__ y) {
  const int64_t t = blockIdx.x, g = t % G, cpg = C / G, block = cpg * S;
  const T* xb = x + t * block;
  T* yb = y + t * block;
  float mean, rstd;
  block_mean_rstd(xb, block, eps, mean, rstd);
  for (int64_t i = threadIdx.x; i < block; i += blockDim.x) {
    const int64_t ch = g * cpg + i / S;
    const float ga = gamma ? to_f(gamma[ch]) : 1.0f, be = beta ? to_f(beta[ch]) : 0.0f;
    yb[i] = from_f<T>((to_f(xb[i]) - mean) * rstd * ga + be);
  }
}

// ---- rows held in registers -------------------------------------------------------------------
// One block per row; each thread loads NV 16-byte vectors of the row once (8 fp16/bf16 or 4 fp32
// elements each), so the row is read from memory exactly once and written once: the loop kernels
// above re-read it per pass with 2-byte accesses and reach 35-70 % of PyTorch's bandwidth. Needs cols % (16 / sizeof(T)) == 0 and 16-byte aligned
// pointers (reg_plan / aligned16 below).
template <class T>
struct alignas(16) Vec16 {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

template <class T, int NV>
struct RowRegs {
  static constexpr int EV = Vec16<T>::N;
  float v[NV][EV];
  bool ok[NV];
  // Loads the row; returns this thread's sum of its elements.
  __device__ float load(const T* __restrict__ row, int nvec) {
    const Vec16<T>* r = reinterpret_cast<const Vec16<T>*>(row);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int idx = threadIdx.x + k * blockDim.x;
      ok[k] = idx < nvec;
      const Vec16<T> t = ok[k] ? r[idx] : Vec16<T>{};
#pragma unroll
      for (int e = 0; e < EV; ++e) {
        v[k][e] = ok[k] ? to_f(t.v[e]) : 0.0f;
        s += v[k][e];
      }
    }
    return s;
  }
  // y[i] = f(v, i) for every held element, with optional per-column vectors a / b passed to f.
  template <class F>
  __device__ void store(T* __restrict__ row, const T* __restrict__ a, const T* __restrict__ b, F f) {
    Vec16<T>* out = reinterpret_cast<Vec16<T>*>(row);
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (!ok[k]) continue;
      const int idx = threadIdx.x + k * blockDim.x;
      Vec16<T> av{}, bv{};
      if (a) av = reinterpret_cast<const Vec16<T>*>(a)[idx];
      if (b) bv = reinterpret_cast<const Vec16<T>*>(b)[idx];
      Vec16<T> o;
#pragma unroll
      for (int e = 0; e < EV; ++e) o.v[e] = from_f<T>(f(v[k][e], a ? to_f(av.v[e]) : 1.0f, b ? to_f(bv.v[e]) : 0.0f));
      out[idx] = o;
    }
  }
};

template <class T, int NV>
__global__ void layer_norm_reg_kernel(int cols, const T* __restrict__ x, const T* __restrict__ g,
                                      const T* __restrict__ b, float eps, T* __restrict__ y) {
  RowRegs<T, NV> r;
  const int nvec = cols / RowRegs<T, NV>::EV;
  const float mean = block_reduce<false>(r.load(x + (size_t)blockIdx.x * cols, nvec)) / (float)cols;
  float d = 0.0f;  // two-pass variance from the registers: no cancellation of E[x²] - E[x]²
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < RowRegs<T, NV>::EV; ++e) {
      const float t = r.ok[k] ? r.v[k][e] - mean : 0.0f;
      d += t * t;
    }
  const float rstd = rsqrtf(block_reduce<false>(d) / (float)cols + eps);
  r.store(y + (size_t)blockIdx.x * cols, g, b, [=](float v, float gv, float bv) { return (v - mean) * rstd * gv + bv; });
}

template <class T, int NV>
__global__ void rms_norm_reg_kernel(int cols, const T* __restrict__ x, const T* __restrict__ w, float eps,
                                    T* __restrict__ y) {
  RowRegs<T, NV> r;
  const int nvec = cols / RowRegs<T, NV>::EV;
  r.load(x + (size_t)blockIdx.x * cols, nvec);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < RowRegs<T, NV>::EV; ++e) ss += r.v[k][e] * r.v[k][e];
  const float rs = rsqrtf(block_reduce<false>(ss) / (float)cols + eps);
  r.store(y + (size_t)blockIdx.x * cols, w, nullptr, [=](float v, float wv, float) { return v * rs * wv; });
}

template <class T, int NV>
__global__ void softmax_reg_kernel(int cols, int log, const T* __restrict__ x, T* __restrict__ y) {
  RowRegs<T, NV> r;
  const int nvec = cols / RowRegs<T, NV>::EV;
  r.load(x + (size_t)blockIdx.x * cols, nvec);
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < RowRegs<T, NV>::EV; ++e)
      if (r.ok[k]) m = fmaxf(m, r.v[k][e]);
  m = block_reduce<true>(m);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int e = 0; e < RowRegs<T, NV>::EV; ++e)
      if (r.ok[k]) s += expf(r.v[k][e] - m);
  s = block_reduce<false>(s);
  const float ls = logf(s), inv = 1.0f / s;
  r.store(y + (size_t)blockIdx.x * cols, nullptr, nullptr,
          [=](float v, float, float) { return log ? v - m - ls : expf(v - m) * inv; });
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Threads and vectors per thread for a register-held row of `cols`, or threads == 0 where the row
// does not fit the register kernels (ragged cols, short rows that the loop kernels serve, rows
// longer than 8 vectors x 1024 threads).
struct RegPlan {
  int threads = 0, nv = 0;
};
template <class T>
RegPlan reg_plan(int64_t rows, int64_t cols) {
  constexpr int EV = Vec16<T>::N;
  RegPlan p;
  if (cols % EV != 0 || cols < 32 * EV || rows > INT32_MAX) return p;
  const int64_t nvec = cols / EV;
  for (int nv : {1, 2, 4, 8}) {
    const int64_t t = (nvec + nv - 1) / nv;
    if (t <= 256 || (nv == 8 && t <= 1024)) {
      p.nv = nv;
      p.threads = static_cast<int>((t + kWarp - 1) / kWarp * kWarp);
      return p;
    }
  }
  return p;
}

// Launches KERNEL<T, NV> for the plan's NV with (grid rows, plan threads).
#define DML_REG_LAUNCH(KERNEL, T, plan, rows, stream, ...)                                                \
  do {                                                                                                    \
    const dim3 g_(static_cast<unsigned>(rows)), b_(static_cast<unsigned>((plan).threads));              \
    switch ((plan).nv) {                                                                                  \
      case 1: KERNEL<T, 1><<<g_, b_, 0, stream>>>(__VA_ARGS__); break;                                    \
      case 2: KERNEL<T, 2><<<g_, b_, 0, stream>>>(__VA_ARGS__); break;                                    \
      case 4: KERNEL<T, 4><<<g_, b_, 0, stream>>>(__VA_ARGS__); break;                                    \
      default: KERNEL<T, 8><<<g_, b_, 0, stream>>>(__VA_ARGS__); break;                                   \
    }                                                                                                     \
  } while (0)

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
    const RegPlan rp = reg_plan<T>(outer, axis);
    if (inner == 1 && rp.threads && axis > 1024 && aligned16(x) && aligned16(y)) {
      DML_REG_LAUNCH(softmax_reg_kernel, T, rp, outer, s, static_cast<int>(axis), log, xp, yp);
    } else if (inner != 1) {
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
    // Rows too long for one warp's registers: one block per row, the row still held in registers.
    const RegPlan rp = reg_plan<T>(rows, cols);
    if (rp.threads && aligned16(x) && aligned16(y) && (!gamma || aligned16(gamma)) && (!beta || aligned16(beta))) {
      DML_REG_LAUNCH(layer_norm_reg_kernel, T, rp, rows, as_stream(stream), static_cast<int>(cols), static_cast<const T*>(x),
                     static_cast<const T*>(gamma), static_cast<const T*>(beta), eps, static_cast<T*>(y));
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
    const RegPlan rp = reg_plan<T>(rows, cols);
    if (rp.threads && aligned16(x) && aligned16(y) && (!weight || aligned16(weight))) {
      DML_REG_LAUNCH(rms_norm_reg_kernel, T, rp, rows, as_stream(stream), static_cast<int>(cols), static_cast<const T*>(x),
                     static_cast<const T*>(weight), eps, static_cast<T*>(y));
      return check_launch("dml_cuda_rms_norm");
    }
    rms_norm_kernel<T><<<static_cast<unsigned>(rows), row_threads(cols), 0, as_stream(stream)>>>(
        cols, static_cast<const T*>(x), static_cast<const T*>(weight), eps, static_cast<T*>(y));
    return check_launch("dml_cuda_rms_norm");
  });
}

extern "C" int dml_cuda_group_norm(int dtype, int64_t N, int64_t C, int64_t spatial, int64_t num_groups, const void* x,
                                   const void* gamma, const void* beta, float eps, void* y, void* stream) {
  if (num_groups <= 0 || C % num_groups != 0)
    return fail("dml_cuda_group_norm: " + std::to_string(C) + " channels do not split into " + std::to_string(num_groups) +
                " groups");
  const int64_t blocks = N * num_groups;
  if (blocks == 0 || C == 0 || spatial == 0) return 0;
  if (blocks > INT32_MAX) return fail("dml_cuda_group_norm: too many (sample, group) pairs");
  return dispatch_float(dtype, "dml_cuda_group_norm", [&](auto tag) {
    using T = decltype(tag);
    group_norm_kernel<T><<<static_cast<unsigned>(blocks), row_threads(C / num_groups * spatial), 0, as_stream(stream)>>>(
        C, spatial, num_groups, static_cast<const T*>(x), static_cast<const T*>(gamma), static_cast<const T*>(beta), eps,
        static_cast<T*>(y));
    return check_launch("dml_cuda_group_norm");
  });
}
