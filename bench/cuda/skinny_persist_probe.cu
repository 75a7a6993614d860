// skinny_persist_probe: a persistent skinny-GEMM design for M ≤ 16 (issue 4, "M ≤ 16 at ≥ 80% of the
// D2D copy"), probed standalone before it goes into the library. y[M, N] = a[M, K] · b[N, K]ᵀ, bf16 in,
// fp32 accumulation and output, b fragment-packed as the library packs it ([N/8][K/32][8][32]).
//
// Why: the library's register kernel (gemm_skinny.cu) holds a's pieces in registers next to the weight's,
// so at M = 16 (a's rows g and g + 8) it can keep only 2 weight chunks per lane in flight (78 registers
// otherwise: 3 blocks per SM, two waves), and every block re-reads all of a from L1/L2 (twice the
// weight's bytes). read_floor.cu showed a plain read of 32 MB reaches ~98% of the copy with 128 bytes
// per lane in flight. Here one 1024-thread block per SM copies all of a (16 × K bf16, K ≤ 6144) into
// shared memory once (bulk copies, one mbarrier per K eighth), then its 32 warps stream U weight chunks
// per lane (U·16 bytes) and read a's pieces from shared memory just before each mma. Warp w takes
// row group slot w / 8 and K eighth w % 8; a block owns an equal share of the N/8 row groups, four at
// a time; the eight K-eighth partials of a group are summed in shared memory.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -Ikernels/cuda -Iinclude bench/cuda/skinny_persist_probe.cu -o /tmp/spp && /tmp/spp
//
// Prints, per (M, N, K) and U: µs per call (CUDA graph of calls rotating over > 400 MB of weight sets,
// programmatic dependent launch with the first step's weight loads issued before griddepcontrol.wait,
// median of 7 replays) and % of the D2D copy counting a, b and y (as bf16) bytes, as gemv_bench.py; and
// the largest error against a host float reference.
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>

#include "mbarrier.cuh"  // the library's mbarrier helpers (kernels/cuda)
#include "mma.cuh"        // and its mma.sync wrapper
#include "probe_common.cuh"

namespace {

using bf16 = __nv_bfloat16;
#if DML_MBARRIER_DEVICE
using namespace dml_cuda::mbar;
#endif
constexpr int kWarps = 32, kSlots = kWarps / 8, kMaxPieces = 64;

__device__ __forceinline__ void bulk_g2s(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src),
               "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 r;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(addr));
  return r;
}
// a's row stride in shared memory: K elements + 64 bytes (64 mod 128), so the 8 lanes of a phase of 16-byte reads
// (2 rows × 4 pieces) fall into distinct banks.
__host__ __device__ constexpr int row_bytes(int K) { return K * 2 + 64; }

