#include "json_util.h"

#include "errors.h"

#include <fstream>
#include <sstream>

namespace dinoml::runtime {

json read_json_file(const std::filesystem::path& path, const std::string& display_name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail(DINOML_ERR_NOT_FOUND, "cannot open ", display_name, " (", path.string(),
         "): the artifact is incomplete; recompile the model or copy the whole artifact directory again");
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {
    fail(DINOML_ERR_ARTIFACT, display_name, " (", path.string(), ") is not valid JSON (", e.what(),
         "); the artifact is corrupted: recompile the model or copy the artifact again");
  }
}

void JsonReader::bad(const std::string& where, const std::string& what) const {
  fail(DINOML_ERR_ARTIFACT, file_, ": ", where, ": ", what,
       "; the artifact is malformed or was written by an incompatible DinoML: recompile the model");
}

const json* JsonReader::optional_field(const json& obj, const char* key, const std::string& where) const {
  if (!obj.is_object()) bad(where, "expected an object");
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

const json& JsonReader::field(const json& obj, const char* key, const std::string& where) const {
  const json* value = optional_field(obj, key, where);
  if (!value) bad(where, cat("missing key \"", key, "\""));
  return *value;
}

int64_t JsonReader::integer(const json& value, const std::string& where) const {
  // Non-negative literals parse as uint64: values above INT64_MAX must not wrap.
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    bad(where, "integer out of range");
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  bad(where, cat("expected an integer, got ", value.type_name()));
}

std::string JsonReader::string(const json& value, const std::string& where) const {
  if (!value.is_string()) bad(where, cat("expected a string, got ", value.type_name()));
  return value.get<std::string>();
}

const json& JsonReader::array(const json& value, const std::string& where) const {
  if (!value.is_array()) bad(where, cat("expected an array, got ", value.type_name()));
  return value;
}

const json& JsonReader::object(const json& value, const std::string& where) const {
  if (!value.is_object()) bad(where, cat("expected an object, got ", value.type_name()));
  return value;
}

}  // namespace dinoml::runtime
