// Internal contract between the attention driver (attention.cpp: blocking, threads, masks, dtype
// conversion, online softmax bookkeeping) and its per-ISA tiles (avx2/attention_avx2.cpp,
// avx512/attention_avx512.cpp, the portable ones in attention.cpp). Not installed; modules never include it.
#pragma once
#include <stdint.h>

namespace dml_cpu::attention {

// Key block width (columns of a score tile) and the padded width of transposed key blocks.
constexpr int64_t kBK = 64;
// Query rows per task (rows of a score tile): at least kBQ, at most kBQMax (attention.cpp picks).
constexpr int64_t kBQ = 32;
constexpr int64_t kBQMax = 128;

struct IsaTiles {
  const char* name;
  // s[i*kBK + j] = Σ_c q[i*d + c] · kt[c*kBK + j] for i < rows, j < kBK (kt zero-padded).
  void (*scores)(int64_t d, const float* q, const float* kt, float* s, int64_t rows);
  // For each row i < rows: m_new = max(m[i], max_j s[i*kBK + j] for j < cols); s[...] = exp(s - m_new)
  // (masked entries hold -inf and become 0); returns the row sum in sum[i] and the old→new
  // correction exp(m_old - m_new) in corr[i]; m[i] = m_new. Columns >= cols become 0.
  void (*softmax_block)(float* s, int64_t rows, int64_t cols, float* m, float* sum, float* corr);
  // o[i*dv + c] = corr[i]·o[i*dv + c] + Σ_{j < cols} p[i*kBK + j] · v[j*ldv + c] for i < rows
  // (ldv: row stride of v, ≥ dv; a strided view of a fused QKV projection has ldv = 3·H·dv).
  void (*accumulate)(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                     float* o, int64_t rows);
  // The softmax op's row (dml_cpu_softmax, reduce.cpp): y[j] = exp(x[j] - max) / Σ exp(x[l] - max) for
  // j < n; y may be x. A row holding a NaN or an infinite maximum gives what the scalar formula
  // gives (NaN where it does), so the vector paths fall back to the generic row for it.
  void (*softmax_row)(const float* x, float* y, int64_t n);
  // dst[i] = float(src[i]) for i < n: one row of a float16 (IEEE half) / bfloat16 KV cache widened
  // exactly to float32 (the mixed form: float32 q with a low-precision k and v).
  void (*widen_f16)(const uint16_t* src, float* dst, int64_t n);
  void (*widen_bf16)(const uint16_t* src, float* dst, int64_t n);
  // The key block of the mixed form: kt[c*kBK + j] = float(k[j*ldk + c]) for j < cols (<= kBK), c < d
  // (16-bit key rows of stride ldk widened and transposed into the key tile; columns >= cols untouched).
  void (*widen_transpose_f16)(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt);
  void (*widen_transpose_bf16)(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt);
};

// The portable row (attention.cpp): what the vector rows fall back to.
void softmax_row_generic(const float* x, float* y, int64_t n);
// The portable widenings (attention.cpp): the vector ones convert their tails with them.
void widen_f16_generic(const uint16_t* src, float* dst, int64_t n);
void widen_bf16_generic(const uint16_t* src, float* dst, int64_t n);
void widen_transpose_f16_generic(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt);
void widen_transpose_bf16_generic(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt);

// Calls f.template operator()<R>(i) for row blocks [i, i + R) covering `rows`: blocks of 4 rows, then
// one block of the 1-3 left (the ISA tiles' row dispatch).
template <class F>
inline void by_row_blocks(int64_t rows, F&& f) {
  int64_t i = 0;
  for (; i + 4 <= rows; i += 4) f.template operator()<4>(i);
  switch (rows - i) {
    case 3: f.template operator()<3>(i); break;
    case 2: f.template operator()<2>(i); break;
    case 1: f.template operator()<1>(i); break;
    default: break;
  }
}

// The tiles of each ISA path (gemm::IsaKernels::attention points at one of them).
extern const IsaTiles kAvx2Tiles;     // avx2/attention_avx2.cpp
extern const IsaTiles kAvx512Tiles;   // avx512/attention_avx512.cpp
extern const IsaTiles kGenericTiles;  // attention.cpp

}  // namespace dml_cpu::attention
