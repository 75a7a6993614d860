// GGUF in the extension: reading a file's metadata/tensor table and binding a graph constant to
// a GGUF tensor (dml.gguf_constant). GgufError surfaces as dml.IrError (a ValueError).
#include <sys/stat.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "bindings.h"
#include "builder/graph_builder.h"
#include "dinoml/quant_blocks.h"
#include "dinoml/quant_ref.h"
#include "import/gguf/gguf_constant.h"
#include "ir/error.h"

namespace dinoml::py_ext {
namespace {

// Parsed files by path, re-parsed when the file's size or mtime changes: a model binds hundreds
// of tensors of one file, and parsing its metadata (vocabularies) each time would dominate.
std::shared_ptr<const gguf::File> open_cached(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::pair<std::pair<int64_t, int64_t>, std::shared_ptr<const gguf::File>>> cache;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IrError("GGUF file '" + path + "' does not exist");
  const std::pair<int64_t, int64_t> key{st.st_size, st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec};
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(path);
  if (it != cache.end() && it->second.first == key) return it->second.second;
  auto f = std::make_shared<const gguf::File>(gguf::File::open(path));
  cache[path] = {key, f};
  return f;
}

py::object to_py(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::float32: case ValueType::float64: return py::float_(v.as_f64());
    case ValueType::boolean: return py::bool_(v.as_bool());
    case ValueType::string: return py::bytes(v.as_str()).attr("decode")("utf-8", "replace");
    case ValueType::array: {
      py::list l;
      for (const auto& e : v.as_array()) l.append(to_py(e));
      return l;
    }
    default:
      if (std::holds_alternative<uint64_t>(v.data)) return py::int_(v.as_u64());
      return py::int_(v.as_i64());
  }
}

template <class F>
auto gguf_call(F&& f) {
  try {
    return f();
  } catch (const gguf::GgufError& e) {
    throw IrError(e.what());
  }
}


// One metadata value from Python: (type name, value); arrays as "arr[<elem>]" with a list.
gguf::Value value_from_py(const std::string& key, const std::string& type, const py::handle& v) {
  using gguf::Value;
  using gguf::ValueType;
  auto scalar = [&](const std::string& t, const py::handle& x) -> Value {
    if (t == "u8") return Value::u8(x.cast<uint8_t>());
    if (t == "i8") return Value::i8(x.cast<int8_t>());
    if (t == "u16") return Value::u16(x.cast<uint16_t>());
    if (t == "i16") return Value::i16(x.cast<int16_t>());
    if (t == "u32") return Value::u32(x.cast<uint32_t>());
    if (t == "i32") return Value::i32(x.cast<int32_t>());
    if (t == "u64") return Value::u64(x.cast<uint64_t>());
    if (t == "i64") return Value::i64(x.cast<int64_t>());
    if (t == "f32") return Value::f32(x.cast<float>());
    if (t == "f64") return Value::f64(x.cast<double>());
    if (t == "bool") return Value::boolean(x.cast<bool>());
    if (t == "str") return Value::str(x.cast<std::string>());
    throw IrError("GGUF metadata '" + key + "': unknown value type '" + t +
                  "' (u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str, or arr[<one of them>])");
  };
  if (type.rfind("arr[", 0) == 0 && type.back() == ']') {
    const std::string et = type.substr(4, type.size() - 5);
    Value::Array items;
    for (auto x : v) items.push_back(scalar(et, x));
    static const std::map<std::string, ValueType> kElem = {
        {"u8", ValueType::uint8},   {"i8", ValueType::int8},       {"u16", ValueType::uint16},
        {"i16", ValueType::int16},  {"u32", ValueType::uint32},    {"i32", ValueType::int32},
        {"u64", ValueType::uint64}, {"i64", ValueType::int64},     {"f32", ValueType::float32},
        {"f64", ValueType::float64}, {"bool", ValueType::boolean}, {"str", ValueType::string}};
    auto e = kElem.find(et);
    if (e == kElem.end()) scalar(et, v);  // throws the unknown-type message
    return Value::array(e->second, std::move(items));
  }
  return scalar(type, v);
}

}  // namespace

