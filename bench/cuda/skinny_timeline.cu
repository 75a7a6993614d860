// Where the time of a chained skinny GEMM goes (issue 4, "M <= 16 at >= 80% of the D2D copy").
// Standalone, no PyTorch:
//
//   nvcc -O3 -std=c++17 -arch=sm_90a bench/cuda/skinny_timeline.cu -o skinny_timeline && ./skinny_timeline [K [DUMP.csv]]
//
// With the library's own kernel timed by the same harness next to the replica (configs "lib51", "lib54"):
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -DSKTL_LIB -Ikernels/cuda -Ikernels/common -Iinclude \
//        bench/cuda/skinny_timeline.cu kernels/cuda/status.cu -o skinny_timeline
//
// Environment: SKTL_A = const (every element of a 0x3c3c, as before), random (one random a) or rotate
// (a random a per weight set, as gemv_bench.py's rows rotate a with the weights); SKTL_SET = gap (only
// the replica of variant 51 / 54, the constant-a ablation and the library's 51 / 54); SKTL_M = the
// comma-separated M values (default 1,4,8,16).
//
// The kernel is a replica of the library's packed register kernel (gemm_skinny.cu, variant 43:
// fragment-packed bf16 weight, 8 rows per block, W warps, U chunk loads in flight per lane, the first
// loop step's weight loads issued before griddepcontrol.wait), without epilogue options, so that its
// schedule can be changed and recorded here. Each block can record %globaltimer at its start, after
// griddepcontrol.wait, after its first loop step and at its end, with its SM. Timed as the library's
// harness times it (gemv_bench.py): CUDA-graph chains of calls rotating over > 400 MB of weights,
// median of 7 replays, % of a 1 GiB D2D copy counting a, b and y bytes. The timeline of one replay
// then says, per call (steady state, calls 2 .. n-2): the period between the ends of consecutive
// calls, when the call's dependency resolved (the first block past griddepcontrol.wait) against the
// previous call's last block end, the spread of its blocks' end times (the tail), and how many of
// its blocks were resident before the previous call ended.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <string>

#ifdef SKTL_LIB
#include "gemm_skinny.cu"  // dml_cuda::skinny_gemm_kernel, the library's kernel (anonymous namespace: this TU)
#endif
// The probes' streaming load under another name, so that argument-dependent lookup from the library's
// kernel (its bf16 pointers' namespace is the global one) does not also find it.
#define ld_stream probe_ld_stream
#include "probe_common.cuh"

