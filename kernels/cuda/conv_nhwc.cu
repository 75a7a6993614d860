// conv2d as an implicit GEMM over channels-last activations on tensor cores (fp16/bf16, sm_80+,
// groups == 1): the GEMM [N·Ho·Wo pixels] x [O] x [kh·kw·C] with the weights prepacked once to
// [O][kh][kw][C] (dml_cuda_conv2d_pack_ohwi), so every K step of 32 is one kernel tap's run of
// 32 contiguous channels of one pixel (4 x 16-byte cp.async) on both operands.
//
// * Block tile BM pixels x BN output channels x 32, warps of 64x32 or 32x32, mma.sync.m16n8k16
//   with both fragments by ldmatrix (no transposes: A is [pixel][k], B is [o][k], both k-contiguous
//   in shared memory, rows padded to 40 elements so ldmatrix rows hit distinct banks), a 4-stage
//   cp.async ring (one __syncthreads per K step). Float accumulation.
// * The K loop runs over (kernel row, kernel column, channel block of 32): a channel block past C
//   and taps outside the image are zero-filled by cp.async's src-size 0 (padding needs no branch
//   in the math), so any C % 8 == 0 takes the vector path ("vec").
// * Any other input (C % 8 != 0 like the 3-channel stem, or an input not channels-last: the
//   strides are arguments) takes the "gather" path: the same kernel with the A and B tiles loaded
//   element by element over the flat K = kh·kw·C.
// * Epilogue: + bias[o], + residual, ReLU. Channels-last outputs with O % 8 == 0 stage the float
//   tile in shared memory and finish 8 channels of a pixel per thread (16-byte loads and stores);
//   otherwise from the registers, as channel pairs (4 bytes) when the output and residual are
//   channel-contiguous, else element by element through their strides (an NCHW output at the end
//   of a channels-last chain). y may alias res (each element is read and written by one thread).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "conv_nhwc_internal.cuh"
#include "gemm_internal.h"

namespace dml_cuda {
// The DML_CUDA_CONV_NHWC_AUTO knob (status.cu): the channels-last conv's automatic tile rule.
extern int g_conv_nhwc_auto;
}  // namespace dml_cuda

namespace dml_cuda {
namespace {

template <class T, int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, bool VEC>
__global__ void __launch_bounds__(WARPS_M* WARPS_N * 32)
    conv_nhwc_kernel(NhwcGeo g, const T* __restrict__ x, const T* __restrict__ wp, const T* __restrict__ bias,
                     const T* res, T* y, int flags) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int NT = WARPS_M * WARPS_N * 32;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N, MI = WTM / 16, NI = WTN / 8;
  static_assert(NI % 2 == 0 && MI >= 1, "warp tile");
  static_assert(VEC || NT % BM == 0, "gather: one fixed pixel row per thread");
  constexpr int kBK = BK, kLD = BK + 8;  // rows padded by 16 bytes: ldmatrix's 8 rows hit distinct banks
  constexpr int CPR = BK / 8;              // 16-byte chunks per row and stage
  constexpr int AIT = BM * CPR / NT, BIT = BN * CPR / NT;
  static_assert(AIT >= 1 && BIT >= 1, "chunks");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* As = reinterpret_cast<T*>(smem_raw);  // [STAGES][BM][kLD]
  T* Bs = As + STAGES * BM * kLD;          // [STAGES][BN][kLD]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // 1-D grid, output-channel tiles fastest: the blocks sharing one pixel tile run together, so its
  // activations come from DRAM once (the weights of a ResNet layer stay in L2).
  const int otiles = (g.O + BN - 1) / BN;
  const int m0 = (blockIdx.x / otiles) * BM, o0 = (blockIdx.x % otiles) * BN;
  const int HoWo = g.Ho * g.Wo;

  // ---- loader state -------------------------------------------------------------------------
  // vec: thread -> chunk column j = tid % CPR (channels j*8..j*8+7 of the step), rows tid/CPR + i*NT/CPR.
  // gather: thread -> pixel row tid % BM (fixed), k columns tid / BM + q * (NT / BM).
  constexpr int AROWS = VEC ? AIT : 1;
  int64_t abase[AROWS];
  int aih[AROWS], aiw[AROWS];
#pragma unroll
  for (int i = 0; i < AROWS; ++i) {
    const int row = VEC ? tid / CPR + i * (NT / CPR) : tid % BM;
    nhwc_pixel_origin(g, HoWo, m0 + row, abase[i], aih[i], aiw[i]);
  }

