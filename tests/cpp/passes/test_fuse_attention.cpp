// fuse_attention: the unfused forms exporters write (kᵀ by a permute, scale on q or on the scores,
// additive mask, where mask with -inf / a huge negative fill, alone or with an additive mask) become one
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
  // q · kᵀ as bmm_rrr of q and an explicit permute of k (the form fuse_attention looks for).
  std::string scores() {
    const std::string kt = b.op1("permute", {k}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
    return b.op1("bmm_rrr", {q, kt});
  }
  std::map<std::string, ops::HostTensor> inputs() const {
    return {{"q", random_host({B, H, L, D}, 1)}, {"k", random_host({B, H, L, D}, 2)}, {"v", random_host({B, H, L, D}, 3)}};
  }
};

// Runs fuse_attention on g (attention with scale 0.5 and a where mask) and checks that it left one
// scaled_dot_product_attention with a mask input and no softmax / bmm_rrr, counted as where-masked.
// Returns that node, or nullptr (a failure is recorded) when there is none with four inputs.
const ir::Node* fuse_one_where_masked_sdpa(ir::Graph& g) {
  auto r = passes::fuse_attention(g);
  EXPECT_TRUE(r.changed);
  EXPECT_EQ(r.stats["attention_masked"], 1);
  EXPECT_EQ(r.stats["attention_where_masked"], 1);
  EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 1);
  EXPECT_EQ(count_op(g, "softmax"), 0);
  EXPECT_EQ(count_op(g, "bmm_rrr"), 0);
  const ir::Node* n = find_op(g, "scaled_dot_product_attention");
  if (!n || n->inputs.size() != 4u) {
    ADD_FAILURE() << "no scaled_dot_product_attention with a mask input";
    return nullptr;
  }
  EXPECT_DOUBLE_EQ(n->attr_float("scale"), 0.5);
  return n;
}

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
    std::string s = a.scores();
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
      if (!std::isnan(x) && x != y) {  // x != y: equal infinities are equal
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
    std::string s = a.b.op1("div", {a.scores(), a.scalar("c", 2.0f)});
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
    const ir::Node* n = fuse_one_where_masked_sdpa(g);
    ASSERT_NE(n, nullptr);
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
    std::string s = a.scores();
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

// GPT-2-style attention: a where mask and an additive mask together, as HF exports write them.
// Form A: where(cond, s, c) + m (GPT-2: causal where, then + attention_mask); form B:
// where(cond, s + m, c). cond is bool, c a fill of -inf or float32 min, m an additive mask input
// [batch, 1, 1, L] with 0 / small / float32 min / -inf entries.
struct GptMasked {
  static constexpr int64_t kB = 3;
  Attn a;
  std::string cond, m, s;
  ops::HostTensor cond_value, m_value;
  // cond: the constant causal [1, 1, L, L] lower triangle, an input [1, 1, L, L] holding it, or an
  // input padding mask [batch, 1, 1, L]. swapped: where(~cond, c, ·) instead of where(cond, ·, c).
  enum class Cond { causal_const, causal_input, padding_input };
  GptMasked(Cond kind, bool swapped) : cond_value(ir::DType::boolean, {1}), m_value(ir::DType::f32, {kB, 1, 1, L}) {
    const ir::IntExpr bd = ir::IntExpr::dim("batch");
    s = a.b.op1("div", {a.scores(), a.scalar("c", 2.0f)});
    if (kind == Cond::padding_input) {
      // Entry 0 keeps keys 0..3, entry 1 keys 1..4, entry 2 none.
      cond_value = ops::HostTensor(ir::DType::boolean, {kB, 1, 1, L});
      for (int64_t j = 0; j < L; ++j) {
        cond_value.set_i64(j, (j < 4) != swapped);
        cond_value.set_i64(L + j, (j >= 1) != swapped);
        cond_value.set_i64(2 * L + j, swapped);
      }
      cond = a.b.input("cond", ir::DType::boolean, S({bd, 1, 1, L}));
    } else {
      cond_value = ops::HostTensor(ir::DType::boolean, {1, 1, L, L});
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) cond_value.set_i64(i * L + j, (j <= i) != swapped);
      cond = kind == Cond::causal_const ? a.b.constant("causal", ir::DType::boolean, {1, 1, L, L}, cond_value.data)
                                        : a.b.input("cond", ir::DType::boolean, S({1, 1, L, L}));
    }
    // Entry 0: 0, key 4 padded (float32 min); entry 1: small values (ALiBi-like), key 0 float32
    // min, key 3 -inf; entry 2: every key padded (rows masked by m alone).
    const float kMin = std::numeric_limits<float>::lowest(), kInf = std::numeric_limits<float>::infinity();
    auto small = random_host({L}, 7);
    for (int64_t j = 0; j < L; ++j) {
      m_value.set_f64(j, j == 4 ? kMin : 0.0f);
      m_value.set_f64(L + j, j == 0 ? kMin : j == 3 ? -kInf : small.get_f64(j));
      m_value.set_f64(2 * L + j, kMin);
    }
    m = a.b.input("m", ir::DType::f32, S({bd, 1, 1, L}));
  }
  std::string where(const std::string& scores, const std::string& fill, bool swapped) {
    return swapped ? a.b.op1("where", {cond, fill, scores}) : a.b.op1("where", {cond, scores, fill});
  }
  void finish_attention(const std::string& masked) {
    std::string p = a.b.op1("softmax", {masked}, {{"axis", int64_t{-1}}});
    a.b.output(a.b.op1("bmm_rrr", {p, a.v}), "y");
  }
  std::map<std::string, ops::HostTensor> inputs(bool cond_is_input) const {
    std::map<std::string, ops::HostTensor> in{{"q", random_host({kB, H, L, D}, 1)},
                                              {"k", random_host({kB, H, L, D}, 2)},
                                              {"v", random_host({kB, H, L, D}, 3)},
                                              {"m", m_value}};
    if (cond_is_input) in["cond"] = cond_value;
    return in;
  }
};

