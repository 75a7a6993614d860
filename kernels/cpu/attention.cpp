// dml_cpu_sdpa: fused scaled-dot-product attention, streamed over key blocks (flash-attention's
// online softmax on the CPU): per task (one batch entry × kBQ query rows) the scores of one key
// block at a time live in a kBQ × kBK tile, so memory stays O(kBQ·(kBK + dv)) per thread whatever
// the sequence length. The ISA tiles (attention_isa.h) do the arithmetic; this file owns the
// blocking, threads, masks, causal skipping and dtype conversion. The mixed form (float32 q, mask and
// y with a float16 / bfloat16 k and v: a low-precision KV cache) widens each key row and value
// block to float32 with the tiles' vector conversions; the arithmetic is the float32 path's.
#include <omp.h>

#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "attention_isa.h"
#include "attention_widen_x86.h"
#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::attention {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void scores_generic(int64_t d, const float* q, const float* kt, float* s, int64_t rows) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < kBK; ++j) {
      float acc = 0.0f;
      for (int64_t c = 0; c < d; ++c) acc += q[i * d + c] * kt[c * kBK + j];
      s[i * kBK + j] = acc;
    }
}

void softmax_block_generic(float* s, int64_t rows, int64_t cols, float* m, float* sum, float* corr) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = s + i * kBK;
    float mx = m[i];
    for (int64_t j = 0; j < cols; ++j) mx = std::max(mx, row[j]);
    // Every key so far masked: nothing to rescale, probabilities are 0.
    corr[i] = mx == kNegInf ? 1.0f : std::exp(m[i] - mx);
    float acc = 0.0f;
    for (int64_t j = 0; j < kBK; ++j) {
      const float p = (j < cols && mx != kNegInf && row[j] != kNegInf) ? std::exp(row[j] - mx) : 0.0f;
      row[j] = p;
      acc += p;
    }
    sum[i] = acc;
    m[i] = mx;
  }
}

void accumulate_generic(int64_t dv, const float* p, const float* v, int64_t ldv, int64_t cols, const float* corr,
                        float* o, int64_t rows) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < dv; ++c) {
      float acc = corr[i] * o[i * dv + c];
      for (int64_t j = 0; j < cols; ++j) acc += p[i * kBK + j] * v[j * ldv + c];
      o[i * dv + c] = acc;
    }
}

}  // namespace

void softmax_row_generic(const float* x, float* y, int64_t n) {
  float mx = kNegInf;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    const float e = std::exp(x[j] - mx);
    y[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) y[j] *= inv;
}

void widen_f16_generic(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = dml_half_to_float(src[i]);
}

void widen_bf16_generic(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = dml_bf16_to_float(src[i]);
}

void widen_transpose_f16_generic(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt) {
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t c = 0; c < d; ++c) kt[c * kBK + j] = dml_half_to_float(k[j * ldk + c]);
}

void widen_transpose_bf16_generic(const uint16_t* k, int64_t ldk, int64_t cols, int64_t d, float* kt) {
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t c = 0; c < d; ++c) kt[c * kBK + j] = dml_bf16_to_float(k[j * ldk + c]);
}

namespace {

// Widens n elements of a float16 / bfloat16 row to float32 with the tiles' conversion.
template <typename TK>
inline void widen_row(const IsaTiles* tiles, const TK* src, float* dst, int64_t n) {
  static_assert(std::is_same_v<TK, dml_half> || std::is_same_v<TK, dml_bfloat16>);
  const auto* bits = reinterpret_cast<const uint16_t*>(src);
  if constexpr (std::is_same_v<TK, dml_half>) tiles->widen_f16(bits, dst, n);
  else tiles->widen_bf16(bits, dst, n);
}

// Widens and transposes `cols` float16 / bfloat16 key rows (stride ldk) into the key tile.
template <typename TK>
inline void widen_keys(const IsaTiles* tiles, const TK* k, int64_t ldk, int64_t cols, int64_t d, float* kt) {
  const auto* bits = reinterpret_cast<const uint16_t*>(k);
  if constexpr (std::is_same_v<TK, dml_half>) tiles->widen_transpose_f16(bits, ldk, cols, d, kt);
  else tiles->widen_transpose_bf16(bits, ldk, cols, d, kt);
}

// kt[c*kBK + j] = k[j*ldk + c] for j < cols (<= kBK), c < d: float32 key rows transposed into the
// key tile 8 keys × 8 dims at a time in registers (the library's baseline is AVX2).
inline void transpose_keys(const float* k, int64_t ldk, int64_t cols, int64_t d, float* kt) {
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8) {
    int64_t c = 0;
    for (; c + 8 <= d; c += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(k + (j + i) * ldk + c);
      x86::transpose8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(kt + (c + i) * kBK + j, r[i]);
    }
    for (; c < d; ++c)
      for (int64_t i = 0; i < 8; ++i) kt[c * kBK + j + i] = k[(j + i) * ldk + c];
  }
  for (; j < cols; ++j)
    for (int64_t c = 0; c < d; ++c) kt[c * kBK + j] = k[j * ldk + c];
}

