// Indexing (gather / take, embedding, embedding from a GGUF block table) and generators (arange,
// fill).
//
// Index tensors are checked completely before any data moves: an out-of-range index is reported
// (position and value) as DML_CPU_ERR_INDEX on the calling thread and nothing out of bounds is
// ever read. Validation also normalises negative indices, so the copy loop is branch-free.
#include <type_traits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <dinoml/quant_ref.h>

#include "kernel_common.h"

namespace dml_cpu {
namespace {

// Loads, wraps (when allowed) and bounds-checks every index into `out`.
int normalise_indices(const char* kernel, int index_dtype, const void* indices, int64_t n, int64_t bound,
                      bool wrap_negative, std::vector<int64_t>& out) {
  if (index_dtype != DML_CPU_I32 && index_dtype != DML_CPU_I64)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": indices must be int32 or int64, got " + dtype_name(index_dtype));
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t raw = index_dtype == DML_CPU_I32 ? static_cast<const int32_t*>(indices)[i]
                                                   : static_cast<const int64_t*>(indices)[i];
    const int64_t v = (wrap_negative && raw < 0) ? raw + bound : raw;
    if (v < 0 || v >= bound) {
      const std::string range = wrap_negative ? "[-" + std::to_string(bound) + ", " + std::to_string(bound) + ")"
                                              : "[0, " + std::to_string(bound) + ")";
      return fail(DML_CPU_ERR_INDEX, std::string(kernel) + ": index " + std::to_string(raw) + " at position " +
                                         std::to_string(i) + " is out of range " + range);
    }
    out[static_cast<size_t>(i)] = v;
  }
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu

using namespace dml_cpu;

extern "C" int dml_cpu_gather(size_t elem_size, int64_t outer, int64_t axis_len, int64_t inner, const void* x,
                              int index_dtype, const void* indices, int64_t num_indices, void* y) {
  std::vector<int64_t> idx;
  if (int st = normalise_indices("dml_cpu_gather", index_dtype, indices, num_indices, axis_len, true, idx)) return st;
  const size_t row = static_cast<size_t>(inner) * elem_size;
  const unsigned char* src = static_cast<const unsigned char*>(x);
  unsigned char* dst = static_cast<unsigned char*>(y);
  const int64_t tasks = outer * num_indices;
#pragma omp parallel for schedule(static) if (tasks > 1 && tasks * inner > kParallelWork)
  for (int64_t t = 0; t < tasks; ++t) {
    const int64_t o = t / num_indices, j = t % num_indices;
    std::memcpy(dst + static_cast<size_t>(t) * row,
                src + (static_cast<size_t>(o * axis_len + idx[static_cast<size_t>(j)])) * row, row);
  }
  return DML_CPU_OK;
}

extern "C" int dml_cpu_embedding(size_t elem_size, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                 const void* indices, int64_t num_indices, void* y) {
  // Embedding follows PyTorch: no negative wrap-around, an index must name a row.
  std::vector<int64_t> idx;
  if (int st = normalise_indices("dml_cpu_embedding", index_dtype, indices, num_indices, vocab, false, idx)) return st;
  const size_t row = static_cast<size_t>(dim) * elem_size;
  const unsigned char* src = static_cast<const unsigned char*>(weight);
  unsigned char* dst = static_cast<unsigned char*>(y);
#pragma omp parallel for schedule(static) if (num_indices > 1 && num_indices * dim > kParallelWork)
  for (int64_t i = 0; i < num_indices; ++i)
    std::memcpy(dst + static_cast<size_t>(i) * row, src + static_cast<size_t>(idx[static_cast<size_t>(i)]) * row, row);
  return DML_CPU_OK;
}

extern "C" int dml_cpu_embedding_quant(int qtype, int64_t vocab, int64_t dim, const void* weight, int index_dtype,
                                       const void* indices, int64_t num_indices, float* y) {
  const dml_qtype_traits* tr = dml_qtype_get(qtype);
  if (!tr || !tr->supported || !tr->is_quantized)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string("dml_cpu_embedding_quant: type ") +
                                             (tr ? tr->name : std::to_string(qtype)) + " is not a supported block type");
  if (vocab < 0 || dim < 0 || num_indices < 0 || dim % tr->block_size != 0)
    return fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_embedding_quant: a [" + std::to_string(vocab) + ", " + std::to_string(dim) +
                                          "] table is not whole rows of " + tr->name + " blocks (" +
                                          std::to_string(tr->block_size) + " elements)");
  std::vector<int64_t> idx;
  if (int st = normalise_indices("dml_cpu_embedding_quant", index_dtype, indices, num_indices, vocab, false, idx))
    return st;
  // Row r of the table is dim / block_size blocks at r * row_bytes; only the selected rows are
  // decoded, with the reference dequantizer (bit-identical to the interpreter's reading).
  const size_t row_bytes = static_cast<size_t>(dim / tr->block_size) * tr->type_size;
  const unsigned char* src = static_cast<const unsigned char*>(weight);
#pragma omp parallel for schedule(static) if (num_indices > 1 && num_indices * dim > kParallelWork)
  for (int64_t i = 0; i < num_indices; ++i)
    dinoml::quant::dequantize_row(qtype, src + static_cast<size_t>(idx[static_cast<size_t>(i)]) * row_bytes,
                                  y + static_cast<size_t>(i) * static_cast<size_t>(dim), dim);
  return DML_CPU_OK;
}

