// fuse_attention: the unfused forms exporters write (kᵀ by a permute, scale on q or on the scores,
// additive mask, where mask with -inf / a huge negative fill) become one
// scaled_dot_product_attention with the same results; the forms that must not fuse stay as they are.
#include <limits>

#include "passes/pass.h"
#include "passes/pass_util.h"
#include "passes_test_util.h"

namespace dinoml::passes_test {
namespace {

using builder::GraphBuilder;

constexpr int64_t B = 2, H = 3, L = 5, D = 4;

struct Attn {
  GraphBuilder b{"attn"};
  std::string q, k, v;
  Attn() {
    b.add_dim({"batch", 1, 4, 0, {}, 1});
    const ir::IntExpr bd = ir::IntExpr::dim("batch");
    q = b.input("q", ir::DType::f32, S({bd, H, L, D}));
    k = b.input("k", ir::DType::f32, S({bd, H, L, D}));
    v = b.input("v", ir::DType::f32, S({bd, H, L, D}));
  }
  std::string scalar(const std::string& name, float c) {
    return b.constant(name, ir::DType::f32, {}, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&c),
                                                                      reinterpret_cast<uint8_t*>(&c) + 4));
  }
  std::map<std::string, ops::HostTensor> inputs() const {
    return {{"q", random_host({B, H, L, D}, 1)}, {"k", random_host({B, H, L, D}, 2)}, {"v", random_host({B, H, L, D}, 3)}};
  }
};

TEST(FuseAttention, ExportedFormsBecomeOneSdpa) {
  struct Case {
    const char* name;
    bool scale_on_q, kt_by_permute_of_other_layout, mask, rcr;
    double want_scale;
  };
  for (const Case& c : std::vector<Case>{{"kT permute, scores / 2", false, false, false, false, 0.5},
                                         {"q * 0.25, mask", true, false, true, false, 0.25},
                                         {"k from [B, L, H, D]", false, true, false, false, 0.5},
                                         {"bmm_rcr", false, false, true, true, 0.5}}) {
    SCOPED_TRACE(c.name);
    Attn a;
    std::string q = a.q;
    if (c.scale_on_q) q = a.b.op1("mul", {a.q, a.scalar("c", 0.25f)});
    std::string kt;
    std::string k_src = a.k;
    if (c.kt_by_permute_of_other_layout) {
      // k held as [B, L, H, D]: kᵀ = permute(k_blhd, [0, 2, 3, 1]), so k = permute(k_blhd, [0, 2, 1, 3]).
      k_src = a.b.op1("permute", {a.k}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
      k_src = a.b.op1("add", {k_src, a.scalar("zero", 0.0f)});  // materialised [B, L, H, D]
      kt = a.b.op1("permute", {k_src}, {{"dims", std::vector<int64_t>{0, 2, 3, 1}}});
    } else if (!c.rcr) {
      kt = a.b.op1("permute", {a.k}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
    }
    std::string s = c.rcr ? a.b.op1("bmm_rcr", {q, a.k}) : a.b.op1("bmm_rrr", {q, kt});
    if (!c.scale_on_q) s = a.b.op1("div", {s, a.scalar("c", 2.0f)});
    if (c.mask) {
      auto h = random_host({L, L}, 9);
      s = a.b.op1("add", {a.b.constant("mask", ir::DType::f32, {L, L}, h.data), s});
    }
    std::string p = a.b.op1("softmax", {s}, {{"axis", int64_t{-1}}});
    a.b.output(a.b.op1("bmm_rrr", {p, a.v}), "y");
    auto g = a.b.finish();
    auto before = g;
    auto r = passes::fuse_attention(g);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.stats[c.mask ? "attention_masked" : "attention"], 1);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 1);
    EXPECT_EQ(count_op(g, "softmax"), 0);
    EXPECT_EQ(count_op(g, "bmm_rrr") + count_op(g, "bmm_rcr"), 0);
    const ir::Node* n = find_op(g, "scaled_dot_product_attention");
    ASSERT_NE(n, nullptr);
    EXPECT_DOUBLE_EQ(n->attr_float("scale"), c.want_scale);
    EXPECT_EQ(n->inputs.size(), c.mask ? 4u : 3u);
    // kᵀ's permute composed with the swap: at most one permute on the k path.
    EXPECT_LE(count_op(g, "permute"), c.kt_by_permute_of_other_layout ? 2 : 1);
    EXPECT_NO_THROW(passes::infer_shapes(g));
    expect_same_outputs(before, g, a.inputs(), 1e-5);
  }
}

