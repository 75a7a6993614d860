// Pooling for channels-last conv chains (the NCHW kernels are in pool.cu, same semantics):
// max/avg pool2d through (n, c, h, w) element strides with the channel fastest in the thread
// order (coalesced on NHWC tensors, correct on any layout; fp16/bf16 channels-last with C % 8 == 0:
// 8 channels per thread with 16-byte accesses), and global average pooling of an
// NHWC tensor (thread per (n, c), channels fastest: each step over h·w reads one contiguous row
// of channels). max: NaN propagates; avg: count_include_pad as pool.cu.
#include <cstdint>
#include <string>

#include "common.cuh"

namespace dml_cuda {
namespace {

template <class T, bool MAX>
__global__ void pool_strided_kernel(dml_cuda_pool2d_shape s, const T* __restrict__ x,
                                    T* __restrict__ y, int64_t xs0, int64_t xs1, int64_t xs2, int64_t xs3, int64_t ys0,
                                    int64_t ys1, int64_t ys2, int64_t ys3) {
  const int64_t total = s.N * s.C * s.Ho * s.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % s.C, ow = (i / s.C) % s.Wo, oh = (i / (s.C * s.Wo)) % s.Ho, n = i / (s.C * s.Wo * s.Ho);
    const T* xp = x + n * xs0 + c * xs1;
    float acc = MAX ? -INFINITY : 0.0f;
    const int64_t h0 = oh * s.sh - s.pt, w0 = ow * s.sw - s.pl;
    for (int64_t r = 0; r < s.kh; ++r) {
      const int64_t ih = h0 + r * (MAX ? s.dh : 1);
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t q = 0; q < s.kw; ++q) {
        const int64_t iw = w0 + q * (MAX ? s.dw : 1);
        if (iw < 0 || iw >= s.W) continue;
        const float v = to_f(xp[ih * xs2 + iw * xs3]);
        if (MAX)
          acc = (v > acc || v != v) ? v : acc;
        else
          acc += v;
      }
    }
    if (!MAX) {
      const int64_t hlo = h0 < 0 ? 0 : h0, hhi = min(h0 + s.kh, s.H);
      const int64_t wlo = w0 < 0 ? 0 : w0, whi = min(w0 + s.kw, s.W);
      const int64_t cnt_valid = (hhi > hlo ? hhi - hlo : 0) * (whi > wlo ? whi - wlo : 0);
      const int64_t div = s.count_include_pad ? (min(h0 + s.kh, s.H + s.pb) - h0) * (min(w0 + s.kw, s.W + s.pr) - w0) : cnt_valid;
      acc = div > 0 ? acc / float(div) : 0.0f;
    }
    y[n * ys0 + c * ys1 + oh * ys2 + ow * ys3] = from_f<T>(acc);
  }
}

// Channels-last input and output with C % 8 == 0 (host-checked strides and alignment): one thread
// per 8 channels of an output pixel, 16-byte loads and stores.
template <class T, bool MAX>
__global__ void pool_nhwc8_kernel(dml_cuda_pool2d_shape s, const T* __restrict__ x, T* __restrict__ y, int64_t xs0,
                                  int64_t xs2, int64_t xs3, int64_t ys0, int64_t ys2, int64_t ys3) {
  const int64_t C8 = s.C / 8, total = s.N * C8 * s.Ho * s.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c8 = i % C8, ow = (i / C8) % s.Wo, oh = (i / (C8 * s.Wo)) % s.Ho, n = i / (C8 * s.Wo * s.Ho);
    const T* xp = x + n * xs0 + c8 * 8;
    float acc[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) acc[q] = MAX ? -INFINITY : 0.0f;
    const int64_t h0 = oh * s.sh - s.pt, w0 = ow * s.sw - s.pl;
    for (int64_t r = 0; r < s.kh; ++r) {
      const int64_t ih = h0 + r * (MAX ? s.dh : 1);
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t c = 0; c < s.kw; ++c) {
        const int64_t iw = w0 + c * (MAX ? s.dw : 1);
        if (iw < 0 || iw >= s.W) continue;
        const uint4 v = *reinterpret_cast<const uint4*>(xp + ih * xs2 + iw * xs3);
        const T* vp = reinterpret_cast<const T*>(&v);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const float f = to_f(vp[q]);
          if (MAX)
            acc[q] = (f > acc[q] || f != f) ? f : acc[q];
          else
            acc[q] += f;
        }
      }
    }
    if (!MAX) {
      const int64_t hlo = h0 < 0 ? 0 : h0, hhi = min(h0 + s.kh, s.H);
      const int64_t wlo = w0 < 0 ? 0 : w0, whi = min(w0 + s.kw, s.W);
      const int64_t cnt_valid = (hhi > hlo ? hhi - hlo : 0) * (whi > wlo ? whi - wlo : 0);
      const int64_t div = s.count_include_pad ? (min(h0 + s.kh, s.H + s.pb) - h0) * (min(w0 + s.kw, s.W + s.pr) - w0) : cnt_valid;
#pragma unroll
      for (int q = 0; q < 8; ++q) acc[q] = div > 0 ? acc[q] / float(div) : 0.0f;
    }
    T out[8];
