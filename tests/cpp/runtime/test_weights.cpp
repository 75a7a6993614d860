// Weights without recompiling (runtime/weights.h, runtime/safetensors.h): set_constants checks and
// swaps, swaps under concurrent runs (no torn reads), safetensors files (load, swap, export) and a
// clear error for every malformed file. The fixture module reads its one constant `c` (float32[4])
// in every run: y = 2 x + c[col].
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "fixture.h"

namespace dinoml_test {
namespace {

const std::vector<float> kB = {10.0f, 20.0f, -30.0f, 40.5f};

// The fixture artifact with graph.dinoir.json describing its constant and metadata "weights".
Artifact weights_artifact(const std::string& policy, const json& swappable = json::array({"c"}),
                          const json& folded = json::array()) {
  Artifact a = make_artifact();
  json graph = {{"schema_version", 1},
                {"name", "fixture"},
                {"constants_file", "constants.bin"},
                {"tensors",
                 {{{"name", "c"}, {"dtype", "float32"}, {"shape", {4}}, {"kind", "constant"},
                   {"constant", {{"offset", 0}, {"nbytes", 16}}}}}}};
  std::ofstream(a.path("graph.dinoir.json")) << graph.dump(1);
  a.metadata["constants_bytes"] = 16;
  a.metadata["weights"] = {{"policy", policy}, {"swappable", swappable}, {"folded", folded}};
  if (policy == "external") fs::remove(a.path("constants.bin"));
  a.write_metadata();
  return a;
}

std::vector<float> expected(const FixtureInputs& in, const std::vector<float>& c) {
  std::vector<float> y(in.x.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = in.x[i] * 2.0f + c[i % 4];
  return y;
}

std::vector<float> run_y(dinoml_session* s, const FixtureInputs& in) {
  dinoml_tensor ins[2] = {in.x_tensor(), in.tok_tensor()};
  dinoml_tensor out{};
  out.name = "y";
  EXPECT_EQ(dinoml_session_run(s, ins, 2, &out, 1), DINOML_OK) << last_error();
  const float* p = static_cast<const float*>(out.data);
  return std::vector<float>(p, p + out.nbytes / sizeof(float));
}

dinoml_tensor constant(const char* name, const std::vector<float>& v, std::vector<int64_t> shape = {4},
                       dinoml_dtype dt = DINOML_FLOAT32) {
  dinoml_tensor t{};
  t.name = name;
  t.data = const_cast<float*>(v.data());
  t.nbytes = v.size() * sizeof(float);
  t.dtype = dt;
  t.ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

void write_bytes(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// A safetensors file with one header (padded to 8 bytes) and `data`.
std::string safetensors(const json& header, const std::string& data) {
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(h.size()) >> (8 * i));
  return out + h + data;
}

std::string floats(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

TEST(Weights, SetConstantsSwapsAndRerunsSeeTheNewValues) {
  Artifact a = weights_artifact("swappable");
  ModulePtr m = load_ok(a.dir);
  EXPECT_STREQ(dinoml_module_weights_policy(m.get()), "swappable");
  ASSERT_EQ(dinoml_module_num_constants(m.get()), 1u);
  dinoml_constant_info info{};
  ASSERT_EQ(dinoml_module_constant_info(m.get(), 0, &info), DINOML_OK);
  EXPECT_STREQ(info.name, "c");
  EXPECT_EQ(info.swappable, 1);
  EXPECT_EQ(info.nbytes, 16u);
  SessionPtr s = session_ok(m.get());
  FixtureInputs in = FixtureInputs::make(2, 4);
  EXPECT_EQ(run_y(s.get(), in), expected(in, kConstants));
  dinoml_tensor c = constant("c", kB);
  ASSERT_EQ(dinoml_module_set_constants(m.get(), &c, 1), DINOML_OK) << last_error();
  EXPECT_EQ(run_y(s.get(), in), expected(in, kB));
  SessionPtr s2 = session_ok(m.get());  // a session made after the swap sees it too
  EXPECT_EQ(run_y(s2.get(), in), expected(in, kB));
  std::vector<float> got(4);
  ASSERT_EQ(dinoml_module_get_constant(m.get(), "c", got.data(), 16), DINOML_OK);
  EXPECT_EQ(got, kB);
}

TEST(Weights, SetConstantsRefusesWrongNamesTypesAndSizes) {
  Artifact a = weights_artifact("swappable");
  ModulePtr m = load_ok(a.dir);
  dinoml_tensor t = constant("nope", kB);
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_NOT_FOUND);
  EXPECT_CONTAINS(last_error(), "has no constant 'nope'");
  EXPECT_CONTAINS(last_error(), "'c'");
  t = constant("c", kB, {2, 2});
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "constant 'c' is float32[4]");
  EXPECT_CONTAINS(last_error(), "float32[2, 2]");
  t = constant("c", kB, {4}, DINOML_INT32);
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "int32[4]");
  t = constant("c", kB);
  t.nbytes = 12;
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "needs 16 bytes");
  dinoml_tensor twice[2] = {constant("c", kB), constant("c", kB)};
  EXPECT_EQ(dinoml_module_set_constants(m.get(), twice, 2), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "given twice");
  // Nothing changed.
  std::vector<float> got(4);
  ASSERT_EQ(dinoml_module_get_constant(m.get(), "c", got.data(), 16), DINOML_OK);
  EXPECT_EQ(got, kConstants);
}

TEST(Weights, FoldedAndOldArtifactsSayWhy) {
  Artifact a = weights_artifact("embedded", json::array(), json::array({"w_before_folding"}));
  ModulePtr m = load_ok(a.dir);
  dinoml_tensor t = constant("w_before_folding", kB);
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "folded");
  EXPECT_CONTAINS(last_error(), "--weights swappable");
  t = constant("c", kB);  // in the graph, but created by folding (not in the swappable list)
  EXPECT_EQ(dinoml_module_set_constants(m.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "computed at compile time");

  Artifact old = make_artifact();  // no metadata "weights": compiled before swapping existed
  ModulePtr mo = load_ok(old.dir);
  EXPECT_EQ(dinoml_module_set_constants(mo.get(), &t, 1), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "recompile");
}

// 8 threads run continuously while the weights flip between A and B: every output is exactly A's
// or B's (never a mix), and once the last swap returned every new run sees its weights.
TEST(Weights, SwapIsAtomicForRunningSessions) {
  Artifact a = weights_artifact("swappable");
  ModulePtr m = load_ok(a.dir);
  FixtureInputs in = FixtureInputs::make(4, 8);
  const std::vector<float> ya = expected(in, kConstants), yb = expected(in, kB);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      SessionPtr s = session_ok(m.get());
      while (!stop.load()) {
        std::vector<float> y = run_y(s.get(), in);
        if (y != ya && y != yb) ++bad;
        ++runs;
      }
    });
  // At least 200 swaps, and on until the runners have done some runs between them (on a loaded
  // 2-core machine 200 swaps can end before a thread got scheduled); then a last swap to A.
  for (int i = 0; i < 200 || (runs.load() < 64 && i < 2000000); ++i) {
    dinoml_tensor c = constant("c", i % 2 ? kConstants : kB);
    ASSERT_EQ(dinoml_module_set_constants(m.get(), &c, 1), DINOML_OK) << last_error();
    if (i >= 200) std::this_thread::yield();
  }
  dinoml_tensor last = constant("c", kConstants);
  ASSERT_EQ(dinoml_module_set_constants(m.get(), &last, 1), DINOML_OK) << last_error();
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GE(runs.load(), 64);
  SessionPtr s = session_ok(m.get());
  EXPECT_EQ(run_y(s.get(), in), ya);  // the last swap set A
}

