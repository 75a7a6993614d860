// permute / slice / expand as one strided gather (thread per output element, rank <= 8; a permute
// that is a batched 2-D transpose, e.g. NCHW <-> NHWC, goes through 32x32 shared-memory tiles),
// concat / split as 2-D device copies (one cudaMemcpy2DAsync per part), and pad (thread per output
// element, the source index per axis from dinoml/pad_index.h as on the CPU).
#include <cstring>
#include <string>
#include <vector>

#include "common.cuh"
#include "dinoml/pad_index.h"

namespace dml_cuda {
namespace {

struct Strided {
  int rank;
  int64_t shape[8];    // output extents
  int64_t stride[8];   // input element stride per output axis
};

// I: the index type. 32-bit whenever every index and offset fits (64-bit division is slow).
template <class E, class I>
__global__ void gather_kernel(Strided g, I n, const E* __restrict__ x, E* __restrict__ y) {
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < n; i += (I)gridDim.x * blockDim.x) {
    I rem = i, off = 0;
    // Unrolled over all 8 slots: constant indices keep `g` in parameter space (a run-time index
    // would copy it to local memory in every thread).
#pragma unroll
    for (int a = 7; a >= 0; --a) {
      if (a >= g.rank) continue;
      const I ext = (I)g.shape[a];
      const I q = rem % ext;
      rem /= ext;
      off += q * (I)g.stride[a];
    }
    y[i] = x[off];
  }
}

// The 32-bit path with the divisions by the extents done as a multiply-high and a shift
// (Granlund-Montgomery: q = (umulhi(n, mul) + n) >> shift with shift = ceil(log2 d) and
// mul = floor(2^32 (2^shift - d) / d) + 1, exact for n, d < 2^31, which that path guarantees).
// A hardware-less 32-bit division is ~20 instructions: with five of them per 16-byte element the
// gather above is instruction-bound (GPT-2's [8,1024,3,16,64] -> [3,8,16,1024,64] head permute
// moved 3.3 TB/s on the H200 against a 4.3 TB/s copy).
struct Divisors32 {
  uint32_t ext[8], mul[8], shift[8], stride[8];
};

Divisors32 make_divisors(const Strided& g) {
  Divisors32 d{};
  for (int a = 0; a < g.rank; ++a) {
    const uint32_t e = static_cast<uint32_t>(g.shape[a]);
    uint32_t sh = 0;
    while ((uint64_t{1} << sh) < e) ++sh;
    d.ext[a] = e;
    d.shift[a] = sh;
    d.mul[a] = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << sh) - e)) / e + 1);
    d.stride[a] = static_cast<uint32_t>(g.stride[a]);
  }
  return d;
}

template <class E>
__global__ void gather32_kernel(Divisors32 dv, int rank, uint32_t n, const E* __restrict__ x, E* __restrict__ y) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t rem = i, off = 0;
#pragma unroll
    for (int a = 7; a >= 0; --a) {  // constant indices: dv stays in parameter space (see gather_kernel)
      if (a >= rank) continue;
      const uint32_t q = (__umulhi(rem, dv.mul[a]) + rem) >> dv.shift[a];
      off += (rem - q * dv.ext[a]) * dv.stride[a];
      rem = q;
    }
    y[i] = x[off];
  }
}

int strided_gather(size_t esize, const Strided& g, const void* x, void* y, cudaStream_t s, const char* what) {
  int64_t n = 1;
  for (int a = 0; a < g.rank; ++a) n *= g.shape[a];
  if (n == 0) return 0;
  const unsigned blocks = blocks_for(n, 256);
  int64_t max_off = 0;
  for (int a = 0; a < g.rank; ++a) max_off += (g.shape[a] - 1) * g.stride[a];
  const bool small = n < (int64_t{1} << 31) && max_off < (int64_t{1} << 31);
  auto go = [&](auto e) {
    using E = decltype(e);
    if (small) gather32_kernel<E><<<blocks, 256, 0, s>>>(make_divisors(g), g.rank, (uint32_t)n, (const E*)x, (E*)y);
    else gather_kernel<E, int64_t><<<blocks, 256, 0, s>>>(g, n, (const E*)x, (E*)y);
    return check_launch(what);
  };
  switch (esize) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    case 8: return go(uint64_t{});
    case 16: return go(uint4{});
    default: return fail(std::string(what) + ": element size " + std::to_string(esize) + " is not 1, 2, 4, 8 or 16");
  }
}