  // gather: a table of each flat k's (channel, tap) offset, so the loads need no division.
  constexpr int kTab = VEC ? 1 : 512;
  __shared__ int64_t tab_off[kTab];
  __shared__ int2 tab_rs[kTab];
  const bool use_tab = !VEC && g.K <= kTab;
  int64_t gbase = 0;  // gather: the pixel's window origin (may lie in the padding; only read in bounds)
  if constexpr (!VEC) {
    gbase = abase[0] + static_cast<int64_t>(aih[0]) * g.xs[2] + static_cast<int64_t>(aiw[0]) * g.xs[3];
    if (use_tab) {
      for (int k = tid; k < g.K; k += NT) {
        const int tap = k / g.C, c = k - tap * g.C, r = tap / g.kw, s = tap - r * g.kw;
        tab_off[k] = c * g.xs[1] + static_cast<int64_t>(r * g.dh) * g.xs[2] + static_cast<int64_t>(s * g.dw) * g.xs[3];
        tab_rs[k] = make_int2(r * g.dh, s * g.dw);
      }
      __syncthreads();
    }
  }

  auto load_tile = [&](int kt, int st) {
    T* as = As + st * BM * kLD;
    T* bs = Bs + st * BN * kLD;
    if constexpr (VEC) {
      const int tap = kt / g.ctiles, c0 = (kt - tap * g.ctiles) * kBK;
      const int r = tap / g.kw, s = tap - r * g.kw;
      const int j = tid % CPR, c = c0 + j * 8;
      const bool cok = c < g.C;
#pragma unroll
      for (int i = 0; i < AIT; ++i) {
        const int row = tid / CPR + i * (NT / CPR);
        const int ih = aih[i] + r * g.dh, iw = aiw[i] + s * g.dw;
        const bool ok = cok && static_cast<unsigned>(ih) < static_cast<unsigned>(g.H) &&
                        static_cast<unsigned>(iw) < static_cast<unsigned>(g.W);
        const T* src = ok ? x + abase[i] + ih * g.xs[2] + iw * g.xs[3] + c : x;
        cp_async16(as + row * kLD + j * 8, src, ok);
      }
#pragma unroll
      for (int i = 0; i < BIT; ++i) {
        const int row = tid / CPR + i * (NT / CPR);
        const int o = o0 + row;
        const bool ok = cok && o < g.O;
        const T* src = ok ? wp + static_cast<int64_t>(o) * g.K + tap * g.C + c : wp;
        cp_async16(bs + row * kLD + j * 8, src, ok);
      }
    } else {
      const int k0 = kt * kBK;
      {
        const int row = tid % BM;
#pragma unroll 4
        for (int kk = tid / BM; kk < kBK; kk += NT / BM) {
          const int k = k0 + kk;
          T v = from_f<T>(0.0f);
          if (use_tab) {
            if (k < g.K) {
              const int2 rs = tab_rs[k];
              const int ih = aih[0] + rs.x, iw = aiw[0] + rs.y;
              if (static_cast<unsigned>(ih) < static_cast<unsigned>(g.H) && static_cast<unsigned>(iw) < static_cast<unsigned>(g.W))
                v = x[gbase + tab_off[k]];
            }
          } else if (k < g.K) {
            const int tap = k / g.C, c = k - tap * g.C, r = tap / g.kw, s = tap - r * g.kw;
            const int ih = aih[0] + r * g.dh, iw = aiw[0] + s * g.dw;
            if (static_cast<unsigned>(ih) < static_cast<unsigned>(g.H) && static_cast<unsigned>(iw) < static_cast<unsigned>(g.W))
              v = x[abase[0] + c * g.xs[1] + ih * g.xs[2] + iw * g.xs[3]];
          }
          as[row * kLD + kk] = v;
        }
      }
      for (int e = tid; e < BN * kBK; e += NT) {
        const int row = e / kBK, kk = e % kBK, o = o0 + row, k = k0 + kk;
        bs[row * kLD + kk] = (o < g.O && k < g.K) ? wp[static_cast<int64_t>(o) * g.K + k] : from_f<T>(0.0f);
      }
    }
  };

