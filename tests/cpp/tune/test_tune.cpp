// Kernel selection: statistics and the tie-break rule, the candidate dispatch the lowering
// emits, execution plan validation, the SQLite profile cache, and `compile --profile` end to end
// (plan file, cache hit on the second profile, plan reuse, --strict).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include <dinoml/compiler.hpp>

#include "builder/graph_builder.h"
#include "ir/error.h"
#include "lower/cpu/candidates.h"
#include "lower/cpu/lower_cpu.h"
#include "passes/pipeline.h"
#include "passes/plan_memory.h"
#include "tune/execution_plan.h"
#include "tune/profile_cache.h"
#include "tune/stats.h"
#include "graph_helpers.h"

using namespace dinoml;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> random_f32(size_t n, uint32_t seed) { return test::uniform_f32_bytes(n, seed, -1.f, 1.f); }

// x[batch, 24] -> gemm_rcr_bias_relu -> softmax -> gemm_rrr, batch in buckets {2, 16}.
ir::Graph small_model(bool optimize = true) {
  builder::GraphBuilder b("tune_mlp");
  test::add_dim(b, "batch", 1, 16, {2, 16});
  auto x = b.input("x", ir::DType::f32, {ir::IntExpr::dim("batch"), 24});
  auto w1 = b.constant("w1", ir::DType::f32, {40, 24}, random_f32(40 * 24, 1));
  auto b1 = b.constant("b1", ir::DType::f32, {40}, random_f32(40, 2));
  auto w2 = b.constant("w2", ir::DType::f32, {40, 8}, random_f32(40 * 8, 3));
  auto h = b.op1("gemm_rcr_bias_relu", {x, w1, b1});
  auto s = b.op1("softmax", {h}, {{"axis", ir::AttrValue(int64_t{-1})}});
  b.output(b.op1("gemm_rrr", {s, w2}), "y");
  ir::Graph g = b.finish();
  if (optimize) passes::run_pipeline(g, {});  // dinoml::compile runs the pipeline itself
  return g;
}

struct TempDir {
  fs::path p = fs::temp_directory_path() / ("dinoml_tune_test_" + std::to_string(getpid()) + "_" +
                                            std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { fs::create_directories(p); }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
};

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

std::string gemm_node(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (n.op.rfind("gemm_rcr", 0) == 0) return n.name;
  return "";
}

}  // namespace

