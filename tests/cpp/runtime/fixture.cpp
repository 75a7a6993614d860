#include "fixture.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

namespace dinoml_test {
namespace {

// The fixture module, written against include/dinoml/module_abi.h like generated code would be.
const char* const kModuleSource = R"CPP(
#include <dinoml/module_abi.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

extern "C" float fixture_scale(void);  // lib/libfixture_scale.so, found through $ORIGIN/lib

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {
struct ModuleState {
  const float* c;
};
int64_t bucket_upper(int64_t v, const int64_t* buckets, int n) {
  for (int i = 0; i < n; ++i)
    if (v <= buckets[i]) return buckets[i];
  return -1;
}
const int64_t kBatchBuckets[] = {2, 4};
}  // namespace

EXPORT uint32_t dinoml_module_abi_version(void) { return FIXTURE_ABI; }
EXPORT const char* dinoml_module_graph_hash(void) { return FIXTURE_HASH; }

EXPORT int dinoml_module_init(const uint8_t* constants, size_t size, void** state, char* err, size_t errlen) {
  if (!constants || size < 4 * sizeof(float)) {
    std::snprintf(err, errlen, "constants.bin holds %zu bytes, expected 16", size);
    return 1;
  }
  ModuleState* s = new (std::nothrow) ModuleState{reinterpret_cast<const float*>(constants)};
  if (!s) {
    std::snprintf(err, errlen, "out of memory");
    return 1;
  }
  *state = s;
  return 0;
}

EXPORT void dinoml_module_release(void* state) { delete static_cast<ModuleState*>(state); }

EXPORT int dinoml_module_plan(const int64_t* dims, size_t* arena, int64_t* shapes, char* err, size_t errlen) {
  int64_t ub = bucket_upper(dims[0], kBatchBuckets, 2);
  if (ub < 0) {
    std::snprintf(err, errlen, "batch %lld outside every bucket", (long long)dims[0]);
    return 1;
  }
  *arena = static_cast<size_t>(ub) * 4 * sizeof(float);
  shapes[0] = dims[0];
  shapes[1] = 4;
  shapes[8] = dims[0];
  shapes[9] = dims[1] / 2;
  return 0;
}

EXPORT int dinoml_module_run(void* state, const int64_t* dims, const void* const* inputs, void* const* outputs,
                             void* const* states, void* arena, char* err, size_t errlen) {
  const ModuleState* ms = static_cast<const ModuleState*>(state);
  const int64_t batch = dims[0], seq = dims[1];
  const float* x = static_cast<const float*>(inputs[0]);
  const int32_t* tok = static_cast<const int32_t*>(inputs[1]);
  float* y = static_cast<float*>(outputs[0]);
  int64_t* s = static_cast<int64_t*>(outputs[1]);
  int64_t* counter = static_cast<int64_t*>(states[0]);
  if (reinterpret_cast<uintptr_t>(arena) % 64 != 0) {
    std::snprintf(err, errlen, "arena is not 64-byte aligned");
    return 1;
  }
  if (batch > 0 && std::isnan(x[0])) {
    std::snprintf(err, errlen, "x[0] is NaN");
    return 2;
  }
  float* scratch = static_cast<float*>(arena);
  const float scale = fixture_scale();
  for (int64_t i = 0; i < batch * 4; ++i) scratch[i] = x[i] * scale;
  for (int64_t i = 0; i < batch * 4; ++i) y[i] = scratch[i] + ms->c[i % 4];
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < seq / 2; ++k)
      s[b * (seq / 2) + k] = int64_t{tok[b * seq + 2 * k]} + tok[b * seq + 2 * k + 1] + counter[0];
  counter[0] += 1;
  return 0;
}
)CPP";

const char* const kScaleSource = R"CPP(
extern "C" __attribute__((visibility("default"))) float fixture_scale(void) { return FIXTURE_SCALE; }
)CPP";

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void run_or_throw(const std::string& cmd) {
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("command failed: " + cmd);
}

std::string quote(const fs::path& p) {
  std::string q = "'";  // built with += : `"'" + string` trips a GCC 12 -Wrestrict false positive
  q += p.string();
  q += "'";
  return q;
}

