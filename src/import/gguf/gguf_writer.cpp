// GGUF writer: metadata in insertion order, tensors packed in insertion order, each padded to
// the alignment (ggml requires exactly this layout: offset[i] = sum of padded sizes before i).
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "dinoml/quant_blocks.h"
#include "import/gguf/gguf.h"

namespace dinoml::gguf {
namespace {

constexpr size_t kMaxTensorName = 63;  // GGML_MAX_NAME - 1: longer names do not load in ggml

struct Out {
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    const size_t n = b.size();
    b.resize(n + sizeof(T));
    std::memcpy(b.data() + n, &v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  void pad(uint64_t alignment) {
    while (b.size() % alignment) b.push_back(0);
  }
};

void put_value(Out& o, const Value& v) {
  switch (v.type) {
    case ValueType::uint8: o.put<uint8_t>((uint8_t)v.as_u64()); break;
    case ValueType::int8: o.put<int8_t>((int8_t)v.as_i64()); break;
    case ValueType::uint16: o.put<uint16_t>((uint16_t)v.as_u64()); break;
    case ValueType::int16: o.put<int16_t>((int16_t)v.as_i64()); break;
    case ValueType::uint32: o.put<uint32_t>((uint32_t)v.as_u64()); break;
    case ValueType::int32: o.put<int32_t>((int32_t)v.as_i64()); break;
    case ValueType::float32: o.put<float>((float)v.as_f64()); break;
    case ValueType::uint64: o.put<uint64_t>(v.as_u64()); break;
    case ValueType::int64: o.put<int64_t>(v.as_i64()); break;
    case ValueType::float64: o.put<double>(v.as_f64()); break;
    case ValueType::boolean: o.put<uint8_t>(v.as_bool() ? 1 : 0); break;
    case ValueType::string: o.str(v.as_str()); break;
    case ValueType::array: {
      const auto& a = v.as_array();
      o.put<uint32_t>((uint32_t)v.elem_type);
      o.put<uint64_t>(a.size());
      for (const auto& e : a) put_value(o, e);
      break;
    }
  }
}

// The in-memory Value must hold what its type says (a Value built through the factories does).
void check_value(const std::string& key, const Value& v) {
  bool ok = true;
  switch (v.type) {
    case ValueType::uint8: ok = std::holds_alternative<uint64_t>(v.data) && v.as_u64() <= 0xff; break;
    case ValueType::uint16: ok = std::holds_alternative<uint64_t>(v.data) && v.as_u64() <= 0xffff; break;
    case ValueType::uint32: ok = std::holds_alternative<uint64_t>(v.data) && v.as_u64() <= 0xffffffffu; break;
    case ValueType::uint64: ok = std::holds_alternative<uint64_t>(v.data); break;
    case ValueType::int8: case ValueType::int16: case ValueType::int32: case ValueType::int64:
      ok = std::holds_alternative<int64_t>(v.data);
      break;
    case ValueType::float32: case ValueType::float64: ok = std::holds_alternative<double>(v.data); break;
    case ValueType::boolean: ok = std::holds_alternative<bool>(v.data); break;
    case ValueType::string: ok = std::holds_alternative<std::string>(v.data); break;
    case ValueType::array:
      ok = std::holds_alternative<Value::Array>(v.data);
      if (ok)
        for (const auto& e : v.as_array()) {
          if (e.type != v.elem_type)
            throw GgufError(fmt::format("metadata '{}': array of {} holds a {}", key, value_type_name(v.elem_type),
                                        value_type_name(e.type)));
          check_value(key, e);
        }
      break;
    default: ok = false;
  }
  if (!ok) throw GgufError(fmt::format("metadata '{}': value does not fit its type {}", key, value_type_name(v.type)));
}

}  // namespace

void Writer::set(const std::string& key, Value v) {
  check_value(key, v);
  if (key == "general.alignment") {
    if (v.type != ValueType::uint32) throw GgufError("general.alignment must be a uint32");
    const uint64_t a = v.as_u64();
    if (a == 0 || (a & (a - 1)) != 0) throw GgufError(fmt::format("general.alignment = {} is not a power of two", a));
    if (!tensors_.empty()) throw GgufError("set general.alignment before adding tensors");
    alignment_ = (uint32_t)a;
  }
  for (auto& [k, old] : kv_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  kv_.emplace_back(key, std::move(v));
}

void Writer::add_tensor(const std::string& name, std::vector<int64_t> ne, int type, std::vector<uint8_t> bytes) {
  if (name.empty() || name.size() > kMaxTensorName)
    throw GgufError(fmt::format("tensor name '{}' must have 1..{} characters", name, kMaxTensorName));
  for (const auto& t : tensors_)
    if (t.info.name == name) throw GgufError(fmt::format("duplicate tensor name '{}'", name));
  PendingTensor t;
  t.info.name = name;
  t.info.type = type;
  t.info.nbytes = tensor_nbytes(type, ne, "tensor '" + name + "'");
  t.info.ne = std::move(ne);
  if (bytes.size() != t.info.nbytes)
    throw GgufError(fmt::format("tensor '{}': {} data bytes given, its type {} and shape need {}", name, bytes.size(),
                                dml_qtype_get(type)->name, t.info.nbytes));
  uint64_t off = 0;
  if (!tensors_.empty()) {
    const auto& last = tensors_.back().info;
    off = (last.offset + last.nbytes + alignment_ - 1) / alignment_ * alignment_;
  }
  t.info.offset = off;
  t.bytes = std::move(bytes);
  tensors_.push_back(std::move(t));
}

std::vector<uint8_t> Writer::to_bytes(uint32_t version) const {
  if (version != 2 && version != 3) throw GgufError(fmt::format("cannot write GGUF version {} (2 or 3)", version));
  Out o;
  o.b.insert(o.b.end(), {'G', 'G', 'U', 'F'});
  o.put<uint32_t>(version);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& [k, v] : kv_) {
    o.str(k);
    o.put<uint32_t>((uint32_t)v.type);
    put_value(o, v);
  }
  for (const auto& t : tensors_) {
    o.str(t.info.name);
    o.put<uint32_t>((uint32_t)t.info.ne.size());
    for (int64_t d : t.info.ne) o.put<int64_t>(d);
    o.put<uint32_t>((uint32_t)t.info.type);
    o.put<uint64_t>(t.info.offset);
  }
  o.pad(alignment_);
  const size_t data_start = o.b.size();
  for (const auto& t : tensors_) {
    o.b.resize(data_start + t.info.offset, 0);
    o.b.insert(o.b.end(), t.bytes.begin(), t.bytes.end());
    o.pad(alignment_);
  }
  return o.b;
}

void Writer::write(const std::string& path, uint32_t version) const {
  const auto bytes = to_bytes(version);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw GgufError(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    throw GgufError(fmt::format("cannot write {}", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw GgufError(fmt::format("cannot rename {} to {}", tmp, path));
  }
}

}  // namespace dinoml::gguf