  const int wm = (warp / WARPS_N) * WTM, wn = (warp % WARPS_N) * WTN;
  float acc[MI][NI][4];
#pragma unroll
  for (int a = 0; a < MI; ++a)
#pragma unroll
    for (int b = 0; b < NI; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[a][b][e] = 0.0f;

  const int KT = g.ktiles;
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < KT) load_tile(st, st);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait_n<STAGES - 2>();
    __syncthreads();  // tile kt landed for every thread; everyone is done with the stage refilled next
    {
      const int nk = kt + STAGES - 1;
      if (nk < KT) load_tile(nk, nk % STAGES);
      cp_async_commit();
    }
    const T* as = As + (kt % STAGES) * BM * kLD;
    const T* bs = Bs + (kt % STAGES) * BN * kLD;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[MI][4], bf[NI][2];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi) ldmatrix_x4(af[mi], as + (wm + mi * 16 + (lane % 16)) * kLD + ks + (lane / 16) * 8);
#pragma unroll
      for (int np = 0; np < NI / 2; ++np) {
        uint32_t r4[4];
        ldmatrix_x4(r4, bs + (wn + np * 16 + (lane % 8) + (lane / 16) * 8) * kLD + ks + ((lane / 8) % 2) * 8);
        bf[2 * np][0] = r4[0];
        bf[2 * np][1] = r4[1];
        bf[2 * np + 1][0] = r4[2];
        bf[2 * np + 1][1] = r4[3];
      }
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) mma_m16n8k16<T>(acc[mi][ni], af[mi], bf[ni]);
    }
  }
  cp_async_wait_n<0>();

  // ---- epilogue ------------------------------------------------------------------------------
  const int gq = lane / 4, t4 = lane % 4;
  // flags: bit 0 ReLU, bit 2 the staged 16-byte epilogue below, bit 1 channel-pair stores allowed (the host checked unit channel strides,
  // even O, even strides and 4-byte aligned y / res).
  const bool relu = flags & 1, pair = flags & 2;
  if (flags & 4) {
    // Channels-last output with O % 8 == 0 (host-checked alignment): the float tile goes through
    // shared memory (the pipeline's bytes) and every thread finishes 8 consecutive channels of one
    // pixel with 16-byte bias / residual loads and output stores.
    constexpr int CLD = BN + 4;
    static_assert(BM * CLD * 4 <= STAGES * (BM + BN) * kLD * static_cast<int>(sizeof(T)), "C tile fits the ring");
    float* Cs = reinterpret_cast<float*>(smem_raw);
    __syncthreads();  // every warp is past its last ldmatrix
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int ni = 0; ni < NI; ++ni)
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
          *reinterpret_cast<float2*>(Cs + (wm + mi * 16 + gq + hf * 8) * CLD + wn + ni * 8 + t4 * 2) =
              make_float2(acc[mi][ni][hf * 2], acc[mi][ni][hf * 2 + 1]);
    __syncthreads();
    constexpr int CPR = BN / 8;
    for (int e = tid; e < BM * CPR; e += NT) {
      const int row = e / CPR, ch = e - row * CPR;
      const int m = m0 + row, o = o0 + ch * 8;
      if (m >= g.P || o >= g.O) continue;
      const float4 c0 = *reinterpret_cast<const float4*>(Cs + row * CLD + ch * 8);
      const float4 c1 = *reinterpret_cast<const float4*>(Cs + row * CLD + ch * 8 + 4);
      float v[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
      nhwc_store8<T>(g, m, o, v, bias, res, y, relu);
    }
    return;
  }
