// Reference quantization of the GGUF block formats, byte-identical to ggml's quantize_row_*_ref
// (tests/cpp/gguf). The float operations follow the same order and FMA contraction is off, as in
// quant_dequant.h (whose helpers and scale unpacking this file uses).
#ifndef DINOML_QUANT_QUANTIZE_H
#define DINOML_QUANT_QUANTIZE_H

#include "dinoml/quant_dequant.h"

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

namespace dinoml::quant {

// ------------------------------------------------------- reference quantize (k elements) ----

// The element of x[0, n) with the largest magnitude (the first of equals; 0 for an all-zero x) is
// stored in *max; returns its magnitude.
static inline float signed_absmax(const float* x, int n, float* max) {
  float amax = 0.0f;
  *max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float ax = fabsf(x[j]);
    if (ax > amax) {
      amax = ax;
      *max = x[j];
    }
  }
  return amax;
}

// One q4_0 (kHalf 8) / q5_0 (kHalf 16) block of DML_QK floats: scale d = max / -kHalf (max: the
// element of largest magnitude), quant min(2·kHalf - 1, trunc(x / d + kHalf + 0.5)).
// pack(j, q_j, q_{j + QK/2}) stores the quants of elements j and j + QK/2. Returns d.
template <int kHalf, typename Pack>
static inline float quantize_block_symmetric(const float* x, Pack&& pack) {
  float max;
  signed_absmax(x, DML_QK, &max);
  const float d = max / -kHalf;
  const float id = d ? 1.0f / d : 0.0f;
  for (int j = 0; j < DML_QK / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[DML_QK / 2 + j] * id;
    const uint8_t xi0 = qmin<int8_t>(2 * kHalf - 1, (int8_t)(x0 + (kHalf + 0.5f)));
    const uint8_t xi1 = qmin<int8_t>(2 * kHalf - 1, (int8_t)(x1 + (kHalf + 0.5f)));
    pack(j, xi0, xi1);
  }
  return d;
}

// One q4_1 (kBits 4) / q5_1 (kBits 5) block of DML_QK floats: scale d = (max - min) / (2^kBits - 1),
// stored min, quant trunc((x - min) / d + 0.5) (clamped to 15 for q4_1 only, as ggml does).
// pack(j, q_j, q_{j + QK/2}) stores the quants; *min_out receives min. Returns d.
template <int kBits, typename Pack>
static inline float quantize_block_affine(const float* x, float* min_out, Pack&& pack) {
  float min = 3.402823466e+38f, max = -3.402823466e+38f;
  for (int j = 0; j < DML_QK; ++j) {
    const float v = x[j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const float d = (max - min) / ((1 << kBits) - 1);
  const float id = d ? 1.0f / d : 0.0f;
  *min_out = min;
  for (int j = 0; j < DML_QK / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[DML_QK / 2 + j] - min) * id;
    if constexpr (kBits == 4)
      pack(j, (uint8_t)qmin<int8_t>(15, (int8_t)(x0 + 0.5f)), (uint8_t)qmin<int8_t>(15, (int8_t)(x1 + 0.5f)));
    else
      pack(j, (uint8_t)(x0 + 0.5f), (uint8_t)(x1 + 0.5f));
  }
  return d;
}

// The 5-bit blocks' quants: the low 4 bits pairwise into qs, bit 4 of quant j into bit j of qh.
struct Pack5 {
  uint8_t* qs;
  uint32_t qh = 0;
  void operator()(int j, uint8_t xi0, uint8_t xi1) {
    qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + DML_QK / 2);
  }
};

static inline void quantize_q4_0(const float* x, dml_block_q4_0* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    uint8_t* qs = y[i].qs;
    y[i].d = f2h(quantize_block_symmetric<8>(x + i * DML_QK, [&](int j, uint8_t xi0, uint8_t xi1) {
      qs[j] = xi0 | (xi1 << 4);
    }));
  }
}

static inline void quantize_q4_1(const float* x, dml_block_q4_1* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    uint8_t* qs = y[i].qs;
    float min;
    y[i].d = f2h(quantize_block_affine<4>(x + i * DML_QK, &min, [&](int j, uint8_t xi0, uint8_t xi1) {
      qs[j] = xi0 | (xi1 << 4);
    }));
    y[i].m = f2h(min);
  }
}

static inline void quantize_q5_0(const float* x, dml_block_q5_0* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    Pack5 pack{y[i].qs};
    y[i].d = f2h(quantize_block_symmetric<16>(x + i * DML_QK, pack));
    memcpy(y[i].qh, &pack.qh, 4);
  }
}

