// Internal declarations shared by gemm.cpp (driver + ABI) and gemm_pack.cpp (packing).
#pragma once
#include <stdint.h>

#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::gemm {

// Header of a packed-B buffer: lets dml_cpu_gemm_prepacked refuse a buffer of another shape or
// format instead of reading garbage. 64 bytes so the panels stay cache-line aligned.
inline constexpr char kPackedMagic[8] = {'D', 'M', 'L', 'P', 'K', 'B', '1', '\0'};
inline constexpr int64_t kPackedHeaderBytes = 64;
struct PackedHeader {
  char magic[8];
  int64_t nr, n, k;
  int64_t dtype;  // dtype the weights had before widening (informational)
  int64_t reserved[3];
};
static_assert(sizeof(PackedHeader) == kPackedHeaderBytes, "packed header must be 64 bytes");

// Panels [j0, j1) of the logical b[K, N] (layout RRR: b[K, N], RCR: b[N, K]) into `out`.
template <typename T>
void pack_b_panels(const T* b, int layout, int64_t N, int64_t K, float* out, int64_t j0, int64_t j1);
// Rows [k0, k0+kc) of the panel starting at column n0, as kc×16 floats (skinny path, per thread).
template <typename T>
void pack_b_slice(const T* b, int layout, int64_t N, int64_t K, int64_t n0, int64_t k0, int64_t kc, float* out);
// Rows [m0, m0+mc) × depth [k0, k0+kc) of a (row stride lda) into 6-row panels, zero-padded.
template <typename T>
void pack_a_block(const T* a, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* out);

int64_t packed_b_bytes(int64_t N, int64_t K);
// Every panel of b into `panels` (threads split the panels when `parallel`).
int pack_b_all(int dtype, int layout, int64_t N, int64_t K, const void* b, float* panels, bool parallel);
// The panels of a buffer made by dml_cpu_gemm_pack_b, after checking its header against (N, K).
const float* packed_b_panels(const void* packed, int64_t N, int64_t K, const char* kernel, int* status);

}  // namespace dml_cpu::gemm
