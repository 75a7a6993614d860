#include "dtype.h"

#include <array>
#include <cstring>

namespace dinoml::runtime {
namespace {
struct DTypeTraits {
  const char* name;
  size_t size;
};
// Indexed by dinoml_dtype; the numbering is ABI (matches the IR's dtype order).
constexpr std::array<DTypeTraits, 8> kDTypes = {{
    {"float32", 4},
    {"float16", 2},
    {"bfloat16", 2},
    {"int8", 1},
    {"uint8", 1},
    {"int32", 4},
    {"int64", 8},
    {"bool", 1},
}};
}  // namespace

bool dtype_valid(int dtype) noexcept { return dtype >= 0 && dtype < static_cast<int>(kDTypes.size()); }

int raw_dtype(const dinoml_dtype& field) noexcept {
  static_assert(sizeof(dinoml_dtype) == sizeof(int));
  int raw;
  std::memcpy(&raw, &field, sizeof raw);
  return raw;
}

const char* dtype_name(dinoml_dtype dtype) noexcept {
  return dtype_valid(dtype) ? kDTypes[dtype].name : "unknown";
}

size_t dtype_size(dinoml_dtype dtype) noexcept { return dtype_valid(dtype) ? kDTypes[dtype].size : 0; }

std::optional<dinoml_dtype> dtype_from_name(std::string_view name) noexcept {
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    if (name == kDTypes[i].name) return static_cast<dinoml_dtype>(i);
  }
  return std::nullopt;
}

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::optional<size_t> tensor_bytes(dinoml_dtype dtype, std::span<const int64_t> shape) noexcept {
  size_t bytes = dtype_size(dtype);
  if (bytes == 0) return std::nullopt;
  for (int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(extent), &bytes)) return std::nullopt;
  }
  return bytes;
}

}  // namespace dinoml::runtime