#pragma unroll
  for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int m = m0 + wm + mi * 16 + gq + hf * 8;
      if (m >= g.P) continue;
      const int n = m / HoWo, rr = m - n * HoWo, ho = rr / g.Wo, wo = rr - ho * g.Wo;
      const int64_t yb = n * g.ys[0] + ho * g.ys[2] + wo * g.ys[3];
      const int64_t rb = res ? n * g.rs[0] + ho * g.rs[2] + wo * g.rs[3] : 0;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int o = o0 + wn + ni * 8 + t4 * 2;
        if (o >= g.O) continue;
        float v0 = acc[mi][ni][hf * 2], v1 = acc[mi][ni][hf * 2 + 1];
        if (pair) {  // o + 1 < O since O is even
          if (bias) {
            v0 += to_f(bias[o]);
            v1 += to_f(bias[o + 1]);
          }
          if (res) {
            const uint32_t rv = *reinterpret_cast<const uint32_t*>(res + rb + o);
            const T* rp = reinterpret_cast<const T*>(&rv);
            v0 += to_f(rp[0]);
            v1 += to_f(rp[1]);
          }
          if (relu) {
            v0 = v0 < 0.0f ? 0.0f : v0;
            v1 = v1 < 0.0f ? 0.0f : v1;
          }
          *reinterpret_cast<uint32_t*>(y + yb + o) = pack2<T>(v0, v1);
        } else {
#pragma unroll
          for (int q = 0; q < 2; ++q) {
            const int oc = o + q;
            if (oc >= g.O) continue;
            float v = q ? v1 : v0;
            if (bias) v += to_f(bias[oc]);
            if (res) v += to_f(res[rb + oc * g.rs[1]]);
            if (relu && v < 0.0f) v = 0.0f;
            y[yb + oc * g.ys[1]] = from_f<T>(v);
          }
        }
      }
    }
  }
#else
  (void)g; (void)x; (void)wp; (void)bias; (void)res; (void)y; (void)flags;
#endif
}

template <class T>
__global__ void pack_ohwi_kernel(int64_t O, int64_t C, int64_t khw, const T* __restrict__ w, T* __restrict__ wp) {
  const int64_t total = O * C * khw;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    // i indexes wp[o][tap][c]
    const int64_t c = i % C, tap = (i / C) % khw, o = i / (C * khw);
    wp[i] = w[(o * C + c) * khw + tap];
  }
}

}  // namespace

int conv_sm_count() {
  static int n = 0;
  if (n == 0) {
    int dev = 0, v = 0;
#if DML_GPU_ROCM  // never launched there (no mma.sync), but the library is compiled by hipcc too
    if (hipGetDevice(&dev) == hipSuccess && hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, dev) == hipSuccess)
      n = v;
#else
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
      n = v;
#endif
    if (n <= 0) n = 108;
  }
  return n;
}

namespace {

template <class T, int BM, int BN, int BK, int WM, int WN, int ST, bool VEC>
int launch_nhwc(NhwcGeo g, const T* x, const T* wp, const T* bias, const T* res, T* y, int flags, cudaStream_t st) {
  auto kern = conv_nhwc_kernel<T, BM, BN, BK, WM, WN, ST, VEC>;
  constexpr int smem = ST * (BM + BN) * (BK + 8) * static_cast<int>(sizeof(T));
  static bool attr_set = false;  // once per instantiation (idempotent: a race sets it twice)
  if (!attr_set) {
    if (int e = check(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                      "dml_cuda_conv2d_nhwc: cudaFuncSetAttribute"))
      return e;
    attr_set = true;
  }
  // K steps: vec walks (kernel row, kernel column, channel block of BK); gather the flat K.
  g.ctiles = (g.C + BK - 1) / BK;
  g.ktiles = VEC ? g.kh * g.kw * g.ctiles : (g.K + BK - 1) / BK;
  const int64_t blocks = ((int64_t)g.P + BM - 1) / BM * (((int64_t)g.O + BN - 1) / BN);
  if (blocks > INT32_MAX) return fail("dml_cuda_conv2d_nhwc: too many tiles for one launch");
  const dim3 grid(static_cast<unsigned>(blocks));
  kern<<<grid, WM * WN * 32, smem, st>>>(g, x, wp, bias, res, y, flags);
  return check_launch("dml_cuda_conv2d_nhwc");
}

// The gather path (C % 8 != 0 or a non-channels-last input: the stem, chain edges) has one tile,
// 64x64x32 (the fastest on the ResNet-50 stem);
// the tile choice applies to the vector path.
template <class T, int BM, int BN, int BK, int WM, int WN, int ST>
int launch_nhwc(bool vec, const NhwcGeo& g, const T* x, const T* wp, const T* bias, const T* res, T* y, int flags,
                cudaStream_t st) {
  return vec ? launch_nhwc<T, BM, BN, BK, WM, WN, ST, true>(g, x, wp, bias, res, y, flags, st)
             : launch_nhwc<T, 64, 64, 32, 2, 2, 4, false>(g, x, wp, bias, res, y, flags, st);
}

// The unprofiled tile: the largest tile that still gives every multiprocessor a block.
// Measured on the H200 over ResNet-50's 53 convs (`bench/cuda/device_run.sh conv`):
// K steps of 64 win wherever C >= 64 (fewer barriers per MMA); 128x128 once there are at least
// half a wave of such blocks, else 128x64 (layer 4: 13 pixel tiles). C < 64 keeps K steps of 32.
int auto_tile(const NhwcGeo& g) {
  const int64_t sms = conv_sm_count();
  auto blocks = [&](int bm, int bn) { return ((int64_t)g.P + bm - 1) / bm * (((int64_t)g.O + bn - 1) / bn); };
  const bool wide = g.O > 64 && 2 * blocks(128, 128) >= sms;
  if (g.C >= 64) return wide ? DML_CUDA_CONV_TILE_128x128x64 : DML_CUDA_CONV_TILE_128x64x64;
  if (wide) return DML_CUDA_CONV_TILE_128x128;
  if (2 * blocks(128, 64) >= sms) return DML_CUDA_CONV_TILE_128x64;
  return DML_CUDA_CONV_TILE_64x64;
}

}  // namespace
}  // namespace dml_cuda

