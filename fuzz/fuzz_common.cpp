#include "fuzz_common.h"

#include <dinoml/compiler.hpp>
#include <openssl/evp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "builder/graph_builder.h"

namespace fs = std::filesystem;

namespace dinoml_fuzz {
namespace {

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return {p, p + v.size() * sizeof(float)};
}

void compile_template(const fs::path& dir) {
  using namespace dinoml;
  builder::GraphBuilder b("fuzz_model");
  b.add_dim(ir::Dim{"batch", 1, 4, 2, {2, 4}, 1});
  b.add_dim(ir::Dim{"seq", 2, 8, 4, {4, 8}, 2});
  auto batch = ir::IntExpr::dim("batch");
  auto seq = ir::IntExpr::dim("seq");
  b.input("x", ir::DType::f32, {batch, 8});
  b.input("z", ir::DType::f32, {batch, 6});
  b.input("t", ir::DType::f32, {batch, seq});
  std::vector<float> w(8 * 6), bias(6), step(8, 1.0f);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.5f * static_cast<float>(i);
  b.constant("w", ir::DType::f32, {8, 6}, f32_bytes(w));
  b.constant("bias", ir::DType::f32, {6}, f32_bytes(bias));
  b.constant("step", ir::DType::f32, {8}, f32_bytes(step));
  auto s = b.state("acc", ir::DType::f32, {8});
  auto g = b.op1("gemm_rrr_bias", {"x", "w", "bias"});
  b.output(b.op1("relu", {b.op1("add", {g, "z"})}), "y");
  b.output(b.op1("add", {"x", s}), "y2");
  b.output(b.op1("exp", {b.op1("neg", {"t"})}), "t2");
  b.op("state_assign", {s, b.op1("add", {s, "step"})});
  CompileOptions opts;
  fs::path tmp = dir.string() + ".tmp" + std::to_string(getpid());
  opts.out_dir = tmp.string();
  opts.use_cache = false;
  compile(b.finish(), opts);
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // atomic; a concurrent creator may have won, which is fine
  if (ec) {
    fs::remove_all(tmp);
    if (!fs::exists(dir / "manifest.json"))
      throw std::runtime_error("cannot move the artifact to " + dir.string() + ": " + ec.message());
  }
}

}  // namespace

const std::string& template_artifact() {
  static const std::string dir = [] {
    const char* env = std::getenv("DINOML_FUZZ_ARTIFACT");
    fs::path d = env && *env ? fs::path(env) : fs::path(DINOML_BINARY_DIR) / "fuzz_template_artifact";
    if (!fs::exists(d / "manifest.json")) {
      try {
        compile_template(d);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "fuzz: cannot compile the template artifact into %s: %s\n", d.c_str(), e.what());
        std::abort();
      }
    }
    return d.string();
  }();
  return dir;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_Digest(buf.data(), buf.size(), md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  return out;
}

const std::string& scratch_dir() {
  static const std::string dir = [] {
    fs::path d = fs::temp_directory_path() / ("dinoml_fuzz_" + std::to_string(getpid()));
    fs::create_directories(d);
    return d.string();
  }();
  return dir;
}

}  // namespace dinoml_fuzz
