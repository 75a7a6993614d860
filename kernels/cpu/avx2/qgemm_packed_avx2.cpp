// Quantized-weight GEMM on weights repacked once (module init) into 8-row interleaved tiles
// (dml_cpu_qgemm_pack / dml_cpu_qgemm_prepacked; candidate dml.qgemm.repacked).
//
// Layout. Weight rows are taken in groups of 8 (the last group zero-padded); for each group and
// each quant block (32 elements for q4_0 / q8_0, 256 for q4_K / q6_K) one tile holds the 8 rows'
// block, interleaved so that one 32-byte register carries 4 consecutive elements of each of the
// 8 rows ("step" s = elements 4s..4s+3; byte 4r+e = row r, element 4s+e). One maddubs of such a
// register with the activation's 4 bytes of that step broadcast to every 32-bit lane then gives,
// in 32-bit lane r, row r's partial dot product: 8 output rows per instruction, the activation
// block read once for all of them, and no horizontal sums. Tiles (bytes):
//   q4_0: d fp16[8] | 4 × 32 nibble bytes (low nibble step k, high nibble step k+4)      = 144
//   q8_0: d fp16[8] | 8 × 32 int8 bytes (step s)                                          = 272
//   q4_K: d fp16[8] | dmin fp16[8] | scale u8[8 sub][8 rows] | min u8[4 pairs][8 rows][2]
//         | 4 pairs of sub-blocks × 8 steps × 32 nibble bytes (low: sub 2j, high: sub 2j+1) = 1184
//   q6_K: d fp16[8] | scale i8[8 pairs][8 rows][2] | per 32 elements (8 steps): 4 × 32 bytes of
//         low 4 bits (low nibble step k, high nibble step k+4) + 2 × 32 bytes of the top 2 bits
//         (bits 2i..2i+1: step i, resp. 4+i)                                                = 1680
// fp16 scales are widened 8 at a time by vcvtph2ps. Offsets (q4_0's -8, q6_K's -32, q4_K's mins)
// are folded out as in the unpacked kernels (qgemm_avx2.cpp): they multiply the activation block
// sums. Overflow: s16 sums of maddubs pairs stay ≤ 8·2·15·127 = 30480 (4-bit) and
// 2·2·63·127 = 32004 (q6_K); the int32 sums stay far inside range.
//
// The packed buffer starts with a 64-byte header (magic, type, N, K) so a buffer packed for
// another weight is refused.
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <dinoml/quant_ref.h>

#include "dinoml_cpu_kernels.h"
#include "gemm_driver.h"
#include "kernel_common.h"
#include "qgemm.h"
#define DML_QPK_VNNI 0
#include "qgemm_packed_kernels.h"