using namespace dml_cuda;

extern "C" int dml_cuda_conv2d_pack_ohwi(int dtype, int64_t O, int64_t C, int64_t kh, int64_t kw, const void* w, void* wp,
                                         void* stream) {
  if (O < 1 || C < 1 || kh < 1 || kw < 1 || !w || !wp) return fail("dml_cuda_conv2d_pack_ohwi: invalid extents or NULL pointer");
  return dispatch_float(dtype, "dml_cuda_conv2d_pack_ohwi", [&](auto tag) -> int {
    using T = decltype(tag);
    const int64_t total = O * C * kh * kw;
    pack_ohwi_kernel<T><<<blocks_for(total, 256), 256, 0, as_stream(stream)>>>(O, C, kh * kw, static_cast<const T*>(w),
                                                                               static_cast<T*>(wp));
    return check_launch("dml_cuda_conv2d_pack_ohwi");
  });
}

extern "C" int dml_cuda_conv2d_nhwc(int dtype, const dml_cuda_conv2d_shape* s, const int64_t* xs, const void* x,
                                    const void* wp, const void* bias, const int64_t* rs, const void* res,
                                    const int64_t* ys, void* y, int relu, int tile, void* stream) {
  if (!s || !xs || !ys || (res && !rs)) return fail("dml_cuda_conv2d_nhwc: shape or strides NULL");
  if (dtype != 1 && dtype != 2) return fail("dml_cuda_conv2d_nhwc: float16/bfloat16 only");
  if (device_cc_major() < 8) return fail("dml_cuda_conv2d_nhwc: needs an sm_80+ GPU (mma.sync)");
  if (s->groups != 1) return fail("dml_cuda_conv2d_nhwc: groups must be 1 (grouped convs take dml_cuda_conv2d)");
  if (s->N < 0 || s->C < 1 || s->H < 1 || s->W < 1 || s->O < 1 || s->kh < 1 || s->kw < 1 || s->sh < 1 || s->sw < 1 ||
      s->dh < 1 || s->dw < 1 || s->pt < 0 || s->pl < 0 || s->pb < 0 || s->pr < 0)
    return fail("dml_cuda_conv2d_nhwc: invalid geometry (extents/strides/dilations >= 1, pads >= 0)");
  const int64_t span_h = s->H + s->pt + s->pb - s->dh * (s->kh - 1) - 1, span_w = s->W + s->pl + s->pr - s->dw * (s->kw - 1) - 1;
  if (span_h < 0 || span_w < 0) return fail("dml_cuda_conv2d_nhwc: the (dilated) kernel is larger than the padded input");
  const int64_t Ho = span_h / s->sh + 1, Wo = span_w / s->sw + 1, P = s->N * Ho * Wo, K = s->C * s->kh * s->kw;
  if (P == 0) return 0;
  const int64_t lim = INT32_MAX / 4;
  if (P > lim || K > lim || s->O > lim || s->H > lim || s->W > lim || s->pt > lim || s->pl > lim ||
      s->dh * s->kh > lim || s->dw * s->kw > lim || Ho * s->sh > lim || Wo * s->sw > lim || (s->O + 63) / 64 > 65535)
    return fail("dml_cuda_conv2d_nhwc: extents exceed the kernel's 32-bit index range");
  NhwcGeo g{};
  g.N = (int)s->N; g.C = (int)s->C; g.H = (int)s->H; g.W = (int)s->W; g.O = (int)s->O; g.kh = (int)s->kh; g.kw = (int)s->kw;
  g.sh = (int)s->sh; g.sw = (int)s->sw; g.pt = (int)s->pt; g.pl = (int)s->pl; g.dh = (int)s->dh; g.dw = (int)s->dw;
  g.Ho = (int)Ho; g.Wo = (int)Wo; g.P = (int)P; g.K = (int)K;
  for (int i = 0; i < 4; ++i) {
    g.xs[i] = xs[i];
    g.ys[i] = ys[i];
    g.rs[i] = res ? rs[i] : 0;
  }
  auto al16 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  auto al4 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3) == 0; };
  const bool vec = g.C % 8 == 0 && xs[1] == 1 && xs[0] % 8 == 0 && xs[2] % 8 == 0 && xs[3] % 8 == 0 && al16(x) && al16(wp);
  // The channel-pair stores need 4-byte aligned pairs: even strides and aligned bases.
  const bool ypair = ys[1] == 1 && g.O % 2 == 0 && ys[0] % 2 == 0 && ys[2] % 2 == 0 && ys[3] % 2 == 0 && al4(y);
  const bool rpair = !res || (rs[1] == 1 && rs[0] % 2 == 0 && rs[2] % 2 == 0 && rs[3] % 2 == 0 && al4(res));
  const bool pair_ok = ypair && rpair;
  auto even8 = [](const int64_t* st) { return st[1] == 1 && st[0] % 8 == 0 && st[2] % 8 == 0 && st[3] % 8 == 0; };
  const bool vec8 = g.O % 8 == 0 && even8(ys) && al16(y) && (!res || (even8(rs) && al16(res))) && (!bias || al16(bias));
  if (tile < DML_CUDA_CONV_TILE_AUTO || tile > DML_CUDA_CONV_TILE_MMA_AUTO)
    return fail("dml_cuda_conv2d_nhwc: unknown tile " + std::to_string(tile));
  cudaStream_t st = as_stream(stream);
  // A 1x1 / stride 1 / unpadded conv over dense channels-last x, y (and res) is a plain GEMM.
  auto dense_nhwc = [&](const int64_t* t, int64_t c, int64_t h, int64_t w) {
    return t[1] == 1 && t[3] == c && t[2] == w * c && t[0] == h * w * c;
  };
  const bool plain = s->kh == 1 && s->kw == 1 && s->sh == 1 && s->sw == 1 && s->pt == 0 && s->pl == 0 && s->pb == 0 &&
                     s->pr == 0 && dense_nhwc(xs, g.C, g.H, g.W) && dense_nhwc(ys, g.O, g.Ho, g.Wo) &&
                     (!res || dense_nhwc(rs, g.O, g.Ho, g.Wo));
