// Normalisations: layer_norm, rms_norm, group_norm. All float; the affine parameters must have
// x's dtype (mixed-precision parameters are cast explicitly by the front end). Statistics use
// the biased (population) variance, as PyTorch does.
#include <cmath>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

void expect_float_same(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.expect_float(i);
  detail::expect_all_same_dtype(ctx);
}

void expect_param_shape(const InferContext& ctx, size_t i, const ir::Shape& want, const char* what) {
  if (ctx.inputs[i].shape != want)
    ctx.fail(std::string(what) + " " + detail::describe_input(ctx, i) + " must have shape " +
             ir::shape_to_string(want) + " (from x " + detail::describe_input(ctx, 0) + ")");
}

// ---- layer_norm ---------------------------------------------------------------------------
int64_t layer_norm_ndim(const ir::Node& node, size_t n_inputs, size_t gamma_rank) {
  return n_inputs >= 2 ? static_cast<int64_t>(gamma_rank) : node.attr_int("normalized_ndim", 1);
}

std::vector<TensorType> infer_layer_norm(const InferContext& ctx) {
  expect_float_same(ctx);
  const auto& x = ctx.inputs[0].shape;
  size_t n = ctx.inputs.size();
  int64_t nd = layer_norm_ndim(ctx.node, n, n >= 2 ? ctx.inputs[1].shape.size() : 0);
  if (n >= 2 && ctx.node.has_attr("normalized_ndim") && ctx.node.attr_int("normalized_ndim") != nd)
    ctx.fail("attribute normalized_ndim = " + std::to_string(ctx.node.attr_int("normalized_ndim")) +
             " disagrees with the rank of gamma " + detail::describe_input(ctx, 1));
  if (nd < 1 || nd > static_cast<int64_t>(x.size()))
    ctx.fail("normalized_ndim = " + std::to_string(nd) + " must be in [1, rank of x " +
             detail::describe_input(ctx, 0) + "]");
  ir::Shape tail(x.end() - nd, x.end());
  for (size_t i = 1; i < n; ++i) expect_param_shape(ctx, i, tail, i == 1 ? "gamma" : "beta");
  return {ctx.inputs[0]};
}

std::vector<HostTensor> ref_layer_norm(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  size_t n = ctx.inputs.size();
  int64_t nd = layer_norm_ndim(ctx.node, n, n >= 2 ? ctx.in(1).shape.size() : 0);
  double eps = ctx.node.attr_float("eps", 1e-5);
  int64_t inner = detail::product(x.shape, x.shape.size() - nd, x.shape.size());
  int64_t outer = inner ? x.numel() / inner : 0;
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x.get_f64(o * inner + i);
    mean /= double(inner);
    for (int64_t i = 0; i < inner; ++i) var += std::pow(x.get_f64(o * inner + i) - mean, 2);
    var /= double(inner);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i) {
      double y = (x.get_f64(o * inner + i) - mean) * inv;
      if (n >= 2) y *= ctx.in(1).get_f64(i);
      if (n >= 3) y += ctx.in(2).get_f64(i);
      out.set_f64(o * inner + i, y);
    }
  }
  return {out};
}

// ---- rms_norm -----------------------------------------------------------------------------
std::vector<TensorType> infer_rms_norm(const InferContext& ctx) {
  expect_float_same(ctx);
  const auto& x = ctx.inputs[0].shape;
  if (x.empty()) ctx.fail("x " + detail::describe_input(ctx, 0) + " must have rank >= 1");
  if (ctx.inputs.size() == 2) expect_param_shape(ctx, 1, {x.back()}, "weight");
  return {ctx.inputs[0]};
}

std::vector<HostTensor> ref_rms_norm(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  double eps = ctx.node.attr_float("eps", 1e-6);
  int64_t d = x.shape.back();
  int64_t rows = d ? x.numel() / d : 0;
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += x.get_f64(r * d + i) * x.get_f64(r * d + i);
    double inv = 1.0 / std::sqrt(ss / double(d) + eps);
    for (int64_t i = 0; i < d; ++i) {
      double y = x.get_f64(r * d + i) * inv;
      if (ctx.inputs.size() == 2) y *= ctx.in(1).get_f64(i);
      out.set_f64(r * d + i, y);
    }
  }
  return {out};
}