TEST(FuseAttention, LeavesWhatItCannotFuse) {
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    Attn a;
    std::string kt = a.b.op1("permute", {a.k}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
    std::string s = a.b.op1("bmm_rrr", {a.q, kt});
    if (variant == 2) s = a.b.op1("mul", {s, a.scalar("neg", -1.0f)});  // negative scale
    std::string p = a.b.op1("softmax", {s}, {{"axis", int64_t{variant == 1 ? 2 : 3}}});
    a.b.output(a.b.op1("bmm_rrr", {p, a.v}), "y");
    if (variant == 0) a.b.output(p, "probs");  // the probabilities are wanted too
    if (variant == 3) a.b.output(s, "scores");
    auto g = a.b.finish();
    auto r = passes::fuse_attention(g);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 0);
    EXPECT_EQ(count_op(g, "softmax"), 1);
  }
}

// Both graphs' outputs agree within `tol` and are NaN at the same places (expect_same_outputs'
// max |a - b| would skip NaNs); `nans` counts the NaNs `before` gave.
void expect_same_outputs_and_nans(const ir::Graph& before, const ir::Graph& after,
                                  const std::map<std::string, ops::HostTensor>& inputs, double tol, int64_t& nans) {
  auto ra = ops::interpret(before, inputs);
  auto rb = ops::interpret(after, inputs);
  nans = 0;
  for (const auto& [name, a] : ra.outputs) {
    const ops::HostTensor& b = rb.outputs.at(name);
    EXPECT_EQ(a.shape, b.shape);
    if (a.shape != b.shape) continue;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double x = a.get_f64(i), y = b.get_f64(i);
      nans += std::isnan(x);
      ASSERT_EQ(std::isnan(x), std::isnan(y)) << name << "[" << i << "]: " << x << " vs " << y;
      if (!std::isnan(x)) {
        ASSERT_NEAR(x, y, tol) << name << "[" << i << "]";
      }
    }
  }
}

TEST(FuseAttention, WhereMaskWithHugeNegativeFillBecomesAdditiveMask) {
  const float kMin = std::numeric_limits<float>::lowest(), kInf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    bool causal;            // cond: constant [1, 1, L, L] lower triangle, else input [batch, 1, 1, L]
    bool swapped;           // where(masked, fill, s) instead of where(keep, s, fill)
    float fill;
    bool fill_one_per_key;  // the fill as a [1, 1, 1, L] constant of one value instead of a scalar
  };
  for (const Case& c : std::vector<Case>{{"padding, float32 min", false, false, kMin, false},
                                         {"padding, -inf", false, false, -kInf, false},
                                         {"padding, swapped, -1e30", false, true, -1e30f, false},
                                         {"padding, [1, 1, 1, L] fill", false, false, kMin, true},
                                         {"causal, float32 min", true, false, kMin, false},
                                         {"causal, swapped, -inf", true, true, -kInf, false}}) {
    SCOPED_TRACE(c.name);
    Attn a;
    std::string kt = a.b.op1("permute", {a.k}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
    std::string s = a.b.op1("div", {a.b.op1("bmm_rrr", {a.q, kt}), a.scalar("c", 2.0f)});
    std::string cond;
    ops::HostTensor cond_value(ir::DType::boolean, {B, 1, 1, L});
    if (c.causal) {
      ops::HostTensor tri(ir::DType::boolean, {1, 1, L, L});
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) tri.set_i64(i * L + j, (j <= i) != c.swapped);
      cond = a.b.constant("causal", ir::DType::boolean, {1, 1, L, L}, tri.data);
    } else {
      // Batch entry 0 keeps keys 0..2; entry 1 keeps none (a fully masked row).
      for (int64_t j = 0; j < L; ++j) {
        cond_value.set_i64(j, (j < 3) != c.swapped);
        cond_value.set_i64(L + j, c.swapped);
      }
      cond = a.b.input("cond", ir::DType::boolean, S({ir::IntExpr::dim("batch"), 1, 1, L}));
    }
    std::string fill;
    if (c.fill_one_per_key) {
      ops::HostTensor h(ir::DType::f32, {1, 1, 1, L});
      for (int64_t j = 0; j < L; ++j) h.set_f64(j, c.fill);
      fill = a.b.constant("fill", ir::DType::f32, {1, 1, 1, L}, h.data);
    } else {
      fill = a.scalar("fill", c.fill);
    }
    s = c.swapped ? a.b.op1("where", {cond, fill, s}) : a.b.op1("where", {cond, s, fill});
    std::string p = a.b.op1("softmax", {s}, {{"axis", int64_t{-1}}});
    a.b.output(a.b.op1("bmm_rrr", {p, a.v}), "y");
    auto g = a.b.finish();
    auto before = g;
    auto r = passes::fuse_attention(g);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.stats["attention_masked"], 1);
    EXPECT_EQ(r.stats["attention_where_masked"], 1);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 1);
    EXPECT_EQ(count_op(g, "softmax"), 0);
    EXPECT_EQ(count_op(g, "bmm_rrr"), 0);
    const ir::Node* n = find_op(g, "scaled_dot_product_attention");
    ASSERT_NE(n, nullptr);
    ASSERT_EQ(n->inputs.size(), 4u);
    EXPECT_DOUBLE_EQ(n->attr_float("scale"), 0.5);
    // The mask has cond's shape (not the scores'), the scores' dtype, and 0 / fill as its values:
    // a constant for the constant causal cond, one where(cond, 0 | fill, fill | 0) for an input.
    const ir::Tensor& mask = g.tensor(n->inputs[3]);
    EXPECT_EQ(mask.dtype, ir::DType::f32);
    EXPECT_EQ(mask.shape, before.tensor(cond).shape);
    if (c.causal) {
      EXPECT_EQ(count_op(g, "where"), 0);
      ASSERT_EQ(mask.kind, ir::TensorKind::constant);
      auto mv = passes::pass_util::read_constant(g, mask.name);
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) EXPECT_EQ(mv.get_f64(i * L + j), j <= i ? 0.0 : double(c.fill));
    } else {
      EXPECT_EQ(count_op(g, "where"), 1);
      const ir::Node* w = find_op(g, "where");
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(w->outputs[0], mask.name);
      EXPECT_EQ(w->inputs[0], cond);
    }
    EXPECT_NO_THROW(passes::infer_shapes(g));
    auto inputs = a.inputs();
    if (!c.causal) inputs["cond"] = cond_value;
    int64_t nans = -1;
    expect_same_outputs_and_nans(before, g, inputs, 1e-5, nans);
    if (c.causal) {
      EXPECT_EQ(nans, 0);  // the diagonal is always kept
    } else if (std::isinf(c.fill)) {
      EXPECT_EQ(nans, H * L * D);  // batch entry 1: every row fully masked, NaN as softmax gives
    } else {
      // Fully masked rows: softmax of L equal scores is uniform, so y = the mean of v's rows.
      EXPECT_EQ(nans, 0);
      auto y = ops::interpret(g, inputs).outputs.at("y");
      const auto& v = inputs.at("v");
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < L; ++i)
          for (int64_t d = 0; d < D; ++d) {
            double mean = 0;
            for (int64_t j = 0; j < L; ++j) mean += v.get_f64(((H + h) * L + j) * D + d) / L;
            EXPECT_NEAR(y.get_f64(((H + h) * L + i) * D + d), mean, 1e-6);
          }
    }
  }
}

