// Data movement by element size: permute, concat, split, slice, expand, pad.
//
// permute, slice and expand all reduce to one primitive: fill a contiguous output from an input
// addressed through per-axis strides (0 where an axis broadcasts). The primitive walks output
// rows (all axes but the last), computing each row's input offset once, and copies the row with
// memcpy (unit stride), a fill (stride 0) or a strided loop. Axes are simplified first (size-1
// axes dropped, axes contiguous in both tensors merged), so most permutes become a few long rows.
#include <cstring>
#include <string>
#include <vector>

#include "kernel_common.h"
#include "dinoml/pad_index.h"

namespace dml_cpu {
namespace {

struct StridedAxis {
  int64_t extent;
  int64_t stride;  // input stride in elements
};

// Drops size-1 axes and merges neighbours where input stride(i) == extent(i+1) * stride(i+1).
std::vector<StridedAxis> simplify(std::vector<StridedAxis> axes) {
  std::vector<StridedAxis> out;
  for (const auto& a : axes) {
    if (a.extent == 1) continue;
    if (!out.empty() && out.back().stride == a.extent * a.stride) {
      out.back().extent *= a.extent;
      out.back().stride = a.stride;
    } else {
      out.push_back(a);
    }
  }
  return out;
}

template <typename U>
void strided_copy_typed(const std::vector<StridedAxis>& axes, const U* in, U* out) {
  if (axes.empty()) {
    out[0] = in[0];
    return;
  }
  const size_t r = axes.size();
  const int64_t inner = axes[r - 1].extent, s = axes[r - 1].stride;
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < r; ++i) rows *= axes[i].extent;
#pragma omp parallel for schedule(static) if (rows * inner > kParallelWork && rows > 1)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0, rem = row;
    for (size_t i = r - 1; i-- > 0;) {
      base += (rem % axes[i].extent) * axes[i].stride;
      rem /= axes[i].extent;
    }
    const U* src = in + base;
    U* dst = out + row * inner;
    if (s == 1) {
      std::memcpy(dst, src, static_cast<size_t>(inner) * sizeof(U));
    } else if (s == 0) {
      const U v = src[0];
      for (int64_t j = 0; j < inner; ++j) dst[j] = v;
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = src[j * s];
    }
  }
}

int strided_copy(size_t elem_size, std::vector<StridedAxis> axes, const void* in, void* out, const char* kernel) {
  for (const auto& a : axes)
    if (a.extent == 0) return DML_CPU_OK;
  axes = simplify(std::move(axes));
  switch (elem_size) {
    case 1: strided_copy_typed(axes, static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out)); break;
    case 2: strided_copy_typed(axes, static_cast<const uint16_t*>(in), static_cast<uint16_t*>(out)); break;
    case 4: strided_copy_typed(axes, static_cast<const uint32_t*>(in), static_cast<uint32_t*>(out)); break;
    case 8: strided_copy_typed(axes, static_cast<const uint64_t*>(in), static_cast<uint64_t*>(out)); break;
    default:
      return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": element size " + std::to_string(elem_size) +
                                               " is not 1, 2, 4 or 8");
  }
  return DML_CPU_OK;
}

std::vector<int64_t> contiguous_strides(int rank, const int64_t* shape) {
  std::vector<int64_t> s(static_cast<size_t>(rank));
  int64_t acc = 1;
  for (int i = rank - 1; i >= 0; --i) {
    s[static_cast<size_t>(i)] = acc;
    acc *= shape[i];
  }
  return s;
}

static_assert(DML_CPU_F32 == 0 && DML_CPU_F16 == 1 && DML_CPU_BF16 == 2 && DML_CPU_I8 == 3 && DML_CPU_U8 == 4 &&
              DML_CPU_I32 == 5 && DML_CPU_I64 == 6 && DML_CPU_BOOL == 7, "dtype codes (dml_pad_fill_bytes)");