// A permute that is a batched 2-D transpose once runs of axes that stay adjacent are merged:
// x[B][R][C] -> y[B][C][R] (NCHW <-> NHWC is [N][C][HW] <-> [N][HW][C]). Each 32x32 tile goes
// through shared memory (one padding column: conflict-free column reads), so both the global
// reads and the global writes are row-contiguous; the strided gather would read every element at
// stride R*C bytes apart for one of the two sides.
constexpr int kTile = 32, kTileRows = 8;

template <class E>
__global__ void transpose_tiles_kernel(int64_t B, int64_t R, int64_t C, const E* __restrict__ x, E* __restrict__ y) {
  __shared__ E tile[kTile][kTile + 1];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile, r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int64_t b = blockIdx.z; b < B; b += gridDim.z) {
    const E* xb = x + b * R * C;
    E* yb = y + b * R * C;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < R && c < C) tile[i][threadIdx.x] = xb[r * C + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (c < C && r < R) yb[c * R + r] = tile[threadIdx.x][i];
    }
    __syncthreads();
  }
}

// Drops extent-1 axes and merges output axes that are adjacent in the input too; returns true
// (and B, R, C) when what is left is an identity prefix followed by one swap of two runs.
bool as_batched_transpose(int rank, const int64_t* xs, const int32_t* perm, int64_t* B, int64_t* R, int64_t* C) {
  int kept[8], m = 0;  // input axis -> index among the axes of extent > 1 (-1: dropped)
  int64_t ext[8];
  for (int i = 0; i < rank; ++i) {
    kept[i] = xs[i] == 1 ? -1 : m;
    if (xs[i] != 1) ext[m++] = xs[i];
  }
  int gs[8], ge[8], k = 0;  // groups in output order: [gs, ge) in kept-index space
  for (int a = 0; a < rank; ++a) {
    const int q = kept[perm[a]];
    if (q < 0) continue;
    if (k > 0 && q == ge[k - 1]) {
      ge[k - 1] = q + 1;
    } else {
      gs[k] = q;
      ge[k] = q + 1;
      ++k;
    }
  }
  if (k < 2) return false;
  int expect = 0;
  for (int g = 0; g < k - 2; ++g) {
    if (gs[g] != expect) return false;
    expect = ge[g];
  }
  if (gs[k - 1] != expect || ge[k - 1] != gs[k - 2] || ge[k - 2] != m) return false;
  auto prod = [&](int lo, int hi) {
    int64_t e = 1;
    for (int i = lo; i < hi; ++i) e *= ext[i];
    return e;
  };
  *B = prod(0, gs[k - 1]);
  *R = prod(gs[k - 1], ge[k - 1]);
  *C = prod(gs[k - 2], m);
  return true;
}

bool transpose_fits(size_t esize, int64_t R, int64_t C) {
  return (esize == 1 || esize == 2 || esize == 4 || esize == 8) && R > 1 && C > 1 &&
         (C + kTile - 1) / kTile <= INT32_MAX && (R + kTile - 1) / kTile <= 65535;
}