extern "C" int dml_cpu_arange(int dtype, double start, double step, int64_t n, void* y) {
  const bool integral = std::floor(start) == start && std::floor(step) == step;
  if (dtype == DML_CPU_I32 || dtype == DML_CPU_I64 || dtype == DML_CPU_I8 || dtype == DML_CPU_U8) {
    if (!integral) {
      // Non-integral start/step into an int dtype: each value truncates like a cast.
      return dispatch_numeric(dtype, "dml_cpu_arange", [&](auto tag) -> int {
        using T = decltype(tag);
        // Only integer dtypes get here; the guard keeps the float16 structs (no conversion from
        // double) out of the instantiation (clang has no C++20 parenthesised aggregate init).
        if constexpr (std::is_arithmetic_v<T>)
          for (int64_t i = 0; i < n; ++i) static_cast<T*>(y)[i] = static_cast<T>(start + static_cast<double>(i) * step);
        return DML_CPU_OK;
      });
    }
    const int64_t s = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
    return dispatch_numeric(dtype, "dml_cpu_arange", [&](auto tag) -> int {
      using T = decltype(tag);
      if constexpr (std::is_arithmetic_v<T>)  // integer dtypes only (see above)
        for (int64_t i = 0; i < n; ++i) static_cast<T*>(y)[i] = static_cast<T>(s + i * d);
      return DML_CPU_OK;
    });
  }
  return dispatch_float(dtype, "dml_cpu_arange", [&](auto tag) -> int {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) store_f(static_cast<T*>(y), i, static_cast<float>(start + static_cast<double>(i) * step));
    return DML_CPU_OK;
  });
}

extern "C" int dml_cpu_fill(int dtype, double value, int64_t n, void* y) {
  const size_t es = dtype_size(dtype);
  if (es == 0) return fail(DML_CPU_ERR_UNSUPPORTED, "dml_cpu_fill: unknown dtype " + std::to_string(dtype));
  auto fill_as = [&](auto v) -> int {
    using T = decltype(v);
    T* p = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (n > 8 * kParallelWork)
    for (int64_t i = 0; i < n; ++i) p[i] = v;
    return DML_CPU_OK;
  };
  switch (dtype) {
    case DML_CPU_F32: return fill_as(static_cast<float>(value));
    case DML_CPU_F16: return fill_as(dml_float_to_half(static_cast<float>(value)));
    case DML_CPU_BF16: return fill_as(dml_float_to_bf16(static_cast<float>(value)));
    case DML_CPU_I8: return fill_as(static_cast<int8_t>(value));
    case DML_CPU_U8: return fill_as(static_cast<uint8_t>(value));
    case DML_CPU_I32: return fill_as(static_cast<int32_t>(value));
    case DML_CPU_I64: return fill_as(static_cast<int64_t>(value));
    case DML_CPU_BOOL: return fill_as(static_cast<uint8_t>(value != 0.0));
  }
  return DML_CPU_OK;
}
