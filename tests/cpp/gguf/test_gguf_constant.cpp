// gguf_constant in the C++ builder: both policies, the IR's quant/source fields through the
// canonical JSON, the validator's rules for quantized constants, and the reference interpreter
// reading kept blocks through the exact dequantization.
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "builder/graph_builder.h"
#include "dinoml/quant_ref.h"
#include "import/gguf/gguf_constant.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "ir/validate.h"
#include "ops/interpreter.h"

namespace {

using namespace dinoml;
using gguf::ConstantPolicy;

constexpr int64_t K = 256, N = 12, M = 3;

struct Fixture {
  gguf::File file;
  std::vector<float> w_dense;  // [N, K], the exact dequantization of the q4_K weight
};

Fixture make_file() {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.f, 0.1f);
  std::vector<float> w(N * K);
  for (auto& v : w) v = nd(rng);
  std::vector<uint8_t> q(N * K / 256 * sizeof(dml_block_q4_K));
  quant::quantize_row_ref(DML_QT_Q4_K, w.data(), q.data(), N * K);
  Fixture f;
  f.w_dense.resize(N * K);
  quant::dequantize_row(DML_QT_Q4_K, q.data(), f.w_dense.data(), N * K);
  gguf::Writer wr;
  wr.set("general.architecture", gguf::Value::str("test"));
  wr.add_tensor("w", {K, N}, DML_QT_Q4_K, q);
  std::vector<uint8_t> h(N * K * 2);
  for (int64_t i = 0; i < N * K; ++i) {
    uint16_t v = dml_float_to_half(w[i]);
    std::memcpy(&h[2 * i], &v, 2);
  }
  wr.add_tensor("wh", {K, N}, DML_QT_F16, h);
  wr.add_tensor("cube", {32, 2, 2}, DML_QT_Q8_0, std::vector<uint8_t>(4 * 34, 0));
  f.file = gguf::File::parse(std::make_shared<const std::vector<uint8_t>>(wr.to_bytes()), "t.gguf");
  return f;
}

ir::Graph linear_graph(const Fixture& f, ConstantPolicy p, const std::string& op = "gemm_rcr") {
  builder::GraphBuilder b("lin");
  auto x = b.input("x", ir::DType::f32, {ir::IntExpr(M), ir::IntExpr(K)});
  auto w = gguf::add_gguf_constant(b, "w", f.file, "w", p, {N, K});
  auto y = b.op1(op, {x, w});
  b.output(y, "y");
  return b.finish();
}

TEST(GgufConstant, KeepStoresBlocksAndRoundTripsThroughJson) {
  Fixture f = make_file();
  ir::Graph g = linear_graph(f, ConstantPolicy::automatic);
  const auto& t = g.tensor("w");
  ASSERT_TRUE(t.quant.has_value());
  EXPECT_EQ(t.quant->type, "q4_K");
  EXPECT_EQ(t.quant->block_bytes, 144);
  EXPECT_EQ(t.dtype, ir::DType::f32);
  EXPECT_EQ(g.constant_bytes("w"), size_t(N * K / 256 * 144));
  EXPECT_EQ(t.source->policy, "keep");
  EXPECT_EQ(t.source->tensor, "w");
  EXPECT_EQ(std::memcmp(g.constant_data.at("w")->data(), f.file.data(f.file.tensor("w")), g.constant_bytes("w")), 0);
  auto j = ir::graph_to_json(g);
  std::vector<uint8_t> blob;
  // Rebuild the constants blob from the JSON's slots, as read_graph does.
  for (const auto& [name, data] : g.constant_data) {
    for (const auto& jt : j["tensors"])
      if (jt["name"] == name) {
        size_t off = jt["constant"]["offset"];
        if (blob.size() < off + data->size()) blob.resize(off + data->size());
        std::memcpy(blob.data() + off, data->data(), data->size());
      }
  }
  ir::Graph g2 = ir::graph_from_json(j, blob);
  EXPECT_TRUE(g2.tensor("w").quant == t.quant);
  EXPECT_TRUE(g2.tensor("w").source == t.source);
  EXPECT_EQ(ir::canonical_dump(g2), ir::canonical_dump(g));
  ir::validate_structure(g2);
}

