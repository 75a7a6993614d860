// ONNX TensorProto decoding: element types, raw/typed payloads, external data; NodeView
// attribute access; --dim spec parsing.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "import/onnx/onnx_context.h"
#include "ir/error.h"

namespace dinoml::onnx_import {
namespace fs = std::filesystem;
using ir::DType;

std::string onnx_type_name(int t) {
  static const char* names[] = {"UNDEFINED", "FLOAT",     "UINT8",      "INT8",   "UINT16", "INT16",
                                "INT32",     "INT64",     "STRING",     "BOOL",   "FLOAT16", "DOUBLE",
                                "UINT32",    "UINT64",    "COMPLEX64",  "COMPLEX128", "BFLOAT16"};
  if (t >= 0 && t < static_cast<int>(std::size(names))) return names[t];
  return "type#" + std::to_string(t);
}

namespace {
thread_local bool g_float64_seen = false;
}  // namespace

void reset_float64_seen() { g_float64_seen = false; }
bool float64_seen() { return g_float64_seen; }

std::string dim_identifier(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (o.empty() || std::isdigit(static_cast<unsigned char>(o[0]))) o = "d_" + o;
  return o;
}

DType dtype_from_onnx(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::DOUBLE: g_float64_seen = true; return DType::f32;
    case onnx::TensorProto::FLOAT: return DType::f32;
    case onnx::TensorProto::FLOAT16: return DType::f16;
    case onnx::TensorProto::BFLOAT16: return DType::bf16;
    case onnx::TensorProto::INT8: return DType::i8;
    case onnx::TensorProto::UINT8: return DType::u8;
    case onnx::TensorProto::INT32: return DType::i32;
    case onnx::TensorProto::INT64: return DType::i64;
    case onnx::TensorProto::BOOL: return DType::boolean;
    default: break;
  }
  throw Unsupported(what + ": element type " + onnx_type_name(t) + " is not supported (DinoML has float32, float16, "
                    "bfloat16, int8, uint8, int32, int64, bool; float64 is computed as float32; int16 / uint16 / uint32 / "
                    "uint64 as int32 / int64)");
}

std::optional<DType> widened_storage(int t) {
  switch (t) {
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16: return DType::i32;
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT64: return DType::i64;
    default: return std::nullopt;
  }
}

std::string widened_name(int t) {
  switch (t) {
    case onnx::TensorProto::INT16: return "int16";
    case onnx::TensorProto::UINT16: return "uint16";
    case onnx::TensorProto::UINT32: return "uint32";
    case onnx::TensorProto::UINT64: return "uint64";
    default: return "";
  }
}

DType storage_dtype(int t, const std::string& what) {
  if (auto w = widened_storage(t)) return *w;
  return dtype_from_onnx(t, what);
}

namespace {

std::string read_external(const onnx::TensorProto& t, const std::string& base_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  const std::string what = "tensor '" + t.name() + "'";
  if (location.empty()) throw Invalid(what + ": external data without a 'location'");
  fs::path rel(location);
  if (rel.is_absolute()) throw Invalid(what + ": external data location '" + location + "' must be relative to the model");
  for (const auto& part : rel)
    if (part == "..") throw Invalid(what + ": external data location '" + location + "' leaves the model's directory");
  fs::path p = fs::path(base_dir.empty() ? "." : base_dir) / rel;
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Invalid(what + ": cannot open external data file '" + p.string() + "'");
  f.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(f.tellg());
  if (length < 0) length = static_cast<int64_t>(want);
  if (offset < 0 || offset + length > size)
    throw Invalid(what + ": external data [" + std::to_string(offset) + ", " + std::to_string(offset + length) +
                  ") lies outside '" + p.string() + "' (" + std::to_string(size) + " bytes)");
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  return bytes;
}

// The tensor's extents (checked: none negative, the element count neither overflowing nor above 2^40).
std::vector<int64_t> proto_shape(const onnx::TensorProto& t, const std::string& what, int64_t* count) {
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) throw Invalid(what + ": negative extent " + std::to_string(d));
    if (d > 0 && n > std::numeric_limits<int64_t>::max() / d) throw Invalid(what + ": element count overflows");
    shape.push_back(d);
    n *= d;
  }
  if (n > (int64_t{1} << 40)) throw Invalid(what + ": implausibly large (" + std::to_string(n) + " elements)");
  *count = n;
  return shape;
}

