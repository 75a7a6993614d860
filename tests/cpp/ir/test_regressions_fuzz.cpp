// Regression tests for fuzz findings in the IR reader (fuzz/fuzz_ir.cpp; docs/reliability.md).
// Each committed crasher under fuzz/crashers/ir/ is replayed through the same calls as the fuzz
// target: any dinoml error is fine, a crash or sanitizer report (scripts/sanitize asan) is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "ir/serialize.h"
#include "ir/validate.h"
#include "passes/pass.h"

using namespace dinoml;
namespace fs = std::filesystem;

namespace {
std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

// Finding 1: attr_from_json bound a structured binding to a temporary iterator
// (`*j.items().begin()`), read after it died: ASan stack-use-after-scope on every attribute.
TEST(IrFuzzRegressions, AttributesOfEveryTypeRoundTrip) {
  ir::Attrs attrs;
  attrs["b"] = true;
  attrs["i"] = int64_t{3};
  attrs["f"] = 0.5;
  attrs["s"] = std::string("x");
  attrs["is"] = std::vector<int64_t>{1, 2};
  attrs["fs"] = std::vector<double>{1.5};
  attrs["ss"] = std::vector<std::string>{"a", "b"};
  for (const auto& [k, v] : attrs) {
    auto j = ir::attr_to_json(v);
    EXPECT_EQ(ir::attr_to_json(ir::attr_from_json(j)), j) << k;
  }
  EXPECT_THROW(ir::attr_from_json(nlohmann::json{{"nope", 1}}), std::exception);
  EXPECT_THROW(ir::attr_from_json(nlohmann::json{{"int", "x"}}), std::exception);
}

TEST(IrFuzzRegressions, CommittedCrashersFailCleanly) {
  fs::path dir = fs::path(DINOML_SOURCE_DIR) / "fuzz/crashers/ir";
  if (!fs::exists(dir)) GTEST_SKIP() << "no crashers committed";
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto bytes = slurp(e.path());
    auto nul = std::find(bytes.begin(), bytes.end(), uint8_t{0});
    std::vector<uint8_t> constants = nul == bytes.end() ? std::vector<uint8_t>(256, 0) : std::vector<uint8_t>(nul + 1, bytes.end());
    auto j = nlohmann::json::parse(bytes.begin(), nul, nullptr, false);
    ++n;
    if (j.is_discarded()) continue;
    try {
      auto g = ir::graph_from_json(j, constants);
      ir::validate_structure(g);
      passes::infer_shapes(g);
    } catch (const std::exception&) {
    }
  }
  EXPECT_GT(n, 0);
}