TEST(Weights, SafetensorsExportSwapAndExternalLoad) {
  Artifact a = weights_artifact("swappable");
  const fs::path exported = a.dir.parent_path() / (a.dir.filename().string() + ".safetensors");
  ASSERT_EQ(dinoml_artifact_export_weights(a.dir.c_str(), exported.c_str()), DINOML_OK) << last_error();
  const fs::path fb = a.dir.parent_path() / (a.dir.filename().string() + "_b.safetensors");
  write_bytes(fb, safetensors({{"c", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}}, floats(kB)));

  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  FixtureInputs in = FixtureInputs::make(2, 4);
  ASSERT_EQ(dinoml_module_set_weights_file(m.get(), fb.c_str()), DINOML_OK) << last_error();
  EXPECT_EQ(run_y(s.get(), in), expected(in, kB));
  ASSERT_EQ(dinoml_module_set_weights_file(m.get(), exported.c_str()), DINOML_OK) << last_error();
  EXPECT_EQ(run_y(s.get(), in), expected(in, kConstants));

  Artifact ext = weights_artifact("external");
  ModulePtr none;
  EXPECT_EQ(try_load(ext.dir, none), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "--weights external");
  dinoml_module* raw = nullptr;
  ASSERT_EQ(dinoml_module_load_with_weights(ext.dir.c_str(), fb.c_str(), &raw), DINOML_OK) << last_error();
  ModulePtr me(raw);
  SessionPtr se = session_ok(me.get());
  EXPECT_EQ(run_y(se.get(), in), expected(in, kB));
  const fs::path roundtrip = a.dir.parent_path() / (a.dir.filename().string() + "_rt.safetensors");
  ASSERT_EQ(dinoml_module_export_weights(me.get(), roundtrip.c_str()), DINOML_OK) << last_error();
  dinoml_module* raw2 = nullptr;
  ASSERT_EQ(dinoml_module_load_with_weights(ext.dir.c_str(), roundtrip.c_str(), &raw2), DINOML_OK) << last_error();
  ModulePtr me2(raw2);
  SessionPtr se2 = session_ok(me2.get());
  EXPECT_EQ(run_y(se2.get(), in), expected(in, kB));
}

