// Per-format unit decoders of the quantized-weight GEMM (qgemm.cu): Fmt<type>::visit(block, unit,
// f) calls f(i, value) for the UNIT contiguous elements of unit `unit` of a GGUF block, with the
// float operations of the reference dequantizer (kernels/common/dinoml/quant_dequant.h, bit-identical
// to ggml; multiply and add unfused). Device code by default; tests/cpp/gguf/test_quant_units.cpp
// includes it with host definitions of the DML_QUNIT_* macros and checks every type against the
// reference dequantizer.
#pragma once
#include <stdint.h>

#include "../common/dinoml/quant_blocks.h"

#ifndef DML_QUNIT_FN
#define DML_QUNIT_FN __device__ __forceinline__
#define DML_QUNIT_LDG4(p) __ldg(reinterpret_cast<const uint4*>(p))
#define DML_QUNIT_HALF(bits) __half2float(__ushort_as_half(bits))
#define DML_QUNIT_MUL(a, b) __fmul_rn(a, b)
#define DML_QUNIT_ADD(a, b) __fadd_rn(a, b)
#define DML_QUNIT_SUB(a, b) __fsub_rn(a, b)
#endif

namespace dml_cuda {
namespace qunit {

DML_QUNIT_FN float h2f(const uint8_t* p) {
  return DML_QUNIT_HALF(static_cast<uint16_t>(p[0] | (p[1] << 8)));
}
DML_QUNIT_FN float fmul(float a, float b) { return DML_QUNIT_MUL(a, b); }
DML_QUNIT_FN float fadd(float a, float b) { return DML_QUNIT_ADD(a, b); }
DML_QUNIT_FN float fsub(float a, float b) { return DML_QUNIT_SUB(a, b); }

// Per format: UNIT elements per unit (contiguous within a block), UPB units per block, BYTES per
// block, and visit(block, unit, f) calling f(i, value) for the unit's elements i = 0..UNIT-1.
template <int QT> struct Fmt;

template <> struct Fmt<DML_QT_Q4_0> {
  static constexpr int UNIT = 32, UPB = 1, BYTES = 18;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int, F&& f) {
    const float d = h2f(b);
    const uint8_t* qs = b + 2;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = qs[j];
      f(j, fmul(static_cast<float>((q & 0xF) - 8), d));
      f(j + 16, fmul(static_cast<float>((q >> 4) - 8), d));
    }
  }
};

template <> struct Fmt<DML_QT_Q4_1> {
  static constexpr int UNIT = 32, UPB = 1, BYTES = 20;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int, F&& f) {
    const float d = h2f(b), m = h2f(b + 2);
    const uint8_t* qs = b + 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int q = qs[j];
      f(j, fadd(fmul(static_cast<float>(q & 0xF), d), m));
      f(j + 16, fadd(fmul(static_cast<float>(q >> 4), d), m));
    }
  }
};

template <int Off, bool Min> struct Q5Legacy {
  static constexpr int UNIT = 32, UPB = 1, BYTES = Min ? 24 : 22;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int, F&& f) {
    const float d = h2f(b), m = Min ? h2f(b + 2) : 0.0f;
    const uint8_t* qhp = b + (Min ? 4 : 2);
    const uint32_t qh = qhp[0] | (qhp[1] << 8) | (qhp[2] << 16) | (static_cast<uint32_t>(qhp[3]) << 24);
    const uint8_t* qs = qhp + 4;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int xh0 = ((qh >> j) << 4) & 0x10, xh1 = (qh >> (j + 12)) & 0x10;
      const int x0 = ((qs[j] & 0x0F) | xh0) - Off, x1 = ((qs[j] >> 4) | xh1) - Off;
      if (Min) {
        f(j, fadd(fmul(static_cast<float>(x0), d), m));
        f(j + 16, fadd(fmul(static_cast<float>(x1), d), m));
      } else {
        f(j, fmul(static_cast<float>(x0), d));
        f(j + 16, fmul(static_cast<float>(x1), d));
      }
    }
  }
};
template <> struct Fmt<DML_QT_Q5_0> : Q5Legacy<16, false> {};
template <> struct Fmt<DML_QT_Q5_1> : Q5Legacy<0, true> {};

template <> struct Fmt<DML_QT_Q8_0> {
  static constexpr int UNIT = 32, UPB = 1, BYTES = 34;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int, F&& f) {
    const float d = h2f(b);
    const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
#pragma unroll
    for (int j = 0; j < 32; ++j) f(j, fmul(static_cast<float>(qs[j]), d));
  }
};

// q2_K: unit u = (half n = u / 4, shift group j = u % 4): 16 elements with scale 2u, 16 with 2u+1.
template <> struct Fmt<DML_QT_Q2_K> {
  static constexpr int UNIT = 32, UPB = 8, BYTES = 84;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int u, F&& f) {
    const uint8_t* scales = b;
    const uint8_t* q = b + 16 + (u / 4) * 32;
    const float d = h2f(b + 80), dmin = h2f(b + 82);
    const int shift = 2 * (u % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int sc = scales[2 * u + h];
      const float dl = fmul(d, static_cast<float>(sc & 0xF)), ml = fmul(dmin, static_cast<float>(sc >> 4));
#pragma unroll
      for (int l = 0; l < 16; ++l)
        f(16 * h + l, fsub(fmul(dl, static_cast<float>((q[l + 16 * h] >> shift) & 3)), ml));
    }
  }
};

DML_QUNIT_FN int q3k_scale(const uint8_t* p, int is) {
  // The 6-bit scale `is` of q3_K's packed 12 bytes (low 4 bits from bytes 0..7, high 2 from 8..11).
  const int lo = is < 8 ? (p[is] & 0xF) : (p[is - 8] >> 4);
  const int hi = (p[8 + (is % 4)] >> (2 * (is / 4))) & 3;
  return lo | (hi << 4);
}

