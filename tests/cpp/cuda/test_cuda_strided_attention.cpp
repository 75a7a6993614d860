// stride_attention_operands + the strided sdpa lowering (no GPU needed): GPT-2's attention
// pattern (fused QKV projection, head permute, split, sdpa, inverse permute, out projection)
// lowers to one dml_cuda_sdpa_strided call with no permute kernel; the strides and operand
// offsets the call passes; what the pass leaves alone (masks, a permute with another reader, a
// permute that moves the head dim, graph outputs); the pipeline option is CUDA-only (off by
// default). The kernels' parity through strides: tests/gpu/cases.py `sdpa_strided`.
#include <stdexcept>

#include "cuda/lowering_fixture.h"
#include "passes/stride_attention_operands.h"

using namespace dinoml;
using namespace dinoml::test;

namespace {

ir::Attrs shape_attr(const ir::Shape& s) { return {{"shape", s}}; }
ir::Attrs dims_attr(std::vector<int64_t> d) { return {{"dims", std::move(d)}}; }

struct Gpt2Options {
  IntExpr S = IntExpr(64);
  bool mask = false;        // a bool mask on the sdpa
  bool k_extra_reader = false;  // k also feeds an add (not an sdpa operand)
  bool out_is_graph_output = false;  // the attention output [B, H, S, D] is a graph output
  bool symbolic = false;
};

// x[B, S, C] → gemm → [B, S, 3·H·D] → reshape [B, S, 3, H, D] → permute (2, 0, 3, 1, 4) → split
// → reshape [B, H, S, D] ×3 → causal sdpa → permute (0, 2, 1, 3) → reshape [B, S, H·D] → gemm.
ir::Graph gpt2_attention(Gpt2Options o = {}, int64_t H = 4, int64_t D = 64, DType dt = DType::bf16) {
  builder::GraphBuilder b("gpt2_attn");
  const int64_t B = 2, C = 64;
  const IntExpr S = o.symbolic ? add_symbolic_dim(b, "s", 96) : o.S;
  auto x = b.input("x", dt, {B, S, C});
  auto w = filled_constant(b, "w_qkv", dt, {3 * H * D, C});
  auto qkv = b.op1("gemm_rcr", {x, w});
  auto q5 = b.op1("reshape", {qkv}, shape_attr({B, S, 3, H, D}));
  auto heads = b.op1("permute", {q5}, dims_attr({2, 0, 3, 1, 4}));
  auto parts = b.op("split", {heads}, {{"sizes", std::vector<int64_t>{1, 1, 1}}, {"axis", int64_t{0}}});
  std::vector<std::string> qkv3;
  for (const auto& p : parts) qkv3.push_back(b.op1("reshape", {p}, shape_attr({B, H, S, D})));
  if (o.mask) qkv3.push_back(b.input("m", DType::boolean, {B, 1, S, S}));
  auto att = b.op1("scaled_dot_product_attention", qkv3, {{"causal", true}});
  if (o.k_extra_reader) b.output(b.op1("add", {qkv3[1], qkv3[1]}), "k2");
  if (o.out_is_graph_output) {
    b.output(att, "att");
    return b.finish();
  }
  auto bshd = b.op1("permute", {att}, dims_attr({0, 2, 1, 3}));
  auto flat = b.op1("reshape", {bshd}, shape_attr({B, S, H * D}));
  auto wo = filled_constant(b, "w_o", dt, {C, H * D});
  b.output(b.op1("gemm_rcr", {flat, wo}), "y");
  return b.finish();
}

passes::PipelineReport run_strided(ir::Graph& g) {
  passes::PipelineOptions po;
  po.strided_attention = true;
  return passes::run_pipeline(g, po);
}

lower::cuda::CudaLoweredModule lower_strided(ir::Graph g, const std::string& impl = "cublaslt") {
  run_strided(g);
  auto plan = passes::plan_memory(g);
  lower::cuda::CudaLowerOptions o;
  o.arch = lower::cuda::parse_arch("sm_90a");
  o.gemm_impl = impl;
  return lower::cuda::lower(g, plan, o);
}

std::map<std::string, int64_t> pass_stats(const passes::PipelineReport& r) {
  for (const auto& e : r.entries)
    if (e.pass == "stride_attention_operands") return e.stats;
  ADD_FAILURE() << "stride_attention_operands did not run";
  return {};
}

std::vector<nlohmann::json> entries(const lower::cuda::CudaLoweredModule& m, const std::string& op) {
  std::vector<nlohmann::json> out;
  for (const auto& e : m.kernel_manifest)
    if (e["op"] == op) out.push_back(e);
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

const ir::Node& node_of(const ir::Graph& g, const std::string& op, size_t k = 0) {
  for (const auto& n : g.nodes)
    if (n.op == op && k-- == 0) return n;
  throw std::runtime_error("no node " + op);
}

}  // namespace

TEST(CudaStridedAttention, Gpt2PatternLowersWithoutPermuteKernels) {
  for (const char* impl : {"cublaslt", "mma", "simt"}) {
    auto m = lower_strided(gpt2_attention(), impl);
    EXPECT_EQ(m.source.find("dml_cuda_permute("), std::string::npos) << impl;
    EXPECT_EQ(count(m.source, "dml_cuda_sdpa_strided("), 1u) << impl;
    EXPECT_EQ(m.source.find("dml_cuda_sdpa("), std::string::npos) << impl;
    for (const auto& e : entries(m, "permute")) {
      EXPECT_EQ(e["selected"], "alias") << e.dump();
      EXPECT_EQ(e["candidates"], nlohmann::json({"alias"}));
    }
    EXPECT_EQ(entries(m, "permute").size(), 2u);
    for (const auto& e : entries(m, "split")) EXPECT_EQ(e["selected"], "alias") << e.dump();
    auto att = entries(m, "scaled_dot_product_attention");
    ASSERT_EQ(att.size(), 1u);
    EXPECT_TRUE(att[0].contains("strided_operands")) << att[0].dump();
  }
}

TEST(CudaStridedAttention, CallPassesHeadStridesAndOffsets) {
  // B 2, S 64, H 4, D 64: q/k/v [B, H, S, D] inside qkv [B, S, 3, H, D]: batch stride S·3·H·D =
  // 49152, head stride D = 64, row stride 3·H·D = 768; k starts H·D = 256 elements (512 bytes)
  // after q, v 512 elements (1024 bytes). The output [B, H, S, D] is written as [B, S, H, D]:
  // strides S·H·D = 16384, D = 64, H·D = 256.
  auto m = lower_strided(gpt2_attention());
  const std::string& s = m.source;
  EXPECT_NE(s.find("const int64_t qs[] = {INT64_C(49152), INT64_C(64), INT64_C(768)};"), std::string::npos) << s;
  EXPECT_NE(s.find("const int64_t ks[] = {INT64_C(49152), INT64_C(64), INT64_C(768)};"), std::string::npos);
  EXPECT_NE(s.find("const int64_t vs[] = {INT64_C(49152), INT64_C(64), INT64_C(768)};"), std::string::npos);
  EXPECT_NE(s.find("const int64_t ys[] = {INT64_C(16384), INT64_C(64), INT64_C(256)};"), std::string::npos);
  EXPECT_NE(s.find("(INT64_C(256)) * 2)"), std::string::npos) << "k at element 256";
  EXPECT_NE(s.find("(INT64_C(512)) * 2)"), std::string::npos) << "v at element 512";
  EXPECT_NE(s.find("DML_CUDA_SDPA_WGMMA, stream)"), std::string::npos);
}

TEST(CudaStridedAttention, LayoutsAndMemoryPlan) {
  ir::Graph g = gpt2_attention();
  auto rep = run_strided(g);
  auto st = pass_stats(rep);
  EXPECT_EQ(st["input_permutes_viewed"], 1);
  EXPECT_EQ(st["output_permutes_viewed"], 1);
  const ir::Node& sdpa = node_of(g, "scaled_dot_product_attention");
  const std::string q5 = node_of(g, "permute", 0).inputs[0];
  const int64_t expect_q[] = {49152, 64, 768, 1};
  for (size_t i = 0; i < 3; ++i) {
    const auto l = passes::strided_layout(g, sdpa.inputs[i]);
    EXPECT_EQ(l.base, q5);
    ASSERT_TRUE(l.offset.is_const());
    EXPECT_EQ(l.offset.const_value(), static_cast<int64_t>(i) * 256);
    ASSERT_EQ(l.strides.size(), 4u);
    for (size_t a = 0; a < 4; ++a) EXPECT_EQ(l.strides[a], IntExpr(expect_q[a])) << i << " axis " << a;
  }
  const auto lo = passes::strided_layout(g, sdpa.outputs[0]);
  EXPECT_EQ(lo.base, sdpa.outputs[0]);
  const int64_t expect_o[] = {16384, 64, 256, 1};
  for (size_t a = 0; a < 4; ++a) EXPECT_EQ(lo.strides[a], IntExpr(expect_o[a]));
  // Neither permute output owns memory: one buffer fewer each, the sdpa output holds [B, S, H, D].
  auto plan = passes::plan_memory(g);
  for (const auto& a : plan.buckets.at(0).allocations) {
    EXPECT_NE(a.tensor, node_of(g, "permute", 0).outputs[0]);
    EXPECT_NE(a.tensor, node_of(g, "permute", 1).outputs[0]);
  }
  EXPECT_EQ(g.tensor(node_of(g, "permute", 1).outputs[0]).view_of, sdpa.outputs[0]);
}

TEST(CudaStridedAttention, SymbolicSeqLength) {
  Gpt2Options o;
  o.symbolic = true;
  auto m = lower_strided(gpt2_attention(o));
  EXPECT_EQ(m.source.find("dml_cuda_permute("), std::string::npos);
  EXPECT_EQ(count(m.source, "dml_cuda_sdpa_strided("), 1u);
  EXPECT_NE(m.source.find("INT64_C(768)"), std::string::npos) << "row stride 3·H·D";
}

TEST(CudaStridedAttention, LeftAloneWhereItDoesNotApply) {
  auto check_inputs_untouched = [](Gpt2Options o, int64_t expect_in, int64_t expect_out, size_t permute_kernels) {
    ir::Graph g = gpt2_attention(o);
    auto st = pass_stats(run_strided(g));
    EXPECT_EQ(st["input_permutes_viewed"], expect_in);
    EXPECT_EQ(st["output_permutes_viewed"], expect_out);
    auto plan = passes::plan_memory(g);
    lower::cuda::CudaLowerOptions lo;
    lo.arch = lower::cuda::parse_arch("sm_90a");
    auto m = lower::cuda::lower(g, plan, lo);
    EXPECT_EQ(count(m.source, "dml_cuda_permute("), permute_kernels);
  };
  Gpt2Options masked;
  masked.mask = true;  // masked sdpa keeps its copies
  check_inputs_untouched(masked, 0, 0, 2);
  Gpt2Options extra;
  extra.k_extra_reader = true;  // k is also read by an add: the head permute stays
  check_inputs_untouched(extra, 0, 1, 1);
  Gpt2Options graph_out;
  graph_out.out_is_graph_output = true;  // the output stays [B, H, S, D]; the inputs are viewed
  check_inputs_untouched(graph_out, 1, 0, 0);

  // A permute that moves the head dim is never a view.
  builder::GraphBuilder b("moves_last");
  auto x = b.input("x", DType::f16, {2, 4, 32, 64});
  auto w = filled_constant(b, "w", DType::f16, {64, 64});
  auto y = b.op1("gemm_rcr", {x, w});
  auto t = b.op1("permute", {y}, dims_attr({0, 1, 3, 2}));  // [2, 4, 64, 32]
  b.output(b.op1("scaled_dot_product_attention", {t, t, t}), "o");
  ir::Graph g = b.finish();
  auto st = pass_stats(run_strided(g));
  EXPECT_EQ(st["input_permutes_viewed"], 0);
}

TEST(CudaStridedAttention, OffByDefaultAndInterpreterGraphUnchanged) {
  // The default pipeline (CPU, ROCm, DINOML_CUDA_STRIDED_ATTENTION=0) keeps both permute kernels.
  auto m = lower_it(gpt2_attention());
  EXPECT_EQ(count(m.source, "dml_cuda_permute("), 2u);
  EXPECT_EQ(m.source.find("dml_cuda_sdpa_strided("), std::string::npos);
  // The pass changes buffers and layouts only: nodes, shapes and attributes are untouched.
  ir::Graph a = gpt2_attention(), b = gpt2_attention();
  passes::run_pipeline(a, {});
  run_strided(b);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].op, b.nodes[i].op);
    EXPECT_EQ(a.nodes[i].inputs, b.nodes[i].inputs);
    EXPECT_EQ(a.nodes[i].outputs, b.nodes[i].outputs);
  }
  for (const auto& [name, t] : a.tensors) EXPECT_EQ(t.shape, b.tensor(name).shape) << name;
}