TEST(Weights, MalformedSafetensorsFilesGiveClearErrors) {
  Artifact ext = weights_artifact("external");
  const fs::path f = ext.dir.parent_path() / (ext.dir.filename().string() + "_bad.safetensors");
  const json good = {{"c", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}};
  const std::string full = safetensors(good, floats(kB));
  struct Case {
    std::string what, bytes, message;
  };
  std::string huge_len = full;
  huge_len[0] = '\xff', huge_len[1] = '\xff', huge_len[2] = '\x00', huge_len[3] = '\x01';
  const std::vector<Case> cases = {
      {"truncated length", full.substr(0, 5), "8-byte header length"},
      {"header past the end", huge_len, "header"},
      {"truncated data", full.substr(0, full.size() - 4), "reach past the end of the data"},
      {"bad json", safetensors(json("x"), "").replace(8, 3, "{\"c"), "not valid JSON"},
      {"not an object", safetensors(json::array({1, 2}), ""), "not an object"},
      {"unknown dtype", safetensors({{"c", {{"dtype", "F64"}, {"shape", {2}}, {"data_offsets", {0, 16}}}}}, floats(kB)),
       "dtype 'F64'"},
      {"size mismatch", safetensors({{"c", {{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 16}}}}}, floats(kB)),
       "needs 12 bytes"},
      {"offsets out of bounds", safetensors({{"c", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {8, 24}}}}}, floats(kB)),
       "reach past the end"},
      {"wrong dtype", safetensors({{"c", {{"dtype", "I32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}}}, floats(kB)),
       "constant 'c' is float32[4]"},
      {"wrong shape", safetensors({{"c", {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}}}}, floats(kB)),
       "float32[2, 2]"},
      {"missing constant", safetensors(json::object(), ""), "lacks 1 constant(s)"},
      {"extra tensor", safetensors({{"c", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                                    {"d", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {16, 20}}}}},
                                   floats(kB) + floats({1.0f})),
       "does not have: 'd'"},
      {"overlap", safetensors({{"c", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
                               {"d", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {12, 16}}}}},
                              floats(kB)),
       "overlap"},
  };
  for (const auto& c : cases) {
    write_bytes(f, c.bytes);
    dinoml_module* raw = nullptr;
    dinoml_status st = dinoml_module_load_with_weights(ext.dir.c_str(), f.c_str(), &raw);
    EXPECT_EQ(st, DINOML_ERR_INVALID_ARGUMENT) << c.what;
    EXPECT_EQ(raw, nullptr) << c.what;
    EXPECT_CONTAINS(last_error(), c.message) << c.what;
    if (raw) dinoml_module_free(raw);
  }
  dinoml_module* raw = nullptr;
  EXPECT_EQ(dinoml_module_load_with_weights(ext.dir.c_str(), (f.string() + ".missing").c_str(), &raw), DINOML_ERR_NOT_FOUND);
  EXPECT_CONTAINS(last_error(), "does not exist");
}

}  // namespace
}  // namespace dinoml_test
