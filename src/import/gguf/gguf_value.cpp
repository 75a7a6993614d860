// GGUF metadata values, dequantization of whole tensors and the text listing of a file.
#include <cmath>

#include <fmt/format.h>

#include "dinoml/quant_ref.h"
#include "import/gguf/gguf.h"

namespace dinoml::gguf {

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::uint8: return "u8";
    case ValueType::int8: return "i8";
    case ValueType::uint16: return "u16";
    case ValueType::int16: return "i16";
    case ValueType::uint32: return "u32";
    case ValueType::int32: return "i32";
    case ValueType::float32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "str";
    case ValueType::array: return "arr";
    case ValueType::uint64: return "u64";
    case ValueType::int64: return "i64";
    case ValueType::float64: return "f64";
  }
  return "?";
}

Value Value::array(ValueType elem, Array items) {
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].type != elem)
      throw GgufError(fmt::format("array of {}: element {} has type {}", value_type_name(elem), i,
                                  value_type_name(items[i].type)));
  Value v;
  v.type = ValueType::array;
  v.elem_type = elem;
  v.data = std::move(items);
  return v;
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}

uint64_t Value::as_u64() const {
  if (auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (auto* i = std::get_if<int64_t>(&data); i && *i >= 0) return (uint64_t)*i;
  throw GgufError(fmt::format("expected a non-negative integer, found {} {}", value_type_name(type), to_string()));
}

int64_t Value::as_i64() const {
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  if (auto* u = std::get_if<uint64_t>(&data); u && *u <= (uint64_t)INT64_MAX) return (int64_t)*u;
  throw GgufError(fmt::format("expected an integer, found {} {}", value_type_name(type), to_string()));
}

double Value::as_f64() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (auto* u = std::get_if<uint64_t>(&data)) return (double)*u;
  if (auto* i = std::get_if<int64_t>(&data)) return (double)*i;
  throw GgufError(fmt::format("expected a number, found {}", value_type_name(type)));
}

bool Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&data)) return *b;
  throw GgufError(fmt::format("expected a bool, found {}", value_type_name(type)));
}

const std::string& Value::as_str() const {
  if (auto* s = std::get_if<std::string>(&data)) return *s;
  throw GgufError(fmt::format("expected a string, found {}", value_type_name(type)));
}

const Value::Array& Value::as_array() const {
  if (auto* a = std::get_if<Array>(&data)) return *a;
  throw GgufError(fmt::format("expected an array, found {}", value_type_name(type)));
}

std::string Value::to_string(size_t max_items) const {
  switch (type) {
    case ValueType::float32: return fmt::format("{}", (float)std::get<double>(data));
    case ValueType::float64: return fmt::format("{}", std::get<double>(data));
    case ValueType::boolean: return std::get<bool>(data) ? "true" : "false";
    case ValueType::string: {
      const auto& s = std::get<std::string>(data);
      std::string out = "\"";
      for (char ch : s.substr(0, 200)) {
        if (ch == '"' || ch == '\\') out += '\\';
        if ((unsigned char)ch < 0x20) out += fmt::format("\\x{:02x}", (unsigned char)ch);
        else out += ch;
      }
      return out + (s.size() > 200 ? "\"..." : "\"");
    }
    case ValueType::array: {
      const auto& a = std::get<Array>(data);
      std::string out = "[";
      for (size_t i = 0; i < a.size() && i < max_items; ++i) out += (i ? ", " : "") + a[i].to_string(max_items);
      if (a.size() > max_items) out += fmt::format(", ... ({} total)", a.size());
      return out + "]";
    }
    default:
      if (auto* u = std::get_if<uint64_t>(&data)) return fmt::format("{}", *u);
      return fmt::format("{}", std::get<int64_t>(data));
  }
}

std::vector<float> dequantize(const File& f, const TensorInfo& t) {
  const dml_qtype_traits* tr = dml_qtype_get(t.type);
  if (!tr || !tr->supported)
    throw GgufError(fmt::format("{}: tensor '{}' has type {}, which DinoML cannot dequantize (supported: f32 f16 bf16 "
                                "q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K q8_K)",
                                f.path(), t.name, tr ? tr->name : "?"));
  std::vector<float> out((size_t)t.numel());
  if (!quant::dequantize_row(t.type, f.data(t), out.data(), t.numel()))
    throw GgufError(fmt::format("tensor '{}': dequantize failed", t.name));
  return out;
}

std::string describe(const File& f, size_t max_array_items) {
  std::string s = fmt::format("GGUF v{}  {}  ({} bytes, alignment {}, data at {})\n", f.version, f.path(), f.file_size(),
                              f.alignment, f.data_offset);
  s += fmt::format("metadata: {} keys\n", f.metadata.size());
  for (const auto& [k, v] : f.metadata) {
    std::string type = v.type == ValueType::array ? fmt::format("arr[{}]", value_type_name(v.elem_type))
                                                  : value_type_name(v.type);
    s += fmt::format("  {:<40} {:<9} {}\n", k, type, v.to_string(max_array_items));
  }
  s += fmt::format("tensors: {}\n", f.tensors.size());
  uint64_t total = 0;
  for (const auto& t : f.tensors) {
    std::string ne;
    for (size_t i = 0; i < t.ne.size(); ++i) ne += (i ? " x " : "") + std::to_string(t.ne[i]);
    s += fmt::format("  {:<40} {:<6} ne=[{}]  {} bytes @ {}\n", t.name, dml_qtype_get(t.type)->name, ne, t.nbytes,
                     t.offset);
    total += t.nbytes;
  }
  s += fmt::format("total tensor bytes: {}\n", total);
  return s;
}

}  // namespace dinoml::gguf
