// Shared between the channels-last conv kernels (conv_nhwc.cu: mma.sync, sm_80+;
// conv_nhwc_wgmma.cu: wgmma, sm_90a), internal: the geometry, the 8-channel epilogue and the
// sm_90a entry point.
#pragma once
#include <cstdint>

#include "common.cuh"
#include "mma.cuh"

namespace dml_cuda {

struct NhwcGeo {
  int N, C, H, W, O, kh, kw, sh, sw, pt, pl, dh, dw, Ho, Wo;
  int P, K, ctiles, ktiles;
  int64_t xs[4], ys[4], rs[4];  // element strides in (n, c, h, w) order
};

template <int N>
__device__ __forceinline__ void cp_async_wait_n() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// The im2col origin of output pixel m (flat over n, ho, wo) for the A-tile loaders: x's batch offset
// and the input row / column of tap (0, 0); rows past P get an origin no tap reaches.
__device__ __forceinline__ void nhwc_pixel_origin(const NhwcGeo& g, int HoWo, int m, int64_t& base, int& ih, int& iw) {
  if (m < g.P) {
    const int n = m / HoWo, rr = m - n * HoWo, ho = rr / g.Wo, wo = rr - ho * g.Wo;
    base = n * g.xs[0];
    ih = ho * g.sh - g.pt;
    iw = wo * g.sw - g.pl;
  } else {
    base = 0;
    ih = -(1 << 29);  // never inside the image
    iw = 0;
  }
}

// Output pixel m (flat over n, ho, wo), channels o..o+7 (o % 8 == 0, o + 8 <= O): + bias, +
// residual, ReLU, one 16-byte store. The host checked 16-byte alignment and unit channel strides
// of y / res / bias (the staged epilogue's condition).
template <class T>
__device__ __forceinline__ void nhwc_store8(const NhwcGeo& g, int m, int o, float* v, const T* __restrict__ bias,
                                            const T* res, T* y, bool relu) {
  if (bias) {
    const uint4 bv = *reinterpret_cast<const uint4*>(bias + o);
    const T* bp = reinterpret_cast<const T*>(&bv);
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] += to_f(bp[q]);
  }
  const int HoWo = g.Ho * g.Wo;
  const int n = m / HoWo, rr = m - n * HoWo, ho = rr / g.Wo, wo = rr - ho * g.Wo;
  if (res) {
    const uint4 rv = *reinterpret_cast<const uint4*>(res + n * g.rs[0] + ho * g.rs[2] + wo * g.rs[3] + o);
    const T* rp = reinterpret_cast<const T*>(&rv);
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] += to_f(rp[q]);
  }
  if (relu)
#pragma unroll
    for (int q = 0; q < 8; ++q) v[q] = v[q] < 0.0f ? 0.0f : v[q];
  uint4 out;
  out.x = pack2<T>(v[0], v[1]);
  out.y = pack2<T>(v[2], v[3]);
  out.z = pack2<T>(v[4], v[5]);
  out.w = pack2<T>(v[6], v[7]);
  *reinterpret_cast<uint4*>(y + n * g.ys[0] + ho * g.ys[2] + wo * g.ys[3] + o) = out;
}

// Multiprocessors of the current device (cached).
int conv_sm_count();

#if DML_GPU_CUDA
// conv_nhwc_wgmma.cu: whether this device runs the sm_90a kernel (compute 9.0), and the launch
// for a bm x bn tile (128 x 128, 128 x 64, 64 x 64) on a vector-path geometry (C % 8 == 0, channels-last input,
// 16-byte aligned x / wp) with the staged epilogue's output condition (O % 8 == 0, channels-last
// y / res, 16-byte aligned y / res / bias). dtype 1 = fp16, 2 = bf16.
bool conv_wgmma_device();
int conv_nhwc_wgmma(int dtype, int bm, int bn, NhwcGeo g, const void* x, const void* wp, const void* bias, const void* res,
                    void* y, bool relu, cudaStream_t st);
#endif

}  // namespace dml_cuda
