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
}

}  // namespace dinoml::py_ext