static_assert(DML_CPU_PAD_CONSTANT == DML_PAD_MODE_CONSTANT && DML_CPU_PAD_REFLECT == DML_PAD_MODE_REFLECT &&
              DML_CPU_PAD_EDGE == DML_PAD_MODE_EDGE, "pad modes");

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_permute(size_t elem_size, int rank, const int64_t* in_shape, const int32_t* perm, const void* x,
                               void* y) {
  if (rank < 0 || rank > 8) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_permute: rank " + std::to_string(rank) + " is outside [0, 8]");
  uint32_t seen = 0;
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || ((seen >> perm[i]) & 1u))
      return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_permute: perm is not a permutation of 0.." + std::to_string(rank - 1));
    seen |= 1u << perm[i];
  }
  auto is = contiguous_strides(rank, in_shape);
  std::vector<StridedAxis> axes;
  for (int i = 0; i < rank; ++i) axes.push_back({in_shape[perm[i]], is[static_cast<size_t>(perm[i])]});
  return strided_copy(elem_size, axes, x, y, "dml_cpu_permute");
}

extern "C" int dml_cpu_concat(size_t elem_size, int num_inputs, const void* const* inputs, const int64_t* axis_sizes,
                              int64_t outer, int64_t inner, void* y) {
  int64_t total = 0;
  for (int k = 0; k < num_inputs; ++k) total += axis_sizes[k];
  const size_t row_bytes = static_cast<size_t>(total * inner) * elem_size;
#pragma omp parallel for schedule(static) if (outer > 1 && outer * total * inner > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    unsigned char* dst = static_cast<unsigned char*>(y) + static_cast<size_t>(o) * row_bytes;
    for (int k = 0; k < num_inputs; ++k) {
      const size_t n = static_cast<size_t>(axis_sizes[k] * inner) * elem_size;
      std::memcpy(dst, static_cast<const unsigned char*>(inputs[k]) + static_cast<size_t>(o) * n, n);
      dst += n;
    }
  }
  return DML_CPU_OK;
}

extern "C" int dml_cpu_split(size_t elem_size, int num_outputs, void* const* outputs, const int64_t* axis_sizes,
                             int64_t outer, int64_t inner, const void* x) {
  int64_t total = 0;
  for (int k = 0; k < num_outputs; ++k) total += axis_sizes[k];
  const size_t row_bytes = static_cast<size_t>(total * inner) * elem_size;
#pragma omp parallel for schedule(static) if (outer > 1 && outer * total * inner > kParallelWork)
  for (int64_t o = 0; o < outer; ++o) {
    const unsigned char* src = static_cast<const unsigned char*>(x) + static_cast<size_t>(o) * row_bytes;
    for (int k = 0; k < num_outputs; ++k) {
      const size_t n = static_cast<size_t>(axis_sizes[k] * inner) * elem_size;
      std::memcpy(static_cast<unsigned char*>(outputs[k]) + static_cast<size_t>(o) * n, src, n);
      src += n;
    }
  }
  return DML_CPU_OK;
}

extern "C" int dml_cpu_slice(size_t elem_size, int rank, const int64_t* in_shape, const int64_t* starts,
                             const int64_t* ends, const int64_t* steps, const int64_t* out_shape, const void* x,
                             void* y) {
  if (rank < 0 || rank > 8) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_slice: rank " + std::to_string(rank) + " is outside [0, 8]");
  auto is = contiguous_strides(rank, in_shape);
  std::vector<StridedAxis> axes;
  int64_t offset = 0;
  for (int i = 0; i < rank; ++i) {
    const int64_t n = in_shape[i], step = steps[i];
    if (step <= 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_slice: axis " + std::to_string(i) + " has step " + std::to_string(step) + " (must be positive)");
    int64_t s = starts[i] < 0 ? starts[i] + n : starts[i];
    int64_t e = ends[i] < 0 ? ends[i] + n : ends[i];
    s = s < 0 ? 0 : (s > n ? n : s);
    e = e < 0 ? 0 : (e > n ? n : e);
    const int64_t count = e > s ? (e - s + step - 1) / step : 0;
    if (count != out_shape[i])
      return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_slice: axis " + std::to_string(i) + " yields " + std::to_string(count) +
                                            " elements but the output has " + std::to_string(out_shape[i]));
    offset += s * is[static_cast<size_t>(i)];
    axes.push_back({count, step * is[static_cast<size_t>(i)]});
  }
  return strided_copy(elem_size, axes, static_cast<const unsigned char*>(x) + static_cast<size_t>(offset) * elem_size, y,
                      "dml_cpu_slice");
}