TEST(TuneStats, MedianAndInterval) {
  auto m = tune::summarize({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(m.median_s, 3);
  EXPECT_EQ(m.reps, 5);
  EXPECT_LE(m.ci_low_s, 3);
  EXPECT_GE(m.ci_high_s, 3);
  std::vector<double> many;
  for (int i = 1; i <= 101; ++i) many.push_back(i);
  auto w = tune::summarize(many);
  EXPECT_DOUBLE_EQ(w.median_s, 51);
  // ranks n/2 ± 0.98·√n: about 41 .. 62 for n = 101
  EXPECT_NEAR(w.ci_low_s, 40, 1.5);
  EXPECT_NEAR(w.ci_high_s, 62, 1.5);
}

TEST(TuneStats, TieBreakPrefersLowerIndexWithinNoise) {
  std::vector<std::string> names = {"default", "a", "b"};
  // b is fastest but the default's median is inside b's interval: noise, the default stays.
  auto d = tune::choose(names, {{1.05, 1.0, 1.1, 9}, {2.0, 1.9, 2.1, 9}, {1.0, 0.95, 1.08, 9}});
  EXPECT_EQ(d.winner, 0u);
  EXPECT_NE(d.reason.find("within noise"), std::string::npos) << d.reason;
  // Clearly faster: b wins and the reason says by how much.
  d = tune::choose(names, {{2.0, 1.9, 2.1, 9}, {1.5, 1.4, 1.6, 9}, {1.0, 0.95, 1.05, 9}});
  EXPECT_EQ(d.winner, 2u);
  EXPECT_NE(d.reason.find("fastest"), std::string::npos) << d.reason;
  EXPECT_NE(d.reason.find("2.00x"), std::string::npos) << d.reason;
  // Exact ties: lowest index.
  d = tune::choose(names, {{1.0, 1.0, 1.0, 5}, {1.0, 1.0, 1.0, 5}, {1.0, 1.0, 1.0, 5}});
  EXPECT_EQ(d.winner, 0u);
  // A default kept elsewhere than index 0 (CUDA qgemm.auto) is what the reason compares to; the
  // rule itself is unchanged.
  d = tune::choose(names, {{2.0, 1.9, 2.1, 9}, {1.0, 0.95, 1.05, 9}, {1.5, 1.4, 1.6, 9}}, 2);
  EXPECT_EQ(d.winner, 1u);
  EXPECT_NE(d.reason.find("1.50x faster than the default b"), std::string::npos) << d.reason;
}

TEST(TuneCandidates, EveryFamilyHasSeveralWithUniqueNames) {
  std::set<std::string> names;
  for (auto f : {lower::cpu::CandidateFamily::gemm, lower::cpu::CandidateFamily::bmm, lower::cpu::CandidateFamily::softmax}) {
    auto c = lower::cpu::candidates_for(f);
    EXPECT_GE(c.size(), 2u) << lower::cpu::family_name(f);
    for (const auto& k : c) EXPECT_TRUE(names.insert(k.name).second) << "duplicate candidate name " << k.name;
  }
}

TEST(TuneLowering, DefaultSelectionIsVisible) {
  ir::Graph g = small_model();
  auto plan = passes::plan_memory(g);
  auto m = lower::cpu::lower(g, plan);
  ASSERT_EQ(m.tunables.size(), 3u);  // gemm, softmax, gemm
  EXPECT_EQ(m.source.find("dinoml_module_profile"), std::string::npos) << "only bootstrap modules export profiling";
  int tunable = 0;
  for (const auto& e : m.kernel_manifest)
    if (e.value("tunable", false)) {
      ++tunable;
      EXPECT_EQ(e["reason"], "default (not profiled)");
      EXPECT_GE(e["candidates"].size(), 2u);
      EXPECT_EQ(e["selected_per_bucket"].size(), 2u);
    }
  EXPECT_EQ(tunable, 3);
}

TEST(TuneLowering, BootstrapAndPerBucketDispatch) {
  ir::Graph g = small_model();
  auto plan = passes::plan_memory(g);
  lower::cpu::CpuLowerOptions o;
  o.bootstrap = true;
  auto boot = lower::cpu::lower(g, plan, o);
  EXPECT_NE(boot.source.find("DML_EXPORT int dinoml_module_profile("), std::string::npos);
  EXPECT_NE(boot.source.find("dml_cpu_gemm_tiled("), std::string::npos) << "every candidate is compiled in";

  lower::cpu::CpuLowerOptions sel;
  const std::string node = gemm_node(g);
  sel.choices[node] = {{"dml.gemm.tiled.mc48_kc128_nc128", "test", true, json()},
                       {"dml.gemm.tiled.mc96_kc256_nc256.st", "test", true, json()}};
  auto m = lower::cpu::lower(g, plan, sel);
  EXPECT_NE(m.source.find("switch (b) {  // kernel chosen per shape bucket"), std::string::npos);
  EXPECT_EQ(m.source.find("dinoml_module_profile"), std::string::npos);
  for (const auto& e : m.kernel_manifest)
    if (e["node"] == node) {
      EXPECT_EQ(e["selected"], "per bucket");
      EXPECT_EQ(e["selected_per_bucket"][1]["kernel"], "dml.gemm.tiled.mc96_kc256_nc256.st");
    }

  sel.choices[node][1].kernel = "dml.gemm.no_such_kernel";
  try {
    lower::cpu::lower(g, plan, sel);
    FAIL() << "unknown candidate accepted";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("'dml.gemm.no_such_kernel' is not a candidate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(node), std::string::npos) << e.what();
  }
}

TEST(TunePlan, ValidationNamesTheFault) {
  ir::Graph g = small_model();
  auto plan = passes::plan_memory(g);
  const json tunables = lower::cpu::lower(g, plan).tunables;
  const std::string node = gemm_node(g);
  auto entry = [&](const std::string& n, std::vector<std::string> winners) {
    json buckets = json::array();
    for (size_t b = 0; b < winners.size(); ++b) buckets.push_back({{"bucket", b}, {"winner", winners[b]}});
    return json{{"schema_version", 1}, {"nodes", {{{"node", n}, {"buckets", buckets}}}}};
  };
  auto expect_error = [&](const json& p, const std::string& needle) {
    try {
      tune::choices_from_plan(p, tunables, "plan");
      ADD_FAILURE() << "accepted: " << p.dump();
    } catch (const BuildError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(entry("ghost", {"dml.gemm.blocked", "dml.gemm.blocked"}), "node 'ghost' is not a tunable node");
  expect_error(entry(node, {"dml.gemm.blocked"}), "lists 1 buckets, the graph has 2");
  expect_error(entry(node, {"dml.gemm.blocked", "dml.gemm.fast"}), "unknown candidate 'dml.gemm.fast'");
  expect_error(json{{"nodes", 1}}, "not an execution plan");
  auto ok = tune::choices_from_plan(entry(node, {"dml.gemm.blocked", "dml.gemm.tiled.mc48_kc128_nc128"}), tunables, "plan");
  ASSERT_EQ(ok.at(node).size(), 2u);
  EXPECT_FALSE(ok.at(node)[1].measured) << "no timings: a hand-written choice";
  EXPECT_EQ(tune::unmeasured_nodes(tunables, ok).size(), 3u);
}

TEST(TuneCache, RoundTripKeyedByHardware) {
  TempDir t;
  tune::HardwareFingerprint hw;
  hw.cpu_model = "test cpu";
  hw.key = "hw1";
  {
    tune::ProfileCache c((t.p / "profile.sqlite").string(), hw);
    EXPECT_FALSE(c.lookup("gemm problem", "cand"));
    c.store("gemm_rcr", "gemm problem", "cand", {1e-5, 9e-6, 2e-5, 11});
    auto m = c.lookup("gemm problem", "cand");
    ASSERT_TRUE(m);
    EXPECT_DOUBLE_EQ(m->median_s, 1e-5);
    EXPECT_EQ(m->reps, 11);
    EXPECT_FALSE(c.lookup("gemm problem", "other"));
  }
  hw.key = "hw2";
  tune::ProfileCache other((t.p / "profile.sqlite").string(), hw);
  EXPECT_FALSE(other.lookup("gemm problem", "cand")) << "another machine's timing must not be reused";
}

TEST(TuneCompile, ProfileCacheHitPlanReuseAndStrict) {
  TempDir t;
  ir::Graph g = small_model(false);
  CompileOptions o;
  o.cache_dir = (t.p / "cache").string();
  o.progress = false;
  o.strict = true;
  o.out_dir = (t.p / "default").string();
  try {
    compile(g, o);
    FAIL() << "--strict without measurements must fail";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("3 tunable node(s) have no measured kernel choice"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(gemm_node(g)), std::string::npos) << e.what();
  }

  o.profile = true;
  o.out_dir = (t.p / "p1").string();
  auto r1 = compile(g, o);
  EXPECT_EQ(r1.kernel_selection, "profiled");
  EXPECT_TRUE(r1.profile["built_bootstrap"]);
  const int total = r1.profile["measurements"];
  EXPECT_GT(total, 0);
  json plan = read_json(t.p / "p1/execution_plan.json");
  EXPECT_EQ(plan["schema_version"], 1);
  ASSERT_EQ(plan["nodes"].size(), 3u);
  for (const auto& n : plan["nodes"])
    for (const auto& b : n["buckets"]) {
      EXPECT_EQ(b["timings"].size(), n["candidates"].size());
      for (const auto& tm : b["timings"]) {
        EXPECT_GT(tm["median_s"].get<double>(), 0);
        EXPECT_LE(tm["ci_low_s"].get<double>(), tm["median_s"].get<double>());
        EXPECT_GE(tm["ci_high_s"].get<double>(), tm["median_s"].get<double>());
      }
      EXPECT_FALSE(b["reason"].get<std::string>().empty());
    }
  EXPECT_TRUE(fs::exists(fs::path(o.cache_dir) / "profile.sqlite"));

  o.out_dir = (t.p / "p2").string();
  auto r2 = compile(g, o);
  EXPECT_EQ(r2.profile["measurements"], 0) << r2.profile.dump();
  EXPECT_EQ(r2.profile["cache_hits"], total);
  EXPECT_FALSE(r2.profile["built_bootstrap"]) << "a fully cached profile needs no bootstrap module";
  EXPECT_LT(r2.profile["seconds"].get<double>(), r1.profile["seconds"].get<double>());

  // Reuse: same choices, no profiling, strict passes because the plan holds measurements.
  o.profile = false;
  o.execution_plan = (t.p / "p1/execution_plan.json").string();
  o.out_dir = (t.p / "reuse").string();
  auto r3 = compile(g, o);
  EXPECT_EQ(r3.kernel_selection, "execution_plan");
  json k1 = read_json(t.p / "p1/kernel_manifest.json"), k3 = read_json(t.p / "reuse/kernel_manifest.json");
  ASSERT_EQ(k1.size(), k3.size());
  for (size_t i = 0; i < k1.size(); ++i) EXPECT_EQ(k1[i]["selected"], k3[i]["selected"]) << k1[i]["node"];

  // A plan naming a node this graph lacks is refused with the node's name.
  plan["nodes"][0]["node"] = "not_a_node";
  std::ofstream(t.p / "bad.json") << plan.dump();
  o.execution_plan = (t.p / "bad.json").string();
  o.out_dir = (t.p / "bad").string();
  try {
    compile(g, o);
    FAIL() << "bad plan accepted";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("node 'not_a_node' is not a tunable node"), std::string::npos) << e.what();
  }
}