// A DOUBLE tensor (raw_data, double_data or external data) as float32, rounded to nearest.
ops::HostTensor narrow_double_tensor(const onnx::TensorProto& t, const std::string& base_dir) {
  const std::string what = "tensor '" + t.name() + "'";
  int64_t n = 0;
  ops::HostTensor h(DType::f32, proto_shape(t, what, &n));
  const size_t want = static_cast<size_t>(n) * sizeof(double);
  std::vector<double> v(static_cast<size_t>(n));
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.has_raw_data()) {
    const std::string bytes = t.data_location() == onnx::TensorProto::EXTERNAL ? read_external(t, base_dir, want) : t.raw_data();
    if (bytes.size() != want)
      throw Invalid(what + ": " + (t.has_raw_data() ? "raw_data" : "external data") + " holds " +
                    std::to_string(bytes.size()) + " bytes, the shape " + h.shape_string() + " needs " +
                    std::to_string(want));
    if (want) std::memcpy(v.data(), bytes.data(), want);
  } else {
    if (t.double_data_size() != n)
      throw Invalid(what + ": double_data holds " + std::to_string(t.double_data_size()) + " values, the shape " +
                    h.shape_string() + " needs " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = t.double_data(static_cast<int>(i));
  }
  for (int64_t i = 0; i < n; ++i) h.set_f64(i, static_cast<double>(static_cast<float>(v[static_cast<size_t>(i)])));
  return h;
}

// An INT16 / UINT16 / UINT32 / UINT64 tensor in its wider storage dtype (widened_storage): each
// value exactly, uint64 as the int64 of the same bits.
ops::HostTensor widened_tensor(const onnx::TensorProto& t, const std::string& base_dir) {
  const std::string what = "tensor '" + t.name() + "'";
  const int type = t.data_type();
  int64_t n = 0;
  ops::HostTensor h(*widened_storage(type), proto_shape(t, what, &n));
  const size_t es = type == onnx::TensorProto::UINT64 ? 8 : type == onnx::TensorProto::UINT32 ? 4 : 2;
  const size_t want = static_cast<size_t>(n) * es;
  auto from_bytes = [&](const std::string& bytes, const char* field) {
    if (bytes.size() != want)
      throw Invalid(what + ": " + field + " holds " + std::to_string(bytes.size()) + " bytes, the shape " + h.shape_string() +
                    " needs " + std::to_string(want));
    for (int64_t i = 0; i < n; ++i) {
      const char* p = bytes.data() + static_cast<size_t>(i) * es;
      int64_t v = 0;
      if (type == onnx::TensorProto::INT16) { int16_t x; std::memcpy(&x, p, 2); v = x; }
      else if (type == onnx::TensorProto::UINT16) { uint16_t x; std::memcpy(&x, p, 2); v = x; }
      else if (type == onnx::TensorProto::UINT32) { uint32_t x; std::memcpy(&x, p, 4); v = x; }
      else { uint64_t x; std::memcpy(&x, p, 8); v = static_cast<int64_t>(x); }
      h.set_i64(i, v);
    }
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    from_bytes(read_external(t, base_dir, want), "external data");
  } else if (t.has_raw_data()) {
    from_bytes(t.raw_data(), "raw_data");
  } else if (type == onnx::TensorProto::INT16 || type == onnx::TensorProto::UINT16) {
    // int32_data carries INT16 and UINT16 (one value per entry).
    if (t.int32_data_size() != n)
      throw Invalid(what + ": int32_data holds " + std::to_string(t.int32_data_size()) + " values, the shape needs " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i) {
      const int32_t x = t.int32_data(static_cast<int>(i));
      h.set_i64(i, type == onnx::TensorProto::INT16 ? int64_t{static_cast<int16_t>(x)} : int64_t{static_cast<uint16_t>(x)});
    }
  } else {
    // uint64_data carries UINT32 and UINT64.
    if (t.uint64_data_size() != n)
      throw Invalid(what + ": uint64_data holds " + std::to_string(t.uint64_data_size()) + " values, the shape needs " + std::to_string(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t x = t.uint64_data(static_cast<int>(i));
      h.set_i64(i, type == onnx::TensorProto::UINT32 ? static_cast<int64_t>(static_cast<uint32_t>(x)) : static_cast<int64_t>(x));
    }
  }
  return h;
}

}  // namespace

