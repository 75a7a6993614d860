// The dtype table of the runtime: names as metadata.json spells them, element sizes.
#pragma once

#include <dinoml/runtime.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace dinoml::runtime {

bool dtype_valid(int dtype) noexcept;
// The dtype field of a caller's tensor as an int: C callers may store any int there, and loading
// an out-of-range value through the C++ enum type is undefined behaviour.
int raw_dtype(const dinoml_dtype& field) noexcept;
const char* dtype_name(dinoml_dtype dtype) noexcept;  // "unknown" for values outside the enum
size_t dtype_size(dinoml_dtype dtype) noexcept;       // 0 for values outside the enum
std::optional<dinoml_dtype> dtype_from_name(std::string_view name) noexcept;

// "[2, 4]" — used in every shape-related message.
std::string shape_string(std::span<const int64_t> shape);

// numel * element size, or nullopt on overflow / negative extents.
std::optional<size_t> tensor_bytes(dinoml_dtype dtype, std::span<const int64_t> shape) noexcept;

}  // namespace dinoml::runtime