namespace dml_cpu::qgemm {
namespace {

constexpr int kG = 8;  // rows per group
constexpr int64_t kHeader = 64;
constexpr char kMagic[8] = {'D', 'M', 'L', 'Q', 'P', 'K', '1', '\0'};
struct Header {
  char magic[8];
  int64_t qtype, n, k;
  int64_t reserved[4];
};
static_assert(sizeof(Header) == kHeader, "packed qgemm header");

int64_t tile_bytes(int qtype) {
  switch (qtype) {
    case DML_QT_Q4_0: return 144;
    case DML_QT_Q8_0: return 272;
    case DML_QT_Q4_K: return 1184;
    case DML_QT_Q6_K: return 1680;
    default: return 0;
  }
}

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- packing (scalar; once per weight at module init) -------------------------------------------

// Row r's 4-bit (or 8-bit) quants of one block and its scales, in element order.
struct Unpacked {
  uint8_t u[DML_QK_K];  // q4_0 / q4_K nibble, q6_K 6-bit value
  int8_t s8[DML_QK];    // q8_0 quants
  uint16_t d, dmin;
  uint8_t sc[16], mn[8];  // q4_K: 8 scales + 8 mins; q6_K: 16 scales (as int8 bits)
};

void unpack_q4_K_scales(const uint8_t* q, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void unpack_block(int qtype, const uint8_t* b, Unpacked& o) {
  switch (qtype) {
    case DML_QT_Q4_0: {
      auto* x = reinterpret_cast<const dml_block_q4_0*>(b);
      o.d = x->d;
      for (int l = 0; l < 16; ++l) {
        o.u[l] = x->qs[l] & 0xF;
        o.u[l + 16] = x->qs[l] >> 4;
      }
      break;
    }
    case DML_QT_Q8_0: {
      auto* x = reinterpret_cast<const dml_block_q8_0*>(b);
      o.d = x->d;
      memcpy(o.s8, x->qs, 32);
      break;
    }
    case DML_QT_Q4_K: {
      auto* x = reinterpret_cast<const dml_block_q4_K*>(b);
      o.d = x->d;
      o.dmin = x->dmin;
      for (int j = 0; j < 8; ++j) unpack_q4_K_scales(x->scales, j, o.sc[j], o.mn[j]);
      for (int jp = 0; jp < 4; ++jp)
        for (int l = 0; l < 32; ++l) {
          o.u[64 * jp + l] = x->qs[32 * jp + l] & 0xF;
          o.u[64 * jp + 32 + l] = x->qs[32 * jp + l] >> 4;
        }
      break;
    }
    case DML_QT_Q6_K: {
      auto* x = reinterpret_cast<const dml_block_q6_K*>(b);
      o.d = x->d;
      for (int g = 0; g < 16; ++g) o.sc[g] = (uint8_t)x->scales[g];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = x->ql + 64 * h;
        const uint8_t* qh = x->qh + 32 * h;
        uint8_t* u = o.u + 128 * h;
        for (int l = 0; l < 32; ++l) {
          u[l] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
          u[l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
          u[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
          u[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
      }
      break;
    }
  }
}

// One tile from the 8 rows' blocks (`rows[r]` null = zero row).
void pack_tile(int qtype, const uint8_t* const* rows, uint8_t* t) {
  Unpacked un[kG];
  for (int r = 0; r < kG; ++r) {
    if (rows[r]) unpack_block(qtype, rows[r], un[r]);
    else memset(&un[r], 0, sizeof(Unpacked));
  }
  auto put16 = [](uint8_t* p, uint16_t v) { memcpy(p, &v, 2); };
  switch (qtype) {
    case DML_QT_Q4_0:
      for (int r = 0; r < kG; ++r) put16(t + 2 * r, un[r].d);
      for (int k = 0; k < 4; ++k)
        for (int r = 0; r < kG; ++r)
          for (int e = 0; e < 4; ++e)
            t[16 + 32 * k + 4 * r + e] = (uint8_t)(un[r].u[4 * k + e] | (un[r].u[4 * (k + 4) + e] << 4));
      break;
    case DML_QT_Q8_0:
      for (int r = 0; r < kG; ++r) put16(t + 2 * r, un[r].d);
      for (int s = 0; s < 8; ++s)
        for (int r = 0; r < kG; ++r)
          for (int e = 0; e < 4; ++e) t[16 + 32 * s + 4 * r + e] = (uint8_t)un[r].s8[4 * s + e];
      break;
    case DML_QT_Q4_K: {
      for (int r = 0; r < kG; ++r) {
        put16(t + 2 * r, un[r].d);
        put16(t + 16 + 2 * r, un[r].dmin);
      }
      for (int j = 0; j < 8; ++j)
        for (int r = 0; r < kG; ++r) t[32 + 8 * j + r] = un[r].sc[j];
      for (int p = 0; p < 4; ++p)
        for (int r = 0; r < kG; ++r) {
          t[96 + 16 * p + 2 * r] = un[r].mn[2 * p];
          t[96 + 16 * p + 2 * r + 1] = un[r].mn[2 * p + 1];
        }
      uint8_t* q = t + 160;
      for (int jp = 0; jp < 4; ++jp)
        for (int s = 0; s < 8; ++s)
          for (int r = 0; r < kG; ++r)
            for (int e = 0; e < 4; ++e)
              q[256 * jp + 32 * s + 4 * r + e] =
                  (uint8_t)(un[r].u[64 * jp + 4 * s + e] | (un[r].u[64 * jp + 32 + 4 * s + e] << 4));
      break;
    }
    case DML_QT_Q6_K: {
      for (int r = 0; r < kG; ++r) put16(t + 2 * r, un[r].d);
      for (int p = 0; p < 8; ++p)
        for (int r = 0; r < kG; ++r) {
          t[16 + 16 * p + 2 * r] = un[r].sc[2 * p];
          t[16 + 16 * p + 2 * r + 1] = un[r].sc[2 * p + 1];
        }
      uint8_t* q = t + 144;
      for (int p = 0; p < 8; ++p, q += 192)
        for (int r = 0; r < kG; ++r)
          for (int e = 0; e < 4; ++e) {
            const uint8_t* u = un[r].u + 32 * p + e;
            uint8_t h0 = 0, h1 = 0;
            for (int k = 0; k < 4; ++k) {
              q[32 * k + 4 * r + e] = (uint8_t)((u[4 * k] & 0xF) | ((u[16 + 4 * k] & 0xF) << 4));
              h0 |= (uint8_t)(((u[4 * k] >> 4) & 3) << (2 * k));
              h1 |= (uint8_t)(((u[16 + 4 * k] >> 4) & 3) << (2 * k));
            }
            q[128 + 4 * r + e] = h0;
            q[160 + 4 * r + e] = h1;
          }
      break;
    }
  }
}

// ---- kernels: one 8-row group × R activation rows (R = 1..kMaxRows) over all blocks ------------
// The kernels (and their helpers) are in qgemm_packed_kernels.h, compiled here for AVX2 and in
// avx512/qgemm_packed_vnni.cpp for AVX512_VNNI.


// vpdpbusd where the CPU has AVX512_VNNI + VL and DINOML_CPU_DISABLE_ISA does not
// name avx512vnni (same integer sums, bit-identical results), else the AVX2 kernels.
bool vnni_usable() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") && !isa_disabled("avx512vnni");
}

GroupKernel group_fn(int qtype) {
  if (vnni_usable())
    if (GroupKernel k = vnni_group_fn(qtype); k.fn) return k;
  return rows_fn(qtype);
}

void* scratch(size_t bytes) { return scratch_bytes<ScratchPool::kQgemmPacked, 1>(0, bytes); }

std::string type_name(int qtype) {
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  return tr ? tr->name : std::to_string(qtype);
}

int check_shape(int qtype, int64_t N, int64_t K, const char* kernel) {
  if (!tile_bytes(qtype))
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": weight type " + type_name(qtype) +
                                             " has no repacked layout (q4_0 q8_0 q4_K q6_K)");
  if (N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  const int64_t bs = dml_qtype_get(qtype)->block_size;
  if (K % bs != 0)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": K = " + std::to_string(K) + " is not a multiple of the " +
                                          type_name(qtype) + " block size " + std::to_string(bs));
  return DML_CPU_OK;
}

// Decode-sized M (up to 8 sequences × 1 token): the weight-streaming schedule, each tile read from
// memory once per call and run against every activation row while it is in L1.
constexpr int64_t kDecodeMaxM = 8;
constexpr int64_t kGroupsPerChunk = 2;  // 16 weight rows per scheduling unit (decode)
constexpr int64_t kGroupsPerChunkPrefill = 8;  // M > kDecodeMaxM: 64 weight rows per unit
constexpr int64_t kMBlock = 32;                  // activation rows per block (a multiple of 8)
constexpr int64_t kParallelMacs = int64_t{1} << 18;

}  // namespace
}  // namespace dml_cpu::qgemm

using namespace dml_cpu::qgemm;

extern "C" int64_t dml_cpu_qgemm_packed_size(int qtype, int64_t N, int64_t K) {
  const int64_t tb = tile_bytes(qtype);
  if (!tb || N < 0 || K < 0 || K % dml_qtype_get(qtype)->block_size != 0) return -1;
  return kHeader + cdiv(N, kG) * (K / dml_qtype_get(qtype)->block_size) * tb;
}

extern "C" int dml_cpu_qgemm_pack(int qtype, int64_t N, int64_t K, const void* w, void* packed) {
  if (int st = check_shape(qtype, N, K, "qgemm_pack")) return st;
  if (!w || !packed) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, "qgemm_pack: null buffer");
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  const int64_t nb = K / tr->block_size, row_bytes = nb * tr->type_size, tb = tile_bytes(qtype);
  Header h{};
  memcpy(h.magic, kMagic, 8);
  h.qtype = qtype;
  h.n = N;
  h.k = K;
  memcpy(packed, &h, sizeof h);
  auto* out = static_cast<uint8_t*>(packed) + kHeader;
  const auto* src = static_cast<const uint8_t*>(w);
  const int64_t groups = cdiv(N, kG);
#pragma omp parallel for schedule(static) if (groups * nb > 64)
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < nb; ++i) {
      const uint8_t* rows[kG];
      for (int r = 0; r < kG; ++r) rows[r] = g * kG + r < N ? src + (g * kG + r) * row_bytes + i * tr->type_size : nullptr;
      pack_tile(qtype, rows, out + (g * nb + i) * tb);
    }
  return DML_CPU_OK;
}

