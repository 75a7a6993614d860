// Concurrency stress (issue 8): several compiled models, many threads, sessions created and
// destroyed in a loop, for a bounded time; every output must be bit-identical to a
// single-threaded run of the same sequence. Runs under scripts/sanitize tsan (races) and asan
// (leaks across the create/destroy loop).
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dinoml/compiler.hpp>
#include <dinoml/runtime.hpp>

#include "builder/graph_builder.h"
#include "ir/graph.h"
#include "graph_helpers.h"

using namespace dinoml;
using ir::DType;
using ir::IntExpr;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> random_f32(size_t n, uint32_t seed) { return test::uniform_f32_bytes(n, seed, -1.0f, 1.0f); }


// MLP large enough that the GEMMs take the multi-threaded (OpenMP) path at the larger buckets.
ir::Graph mlp() {
  builder::GraphBuilder b("stress_mlp");
  b.add_dim(test::make_dim("batch", 1, 64, {8, 64}));
  auto x = b.input("x", DType::f32, {IntExpr::dim("batch"), 128});
  auto w1 = b.constant("w1", DType::f32, {256, 128}, random_f32(256 * 128, 1));
  auto b1 = b.constant("b1", DType::f32, {256}, random_f32(256, 2));
  auto w2 = b.constant("w2", DType::f32, {64, 256}, random_f32(64 * 256, 3));
  auto h = b.op1("gemm_rcr_bias_relu", {x, w1, b1});
  b.output(b.op1("tanh", {b.op1("gemm_rcr", {h, w2})}), "y");
  return b.finish();
}

// Attention core: scores = q k^T, softmax, layer_norm of the result; two outputs.
ir::Graph attention() {
  builder::GraphBuilder b("stress_attention");
  b.add_dim(test::make_dim("seq", 1, 48, {16, 48}));
  auto q = b.input("q", DType::f32, {4, IntExpr::dim("seq"), 32});
  auto k = b.input("k", DType::f32, {4, IntExpr::dim("seq"), 32});
  auto s = b.op1("bmm_rcr", {q, k});
  auto p = b.op1("softmax", {s}, {{"axis", ir::AttrValue(int64_t{-1})}});
  b.output(p, "probs");
  b.output(b.op1("layer_norm", {b.op1("bmm_rrr", {p, q})}), "ctx");
  return b.finish();
}

// Stateful: each run adds x to an accumulator state and returns the old value times x.
ir::Graph accumulator() {
  builder::GraphBuilder b("stress_state");
  auto x = b.input("x", DType::f32, {16, 16});
  auto s = b.state("acc", DType::f32, {16, 16});
  b.op("state_assign", {s, b.op1("add", {s, x})});
  b.output(b.op1("mul", {s, b.op1("sigmoid", {x})}), "y");
  return b.finish();
}

struct Case {
  std::vector<std::vector<uint8_t>> data;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::string> names;
  std::vector<rt::Input> inputs() const {
    std::vector<rt::Input> in;
    for (size_t i = 0; i < data.size(); ++i)
      in.emplace_back(names[i], DINOML_FLOAT32, shapes[i], data[i].data(), data[i].size());
    return in;
  }
};

struct Model {
  rt::Module module;
  std::vector<Case> cases;
  std::vector<std::vector<uint8_t>> reference;  // one entry per case: all outputs' bytes
};

std::vector<uint8_t> run_case(rt::Session& s, const Case& c) {
  std::vector<uint8_t> bytes;
  for (const rt::OwnedTensor& t : s.run(c.inputs())) bytes.insert(bytes.end(), t.bytes.begin(), t.bytes.end());
  return bytes;
}

Case make_case(const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs, uint32_t seed) {
  Case c;
  for (const auto& [name, shape] : specs) {
    size_t n = 1;
    for (int64_t e : shape) n *= static_cast<size_t>(e);
    c.names.push_back(name);
    c.shapes.push_back(shape);
    c.data.push_back(random_f32(n, seed++));
  }
  return c;
}

fs::path compile_to(const ir::Graph& g, const fs::path& root) {
  CompileOptions o;
  o.out_dir = (root / g.name).string();
  o.progress = false;
  return compile(g, o).artifact_dir;
}

double stress_seconds() {
  const char* s = std::getenv("DINOML_STRESS_SECONDS");
  return s ? std::atof(s) : 3.0;
}

}  // namespace

TEST(Stress, ManySessionsOfSeveralModelsFromManyThreadsAreBitIdentical) {
  const fs::path root = fs::temp_directory_path() / ("dinoml_stress_" + std::to_string(::getpid()));
  fs::remove_all(root);
  std::vector<Model> models;
  {
    rt::Module m = rt::Module::load(compile_to(mlp(), root).string());
    Model md{m, {}, {}};
    for (int64_t b : {1, 5, 8, 33, 64}) md.cases.push_back(make_case({{"x", {b, 128}}}, 100 + b));
    models.push_back(std::move(md));
  }
  {
    rt::Module m = rt::Module::load(compile_to(attention(), root).string());
    Model md{m, {}, {}};
    for (int64_t s : {1, 7, 16, 30, 48}) md.cases.push_back(make_case({{"q", {4, s, 32}}, {"k", {4, s, 32}}}, 200 + s));
    models.push_back(std::move(md));
  }
  {
    rt::Module m = rt::Module::load(compile_to(accumulator(), root).string());
    Model md{m, {}, {}};
    for (int i = 0; i < 5; ++i) md.cases.push_back(make_case({{"x", {16, 16}}}, 300 + i));
    models.push_back(std::move(md));
  }
  // Single-threaded reference: one fresh session per model, the case sequence in order (the
  // accumulator's outputs depend on the order through its state).
  for (Model& md : models) {
    rt::Session s(md.module);
    for (const Case& c : md.cases) md.reference.push_back(run_case(s, c));
  }

  const unsigned kThreads = 8;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds());
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<int> rounds(kThreads, 0);
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (unsigned r = 0; r == 0 || std::chrono::steady_clock::now() < deadline; ++r) {
          Model& md = models[(t + r) % models.size()];
          rt::Session s(md.module);  // created and destroyed every round
          for (size_t i = 0; i < md.cases.size(); ++i)
            if (run_case(s, md.cases[i]) != md.reference[i]) ++mismatches;
          ++rounds[t];
        }
      } catch (const std::exception& e) {
        ++errors;
        first_error[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  fs::remove_all(root);
  int total = 0;
  for (unsigned t = 0; t < kThreads; ++t) {
    EXPECT_GE(rounds[t], 1) << "thread " << t << ": " << first_error[t];
    total += rounds[t];
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "outputs differ from the single-threaded runs";
  std::printf("[stress] %u threads, %d session rounds (%zu models), %.1f s\n", kThreads, total, models.size(),
              stress_seconds());
}