static inline void quantize_q5_1(const float* x, dml_block_q5_1* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    Pack5 pack{y[i].qs};
    float min;
    y[i].d = f2h(quantize_block_affine<5>(x + i * DML_QK, &min, pack));
    y[i].m = f2h(min);
    memcpy(y[i].qh, &pack.qh, 4);
  }
}

static inline void quantize_q8_0(const float* x, dml_block_q8_0* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    float amax = 0.0f;
    for (int j = 0; j < DML_QK; ++j) amax = qmax(amax, fabsf(x[i * DML_QK + j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f2h(d);
    for (int j = 0; j < DML_QK; ++j) y[i].qs[j] = (int8_t)roundf(x[i * DML_QK + j] * id);
  }
}

// The symmetric sub-block quantizers' first step: *max = the element of x[0, n) with the largest
// magnitude; false (and L zeroed) when that magnitude is below kGroupMaxEps (the scale is then 0).
static inline bool nonzero_group(const float* x, int n, int8_t* L, float* max) {
  if (signed_absmax(x, n, max) >= kGroupMaxEps) return true;
  for (int i = 0; i < n; ++i) L[i] = 0;
  return false;
}

// Symmetric quants in [-nmax, nmax-1] (stored biased by nmax) with an iterative least-squares
// scale search; rmse_type 1 weighs by x^2. Returns the scale.
static inline float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type) {
  float max;
  if (!nonzero_group(x, n, L, &max)) return 0.f;
  float iscale = -nmax / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) {
      const int l = nearest_int(iscale * x[i]);
      L[i] = nmax + qmax(-nmax, qmin(nmax - 1, l));
    }
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) {
    rmse_type = -rmse_type;
    return_early = true;
  }
  auto weight = [&](int i) -> float {
    return rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1 : rmse_type == 3 ? fabsf(x[i]) : sqrtf(fabsf(x[i]));
  };
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = qmax(-nmax, qmin(nmax - 1, l));
    L[i] = l + nmax;
    const float w = weight(i);
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = qmax(-nmax, qmin(nmax - 1, l));
      const float w = weight(i);
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = nmax + qmax(-nmax, qmin(nmax - 1, l));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Symmetric 3-bit quants with coordinate-descent refinement (q3_K's sub-block step).
static inline float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
  float max;
  if (!nonzero_group(x, n, L, &max)) return 0.f;
  const float iscale = -nmax / max;
  if (do_rmse) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = qmax(-nmax, qmin(nmax - 1, l));
      L[i] = l;
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
      int n_changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * L[i];
        if (slx > 0) {
          float sl2 = suml2 - w * L[i] * L[i];
          int new_l = nearest_int(x[i] * sl2 / slx);
          new_l = qmax(-nmax, qmin(nmax - 1, new_l));
          if (new_l != L[i]) {
            slx += w * x[i] * new_l;
            sl2 += w * new_l * new_l;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              L[i] = new_l;
              sumlx = slx;
              suml2 = sl2;
              ++n_changed;
            }
          }
        }
      }
      if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] += nmax;
    return sumlx / suml2;
  }
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = qmax(-nmax, qmin(nmax - 1, l));
    L[i] = l + nmax;
  }
  return 1 / iscale;
}

// Asymmetric quants in [0, nmax] with a scale and a min found by a weighted least-squares search
// over nstep+1 candidate scales. Returns the scale; *the_min receives -min.
static inline float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                                     bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = qmax(0, qmin(nmax, l));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? fabsf(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = qmax(0, qmin(nmax, l));
      Laux[i] = l;
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// q2_K / q3_K: the block's 2-bit quants L[0, QK_K) (in [0, 3]) four to a byte: byte l of each
// 32-byte group of 128 quants holds quants l, l + 32, l + 64, l + 96 from the low bits up.
template <typename Q>
static inline void pack_2bit(const Q* L, uint8_t* qs) {
  for (int j = 0; j < DML_QK_K; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6);
}

static inline void quantize_q2_K(const float* x, dml_block_q2_K* y, int64_t k) {
  uint8_t L[DML_QK_K], Laux[16];
  float weights[16], mins[DML_QK_K / 16], scales[DML_QK_K / 16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < DML_QK_K / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < DML_QK_K / 16; ++j) y[i].scales[j] = nearest_int(iscale * scales[j]);
      y[i].d = f2h(max_scale / q4scale);
    } else {
      for (int j = 0; j < DML_QK_K / 16; ++j) y[i].scales[j] = 0;
      y[i].d = f2h(0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < DML_QK_K / 16; ++j) y[i].scales[j] |= (nearest_int(iscale * mins[j]) << 4);
      y[i].dmin = f2h(max_min / q4scale);
    } else {
      y[i].dmin = f2h(0.f);
    }
    for (int j = 0; j < DML_QK_K / 16; ++j) {
      const float d = h2f(y[i].d) * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = h2f(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = qmax(0, qmin(3, l));
      }
    }
    pack_2bit(L, y[i].qs);
    x += DML_QK_K;
  }
}