int batched_transpose(size_t esize, int64_t B, int64_t R, int64_t C, const void* x, void* y, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>((C + kTile - 1) / kTile), static_cast<unsigned>((R + kTile - 1) / kTile),
                  static_cast<unsigned>(B < 65535 ? B : 65535));
  const dim3 block(kTile, kTileRows);
  auto go = [&](auto e) {
    using E = decltype(e);
    transpose_tiles_kernel<E><<<grid, block, 0, s>>>(B, R, C, static_cast<const E*>(x), static_cast<E*>(y));
    return check_launch("dml_cuda_permute (tiled transpose)");
  };
  switch (esize) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    case 8: return go(uint64_t{});
    default: return fail("dml_cuda_permute (tiled transpose): element size " + std::to_string(esize));
  }
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
  int64_t tb = 0, tr = 0, tc = 0;
  if (as_batched_transpose(rank, xs, perm, &tb, &tr, &tc) && transpose_fits(esize, tr, tc))
    return tb == 0 ? 0 : batched_transpose(esize, tb, tr, tc, x, y, as_stream(stream));
  // When the last axis stays last, its contiguous run moves as wider elements (up to 16 bytes
  // per thread): fewer threads, and a fraction of the index arithmetic per byte.
  if (perm[rank - 1] == rank - 1 && esize < 16) {
    const size_t run = static_cast<size_t>(xs[rank - 1]) * esize;
    const uintptr_t align = reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y);
    size_t w = esize;
    for (size_t cand : {size_t{16}, size_t{8}, size_t{4}})
      if (cand > esize && run % cand == 0 && align % cand == 0) {
        w = cand;
        break;
      }
    if (w > esize) {
      const int64_t f = static_cast<int64_t>(w / esize);
      g.shape[rank - 1] /= f;
      for (int a = 0; a < rank; ++a) g.stride[a] = a == rank - 1 ? 1 : g.stride[a] / f;
      return strided_gather(w, g, x, y, as_stream(stream), "dml_cuda_permute");
    }
  }
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

namespace dml_cuda {
namespace {

struct PadGeom {
  int rank;
  int64_t ys[8], xs[8], begin[8], xstride[8];
};

template <class E>
__global__ void pad_kernel(PadGeom p, int mode, int64_t n, E fill, const E* __restrict__ x, E* __restrict__ y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rem = i, off = 0;
    bool outside = false;
#pragma unroll
    for (int a = 7; a >= 0; --a) {  // constant indices: p stays in parameter space
      if (a >= p.rank) continue;
      const int64_t o = rem % p.ys[a];
      rem /= p.ys[a];
      const int64_t s = dml_pad_source(o, p.begin[a], p.xs[a], mode);
      if (s < 0) outside = true;
      else off += s * p.xstride[a];
    }
    y[i] = outside ? fill : x[off];
  }
}

}  // namespace
}  // namespace dml_cuda

extern "C" int dml_cuda_pad(int dtype, int rank, const int64_t* xs, const int64_t* pads, int mode, double value,
                            const void* x, void* y, void* stream) {
  if (rank < 1 || rank > 8) return fail("dml_cuda_pad: rank " + std::to_string(rank) + " is outside [1, 8]");
  if (mode < DML_PAD_MODE_CONSTANT || mode > DML_PAD_MODE_EDGE) return fail("dml_cuda_pad: unknown mode " + std::to_string(mode));
  static const size_t kSize[] = {4, 2, 2, 1, 1, 4, 8, 1};
  if (dtype < 0 || dtype > 7) return fail("dml_cuda_pad: unknown dtype " + std::to_string(dtype));
  PadGeom p{rank, {}, {}, {}, {}};
  contiguous_strides(rank, xs, p.xstride);
  int64_t n = 1;
  for (int a = 0; a < rank; ++a) {
    if (pads[a] < 0 || pads[rank + a] < 0) return fail("dml_cuda_pad: axis " + std::to_string(a) + " has a negative pad");
    p.xs[a] = xs[a];
    p.begin[a] = pads[a];
    p.ys[a] = xs[a] + pads[a] + pads[rank + a];
    if (mode != DML_PAD_MODE_CONSTANT && xs[a] == 0 && p.ys[a] > 0)
      return fail("dml_cuda_pad: reflect/edge padding of an empty axis " + std::to_string(a));
    n *= p.ys[a];
  }
  if (n == 0) return 0;
  unsigned char fill[8] = {0};
  dml_pad_fill_bytes(dtype, value, fill);
  auto go = [&](auto e) {
    using E = decltype(e);
    E f;
    std::memcpy(&f, fill, sizeof(E));
    pad_kernel<E><<<blocks_for(n, 256), 256, 0, as_stream(stream)>>>(p, mode, n, f, static_cast<const E*>(x),
                                                                    static_cast<E*>(y));
    return check_launch("dml_cuda_pad");
  };
  switch (kSize[dtype]) {
    case 1: return go(uint8_t{});
    case 2: return go(uint16_t{});
    case 4: return go(uint32_t{});
    default: return go(uint64_t{});
  }
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