#pragma unroll
    for (int q = 0; q < 8; ++q) out[q] = from_f<T>(acc[q]);
    *reinterpret_cast<uint4*>(y + n * ys0 + oh * ys2 + ow * ys3 + c8 * 8) = *reinterpret_cast<const uint4*>(out);
  }
}

template <class T>
__global__ void global_avg_nhwc_kernel(int64_t N, int64_t C, int64_t spatial, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = N * C;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = i % C, n = i / C;
    const T* xp = x + n * spatial * C + c;
    float acc = 0.0f;
    for (int64_t p = 0; p < spatial; ++p) acc += to_f(xp[p * C]);
    y[i] = from_f<T>(acc / float(spatial));
  }
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_pool2d_strided(int dtype, int is_max, const dml_cuda_pool2d_shape* s, const int64_t* xs,
                                       const void* x, const int64_t* ys, void* y, void* stream) {
  if (!s || !xs || !ys) return fail("dml_cuda_pool2d_strided: shape or strides NULL");
  if (s->N < 0 || s->C < 1 || s->H < 1 || s->W < 1 || s->Ho < 0 || s->Wo < 0 || s->kh < 1 || s->kw < 1 || s->sh < 1 ||
      s->sw < 1 || s->dh < 1 || s->dw < 1)
    return fail("dml_cuda_pool2d_strided: invalid geometry");
  const int64_t total = s->N * s->C * s->Ho * s->Wo;
  if (total == 0) return 0;
  return dispatch_float(dtype, "dml_cuda_pool2d_strided", [&](auto tag) -> int {
    using T = decltype(tag);
    auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
    auto cl8 = [](const int64_t* st) { return st[1] == 1 && st[0] % 8 == 0 && st[2] % 8 == 0 && st[3] % 8 == 0; };
    if constexpr (sizeof(T) == 2) {
      if (s->C % 8 == 0 && cl8(xs) && cl8(ys) && al16(x) && al16(y)) {
        const unsigned b8 = blocks_for(total / 8, 256);
        if (is_max)
          pool_nhwc8_kernel<T, true><<<b8, 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y), xs[0],
                                                                       xs[2], xs[3], ys[0], ys[2], ys[3]);
        else
          pool_nhwc8_kernel<T, false><<<b8, 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y), xs[0],
                                                                        xs[2], xs[3], ys[0], ys[2], ys[3]);
        return check_launch("dml_cuda_pool2d_strided (nhwc8)");
      }
    }
    const unsigned blocks = blocks_for(total, 256);
    if (is_max)
      pool_strided_kernel<T, true><<<blocks, 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y),
                                                                         xs[0], xs[1], xs[2], xs[3], ys[0], ys[1], ys[2], ys[3]);
    else
      pool_strided_kernel<T, false><<<blocks, 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y),
                                                                          xs[0], xs[1], xs[2], xs[3], ys[0], ys[1], ys[2], ys[3]);
    return check_launch("dml_cuda_pool2d_strided");
  });
}

extern "C" int dml_cuda_global_avg_pool2d_nhwc(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x, void* y,
                                               void* stream) {
  if (N < 0 || C < 1 || spatial < 1) return fail("dml_cuda_global_avg_pool2d_nhwc: invalid extents");
  if (N == 0) return 0;
  return dispatch_float(dtype, "dml_cuda_global_avg_pool2d_nhwc", [&](auto tag) -> int {
    using T = decltype(tag);
    global_avg_nhwc_kernel<T><<<blocks_for(N * C, 256), 256, 0, as_stream(stream)>>>(N, C, spatial, static_cast<const T*>(x),
                                                                                   static_cast<T*>(y));
    return check_launch("dml_cuda_global_avg_pool2d_nhwc");
  });
}