// Builds (once per variant and source) module.so + lib/libfixture_scale.so; concurrent test
// processes race benignly: each builds in its own temp dir and renames into place.
fs::path module_template(const ModuleVariant& v) {
  std::ostringstream defines;
  defines << "-DFIXTURE_ABI=" << v.module_abi_version << "u -DFIXTURE_HASH='\"" << v.graph_hash << "\"'"
          << " -DFIXTURE_SCALE=" << v.scale << ".0f";
  std::ifstream abi_header(fs::path(DINOML_SOURCE_DIR) / "include/dinoml/module_abi.h");
  std::stringstream header;
  header << abi_header.rdbuf();
  const size_t key = std::hash<std::string>{}(std::string(kModuleSource) + kScaleSource + defines.str() + header.str());
  const fs::path root = fs::path(DINOML_BINARY_DIR) / "runtime_test_fixture";
  const fs::path dir = root / std::to_string(key);
  if (fs::exists(dir / "module.so")) return dir;

  const fs::path tmp = root / ("tmp-" + std::to_string(::getpid()) + "-" + std::to_string(key));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "lib");
  try {
    write_text(tmp / "src/module.cpp", kModuleSource);
    write_text(tmp / "src/scale.cpp", kScaleSource);
    const std::string include = quote(fs::path(DINOML_SOURCE_DIR) / "include");
    run_or_throw("g++ -O1 -shared -fPIC " + defines.str() + " " + quote(tmp / "src/scale.cpp") + " -o " +
                 quote(tmp / "lib/libfixture_scale.so"));
    run_or_throw("g++ -O1 -shared -fPIC -I" + include + " " + defines.str() + " " + quote(tmp / "src/module.cpp") +
                 " -o " + quote(tmp / "module.so") + " -L" + quote(tmp / "lib") +
                 " -lfixture_scale -Wl,-rpath,'$ORIGIN/lib'");
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
  fs::remove_all(tmp / "src");
  std::error_code ec;
  fs::rename(tmp, dir, ec);
  if (ec) fs::remove_all(tmp);  // another process won the race
  return dir;
}

json fixture_metadata() {
  return json::parse(R"JSON({
    "dims": [
      {"name": "batch", "min": 1, "max": 4, "typical": 2, "buckets": [2, 4], "divisible_by": 1},
      {"name": "seq", "min": 2, "max": 8, "typical": 4, "buckets": [4, 8], "divisible_by": 2}],
    "inputs": [
      {"name": "x", "dtype": "float32", "shape": ["batch", 4]},
      {"name": "tok", "dtype": "int32", "shape": ["batch", "seq"]}],
    "outputs": [
      {"name": "y", "dtype": "float32", "shape": ["batch", 4]},
      {"name": "s", "dtype": "int64", "shape": ["batch", {"op": "div", "lhs": "seq", "rhs": 2}]}],
    "states": [{"name": "counter", "dtype": "int64", "shape": [1], "nbytes": 8}],
    "memory_plan": {"alignment": 64, "sum_intermediate_bytes": 64, "buckets": []}
  })JSON");
}

fs::path test_root() {
  static const fs::path root = [] {
    fs::path r = fs::temp_directory_path() / ("dinoml_runtime_tests_" + std::to_string(::getpid()));
    fs::remove_all(r);
    fs::create_directories(r);
    return r;
  }();
  return root;
}

class CleanupEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("dinoml_runtime_tests_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup = ::testing::AddGlobalTestEnvironment(new CleanupEnvironment);

}  // namespace

std::string sha256_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), digest, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

void Artifact::write_manifest() const { write_text(dir / "manifest.json", manifest.dump(2)); }

void Artifact::rehash_and_write_manifest() {
  json files = json::object();
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::string rel = entry.path().lexically_relative(dir).generic_string();
    if (rel == "manifest.json") continue;
    files[rel] = sha256_file(entry.path());
  }
  manifest["files"] = files;
  write_manifest();
}

void Artifact::write_metadata(bool rehash) {
  write_text(dir / "metadata.json", metadata.dump(2));
  if (rehash) rehash_and_write_manifest();
}