ops::HostTensor tensor_from_proto(const onnx::TensorProto& t, const std::string& base_dir, bool uint16_as_bfloat16) {
  const std::string what = "tensor '" + t.name() + "'";
  if (t.has_segment()) throw Unsupported(what + ": segmented tensors are not supported");
  if (t.data_type() == onnx::TensorProto::DOUBLE) {
    g_float64_seen = true;
    return narrow_double_tensor(t, base_dir);
  }
  const bool u16_bits = uint16_as_bfloat16 && t.data_type() == onnx::TensorProto::UINT16;
  if (!u16_bits && widened_storage(t.data_type())) return widened_tensor(t, base_dir);
  DType dt = u16_bits ? DType::bf16 : dtype_from_onnx(t.data_type(), what);
  int64_t n = 0;
  const std::vector<int64_t> shape = proto_shape(t, what, &n);
  const size_t es = ir::dtype_size(dt);
  const size_t want = static_cast<size_t>(n) * es;
  ops::HostTensor h(dt, shape);
  auto size_error = [&](size_t got, const char* field) {
    return Invalid(what + ": " + field + " holds " + std::to_string(got) + " values/bytes, the shape " +
                   h.shape_string() + " needs " + std::to_string(field[0] == 'r' || field[0] == 'e' ? want : size_t(n)));
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string bytes = read_external(t, base_dir, want);
    if (bytes.size() != want) throw size_error(bytes.size(), "external data");
    if (want) std::memcpy(h.data.data(), bytes.data(), want);  // empty tensors have no buffer
    return h;
  }
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() != want) throw size_error(raw.size(), "raw_data");
    if (want) std::memcpy(h.data.data(), raw.data(), want);  // empty tensors have no buffer (UBSan)
    return h;
  }
  switch (u16_bits ? static_cast<int>(onnx::TensorProto::BFLOAT16) : t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (t.float_data_size() != n) throw size_error(static_cast<size_t>(t.float_data_size()), "float_data");
      if (want) std::memcpy(h.data.data(), t.float_data().data(), want);
      break;
    case onnx::TensorProto::INT64:
      if (t.int64_data_size() != n) throw size_error(static_cast<size_t>(t.int64_data_size()), "int64_data");
      if (want) std::memcpy(h.data.data(), t.int64_data().data(), want);
      break;
    default: {
      // int32_data carries INT32, INT8, UINT8, BOOL and the bit patterns of FLOAT16/BFLOAT16.
      if (t.int32_data_size() != n) throw size_error(static_cast<size_t>(t.int32_data_size()), "int32_data");
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = t.int32_data(static_cast<int>(i));
        if (dt == DType::f16 || dt == DType::bf16) {
          const uint16_t bits = static_cast<uint16_t>(v);
          std::memcpy(h.data.data() + i * 2, &bits, 2);
        } else {
          h.set_i64(i, v);
        }
      }
    }
  }
  return h;
}

// ---- NodeView ----------------------------------------------------------------------------------

bool NodeView::has(const std::string& a) const {
  for (const auto& at : p.attribute())
    if (at.name() == a) return true;
  return false;
}

const onnx::AttributeProto* NodeView::find(const std::string& a, int type) {
  for (const auto& at : p.attribute()) {
    if (at.name() != a) continue;
    used_.insert(a);
    if (!at.ref_attr_name().empty())
      throw Unsupported("node '" + name + "' (" + op() + "): attribute '" + a + "' refers to a function attribute");
    if (at.type() != type && at.type() != onnx::AttributeProto::UNDEFINED)
      throw Invalid("node '" + name + "' (" + op() + "): attribute '" + a + "' has type " +
                    onnx::AttributeProto::AttributeType_Name(at.type()) + ", expected " +
                    onnx::AttributeProto::AttributeType_Name(static_cast<onnx::AttributeProto::AttributeType>(type)));
    return &at;
  }
  return nullptr;
}