__device__ __forceinline__ uint64_t gtime() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint32_t smid() {
  uint32_t s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
__device__ __forceinline__ void mma_bf16(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// LAUNCH: where launch_dependents runs: 0 right after the wait (the library), 1 at the block's end.
// PF: the first step's weight loads before the wait. REC: record the timeline (tl: 5 words per block).
struct Opt {
  bool pf = true, rec = false;
  int launch = 0;
  int never = 0;  // always 0; the kernel cannot know it (MODE 5)
  int64_t sa = 0, sb = 0;  // F & 2: batch strides (0), as the library's kernel takes them
  int epi = 0;             // F & 4: the library's epilogue code (0: none); F & 8: never = epi < 0
};
// F (MODE 5 only; the library's kernel features one at a time, to find what its 51 loses against this
// replica): 1 the weight loads guarded as the library guards them (c < chunks && k < K && row in N);
// 2 the batch (blockIdx.z) and M-tile (blockIdx.y) offsets; 4 the output through tile::store with bias
// and residual pointers (null) and the epilogue code (SKTL_LIB only); 8 `never` from a kernel argument
// (epi < 0) instead of the options struct.

// S > 0: the weight goes through a per-lane cp.async pipeline of S loop steps in shared memory (each
// lane copies and later reads its own 16-byte slots, so no barrier is needed): the S first steps are
// issued before griddepcontrol.wait, and each step's slot is refilled with step + S after its mma.
// MODE (ablations, not GEMMs unless 0, 3 or 5): 1 a's fragments are constants (no a loads), 2 the
// weight is xor-folded instead of multiplied (no mma), 3 a's rows copied to shared memory once after
// the wait (dynamic shared memory of M x K bf16: run where that is at most 16 KB) and read from there,
// 5 the step's loads batched ahead of its mma (gemm_skinny.cu's BAT).
template <int U, int W, int S = 0, int MODE = 0, int F = 0>
__global__ void __launch_bounds__(W * 32) gemv_kernel(int64_t M, int64_t N, int64_t K, const __nv_bfloat16* __restrict__ a,
                                                      const __nv_bfloat16* __restrict__ b, __nv_bfloat16* __restrict__ y, Opt o,
                                                      uint64_t* __restrict__ tl, int epi) {
  __shared__ float red[W][4][32];
  const uint64_t t0 = o.rec ? gtime() : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t n0 = (int64_t)blockIdx.x * 8, chunks = (K + 31) / 32;
  int64_t m0 = 0;
  if constexpr ((F & 2) != 0) {
    const int64_t z = blockIdx.z;
    a += z * o.sa;
    b += z * o.sb;
    y += z * M * N;
    m0 = (int64_t)blockIdx.y * 16;
  }
  const bool row_lo = m0 + g < M, row_hi = m0 + g + 8 < M;
  const __nv_bfloat16* a_lo = a + (m0 + g) * K + 8 * t;
  const __nv_bfloat16* a_hi = a_lo + 8 * K;
  const bool bok = (F & 1) == 0 || n0 + g < N;
  const __nv_bfloat16* brow = b + (bok ? n0 / 8 : 0) * chunks * 256 + 8 * lane;
  const bool never = (F & 8) != 0 ? epi < 0 : o.never != 0;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  constexpr int64_t ST = (int64_t)U * W;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  uint4 wv[U], xl[U], xh[U];
  int64_t c0 = warp;
  auto load_w = [&](int64_t c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr ((F & 1) != 0) {
        const int64_t cc = c + u * W;
        wv[u] = (cc < chunks && cc * 32 + 8 * t < K && bok) ? ld_stream(brow + cc * 256) : zero;
      } else {
        wv[u] = c + u * W < chunks ? ld_stream(brow + (c + u * W) * 256) : zero;
      }
    }
  };
  extern __shared__ __align__(16) unsigned char dyn[];
  auto load_x = [&](int64_t c) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t cc = c + u * W;
      const bool kin = cc < chunks && cc * 32 + 8 * t < K;
      if constexpr (MODE == 1) {
        xl[u] = make_uint4(0x3c3c3c3c, 0x3c3c3c3c, 0x3c3c3c3c, 0x3c3c3c3c);
        xh[u] = zero;
      } else if constexpr (MODE == 3) {
        xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(dyn + (g * K + cc * 32 + 8 * t) * 2) : zero;
        xh[u] = (kin && row_hi) ? *reinterpret_cast<const uint4*>(dyn + ((g + 8) * K + cc * 32 + 8 * t) * 2) : zero;
      } else {
        xl[u] = (kin && row_lo) ? *reinterpret_cast<const uint4*>(a_lo + cc * 32) : zero;
        xh[u] = (kin && row_hi) ? *reinterpret_cast<const uint4*>(a_hi + cc * 32) : zero;
      }
    }
  };
  auto mma = [&]() {
    if constexpr (MODE == 5) {  // the first mma waits on every load of the step: ptxas cannot sink any of them
      uint32_t x = 0;
#pragma unroll
      for (int u = 0; u < U; ++u) x ^= wv[u].x ^ xl[u].x ^ xh[u].x;
      if (never) acc[0] += __uint_as_float(x);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if constexpr (MODE == 2) {
        acc[0] = __uint_as_float(__float_as_uint(acc[0]) ^ wv[u].x ^ wv[u].y ^ wv[u].z ^ wv[u].w ^ xl[u].x ^ xh[u].x);
        continue;
      }
      const uint32_t a0[4] = {xl[u].x, xh[u].x, xl[u].y, xh[u].y}, a1[4] = {xl[u].z, xh[u].z, xl[u].w, xh[u].w};
      const uint32_t b0[2] = {wv[u].x, wv[u].y}, b1[2] = {wv[u].z, wv[u].w};
      mma_bf16(acc, a0, b0);
      mma_bf16(acc, a1, b1);
    }
  };
  uint64_t t1 = 0, t2 = 0;
  if constexpr (S > 0) {
    extern __shared__ __align__(16) unsigned char pipe[];  // [W][S][U][32 lanes][16 bytes]
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(pipe) + ((warp * S) * U * 32 + lane) * 16;
    const int64_t steps = (chunks - warp + ST - 1) / ST;
    auto issue = [&](int64_t st) {  // step st's U chunks into slot st % S; one commit group per call
      if (st < steps) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int64_t c = warp + st * ST + u * W;
          if (c < chunks)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(base + (uint32_t)(((st % S) * U + u) * 32 * 16)),
                         "l"(brow + c * 256)
                         : "memory");
        }
      }
      asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