template <> struct Fmt<DML_QT_Q3_K> {
  static constexpr int UNIT = 32, UPB = 8, BYTES = 110;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int u, F&& f) {
    const uint8_t* hm = b;
    const uint8_t* q = b + 32 + (u / 4) * 32;
    const uint8_t* sp = b + 96;
    const float d_all = h2f(b + 108);
    const int shift = 2 * (u % 4);
    const int m = 1 << u;  // hmask bit: one per (half, shift group)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float dl = fmul(d_all, static_cast<float>(q3k_scale(sp, 2 * u + h) - 32));
#pragma unroll
      for (int l = 0; l < 16; ++l) {
        const int v = ((q[l + 16 * h] >> shift) & 3) - ((hm[l + 16 * h] & m) ? 0 : 4);
        f(16 * h + l, fmul(dl, static_cast<float>(v)));
      }
    }
  }
};

DML_QUNIT_FN void scale_min_k4(int j, const uint8_t* q, int& d, int& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// q4_K: unit u = elements [64u, 64u+64): low nibbles of qs[32u..] (sub-block 2u), high nibbles (2u+1).
// The 144-byte block is 16-byte aligned when the row start is: header and quants load as uint4 and
// every byte is taken from those registers by shifts (no byte arrays: they would go to local memory).
template <> struct Fmt<DML_QT_Q4_K> {
  static constexpr int UNIT = 64, UPB = 4, BYTES = 144;
  // 6-bit scale / min of sub-block j from the 12 scale bytes s0..s11 held in words a (s0..3), b (s4..7), c (s8..11).
  DML_QUNIT_FN static void scale_min(int j, uint32_t a, uint32_t b, uint32_t c, int& d, int& m) {
    if (j < 4) {
      d = (a >> (8 * j)) & 63;
      m = (b >> (8 * j)) & 63;
    } else {
      const int s = 8 * (j - 4);
      d = ((c >> s) & 0xF) | (((a >> (s + 6)) & 3) << 4);
      m = ((c >> (s + 4)) & 0xF) | (((b >> (s + 6)) & 3) << 4);
    }
  }
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int u, F&& f) {
    const uint4 hdr = DML_QUNIT_LDG4(b);
    const uint4 q0 = DML_QUNIT_LDG4(b + 16 + 32 * u);
    const uint4 q1 = DML_QUNIT_LDG4(b + 32 + 32 * u);
    const uint32_t qw[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
    const float d = DML_QUNIT_HALF(static_cast<uint16_t>(hdr.x & 0xFFFF));
    const float dmin = DML_QUNIT_HALF(static_cast<uint16_t>(hdr.x >> 16));
    int sc, mn;
    scale_min(2 * u, hdr.y, hdr.z, hdr.w, sc, mn);
    const float d1 = fmul(d, static_cast<float>(sc)), m1 = fmul(dmin, static_cast<float>(mn));
    scale_min(2 * u + 1, hdr.y, hdr.z, hdr.w, sc, mn);
    const float d2 = fmul(d, static_cast<float>(sc)), m2 = fmul(dmin, static_cast<float>(mn));
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = (qw[l / 4] >> (8 * (l % 4))) & 0xFF;
      f(l, fsub(fmul(d1, static_cast<float>(q & 0xF)), m1));
      f(32 + l, fsub(fmul(d2, static_cast<float>(q >> 4)), m2));
    }
  }
};

template <> struct Fmt<DML_QT_Q5_K> {
  static constexpr int UNIT = 64, UPB = 4, BYTES = 176;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int u, F&& f) {
    const float d = h2f(b), dmin = h2f(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48 + 32 * u;
    int sc, mn;
    scale_min_k4(2 * u, scales, sc, mn);
    const float d1 = fmul(d, static_cast<float>(sc)), m1 = fmul(dmin, static_cast<float>(mn));
    scale_min_k4(2 * u + 1, scales, sc, mn);
    const float d2 = fmul(d, static_cast<float>(sc)), m2 = fmul(dmin, static_cast<float>(mn));
    const int u1 = 1 << (2 * u), u2 = 2 << (2 * u);
#pragma unroll
    for (int l = 0; l < 32; ++l)
      f(l, fsub(fmul(d1, static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0))), m1));
#pragma unroll
    for (int l = 0; l < 32; ++l)
      f(32 + l, fsub(fmul(d2, static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0))), m2));
  }
};

// q6_K: unit u = (half n = u / 4, quarter k = u % 4) = elements [128n + 32k, +32).
template <> struct Fmt<DML_QT_Q6_K> {
  static constexpr int UNIT = 32, UPB = 8, BYTES = 210;
  template <class F> DML_QUNIT_FN static void visit(const uint8_t* b, int u, F&& f) {
    const int n = u / 4, k = u % 4;
    const uint8_t* ql = b + 64 * n + ((k & 1) ? 32 : 0);
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * k;
    const float d = h2f(b + 208);
    const int lshift = (k & 2) ? 4 : 0, hshift = 2 * k;
    const float s0 = fmul(d, static_cast<float>(sc[0])), s1 = fmul(d, static_cast<float>(sc[1]));
#pragma unroll
    for (int l = 0; l < 32; ++l) {
      const int q = (((ql[l] >> lshift) & 0xF) | (((qh[l] >> hshift) & 3) << 4)) - 32;
      f(l, fmul(l < 16 ? s0 : s1, static_cast<float>(q)));
    }
  }
};

}  // namespace qunit
}  // namespace dml_cuda
