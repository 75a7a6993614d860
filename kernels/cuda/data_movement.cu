// permute / slice / expand as one strided gather (thread per output element, rank <= 8), and
// concat / split as 2-D device copies (one cudaMemcpy2DAsync per part).
#include <string>
#include <vector>

#include "common.cuh"

namespace dml_cuda {
namespace {

struct Strided {
  int rank;
  int64_t shape[8];    // output extents
  int64_t stride[8];   // input element stride per output axis
};

template <class E>
__global__ void gather_kernel(Strided g, int64_t n, const E* __restrict__ x, E* __restrict__ y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rem = i, off = 0;
    for (int a = g.rank - 1; a >= 0; --a) {
      const int64_t q = rem % g.shape[a];
      rem /= g.shape[a];
      off += q * g.stride[a];
    }
    y[i] = x[off];
  }
}

int strided_gather(size_t esize, const Strided& g, const void* x, void* y, cudaStream_t s, const char* what) {
  int64_t n = 1;
  for (int a = 0; a < g.rank; ++a) n *= g.shape[a];
  if (n == 0) return 0;
  const unsigned blocks = blocks_for(n, 256);
  switch (esize) {
    case 1: gather_kernel<uint8_t><<<blocks, 256, 0, s>>>(g, n, (const uint8_t*)x, (uint8_t*)y); break;
    case 2: gather_kernel<uint16_t><<<blocks, 256, 0, s>>>(g, n, (const uint16_t*)x, (uint16_t*)y); break;
    case 4: gather_kernel<uint32_t><<<blocks, 256, 0, s>>>(g, n, (const uint32_t*)x, (uint32_t*)y); break;
    case 8: gather_kernel<uint64_t><<<blocks, 256, 0, s>>>(g, n, (const uint64_t*)x, (uint64_t*)y); break;
    default: return fail(std::string(what) + ": element size " + std::to_string(esize) + " is not 1, 2, 4 or 8");
  }
  return check_launch(what);
}

void contiguous_strides(int rank, const int64_t* shape, int64_t* st) {
  int64_t s = 1;
  for (int a = rank - 1; a >= 0; --a) {
    st[a] = s;
    s *= shape[a];
  }
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_permute(size_t esize, int rank, const int64_t* xs, const int32_t* perm, const void* x, void* y,
                                void* stream) {
  if (rank < 0 || rank > 8) return fail("dml_cuda_permute: rank " + std::to_string(rank) + " is outside [0, 8]");
  int64_t st[8];
  contiguous_strides(rank, xs, st);
  Strided g{rank, {}, {}};
  unsigned seen = 0;
  for (int a = 0; a < rank; ++a) {
    if (perm[a] < 0 || perm[a] >= rank || (seen >> perm[a]) & 1u) return fail("dml_cuda_permute: perm is not a permutation");
    seen |= 1u << perm[a];
    g.shape[a] = xs[perm[a]];
    g.stride[a] = st[perm[a]];
  }
  if (rank == 0) return dml_cuda_copy(y, x, esize, stream);
  return strided_gather(esize, g, x, y, as_stream(stream), "dml_cuda_permute");
}

extern "C" int dml_cuda_slice(size_t esize, int rank, const int64_t* xs, const int64_t* starts, const int64_t* ends,
                              const int64_t* steps, const int64_t* ys, const void* x, void* y, void* stream) {
  if (rank < 1 || rank > 8) return fail("dml_cuda_slice: rank " + std::to_string(rank) + " is outside [1, 8]");
  int64_t st[8];
  contiguous_strides(rank, xs, st);
  Strided g{rank, {}, {}};
  int64_t offset = 0;
  for (int i = 0; i < rank; ++i) {
    const int64_t n = xs[i], step = steps[i];
    if (step <= 0) return fail("dml_cuda_slice: axis " + std::to_string(i) + " has step " + std::to_string(step) + " (must be positive)");
    int64_t s = starts[i] < 0 ? starts[i] + n : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + n : ends[i];
    s = s < 0 ? 0 : (s > n ? n : s);
    e = e < 0 ? 0 : (e > n ? n : e);
    const int64_t count = e > s ? (e - s + step - 1) / step : 0;
    if (count != ys[i])
      return fail("dml_cuda_slice: axis " + std::to_string(i) + " yields " + std::to_string(count) +
                  " elements but the output has " + std::to_string(ys[i]));
    offset += s * st[i];
    g.shape[i] = count;
    g.stride[i] = step * st[i];
  }
  return strided_gather(esize, g, static_cast<const char*>(x) + offset * (int64_t)esize, y, as_stream(stream),
                        "dml_cuda_slice");
}

extern "C" int dml_cuda_expand(size_t esize, int rank, const int64_t* xs, const int64_t* ys, const void* x, void* y,
                               void* stream) {
  if (rank < 1 || rank > 8) return fail("dml_cuda_expand: rank " + std::to_string(rank) + " is outside [1, 8]");
  int64_t st[8];
  contiguous_strides(rank, xs, st);
  Strided g{rank, {}, {}};
  for (int i = 0; i < rank; ++i) {
    if (xs[i] != ys[i] && xs[i] != 1)
      return fail("dml_cuda_expand: axis " + std::to_string(i) + " of extent " + std::to_string(xs[i]) +
                  " cannot broadcast to " + std::to_string(ys[i]));
    g.shape[i] = ys[i];
    g.stride[i] = xs[i] == 1 ? 0 : st[i];
  }
  return strided_gather(esize, g, x, y, as_stream(stream), "dml_cuda_expand");
}

extern "C" int dml_cuda_concat(size_t esize, int n, const void* const* parts, const int64_t* sizes, int64_t outer,
                               int64_t inner, void* y, void* stream) {
  int64_t total = 0;
  for (int p = 0; p < n; ++p) total += sizes[p];
  const size_t dpitch = static_cast<size_t>(total * inner) * esize;
  size_t off = 0;
  for (int p = 0; p < n; ++p) {
    const size_t w = static_cast<size_t>(sizes[p] * inner) * esize;
    if (w && outer)
      if (int rc = check(cudaMemcpy2DAsync(static_cast<char*>(y) + off, dpitch, parts[p], w, w, static_cast<size_t>(outer),
                                           cudaMemcpyDeviceToDevice, as_stream(stream)),
                         "dml_cuda_concat: cudaMemcpy2DAsync"))
        return rc;
    off += w;
  }
  return 0;
}

extern "C" int dml_cuda_split(size_t esize, int n, void* const* parts, const int64_t* sizes, int64_t outer, int64_t inner,
                              const void* x, void* stream) {
  int64_t total = 0;
  for (int p = 0; p < n; ++p) total += sizes[p];
  const size_t spitch = static_cast<size_t>(total * inner) * esize;
  size_t off = 0;
  for (int p = 0; p < n; ++p) {
    const size_t w = static_cast<size_t>(sizes[p] * inner) * esize;
    if (w && outer)
      if (int rc = check(cudaMemcpy2DAsync(parts[p], w, static_cast<const char*>(x) + off, spitch, w, static_cast<size_t>(outer),
                                           cudaMemcpyDeviceToDevice, as_stream(stream)),
                         "dml_cuda_split: cudaMemcpy2DAsync"))
        return rc;
    off += w;
  }
  return 0;
}

extern "C" int dml_cuda_copy(void* dst, const void* src, size_t bytes, void* stream) {
  if (!bytes || dst == src) return 0;
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)), "dml_cuda_copy");
}
