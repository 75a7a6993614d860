// GEMM with a quantized right-hand side: c[M, N] = epilogue(a[M, K] · wᵀ + bias + d), w[N, K] in
// GGUF blocks (dinoml/quant_blocks.h). Two paths, both profiler candidates:
//   * int8 dot (path 1): activation rows quantized once per call to 8-bit blocks, then integer
//     dot products per weight row (avx2/qgemm_avx2.cpp). Reads the weights once in their
//     compressed form: the path for small M (decode), where the GEMM is bound by weight bytes.
//   * dequantize tiles (path 2): each 16-row × KC slice of w is dequantized (bit-exactly, the
//     reference dequantizer) into an L1-resident packed panel and fed to the fp32 GEMM's register
//     tiles (gemm_isa.h) with A packed per block as in the blocked fp32 GEMM. fp32 accuracy and
//     FMA throughput for large M (prefill), where the weight decoding is amortised over M rows.
// Path 0 chooses by M (kIntDotMaxM).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include <dinoml/quant_ref.h>

#include "gemm_driver.h"
#include "kernel_common.h"
#include "qgemm.h"

namespace dml_cpu::qgemm {
namespace {

// Up to this M the int8 path is the default: measured on this machine (docs/benchmarks.md,
// bench/ops/qgemm_bench), the dequantize path wins once the weight decode is spread over enough rows.
// DINOML_QGEMM_DOT_MAX_M overrides (knobs.h).
const int64_t& kIntDotMaxM = g_knobs.qgemm_dot_max_m;
constexpr int64_t kParallelMacs = int64_t{1} << 18;
constexpr int64_t kKC = 256;  // dequantize path: K slice (one K-quant super-block, 8 legacy blocks)
// Dequantize path: rows of A per block (a multiple of the 6-row tile). Each weight slice is
// dequantized once per A block, so a block covers prefill-sized M (128) in one pass; 144×256 fp32
// (147 KiB) still sits in L2.
constexpr int64_t kMC = 144;
constexpr int64_t kRowsPerChunk = 16;  // int8 path: weight rows per scheduling unit

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

void* scratch(int slot, size_t bytes) { return scratch_bytes<ScratchPool::kQgemm, 4>(slot, bytes); }
enum Slot { kSlotAct = 0, kSlotA = 1, kSlotPanel = 2, kSlotRows = 3 };

struct Problem {
  int qtype;
  int64_t M, N, K;
  const float* a;
  const uint8_t* w;
  int64_t row_bytes;  // bytes of one weight row
  gemm::Epilogue epi;
  float* c;
};

int run_int8(const Problem& p, int threads) {
  DotFn dot = avx2_dot(p.qtype);
  if (!dot) return fail(DML_CPU_ERR_UNSUPPORTED, "qgemm: no int8 dot product for this weight type");
  const dml_qtype_traits* tr = dml_qtype_get(p.qtype);
  const bool k_act = uses_q8k_activations(p.qtype);
  const int64_t nb = p.K / tr->block_size;
  const int64_t act_row = k_act ? (p.K / DML_QK_K) * (int64_t)sizeof(dml_block_q8_K) : (p.K / DML_QK) * (int64_t)sizeof(BlockA8);
  auto* act = static_cast<uint8_t*>(scratch(kSlotAct, (size_t)(act_row * p.M)));
  if (!act) return fail(DML_CPU_ERR_MEMORY, "qgemm: cannot allocate the quantized activations");
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const int64_t chunks = cdiv(p.N, kRowsPerChunk);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
#pragma omp for schedule(static)
    for (int64_t m = 0; m < p.M; ++m) {
      if (k_act)
        avx2_quantize_a8k(p.a + m * p.K, reinterpret_cast<dml_block_q8_K*>(act + m * act_row), p.K);
      else
        avx2_quantize_a8(p.a + m * p.K, reinterpret_cast<BlockA8*>(act + m * act_row), p.K);
    }
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t n0 = ch * kRowsPerChunk, n1 = std::min(p.N, n0 + kRowsPerChunk);
      // Up to 4 activation rows share each unpacked weight block.
      for (int64_t m = 0; m < p.M; m += 4) {
        const int rows = (int)std::min<int64_t>(4, p.M - m);
        float out[4];
        for (int64_t n = n0; n < n1; ++n) {
          dot(nb, p.w + n * p.row_bytes, act + m * act_row, act_row, rows, out);
          for (int r = 0; r < rows; ++r) p.c[(m + r) * p.N + n] = out[r];
        }
      }
      isa.finish(p.c + n0, p.N, p.M, n1 - n0, 0, n0, p.epi, p.c, p.N);
    }
  }
  return DML_CPU_OK;
}

