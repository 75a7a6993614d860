// dml_cpu_conv3d: volumetric convolution (NCDHW) as an im2col GEMM per (image, group, block of
// output positions). For a block of PB output positions the kernel gathers col[K, PB] (K =
// C/groups·kd·kh·kw; row k = one (channel, tap) pair, zero where the window reads padding — along
// a row consecutive positions read consecutive inputs at stride sw, so the gather streams), runs
// the library's GEMM t[O/groups, PB] = w_g · col with w_g [O/groups, K] read in place, and copies
// t's rows, plus the bias, into y's channel planes (contiguous runs of PB). PB is sized so col
// stays about 4 MiB: the im2col matrix of a whole video clip is never materialised. The gather
// and the copy are split over threads; the GEMM threads itself. fp16/bf16 are widened to fp32 on
// the gather (weights once per call), so every dtype accumulates in fp32 and rounds once.
#include <omp.h>

#include <algorithm>
#include <string>

#include "kernel_common.h"

namespace dml_cpu {
namespace {

constexpr int64_t kColFloats = int64_t{1} << 20;  // ~4 MiB of im2col rows per GEMM call

struct Geo3 {
  int64_t N, C, D, H, W, O, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, G;
  int64_t Do, Ho, Wo, P, Cg, Og, K;
};

float* scratch3(int slot, size_t n) {
  return static_cast<float*>(scratch_bytes<ScratchPool::kConv3d, 3>(slot, n * sizeof(float)));
}

template <typename T>
int run(const Geo3& g, const T* x, const T* w, const T* bias, T* y) {
  const float* wf = nullptr;  // weights as fp32 (read in place for fp32)
  if constexpr (std::is_same_v<T, float>) {
    wf = w;
  } else {
    float* wb = scratch3(0, static_cast<size_t>(g.O * g.K));
    if (!wb) return fail(DML_CPU_ERR_MEMORY, "dml_cpu_conv3d: out of memory for the fp32 weights");
    for (int64_t i = 0; i < g.O * g.K; ++i) wb[i] = load_f(w, i);
    wf = wb;
  }
  const int64_t PB = std::min<int64_t>(g.P, std::max<int64_t>(256, kColFloats / g.K));
  float* col = scratch3(1, static_cast<size_t>(PB * g.K));
  float* t = scratch3(2, static_cast<size_t>(PB * g.Og));
  if (!col || !t) return fail(DML_CPU_ERR_MEMORY, "dml_cpu_conv3d: out of memory for the im2col block");
  const int64_t HWo = g.Ho * g.Wo, DHW = g.D * g.H * g.W, khw = g.kh * g.kw, kk = g.kd * khw;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < g.G; ++grp) {
      const T* xg = x + (n * g.C + grp * g.Cg) * DHW;
      T* yg = y + (n * g.O + grp * g.Og) * g.P;
      for (int64_t p0 = 0; p0 < g.P; p0 += PB) {
        const int64_t pb = std::min(PB, g.P - p0);
        // col[k, i] = x[c, od*sd - pd + a*dd, oh*sh - ph + b*dh, ow*sw - pw + e*dw], k = (c, a, b, e),
        // output position p0 + i = (od, oh, ow); filled run by run along ow.
#pragma omp parallel for schedule(static) if (pb * g.K > kParallelWork)
        for (int64_t k = 0; k < g.K; ++k) {
          const int64_t c = k / kk, tap = k % kk, a = tap / khw, b = (tap / g.kw) % g.kh, e = tap % g.kw;
          const T* xc = xg + c * DHW;
          float* row = col + k * pb;
          int64_t od = p0 / HWo, oh = (p0 / g.Wo) % g.Ho, ow = p0 % g.Wo;
          for (int64_t i = 0; i < pb;) {
            const int64_t run = std::min(g.Wo - ow, pb - i);
            const int64_t id = od * g.sd - g.pd + a * g.dd, ih = oh * g.sh - g.ph + b * g.dh;
            float* dst = row + i;
            if (id < 0 || id >= g.D || ih < 0 || ih >= g.H) {
              std::fill(dst, dst + run, 0.0f);
            } else {
              const T* src = xc + (id * g.H + ih) * g.W;
              const int64_t iw0 = ow * g.sw - g.pw + e * g.dw;
              for (int64_t j = 0; j < run; ++j) {
                const int64_t iw = iw0 + j * g.sw;
                dst[j] = iw >= 0 && iw < g.W ? load_f(src, iw) : 0.0f;
              }
            }
            i += run;
            ow = 0;
            if (++oh == g.Ho) {
              oh = 0;
              ++od;
            }
          }
        }
        const int rc = dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, g.Og, pb, g.K, wf + grp * g.Og * g.K, col, nullptr,
                                    nullptr, t, DML_CPU_EPI_NONE);
        if (rc != DML_CPU_OK) return rc;
#pragma omp parallel for schedule(static) if (pb * g.Og > kParallelWork)
        for (int64_t o = 0; o < g.Og; ++o) {
          const float bv = bias ? load_f(bias, grp * g.Og + o) : 0.0f;
          const float* src = t + o * pb;
          T* dst = yg + o * g.P + p0;
          for (int64_t i = 0; i < pb; ++i) store_f(dst, i, src[i] + bv);
        }
      }
    }
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_conv3d(int dtype, const dml_cpu_conv3d_shape* s, const void* x, const void* w,
                              const void* bias, void* y) {
  if (!s) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv3d: shape is NULL");
  Geo3 g{s->N,  s->C,   s->D,  s->H,  s->W,  s->O,  s->kd, s->kh, s->kw, s->sd,     s->sh, s->sw, s->pd0,
         s->ph0, s->pw0, s->dd, s->dh, s->dw, s->groups, 0,  0,     0,     0,         0,     0,     0};
  if (g.N < 0 || g.C < 1 || g.D < 1 || g.H < 1 || g.W < 1 || g.O < 1 || g.kd < 1 || g.kh < 1 || g.kw < 1 ||
      g.sd < 1 || g.sh < 1 || g.sw < 1 || g.dd < 1 || g.dh < 1 || g.dw < 1 || g.G < 1 || s->pd0 < 0 || s->ph0 < 0 ||
      s->pw0 < 0 || s->pd1 < 0 || s->ph1 < 0 || s->pw1 < 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv3d: invalid geometry (extents, strides, dilations and groups "
                                      "must be >= 1, pads >= 0)");
  if (g.C % g.G || g.O % g.G)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv3d: C = " + std::to_string(g.C) + " and O = " + std::to_string(g.O) +
                                          " must be divisible by groups = " + std::to_string(g.G));
  const int64_t span[3] = {g.D + s->pd0 + s->pd1 - g.dd * (g.kd - 1) - 1, g.H + s->ph0 + s->ph1 - g.dh * (g.kh - 1) - 1,
                           g.W + s->pw0 + s->pw1 - g.dw * (g.kw - 1) - 1};
  if (span[0] < 0 || span[1] < 0 || span[2] < 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_conv3d: the (dilated) kernel window does not fit the padded input");
  g.Do = span[0] / g.sd + 1;
  g.Ho = span[1] / g.sh + 1;
  g.Wo = span[2] / g.sw + 1;
  g.P = g.Do * g.Ho * g.Wo;
  g.Cg = g.C / g.G;
  g.Og = g.O / g.G;
  g.K = g.Cg * g.kd * g.kh * g.kw;
  if (g.N == 0) return DML_CPU_OK;
  return dispatch_float(dtype, "dml_cpu_conv3d", [&](auto tag) -> int {
    using T = decltype(tag);
    return run<T>(g, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(bias), static_cast<T*>(y));
  });
}
