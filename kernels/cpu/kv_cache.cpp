// kv_cache_write: y = cache with rows positions[t] (axis -2) replaced by values[..., t, :].
//
// Positions are checked completely before any byte moves (DML_CPU_ERR_INDEX names the position),
// so a rejected call leaves y untouched when y aliases the cache (the in-place decoder case).
// When y is a different buffer the cache is copied first; when y == cache only the T rows move,
// which is what makes a decode step's cache update O(T·D) instead of O(S·D).
#include <cstring>
#include <string>

#include "kernel_common.h"

using namespace dml_cpu;

extern "C" int dml_cpu_kv_cache_write(size_t elem_size, int64_t outer, int64_t rows, int64_t num_new, int64_t row_size,
                                      const void* cache, const void* values, int index_dtype, const void* positions,
                                      void* y) {
  if (index_dtype != DML_CPU_I32 && index_dtype != DML_CPU_I64)
    return fail(DML_CPU_ERR_UNSUPPORTED,
                std::string("dml_cpu_kv_cache_write: positions must be int32 or int64, got ") + dtype_name(index_dtype));
  for (int64_t t = 0; t < num_new; ++t) {
    const int64_t p = index_dtype == DML_CPU_I32 ? static_cast<const int32_t*>(positions)[t]
                                                 : static_cast<const int64_t*>(positions)[t];
    if (p < 0 || p >= rows)
      return fail(DML_CPU_ERR_INDEX, "dml_cpu_kv_cache_write: position " + std::to_string(p) + " at index " +
                                         std::to_string(t) + " is outside the cache rows [0, " + std::to_string(rows) +
                                         ")");
  }
  const size_t row = static_cast<size_t>(row_size) * elem_size;
  unsigned char* dst = static_cast<unsigned char*>(y);
  if (y != cache) std::memcpy(dst, cache, static_cast<size_t>(outer * rows) * row);
  const unsigned char* src = static_cast<const unsigned char*>(values);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t t = 0; t < num_new; ++t) {
      const int64_t p = index_dtype == DML_CPU_I32 ? static_cast<const int32_t*>(positions)[t]
                                                   : static_cast<const int64_t*>(positions)[t];
      std::memcpy(dst + static_cast<size_t>(o * rows + p) * row, src + static_cast<size_t>(o * num_new + t) * row, row);
    }
  return DML_CPU_OK;
}