#if DML_GPU_CUDA
  const bool wg_ok = vec && vec8 && conv_wgmma_device();
#else
  const bool wg_ok = false;
#endif
  const int64_t sms = conv_sm_count();
  const int64_t wide_blocks = ((int64_t)g.P + 127) / 128 * (((int64_t)g.O + 127) / 128);
  if (tile == DML_CUDA_CONV_TILE_AUTO) {
    // 0 default rule, 1 mma, 2 the wgmma conv for everything it takes, 3 plain 1x1 as the own TMA GEMM
    const int mode = g_conv_nhwc_auto;  // the DML_CUDA_CONV_NHWC_AUTO knob (status.cu)
    if (mode == 1 || !wg_ok) tile = DML_CUDA_CONV_TILE_MMA_AUTO;
    else if (plain && mode == 0) tile = DML_CUDA_CONV_TILE_GEMM_CUBLASLT;
    else if (plain && mode == 3) tile = DML_CUDA_CONV_TILE_GEMM_WGMMA;
    else {
      // Measured on the H200 (ResNet-50 b32): 128x128 (one block per SM) wins from half a wave of
      // its blocks on (layer 3's 3x3: 98 blocks), 128x64 below that (layer 4's 3x3: 52 / 104 blocks), 64x64 only where
      // even 128x64 gives less than half a wave; O = 64 (layer 1) takes 128x64.
      const int64_t mid_blocks = ((int64_t)g.P + 127) / 128 * (((int64_t)g.O + 63) / 64);
      if (g.O > 64 && 2 * wide_blocks >= sms) tile = DML_CUDA_CONV_TILE_WGMMA_128x128;
      else if (2 * mid_blocks >= sms) tile = DML_CUDA_CONV_TILE_WGMMA_128x64;
      else tile = DML_CUDA_CONV_TILE_WGMMA_64x64;
    }
  }
  if (tile == DML_CUDA_CONV_TILE_GEMM_CUBLASLT || tile == DML_CUDA_CONV_TILE_GEMM_WGMMA) {
    if (plain) {
      const int epi = res ? (relu ? DML_CUDA_EPI_ADD_RELU : DML_CUDA_EPI_ADD) : (relu ? DML_CUDA_EPI_RELU : DML_CUDA_EPI_NONE);
      return dml_cuda_gemm(dtype, DML_CUDA_B_RCR, P, s->O, s->C, x, wp, bias, res, y, epi, 0,
                           tile == DML_CUDA_CONV_TILE_GEMM_CUBLASLT ? DML_CUDA_GEMM_CUBLASLT : DML_CUDA_GEMM_WGMMA, stream);
    }
    tile = DML_CUDA_CONV_TILE_MMA_AUTO;
  }
