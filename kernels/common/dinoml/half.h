// fp16 / bf16 storage types with exact round-to-nearest-even conversions.
// Header-only and dependency-free: used by the kernel libraries, generated modules and the
// compiler's reference interpreter. Arithmetic is always done in float.
#ifndef DINOML_HALF_H
#define DINOML_HALF_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C++" {

struct dml_half {
  uint16_t bits;
};
struct dml_bfloat16 {
  uint16_t bits;
};

static inline uint32_t dml_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float dml_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float dml_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return dml_bits_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return dml_bits_f32(sign);
    // subnormal: value = mant * 2^-24
    float v = (float)mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return dml_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

static inline uint16_t dml_float_to_half(float f) {
  uint32_t u = dml_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t au = u & 0x7fffffffu;
  if (au >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (au > 0x7f800000u ? 0x200u : 0u));
  if (au >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (au < 0x38800000u) {
    // subnormal or zero in half: round(value * 2^24) with ties to even
    float v = dml_bits_f32(au) * 16777216.0f;
    uint32_t m = (uint32_t)v;
    float rem = v - (float)m;
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return (uint16_t)(sign | m);
  }
  uint32_t exp = ((au >> 23) - 112u) << 10;
  uint32_t mant = (au >> 13) & 0x3ffu;
  uint32_t rest = au & 0x1fffu;
  uint32_t h = exp | mant;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

static inline float dml_bf16_to_float(uint16_t b) { return dml_bits_f32((uint32_t)b << 16); }

static inline uint16_t dml_float_to_bf16(float f) {
  uint32_t u = dml_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  // quiet nan
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return (uint16_t)(u >> 16);
}

// Uniform load/store in float for templated kernels and generated code.
static inline float dml_to_float(float v) { return v; }
static inline float dml_to_float(dml_half v) { return dml_half_to_float(v.bits); }
static inline float dml_to_float(dml_bfloat16 v) { return dml_bf16_to_float(v.bits); }
template <typename T>
static inline T dml_from_float(float v);
template <>
inline float dml_from_float<float>(float v) { return v; }
template <>
inline dml_half dml_from_float<dml_half>(float v) { return dml_half{dml_float_to_half(v)}; }
template <>
inline dml_bfloat16 dml_from_float<dml_bfloat16>(float v) { return dml_bfloat16{dml_float_to_bf16(v)}; }

}  // extern "C++"
#endif  // __cplusplus
#endif  // DINOML_HALF_H
