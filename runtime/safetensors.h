// The safetensors weight format (Hugging Face's): an 8-byte little-endian header length N, N bytes
// of JSON {name: {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the raw little-endian tensor bytes (offsets relative to the end of the header).
// Read through a read-only mapping and checked completely before any byte is used: header length
// inside the file, JSON, every entry's dtype (one DinoML runs), shape, offsets inside the data and
// matching dtype x shape, no two tensors overlapping. Every failure names the file and the tensor.
#pragma once

#include <dinoml/runtime.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "mapped_file.h"

namespace dinoml::runtime {

struct SafetensorsEntry {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and checks `path`. Throws Error: NOT_FOUND (cannot open), INVALID_ARGUMENT (malformed).
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::string& path() const noexcept { return path_; }
  const std::vector<SafetensorsEntry>& entries() const noexcept { return entries_; }
  const SafetensorsEntry* find(const std::string& name) const;
  const uint8_t* data(const SafetensorsEntry& e) const noexcept { return data_ + e.begin; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }

 private:
  std::string path_;
  MappedFile file_;
  const uint8_t* data_ = nullptr;
  std::vector<SafetensorsEntry> entries_;  // sorted by name
  std::map<std::string, std::string> metadata_;
};

// One tensor to write.
struct SafetensorsTensor {
  std::string name;
  dinoml_dtype dtype = DINOML_FLOAT32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// Writes a safetensors file (tensors in the order given, packed without gaps; the header padded
// with spaces to a multiple of 8 bytes as the reference writer does). Written to PATH.tmp and
// renamed, so a reader never sees half a file.
void write_safetensors(const std::filesystem::path& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// "F32", "BF16", ... for a DinoML dtype.
const char* safetensors_dtype_name(dinoml_dtype dtype) noexcept;

}  // namespace dinoml::runtime
