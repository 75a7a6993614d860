// Reference dequantization of the GGUF block formats (quant_blocks.h); quant_quantize.h has the
// reference quantizers and quant_ref.h includes both.
//
// Header-only; shared by the compiler (the `dequantize` constant policy, the interpreter) and the
// CPU kernels (dequantize-to-tile path, activation quantization). Dequantization is bit-identical
// to ggml's dequantize_row_*, reference quantization to ggml's quantize_row_*_ref (tested against
// libggml-base in tests/cpp/gguf): the float operations are done in the same order, and
// contraction into FMA is switched off here because it would change the last bit.
#ifndef DINOML_QUANT_DEQUANT_H
#define DINOML_QUANT_DEQUANT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dinoml/half.h"
#include "dinoml/quant_blocks.h"

#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

namespace dinoml::quant {

static inline float h2f(dml_qhalf h) { return dml_half_to_float(h); }
static inline dml_qhalf f2h(float f) { return dml_float_to_half(f); }

// Round to nearest, ties to even, by the float magic-number trick (|x| <= 2^22).
static inline int nearest_int(float fval) {
  float val = fval + 12582912.f;
  int i;
  memcpy(&i, &val, sizeof(int));
  return (i & 0x007fffff) - 0x00400000;
}

template <class T>
static inline T qmin(T a, T b) { return a < b ? a : b; }
template <class T>
static inline T qmax(T a, T b) { return a > b ? a : b; }

constexpr float kGroupMaxEps = 1e-15f;

// ---------------------------------------------------------------- dequantize (k elements) ----

static inline void dequantize_q4_0(const dml_block_q4_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < DML_QK / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * DML_QK + j] = x0 * d;
      y[i * DML_QK + j + DML_QK / 2] = x1 * d;
    }
  }
}

static inline void dequantize_q4_1(const dml_block_q4_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    for (int j = 0; j < DML_QK / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[i * DML_QK + j] = x0 * d + m;
      y[i * DML_QK + j + DML_QK / 2] = x1 * d + m;
    }
  }
}

static inline void dequantize_q5_0(const dml_block_q5_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    const float d = h2f(x[i].d);
    uint32_t qh;
    memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < DML_QK / 2; ++j) {
      const uint8_t xh0 = ((qh >> j) << 4) & 0x10;
      const uint8_t xh1 = (qh >> (j + 12)) & 0x10;
      const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
      const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
      y[i * DML_QK + j] = x0 * d;
      y[i * DML_QK + j + DML_QK / 2] = x1 * d;
    }
  }
}

static inline void dequantize_q5_1(const dml_block_q5_1* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    const float d = h2f(x[i].d), m = h2f(x[i].m);
    uint32_t qh;
    memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < DML_QK / 2; ++j) {
      const uint8_t xh0 = ((qh >> j) << 4) & 0x10;
      const uint8_t xh1 = (qh >> (j + 12)) & 0x10;
      const int x0 = (x[i].qs[j] & 0x0F) | xh0;
      const int x1 = (x[i].qs[j] >> 4) | xh1;
      y[i * DML_QK + j] = x0 * d + m;
      y[i * DML_QK + j + DML_QK / 2] = x1 * d + m;
    }
  }
}

static inline void dequantize_q8_0(const dml_block_q8_0* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK; ++i) {
    const float d = h2f(x[i].d);
    for (int j = 0; j < DML_QK; ++j) y[i * DML_QK + j] = x[i].qs[j] * d;
  }
}

static inline void dequantize_q2_K(const dml_block_q2_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < DML_QK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * (int8_t)((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * (sc & 0xF);
        ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * (int8_t)((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

// The 16 6-bit scales of a q3_K block (biased by 32), unpacked.
static inline void q3_K_unpack_scales(const uint8_t packed[12], int8_t out[16]) {
  const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  memcpy(out, aux, 16);
}

static inline void dequantize_q3_K(const dml_block_q3_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    const float d_all = h2f(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int8_t scales[16];
    q3_K_unpack_scales(x[i].scales, scales);
    int is = 0;
    for (int n = 0; n < DML_QK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((int8_t)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * ((int8_t)((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}

// Scale and min of sub-block j of a q4_K/q5_K block (6 bits each, packed in 12 bytes).
static inline void get_scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

static inline void dequantize_q4_K(const dml_block_q4_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < DML_QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

static inline void dequantize_q5_K(const dml_block_q5_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = h2f(x[i].d), dmin = h2f(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < DML_QK_K; j += 64) {
      get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

static inline void dequantize_q6_K(const dml_block_q6_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i) {
    const float d = h2f(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < DML_QK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

static inline void dequantize_q8_K(const dml_block_q8_K* x, float* y, int64_t k) {
  for (int64_t i = 0; i < k / DML_QK_K; ++i)
    for (int j = 0; j < DML_QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
}

// ------------------------------------------------------------------- by type number ----

// Dequantizes k elements (a multiple of the type's block size) of type `t`; false when the type
// is not supported (see dml_qtype_table).
static inline bool dequantize_row(int t, const void* src, float* dst, int64_t k) {
  switch (t) {
    case DML_QT_F32: memcpy(dst, src, (size_t)k * 4); return true;
    case DML_QT_F16: {
      const uint16_t* s = (const uint16_t*)src;
      for (int64_t i = 0; i < k; ++i) dst[i] = dml_half_to_float(s[i]);
      return true;
    }
    case DML_QT_BF16: {
      const uint16_t* s = (const uint16_t*)src;
      for (int64_t i = 0; i < k; ++i) dst[i] = dml_bf16_to_float(s[i]);
      return true;
    }
    case DML_QT_Q4_0: dequantize_q4_0((const dml_block_q4_0*)src, dst, k); return true;
    case DML_QT_Q4_1: dequantize_q4_1((const dml_block_q4_1*)src, dst, k); return true;
    case DML_QT_Q5_0: dequantize_q5_0((const dml_block_q5_0*)src, dst, k); return true;
    case DML_QT_Q5_1: dequantize_q5_1((const dml_block_q5_1*)src, dst, k); return true;
    case DML_QT_Q8_0: dequantize_q8_0((const dml_block_q8_0*)src, dst, k); return true;
    case DML_QT_Q2_K: dequantize_q2_K((const dml_block_q2_K*)src, dst, k); return true;
    case DML_QT_Q3_K: dequantize_q3_K((const dml_block_q3_K*)src, dst, k); return true;
    case DML_QT_Q4_K: dequantize_q4_K((const dml_block_q4_K*)src, dst, k); return true;
    case DML_QT_Q5_K: dequantize_q5_K((const dml_block_q5_K*)src, dst, k); return true;
    case DML_QT_Q6_K: dequantize_q6_K((const dml_block_q6_K*)src, dst, k); return true;
    case DML_QT_Q8_K: dequantize_q8_K((const dml_block_q8_K*)src, dst, k); return true;
    default: return false;
  }
}

}  // namespace dinoml::quant

#pragma GCC pop_options

#endif  // DINOML_QUANT_DEQUANT_H
