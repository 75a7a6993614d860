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

// Panels [j0, j1) of the logical b[K, N] (layout RRR: b[K, N], RCR: b[N, K]) into `out`. `nt`: fp32
// whole panels are written with non-temporal stores (for a packed B larger than L2, read back from
// memory anyway: no read for ownership, the operands in cache stay).
template <typename T>
void pack_b_panels(const T* b, int layout, int64_t N, int64_t K, float* out, int64_t j0, int64_t j1, bool nt = false);
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

// The batch axes of dml_cpu_bmm / dml_cpu_bmm_tiled: c[batch…] = a[batch…] · b[batch…], where a_batch /
// b_batch are the operands' extents (each equal to batch_shape's or 1: broadcast) and a matrix of a
// holds a_mat elements, one of b b_mat. `offsets` gives batch item bi's element offsets into a and b.
struct BatchAxes {
  int rank = 0;
  int64_t count = 1;  // product of batch_shape
  int64_t shape[8] = {}, sa[8] = {}, sb[8] = {};

  // DML_CPU_OK, or an error naming `kernel` and the axis that does not broadcast / the bad rank.
  int init(const char* kernel, int batch_rank, const int64_t* batch_shape, const int64_t* a_batch,
           const int64_t* b_batch, int64_t a_mat, int64_t b_mat);
  void offsets(int64_t bi, int64_t& oa, int64_t& ob) const {
    oa = ob = 0;
    for (int i = rank - 1; i >= 0; --i) {
      const int64_t idx = bi % shape[i];
      bi /= shape[i];
      oa += idx * sa[i];
      ob += idx * sb[i];
    }
  }
};

}  // namespace dml_cpu::gemm
