// conv2d on NCHW tensors (weights [O, C/groups, kh, kw]) with the fused epilogue of the conv2d
// family: y = act(conv(x, w) + bias[o] (+ res)) for act in {none, relu}.
//
// * implicit_gemm_simt_64x64: per group, the GEMM [O/g] x [N·Ho·Wo] x [C/g·kh·kw] with the im2col
//   operand gathered on the fly (zero padding by bounds checks). 64x64 output tile per block of 256
//   threads (4x4 outputs each), K in steps of 16 through shared memory; float accumulation, any
//   dtype, stride, padding, dilation and group count.
// * implicit_gemm_mma_64x64 (fp16/bf16, sm_80+): the same GEMM on tensor cores with
//   mma.sync.m16n8k16 (4 warps, 32x32 each), K in steps of 32, im2col stored pixel-contiguous and
//   read by ldmatrix.trans; float accumulation; the epilogue goes through shared memory so the
//   output and residual are accessed coalesced.
// * direct: one thread per output element, for groups with few output channels (depthwise).
// * gemm_nchw_1x1 (DML_CUDA_CONV_GEMM): a 1x1, stride-1, unpadded, ungrouped conv is per image the
//   GEMM y[n] [O, H·W] = w [O, C] · x[n] [C, H·W] on NCHW as it stands: one strided-batched
//   dml_cuda_bmm (w broadcast over the batch; cuBLASLt, with TF32 off, where it exists), then one
//   vectorised pass for bias[o] / residual / ReLU (cuBLASLt's bias runs along the other axis). No
//   layout change: a lone NCHW 1x1 conv reads x once instead of transposing it first.
#include <cstdint>
#include <string>

#include "common.cuh"
#include "mma.cuh"

namespace dml_cuda {
namespace {

struct ConvGeo {
  int64_t N, C, H, W, O, kh, kw, sh, sw, pt, pl, dh, dw, groups;
  int64_t Ho, Wo, Og, Cg, K, P;  // P = N·Ho·Wo pixels, K = Cg·kh·kw
};

template <class T>
__device__ __forceinline__ float epi(const ConvGeo& g, float v, const T* bias, const T* res, int64_t o, int64_t yi, int relu) {
  if (bias) v += to_f(bias[o]);
  if (res) v += to_f(res[yi]);
  return relu && v < 0.0f ? 0.0f : v;
}

// Position (channel, kernel row, kernel column) of im2col row k inside one group; advanced
// incrementally (32-bit, no division in the inner loops: int64 division costs ~70 instructions).
struct KPos {
  int c, r, s;
};
__device__ __forceinline__ KPos kpos(int k, int kh, int kw) {
  const int khw = kh * kw;
  const int c = k / khw, rs = k - c * khw, r = rs / kw;
  return {c, r, rs - r * kw};
}
__device__ __forceinline__ void kadvance(KPos& p, int d, int kh, int kw) {
  p.s += d;
  while (p.s >= kw) {
    p.s -= kw;
    if (++p.r == kh) {
      p.r = 0;
      ++p.c;
    }
  }
}

// One pixel's im2col gather: xb = x + (n·C + group's first channel)·H·W, (ih0, iw0) = the window's
// top-left (may be negative: zero padding by bounds checks).
struct PixelGather {
  const void* xb;
  int ih0, iw0;
  bool ok;
};
template <class T>
__device__ __forceinline__ PixelGather pixel_gather(const ConvGeo& g, const T* x, int64_t cbase, int64_t pix) {
  PixelGather pg{x, 0, 0, pix < g.P};
  if (pg.ok) {
    const int64_t n = pix / (g.Ho * g.Wo);
    const int64_t r = pix % (g.Ho * g.Wo);
    pg.ih0 = static_cast<int>((r / g.Wo) * g.sh - g.pt);
    pg.iw0 = static_cast<int>((r % g.Wo) * g.sw - g.pl);
    pg.xb = x + (n * g.C + cbase) * g.H * g.W;
  }
  return pg;
}
template <class T>
__device__ __forceinline__ T gather(const ConvGeo& g, const PixelGather& pg, const KPos& kp, int k) {
  const int ih = pg.ih0 + kp.r * static_cast<int>(g.dh), iw = pg.iw0 + kp.s * static_cast<int>(g.dw);
  if (!pg.ok || k >= g.K || ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) return from_f<T>(0.0f);
  return static_cast<const T*>(pg.xb)[(static_cast<int64_t>(kp.c) * g.H + ih) * g.W + iw];
}

constexpr int SB = 64, SK = 16;

template <class T>
__global__ void __launch_bounds__(256) conv_simt_kernel(ConvGeo g, const T* __restrict__ x, const T* __restrict__ w,
                                                        const T* __restrict__ bias, const T* __restrict__ res,
                                                        T* __restrict__ y, int relu) {
  __shared__ float Ws[SK][SB + 4];
  __shared__ float Xs[SK][SB + 4];
  const int tid = threadIdx.x;
  const int64_t grp = blockIdx.z;
  const int64_t p0 = (int64_t)blockIdx.x * SB, o0 = (int64_t)blockIdx.y * SB;
  // This thread's im2col column (pixel) for the X tile loads: fixed across the K loop.
  const int lc = tid % SB, lr = tid / SB;  // rows lr, lr+4, lr+8, lr+12
  const int64_t cbase = grp * g.Cg;
  const PixelGather pg = pixel_gather(g, x, cbase, p0 + lc);
  const int kh = static_cast<int>(g.kh), kw = static_cast<int>(g.kw);
  KPos kp = kpos(lr, kh, kw);
  const T* wg = w + grp * g.Og * g.K;
  // W tile loads: thread -> (o = tid / 4, k = (tid % 4) * 4 .. +3)
  const int wo = tid / 4, wk = (tid % 4) * 4;
  const int tx = tid % 16, ty = tid / 16;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < g.K; k0 += SK) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t o = o0 + wo, kk = k0 + wk + j;
      Ws[wk + j][wo] = (o < g.Og && kk < g.K) ? to_f(wg[o * g.K + kk]) : 0.0f;
    }
    {
      KPos q = kp;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        Xs[lr + 4 * j][lc] = to_f(gather<T>(g, pg, q, static_cast<int>(k0) + lr + 4 * j));
        kadvance(q, 4, kh, kw);
      }
      kadvance(kp, SK, kh, kw);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < SK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = Ws[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = Xs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
  const int64_t HW = g.Ho * g.Wo;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t p = p0 + tx + 16 * j;
    if (p >= g.P) continue;
    const int64_t pn = p / HW, pr = p % HW;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t o = o0 + ty + 16 * i;
      if (o >= g.Og) continue;
      const int64_t oc = grp * g.Og + o;
      const int64_t yi = (pn * g.O + oc) * HW + pr;
      y[yi] = from_f<T>(epi(g, acc[i][j], bias, res, oc, yi, relu));
    }
  }
}