// Dequantizes rows [n0, n0+16) × [k0, k0+kc) of w into a packed panel slice (panel[k*16 + j]);
// rows past N are zero.
void dequant_panel(const Problem& p, int64_t n0, int64_t k0, int64_t kc, float* rows, float* panel) {
  const dml_qtype_traits* tr = dml_qtype_get(p.qtype);
  const int64_t boff = (k0 / tr->block_size) * tr->type_size;
  for (int64_t j = 0; j < gemm::kNR; ++j) {
    float* dst = rows + j * kc;
    if (n0 + j < p.N)
      dinoml::quant::dequantize_row(p.qtype, p.w + (n0 + j) * p.row_bytes + boff, dst, kc);
    else
      std::memset(dst, 0, (size_t)kc * sizeof(float));
  }
  // rows[16][kc] → panel[kc][16] by 8×8 register transposes (kc is a multiple of 8).
  for (int64_t k0 = 0; k0 < kc; k0 += 8)
    for (int64_t j0 = 0; j0 < gemm::kNR; j0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows + (j0 + i) * kc + k0);
      const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
      float* o = panel + k0 * gemm::kNR + j0;
      _mm256_storeu_ps(o + 0 * gemm::kNR, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(o + 1 * gemm::kNR, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(o + 2 * gemm::kNR, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(o + 3 * gemm::kNR, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(o + 4 * gemm::kNR, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(o + 5 * gemm::kNR, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(o + 6 * gemm::kNR, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(o + 7 * gemm::kNR, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
}

int run_dequant(const Problem& p, int threads) {
  using gemm::kMR;
  using gemm::kNR;
  const gemm::IsaKernels& isa = *gemm::active_isa();
  const int64_t M = p.M, N = p.N, K = p.K;
  int64_t mblocks = cdiv(M, kMC);
  const int64_t mc = cdiv(cdiv(M, mblocks), kMR) * kMR;
  mblocks = cdiv(M, mc);
  const int64_t panels = cdiv(N, kNR);
  // Enough column blocks for every thread; each block's panels are dequantized once per M block.
  int64_t nblocks = std::min(panels, std::max<int64_t>(1, cdiv(threads * 4, mblocks)));
  const int64_t npb = cdiv(panels, nblocks);
  nblocks = cdiv(panels, npb);
  int status = DML_CPU_OK;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    auto* pa = static_cast<float*>(scratch(kSlotA, (size_t)(mc * kKC) * sizeof(float)));
    auto* panel = static_cast<float*>(scratch(kSlotPanel, (size_t)(kKC * kNR) * sizeof(float)));
    auto* rows = static_cast<float*>(scratch(kSlotRows, (size_t)(kKC * kNR) * sizeof(float)));
    if (!pa || !panel || !rows) {
#pragma omp atomic write
      status = DML_CPU_ERR_MEMORY;
    }
    alignas(64) float edge[kMR * kNR];
#pragma omp for schedule(static)
    for (int64_t item = 0; item < mblocks * nblocks; ++item) {
      if (!pa || !panel || !rows) continue;
      const int64_t m0 = (item / nblocks) * mc, mcur = std::min(mc, M - m0);
      const int64_t j0 = (item % nblocks) * npb, j1 = std::min(panels, j0 + npb);
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        const bool acc = k0 > 0, last = k0 + kc >= K;
        gemm::pack_a_block(p.a, K, m0, mcur, k0, kc, pa);
        for (int64_t j = j0; j < j1; ++j) {
          const int64_t n0 = j * kNR, cols = std::min(kNR, N - n0);
          dequant_panel(p, n0, k0, kc, rows, panel);
          for (int64_t ir = 0; ir < mcur; ir += kMR) {
            const int r = (int)std::min(kMR, mcur - ir);
            float* tile = p.c + (m0 + ir) * N + n0;
            if (cols == kNR) {
              isa.tile_packed_a(kc, pa + ir * kc, panel, tile, N, r, acc);
            } else {
              if (acc)
                for (int q = 0; q < r; ++q) std::memcpy(edge + q * kNR, tile + q * N, cols * sizeof(float));
              isa.tile_packed_a(kc, pa + ir * kc, panel, edge, kNR, r, acc);
              for (int q = 0; q < r; ++q) std::memcpy(tile + q * N, edge + q * kNR, cols * sizeof(float));
            }
            if (last) isa.finish(tile, N, r, cols, m0 + ir, n0, p.epi, p.c, N);
          }
        }
      }
    }
  }
  if (status != DML_CPU_OK) return fail(status, "qgemm: cannot allocate the dequantize-path scratch");
  return DML_CPU_OK;
}

int run(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* w, const float* bias, const float* d,
        float* c, int epilogue, int path, int force_threads, const char* kernel) {
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  if (!tr || !tr->supported || !tr->is_quantized || !avx2_dot(qtype))
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": weight type " + (tr ? tr->name : std::to_string(qtype)) +
                                             " is not supported (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K q8_K)");
  if (M < 0 || N < 0 || K < 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (K % tr->block_size != 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": K = " + std::to_string(K) + " is not a multiple of the " +
                                          tr->name + " block size " + std::to_string(tr->block_size));
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  if (path < 0 || path > 2) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown path " + std::to_string(path));
  if (M == 0 || N == 0) return DML_CPU_OK;
  Problem p{qtype, M, N, K, a, static_cast<const uint8_t*>(w), (K / tr->block_size) * tr->type_size, {}, c};
  p.epi.kind = epilogue;
  p.epi.bias = bias;
  p.epi.d = (epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) ? d : nullptr;
  p.epi.dtype = DML_CPU_F32;
  p.epi.ldd = N;
  if (K == 0) {
    std::fill(c, c + M * N, 0.0f);
    gemm::active_isa()->finish(c, N, M, N, 0, 0, p.epi, c, N);
    return DML_CPU_OK;
  }
  int threads = force_threads;
  if (threads <= 0) threads = (omp_in_parallel() || M * N * K < kParallelMacs) ? 1 : std::max(1, omp_get_max_threads());
  const bool use_dot = path == 1 || (path == 0 && M <= kIntDotMaxM);
  return use_dot ? run_int8(p, threads) : run_dequant(p, threads);
}

}  // namespace
}  // namespace dml_cpu::qgemm

extern "C" int dml_cpu_qgemm(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* w,
                             const float* bias, const float* d, float* c, int epilogue) {
  return dml_cpu::qgemm::run(qtype, M, N, K, a, w, bias, d, c, epilogue, 0, 0, "qgemm");
}

extern "C" int dml_cpu_qgemm_variant(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* w,
                                     const float* bias, const float* d, float* c, int epilogue, int path, int threads) {
  return dml_cpu::qgemm::run(qtype, M, N, K, a, w, bias, d, c, epilogue, path, threads, "qgemm_variant");
}

extern "C" int dml_cpu_dequantize(int qtype, int64_t n, const void* src, float* dst) {
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  if (!tr || !tr->supported)
    return dml_cpu::fail(DML_CPU_ERR_UNSUPPORTED, std::string("dequantize: type ") + (tr ? tr->name : std::to_string(qtype)) +
                                                      " is not supported");
  if (n < 0 || n % tr->block_size != 0)
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, "dequantize: n = " + std::to_string(n) + " is not a multiple of the " +
                                                   tr->name + " block size");
  dinoml::quant::dequantize_row(qtype, src, dst, n);
  return DML_CPU_OK;
}
