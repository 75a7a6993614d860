// Pooling, resampling and inference batch norm on NCHW tensors (the CUDA counterparts of
// kernels/cpu/pool.cpp, same semantics): max_pool2d (NaN propagates, dilation), avg_pool2d
// (count_include_pad counts the padded window clipped to the bottom/right padding, as PyTorch),
// global_avg_pool2d (one warp per plane), interpolate (nearest / bilinear with the ONNX coordinate
// transformation and nearest rounding modes), batch_norm. One thread per output element.
#include <cstdint>
#include <string>

#include "common.cuh"

namespace dml_cuda {
namespace {

template <class T>
__global__ void max_pool_kernel(dml_cuda_pool2d_shape s, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = s.N * s.C * s.Ho * s.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % s.Wo, oh = (i / s.Wo) % s.Ho, pl = i / (s.Wo * s.Ho);
    const T* xp = x + pl * s.H * s.W;
    float m = -INFINITY;
    for (int64_t r = 0; r < s.kh; ++r) {
      const int64_t ih = oh * s.sh - s.pt + r * s.dh;
      if (ih < 0 || ih >= s.H) continue;
      for (int64_t c = 0; c < s.kw; ++c) {
        const int64_t iw = ow * s.sw - s.pl + c * s.dw;
        if (iw < 0 || iw >= s.W) continue;
        const float v = to_f(xp[ih * s.W + iw]);
        m = (v > m || v != v) ? v : m;
      }
    }
    y[i] = from_f<T>(m);
  }
}

template <class T>
__global__ void avg_pool_kernel(dml_cuda_pool2d_shape s, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = s.N * s.C * s.Ho * s.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % s.Wo, oh = (i / s.Wo) % s.Ho, pl = i / (s.Wo * s.Ho);
    const T* xp = x + pl * s.H * s.W;
    const int64_t h0 = oh * s.sh - s.pt, w0 = ow * s.sw - s.pl;
    const int64_t hlo = h0 < 0 ? 0 : h0, hhi = min(h0 + s.kh, s.H);
    const int64_t wlo = w0 < 0 ? 0 : w0, whi = min(w0 + s.kw, s.W);
    float acc = 0.0f;
    for (int64_t ih = hlo; ih < hhi; ++ih)
      for (int64_t iw = wlo; iw < whi; ++iw) acc += to_f(xp[ih * s.W + iw]);
    const int64_t cnt_valid = (hhi > hlo ? hhi - hlo : 0) * (whi > wlo ? whi - wlo : 0);
    const int64_t div = s.count_include_pad ? (min(h0 + s.kh, s.H + s.pb) - h0) * (min(w0 + s.kw, s.W + s.pr) - w0) : cnt_valid;
    y[i] = from_f<T>(div > 0 ? acc / float(div) : 0.0f);
  }
}

template <class T>
__global__ void global_avg_kernel(int64_t planes, int64_t spatial, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t warps = (int64_t)gridDim.x * (blockDim.x / kWarp);
  const int lane = threadIdx.x % kWarp;
  for (int64_t p = (int64_t)blockIdx.x * (blockDim.x / kWarp) + threadIdx.x / kWarp; p < planes; p += warps) {
    const T* xp = x + p * spatial;
    float acc = 0.0f;
    for (int64_t i = lane; i < spatial; i += kWarp) acc += to_f(xp[i]);
    acc = warp_sum(acc);
    if (lane == 0) y[p] = from_f<T>(acc / float(spatial));
  }
}

__device__ __forceinline__ float src_coord(int ctm, int64_t o, int64_t in, int64_t out, float rscale) {
  switch (ctm) {
    case DML_CUDA_COORD_ALIGN_CORNERS: return out > 1 ? float(o) * (float(in - 1) / float(out - 1)) : 0.0f;
    case DML_CUDA_COORD_ASYMMETRIC: return float(o) * rscale;
    case DML_CUDA_COORD_PYTORCH_HALF_PIXEL:
      if (out == 1) return 0.0f;
      return (float(o) + 0.5f) * rscale - 0.5f;
    default: return (float(o) + 0.5f) * rscale - 0.5f;
  }
}