TEST(FuseAttention, WhereMaskWithAdditiveMaskBecomesOneCombinedMask) {
  using Cond = GptMasked::Cond;
  const float kMin = std::numeric_limits<float>::lowest(), kInf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    bool form_b;  // where(cond, s + m, c), else where(cond, s, c) + m
    Cond cond;
    bool swapped;
    float fill;
    bool m_first;  // m + x instead of x + m
  };
  std::vector<Case> cases;
  for (bool form_b : {false, true})
    for (Cond cond : {Cond::causal_const, Cond::causal_input, Cond::padding_input})
      for (float fill : {kMin, -kInf}) cases.push_back({form_b ? "B" : "A", form_b, cond, false, fill, false});
  cases.push_back({"A, swapped, m first", false, Cond::causal_const, true, kMin, true});
  cases.push_back({"A, padding, swapped, -1e30", false, Cond::padding_input, true, -1e30f, false});
  cases.push_back({"B, swapped, m first", true, Cond::causal_const, true, -kInf, true});
  cases.push_back({"B, padding, swapped", true, Cond::padding_input, true, kMin, false});
  for (const Case& c : cases) {
    const char* cond_name[] = {"causal constant", "causal input", "padding input"};
    SCOPED_TRACE(std::string(c.name) + ", " + cond_name[int(c.cond)] + ", fill " +
                 (std::isinf(c.fill) ? "-inf" : c.fill == kMin ? "float32 min" : "-1e30"));
    GptMasked t(c.cond, c.swapped);
    auto plus_m = [&](const std::string& x) {
      return c.m_first ? t.a.b.op1("add", {t.m, x}) : t.a.b.op1("add", {x, t.m});
    };
    const std::string fill = t.a.scalar("fill", c.fill);
    t.finish_attention(c.form_b ? t.where(plus_m(t.s), fill, c.swapped) : plus_m(t.where(t.s, fill, c.swapped)));
    auto g = t.a.b.finish();
    auto before = g;
    const ir::Node* n = fuse_one_where_masked_sdpa(g);
    ASSERT_NE(n, nullptr);
    // One mask of the broadcast of cond's and m's shapes (never the scores' [batch, H, L, L]):
    // form A where(cond, 0, c) + m (the where a constant for the constant cond), form B
    // where(cond, m, c).
    const ir::Tensor& mask = g.tensor(n->inputs[3]);
    const ir::IntExpr bd = ir::IntExpr::dim("batch");
    EXPECT_EQ(mask.dtype, ir::DType::f32);
    EXPECT_EQ(mask.kind, ir::TensorKind::intermediate);
    EXPECT_EQ(mask.shape, c.cond == Cond::padding_input ? S({bd, 1, 1, L}) : S({bd, 1, L, L}));
    EXPECT_EQ(count_op(g, "where"), c.form_b || c.cond != Cond::causal_const ? 1 : 0);
    EXPECT_EQ(count_op(g, "add"), c.form_b ? 0 : 1);
    EXPECT_NO_THROW(passes::infer_shapes(g));
    int64_t nans = -1;
    expect_same_outputs_and_nans(before, g, t.inputs(c.cond != Cond::causal_const), 1e-6, nans);
    // Entry 2 with the padding cond keeps no key: NaN rows where the masked scores are all -inf
    // (fill -inf; form A's c + m = float32 min + float32 min overflows to -inf too), uniform where
    // they are all the finite fill (form B, float32 min / -1e30). The causal diagonal is always kept.
    const bool nan_rows = c.cond == Cond::padding_input && (std::isinf(c.fill) || (!c.form_b && c.fill == kMin));
    EXPECT_EQ(nans, nan_rows ? H * L * D : 0);
  }
}

