// Test fixture for the runtime: a tiny hand-written module.so (compiled with g++ on first use and
// cached in the build dir) plus the artifact files around it, written per test into a fresh
// temporary directory so tests can tamper with them freely.
//
// The fixture model:
//   dims    batch [1, 4] buckets {2, 4};  seq [2, 8] buckets {4, 8} divisible_by 2
//   inputs  x   float32 [batch, 4]        tok int32 [batch, seq]
//   outputs y   float32 [batch, 4]        = x * 2 (scale from lib/libfixture_scale.so) + c[col]
//           s   int64   [batch, seq / 2]  = tok[b, 2k] + tok[b, 2k + 1] + counter (before the run)
//   states  counter int64 [1], incremented by every run
//   constants.bin: c = {0.5, -1, 2, 0.25} (float32)
// plan reports arena = (upper bound of batch's bucket) * 4 floats; run uses it as scratch and
// fails with a message if x[0] is NaN (to test module errors).
#pragma once

#include <dinoml/runtime.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace dinoml_test {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct ModuleVariant {
  uint32_t module_abi_version = 1;
  std::string graph_hash = "fixture-graph-hash-v1";
  int scale = 2;  // returned by lib/libfixture_scale.so
};

inline const std::vector<float> kConstants = {0.5f, -1.0f, 2.0f, 0.25f};

std::string sha256_file(const fs::path& path);

class Artifact {
 public:
  fs::path dir;
  json manifest;
  json metadata;

  fs::path path(const std::string& rel) const { return dir / rel; }
  // Recomputes manifest "files" from every file in the directory, then writes manifest.json.
  void rehash_and_write_manifest();
  void write_manifest() const;  // as is, without rehashing
  void write_metadata(bool rehash = true);
  // Overwrites or appends bytes without touching the manifest (simulates tampering).
  void corrupt(const std::string& rel, size_t offset = 0) const;
};

// A complete, valid artifact in a new temporary directory.
Artifact make_artifact(const ModuleVariant& variant = {});

// RAII for C handles.
struct ModuleFree {
  void operator()(dinoml_module* m) const { dinoml_module_free(m); }
};
struct SessionFree {
  void operator()(dinoml_session* s) const { dinoml_session_free(s); }
};
using ModulePtr = std::unique_ptr<dinoml_module, ModuleFree>;
using SessionPtr = std::unique_ptr<dinoml_session, SessionFree>;

// Loads `dir`; returns the status and (on success) the module.
dinoml_status try_load(const fs::path& dir, ModulePtr& out);
ModulePtr load_ok(const fs::path& dir);
SessionPtr session_ok(dinoml_module* m);

// Deterministic fixture inputs and the expected outputs.
struct FixtureInputs {
  int64_t batch = 2;
  int64_t seq = 4;
  std::vector<float> x;
  std::vector<int32_t> tok;

  static FixtureInputs make(int64_t batch, int64_t seq, int seed = 0);
  dinoml_tensor x_tensor(bool named = true) const;
  dinoml_tensor tok_tensor(bool named = true) const;
  std::vector<float> expected_y() const;
  std::vector<int64_t> expected_s(int64_t counter) const;
};

std::string last_error();

}  // namespace dinoml_test

// gmock is not linked; a plain substring check with a readable failure message.
#define EXPECT_CONTAINS(haystack, needle)                                                    \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)                           \
      << "expected to find \"" << (needle) << "\" in: " << (haystack)

namespace dinoml_test {

}  // namespace dinoml_test