static inline void quantize_q3_K(const float* x, dml_block_q3_K* y, int64_t k) {
  int8_t L[DML_QK_K];
  float scales[DML_QK_K / 16];
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    for (int j = 0; j < DML_QK_K / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
    float max_scale;
    signed_absmax(scales, DML_QK_K / 16, &max_scale);
    memset(y[i].scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < DML_QK_K / 16; ++j) {
        int8_t l = nearest_int(iscale * scales[j]);
        l = qmax<int8_t>(-32, qmin<int8_t>(31, l)) + 32;
        if (j < 8)
          y[i].scales[j] = l & 0xF;
        else
          y[i].scales[j - 8] |= ((l & 0xF) << 4);
        l >>= 4;
        y[i].scales[j % 4 + 8] |= (l << (2 * (j / 4)));
      }
      y[i].d = f2h(1 / iscale);
    } else {
      y[i].d = f2h(0.f);
    }
    for (int j = 0; j < DML_QK_K / 16; ++j) {
      int8_t sc = j < 8 ? y[i].scales[j] & 0xF : y[i].scales[j - 8] >> 4;
      sc = (sc | (((y[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      const float d = h2f(y[i].d) * sc;
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = qmax(-4, qmin(3, l));
        L[16 * j + ii] = l + 4;
      }
    }
    memset(y[i].hmask, 0, DML_QK_K / 8);
    // High bit of the first 32 quants into bit 0 of hmask[0..31], the next 32 into bit 1, ...
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < DML_QK_K; ++j) {
      if (L[j] > 3) {
        y[i].hmask[m] |= hm;
        L[j] -= 4;
      }
      if (++m == DML_QK_K / 8) {
        m = 0;
        hm <<= 1;
      }
    }
    pack_2bit(L, y[i].qs);
    x += DML_QK_K;
  }
}

// Shared by q4_K and q5_K: 8 sub-blocks of 32, 6-bit scales/mins; fills scales, d, dmin and L.
static inline void quantize_k4_scales(const float* x, uint8_t* L, int nmax, float rmin, int nstep,
                                      uint8_t packed[12], dml_qhalf* d_out, dml_qhalf* dmin_out) {
  uint8_t Laux[32];
  float weights[32], mins[DML_QK_K / 32], scales[DML_QK_K / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < DML_QK_K / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = sqrtf(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < DML_QK_K / 32; ++j) {
    uint8_t ls = nearest_int(inv_scale * scales[j]);
    uint8_t lm = nearest_int(inv_min * mins[j]);
    ls = qmin<uint8_t>(63, ls);
    lm = qmin<uint8_t>(63, lm);
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
      packed[j - 4] |= ((ls >> 4) << 6);
      packed[j - 0] |= ((lm >> 4) << 6);
    }
  }
  *d_out = f2h(max_scale / 63.f);
  *dmin_out = f2h(max_min / 63.f);
  uint8_t sc, m;
  for (int j = 0; j < DML_QK_K / 32; ++j) {
    get_scale_min_k4(j, packed, &sc, &m);
    const float d = h2f(*d_out) * sc;
    if (!d) continue;
    const float dm = h2f(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = qmax(0, qmin(nmax, l));
    }
  }
}

static inline void quantize_q4_K(const float* x, dml_block_q4_K* y, int64_t k) {
  uint8_t L[DML_QK_K];
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    quantize_k4_scales(x, L, 15, -1.f, 20, y[i].scales, &y[i].d, &y[i].dmin);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < DML_QK_K; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = L[j + l] | (L[j + l + 32] << 4);
      q += 32;
    }
    x += DML_QK_K;
  }
}

static inline void quantize_q5_K(const float* x, dml_block_q5_K* y, int64_t k) {
  uint8_t L[DML_QK_K];
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    quantize_k4_scales(x, L, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    memset(qh, 0, DML_QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < DML_QK_K; n += 64) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[n + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = l1 | (l2 << 4);
      }
      m1 <<= 2;
      m2 <<= 2;
      ql += 32;
    }
    x += DML_QK_K;
  }
}