// ---- tensor cores: 64 (out channels) x 64 (pixels) per block of 4 warps, K steps of 32 ----------

constexpr int MB = 64, MK = 32, MLD = MK + 8;

template <class T>
__global__ void __launch_bounds__(128) conv_mma_kernel(ConvGeo g, const T* __restrict__ x, const T* __restrict__ w,
                                                       const T* __restrict__ bias, const T* __restrict__ res,
                                                       T* __restrict__ y, int relu) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  // weights As[o][k]; im2col Bk[k][pixel] (pixel-contiguous: conflict-free stores, B fragments by
  // ldmatrix.trans); after the K loop the same bytes hold the float output tile Cs[o][pixel].
  constexpr int BLD = MB + 8, CLD = MB + 4;
  constexpr size_t kAB = sizeof(T) * (MB * MLD + MK * BLD), kC = sizeof(float) * MB * CLD;
  __shared__ __align__(16) unsigned char smem[kAB > kC ? kAB : kC];
  T (*As)[MLD] = reinterpret_cast<T (*)[MLD]>(smem);
  T (*Bk)[BLD] = reinterpret_cast<T (*)[BLD]>(smem + sizeof(T) * MB * MLD);
  float (*Cs)[CLD] = reinterpret_cast<float (*)[CLD]>(smem);
  const int tid = threadIdx.x, warp = tid / kWarp, lane = tid % kWarp;
  const int gq = lane / 4, t4 = lane % 4;
  const int64_t grp = blockIdx.z;
  const int64_t p0 = (int64_t)blockIdx.x * MB, o0 = (int64_t)blockIdx.y * MB;
  const int64_t cbase = grp * g.Cg;
  const T* wg = w + grp * g.Og * g.K;
  // im2col loads: thread -> pixel column tid % 64, k rows (tid / 64) + 2j, j < 16.
  const int lc = tid % MB, lr = tid / MB;
  const PixelGather pg = pixel_gather(g, x, cbase, p0 + lc);
  const int kh = static_cast<int>(g.kh), kw = static_cast<int>(g.kw);
  KPos kp = kpos(lr, kh, kw);
  const bool wvec = (g.K % 8 == 0) && ((reinterpret_cast<uintptr_t>(w) & 15) == 0);
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
  float acc[2][4][4] = {};
  for (int64_t k0 = 0; k0 < g.K; k0 += MK) {
    // weights: 64 rows x 32 k = 256 chunks of 8
    for (int e = tid; e < MB * (MK / 8); e += blockDim.x) {
      const int r = e / (MK / 8), c = (e % (MK / 8)) * 8;
      const int64_t o = o0 + r, kk = k0 + c;
      if (wvec && o < g.Og && kk + 8 <= g.K) {
        *reinterpret_cast<uint4*>(&As[r][c]) = *reinterpret_cast<const uint4*>(wg + o * g.K + kk);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) As[r][c + j] = (o < g.Og && kk + j < g.K) ? wg[o * g.K + kk + j] : from_f<T>(0.0f);
      }
    }
    {
      KPos q = kp;
#pragma unroll 4
      for (int j = 0; j < MK / 2; ++j) {
        Bk[lr + 2 * j][lc] = gather<T>(g, pg, q, static_cast<int>(k0) + lr + 2 * j);
        kadvance(q, 2, kh, kw);
      }
      kadvance(kp, MK, kh, kw);
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < MK; ks += 16) {
      uint32_t af[2][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const T* ar = &As[wm + mi * 16 + gq][ks + t4 * 2];
        af[mi][0] = *reinterpret_cast<const uint32_t*>(ar);
        af[mi][1] = *reinterpret_cast<const uint32_t*>(ar + 8 * MLD);
        af[mi][2] = *reinterpret_cast<const uint32_t*>(ar + 8);
        af[mi][3] = *reinterpret_cast<const uint32_t*>(ar + 8 * MLD + 8);
      }
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        // lane l: k row ks + l%8 (+8 for matrices 1 and 3), pixel column wn + np*16 (+8 for 2 and 3)
        uint32_t r4[4];
        ldmatrix_x4_trans(r4, &Bk[ks + (lane % 8) + ((lane / 8) & 1) * 8][wn + np * 16 + (lane / 16) * 8]);
        bf[2 * np][0] = r4[0];
        bf[2 * np][1] = r4[1];
        bf[2 * np + 1][0] = r4[2];
        bf[2 * np + 1][1] = r4[3];
      }
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_m16n8k16<T>(acc[mi][ni], af[mi], bf[ni]);
    }
    __syncthreads();
  }
  // Epilogue through shared memory: consecutive threads take consecutive pixels of one output
  // channel, so bias/residual reads and output writes are coalesced.
  __syncthreads();
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) Cs[wm + mi * 16 + gq + (e >= 2 ? 8 : 0)][wn + ni * 8 + t4 * 2 + (e & 1)] = acc[mi][ni][e];
  __syncthreads();
  const uint32_t HW = static_cast<uint32_t>(g.Ho * g.Wo);
  for (int e = tid; e < MB * MB; e += blockDim.x) {
    const int r = e / MB, c = e % MB;
    const int64_t o = o0 + r, p = p0 + c;
    if (o >= g.Og || p >= g.P) continue;
    const int64_t oc = grp * g.Og + o;
    const uint32_t pn = static_cast<uint32_t>(p) / HW, pr = static_cast<uint32_t>(p) - pn * HW;
    const int64_t yi = ((int64_t)pn * g.O + oc) * HW + pr;
    y[yi] = from_f<T>(epi(g, Cs[r][c], bias, res, oc, yi, relu));
  }