template <int U, bool HALF>
__global__ void __launch_bounds__(kWarps * 32, 1)
    persist_kernel(const bf16* __restrict__ wp, const bf16* __restrict__ a, float* __restrict__ y, int M, int N, int K) {
#if DML_MBARRIER_DEVICE  // sm_90 device code (the host pass sees an empty body)
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[kMaxPieces];
  __shared__ float red[kSlots][8][4][32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int G = (N + 7) / 8, nblk = gridDim.x, b = blockIdx.x;
  const int g0 = static_cast<int>(static_cast<int64_t>(b) * G / nblk), g1 = static_cast<int>(static_cast<int64_t>(b + 1) * G / nblk);
  const int slot = warp / 8, wk = warp % 8;
  // Warp wk takes chunks wk, wk + 8, ...: a loop step of the block covers 8·U consecutive chunks, the
  // piece of a that step reads (its own mbarrier), so a streams into shared memory in K order while
  // the first steps already run.
  const int chunks = K / 32, step_chunks = 8 * U, pieces = (chunks + step_chunks - 1) / step_chunks;
  const int RB = row_bytes(K), rows = min(M, 16);
  const uint32_t abase = smem_u32(smem);
  if (threadIdx.x == 0) {
    for (int p = 0; p < pieces; ++p) mbar_init(smem_u32(&bars[p]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  float acc[4];
  uint4 wv[U];
  auto load_w = [&](int grp, int s) {
    const bf16* base = wp + (static_cast<int64_t>(grp) * chunks) * 256 + 8 * lane;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int c = s * step_chunks + u * 8 + wk;
      wv[u] = (grp < g1 && c < chunks) ? ld_stream(base + static_cast<int64_t>(c) * 256) : make_uint4(0, 0, 0, 0);
    }
  };
  // Round 0's first step: the weight does not depend on the preceding kernel.
  load_w(g0 + slot, 0);
  dep_wait();
  dep_launch();
  if (warp == kWarps - 1) {  // a -> shared memory, piece by piece in K order, only its M rows
    for (int p = lane; p < pieces; p += 32) {
      const int k0 = p * step_chunks * 32, k1 = min(K, k0 + step_chunks * 32);
      mbar_expect_tx(smem_u32(&bars[p]), static_cast<uint32_t>(rows * (k1 - k0) * 2));
    }
    __syncwarp();
    for (int i = lane; i < pieces * rows; i += 32) {
      const int p = i / rows, r = i % rows;
      const int k0 = p * step_chunks * 32, k1 = min(K, k0 + step_chunks * 32);
      bulk_g2s(abase + r * RB + k0 * 2, a + static_cast<int64_t>(r) * K + k0, static_cast<uint32_t>((k1 - k0) * 2),
               smem_u32(&bars[p]));
    }
  }
  const int rounds = (g1 - g0 + kSlots - 1) / kSlots, steps = pieces;
  for (int rd = 0; rd < rounds; ++rd) {
    const int grp = g0 + rd * kSlots + slot;
    acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    for (int s = 0; s < steps; ++s) {
      if (rd > 0 || s > 0) load_w(grp, s);
      // The step's first mma waits on every weight load of the step (gemm_skinny.cu, BAT).
      uint32_t x = 0;
#pragma unroll
      for (int u = 0; u < U; ++u) x ^= wv[u].x;
      if (M < 0) acc[0] += __uint_as_float(x);
      if (rd == 0) mbar_wait(smem_u32(&bars[s]), 0);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        // Past K the weight piece is zero; a's piece is then read from the last chunk (inside the row).
        const int c = min(s * step_chunks + u * 8 + wk, chunks - 1);
        const uint32_t off = static_cast<uint32_t>((c * 32 + 8 * t) * 2);
        const uint4 xl = lds128(abase + g * RB + off);
        const uint4 xh = HALF ? make_uint4(0, 0, 0, 0) : lds128(abase + (g + 8) * RB + off);
        const uint32_t a0[4] = {xl.x, xh.x, xl.y, xh.y}, a1[4] = {xl.z, xh.z, xl.w, xh.w};
        const uint32_t b0[2] = {wv[u].x, wv[u].y}, b1[2] = {wv[u].z, wv[u].w};
        dml_cuda::mma_m16n8k16<bf16>(acc, a0, b0);
        dml_cuda::mma_m16n8k16<bf16>(acc, a1, b1);
      }
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) red[slot][wk][r][lane] = acc[r];
    __syncthreads();
    for (int o = threadIdx.x; o < kSlots * 128; o += kWarps * 32) {
      const int s = o / 128, m = (o % 128) / 8, col = o % 8, gr = g0 + rd * kSlots + s;
      const int ln = (m % 8) * 4 + col / 2, r = (m >= 8 ? 2 : 0) + col % 2;
      float v = 0.0f;
#pragma unroll
      for (int w = 0; w < 8; ++w) v += red[s][w][r][ln];
      const int n = gr * 8 + col;
      if (gr < g1 && m < M && n < N) y[static_cast<int64_t>(m) * N + n] = v;
    }
    __syncthreads();
  }
#endif
}

void pack_host(const std::vector<uint16_t>& b, int N, int K, std::vector<uint16_t>& p) {
  const int Np = (N + 7) / 8 * 8, chunks = K / 32;
  p.assign(static_cast<size_t>(Np) * K, 0);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k)
      p[((static_cast<size_t>(n / 8) * chunks + k / 32) * 8 + n % 8) * 32 + k % 32] = b[static_cast<size_t>(n) * K + k];
}
float bf2f(uint16_t v) {
  uint32_t u = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

template <int U, bool HALF>
void run(const ProbeEnv& env, int M, int N, int K) {
  auto kern = &persist_kernel<U, HALF>;
  const int smem = 16 * row_bytes(K);
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  const size_t wbytes = static_cast<size_t>((N + 7) / 8 * 8) * K * 2;
  const int sets = static_cast<int>(std::max<size_t>(2, (size_t(400) << 20) / wbytes + 1));
  // Host data: one weight set checked, the others copies (timing only).
  std::vector<uint16_t> hb(static_cast<size_t>(N) * K), ha(static_cast<size_t>(M) * K), hp;
  uint32_t s = 12345;
  auto rnd = [&]() { s = s * 1664525u + 1013904223u; return ((s >> 9) & 0xffff) / 65536.0f - 0.5f; };
  for (auto& v : hb) v = f2bf(rnd());
  for (auto& v : ha) v = f2bf(rnd());
  pack_host(hb, N, K, hp);
  bf16* dw;
  bf16* da;
  float* dy;
  CK(cudaMalloc(&dw, wbytes * sets));
  CK(cudaMalloc(&da, ha.size() * 2));
  CK(cudaMalloc(&dy, static_cast<size_t>(M) * N * 4));
  for (int i = 0; i < sets; ++i) CK(cudaMemcpy(reinterpret_cast<char*>(dw) + wbytes * i, hp.data(), wbytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(da, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  const int nblk = std::min(env.prop.multiProcessorCount, (N + 7) / 8);
  cudaLaunchAttribute at[1];
  auto launch = [&](int set) {
    cudaLaunchConfig_t cfg = launch_config(dim3(nblk), kWarps * 32, smem, env.s, true, at);
    CK(cudaLaunchKernelEx(&cfg, kern, static_cast<const bf16*>(reinterpret_cast<bf16*>(reinterpret_cast<char*>(dw) + wbytes * set)),
                          static_cast<const bf16*>(da), dy, M, N, K));
  };
  launch(0);
  CK(cudaStreamSynchronize(env.s));
  std::vector<float> hy(static_cast<size_t>(M) * N);
  CK(cudaMemcpy(hy.data(), dy, hy.size() * 4, cudaMemcpyDeviceToHost));
  double maxerr = 0, maxref = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; n += 37) {
      double ref = 0;
      for (int k = 0; k < K; ++k) ref += static_cast<double>(bf2f(ha[static_cast<size_t>(m) * K + k])) * bf2f(hb[static_cast<size_t>(n) * K + k]);
      maxerr = std::max(maxerr, std::fabs(ref - hy[static_cast<size_t>(m) * N + n]));
      maxref = std::max(maxref, std::fabs(ref));
    }
  const int calls = sets * 4;
  const double us = graph_median_us(env.s, env.e0, env.e1, calls, [&] {
    for (int i = 0; i < calls; ++i) launch(i % sets);
  });
  const double bytes = static_cast<double>(M) * K * 2 + static_cast<double>(N) * K * 2 + static_cast<double>(M) * N * 2;
  std::printf("M %2d N %5d K %5d U %d%s: %7.2f us  %5.1f%% of copy  (regs %d, smem %d KB, %d blocks; max err %.2e of %.2e)\n", M, N,
              K, U, HALF ? " half" : "     ", us, 100.0 * bytes / (us * 1e-6) / env.copy_bw, fa.numRegs, smem >> 10, nblk, maxerr,
              maxref);
  CK(cudaFree(dw));
  CK(cudaFree(da));
  CK(cudaFree(dy));
}

}  // namespace

int main() {
  ProbeEnv env = probe_start();
  const int shapes[][2] = {{4096, 4096}, {11008, 4096}};
  for (auto& sh : shapes)
    for (int M : {16, 8, 1}) {
      if (M <= 8) {
        run<4, true>(env, M, sh[0], sh[1]);
        run<8, true>(env, M, sh[0], sh[1]);
      }
      run<2, false>(env, M, sh[0], sh[1]);
      run<4, false>(env, M, sh[0], sh[1]);
      run<8, false>(env, M, sh[0], sh[1]);
    }
  return 0;
}
