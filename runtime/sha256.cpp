#include "sha256.h"

#include "errors.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <memory>
#include <vector>

namespace dinoml::runtime {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const noexcept { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

MdCtx new_sha256() {
  MdCtx ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    fail(DINOML_ERR_RUNTIME, "OpenSSL could not initialise SHA-256");
  }
  return ctx;
}

void update(EVP_MD_CTX* ctx, const void* data, size_t size) {
  if (size && EVP_DigestUpdate(ctx, data, size) != 1) fail(DINOML_ERR_RUNTIME, "OpenSSL SHA-256 update failed");
}

std::string finish(EVP_MD_CTX* ctx) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(ctx, digest.data(), &length) != 1) fail(DINOML_ERR_RUNTIME, "OpenSSL SHA-256 final failed");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  MdCtx ctx = new_sha256();
  update(ctx.get(), data, size);
  return finish(ctx.get());
}

std::string sha256_file_hex(const std::filesystem::path& path, const std::string& display_name) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    fail(DINOML_ERR_NOT_FOUND, "cannot read ", display_name, " (", path.string(), ")");
  }
  MdCtx ctx = new_sha256();
  std::vector<unsigned char> chunk(1 << 20);
  for (;;) {
    size_t got = std::fread(chunk.data(), 1, chunk.size(), file.get());
    update(ctx.get(), chunk.data(), got);
    if (got < chunk.size()) {
      if (std::ferror(file.get())) fail(DINOML_ERR_ARTIFACT, "I/O error while reading ", display_name, " (", path.string(), ")");
      break;
    }
  }
  return finish(ctx.get());
}

}  // namespace dinoml::runtime