static inline void quantize_q6_K(const float* x, dml_block_q6_K* y, int64_t k) {
  int8_t L[DML_QK_K];
  float scales[DML_QK_K / 16];
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    for (int ib = 0; ib < DML_QK_K / 16; ++ib) scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
    float max_scale;
    const float max_abs_scale = signed_absmax(scales, DML_QK_K / 16, &max_scale);
    if (max_abs_scale < kGroupMaxEps) {
      memset(&y[i], 0, sizeof(dml_block_q6_K));
      y[i].d = f2h(0.f);
      x += DML_QK_K;
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f2h(1 / iscale);
    for (int ib = 0; ib < DML_QK_K / 16; ++ib) y[i].scales[ib] = qmin(127, nearest_int(iscale * scales[ib]));
    for (int j = 0; j < DML_QK_K / 16; ++j) {
      const float d = h2f(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = nearest_int(x[16 * j + ii] / d);
        l = qmax(-32, qmin(31, l));
        L[16 * j + ii] = l + 32;
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < DML_QK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l + 0] & 0xF;
        const uint8_t q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF;
        const uint8_t q4 = L[j + l + 96] & 0xF;
        ql[l + 0] = q1 | (q3 << 4);
        ql[l + 32] = q2 | (q4 << 4);
        qh[l] = (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6);
      }
      ql += 64;
      qh += 32;
    }
    x += DML_QK_K;
  }
}

static inline void quantize_q8_K(const float* x, dml_block_q8_K* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    float max;
    const float amax = signed_absmax(x, DML_QK_K, &max);
    if (!amax) {
      // ggml leaves bsums untouched here; DinoML zeroes them (a zero block has zero sums).
      y[i].d = 0;
      memset(y[i].qs, 0, DML_QK_K);
      memset(y[i].bsums, 0, sizeof(y[i].bsums));
      x += DML_QK_K;
      continue;
    }
    // -127 (not -128): keeps every quant in [-127, 127] so SIMD sign tricks stay exact.
    const float iscale = -127.f / max;
    for (int j = 0; j < DML_QK_K; ++j) y[i].qs[j] = qmin(127, nearest_int(iscale * x[j]));
    for (int j = 0; j < DML_QK_K / 16; ++j) {
      int sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
      y[i].bsums[j] = sum;
    }
    y[i].d = 1 / iscale;
    x += DML_QK_K;
  }
}

// Reference-quantizes k floats into type `t`; false when not supported.
static inline bool quantize_row_ref(int t, const float* src, void* dst, int64_t k) {
  switch (t) {
    case DML_QT_F32: memcpy(dst, src, (size_t)k * 4); return true;
    case DML_QT_F16: {
      uint16_t* d = (uint16_t*)dst;
      for (int64_t i = 0; i < k; ++i) d[i] = dml_float_to_half(src[i]);
      return true;
    }
    case DML_QT_BF16: {
      uint16_t* d = (uint16_t*)dst;
      for (int64_t i = 0; i < k; ++i) d[i] = dml_float_to_bf16(src[i]);
      return true;
    }
    case DML_QT_Q4_0: quantize_q4_0(src, (dml_block_q4_0*)dst, k); return true;
    case DML_QT_Q4_1: quantize_q4_1(src, (dml_block_q4_1*)dst, k); return true;
    case DML_QT_Q5_0: quantize_q5_0(src, (dml_block_q5_0*)dst, k); return true;
    case DML_QT_Q5_1: quantize_q5_1(src, (dml_block_q5_1*)dst, k); return true;
    case DML_QT_Q8_0: quantize_q8_0(src, (dml_block_q8_0*)dst, k); return true;
    case DML_QT_Q2_K: quantize_q2_K(src, (dml_block_q2_K*)dst, k); return true;
    case DML_QT_Q3_K: quantize_q3_K(src, (dml_block_q3_K*)dst, k); return true;
    case DML_QT_Q4_K: quantize_q4_K(src, (dml_block_q4_K*)dst, k); return true;
    case DML_QT_Q5_K: quantize_q5_K(src, (dml_block_q5_K*)dst, k); return true;
    case DML_QT_Q6_K: quantize_q6_K(src, (dml_block_q6_K*)dst, k); return true;
    case DML_QT_Q8_K: quantize_q8_K(src, (dml_block_q8_K*)dst, k); return true;
    default: return false;
  }
}

}  // namespace dinoml::quant

#pragma GCC pop_options

#endif  // DINOML_QUANT_QUANTIZE_H