__device__ __forceinline__ int64_t nearest_index(int nm, float x, int64_t in) {
  double i;
  switch (nm) {
    case DML_CUDA_NEAREST_FLOOR: i = floor((double)x); break;
    case DML_CUDA_NEAREST_CEIL: i = ceil((double)x); break;
    case DML_CUDA_NEAREST_ROUND_PREFER_CEIL: i = floor((double)x + 0.5); break;
    default: i = ceil((double)x - 0.5); break;  // round_prefer_floor
  }
  int64_t v = static_cast<int64_t>(i);
  return v < 0 ? 0 : (v > in - 1 ? in - 1 : v);
}

template <class T>
__global__ void interpolate_kernel(int mode, int ctm, int nm, int64_t planes, int64_t H, int64_t W, int64_t Ho, int64_t Wo,
                                   float rsh, float rsw, const T* __restrict__ x, T* __restrict__ y) {
  const int64_t total = planes * Ho * Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % Wo, oh = (i / Wo) % Ho, pl = i / (Wo * Ho);
    const T* xp = x + pl * H * W;
    const float sy = src_coord(ctm, oh, H, Ho, rsh), sx = src_coord(ctm, ow, W, Wo, rsw);
    if (mode == DML_CUDA_INTERP_NEAREST) {
      y[i] = xp[nearest_index(nm, sy, H) * W + nearest_index(nm, sx, W)];
    } else {
      const float cy = fminf(fmaxf(sy, 0.0f), float(H - 1)), cx = fminf(fmaxf(sx, 0.0f), float(W - 1));
      const int64_t y0 = static_cast<int64_t>(cy), x0 = static_cast<int64_t>(cx);
      const int64_t y1 = min(y0 + 1, H - 1), x1 = min(x0 + 1, W - 1);
      const float ly = cy - float(y0), lx = cx - float(x0);
      const float top = (1.0f - lx) * to_f(xp[y0 * W + x0]) + lx * to_f(xp[y0 * W + x1]);
      const float bot = (1.0f - lx) * to_f(xp[y1 * W + x0]) + lx * to_f(xp[y1 * W + x1]);
      y[i] = from_f<T>((1.0f - ly) * top + ly * bot);
    }
  }
}

template <class T>
__global__ void batch_norm_kernel(int64_t N, int64_t C, int64_t spatial, const T* __restrict__ x, const T* __restrict__ mean,
                                  const T* __restrict__ var, const T* __restrict__ gamma, const T* __restrict__ beta,
                                  float eps, T* __restrict__ y) {
  const int64_t total = N * C * spatial;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t c = (i / spatial) % C;
    const float sc = to_f(gamma[c]) / sqrtf(to_f(var[c]) + eps);
    y[i] = from_f<T>((to_f(x[i]) - to_f(mean[c])) * sc + to_f(beta[c]));
  }
}

int check_pool(const dml_cuda_pool2d_shape* s, const char* kernel) {
  if (!s) return fail(std::string(kernel) + ": shape is NULL");
  if (s->N < 0 || s->C < 0 || s->H < 1 || s->W < 1 || s->Ho < 1 || s->Wo < 1 || s->kh < 1 || s->kw < 1 || s->sh < 1 ||
      s->sw < 1 || s->dh < 1 || s->dw < 1 || s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0)
    return fail(std::string(kernel) + ": invalid geometry");
  return 0;
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_max_pool2d(int dtype, const dml_cuda_pool2d_shape* s, const void* x, void* y, void* stream) {
  if (int e = check_pool(s, "dml_cuda_max_pool2d")) return e;
  return dispatch_float(dtype, "dml_cuda_max_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    const int64_t total = s->N * s->C * s->Ho * s->Wo;
    if (total == 0) return 0;
    max_pool_kernel<T><<<blocks_for(total, 256), 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y));
    return check_launch("dml_cuda_max_pool2d");
  });
}

