// `dinoml gguf-info FILE`: lists a GGUF file's metadata and tensors (text or --json).
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "dinoml/quant_blocks.h"
#include "import/gguf/gguf.h"

namespace dinoml::cli {
namespace {

nlohmann::json value_json(const gguf::Value& v, size_t max_items) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::float32: return (float)v.as_f64();
    case ValueType::float64: return v.as_f64();
    case ValueType::boolean: return v.as_bool();
    case ValueType::string: return v.as_str();
    case ValueType::array: {
      nlohmann::json a = nlohmann::json::array();
      const auto& items = v.as_array();
      for (size_t i = 0; i < items.size() && i < max_items; ++i) a.push_back(value_json(items[i], max_items));
      return a;
    }
    default:
      if (std::holds_alternative<uint64_t>(v.data)) return v.as_u64();
      return v.as_i64();
  }
}

}  // namespace

int cmd_gguf_info(const std::string& path, bool as_json, size_t max_items) {
  const gguf::File f = gguf::File::open(path);
  if (!as_json) {
    std::cout << gguf::describe(f, max_items);
    return 0;
  }
  nlohmann::json j;
  j["version"] = f.version;
  j["alignment"] = f.alignment;
  j["data_offset"] = f.data_offset;
  j["file_size"] = f.file_size();
  j["metadata"] = nlohmann::json::array();
  for (const auto& [k, v] : f.metadata) {
    nlohmann::json e{{"key", k}, {"type", gguf::value_type_name(v.type)}, {"value", value_json(v, max_items)}};
    if (v.type == gguf::ValueType::array) {
      e["elem_type"] = gguf::value_type_name(v.elem_type);
      e["count"] = v.as_array().size();
    }
    j["metadata"].push_back(e);
  }
  j["tensors"] = nlohmann::json::array();
  for (const auto& t : f.tensors)
    j["tensors"].push_back({{"name", t.name}, {"type", dml_qtype_get(t.type)->name}, {"ne", t.ne},
                            {"offset", t.offset}, {"nbytes", t.nbytes}});
  std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace dinoml::cli