extern "C" int dml_cpu_qgemm_prepacked(int qtype, int64_t M, int64_t N, int64_t K, const float* a, const void* packed,
                                       const float* bias, const float* d, float* c, int epilogue, int threads) {
  const char* kernel = "qgemm_prepacked";
  if (int st = check_shape(qtype, N, K, kernel)) return st;
  if (M < 0) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (!packed) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": null packed weights");
  Header h;
  memcpy(&h, packed, sizeof h);
  if (memcmp(h.magic, kMagic, 8) != 0 || h.qtype != qtype || h.n != N || h.k != K)
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the packed buffer was not made by dml_cpu_qgemm_pack for " +
                                                   type_name(qtype) + " [" + std::to_string(N) + ", " + std::to_string(K) + "]");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  const bool add = epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU;
  if (add && !d) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  if (M == 0 || N == 0) return DML_CPU_OK;
  dml_cpu::gemm::Epilogue epi;
  epi.kind = epilogue;
  epi.bias = bias;
  epi.d = add ? d : nullptr;
  epi.dtype = DML_CPU_F32;
  epi.ldd = N;
  const dml_cpu::gemm::IsaKernels& isa = *dml_cpu::gemm::active_isa();
  if (K == 0) {
    std::fill(c, c + M * N, 0.0f);
    isa.finish(c, N, M, N, 0, 0, epi, c, N);
    return DML_CPU_OK;
  }
  if (threads <= 0) threads = (omp_in_parallel() || M * N * K < kParallelMacs) ? 1 : std::max(1, omp_get_max_threads());
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  const int64_t nb = K / tr->block_size, tb = tile_bytes(qtype);
  const bool k_act = uses_q8k_activations(qtype);
  const int64_t act_row = k_act ? (K / DML_QK_K) * (int64_t)sizeof(dml_block_q8_K) : (K / DML_QK) * (int64_t)sizeof(BlockA8);
  // The activation scratch belongs to the calling thread; the team reads it.
  auto* act = static_cast<uint8_t*>(scratch((size_t)(act_row * M)));
  if (!act) return dml_cpu::fail(DML_CPU_ERR_MEMORY, std::string(kernel) + ": cannot allocate the quantized activations");
  const GroupKernel kern = group_fn(qtype);
  const auto* tiles = static_cast<const uint8_t*>(packed) + kHeader;
  // Prefill-sized M: more groups per chunk, and the activations walked in blocks of kMBlock rows
  // (≤ 160 KiB of quantized rows at K = 4096) so a block stays in L2 while the chunk's weight
  // tiles (L2 as well) are swept over it.
  const bool decode = M <= kDecodeMaxM;
  const int64_t gpc = decode ? kGroupsPerChunk : kGroupsPerChunkPrefill;
  const int64_t groups = cdiv(N, kG), chunks = cdiv(groups, gpc);
  auto quantize_row = [&](int64_t m) {
    if (k_act)
      avx2_quantize_a8k(a + m * K, reinterpret_cast<dml_block_q8_K*>(act + m * act_row), K);
    else
      avx2_quantize_a8(a + m * K, reinterpret_cast<BlockA8*>(act + m * act_row), K);
  };
  // Decode-sized M: the caller quantizes the few rows itself (microseconds), which saves the
  // team one barrier per call.
  const bool serial_act = decode;
  if (serial_act)
    for (int64_t m = 0; m < M; ++m) quantize_row(m);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    if (!serial_act) {
#pragma omp for schedule(static)
      for (int64_t m = 0; m < M; ++m) quantize_row(m);
    }