// ---- group_norm ---------------------------------------------------------------------------
std::vector<TensorType> infer_group_norm(const InferContext& ctx) {
  expect_float_same(ctx);
  const auto& x = ctx.inputs[0].shape;
  if (x.size() < 2) ctx.fail("x " + detail::describe_input(ctx, 0) + " must be [N, C, ...] (rank >= 2)");
  int64_t g = ctx.node.attr_int("num_groups");
  if (g < 1) ctx.fail("num_groups = " + std::to_string(g) + " must be >= 1");
  if (!x[1].is_const())
    ctx.fail("channel extent '" + x[1].to_string() + "' of x " + detail::describe_input(ctx, 0) +
             " must be static to split into groups");
  if (x[1].const_value() % g != 0)
    ctx.fail("channels C = " + std::to_string(x[1].const_value()) + " of x " + detail::describe_input(ctx, 0) +
             " are not divisible by num_groups = " + std::to_string(g));
  for (size_t i = 1; i < ctx.inputs.size(); ++i) expect_param_shape(ctx, i, {x[1]}, i == 1 ? "gamma" : "beta");
  return {ctx.inputs[0]};
}

std::vector<HostTensor> ref_group_norm(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const int64_t N = x.shape[0], C = x.shape[1], G = ctx.node.attr_int("num_groups");
  const int64_t S = detail::product(x.shape, 2, x.shape.size()), cg = C / G;
  double eps = ctx.node.attr_float("eps", 1e-5);
  size_t n_in = ctx.inputs.size();
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      // Channels [g*cg, (g+1)*cg) x all spatial positions are contiguous in NC... layout.
      int64_t base = (n * C + g * cg) * S, cnt = cg * S;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < cnt; ++i) mean += x.get_f64(base + i);
      mean /= double(cnt);
      for (int64_t i = 0; i < cnt; ++i) var += std::pow(x.get_f64(base + i) - mean, 2);
      var /= double(cnt);
      double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < cnt; ++i) {
        int64_t c = g * cg + i / S;
        double y = (x.get_f64(base + i) - mean) * inv;
        if (n_in >= 2) y *= ctx.in(1).get_f64(c);
        if (n_in >= 3) y += ctx.in(2).get_f64(c);
        out.set_f64(base + i, y);
      }
    }
  return {out};
}

}  // namespace

void register_norm_ops(Registry& r) {
  OpDef ln;
  ln.name = "layer_norm";
  ln.family = "norm";
  ln.doc = "(x - mean) / sqrt(var + eps) * gamma + beta over the trailing normalized_ndim axes";
  ln.min_inputs = 1;
  ln.max_inputs = 3;
  ln.attrs = {{"normalized_ndim", AttrKind::integer, false, "trailing axes normalised (default 1 or gamma's rank)"},
              {"eps", AttrKind::floating, false, "variance epsilon (1e-5)"}};
  ln.infer = infer_layer_norm;
  ln.reference = ref_layer_norm;
  r.add(std::move(ln));

  OpDef rms;
  rms.name = "rms_norm";
  rms.family = "norm";
  rms.doc = "x / sqrt(mean(x^2) + eps) * weight over the last axis";
  rms.min_inputs = 1;
  rms.max_inputs = 2;
  rms.attrs = {{"eps", AttrKind::floating, false, "epsilon (1e-6)"}};
  rms.infer = infer_rms_norm;
  rms.reference = ref_rms_norm;
  r.add(std::move(rms));

  OpDef gn;
  gn.name = "group_norm";
  gn.family = "norm";
  gn.doc = "normalise each of num_groups channel groups of x[N, C, ...]";
  gn.min_inputs = 1;
  gn.max_inputs = 3;
  gn.attrs = {{"num_groups", AttrKind::integer, true, "number of channel groups"},
              {"eps", AttrKind::floating, false, "variance epsilon (1e-5)"}};
  gn.infer = infer_group_norm;
  gn.reference = ref_group_norm;
  r.add(std::move(gn));
}

}  // namespace dinoml::ops
