#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "builder/graph_builder.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "ir/validate.h"

using namespace dinoml;
using namespace dinoml::ir;
using nlohmann::json;

namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Graph small_graph() {
  builder::GraphBuilder b("small");
  b.add_dim(Dim{"batch", 1, 8, 2, {4, 8}, 1});
  b.input("x", DType::f32, {IntExpr::dim("batch"), 4});
  std::vector<float> w(12, 0.5f);
  std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(w.data()), reinterpret_cast<uint8_t*>(w.data()) + 48);
  b.constant("w", DType::f32, {4, 3}, bytes);
  // Only structural IR here: a hand-made node so this test does not depend on op families.
  Graph g = b.graph();
  g.add_tensor({"y", DType::f32, {IntExpr::dim("batch"), 3}, "row_major", TensorKind::output, std::nullopt});
  g.nodes.push_back({"mm", "gemm_rrr", {"x", "w"}, {"y"}, {{"note", std::string("hi")}, {"k", int64_t{3}}}});
  g.outputs.push_back("y");
  return g;
}

}  // namespace

TEST(DType, NamesRoundTrip) {
  for (DType t : kAllDTypes) EXPECT_EQ(dtype_from_name(dtype_name(t)), t);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_NE(error_of([] { dtype_from_name_or_throw("float128"); }).find("float128"), std::string::npos);
}