#if DML_GPU_CUDA
  if (tile == DML_CUDA_CONV_TILE_WGMMA_128x128 || tile == DML_CUDA_CONV_TILE_WGMMA_128x64 ||
      tile == DML_CUDA_CONV_TILE_WGMMA_64x64) {
    if (wg_ok)
      return conv_nhwc_wgmma(dtype, tile == DML_CUDA_CONV_TILE_WGMMA_64x64 ? 64 : 128,
                             tile == DML_CUDA_CONV_TILE_WGMMA_128x128 ? 128 : 64, g, x, wp, bias, res, y, relu != 0, st);
    tile = DML_CUDA_CONV_TILE_MMA_AUTO;
  }
#endif
  if (tile >= DML_CUDA_CONV_TILE_WGMMA_128x128) tile = auto_tile(g);  // MMA_AUTO, or a wgmma tile elsewhere than CUDA
  return dispatch_float(dtype, "dml_cuda_conv2d_nhwc", [&](auto tag) -> int {
    using T = decltype(tag);
    if constexpr (sizeof(T) != 2) {
      return fail("dml_cuda_conv2d_nhwc: float16/bfloat16 only");
    } else {
      const T* xt = static_cast<const T*>(x);
      const T* wt = static_cast<const T*>(wp);
      const T* bt = static_cast<const T*>(bias);
      const T* rt = static_cast<const T*>(res);
      T* yt = static_cast<T*>(y);
      const NhwcGeo& gg = g;
      const int relu_flags = relu ? 1 : 0;
      const int flags = relu_flags | (pair_ok ? 2 : 0) | (vec8 ? 4 : 0);
      switch (tile) {
        case DML_CUDA_CONV_TILE_128x128:
          return launch_nhwc<T, 128, 128, 32, 2, 4, 4>(vec, gg, xt, wt, bt, rt, yt, flags, st);
        case DML_CUDA_CONV_TILE_128x64:
          return launch_nhwc<T, 128, 64, 32, 2, 2, 4>(vec, gg, xt, wt, bt, rt, yt, flags, st);
        case DML_CUDA_CONV_TILE_128x128x64:
          return launch_nhwc<T, 128, 128, 64, 2, 4, 3>(vec, gg, xt, wt, bt, rt, yt, flags, st);
        case DML_CUDA_CONV_TILE_128x64x64:
          return launch_nhwc<T, 128, 64, 64, 2, 2, 3>(vec, gg, xt, wt, bt, rt, yt, flags, st);
        default:
          return launch_nhwc<T, 64, 64, 32, 2, 2, 4>(vec, gg, xt, wt, bt, rt, yt, flags, st);
      }
    }
  });
}
