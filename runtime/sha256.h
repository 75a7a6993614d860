// SHA-256 through OpenSSL's EVP interface (lowercase hex digests, as manifest.json stores them).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace dinoml::runtime {

std::string sha256_hex(const void* data, size_t size);
// Streams the file; throws Error(DINOML_ERR_NOT_FOUND) when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path, const std::string& display_name);

}  // namespace dinoml::runtime
