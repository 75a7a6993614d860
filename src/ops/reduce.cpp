// Reductions (reduce_sum/mean/max/min, argmax) and softmax / log_softmax.
// Reductions keep the input dtype (sums of ints wrap like the storage type; the reference
// accumulates ints in int64 and floats in double). max/min propagate NaN like NumPy's amax.
#include <cmath>
#include <limits>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {
using ir::DType;

enum class Red { sum, mean, max, min };

struct RedDef {
  const char* name;
  Red kind;
  const char* doc;
};
const RedDef kReductions[] = {
    {"reduce_sum", Red::sum, "sum over axes"},
    {"reduce_mean", Red::mean, "mean over axes (float only)"},
    {"reduce_max", Red::max, "maximum over axes"},
    {"reduce_min", Red::min, "minimum over axes"},
};

// The reduced axes: attribute `axes`, absent or empty meaning "all axes".
std::vector<int64_t> reduce_axes_infer(const InferContext& ctx, int64_t rank) {
  std::vector<int64_t> axes = ctx.node.attr_ints("axes", {});
  if (axes.empty()) {
    std::vector<int64_t> all(rank);
    for (int64_t i = 0; i < rank; ++i) all[i] = i;
    return all;
  }
  return detail::normalize_axes(ctx, axes, rank, "axes");
}

std::vector<int64_t> reduce_axes_ref(const ir::Node& node, int64_t rank) {
  std::vector<int64_t> axes = node.attr_ints("axes", {});
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes) a = detail::wrap_axis(a, rank);
  return axes;
}

ir::Shape reduced_shape(const ir::Shape& s, const std::vector<int64_t>& axes, bool keepdim) {
  ir::Shape out;
  for (size_t i = 0; i < s.size(); ++i) {
    bool red = std::find(axes.begin(), axes.end(), int64_t(i)) != axes.end();
    if (!red) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Shape with reduced axes set to 1: the output layout with keepdim (same row-major order as
// without keepdim, since only size-1 axes differ).
std::vector<int64_t> kept_shape(const std::vector<int64_t>& s, const std::vector<int64_t>& axes) {
  std::vector<int64_t> k = s;
  for (auto a : axes) k[a] = 1;
  return k;
}

int64_t kept_offset(const std::vector<int64_t>& idx, const std::vector<int64_t>& kshape) {
  int64_t off = 0;
  for (size_t k = 0; k < kshape.size(); ++k) off = off * kshape[k] + (kshape[k] == 1 ? 0 : idx[k]);
  return off;
}

std::vector<HostTensor> ref_reduce(Red kind, const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  auto axes = reduce_axes_ref(ctx.node, x.rank());
  auto ks = kept_shape(x.shape, axes);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t n = out.numel();
  const int64_t count = n ? x.numel() / n : 0;
  if ((kind == Red::max || kind == Red::min) && count == 0 && n > 0)
    detail::ref_fail(ctx, "cannot take the " + std::string(kind == Red::max ? "max" : "min") +
                              " of an empty axis of input '" + ctx.node.inputs[0] + "' " + x.shape_string());
  const bool fp = ir::is_float(x.dtype);
  std::vector<double> accf(n, 0.0);
  std::vector<int64_t> acci(n, 0);
  std::vector<char> seen(n, 0);
  detail::for_each_index(x.shape, [&](const std::vector<int64_t>& idx, int64_t i) {
    int64_t o = kept_offset(idx, ks);
    if (fp) {
      double v = x.get_f64(i);
      double& a = accf[o];
      if (kind == Red::sum || kind == Red::mean) a += v;
      else if (!seen[o] || (!std::isnan(a) && (std::isnan(v) || (kind == Red::max ? v > a : v < a)))) a = v;
    } else {
      int64_t v = x.get_i64(i);
      int64_t& a = acci[o];
      if (kind == Red::sum || kind == Red::mean) a += v;
      else if (!seen[o] || (kind == Red::max ? v > a : v < a)) a = v;
    }
    seen[o] = 1;
  });
  for (int64_t o = 0; o < n; ++o) {
    if (fp) out.set_f64(o, kind == Red::mean ? accf[o] / double(count) : accf[o]);
    else out.set_i64(o, acci[o]);
  }
  return {out};
}

std::vector<TensorType> infer_argmax(const InferContext& ctx) {
  detail::expect_numeric(ctx, 0);
  const auto& s = ctx.inputs[0].shape;
  int64_t ax = ctx.axis(ctx.node.attr_int("axis"), s.size());
  return {{DType::i64, reduced_shape(s, {ax}, ctx.node.attr_bool("keepdim", false))}};
}

// outer x len x inner decomposition around one axis.
struct AxisSplit {
  int64_t outer, len, inner;
};
AxisSplit split_at(const std::vector<int64_t>& s, int64_t axis) {
  return {detail::product(s, 0, axis), s.empty() ? 1 : s[axis], detail::product(s, axis + 1, s.size())};
}

std::vector<HostTensor> ref_argmax(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  int64_t axis = detail::wrap_axis(ctx.node.attr_int("axis"), x.rank());
  AxisSplit sp = split_at(x.shape, axis);
  HostTensor out(DType::i64, ctx.out_shapes.at(0));
  if (sp.len == 0 && out.numel() > 0)
    detail::ref_fail(ctx, "argmax over an empty axis of input '" + ctx.node.inputs[0] + "' " + x.shape_string());
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t in = 0; in < sp.inner; ++in) {
      int64_t best = 0;
      double bv = x.get_as(o * sp.len * sp.inner + in);
      for (int64_t j = 1; j < sp.len && !std::isnan(bv); ++j) {
        double v = x.get_as((o * sp.len + j) * sp.inner + in);
        // NaN counts as the maximum (NumPy), and only a strictly larger value replaces the
        // current best, so the first maximum wins.
        if (std::isnan(v) || v > bv) best = j, bv = v;
      }
      out.set_i64(o * sp.inner + in, best);
    }
  return {out};
}

std::vector<HostTensor> ref_softmax(bool log, const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  int64_t axis = detail::wrap_axis(ctx.node.attr_int("axis", -1), x.rank());
  AxisSplit sp = split_at(x.shape, axis);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t o = 0; o < sp.outer; ++o)
    for (int64_t in = 0; in < sp.inner; ++in) {
      auto at = [&](int64_t j) { return (o * sp.len + j) * sp.inner + in; };
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < sp.len; ++j) mx = std::max(mx, x.get_f64(at(j)));
      double sum = 0;
      for (int64_t j = 0; j < sp.len; ++j) sum += std::exp(x.get_f64(at(j)) - mx);
      for (int64_t j = 0; j < sp.len; ++j) {
        double z = x.get_f64(at(j)) - mx;
        out.set_f64(at(j), log ? z - std::log(sum) : std::exp(z) / sum);
      }
    }
  return {out};
}

}  // namespace