#else
  (void)g; (void)x; (void)w; (void)bias; (void)res; (void)y; (void)relu;
#endif
}

template <class T>
__global__ void conv_direct_kernel(ConvGeo g, const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                   const T* __restrict__ res, T* __restrict__ y, int relu) {
  const int64_t total = g.N * g.O * g.Ho * g.Wo;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t ow = i % g.Wo, oh = (i / g.Wo) % g.Ho, oc = (i / (g.Wo * g.Ho)) % g.O, n = i / (g.Wo * g.Ho * g.O);
    const int64_t grp = oc / g.Og;
    const T* wr = w + oc * g.K;
    float acc = 0.0f;
    for (int64_t c = 0; c < g.Cg; ++c) {
      const T* xp = x + (n * g.C + grp * g.Cg + c) * g.H * g.W;
      for (int64_t r = 0; r < g.kh; ++r) {
        const int64_t ih = oh * g.sh - g.pt + r * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t s = 0; s < g.kw; ++s) {
          const int64_t iw = ow * g.sw - g.pl + s * g.dw;
          if (iw < 0 || iw >= g.W) continue;
          acc += to_f(xp[ih * g.W + iw]) * to_f(wr[(c * g.kh + r) * g.kw + s]);
        }
      }
    }
    y[i] = from_f<T>(epi(g, acc, bias, res, oc, i, relu));
  }
}

