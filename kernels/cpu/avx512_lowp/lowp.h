// The native low-precision GEMMs split in two (why: cmake/cpu_lowp.cmake):
//   * kernels/cpu/gemm_lowp.cpp, built for the baseline ISA: the C ABI, the CPU checks, argument
//     checks and their messages, the packed-B format (header, packing, column sums) and the
//     K = 0 case. Everything a caller can reach on a CPU without AVX-512.
//   * the translation units of this folder, built with the AVX-512 / AMX flags: the compute only,
//     entered through the functions declared at the end of this header, and only after
//     gemm_lowp.cpp checked the CPU. They return a status code and build no message.
// This header holds the packed format both sides read; it has no ISA code and defines nothing with
// external linkage (everything in it is internal to each translation unit).
#pragma once
#include <cstddef>
#include <cstdint>

namespace dml_cpu::gemm {
struct Epilogue;  // gemm_isa.h
}

namespace dml_cpu::lowp {
namespace {

constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A packed B panel is kPanelCols columns × `groups` 32-bit words (a bf16 K-pair or an 8-bit K-quad
// per word); groups are padded with zeros to whole AMX tile rows (kGroupsPerTile), so the AVX-512
// and AMX paths read the same panels.
constexpr int64_t kPanelCols = 32;
constexpr int64_t kGroupsPerTile = 16;

// 32-bit groups per packed column for K: K-pairs (bf16) or K-quads (int8), rounded up to tile rows.
constexpr int64_t bf16_groups(int64_t K) { return cdiv(cdiv(K, 2), kGroupsPerTile) * kGroupsPerTile; }
constexpr int64_t s8_groups(int64_t K) { return cdiv(cdiv(K, 4), kGroupsPerTile) * kGroupsPerTile; }
constexpr int64_t panels_bytes(int64_t N, int64_t groups) { return cdiv(N, kPanelCols) * kPanelCols * groups * 4; }

// Header of a packed-B buffer (64 bytes, so the panels stay cache-line aligned): lets the
// prepacked GEMMs refuse a buffer of another format or shape.
struct PackedHeader {
  char magic[8];
  int64_t n, k, nr, groups;
  int64_t reserved[3];
};
static_assert(sizeof(PackedHeader) == 64, "packed header must be 64 bytes");
constexpr int64_t kHeaderBytes = 64;

}  // namespace

// Status of the compute entry points (gemm_lowp.cpp turns it into the message).
enum RunStatus { kRunOk = 0, kRunNoMemory = 1 };

// Per-thread scratch of the lowp GEMMs (gemm_lowp.cpp; slots below keep simultaneous uses apart).
void* scratch(int slot, size_t bytes);
enum Slot { kSlotA = 0, kSlotB = 1, kSlotC = 2, kSlotAux = 3 };

// ---- entry points of the AVX-512 / AMX translation units (call only after the CPU check) ------

// gemm_s8_avx512.cpp: C (int32, or fp32 = int32 · scale[n] + bias[n], relu) = A (s8 or u8, M × K)
// · packed B. comp: the column sums · 128 stored after the panels (used when A is s8). M, N, K > 0.
int s8_run_avx512(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a, const uint32_t* panels,
                  const int32_t* comp, const float* scale, const float* bias, void* c, bool relu, int threads);
// gemm_s8_avx512.cpp: the packing of full RRR panels (16 columns at a time, with the column sums).
void s8_pack_rrr_panel_avx512(const int8_t* b, int64_t N, int64_t K, int64_t groups, int64_t panel, uint32_t* out,
                              int32_t* comp);

// gemm_bf16_avx512.cpp: C (fp32 or bf16, e.dtype) = e(A (bf16 or fp32, rounded) · packed B), the
// epilogue as gemm_lowp.cpp built it (fp32 bias: a bf16 one is widened there). M, N, K > 0.
int bf16_run_avx512(int64_t M, int64_t N, int64_t K, const void* a, int a_dtype, const uint32_t* panels,
                    const gemm::Epilogue& e, void* c, int threads);

}  // namespace dml_cpu::lowp