void bind_gguf(py::module_& m) {
  m.def("gguf_read", [](const std::string& path) {
    return gguf_call([&] {
      auto f = open_cached(path);
      py::dict meta, types;
      for (const auto& [k, v] : f->metadata) {
        meta[py::str(k)] = to_py(v);
        types[py::str(k)] = v.type == gguf::ValueType::array
                                ? std::string("arr[") + gguf::value_type_name(v.elem_type) + "]"
                                : std::string(gguf::value_type_name(v.type));
      }
      py::list tensors;
      for (const auto& t : f->tensors) {
        py::dict d;
        d["name"] = t.name;
        d["type"] = dml_qtype_get(t.type)->name;
        d["shape"] = t.shape();
        d["ne"] = t.ne;
        d["offset"] = t.offset;
        d["nbytes"] = t.nbytes;
        tensors.append(d);
      }
      py::dict out;
      out["version"] = f->version;
      out["alignment"] = f->alignment;
      out["metadata"] = meta;
      out["metadata_types"] = types;
      out["tensors"] = tensors;
      return out;
    });
  }, py::arg("path"), "metadata (key → value), metadata_types and the tensor table of a GGUF file");
  m.def("gguf_tensor_dequantized", [](const std::string& path, const std::string& name) {
    return gguf_call([&] {
      auto f = open_cached(path);
      const auto& t = f->tensor(name);
      std::vector<float> v = gguf::dequantize(*f, t);
      py::array_t<float> a(t.shape());
      std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(float));
      return a;
    });
  }, py::arg("path"), py::arg("tensor"), "a GGUF tensor dequantized to float32 (row-major shape)");
  m.def("gguf_constant", [](builder::GraphBuilder& b, const std::string& name, const std::string& path,
                            const std::string& tensor, const std::string& policy, const std::vector<int64_t>& shape) {
    return gguf_call([&] {
      auto f = open_cached(path);
      return gguf::add_gguf_constant(b, name, *f, tensor, gguf::parse_policy(policy), shape);
    });
  }, py::arg("builder"), py::arg("name"), py::arg("path"), py::arg("tensor"), py::arg("policy") = "auto",
     py::arg("shape") = std::vector<int64_t>{});
  m.def("gguf_write", [](const std::string& path, const py::list& metadata, const py::list& tensors, uint32_t version) {
    return gguf_call([&] {
      gguf::Writer w;
      for (auto item : metadata) {
        auto t = item.cast<py::tuple>();
        if (t.size() != 3) throw IrError("gguf_write: metadata items are (key, type, value)");
        const std::string key = t[0].cast<std::string>();
        w.set(key, value_from_py(key, t[1].cast<std::string>(), t[2]));
      }
      for (auto item : tensors) {
        auto t = item.cast<py::tuple>();
        if (t.size() != 3) throw IrError("gguf_write: tensor items are (name, float32 array, ggml type name)");
        const std::string name = t[0].cast<std::string>();
        auto a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(t[1]);
        if (!a) throw IrError("gguf_write: tensor '" + name + "' is not convertible to a float32 array");
        const std::string tname = t[2].cast<std::string>();
        const int type = dml_qtype_by_name(tname.c_str());
        const dml_qtype_traits* tr = dml_qtype_get(type);
        if (!tr || !tr->supported)
          throw IrError("gguf_write: tensor '" + name + "': type '" + tname + "' cannot be quantized by DinoML");
        std::vector<int64_t> ne;
        for (py::ssize_t k = a.ndim(); k-- > 0;) ne.push_back(a.shape(k));
        if (ne.empty()) ne.push_back(1);
        const uint64_t nbytes = gguf::tensor_nbytes(type, ne, "tensor '" + name + "'");
        std::vector<uint8_t> bytes(nbytes);
        const int64_t row = ne[0], rows = static_cast<int64_t>(a.size()) / std::max<int64_t>(row, 1);
        const size_t row_bytes = nbytes / static_cast<size_t>(std::max<int64_t>(rows, 1));
        for (int64_t r = 0; r < rows; ++r)
          quant::quantize_row_ref(type, a.data() + r * row, bytes.data() + r * row_bytes, row);
        w.add_tensor(name, ne, type, std::move(bytes));
      }
      w.write(path, version);
    });
  }, py::arg("path"), py::arg("metadata"), py::arg("tensors"), py::arg("version") = 3,
     "writes a GGUF file: metadata [(key, type, value)], tensors [(name, float32 array, ggml type)] "
     "quantized with DinoML's reference quantizers (bit-identical to ggml's quantize_row_*_ref)");
}

}  // namespace dinoml::py_ext
