/* The source index of one output position of `pad` along one axis, shared by the CPU kernel
 * (kernels/cpu/data_movement.cpp), the GPU kernel (kernels/cuda/data_movement.cu) and the reference
 * interpreter's semantics (docs/ops.md): ONNX Pad's constant / reflect / edge modes. */
#ifndef DINOML_PAD_INDEX_H
#define DINOML_PAD_INDEX_H
#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define DML_PAD_HD __host__ __device__
#else
#define DML_PAD_HD
#endif

enum { DML_PAD_MODE_CONSTANT = 0, DML_PAD_MODE_REFLECT = 1, DML_PAD_MODE_EDGE = 2 };

/* Output position `o` of an axis of input extent n with `begin` leading pads: the input index,
 * or -1 for "outside" (constant mode). reflect mirrors without repeating the edge (periodic when
 * the pad is wider than the axis); edge repeats the border element. */
static inline DML_PAD_HD int64_t dml_pad_source(int64_t o, int64_t begin, int64_t n, int mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  if (mode == DML_PAD_MODE_CONSTANT) return -1;
  if (mode == DML_PAD_MODE_EDGE) return i < 0 ? 0 : n - 1;
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0) i += period;
  return i < n ? i : period - i;
}

#ifdef __cplusplus
#include <cstring>

#include "half.h"

/* `value` as one element of dtype code `dtype` (the IR's order: float32, float16, bfloat16, int8,
 * uint8, int32, int64, bool) into out[0..8): the constant-mode fill, encoded on the host. */
inline void dml_pad_fill_bytes(int dtype, double value, unsigned char* out) {
  switch (dtype) {
    case 0: { float v = static_cast<float>(value); std::memcpy(out, &v, 4); break; }
    case 1: { uint16_t v = dml_float_to_half(static_cast<float>(value)); std::memcpy(out, &v, 2); break; }
    case 2: { uint16_t v = dml_float_to_bf16(static_cast<float>(value)); std::memcpy(out, &v, 2); break; }
    case 3: { int8_t v = static_cast<int8_t>(value); std::memcpy(out, &v, 1); break; }
    case 4: { uint8_t v = static_cast<uint8_t>(value); std::memcpy(out, &v, 1); break; }
    case 5: { int32_t v = static_cast<int32_t>(value); std::memcpy(out, &v, 4); break; }
    case 6: { int64_t v = static_cast<int64_t>(value); std::memcpy(out, &v, 8); break; }
    case 7: { uint8_t v = value != 0.0; std::memcpy(out, &v, 1); break; }
    default: break;
  }
}
#endif

#endif /* DINOML_PAD_INDEX_H */