// The tiles of the GEMM's ISA path (its table carries them).
const IsaTiles* active_tiles() { return gemm::active_isa()->attention; }

// Element strides of one operand: st[0 .. nbd) per batch axis, st[nbd] per row (the head dim is
// contiguous). Contiguous operands get their row-major strides.
struct Strides {
  int64_t s[9];
};

Strides contiguous(int nbd, const int64_t* batch_shape, int64_t rows, int64_t cols) {
  Strides st{};
  st.s[nbd] = cols;
  int64_t acc = rows * cols;
  for (int a = nbd; a-- > 0;) {
    st.s[a] = acc;
    acc *= batch_shape[a];
  }
  return st;
}

// Element offset of flattened batch entry b.
int64_t batch_offset(int nbd, const int64_t* batch_shape, const Strides& st, int64_t b) {
  int64_t off = 0;
  for (int a = nbd; a-- > 0;) {
    off += (b % batch_shape[a]) * st.s[a];
    b /= batch_shape[a];
  }
  return off;
}

// T: q, mask, y (and k, v when TK == T); TK != T only for T = float with a float16 / bfloat16 k, v.
template <typename T, typename TK>
int run(int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk, int64_t d, int64_t dv, const T* q,
        const Strides& qs, const TK* k, const Strides& ks, const TK* v, const Strides& vs, int mask_dtype,
        const void* mask, const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj, bool causal, float scale,
        T* y, const Strides& ys) {
  int64_t batch = 1;
  for (int a = 0; a < nbd; ++a) batch *= batch_shape[a];
  // Query rows per task: up to kBQMax while that leaves every thread several tasks. A task gathers
  // (transposes) each key block once for all of its rows, so fewer, taller tasks gather less: BERT-base
  // (12 heads, seq 128, strided q/k/v of a fused QKV projection) at 128 rows a task instead of 32 gathers
  // each head's keys once instead of four times.
  const int threads = omp_get_max_threads();
  int64_t bq = kBQ;
  while (bq < kBQMax && bq < lq && batch * ((lq + 2 * bq - 1) / (2 * bq)) >= int64_t{4} * threads) bq *= 2;
  const int64_t nqb = (lq + bq - 1) / bq;
  const int64_t tasks = batch * nqb;
  const IsaTiles* tiles = active_tiles();
  const bool par = tasks > 1 && double(batch) * double(lq) * double(lk) * double(d + dv) > double(kParallelWork);
  static_assert(std::is_same_v<T, TK> || std::is_same_v<T, float>, "mixed form: float32 q with a 16-bit k, v");
  constexpr bool kv_float = std::is_same_v<TK, float>;
  constexpr bool mixed = !std::is_same_v<T, TK>;
  const bool v_direct = kv_float;
  // Tasks handed out dynamically (a thread that loses its core takes fewer), a few per grab.
  const int64_t chunk = std::max<int64_t>(1, tasks / (int64_t{8} * threads));
#pragma omp parallel if (par)
  {
    std::vector<float> qf(static_cast<size_t>(bq * d)), kt(static_cast<size_t>(d * kBK)),
        vf(v_direct ? 0 : static_cast<size_t>(kBK * dv)), s(static_cast<size_t>(bq * kBK)),
        o(static_cast<size_t>(bq * dv)), m(bq), l(bq), sum(bq), corr(bq);
#pragma omp for schedule(dynamic, chunk) nowait
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t b = task / nqb, i0 = (task % nqb) * bq, rows = std::min(bq, lq - i0);
      int64_t moff = 0;
      if (mask) {
        int64_t rem = b;
        for (int a = nbd; a-- > 0;) {
          moff += (rem % batch_shape[a]) * mask_bstride[a];
          rem /= batch_shape[a];
        }
      }
      const int64_t qo = batch_offset(nbd, batch_shape, qs, b), ko = batch_offset(nbd, batch_shape, ks, b),
                    vo = batch_offset(nbd, batch_shape, vs, b), yo = batch_offset(nbd, batch_shape, ys, b);
      const int64_t qr = qs.s[nbd], kr = ks.s[nbd], vr = vs.s[nbd], yr = ys.s[nbd];
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < d; ++c) qf[i * d + c] = load_f(q, qo + (i0 + i) * qr + c) * scale;
      std::fill(o.begin(), o.begin() + rows * dv, 0.0f);
      std::fill(m.begin(), m.end(), kNegInf);
      std::fill(l.begin(), l.end(), 0.0f);
      // Causal: the block's last row sees keys up to i0 + rows - 1; later key blocks are skipped.
      const int64_t jend = causal ? std::min(lk, i0 + rows) : lk;
      for (int64_t j0 = 0; j0 < jend; j0 += kBK) {
        const int64_t cols = std::min(kBK, jend - j0);
        // A key block that a boolean mask hides from a row would add nothing to that row (its
        // scores are -inf: p = 0, corr = 1, the running max and sum unchanged), so the block runs
        // only for the rows [ra, rb) between the first and the last row that see any of its keys,
        // and a block no row sees is skipped unread: a decoder attends to its KV cache only where
        // the cache is filled, and with several sequences in one run (slots) each query row sees
        // only its own sequence's key blocks.
        int64_t ra = 0, rb = rows;
        if (mask && mask_dtype == DML_CPU_BOOL) {
          const auto* mb = static_cast<const uint8_t*>(mask) + moff + i0 * mask_si + j0 * mask_sj;
          auto sees = [&](int64_t i) {
            const uint8_t* r = mb + i * mask_si;
            int64_t j = 0;
            if (mask_sj == 1)  // contiguous mask row: 32 bytes at a time
              for (; j + 32 <= cols; j += 32)
                if (!_mm256_testz_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + j)), _mm256_set1_epi8(-1)))
                  return true;
            for (; j < cols; ++j)
              if (r[j * mask_sj]) return true;
            return false;
          };
          while (ra < rows && !sees(ra)) ++ra;
          if (ra == rows) continue;
          while (rb - 1 > ra && !sees(rb - 1)) --rb;
        }
        const int64_t nr = rb - ra;
        // Key rows are read contiguously (they may be strided views) and written transposed.
        if constexpr (mixed) {
          widen_keys(tiles, k + ko + j0 * kr, kr, cols, d, kt.data());
        } else if constexpr (kv_float) {
          transpose_keys(k + ko + j0 * kr, kr, cols, d, kt.data());
        } else {
          for (int64_t j = 0; j < cols; ++j) {
            const TK* kj = k + ko + (j0 + j) * kr;
            for (int64_t c = 0; c < d; ++c) kt[c * kBK + j] = load_f(kj, c);
          }
        }
        if (cols < kBK)
          for (int64_t c = 0; c < d; ++c) std::fill(kt.begin() + c * kBK + cols, kt.begin() + (c + 1) * kBK, 0.0f);
        tiles->scores(d, qf.data() + ra * d, kt.data(), s.data() + ra * kBK, nr);
        if (mask) {
          for (int64_t i = ra; i < rb; ++i) {
            float* row = s.data() + i * kBK;
            const int64_t base = moff + (i0 + i) * mask_si + j0 * mask_sj;
            if (mask_dtype == DML_CPU_BOOL) {
              const auto* mb = static_cast<const uint8_t*>(mask) + base;
              for (int64_t j = 0; j < cols; ++j)
                if (!mb[j * mask_sj]) row[j] = kNegInf;
            } else {
              const T* mf = static_cast<const T*>(mask) + base;
              for (int64_t j = 0; j < cols; ++j) row[j] += load_f(mf, j * mask_sj);
            }
          }
        }
        if (causal && j0 + cols - 1 > i0) {
          for (int64_t i = ra; i < rb; ++i)
            for (int64_t j = std::max<int64_t>(0, i0 + i + 1 - j0); j < cols; ++j) s[i * kBK + j] = kNegInf;
        }
        tiles->softmax_block(s.data() + ra * kBK, nr, cols, m.data() + ra, sum.data() + ra, corr.data() + ra);
        for (int64_t i = ra; i < rb; ++i) l[i] = l[i] * corr[i] + sum[i];
        const float* vb;
        int64_t ldv = dv;
        if constexpr (kv_float) {
          vb = v + vo + j0 * vr;
          ldv = vr;
        } else if constexpr (mixed) {
          for (int64_t j = 0; j < cols; ++j) widen_row(tiles, v + vo + (j0 + j) * vr, vf.data() + j * dv, dv);
          vb = vf.data();
        } else {
          for (int64_t j = 0; j < cols; ++j)
            for (int64_t c = 0; c < dv; ++c) vf[j * dv + c] = load_f(v, vo + (j0 + j) * vr + c);
          vb = vf.data();
        }
        tiles->accumulate(dv, s.data() + ra * kBK, vb, ldv, cols, corr.data() + ra, o.data() + ra * dv, nr);
      }
      for (int64_t i = 0; i < rows; ++i) {
        const float inv = 1.0f / l[i];  // 0 when every key was masked: 0 · inf = NaN, as documented
        for (int64_t c = 0; c < dv; ++c) store_f(y, yo + (i0 + i) * yr + c, o[i * dv + c] * inv);
      }
    }
  }
  return DML_CPU_OK;
}

}  // namespace