void register_reduce_ops(Registry& r) {
  for (const RedDef& d : kReductions) {
    OpDef def;
    def.name = d.name;
    def.family = "reduce";
    def.doc = d.doc;
    def.attrs = {{"axes", AttrKind::ints, false, "axes to reduce (default: all)"},
                 {"keepdim", AttrKind::boolean, false, "keep reduced axes as size 1"}};
    Red kind = d.kind;
    def.infer = [kind](const InferContext& ctx) {
      detail::expect_numeric(ctx, 0);
      if (kind == Red::mean) ctx.expect_float(0);
      const auto& s = ctx.inputs[0].shape;
      auto axes = reduce_axes_infer(ctx, s.size());
      return std::vector<TensorType>{
          {ctx.inputs[0].dtype, reduced_shape(s, axes, ctx.node.attr_bool("keepdim", false))}};
    };
    def.reference = [kind](const RefContext& ctx) { return ref_reduce(kind, ctx); };
    r.add(std::move(def));
  }

  OpDef am;
  am.name = "argmax";
  am.family = "reduce";
  am.doc = "index of the first maximum along axis -> int64";
  am.attrs = {{"axis", AttrKind::integer, true, "axis"}, {"keepdim", AttrKind::boolean, false, "keep axis as 1"}};
  am.infer = infer_argmax;
  am.reference = ref_argmax;
  r.add(std::move(am));

  for (bool log : {false, true}) {
    OpDef sm;
    sm.name = log ? "log_softmax" : "softmax";
    sm.family = "reduce";
    sm.doc = log ? "log(softmax(x)) along axis" : "exp(x) / sum(exp(x)) along axis";
    sm.attrs = {{"axis", AttrKind::integer, false, "axis (default -1)"}};
    sm.infer = [](const InferContext& ctx) {
      ctx.expect_float(0);
      ctx.axis(ctx.node.attr_int("axis", -1), ctx.inputs[0].shape.size());
      return std::vector<TensorType>{ctx.inputs[0]};
    };
    sm.reference = [log](const RefContext& ctx) { return ref_softmax(log, ctx); };
    r.add(std::move(sm));
  }
}

}  // namespace dinoml::ops