#pragma unroll
    for (int st = 0; st < S; ++st) issue(st);
    dep_wait();
    if (o.launch == 0) dep_launch();
    t1 = o.rec ? gtime() : 0;
    for (int64_t st = 0; st < steps; ++st) {
      load_x(warp + st * ST);
      asm volatile("cp.async.wait_group %0;\n" ::"n"(S - 1) : "memory");
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t c = warp + st * ST + u * W;
        if (c < chunks) {
          const uint32_t ad = base + (uint32_t)(((st % S) * U + u) * 32 * 16);
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(wv[u].x), "=r"(wv[u].y), "=r"(wv[u].z), "=r"(wv[u].w) : "r"(ad));
        } else {
          wv[u] = zero;
        }
      }
      mma();
      if (st == 0) t2 = o.rec ? gtime() : 0;
      issue(st + S);
    }
  } else {
    if (o.pf) load_w(c0);
    dep_wait();
    if (o.launch == 0) dep_launch();
    if constexpr (MODE == 3) {  // a's M rows into shared memory
      for (int64_t i = threadIdx.x; i < M * K / 8; i += W * 32)
        reinterpret_cast<uint4*>(dyn)[i] = reinterpret_cast<const uint4*>(a)[i];
      __syncthreads();
    }
    t1 = o.rec ? gtime() : 0;
    if (!o.pf) load_w(c0);
    load_x(c0);
    mma();
    t2 = o.rec ? gtime() : 0;
    for (c0 += ST; c0 < chunks; c0 += ST) {
      load_w(c0);
      load_x(c0);
      mma();
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) red[warp][r][lane] = acc[r];
  __syncthreads();
  for (int i = threadIdx.x; i < 16 * 8; i += W * 32) {
    const int m = i / 8, col = i % 8, ln = (m % 8) * 4 + col / 2, r = (m >= 8 ? 2 : 0) + col % 2;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < W; ++w) v += red[w][r][ln];
#ifdef SKTL_LIB
    if constexpr ((F & 4) != 0) {
      dml_cuda::tile::store<__nv_bfloat16>(y, (const __nv_bfloat16*)nullptr, (const __nv_bfloat16*)nullptr, M, N, m0 + m, n0 + col,
                                           v, epi);
      continue;
    }
#endif
    if (m0 + m < M && n0 + col < N) y[(m0 + m) * N + n0 + col] = __float2bfloat16_rn(v);
  }
  if (o.launch == 1) dep_launch();
  if (o.rec && threadIdx.x == 0) {
    uint64_t* p = tl + (uint64_t)blockIdx.x * 5;
    p[0] = smid();
    p[1] = t0;
    p[2] = t1;
    p[3] = t2;
    p[4] = gtime();
  }
}

