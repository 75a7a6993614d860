// Typed field access for the artifact's JSON files. Every failure is DINOML_ERR_ARTIFACT and
// names the file and the key path, so a broken artifact points at the exact field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

namespace dinoml::runtime {

using json = nlohmann::json;

// Reads and parses a JSON file; missing file -> DINOML_ERR_NOT_FOUND, bad JSON -> ARTIFACT.
json read_json_file(const std::filesystem::path& path, const std::string& display_name);

class JsonReader {
 public:
  // `file` is the artifact-relative name shown in messages (e.g. "metadata.json").
  explicit JsonReader(std::string file) : file_(std::move(file)) {}

  const json& field(const json& obj, const char* key, const std::string& where) const;
  const json* optional_field(const json& obj, const char* key, const std::string& where) const;
  int64_t integer(const json& value, const std::string& where) const;
  std::string string(const json& value, const std::string& where) const;
  const json& array(const json& value, const std::string& where) const;
  const json& object(const json& value, const std::string& where) const;

  int64_t int_field(const json& obj, const char* key, const std::string& where) const {
    return integer(field(obj, key, where), where + "." + key);
  }
  std::string string_field(const json& obj, const char* key, const std::string& where) const {
    return string(field(obj, key, where), where + "." + key);
  }

  [[noreturn]] void bad(const std::string& where, const std::string& what) const;

 private:
  std::string file_;
};

}  // namespace dinoml::runtime
