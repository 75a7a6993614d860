#include "ir/dtype.h"

#include "ir/error.h"

namespace dinoml::ir {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i8: return "int8";
    case DType::u8: return "uint8";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::string_view dtype_ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f16: return "dml_half";
    case DType::bf16: return "dml_bfloat16";
    case DType::i8: return "int8_t";
    case DType::u8: return "uint8_t";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
    case DType::boolean: return "bool";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view n) {
  if (n == "float32" || n == "fp32" || n == "float") return DType::f32;
  if (n == "float16" || n == "fp16" || n == "half") return DType::f16;
  if (n == "bfloat16" || n == "bf16") return DType::bf16;
  if (n == "int8") return DType::i8;
  if (n == "uint8") return DType::u8;
  if (n == "int32") return DType::i32;
  if (n == "int64") return DType::i64;
  if (n == "bool") return DType::boolean;
  return std::nullopt;
}

DType dtype_from_name_or_throw(std::string_view n) {
  if (auto t = dtype_from_name(n)) return *t;
  throw IrError("unknown dtype '" + std::string(n) +
                "': expected one of float32, float16, bfloat16, int8, uint8, int32, int64, bool");
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::u8: return 1;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::boolean: return 1;
  }
  return 0;
}

}  // namespace dinoml::ir