const IsaTiles kGenericTiles = {"generic",
                                 scores_generic,
                                 softmax_block_generic,
                                 accumulate_generic,
                                 softmax_row_generic,
                                 widen_f16_generic,
                                 widen_bf16_generic,
                                 widen_transpose_f16_generic,
                                 widen_transpose_bf16_generic};

}  // namespace dml_cpu::attention

using namespace dml_cpu;

namespace {

int sdpa(const char* name, int dtype, int kv_dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk, int64_t d,
         int64_t dv, const void* q, const int64_t* qs, const void* k, const int64_t* ks, const void* v,
         const int64_t* vs, int mask_dtype, const void* mask, const int64_t* mask_bstride, int64_t mask_si,
         int64_t mask_sj, int causal, float scale, void* y, const int64_t* ys) {
  const std::string fn = name;
  if (nbd < 0 || nbd > 8 || (nbd > 0 && !batch_shape))
    return fail(DML_CPU_ERR_ARGUMENT, fn + ": nbd " + std::to_string(nbd) + " is outside [0, 8] or batch_shape is NULL");
  int64_t batch = 1;
  for (int a = 0; a < nbd; ++a) {
    if (batch_shape[a] < 0) return fail(DML_CPU_ERR_ARGUMENT, fn + ": negative batch extent");
    batch *= batch_shape[a];
  }
  if (lq < 0 || lk < 0 || d < 0 || dv < 0)
    return fail(DML_CPU_ERR_ARGUMENT, fn + ": negative extent (lq " + std::to_string(lq) + ", lk " +
                                          std::to_string(lk) + ", d " + std::to_string(d) + ", dv " + std::to_string(dv) + ")");
  if (batch == 0 || lq == 0 || dv == 0) return DML_CPU_OK;
  if (!q || !k || !v || !y) return fail(DML_CPU_ERR_ARGUMENT, fn + ": q, k, v or y is NULL");
  if (mask && mask_dtype != DML_CPU_BOOL && mask_dtype != dtype)
    return fail(DML_CPU_ERR_ARGUMENT, fn + ": mask dtype " + dtype_name(mask_dtype) +
                                          " must be bool or the attention dtype " + dtype_name(dtype));
  if (mask && nbd > 0 && !mask_bstride) return fail(DML_CPU_ERR_ARGUMENT, fn + ": mask_bstride is NULL");
  auto strides = [&](const int64_t* given, int64_t rows, int64_t cols, const char* what, attention::Strides& st) -> int {
    st = attention::contiguous(nbd, batch_shape, rows, cols);
    if (!given) return static_cast<int>(DML_CPU_OK);
    for (int a = 0; a <= nbd; ++a) {
      if (given[a] < 0)
        return fail(DML_CPU_ERR_ARGUMENT, fn + ": negative stride " + std::to_string(given[a]) + " of " + what);
      st.s[a] = given[a];
    }
    if (rows > 1 && st.s[nbd] < cols)
      return fail(DML_CPU_ERR_ARGUMENT, fn + ": row stride " + std::to_string(st.s[nbd]) + " of " + what +
                                            " is below its row length " + std::to_string(cols));
    return DML_CPU_OK;
  };
  attention::Strides sq, sk, sv, sy;
  if (int st = strides(qs, lq, d, "q", sq)) return st;
  if (int st = strides(ks, lk, d, "k", sk)) return st;
  if (int st = strides(vs, lk, dv, "v", sv)) return st;
  if (int st = strides(ys, lq, dv, "y", sy)) return st;
  if (!(scale > 0.0f)) scale = d > 0 ? 1.0f / std::sqrt(static_cast<float>(d)) : 1.0f;
  if (kv_dtype != dtype) {
    // The mixed form: float32 q / mask / y, float16 or bfloat16 k and v.
    auto mixed = [&](auto tag) {
      using TK = decltype(tag);
      return attention::run<float, TK>(nbd, batch_shape, lq, lk, d, dv, static_cast<const float*>(q), sq,
                                       static_cast<const TK*>(k), sk, static_cast<const TK*>(v), sv, mask_dtype, mask,
                                       mask_bstride, mask_si, mask_sj, causal != 0, scale, static_cast<float*>(y), sy);
    };
    if (dtype == DML_CPU_F32 && kv_dtype == DML_CPU_F16) return mixed(dml_half{});
    if (dtype == DML_CPU_F32 && kv_dtype == DML_CPU_BF16) return mixed(dml_bfloat16{});
    return fail(DML_CPU_ERR_UNSUPPORTED, fn + ": k/v dtype " + dtype_name(kv_dtype) + " with q dtype " + dtype_name(dtype) +
                                       ": mixed dtypes need q float32 and k, v float16 or bfloat16");
  }
  return dispatch_float(dtype, name, [&](auto tag) {
    using T = decltype(tag);
    return attention::run<T, T>(nbd, batch_shape, lq, lk, d, dv, static_cast<const T*>(q), sq,
                                static_cast<const T*>(k), sk, static_cast<const T*>(v), sv, mask_dtype, mask,
                                mask_bstride, mask_si, mask_sj, causal != 0, scale, static_cast<T*>(y), sy);
  });
}

}  // namespace