void Artifact::corrupt(const std::string& rel, size_t offset) const {
  std::fstream f(dir / rel, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  f.clear();
  f.seekp(static_cast<std::streamoff>(offset));
  c = static_cast<char>(c ^ 0x5a);
  f.write(&c, 1);
}

Artifact make_artifact(const ModuleVariant& variant) {
  static std::atomic<int> counter{0};
  const fs::path tmpl = module_template(variant);
  Artifact a;
  a.dir = test_root() / ("artifact_" + std::to_string(counter++));
  fs::create_directories(a.dir);
  fs::copy(tmpl, a.dir, fs::copy_options::recursive);
  {
    std::ofstream out(a.dir / "constants.bin", std::ios::binary);
    out.write(reinterpret_cast<const char*>(kConstants.data()), static_cast<std::streamsize>(kConstants.size() * sizeof(float)));
  }
  write_text(a.dir / "graph.dinoir.json", R"({"schema_version":1,"name":"fixture"})");
  a.metadata = fixture_metadata();
  write_text(a.dir / "metadata.json", a.metadata.dump(2));
  a.manifest = {{"artifact_schema_version", 1},
                {"runtime_abi_version", DINOML_RUNTIME_ABI_VERSION},
                {"module_abi_version", 1},
                {"name", "fixture"},
                {"target", "cpu"},
                {"arch", "x86_64"},
                {"required_isa", json::array()},
                {"graph_hash", "fixture-graph-hash-v1"},
                {"toolchain", {{"cxx", "g++"}}}};
  a.rehash_and_write_manifest();
  return a;
}

dinoml_status try_load(const fs::path& dir, ModulePtr& out) {
  dinoml_module* m = nullptr;
  dinoml_status st = dinoml_module_load(dir.c_str(), &m);
  out.reset(m);
  return st;
}

ModulePtr load_ok(const fs::path& dir) {
  ModulePtr m;
  dinoml_status st = try_load(dir, m);
  EXPECT_EQ(st, DINOML_OK) << dinoml_last_error();
  return m;
}

SessionPtr session_ok(dinoml_module* m) {
  dinoml_session* s = nullptr;
  EXPECT_EQ(dinoml_session_create(m, &s), DINOML_OK) << dinoml_last_error();
  return SessionPtr(s);
}

FixtureInputs FixtureInputs::make(int64_t batch, int64_t seq, int seed) {
  FixtureInputs in;
  in.batch = batch;
  in.seq = seq;
  for (int64_t i = 0; i < batch * 4; ++i) in.x.push_back(static_cast<float>((i * 7 + seed) % 13) * 0.5f - 3.0f);
  for (int64_t i = 0; i < batch * seq; ++i) in.tok.push_back(static_cast<int32_t>((i * 5 + seed) % 11) - 4);
  return in;
}

// A host tensor [rows, cols] over `v`'s elements (unnamed: bound by position).
template <typename T>
static dinoml_tensor tensor_2d(const char* name, const std::vector<T>& v, dinoml_dtype dtype, int64_t rows, int64_t cols) {
  dinoml_tensor t{};
  t.name = name;
  t.data = const_cast<T*>(v.data());
  t.nbytes = v.size() * sizeof(T);
  t.dtype = dtype;
  t.ndim = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  return t;
}

dinoml_tensor FixtureInputs::x_tensor(bool named) const {
  return tensor_2d(named ? "x" : nullptr, x, DINOML_FLOAT32, batch, 4);
}

dinoml_tensor FixtureInputs::tok_tensor(bool named) const {
  return tensor_2d(named ? "tok" : nullptr, tok, DINOML_INT32, batch, seq);
}

std::vector<float> FixtureInputs::expected_y() const {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * 2.0f + kConstants[i % 4];
  return y;
}

std::vector<int64_t> FixtureInputs::expected_s(int64_t counter) const {
  std::vector<int64_t> s;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t k = 0; k < seq / 2; ++k) s.push_back(int64_t{tok[b * seq + 2 * k]} + tok[b * seq + 2 * k + 1] + counter);
  return s;
}

std::string last_error() { return dinoml_last_error(); }

}  // namespace dinoml_test
