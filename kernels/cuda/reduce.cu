// reduce_sum / mean / max / min over any axis set (rank <= 8), accumulated in float.
// Trailing-axes reductions (the contiguous case) use one warp per output; other axis sets one
// thread per output walking the reduced axes by stride.
#include <string>

#include "common.cuh"

namespace dml_cuda {
namespace {

struct ReduceGeom {
  int kr, rr;              // kept / reduced axis counts
  int64_t kshape[8], kstride[8];
  int64_t rshape[8], rstride[8];
};

__device__ __forceinline__ float combine(int op, float a, float b) {
  if (op == DML_CUDA_REDUCE_MAX) return (a != a || a > b) ? a : b;   // NaN propagates
  if (op == DML_CUDA_REDUCE_MIN) return (a != a || a < b) ? a : b;
  return a + b;
}
__device__ __forceinline__ float identity(int op) {
  return op == DML_CUDA_REDUCE_MAX ? -INFINITY : op == DML_CUDA_REDUCE_MIN ? INFINITY : 0.0f;
}

template <class T>
__global__ void reduce_rows_kernel(int op, int64_t rows, int64_t L, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t row = blockIdx.x * (int64_t)(blockDim.x / kWarp) + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  float acc = identity(op);
  for (int64_t i = lane; i < L; i += kWarp) acc = combine(op, acc, to_f(x[row * L + i]));
  for (int o = kWarp / 2; o > 0; o >>= 1) acc = combine(op, acc, dml_shfl_xor(acc, o));
  if (lane == 0) y[row] = from_f<T>(op == DML_CUDA_REDUCE_MEAN ? acc / (float)L : acc);
}

template <class T>
__global__ void reduce_general_kernel(int op, ReduceGeom g, int64_t nout, int64_t nred, const T* __restrict__ x,
                                      T* __restrict__ y) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < nout; o += (int64_t)gridDim.x * blockDim.x) {
    int64_t rem = o, base = 0;
#pragma unroll  // constant indices into the by-value `g` (no local-memory copy)
    for (int a = 7; a >= 0; --a) {
      if (a >= g.kr) continue;
      base += (rem % g.kshape[a]) * g.kstride[a];
      rem /= g.kshape[a];
    }
    float acc = identity(op);
    for (int64_t r = 0; r < nred; ++r) {
      int64_t rr = r, off = base;
#pragma unroll
      for (int a = 7; a >= 0; --a) {
        if (a >= g.rr) continue;
        off += (rr % g.rshape[a]) * g.rstride[a];
        rr /= g.rshape[a];
      }
      acc = combine(op, acc, to_f(x[off]));
    }
    y[o] = from_f<T>(op == DML_CUDA_REDUCE_MEAN ? acc / (float)nred : acc);
  }
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_reduce(int dtype, int op, int rank, const int64_t* xs, uint32_t axis_mask, const void* x, void* y,
                               void* stream) {
  if (rank < 0 || rank > 8) return fail("dml_cuda_reduce: rank " + std::to_string(rank) + " is outside [0, 8]");
  if (op < DML_CUDA_REDUCE_SUM || op > DML_CUDA_REDUCE_MIN) return fail("dml_cuda_reduce: unknown op " + std::to_string(op));
  ReduceGeom g{};
  int64_t st = 1, nout = 1, nred = 1;
  int64_t stride[8];
  for (int a = rank - 1; a >= 0; --a) {
    stride[a] = st;
    st *= xs[a];
  }
  bool trailing = true, seen_kept = false;
  for (int a = rank - 1; a >= 0; --a) {
    const bool red = (axis_mask >> a) & 1u;
    if (!red) seen_kept = true;
    else if (seen_kept) trailing = false;
  }
  for (int a = 0; a < rank; ++a) {
    if ((axis_mask >> a) & 1u) {
      g.rshape[g.rr] = xs[a];
      g.rstride[g.rr++] = stride[a];
      nred *= xs[a];
    } else {
      g.kshape[g.kr] = xs[a];
      g.kstride[g.kr++] = stride[a];
      nout *= xs[a];
    }
  }
  if (nout == 0) return 0;
  if (nred == 0 && (op == DML_CUDA_REDUCE_MAX || op == DML_CUDA_REDUCE_MIN))
    return fail("dml_cuda_reduce: max/min over an empty axis");
  const cudaStream_t s = as_stream(stream);
  return dispatch_float(dtype, "dml_cuda_reduce", [&](auto tag) {
    using T = decltype(tag);
    if (trailing && nred > 0) {
      constexpr int per_block = 256 / kWarp;
      if ((nout + per_block - 1) / per_block > INT32_MAX) return fail("dml_cuda_reduce: too many outputs");
      reduce_rows_kernel<T><<<static_cast<unsigned>((nout + per_block - 1) / per_block), 256, 0, s>>>(op, nout, nred, static_cast<const T*>(x),
                                                                                 static_cast<T*>(y));
    } else {
      reduce_general_kernel<T><<<blocks_for(nout, 128), 128, 0, s>>>(op, g, nout, nred, static_cast<const T*>(x),
                                                                    static_cast<T*>(y));
    }
    return check_launch("dml_cuda_reduce");
  });
}