extern "C" int dml_cpu_sdpa(int dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk, int64_t d,
                            int64_t dv, const void* q, const void* k, const void* v, int mask_dtype, const void* mask,
                            const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj, int causal, float scale,
                            void* y) {
  return sdpa("dml_cpu_sdpa", dtype, dtype, nbd, batch_shape, lq, lk, d, dv, q, nullptr, k, nullptr, v, nullptr, mask_dtype,
              mask, mask_bstride, mask_si, mask_sj, causal, scale, y, nullptr);
}

extern "C" int dml_cpu_sdpa_strided(int dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk, int64_t d,
                                    int64_t dv, const void* q, const int64_t* qs, const void* k, const int64_t* ks,
                                    const void* v, const int64_t* vs, int mask_dtype, const void* mask,
                                    const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj, int causal,
                                    float scale, void* y, const int64_t* ys) {
  return sdpa("dml_cpu_sdpa_strided", dtype, dtype, nbd, batch_shape, lq, lk, d, dv, q, qs, k, ks, v, vs, mask_dtype, mask,
              mask_bstride, mask_si, mask_sj, causal, scale, y, ys);
}

extern "C" int dml_cpu_sdpa_mixed(int dtype, int kv_dtype, int nbd, const int64_t* batch_shape, int64_t lq, int64_t lk,
                                  int64_t d, int64_t dv, const void* q, const void* k, const void* v, int mask_dtype,
                                  const void* mask, const int64_t* mask_bstride, int64_t mask_si, int64_t mask_sj,
                                  int causal, float scale, void* y) {
  return sdpa("dml_cpu_sdpa_mixed", dtype, kv_dtype, nbd, batch_shape, lq, lk, d, dv, q, nullptr, k, nullptr, v,
              nullptr, mask_dtype, mask, mask_bstride, mask_si, mask_sj, causal, scale, y, nullptr);
}

extern "C" int dml_cpu_sdpa_strided_mixed(int dtype, int kv_dtype, int nbd, const int64_t* batch_shape, int64_t lq,
                                          int64_t lk, int64_t d, int64_t dv, const void* q, const int64_t* qs,
                                          const void* k, const int64_t* ks, const void* v, const int64_t* vs,
                                          int mask_dtype, const void* mask, const int64_t* mask_bstride,
                                          int64_t mask_si, int64_t mask_sj, int causal, float scale, void* y,
                                          const int64_t* ys) {
  return sdpa("dml_cpu_sdpa_strided_mixed", dtype, kv_dtype, nbd, batch_shape, lq, lk, d, dv, q, qs, k, ks, v, vs,
              mask_dtype, mask, mask_bstride, mask_si, mask_sj, causal, scale, y, ys);
}