TEST(Dim, ValidatesAndDefaults) {
  Dim d{"batch", 1, 4, 0, {}, 1};
  d.normalize_and_validate();
  EXPECT_EQ(d.typical, 4);
  EXPECT_EQ(d.buckets, std::vector<int64_t>{4});
  Dim e{"seq", 1, 64, 8, {16}, 1};
  e.normalize_and_validate();
  EXPECT_EQ(e.buckets, (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(e.bucket_of(1), 0u);
  EXPECT_EQ(e.bucket_of(16), 0u);
  EXPECT_EQ(e.bucket_of(17), 1u);
  EXPECT_EQ(e.bucket_lo(1), 17);
  auto bad = [](Dim x) { return error_of([&] { x.normalize_and_validate(); }); };
  EXPECT_NE(bad({"b", 0, 4, 0, {}, 1}).find("min must be >= 1"), std::string::npos);
  EXPECT_NE(bad({"b", 5, 4, 0, {}, 1}).find("max (4) must be >= min (5)"), std::string::npos);
  EXPECT_NE(bad({"b", 1, 4, 9, {}, 1}).find("typical"), std::string::npos);
  EXPECT_NE(bad({"b", 1, 4, 0, {3, 2}, 1}).find("ascending"), std::string::npos);
  EXPECT_NE(bad({"b", 1, 4, 0, {7}, 1}).find("outside"), std::string::npos);
  EXPECT_NE(bad({"b", 8, 30, 0, {}, 8}).find("multiple of divisible_by"), std::string::npos);
  EXPECT_NE(bad({"bad name", 1, 4, 0, {}, 1}).find("letters"), std::string::npos);
}

TEST(IntExpr, SimplifiesEvaluatesAndBounds) {
  IntExpr b = IntExpr::dim("batch"), s = IntExpr::dim("seq");
  EXPECT_TRUE((IntExpr(2) + 3).is_const());
  EXPECT_EQ((IntExpr(2) * 3).const_value(), 6);
  EXPECT_EQ(b * 1, b);
  EXPECT_EQ(b + 0, b);
  EXPECT_EQ((b * 4) / 4, b);
  EXPECT_EQ(b - b, IntExpr(0));
  EXPECT_EQ(IntExpr(3) * b, b * 3);  // canonical order
  IntExpr e = (b * s + 1) / 2;
  EXPECT_EQ(e.eval({{"batch", 3}, {"seq", 5}}), 8);
  EXPECT_EQ(IntExpr(-7) / 2, IntExpr(-4));  // floor division
  std::map<std::string, Dim> dims = {{"batch", Dim{"batch", 1, 4, 0, {}, 1}}, {"seq", Dim{"seq", 2, 10, 0, {}, 1}}};
  Interval iv = (b * s - 1).bounds(dims);
  EXPECT_EQ(iv.lo, 1);
  EXPECT_EQ(iv.hi, 39);
  EXPECT_EQ(e.to_string(), "((batch*seq) + 1)/2");
  EXPECT_EQ(expr_from_json(expr_to_json(e)), e);
  EXPECT_NE(error_of([&] { b.eval({}); }).find("no value for dim 'batch'"), std::string::npos);
  EXPECT_NE(error_of([] { expr_from_json(json{{"op", "mod"}, {"lhs", 1}, {"rhs", 2}}); }).find("unknown op 'mod'"),
            std::string::npos);
}

TEST(IntExpr, SumsAreLinearCombinationsAndQuotientsAbsorbConstants) {
  IntExpr h = IntExpr::dim("H"), w = IntExpr::dim("W"), s = IntExpr::dim("seq");
  EXPECT_EQ((s + 1) - 1, s);
  EXPECT_EQ((s + w) - s, w);
  EXPECT_EQ(s - (s - 2), IntExpr(2));
  EXPECT_EQ(((s - 1) + 1).to_string(), "seq");
  EXPECT_EQ((s - 1).to_string(), "seq - 1");
  EXPECT_EQ((IntExpr(5) - s).to_string(), "5 - seq");
  EXPECT_EQ(s + s, s * 2);
  EXPECT_EQ((h * 2) * 3, h * 6);
  // A 3x3 stride-2 pad-1 conv and a 1x1 stride-2 conv (a residual downsample) agree on H.
  IntExpr conv3 = (h + 2 * 1 - 1 * (3 - 1) - 1) / 2 + 1, conv1 = (h - 1) / 2 + 1;
  EXPECT_EQ(conv3, conv1);
  EXPECT_EQ(conv1.to_string(), "(H + 1)/2");
  for (int64_t v : {1, 2, 7, 8, 33}) EXPECT_EQ(conv1.eval({{"H", v}}), (v - 1) / 2 + 1) << v;
  // Stride 1, pad 1, kernel 3: the extent is H again.
  EXPECT_EQ((h + 2 - 2 - 1) / 1 + 1, h);
  std::map<std::string, Dim> dims = {{"seq", Dim{"seq", 1, 32, 0, {}, 1}}};
  EXPECT_EQ((IntExpr(512) - s).bounds(dims).lo, 480);
  EXPECT_EQ(((s + 3) - s).bounds(dims).lo, 3);
}

TEST(IntExpr, ProvablyEqualOnTheDimsDomain) {
  IntExpr h = IntExpr::dim("H");
  // An FPN: ceil(H/16) vs 2*ceil(H/32), equal exactly when H is a multiple of 32.
  IntExpr fine = (h + 15) / 16, coarse_up = ((h + 31) / 32) * 2;
  std::map<std::string, Dim> div32 = {{"H", Dim{"H", 64, 2048, 0, {}, 32}}};
  std::map<std::string, Dim> any = {{"H", Dim{"H", 64, 2048, 0, {}, 1}}};
  EXPECT_TRUE(provably_equal(fine, coarse_up, div32));
  EXPECT_FALSE(provably_equal(fine, coarse_up, any));
  EXPECT_TRUE(provably_equal(h, h, {}));
  EXPECT_FALSE(provably_equal(IntExpr(2), IntExpr(3), div32));
  // Too many points to enumerate: not proven (false), never guessed.
  EXPECT_FALSE(provably_equal(fine, coarse_up, div32, /*max_points=*/10));
  // A dim the map does not know: not proven.
  EXPECT_FALSE(provably_equal(h, IntExpr::dim("W"), div32));
}

TEST(Graph, JsonRoundTripIsCanonicalAndHashed) {
  Graph g = small_graph();
  validate_structure(g);
  json j = graph_to_json(g);
  EXPECT_EQ(j["schema_version"], 1);
  auto layout = layout_constants(g);
  auto blob = pack_constants(g, layout);
  Graph back = graph_from_json(j, blob);
  EXPECT_EQ(canonical_dump(back), canonical_dump(g));
  EXPECT_EQ(graph_hash(back), graph_hash(g));
  EXPECT_EQ(std::get<std::string>(back.nodes[0].attrs.at("note")), "hi");
  EXPECT_EQ(std::get<int64_t>(back.nodes[0].attrs.at("k")), 3);
  // Changing a constant's bytes changes the hash: the hash covers constants.
  Graph g2 = g;
  auto bytes = *g2.constant_data["w"];
  bytes[0] ^= 1;
  g2.constant_data["w"] = std::make_shared<const std::vector<uint8_t>>(bytes);
  EXPECT_NE(graph_hash(g2), graph_hash(g));
}

TEST(Graph, WriteAndReadFiles) {
  auto dir = std::filesystem::temp_directory_path() / "dinoml_ir_test";
  std::filesystem::create_directories(dir);
  Graph g = small_graph();
  write_graph(g, (dir / "g.dinoir.json").string());
  Graph back = read_graph((dir / "g.dinoir.json").string());
  EXPECT_EQ(graph_hash(back), graph_hash(g));
  // A tampered constants file is detected by the per-constant sha256.
  {
    std::fstream f(dir / "constants.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('\x7f');
  }
  EXPECT_NE(error_of([&] { read_graph((dir / "g.dinoir.json").string()); }).find("sha256"), std::string::npos);
}

TEST(Graph, MalformedFilesGiveClearErrors) {
  auto dir = std::filesystem::temp_directory_path() / "dinoml_ir_bad";
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "bad.json") << text;
    return error_of([&] { read_graph((dir / "bad.json").string()); });
  };
  EXPECT_NE(write("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(write("{\"schema_version\": 99}").find("schema_version 99"), std::string::npos);
  EXPECT_NE(write("{\"schema_version\": 1, \"name\": \"m\"}").find("missing field 'inputs'"), std::string::npos);
  std::string err = write(R"({"schema_version":1,"name":"m","inputs":["x"],"outputs":["y"],
    "tensors":[{"name":"x","dtype":"float99","shape":[2],"kind":"input"}],"nodes":[]})");
  EXPECT_NE(err.find("unknown dtype 'float99'"), std::string::npos) << err;
}

TEST(Validate, ErrorsNameNodeTensorAndRule) {
  Graph g = small_graph();
  Graph a = g;
  a.nodes[0].inputs[0] = "nope";
  std::string e = error_of([&] { validate_structure(a); });
  EXPECT_NE(e.find("node 'mm' (gemm_rrr)"), std::string::npos) << e;
  EXPECT_NE(e.find("'nope'"), std::string::npos) << e;
  Graph b = g;
  b.tensors["y"].shape = {IntExpr::dim("undeclared"), 3};
  e = error_of([&] { validate_structure(b); });
  EXPECT_NE(e.find("undeclared dim 'undeclared'"), std::string::npos) << e;
  Graph c = g;
  c.nodes.push_back(c.nodes[0]);
  c.nodes[1].name = "mm2";
  e = error_of([&] { validate_structure(c); });
  EXPECT_NE(e.find("produced twice"), std::string::npos) << e;
  Graph d = g;
  d.constant_data["w"] = std::make_shared<const std::vector<uint8_t>>(4, 0);
  e = error_of([&] { validate_structure(d); });
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("needs 48"), std::string::npos) << e;
}