__global__ void timer_step(uint64_t* out) {
  uint64_t best = ~0ull, prev = gtime();
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t = gtime();
    if (t > prev && t - prev < best) best = t - prev;
    prev = t;
  }
  *out = best;
}
static float bf2f(uint16_t v) {
  const uint32_t u = (uint32_t)v << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Cfg;
using Launch = void (*)(const Cfg&, cudaStream_t, int64_t, int64_t, int64_t, const __nv_bfloat16*, const __nv_bfloat16*,
                        __nv_bfloat16*, Opt, uint64_t*);
struct Cfg {
  const char* name;
  Launch launch;  // go<U, W, S, MODE>
  int mode;
  Opt o;
  bool pdl;
  bool lib = false;  // the library's kernel: no timeline recorded
};

// One call of gemv_kernel<U, W, S, MODE>: a block per 8 weight rows, PDL where the config asks.
template <int U, int W, int S = 0, int MODE = 0, int F = 0>
void go(const Cfg& c, cudaStream_t s, int64_t M, int64_t N, int64_t K, const __nv_bfloat16* a, const __nv_bfloat16* b,
        __nv_bfloat16* y, Opt o, uint64_t* tl) {
  const size_t smem = MODE == 3 ? (size_t)M * K * 2 : (size_t)W * S * U * 512;
  if (smem > 48 * 1024) CK(cudaFuncSetAttribute(gemv_kernel<U, W, S, MODE, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  cudaLaunchAttribute at[1];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)((N + 7) / 8)), W * 32, smem, s, c.pdl, at);
  CK(cudaLaunchKernelEx(&cfg, gemv_kernel<U, W, S, MODE, F>, M, N, K, a, b, y, o, tl, o.epi));
}

#ifdef SKTL_LIB
// The library's packed register kernel with PF and BAT (variants 51..56 of gemm_skinny.cu), no bias, no
// residual, no activation.
template <int NG, int U, int W, bool HALF>
void go_lib(const Cfg& c, cudaStream_t s, int64_t M, int64_t N, int64_t K, const __nv_bfloat16* a, const __nv_bfloat16* b,
            __nv_bfloat16* y, Opt, uint64_t*) {
  auto kern = dml_cuda::skinny_gemm_kernel<__nv_bfloat16, NG, U, W, true, 0, 0, true, HALF, true>;
  cudaLaunchAttribute at[1];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)((N + 8 * NG - 1) / (8 * NG))), W * 32, 0, s, c.pdl, at);
  CK(cudaLaunchKernelEx(&cfg, kern, M, N, K, (int64_t)0, (int64_t)0, a, b, (const __nv_bfloat16*)nullptr,
                        (const __nv_bfloat16*)nullptr, y, 0));
}
#endif

