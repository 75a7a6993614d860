// dml_cuda_conv3d: volumetric convolution on NCDHW tensors (weights [O, C/groups, kd, kh, kw]) with
// an optional bias, as an implicit GEMM per group: [O/g] x [N·Do·Ho·Wo] x [C/g·kd·kh·kw], the im2col
// operand gathered on the fly (zero padding by bounds checks). 64x64 output tile per block of 256
// threads (4x4 outputs each), K in steps of 16 through shared memory, float accumulation; any
// dtype, stride, padding, dilation and group count. The tile loop is conv.cu's SIMT kernel with a
// third spatial axis in the gather.
#include <cstdint>
#include <string>

#include "common.cuh"

namespace dml_cuda {
namespace {

struct Conv3Geo {
  int D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw;
  int Do, Ho, Wo, Cg, Og, K, kk;
  int64_t C, O, P;  // P = N·Do·Ho·Wo
};

constexpr int TB = 64, TK = 16;

template <class T>
__global__ void __launch_bounds__(256) conv3d_simt_kernel(Conv3Geo g, const T* __restrict__ x, const T* __restrict__ w,
                                                          const T* __restrict__ bias, T* __restrict__ y) {
  __shared__ float Ws[TK][TB + 4];
  __shared__ float Xs[TK][TB + 4];
  const int tid = threadIdx.x;
  const int64_t grp = blockIdx.z;
  const int64_t p0 = (int64_t)blockIdx.x * TB, o0 = (int64_t)blockIdx.y * TB;
  // This thread's im2col column (output position) for the X tile loads, fixed across the K loop.
  const int lc = tid % TB, lr = tid / TB;  // rows lr, lr + 4, lr + 8, lr + 12 of each K step
  const int64_t pix = p0 + lc;
  const bool pok = pix < g.P;
  int d0 = 0, h0 = 0, w0 = 0;
  const T* xb = x;
  if (pok) {
    const int64_t spatial = (int64_t)g.Do * g.Ho * g.Wo;
    const int64_t n = pix / spatial;
    const int r = static_cast<int>(pix - n * spatial);
    const int od = r / (g.Ho * g.Wo), oh = (r / g.Wo) % g.Ho, ow = r % g.Wo;
    d0 = od * g.sd - g.pd;
    h0 = oh * g.sh - g.ph;
    w0 = ow * g.sw - g.pw;
    xb = x + (n * g.C + grp * g.Cg) * ((int64_t)g.D * g.H * g.W);
  }
  const T* wg = w + grp * (int64_t)g.Og * g.K;
  const int wo = tid / 4, wk = (tid % 4) * 4;  // W tile loads: row o = tid / 4, k = (tid % 4) * 4 .. +3
  const int tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < g.K; k0 += TK) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t o = o0 + wo;
      const int kq = k0 + wk + j;
      Ws[wk + j][wo] = (o < g.Og && kq < g.K) ? to_f(wg[o * g.K + kq]) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int kq = k0 + lr + 4 * j;
      float v = 0.0f;
      if (pok && kq < g.K) {
        const int c = kq / g.kk, t = kq - c * g.kk;
        const int a = t / (g.kh * g.kw), b = (t / g.kw) % g.kh, e = t % g.kw;
        const int id = d0 + a * g.dd, ih = h0 + b * g.dh, iw = w0 + e * g.dw;
        if (id >= 0 && id < g.D && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
          v = to_f(xb[(((int64_t)c * g.D + id) * g.H + ih) * g.W + iw]);
      }
      Xs[lr + 4 * j][lc] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kq = 0; kq < TK; ++kq) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = Ws[kq][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = Xs[kq][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  const int64_t spatial = (int64_t)g.Do * g.Ho * g.Wo;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t p = p0 + tx + 16 * j;
    if (p >= g.P) continue;
    const int64_t pn = p / spatial, pr = p - pn * spatial;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t o = o0 + ty + 16 * i;
      if (o >= g.Og) continue;
      const int64_t oc = grp * g.Og + o;
      float v = acc[i][j];
      if (bias) v += to_f(bias[oc]);
      y[(pn * g.O + oc) * spatial + pr] = from_f<T>(v);
    }
  }
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_conv3d(int dtype, const dml_cuda_conv3d_shape* s, const void* x, const void* w, const void* bias,
                               void* y, void* stream) {
  if (!s) return fail("dml_cuda_conv3d: shape is NULL");
  if (s->N < 0 || s->C < 1 || s->D < 1 || s->H < 1 || s->W < 1 || s->O < 1 || s->kd < 1 || s->kh < 1 || s->kw < 1 ||
      s->sd < 1 || s->sh < 1 || s->sw < 1 || s->dd < 1 || s->dh < 1 || s->dw < 1 || s->pd0 < 0 || s->ph0 < 0 ||
      s->pw0 < 0 || s->pd1 < 0 || s->ph1 < 0 || s->pw1 < 0 || s->groups < 1 || s->C % s->groups != 0 ||
      s->O % s->groups != 0)
    return fail("dml_cuda_conv3d: invalid geometry (extents/strides/dilations >= 1, pads >= 0, groups dividing C and O)");
  const int64_t span_d = s->D + s->pd0 + s->pd1 - s->dd * (s->kd - 1) - 1;
  const int64_t span_h = s->H + s->ph0 + s->ph1 - s->dh * (s->kh - 1) - 1;
  const int64_t span_w = s->W + s->pw0 + s->pw1 - s->dw * (s->kw - 1) - 1;
  if (span_d < 0 || span_h < 0 || span_w < 0)
    return fail("dml_cuda_conv3d: the (dilated) kernel is larger than the padded input");
  const int64_t Do = span_d / s->sd + 1, Ho = span_h / s->sh + 1, Wo = span_w / s->sw + 1;
  const int64_t Cg = s->C / s->groups, Og = s->O / s->groups, K = Cg * s->kd * s->kh * s->kw;
  const int64_t P = s->N * Do * Ho * Wo;
  if (P == 0) return 0;
  if (P > INT32_MAX || K > INT32_MAX / 2 || Do * Ho * Wo > INT32_MAX || s->D * s->H * s->W > INT32_MAX ||
      s->D + s->pd0 + s->kd * s->dd > INT32_MAX / 2 || s->H + s->ph0 + s->kh * s->dh > INT32_MAX / 2 ||
      s->W + s->pw0 + s->kw * s->dw > INT32_MAX / 2)
    return fail("dml_cuda_conv3d: the extents exceed the 32-bit index range of the kernel");
  if (s->groups > 65535 || (Og + TB - 1) / TB > 65535 || (P + TB - 1) / TB > INT32_MAX)
    return fail("dml_cuda_conv3d: too many groups / output channels / positions for one launch");
  Conv3Geo g{};
  g.D = (int)s->D; g.H = (int)s->H; g.W = (int)s->W;
  g.kd = (int)s->kd; g.kh = (int)s->kh; g.kw = (int)s->kw;
  g.sd = (int)s->sd; g.sh = (int)s->sh; g.sw = (int)s->sw;
  g.pd = (int)s->pd0; g.ph = (int)s->ph0; g.pw = (int)s->pw0;
  g.dd = (int)s->dd; g.dh = (int)s->dh; g.dw = (int)s->dw;
  g.Do = (int)Do; g.Ho = (int)Ho; g.Wo = (int)Wo;
  g.Cg = (int)Cg; g.Og = (int)Og; g.K = (int)K; g.kk = (int)(s->kd * s->kh * s->kw);
  g.C = s->C; g.O = s->O; g.P = P;
  cudaStream_t st = as_stream(stream);
  return dispatch_float(dtype, "dml_cuda_conv3d", [&](auto tag) -> int {
    using T = decltype(tag);
    const dim3 grid(static_cast<unsigned>((P + TB - 1) / TB), static_cast<unsigned>((Og + TB - 1) / TB),
                    static_cast<unsigned>(s->groups));
    conv3d_simt_kernel<T><<<grid, 256, 0, st>>>(g, static_cast<const T*>(x), static_cast<const T*>(w),
                                                 static_cast<const T*>(bias), static_cast<T*>(y));
    return check_launch("dml_cuda_conv3d");
  });
}