TEST(GgufConstant, InterpreterUsesExactDequantization) {
  Fixture f = make_file();
  for (auto p : {ConstantPolicy::keep, ConstantPolicy::dequantize}) {
    ir::Graph g = linear_graph(f, p);
    std::vector<float> xv(M * K);
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    for (auto& v : xv) v = nd(rng);
    ops::HostTensor x = ops::HostTensor::from_bytes(ir::DType::f32, {M, K}, reinterpret_cast<const uint8_t*>(xv.data()), xv.size() * 4);
    auto out = ops::interpret(g, {{"x", x}}).outputs.at("y");
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double ref = 0;
        for (int64_t k = 0; k < K; ++k) ref += (double)xv[m * K + k] * f.w_dense[n * K + k];
        EXPECT_NEAR(out.get_as(m * N + n), ref, 1e-4) << gguf::policy_name(p);
      }
  }
}

TEST(GgufConstant, DequantizePolicyAndF16) {
  Fixture f = make_file();
  ir::Graph g = linear_graph(f, ConstantPolicy::dequantize);
  EXPECT_FALSE(g.tensor("w").quant.has_value());
  EXPECT_EQ(g.tensor("w").source->policy, "dequantize");
  EXPECT_EQ(std::memcmp(g.constant_data.at("w")->data(), f.w_dense.data(), N * K * 4), 0);
  builder::GraphBuilder b("h");
  auto h = gguf::add_gguf_constant(b, "h", f.file, "wh");  // auto → dequantize (not block-quantized)
  EXPECT_EQ(b.tensor(h).source->policy, "dequantize");
  EXPECT_EQ(b.tensor(h).source->type, "f16");
  auto c = gguf::add_gguf_constant(b, "c", f.file, "cube");  // 3-d: auto → dequantize
  EXPECT_FALSE(b.tensor(c).quant.has_value());
}

TEST(GgufConstant, ErrorsNameTheProblem) {
  Fixture f = make_file();
  builder::GraphBuilder b("e");
  auto msg = [&](auto fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(msg([&] { gguf::add_gguf_constant(b, "a", f.file, "missing"); }).find("tensor 'missing' not found"),
            std::string::npos);
  EXPECT_NE(msg([&] { gguf::add_gguf_constant(b, "a", f.file, "w", ConstantPolicy::keep, {K, N}); }).find("declared [256, 12]"),
            std::string::npos);
  EXPECT_NE(msg([&] { gguf::add_gguf_constant(b, "a", f.file, "wh", ConstantPolicy::keep); }).find("policy keep needs"),
            std::string::npos);
  EXPECT_NE(msg([&] { gguf::add_gguf_constant(b, "a", f.file, "cube", ConstantPolicy::keep); }).find("2-d weights"),
            std::string::npos);
  EXPECT_THROW(gguf::parse_policy("fast"), gguf::GgufError);
  // A kept weight may only be gemm_rcr*'s b or embedding's table.
  builder::GraphBuilder r("misuse");
  auto w = gguf::add_gguf_constant(r, "w", f.file, "w", ConstantPolicy::keep);
  auto y = r.op1("relu", {w});
  r.output(y, "y");
  EXPECT_NE(msg([&] { r.finish(); }).find("only gemm_rcr* (as b) and embedding (as the table) can consume quantized"),
            std::string::npos);
  // Tampered quant fields are rejected by the validator.
  ir::Graph g = linear_graph(f, ConstantPolicy::keep);
  g.tensors.at("w").quant->block_bytes = 140;
  EXPECT_NE(msg([&] { ir::validate_structure(g); }).find("quant q4_K has blocks of 256 elements / 144 bytes"),
            std::string::npos);
  g.tensors.at("w").quant = ir::QuantInfo{"iq2_xxs", 256, 66};
  EXPECT_NE(msg([&] { ir::validate_structure(g); }).find("unsupported quant type 'iq2_xxs'"), std::string::npos);
}

}  // namespace