#pragma omp for schedule(static) nowait
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t g0 = ch * gpc, g1 = std::min(groups, g0 + gpc);
      alignas(64) float out[8 * 2 * kG];
      for (int64_t mb = 0; mb < M; mb += kMBlock) {
        const int64_t me = std::min(M, mb + kMBlock);
        for (int64_t g = g0; g < g1;) {
          const int64_t n0 = g * kG;
          const uint8_t* t = tiles + g * nb * tb;
          // Groups this pass covers: two where the ISA has a two-group kernel and M ≥ 2 (one
          // activation row is bound by the weight stream, which two interleaved tile streams
          // serve worse than one).
          const int span = kern.pair && M >= 2 && g + 1 < g1 ? 2 : 1;
          const int64_t cols = std::min<int64_t>(span * kG, N - n0);
          for (int64_t m = mb; m < me; m += kern.max_rows) {
            const int rows = (int)std::min<int64_t>(kern.max_rows, me - m);
            if (span == 2) kern.pair(rows, nb, t, nb * tb, act + m * act_row, act_row, out);
            else kern.fn(rows, nb, t, act + m * act_row, act_row, out);
            for (int r = 0; r < rows; ++r)
              memcpy(c + (m + r) * N + n0, out + span * kG * r, (size_t)cols * sizeof(float));
          }
          g += span;
        }
      }
      const int64_t n0 = g0 * kG, cols = std::min(N, g1 * kG) - n0;
      isa.finish(c + n0, N, M, cols, 0, n0, epi, c, N);
    }
  }
  return DML_CPU_OK;
}