TEST(FuseAttention, LeavesWhereMasksWhoseFillChangesWithTheScores) {
  // where(cond, s, f) with f = -1e4 or -1e9: s + f != f, so the fully masked row (softmax of the
  // equal fills: uniform) would become softmax of the scores. A non-uniform fill, or masked scores
  // read elsewhere, stay too.
  for (int variant = 0; variant < 4; ++variant) {
    SCOPED_TRACE(variant);
    Attn a;
    std::string kt = a.b.op1("permute", {a.k}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
    std::string s = a.b.op1("bmm_rrr", {a.q, kt});
    std::string cond = a.b.input("cond", ir::DType::boolean, S({ir::IntExpr::dim("batch"), 1, 1, L}));
    std::string fill;
    if (variant == 2) {
      ops::HostTensor h(ir::DType::f32, {1, 1, 1, L});
      for (int64_t j = 0; j < L; ++j) h.set_f64(j, j == 0 ? -1e30 : -std::numeric_limits<float>::infinity());
      fill = a.b.constant("fill", ir::DType::f32, {1, 1, 1, L}, h.data);
    } else {
      fill = a.scalar("fill", variant == 0 ? -1e4f : variant == 1 ? -1e9f : std::numeric_limits<float>::lowest());
    }
    std::string masked = a.b.op1("where", {cond, s, fill});
    std::string p = a.b.op1("softmax", {masked}, {{"axis", int64_t{-1}}});
    a.b.output(a.b.op1("bmm_rrr", {p, a.v}), "y");
    if (variant == 3) a.b.output(masked, "masked_scores");
    auto g = a.b.finish();
    auto r = passes::fuse_attention(g);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 0);
    EXPECT_EQ(count_op(g, "softmax"), 1);
    EXPECT_EQ(count_op(g, "where"), 1);
  }
}

}  // namespace
}  // namespace dinoml::passes_test
