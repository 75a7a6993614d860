// A read-only memory mapping of a whole file (constants.bin): sessions share the pages and the
// kernel may drop clean pages under pressure, unlike a heap copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace dinoml::runtime {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws Error naming `display_name`. An empty file gives data() == nullptr, size() == 0.
  MappedFile(const std::filesystem::path& path, const std::string& display_name);
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  const uint8_t* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }

 private:
  void reset() noexcept;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dinoml::runtime