extern "C" int dml_cuda_avg_pool2d(int dtype, const dml_cuda_pool2d_shape* s, const void* x, void* y, void* stream) {
  if (int e = check_pool(s, "dml_cuda_avg_pool2d")) return e;
  if (s->dh != 1 || s->dw != 1) return fail("dml_cuda_avg_pool2d: dilation must be 1");
  return dispatch_float(dtype, "dml_cuda_avg_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    const int64_t total = s->N * s->C * s->Ho * s->Wo;
    if (total == 0) return 0;
    avg_pool_kernel<T><<<blocks_for(total, 256), 256, 0, as_stream(stream)>>>(*s, static_cast<const T*>(x), static_cast<T*>(y));
    return check_launch("dml_cuda_avg_pool2d");
  });
}

extern "C" int dml_cuda_global_avg_pool2d(int dtype, int64_t planes, int64_t spatial, const void* x, void* y, void* stream) {
  if (planes < 0 || spatial < 1) return fail("dml_cuda_global_avg_pool2d: planes must be >= 0 and spatial >= 1");
  return dispatch_float(dtype, "dml_cuda_global_avg_pool2d", [&](auto tag) -> int {
    using T = decltype(tag);
    if (planes == 0) return 0;
    const int wpb = 8;
    global_avg_kernel<T><<<blocks_for(planes, wpb), wpb * kWarp, 0, as_stream(stream)>>>(planes, spatial, static_cast<const T*>(x),
                                                                                        static_cast<T*>(y));
    return check_launch("dml_cuda_global_avg_pool2d");
  });
}

extern "C" int dml_cuda_interpolate(int dtype, int mode, int coord_mode, int nearest_mode, int64_t planes, int64_t H,
                                    int64_t W, int64_t Ho, int64_t Wo, float rscale_h, float rscale_w, const void* x,
                                    void* y, void* stream) {
  if (planes < 0 || H < 1 || W < 1 || Ho < 1 || Wo < 1) return fail("dml_cuda_interpolate: extents must be >= 1");
  if (mode != DML_CUDA_INTERP_NEAREST && mode != DML_CUDA_INTERP_BILINEAR)
    return fail("dml_cuda_interpolate: unknown mode " + std::to_string(mode));
  return dispatch_float(dtype, "dml_cuda_interpolate", [&](auto tag) -> int {
    using T = decltype(tag);
    const int64_t total = planes * Ho * Wo;
    if (total == 0) return 0;
    interpolate_kernel<T><<<blocks_for(total, 256), 256, 0, as_stream(stream)>>>(
        mode, coord_mode, nearest_mode, planes, H, W, Ho, Wo, rscale_h, rscale_w, static_cast<const T*>(x), static_cast<T*>(y));
    return check_launch("dml_cuda_interpolate");
  });
}

extern "C" int dml_cuda_batch_norm(int dtype, int64_t N, int64_t C, int64_t spatial, const void* x, const void* mean,
                                   const void* var, const void* gamma, const void* beta, float eps, void* y, void* stream) {
  if (N < 0 || C < 1 || spatial < 0) return fail("dml_cuda_batch_norm: invalid extents");
  return dispatch_float(dtype, "dml_cuda_batch_norm", [&](auto tag) -> int {
    using T = decltype(tag);
    const int64_t total = N * C * spatial;
    if (total == 0) return 0;
    batch_norm_kernel<T><<<blocks_for(total, 256), 256, 0, as_stream(stream)>>>(
        N, C, spatial, static_cast<const T*>(x), static_cast<const T*>(mean), static_cast<const T*>(var),
        static_cast<const T*>(gamma), static_cast<const T*>(beta), eps, static_cast<T*>(y));
    return check_launch("dml_cuda_batch_norm");
  });
}