int main(int argc, char** argv) {
  const ProbeEnv env = probe_start();
  const cudaStream_t s = env.s;
  const cudaEvent_t e0 = env.e0, e1 = env.e1;
  const double copy_bw = env.copy_bw;
  {  // globaltimer granularity: the smallest non-zero step one spinning thread sees
    uint64_t* d;
    CK(cudaMalloc(&d, 8));
    timer_step<<<1, 1, 0, s>>>(d);
    CK(cudaStreamSynchronize(s));
    uint64_t h = 0;
    CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
    std::printf("[timer] %%globaltimer smallest step: %llu ns\n", (unsigned long long)h);
    CK(cudaFree(d));
  }
  const int64_t N = 4096, K = argc > 1 ? std::atoll(argv[1]) : 4096;
  FILE* dump = argc > 2 ? std::fopen(argv[2], "w") : nullptr;  // per-block timeline CSV
  const size_t wbytes = (size_t)N * K * 2, pool = size_t(448) << 20;
  const int nsets = (int)(pool / wbytes), calls = 4 * nsets;
  char* wb;
  CK(cudaMalloc(&wb, pool));
  std::vector<uint16_t> h(wbytes / 2);  // the packed weight: [N/8][K/32][8][32]
  {  // random bf16 in [-0.5, 0.5) / 64: a GEMM on real numbers, checked below
    uint32_t st = 7;
    for (auto& v : h) {
      st = st * 1664525u + 1013904223u;
      const float f = (((st >> 8) & 0xffff) / 65536.0f - 0.5f) / 64.0f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    for (int i = 0; i < nsets; ++i) CK(cudaMemcpy(wb + (size_t)i * wbytes, h.data(), wbytes, cudaMemcpyHostToDevice));
  }
  const char* amode_env = std::getenv("SKTL_A");
  const std::string amode = amode_env ? amode_env : "const";
  if (amode != "const" && amode != "random" && amode != "rotate") {
    std::fprintf(stderr, "SKTL_A=%s: const, random or rotate\n", amode.c_str());
    return 2;
  }
  std::vector<uint16_t> ha((size_t)16 * K, 0x3c3c);  // const: bf16 0x3c3c = 0.01147 everywhere
  if (amode != "const") {
    uint32_t st = 11;
    for (auto& v : ha) {
      st = st * 1664525u + 1013904223u;
      const float f = ((st >> 8) & 0xffff) / 65536.0f - 0.5f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      v = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
  }
  std::vector<double> ref((size_t)16 * N, 0.0);  // call 0's y (weight set 0, a set 0), every row
  for (size_t e = 0; e < h.size(); ++e) {
    const int64_t grp = e / (K * 8), c = (e / 256) % (K / 32), r = (e % 256) / 32, k = c * 32 + e % 32;
    const double w = bf2f(h[e]);
    for (int m = 0; m < 16; ++m) ref[m * N + grp * 8 + r] += w * bf2f(ha[m * K + k]);
  }
  const int asets = amode == "rotate" ? nsets : 1;
  std::printf("[a] %s (%d set%s)\n", amode.c_str(), asets, asets > 1 ? "s" : "");
  __nv_bfloat16 *a, *y;
  CK(cudaMalloc(&a, (size_t)asets * 16 * K * 2));
  CK(cudaMalloc(&y, (size_t)calls * 16 * N * 2));
  for (int i = 0; i < asets; ++i) CK(cudaMemcpy(a + (size_t)i * 16 * K, ha.data(), 16 * K * 2, cudaMemcpyHostToDevice));
  uint64_t* tl;
  const size_t tl_words = (size_t)calls * (N / 8) * 5;
  CK(cudaMalloc(&tl, tl_words * 8));

  const Opt pf{true, false, 0}, pf_end{true, false, 1}, nopf{false, false, 0};
  const char* set_env = std::getenv("SKTL_SET");
  const bool gap = set_env && std::string(set_env) == "gap";
  const std::vector<Cfg> gap_cfgs = {
      {"loads batched, U4 W8 (replica of 54)", go<4, 8, 0, 5>, 5, pf, true},
      {"loads batched, U2 W8 (replica of 51)", go<2, 8, 0, 5>, 5, pf, true},
      {"ablation: a constant (no a loads)", go<4, 8, 0, 1>, 1, pf, true},
#ifdef SKTL_LIB
      {"lib51 {1,2,8}", go_lib<1, 2, 8, false>, 0, pf, true, true},
      {"lib54 {1,4,8} HALF (M <= 8)", go_lib<1, 4, 8, true>, 0, pf, true, true},
      {"51 replica + F1 (load guards)", go<2, 8, 0, 5, 1>, 5, pf, true},
      {"51 replica + F2 (y/z offsets)", go<2, 8, 0, 5, 2>, 5, pf, true},
      {"51 replica + F4 (tile::store)", go<2, 8, 0, 5, 4>, 5, pf, true},
      {"51 replica + F8 (never = epi<0)", go<2, 8, 0, 5, 8>, 5, pf, true},
      {"51 replica + F1|2", go<2, 8, 0, 5, 3>, 5, pf, true},
      {"51 replica + F15 (all)", go<2, 8, 0, 5, 15>, 5, pf, true},
      {"lib51 {1,2,8} again", go_lib<1, 2, 8, false>, 0, pf, true, true},
#endif
  };
  const std::vector<Cfg> all_cfgs = {
      {"lib43 (U4 W8, PF, launch at start)", go<4, 8>, 0, pf, true},
      {"U4 W8, PF, launch at end", go<4, 8>, 0, pf_end, true},
      {"U4 W8, no PF", go<4, 8>, 0, nopf, true},
      {"U4 W8, no PDL", go<4, 8>, 0, nopf, false},
      {"U8 W8", go<8, 8>, 0, pf, true},
      {"U4 W4", go<4, 4>, 0, pf, true},
      {"U2 W16", go<2, 16>, 0, pf, true},
      {"ablation: a constant (no a loads)", go<4, 8, 0, 1>, 1, pf, true},
      {"ablation: no mma (xor)", go<4, 8, 0, 2>, 2, pf, true},
      {"a in shared memory", go<4, 8, 0, 3>, 3, pf, true},
      {"cp.async U4 W8 S2", go<4, 8, 2>, 0, pf, true},
      {"cp.async U4 W8 S3", go<4, 8, 3>, 0, pf, true},
      {"cp.async U2 W8 S3", go<2, 8, 3>, 0, pf, true},
      {"cp.async U2 W8 S4", go<2, 8, 4>, 0, pf, true},
      {"cp.async U2 W8 S6", go<2, 8, 6>, 0, pf, true},
      {"cp.async U4 W4 S4", go<4, 4, 4>, 0, pf, true},
      {"loads batched, U4 W8", go<4, 8, 0, 5>, 5, pf, true},
      {"loads batched, U8 W8", go<8, 8, 0, 5>, 5, pf, true},
      {"loads batched, U2 W8", go<2, 8, 0, 5>, 5, pf, true},
      {"loads batched, U2 W8, launch at end", go<2, 8, 0, 5>, 5, pf_end, true},
      {"loads batched, U2 W8, no PF", go<2, 8, 0, 5>, 5, nopf, true},
      {"loads batched, U2 W16", go<2, 16, 0, 5>, 5, pf, true},
      {"loads batched, U1 W16", go<1, 16, 0, 5>, 5, pf, true},
      {"loads batched, U3 W8", go<3, 8, 0, 5>, 5, pf, true},
      {"loads batched, U4 W4", go<4, 4, 0, 5>, 5, pf, true},
  };
  const std::vector<Cfg>& cfgs = gap ? gap_cfgs : all_cfgs;
  std::vector<int64_t> Ms;
  {
    const char* m_env = std::getenv("SKTL_M");
    std::string ms = m_env ? m_env : "1,4,8,16";
    for (size_t p = 0; p < ms.size();) {
      const size_t q = ms.find(',', p);
      Ms.push_back(std::atoll(ms.substr(p, q == std::string::npos ? std::string::npos : q - p).c_str()));
      p = q == std::string::npos ? ms.size() : q + 1;
    }
  }
  for (int64_t M : Ms) {
    const double bytes = (double)(M * K + N * K + M * N) * 2;
    std::printf("\n== M = %lld, N = %lld, K = %lld, bf16, %d calls over %d weight sets\n", (long long)M, (long long)N, (long long)K,
                calls, nsets);
    std::printf("%-38s %8s %7s | %8s %8s %8s %8s %8s %6s\n", "config", "us/call", "%copy", "period", "release", "first", "tail",
                "life", "early");
    for (const Cfg& c : cfgs) {
      if (c.mode == 3 && M * K * 2 > 16 * 1024) continue;
      if (c.lib && std::strstr(c.name, "HALF") && M > 8) continue;
      auto chain = [&](bool rec) {
        for (int i = 0; i < calls; ++i) {
          Opt o = c.o;
          o.rec = rec;
          c.launch(c, s, M, N, K, a + (size_t)(i % nsets % asets) * 16 * K, reinterpret_cast<const __nv_bfloat16*>(wb + (size_t)(i % nsets) * wbytes), y + (size_t)i * 16 * N, o,
                 tl + (size_t)i * (N / 8) * 5);
        }
      };
      double us[2];
      for (int rec = 0; rec < 2; ++rec) us[rec] = graph_median_us(s, e0, e1, calls, [&] { chain(rec); });
      // check call 0's output (every weight set holds the same packed weight; call 0 reads a set 0)
      {
        std::vector<uint16_t> hy(M * N);
        CK(cudaMemcpy(hy.data(), y, M * N * 2, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            const double d = bf2f(hy[m * N + n]) - ref[m * N + n];
            num += d * d;
            den += ref[m * N + n] * ref[m * N + n];
          }
        if ((c.mode == 0 || c.mode >= 3) && !(std::sqrt(num / den) < 1e-2)) {
          std::printf("%s: WRONG RESULT (rel. L2 %.3e)\n", c.name, std::sqrt(num / den));
          return 1;
        }
      }
      if (c.lib) {  // no timeline
        std::printf("%-38s %8.2f %7.1f |\n", c.name, us[0], 100.0 * bytes / (us[0] * 1e-6) / copy_bw);
        continue;
      }
      // timeline of the last replay (recording)
      std::vector<uint64_t> h(tl_words);
      CK(cudaMemcpy(h.data(), tl, tl_words * 8, cudaMemcpyDeviceToHost));
      const int B = (int)(N / 8);
      auto blk = [&](int i, int b2, int f) { return h[((size_t)i * B + b2) * 5 + f]; };
      std::vector<double> period, release, first, tail, life, early;
      for (int i = 2; i < calls - 2; ++i) {
        uint64_t end_prev = 0, end_i = 0, rel = UINT64_MAX;
        std::vector<uint64_t> ends;
        int n_early = 0;
        for (int b2 = 0; b2 < B; ++b2) {
          end_prev = std::max(end_prev, blk(i - 1, b2, 4));
          end_i = std::max(end_i, blk(i, b2, 4));
          rel = std::min(rel, blk(i, b2, 2));
          ends.push_back(blk(i, b2, 4));
        }
        std::vector<double> lf, fs;
        for (int b2 = 0; b2 < B; ++b2) {
          if (blk(i, b2, 1) < end_prev) ++n_early;
          lf.push_back((double)blk(i, b2, 4) - (double)std::max(blk(i, b2, 1), rel));
          fs.push_back((double)blk(i, b2, 3) - (double)std::max(blk(i, b2, 2), rel));
        }
        std::sort(ends.begin(), ends.end());
        std::sort(lf.begin(), lf.end());
        std::sort(fs.begin(), fs.end());
        period.push_back((double)end_i - (double)end_prev);
        release.push_back((double)rel - (double)end_prev);
        tail.push_back((double)end_i - (double)ends[ends.size() / 2]);
        life.push_back(lf[lf.size() / 2]);
        first.push_back(fs[fs.size() / 2]);
        early.push_back((double)n_early / B);
      }
      if (dump) {  // every block of calls 10 and 11: config, M, call, block, SM, start, release, first step, end (ns from call 10's first start)
        uint64_t base = UINT64_MAX;
        for (int b2 = 0; b2 < B; ++b2) base = std::min(base, blk(10, b2, 1));
        for (int i = 10; i < 12; ++i)
          for (int b2 = 0; b2 < B; ++b2)
            std::fprintf(dump, "%d,%lld,%d,%d,%llu,%lld,%lld,%lld,%lld\n", (int)(&c - &cfgs[0]), (long long)M, i, b2,
                         (unsigned long long)blk(i, b2, 0), (long long)(blk(i, b2, 1) - base), (long long)(blk(i, b2, 2) - base),
                         (long long)(blk(i, b2, 3) - base), (long long)(blk(i, b2, 4) - base));
      }
      auto med = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::printf("%-38s %8.2f %7.1f | %8.2f %8.2f %8.2f %8.2f %8.2f %6.2f   (recording: %.2f us/call)\n", c.name, us[0],
                  100.0 * bytes / (us[0] * 1e-6) / copy_bw, med(period) / 1e3, med(release) / 1e3, med(first) / 1e3,
                  med(tail) / 1e3, med(life) / 1e3, med(early), us[1]);
    }
  }
  std::printf("\nperiod: end of the call's last block - end of the previous call's last block (us); release: first block "
              "past griddepcontrol.wait - previous call's last block end; first: median block's first loop step after its "
              "release; tail: last block end - median block end; life: median block lifetime from max(start, release); "
              "early: fraction of blocks started before the previous call ended. Medians over calls 2 .. n-2 of one replay.\n");
  CK(cudaGetLastError());
  return 0;
}