int64_t NodeView::i(const std::string& a, int64_t dflt) {
  auto* at = find(a, onnx::AttributeProto::INT);
  return at ? at->i() : dflt;
}
int64_t NodeView::i_req(const std::string& a) {
  auto* at = find(a, onnx::AttributeProto::INT);
  if (!at) throw Invalid("node '" + name + "' (" + op() + "): required attribute '" + a + "' is missing");
  return at->i();
}
float NodeView::f(const std::string& a, float dflt) {
  auto* at = find(a, onnx::AttributeProto::FLOAT);
  return at ? at->f() : dflt;
}
std::string NodeView::s(const std::string& a, const std::string& dflt) {
  auto* at = find(a, onnx::AttributeProto::STRING);
  return at ? at->s() : dflt;
}
std::vector<int64_t> NodeView::ints(const std::string& a, const std::vector<int64_t>& dflt) {
  auto* at = find(a, onnx::AttributeProto::INTS);
  return at ? std::vector<int64_t>(at->ints().begin(), at->ints().end()) : dflt;
}
std::vector<float> NodeView::floats(const std::string& a, const std::vector<float>& dflt) {
  auto* at = find(a, onnx::AttributeProto::FLOATS);
  return at ? std::vector<float>(at->floats().begin(), at->floats().end()) : dflt;
}
const onnx::TensorProto* NodeView::tensor(const std::string& a) {
  auto* at = find(a, onnx::AttributeProto::TENSOR);
  return at ? &at->t() : nullptr;
}
std::vector<std::string> NodeView::unread_attributes() const {
  std::vector<std::string> out;
  for (const auto& at : p.attribute())
    if (!used_.count(at.name())) out.push_back(at.name());
  return out;
}
size_t NodeView::num_inputs() const {
  size_t n = static_cast<size_t>(p.input_size());
  while (n > 0 && p.input(static_cast<int>(n - 1)).empty()) --n;
  return n;
}

// ---- --dim specs ------------------------------------------------------------------------------

ir::Dim parse_dim_spec(const std::string& spec) {
  auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw IrError("--dim expects name=min:max[:bucket,bucket,...][:%divisor] or name=value, got '" + spec + "'");
  ir::Dim d;
  d.name = dim_identifier(spec.substr(0, eq));  // the ONNX name may be any string (p2o.DynamicDimension.0)
  std::string rest = spec.substr(eq + 1);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    auto c = rest.find(':', pos);
    parts.push_back(rest.substr(pos, c == std::string::npos ? std::string::npos : c - pos));
    if (c == std::string::npos) break;
    pos = c + 1;
  }
  auto num = [&](const std::string& s) {
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used != s.size()) throw std::invalid_argument(s);
      return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      throw IrError("--dim '" + spec + "': '" + s + "' is not an integer");
    }
  };
  // A last part "%D": the dim is a multiple of D (a detector's side kept a multiple of its stride).
  if (parts.size() >= 3 && !parts.back().empty() && parts.back()[0] == '%') {
    d.divisible_by = num(parts.back().substr(1));
    parts.pop_back();
  }
  if (parts.size() == 1) {
    d.min = d.max = num(parts[0]);
  } else if (parts.size() == 2 || parts.size() == 3) {
    d.min = num(parts[0]);
    d.max = num(parts[1]);
    if (parts.size() == 3 && !parts[2].empty()) {
      size_t p2 = 0;
      while (p2 <= parts[2].size()) {
        auto c = parts[2].find(',', p2);
        d.buckets.push_back(num(parts[2].substr(p2, c == std::string::npos ? std::string::npos : c - p2)));
        if (c == std::string::npos) break;
        p2 = c + 1;
      }
    }
  } else {
    throw IrError("--dim '" + spec + "': expected name=min:max[:buckets][:%divisor] or name=value");
  }
  d.normalize_and_validate();
  return d;
}

}  // namespace dinoml::onnx_import