TEST(FuseAttention, LeavesWhereAndAdditiveMasksItCannotCombine) {
  // -1e4 fill (s + c != c), a masked intermediate read elsewhere (form A's where, form B's
  // s + m), and both an inner and an outer additive mask: left as they are.
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(variant);
    GptMasked t(GptMasked::Cond::causal_const, false);
    const bool form_b = variant % 2 == 1;
    const std::string fill = t.a.scalar("fill", variant < 2 ? -1e4f : std::numeric_limits<float>::lowest());
    std::string masked;
    if (variant == 4) {
      masked = t.a.b.op1("add", {t.where(t.a.b.op1("add", {t.s, t.m}), fill, false), t.m});
    } else if (form_b) {
      std::string inner = t.a.b.op1("add", {t.s, t.m});
      if (variant == 3) t.a.b.output(inner, "scores_plus_m");
      masked = t.where(inner, fill, false);
    } else {
      std::string w = t.where(t.s, fill, false);
      if (variant == 2) t.a.b.output(w, "where_scores");
      masked = t.a.b.op1("add", {w, t.m});
    }
    if (variant == 5) t.a.b.output(masked, "masked_scores");
    t.finish_attention(masked);
    auto g = t.a.b.finish();
    auto r = passes::fuse_attention(g);
    EXPECT_FALSE(r.changed);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 0);
    EXPECT_EQ(count_op(g, "softmax"), 1);
    EXPECT_EQ(count_op(g, "where"), 1);
  }
}

TEST(FuseAttention, AdditiveMaskSharedByOtherNodesStillCombines) {
  // m is the model's attention mask, read by every layer: it is not an intermediate of this
  // attention, so other readers do not matter (as for a plain additive mask). Both forms.
  for (bool form_b : {false, true}) {
    SCOPED_TRACE(form_b);
    GptMasked t(GptMasked::Cond::causal_const, false);
    const std::string fill = t.a.scalar("fill", std::numeric_limits<float>::lowest());
    t.finish_attention(form_b ? t.where(t.a.b.op1("add", {t.s, t.m}), fill, false)
                              : t.a.b.op1("add", {t.where(t.s, fill, false), t.m}));
    t.a.b.output(t.a.b.op1("mul", {t.m, t.a.scalar("two", 2.0f)}), "m2");
    auto g = t.a.b.finish();
    auto before = g;
    auto r = passes::fuse_attention(g);
    EXPECT_TRUE(r.changed);
    EXPECT_EQ(r.stats["attention_where_masked"], 1);
    EXPECT_EQ(count_op(g, "scaled_dot_product_attention"), 1);
    EXPECT_EQ(count_op(g, "softmax"), 0);
    int64_t nans = -1;
    expect_same_outputs_and_nans(before, g, t.inputs(false), 1e-6, nans);
    EXPECT_EQ(nans, 0);
  }
}

}  // namespace
}  // namespace dinoml::passes_test