extern "C" int dml_cpu_expand(size_t elem_size, int rank, const int64_t* in_shape, const int64_t* out_shape,
                              const void* x, void* y) {
  if (rank < 0 || rank > 8) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_expand: rank " + std::to_string(rank) + " is outside [0, 8]");
  auto is = contiguous_strides(rank, in_shape);
  std::vector<StridedAxis> axes;
  for (int i = 0; i < rank; ++i) {
    if (in_shape[i] != out_shape[i] && in_shape[i] != 1)
      return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_expand: axis " + std::to_string(i) + " of extent " +
                                            std::to_string(in_shape[i]) + " cannot broadcast to " + std::to_string(out_shape[i]));
    axes.push_back({out_shape[i], in_shape[i] == 1 ? 0 : is[static_cast<size_t>(i)]});
  }
  return strided_copy(elem_size, axes, x, y, "dml_cpu_expand");
}

extern "C" int dml_cpu_pad(int dtype, int rank, const int64_t* in_shape, const int64_t* pads, int mode, double value,
                           const void* x, void* y) {
  if (rank < 1 || rank > 8) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_pad: rank " + std::to_string(rank) + " is outside [1, 8]");
  if (mode < DML_CPU_PAD_CONSTANT || mode > DML_CPU_PAD_EDGE)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_pad: unknown mode " + std::to_string(mode));
  const size_t es = dtype_size(dtype);
  if (es == 0) return fail(DML_CPU_ERR_UNSUPPORTED, "dml_cpu_pad: unknown dtype " + std::to_string(dtype));
  int64_t out_shape[8];
  for (int i = 0; i < rank; ++i) {
    out_shape[i] = in_shape[i] + pads[i] + pads[rank + i];
    if (out_shape[i] < 0) return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_pad: axis " + std::to_string(i) + " is cropped below zero");
    if (mode != DML_CPU_PAD_CONSTANT && in_shape[i] == 0 && out_shape[i] > 0)
      return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_pad: reflect/edge padding of an empty axis " + std::to_string(i));
  }
  unsigned char fillv[8] = {0};
  dml_pad_fill_bytes(dtype, value, fillv);  // floats round, ints truncate, bool is != 0
  auto is = contiguous_strides(rank, in_shape);
  const int64_t inner = out_shape[rank - 1];
  int64_t rows = 1;
  for (int i = 0; i + 1 < rank; ++i) rows *= out_shape[i];
  if (rows == 0 || inner == 0) return DML_CPU_OK;
  const unsigned char* src = static_cast<const unsigned char*>(x);
  unsigned char* dst = static_cast<unsigned char*>(y);
  const int64_t n_last = in_shape[rank - 1], b_last = pads[rank - 1];
#pragma omp parallel for schedule(static) if (rows * inner > kParallelWork && rows > 1)
  for (int64_t row = 0; row < rows; ++row) {
    unsigned char* out = dst + static_cast<size_t>(row * inner) * es;
    int64_t base = 0, rem = row;
    bool outside = false;
    for (int i = rank - 2; i >= 0; --i) {
      const int64_t o = rem % out_shape[i];
      rem /= out_shape[i];
      const int64_t s = dml_pad_source(o, pads[i], in_shape[i], mode);
      if (s < 0) outside = true;
      else base += s * is[static_cast<size_t>(i)];
    }
    for (int64_t j = 0; j < inner; ++j) {
      const int64_t s = outside ? -1 : dml_pad_source(j, b_last, n_last, mode);
      std::memcpy(out + static_cast<size_t>(j) * es, s < 0 ? fillv : src + static_cast<size_t>(base + s) * es, es);
    }
  }
  return DML_CPU_OK;
}