// y[n, o, p] = act(y[n, o, p] + bias[o] + res[n, o, p]) after the 1x1 GEMM; V elements per thread,
// all of one channel (V divides H·W) and 16-byte aligned when V > 1. hw_packs = H·W / V: pack i
// belongs to channel (i / hw_packs) % O.
template <class T, int V>
__global__ void nchw_channel_epilogue_kernel(int64_t groups, int64_t hw_packs, int64_t O, const T* __restrict__ bias,
                                             const T* __restrict__ res, T* __restrict__ y, int relu) {
  struct alignas(V * sizeof(T)) Pack {
    T v[V];
  };
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < groups;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float b = bias ? to_f(bias[(i / hw_packs) % O]) : 0.0f;
    Pack py = reinterpret_cast<const Pack*>(y)[i];
    Pack pr{};
    if (res) pr = reinterpret_cast<const Pack*>(res)[i];
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = to_f(py.v[k]) + b;
      if (res) v += to_f(pr.v[k]);
      py.v[k] = from_f<T>(relu && v < 0.0f ? 0.0f : v);
    }
    reinterpret_cast<Pack*>(y)[i] = py;
  }
}

// The GEMM path for a plain 1x1 conv (see the file comment). Returns -1 when it does not apply
// (geometry, or a residual overlapping y: the GEMM would overwrite it before the epilogue reads it).
int conv1x1_gemm(int dtype, const dml_cuda_conv2d_shape* s, const void* x, const void* w, const void* bias,
                 const void* res, void* y, int relu, cudaStream_t st) {
  const bool plain = s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 && s->pb == 0 &&
                     s->pr == 0 && s->groups == 1;
  if (!plain) return -1;
  const size_t es = dtype == 0 ? 4 : 2;
  const int64_t hw = s->H * s->W, total = s->N * s->O * hw;
  const size_t bytes = static_cast<size_t>(total) * es;
  if (res) {
    const char *r0 = static_cast<const char*>(res), *y0 = static_cast<const char*>(y);
    if (r0 < y0 + bytes && y0 < r0 + bytes) return -1;
  }
  const bool half_like = dtype == 1 || dtype == 2;
  const int gimpl = DML_GPU_HAS_CUBLASLT ? DML_CUDA_GEMM_CUBLASLT
                  : half_like && DML_GPU_ROCM ? DML_CUDA_GEMM_MFMA : DML_CUDA_GEMM_SIMT;
  const int64_t ys[1] = {s->N}, as[1] = {1}, bs[1] = {s->N};
  if (int rc = dml_cuda_bmm(dtype, DML_CUDA_B_RRR, 1, ys, as, bs, s->O, hw, s->C, w, x, y, 0, gimpl, st)) return rc;
  if (!bias && !res && !relu) return 0;
  auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  return dispatch_float(dtype, "dml_cuda_conv2d (1x1 GEMM epilogue)", [&](auto tag) -> int {
    using T = decltype(tag);
    constexpr int V = 16 / sizeof(T);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(res);
    T* yt = static_cast<T*>(y);
    if (hw % V == 0 && al16(y) && (!res || al16(res)))
      nchw_channel_epilogue_kernel<T, V><<<blocks_for(total / V, 256), 256, 0, st>>>(total / V, hw / V, s->O, bt, rt, yt, relu);
    else
      nchw_channel_epilogue_kernel<T, 1><<<blocks_for(total, 256), 256, 0, st>>>(total, hw, s->O, bt, rt, yt, relu);
    return check_launch("dml_cuda_conv2d (1x1 GEMM epilogue)");
  });
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_conv2d(int dtype, const dml_cuda_conv2d_shape* s, const void* x, const void* w, const void* bias,
                               const void* res, void* y, int relu, int impl, void* stream) {
  if (!s) return fail("dml_cuda_conv2d: shape is NULL");
  if (s->N < 0 || s->C < 1 || s->H < 1 || s->W < 1 || s->O < 1 || s->kh < 1 || s->kw < 1 || s->sh < 1 || s->sw < 1 ||
      s->dh < 1 || s->dw < 1 || s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0 || s->groups < 1 ||
      s->C % s->groups != 0 || s->O % s->groups != 0)
    return fail("dml_cuda_conv2d: invalid geometry (extents/strides/dilations >= 1, pads >= 0, groups dividing C and O)");
  ConvGeo g{};
  g.N = s->N; g.C = s->C; g.H = s->H; g.W = s->W; g.O = s->O; g.kh = s->kh; g.kw = s->kw; g.sh = s->sh; g.sw = s->sw;
  g.pt = s->pt; g.pl = s->pl; g.dh = s->dh; g.dw = s->dw; g.groups = s->groups;
  const int64_t span_h = s->H + s->pt + s->pb - s->dh * (s->kh - 1) - 1, span_w = s->W + s->pl + s->pr - s->dw * (s->kw - 1) - 1;
  if (span_h < 0 || span_w < 0) return fail("dml_cuda_conv2d: the (dilated) kernel is larger than the padded input");
  g.Ho = span_h / s->sh + 1;
  g.Wo = span_w / s->sw + 1;
  g.Og = s->O / s->groups;
  g.Cg = s->C / s->groups;
  g.K = g.Cg * s->kh * s->kw;
  g.P = g.N * g.Ho * g.Wo;
  if (g.P == 0) return 0;
  if (g.P > INT32_MAX) return fail("dml_cuda_conv2d: N·Ho·Wo exceeds the 32-bit pixel index range");
  if (g.K > INT32_MAX / 2 || g.H > INT32_MAX / 4 || g.W > INT32_MAX / 4 || g.Cg * g.H > INT32_MAX)
    return fail("dml_cuda_conv2d: C/groups·kh·kw or the spatial extents exceed the 32-bit index range");
  if (s->groups > 65535 || (g.Og + SB - 1) / SB > 65535) return fail("dml_cuda_conv2d: too many groups / output channels");
  cudaStream_t st = as_stream(stream);
  // impl: 0 automatic, 1 SIMT implicit GEMM, 2 mma implicit GEMM, 3 direct, 4 GEMM for plain 1x1
  // convs (automatic picks it wherever it applies; elsewhere it behaves as automatic).
  if (impl < DML_CUDA_CONV_AUTO || impl > DML_CUDA_CONV_GEMM)
    return fail("dml_cuda_conv2d: unknown implementation " + std::to_string(impl));
  const bool half_like = dtype == 1 || dtype == 2;
  if (impl == DML_CUDA_CONV_AUTO || impl == DML_CUDA_CONV_GEMM) {
    const int rc = conv1x1_gemm(dtype, s, x, w, bias, res, y, relu, st);
    if (rc >= 0) return rc;
  }
  int use = impl == DML_CUDA_CONV_GEMM ? 0 : impl;
  if (use == 0) use = g.Og < 16 ? 3 : (half_like && device_cc_major() >= 8 ? 2 : 1);
  if (use == 2 && (!half_like || device_cc_major() < 8))
    return fail("dml_cuda_conv2d: the mma kernel needs float16/bfloat16 on sm_80+");
  return dispatch_float(dtype, "dml_cuda_conv2d", [&](auto tag) -> int {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    const T* wt = static_cast<const T*>(w);
    const T* bt = static_cast<const T*>(bias);
    const T* rt = static_cast<const T*>(res);
    T* yt = static_cast<T*>(y);
    if (use == 3) {
      const int64_t total = g.N * g.O * g.Ho * g.Wo;
      conv_direct_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(g, xt, wt, bt, rt, yt, relu);
      return check_launch("dml_cuda_conv2d (direct)");
    }
    const dim3 grid(static_cast<unsigned>((g.P + SB - 1) / SB), static_cast<unsigned>((g.Og + SB - 1) / SB),
                    static_cast<unsigned>(g.groups));
    if (use == 2) {
      if constexpr (sizeof(T) == 2) {
        conv_mma_kernel<T><<<grid, 128, 0, st>>>(g, xt, wt, bt, rt, yt, relu);
        return check_launch("dml_cuda_conv2d (mma)");
      }
    }
    conv_simt_kernel<T><<<grid, 256, 0, st>>>(g, xt, wt, bt, rt, yt, relu);
    return check_launch("dml_cuda_conv2d (simt)");
  });
}
