// fuse_attention: the unfused forms exporters write (kᵀ by a permute, scale on q or on the scores,
// additive mask) become one scaled_dot_product_attention with the same results; the forms that
// must not fuse stay as they are.
#include "passes/pass.h"
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

}  // namespace
}  // namespace dinoml::passes_test
