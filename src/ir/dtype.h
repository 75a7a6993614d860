// Element types. The numbering is part of the runtime ABI (dinoml_dtype in runtime.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dinoml::ir {

enum class DType : uint8_t { f32 = 0, f16 = 1, bf16 = 2, i8 = 3, u8 = 4, i32 = 5, i64 = 6, boolean = 7 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i8,
                                       DType::u8,  DType::i32, DType::i64,  DType::boolean};

std::string_view dtype_name(DType t);              // "float32", "float16", ...
std::optional<DType> dtype_from_name(std::string_view name);  // also accepts "bool", "fp32", ...
DType dtype_from_name_or_throw(std::string_view name);         // IrError naming valid dtypes
size_t dtype_size(DType t);
inline bool is_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
inline bool is_int(DType t) {
  return t == DType::i8 || t == DType::u8 || t == DType::i32 || t == DType::i64;
}
inline bool is_bool(DType t) { return t == DType::boolean; }
// C++ type name used in generated code and kernels ("float", "dml_half", ...).
std::string_view dtype_ctype(DType t);

}  // namespace dinoml::ir
