// Shape and data-movement ops: views (reshape, flatten, squeeze, unsqueeze), permute/transpose,
// concatenate, split, slice, expand, pad, embedding, gather, and the generators arange / full.
// Shape inference works on symbolic extents; where a rule needs a concrete value (a clamp in
// slice, a split point) it proves it from the dims' bounds or fails naming the axis and rule.
#include <algorithm>
#include <cmath>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {
using detail::describe_input;
using detail::is_const;
using ir::IntExpr;
using ir::Shape;

// ---- views --------------------------------------------------------------------------------

// Values of every dim at the diagonal of bucket bounds (k-th bound of each dim, plus the
// minimum): the points where a symbolic equality that cannot be proven is spot-checked.
std::vector<std::map<std::string, int64_t>> probe_points(const std::set<std::string>& names,
                                                         const std::map<std::string, ir::Dim>& dims) {
  size_t k_max = 0;
  for (const auto& n : names) {
    auto it = dims.find(n);
    if (it == dims.end()) return {};  // undeclared dim: nothing to probe with
    k_max = std::max(k_max, std::max<size_t>(it->second.buckets.size(), 1));
  }
  std::vector<std::map<std::string, int64_t>> pts(k_max + 1);
  for (const auto& n : names) {
    const auto& d = dims.at(n);
    pts[0][n] = d.min;
    for (size_t k = 0; k < k_max; ++k)
      pts[k + 1][n] = d.buckets.empty() ? d.max : d.buckets[std::min(k, d.buckets.size() - 1)];
  }
  return pts;
}

std::vector<TensorType> infer_reshape(const InferContext& ctx) {
  const auto& in = ctx.inputs[0];
  Shape target = ctx.node.attr_shape("shape");
  int infer_at = -1;
  Shape known_extents;
  for (size_t i = 0; i < target.size(); ++i) {
    if (is_const(target[i], -1)) {
      if (infer_at >= 0) ctx.fail("shape " + ir::shape_to_string(target) + " has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (target[i].is_const() && target[i].const_value() < 0) {
      ctx.fail("shape " + ir::shape_to_string(target) + " has a negative extent other than -1");
    } else known_extents.push_back(target[i]);
  }
  IntExpr known = detail::shape_product(known_extents, 0, known_extents.size());
  IntExpr numel = detail::shape_product(in.shape, 0, in.shape.size());
  std::string what = "cannot reshape " + describe_input(ctx, 0) + " to " + ir::shape_to_string(target);
  if (infer_at >= 0) {
    if (is_const(known, 0)) ctx.fail(what + ": -1 is ambiguous next to a zero extent");
    auto q = detail::exact_div(numel, known);
    if (!q && numel.is_const() && known.is_const())
      ctx.fail(what + ": " + std::to_string(numel.const_value()) + " elements are not divisible by " +
               std::to_string(known.const_value()));
    // Not provably exact (e.g. [b] -> [-1, 4]): floor division; the dims' divisibility is the
    // model author's promise and the reference checks it at run time.
    target[infer_at] = q ? *q : numel / known;
    return {{in.dtype, target}};
  }
  // Equal constant counts (0 and 0 included, which exact_div cannot divide) match.
  if (numel.is_const() && known.is_const() && numel.const_value() == known.const_value()) return {{in.dtype, target}};
  auto q = detail::exact_div(numel, known);
  if (q && is_const(*q, 1)) return {{in.dtype, target}};
  if (numel.is_const() && known.is_const())
    ctx.fail(what + ": " + std::to_string(numel.const_value()) + " vs " + std::to_string(known.const_value()) +
             " elements");
  std::set<std::string> names;
  numel.collect_dims(names);
  known.collect_dims(names);
  for (const auto& pt : probe_points(names, ctx.dims)) {
    int64_t a = numel.eval(pt), b = known.eval(pt);
    if (a != b)
      ctx.fail(what + ": element counts '" + numel.to_string() + "' and '" + known.to_string() + "' differ (" +
               std::to_string(a) + " vs " + std::to_string(b) + " at a bucket bound)");
  }
  return {{in.dtype, target}};
}

std::vector<TensorType> infer_flatten(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  int64_t r = s.size();
  if (r == 0) return {{ctx.inputs[0].dtype, {1}}};
  int64_t a = ctx.axis(ctx.node.attr_int("start_dim", 0), r, "start_dim");
  int64_t b = ctx.axis(ctx.node.attr_int("end_dim", -1), r, "end_dim");
  if (a > b) ctx.fail("start_dim " + std::to_string(a) + " comes after end_dim " + std::to_string(b));
  Shape out(s.begin(), s.begin() + a);
  out.push_back(detail::shape_product(s, a, b + 1));
  out.insert(out.end(), s.begin() + b + 1, s.end());
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<TensorType> infer_squeeze(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  std::vector<int64_t> axes;
  if (ctx.node.has_attr("axes")) {
    axes = detail::normalize_axes(ctx, ctx.node.attr_ints("axes"), s.size(), "axes");
    for (auto a : axes)
      if (!is_const(s[a], 1))
        ctx.fail("axis " + std::to_string(a) + " of " + describe_input(ctx, 0) + " has extent '" + s[a].to_string() +
                 "', not 1");
  } else {
    for (size_t i = 0; i < s.size(); ++i)
      if (is_const(s[i], 1)) axes.push_back(i);
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (std::find(axes.begin(), axes.end(), int64_t(i)) == axes.end()) out.push_back(s[i]);
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<TensorType> infer_unsqueeze(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  const auto& raw = ctx.node.attr_ints("axes");
  int64_t r = s.size() + raw.size();
  auto axes = detail::normalize_axes(ctx, raw, r, "axes");
  Shape out;
  size_t src = 0;
  for (int64_t i = 0; i < r; ++i)
    out.push_back(std::binary_search(axes.begin(), axes.end(), i) ? IntExpr(1) : s[src++]);
  return {{ctx.inputs[0].dtype, out}};
}

// ---- permute / transpose ------------------------------------------------------------------
std::vector<int64_t> permutation(const ir::Node& node, int64_t rank) {
  if (node.op == "transpose") {
    std::vector<int64_t> p(rank);
    for (int64_t i = 0; i < rank; ++i) p[i] = i;
    std::swap(p[detail::wrap_axis(node.attr_int("dim0"), rank)], p[detail::wrap_axis(node.attr_int("dim1"), rank)]);
    return p;
  }
  std::vector<int64_t> p = node.attr_ints("dims");
  for (auto& d : p) d = detail::wrap_axis(d, rank);
  return p;
}

std::vector<TensorType> infer_permute(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  int64_t r = s.size();
  if (ctx.node.op == "transpose") {
    ctx.axis(ctx.node.attr_int("dim0"), r, "dim0");
    ctx.axis(ctx.node.attr_int("dim1"), r, "dim1");
  } else {
    const auto& dims = ctx.node.attr_ints("dims");
    if (static_cast<int64_t>(dims.size()) != r)
      ctx.fail("dims has " + std::to_string(dims.size()) + " entries but " + describe_input(ctx, 0) + " has rank " +
               std::to_string(r));
    detail::normalize_axes(ctx, dims, r, "dims");  // range + duplicates => a permutation
  }
  Shape out;
  for (int64_t d : permutation(ctx.node, r)) out.push_back(s[d]);
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_permute(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  auto p = permutation(ctx.node, x.rank());
  HostTensor out(x.dtype, ctx.out_shapes.at(0));
  auto xs = contiguous_strides(x.shape);
  detail::for_each_index(out.shape, [&](const std::vector<int64_t>& idx, int64_t o) {
    int64_t src = 0;
    for (size_t k = 0; k < p.size(); ++k) src += idx[k] * xs[p[k]];
    detail::copy_element(x, src, out, o);
  });
  return {out};
}

// ---- concatenate / split ------------------------------------------------------------------
std::vector<TensorType> infer_concat(const InferContext& ctx) {
  detail::expect_all_same_dtype(ctx);
  const auto& s0 = ctx.inputs[0].shape;
  int64_t axis = ctx.axis(ctx.node.attr_int("axis", 0), s0.size());
  Shape out = s0;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const auto& s = ctx.inputs[i].shape;
    if (s.size() != s0.size())
      ctx.fail("inputs " + describe_input(ctx, 0) + " and " + describe_input(ctx, i) + " differ in rank");
    for (size_t a = 0; a < s.size(); ++a)
      if (int64_t(a) != axis)
        ctx.expect_same_extent(s0[a], s[a], "axis " + std::to_string(a) + " of " + describe_input(ctx, 0) + " and " +
                                                describe_input(ctx, i) + " must match outside the concat axis");
    out[axis] = out[axis] + s[axis];
  }
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_concat(const RefContext& ctx) {
  int64_t axis = detail::wrap_axis(ctx.node.attr_int("axis", 0), ctx.in(0).rank());
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  int64_t base = 0;
  for (const HostTensor* x : ctx.inputs) {
    detail::for_each_index(x->shape, [&](const std::vector<int64_t>& idx, int64_t i) {
      std::vector<int64_t> o = idx;
      o[axis] += base;
      detail::copy_element(*x, i, out, detail::linear_offset(o, out.shape));
    });
    base += x->shape[axis];
  }
  return {out};
}

std::vector<TensorType> infer_split(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  int64_t axis = ctx.axis(ctx.node.attr_int("axis", 0), s.size());
  const auto& sizes = ctx.node.attr_ints("sizes");
  if (sizes.empty()) ctx.fail("sizes must not be empty");
  int64_t total = 0;
  for (auto v : sizes) {
    if (v < 0) ctx.fail("sizes has a negative entry " + std::to_string(v));
    total += v;
  }
  if (!s[axis].is_const())
    ctx.fail("split axis " + std::to_string(axis) + " of " + describe_input(ctx, 0) + " is symbolic ('" +
             s[axis].to_string() + "'); split needs a static extent");
  if (s[axis].const_value() != total)
    ctx.fail("sizes sum to " + std::to_string(total) + " but axis " + std::to_string(axis) + " of " +
             describe_input(ctx, 0) + " has extent " + std::to_string(s[axis].const_value()));
  std::vector<TensorType> outs;
  for (auto v : sizes) {
    Shape o = s;
    o[axis] = v;
    outs.push_back({ctx.inputs[0].dtype, o});
  }
  return outs;
}

std::vector<HostTensor> ref_split(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  int64_t axis = detail::wrap_axis(ctx.node.attr_int("axis", 0), x.rank());
  std::vector<HostTensor> outs;
  int64_t base = 0;
  for (size_t k = 0; k < ctx.out_shapes.size(); ++k) {
    HostTensor out(x.dtype, ctx.out_shapes[k]);
    detail::for_each_index(out.shape, [&](const std::vector<int64_t>& idx, int64_t o) {
      std::vector<int64_t> src = idx;
      src[axis] += base;
      detail::copy_element(x, detail::linear_offset(src, x.shape), out, o);
    });
    base += out.shape[axis];
    outs.push_back(std::move(out));
  }
  return outs;
}

// ---- slice --------------------------------------------------------------------------------
constexpr int64_t kSliceToEnd = int64_t(1) << 31;  // an end >= 2^31 means "to the end"

// starts / ends are shape-typed: ints, or symbolic extents (x[:, :seq] on a [1, 512] buffer, the
// GPT-2 mask's [key_len - query_len : key_len]); the kernels clamp them at run time as NumPy does.
struct SliceSpec {
  ir::Shape starts, ends;
  std::vector<int64_t> axes, steps;
};
SliceSpec slice_spec(const ir::Node& node, int64_t rank) {
  SliceSpec s;
  s.starts = node.attr_shape("starts");
  s.ends = node.attr_shape("ends");
  std::vector<int64_t> dflt_axes(s.starts.size());
  for (size_t i = 0; i < dflt_axes.size(); ++i) dflt_axes[i] = i;
  s.axes = node.attr_ints("axes", dflt_axes);
  s.steps = node.attr_ints("steps", std::vector<int64_t>(s.starts.size(), 1));
  for (auto& a : s.axes) a = detail::wrap_axis(a, rank);
  return s;
}

// NumPy's clamped start/end for a concrete extent and positive step.
void slice_bounds(int64_t extent, int64_t start, int64_t end, int64_t& s, int64_t& e) {
  s = start < 0 ? start + extent : start;
  e = end >= kSliceToEnd ? extent : (end < 0 ? end + extent : end);
  s = std::clamp<int64_t>(s, 0, extent);
  e = std::clamp<int64_t>(e, 0, extent);
}

// Output extent of one sliced axis. On a symbolic extent E the NumPy clamps must be provable
// no-ops from E's bounds: every start/end offset must be <= min(E) (so x[:, 1:], x[:, -2:] and
// x[:, :-1] work on a dynamic axis, x[:, :10] only if the dim's minimum is >= 10). Each bound is
// kept as "absolute k" or "E - k" so that lengths like (E - 0) - (E - 2) come out as constants.
IntExpr slice_extent(const InferContext& ctx, size_t axis, const IntExpr& E, int64_t start, int64_t end,
                     int64_t step) {
  auto ceil_div = [&](int64_t n) { return n > 0 ? (n + step - 1) / step : 0; };
  if (E.is_const()) {
    int64_t s, e;
    slice_bounds(E.const_value(), start, end, s, e);
    return ceil_div(e - s);
  }
  ir::Interval b;
  try {
    b = E.bounds(ctx.dims);
  } catch (const IrError& err) {
    ctx.fail("slice of axis " + std::to_string(axis) + " ('" + E.to_string() + "'): " + err.what());
  }
  struct Bound {
    bool from_end;  // value is E - k
    int64_t k;
  };
  auto bound = [&](int64_t v, const char* what) -> Bound {
    int64_t mag = v < 0 ? -v : v;
    if (mag > b.lo)
      ctx.fail(std::string("slice ") + what + " " + std::to_string(v) + " on axis " + std::to_string(axis) + " of " +
               describe_input(ctx, 0) + ": the extent '" + E.to_string() + "' may be as small as " +
               std::to_string(b.lo) + ", so NumPy's clamp cannot be resolved symbolically (offsets on a dynamic " +
               "axis must be <= the dim's minimum)");
    return {v < 0, mag};
  };
  Bound s = bound(start, "start");
  Bound e = end >= kSliceToEnd ? Bound{true, 0} : bound(end, "end");
  if (s.from_end == e.from_end) return ceil_div(s.from_end ? s.k - e.k : e.k - s.k);
  // Exactly one bound depends on E: the length is E - c (end from the end) or c - E.
  IntExpr n = e.from_end ? E - IntExpr(e.k + s.k) : IntExpr(e.k + s.k) - E;
  if (n.bounds(ctx.dims).lo < 0)
    ctx.fail("slice [" + std::to_string(start) + ":" + std::to_string(end) + "] on axis " + std::to_string(axis) +
             " of " + describe_input(ctx, 0) + " may be empty or reversed for some values of '" + E.to_string() +
             "'; its length cannot be expressed symbolically");
  return step == 1 ? n : (n + IntExpr(step - 1)) / IntExpr(step);
}

// Output extent of one axis sliced with a symbolic start or end. As on a symbolic extent, NumPy's
// clamps must be provable no-ops: a symbolic bound must lie in [0, E] for every value of the dims
// (a constant one obeys slice_extent's rule), and the length must not be negative.
IntExpr slice_extent_symbolic(const InferContext& ctx, size_t axis, const IntExpr& E, const IntExpr& start,
                              const IntExpr& end, int64_t step) {
  auto lo = [&](const IntExpr& v, const std::string& what) {
    try {
      return v.bounds(ctx.dims).lo;
    } catch (const IrError& err) {
      ctx.fail("slice of axis " + std::to_string(axis) + ": " + what + " '" + v.to_string() + "': " + err.what());
    }
  };
  const int64_t e_lo = lo(E, "extent");
  auto resolve = [&](const IntExpr& v, const char* what, bool is_end) -> IntExpr {
    if (v.is_const()) {
      const int64_t c = v.const_value();
      if (is_end && c >= kSliceToEnd) return E;
      const int64_t mag = c < 0 ? -c : c;
      if (mag > e_lo)
        ctx.fail(std::string("slice ") + what + " " + std::to_string(c) + " on axis " + std::to_string(axis) + " of " +
                 describe_input(ctx, 0) + ": the extent '" + E.to_string() + "' may be as small as " +
                 std::to_string(e_lo) + ", so NumPy's clamp cannot be resolved symbolically");
      return c < 0 ? E - IntExpr(mag) : IntExpr(c);
    }
    if (lo(v, what) < 0 || lo(E - v, what) < 0)
      ctx.fail(std::string("slice ") + what + " '" + v.to_string() + "' on axis " + std::to_string(axis) + " of " +
               describe_input(ctx, 0) + " may fall outside [0, " + E.to_string() +
               "] for some values of its dims (a symbolic bound must stay within the extent)");
    return v;
  };
  const IntExpr n = resolve(end, "end", true) - resolve(start, "start", false);
  if (lo(n, "length") < 0)
    ctx.fail("slice [" + start.to_string() + ":" + end.to_string() + "] on axis " + std::to_string(axis) + " of " +
             describe_input(ctx, 0) + " may be reversed for some values of its dims (length '" + n.to_string() + "')");
  return step == 1 ? n : (n + IntExpr(step - 1)) / IntExpr(step);
}

std::vector<TensorType> infer_slice(const InferContext& ctx) {
  const auto& in = ctx.inputs[0];
  int64_t r = in.shape.size();
  const ir::Shape starts = ctx.node.attr_shape("starts");
  const ir::Shape ends = ctx.node.attr_shape("ends");
  if (starts.size() != ends.size())
    ctx.fail("starts has " + std::to_string(starts.size()) + " entries, ends " + std::to_string(ends.size()));
  if (ctx.node.has_attr("axes") && ctx.node.attr_ints("axes").size() != starts.size())
    ctx.fail("axes must have one entry per start");
  if (ctx.node.has_attr("steps") && ctx.node.attr_ints("steps").size() != starts.size())
    ctx.fail("steps must have one entry per start");
  if (!ctx.node.has_attr("axes") && static_cast<int64_t>(starts.size()) > r)
    ctx.fail(std::to_string(starts.size()) + " starts for " + describe_input(ctx, 0));
  if (r == 0 && !starts.empty()) ctx.fail("cannot slice " + describe_input(ctx, 0) + ": it has rank 0");
  if (ctx.node.has_attr("axes")) detail::normalize_axes(ctx, ctx.node.attr_ints("axes"), r, "axes");
  SliceSpec sp = slice_spec(ctx.node, r);
  Shape out = in.shape;
  for (size_t i = 0; i < sp.axes.size(); ++i) {
    if (sp.steps[i] < 1) ctx.fail("steps must be positive, got " + std::to_string(sp.steps[i]));
    const IntExpr& E = in.shape[sp.axes[i]];
    out[sp.axes[i]] = sp.starts[i].is_const() && sp.ends[i].is_const()
                          ? slice_extent(ctx, sp.axes[i], E, sp.starts[i].const_value(), sp.ends[i].const_value(),
                                         sp.steps[i])
                          : slice_extent_symbolic(ctx, sp.axes[i], E, sp.starts[i], sp.ends[i], sp.steps[i]);
  }
  return {{in.dtype, out}};
}

std::vector<HostTensor> ref_slice(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  SliceSpec sp = slice_spec(ctx.node, x.rank());
  std::vector<int64_t> first(x.rank(), 0), step(x.rank(), 1), shape = x.shape;
  for (size_t i = 0; i < sp.axes.size(); ++i) {
    int64_t a = sp.axes[i], s, e;
    slice_bounds(x.shape[a], sp.starts[i].eval(ctx.dims), sp.ends[i].eval(ctx.dims), s, e);
    first[a] = s;
    step[a] = sp.steps[i];
    shape[a] = e > s ? (e - s + step[a] - 1) / step[a] : 0;
  }
  HostTensor out(x.dtype, shape);
  detail::for_each_index(shape, [&](const std::vector<int64_t>& idx, int64_t o) {
    std::vector<int64_t> src(idx.size());
    for (size_t k = 0; k < idx.size(); ++k) src[k] = first[k] + idx[k] * step[k];
    detail::copy_element(x, detail::linear_offset(src, x.shape), out, o);
  });
  return {out};
}

// ---- expand / pad -------------------------------------------------------------------------
std::vector<TensorType> infer_expand(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  Shape t = ctx.node.attr_shape("shape");
  if (t.size() < s.size())
    ctx.fail("target shape " + ir::shape_to_string(t) + " has lower rank than " + describe_input(ctx, 0));
  size_t lead = t.size() - s.size();
  for (size_t i = 0; i < t.size(); ++i) {
    if (i < lead) {
      if (t[i].is_const() && t[i].const_value() < 0)
        ctx.fail("new leading axis " + std::to_string(i) + " of " + ir::shape_to_string(t) + " needs an extent");
      continue;
    }
    const IntExpr& e = s[i - lead];
    if (is_const(t[i], -1) || t[i] == e) t[i] = e;
    else if (!is_const(e, 1))
      ctx.fail("cannot expand axis " + std::to_string(i - lead) + " of " + describe_input(ctx, 0) + " (extent '" +
               e.to_string() + "') to '" + t[i].to_string() + "': only size-1 axes broadcast");
  }
  return {{ctx.inputs[0].dtype, t}};
}

std::vector<HostTensor> ref_expand(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  HostTensor out(x.dtype, ctx.out_shapes.at(0));
  detail::for_each_index(out.shape, [&](const std::vector<int64_t>& idx, int64_t o) {
    detail::copy_element(x, broadcast_offset(idx, x.shape), out, o);
  });
  return {out};
}

std::vector<TensorType> infer_pad(const InferContext& ctx) {
  const auto& s = ctx.inputs[0].shape;
  const auto& pads = ctx.node.attr_ints("pads");
  std::string mode = ctx.node.attr_str("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    ctx.fail("mode '" + mode + "' is not one of constant, reflect, edge");
  if (pads.size() != 2 * s.size())
    ctx.fail("pads has " + std::to_string(pads.size()) + " entries; " + describe_input(ctx, 0) + " needs " +
             std::to_string(2 * s.size()) + " (all begins, then all ends)");
  Shape out = s;
  for (size_t a = 0; a < s.size(); ++a) {
    int64_t b = pads[a], e = pads[a + s.size()];
    if (b < 0 || e < 0) ctx.fail("pads must be non-negative (axis " + std::to_string(a) + ")");
    if ((b || e) && mode != "constant") {
      // reflect needs pad < extent; edge needs a non-empty axis.
      int64_t need = mode == "reflect" ? std::max(b, e) + 1 : 1;
      int64_t lo = s[a].is_const() ? s[a].const_value() : s[a].bounds(ctx.dims).lo;
      if (lo < need)
        ctx.fail(mode + " padding of axis " + std::to_string(a) + " of " + describe_input(ctx, 0) +
                 " needs an extent >= " + std::to_string(need));
    }
    out[a] = s[a] + IntExpr(b + e);
  }
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_pad(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const auto& pads = ctx.node.attr_ints("pads");
  std::string mode = ctx.node.attr_str("mode", "constant");
  double value = ctx.node.attr_float("value", 0.0);
  HostTensor out(x.dtype, ctx.out_shapes.at(0));
  size_t r = x.shape.size();
  detail::for_each_index(out.shape, [&](const std::vector<int64_t>& idx, int64_t o) {
    std::vector<int64_t> src(r);
    for (size_t a = 0; a < r; ++a) {
      int64_t i = idx[a] - pads[a], n = x.shape[a];
      if (i < 0 || i >= n) {
        if (mode == "constant") return out.set_as(o, value);
        if (mode == "edge") i = std::clamp<int64_t>(i, 0, n - 1);
        else i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect, edge element not repeated
      }
      src[a] = i;
    }
    detail::copy_element(x, detail::linear_offset(src, x.shape), out, o);
  });
  return {out};
}

// ---- embedding / gather -------------------------------------------------------------------
std::vector<TensorType> infer_embedding(const InferContext& ctx) {
  detail::expect_index_dtype(ctx, 0);
  const auto& w = ctx.inputs[1].shape;
  if (w.size() != 2) ctx.fail("weight " + describe_input(ctx, 1) + " must be [V, D]");
  Shape out = ctx.inputs[0].shape;
  out.push_back(w[1]);
  return {{ctx.inputs[1].dtype, out}};
}

int64_t checked_index(const RefContext& ctx, const HostTensor& idx, int64_t i, int64_t n, bool wrap) {
  int64_t v = idx.get_i64(i);
  if (wrap && v < 0) v += n;
  if (v < 0 || v >= n)
    detail::ref_fail(ctx, "index " + std::to_string(idx.get_i64(i)) + " at position " + std::to_string(i) +
                              " of '" + ctx.node.inputs[wrap ? 1 : 0] + "' is out of range [0, " + std::to_string(n) +
                              ")");
  return v;
}

std::vector<HostTensor> ref_embedding(const RefContext& ctx) {
  const HostTensor& idx = ctx.in(0);
  const HostTensor& w = ctx.in(1);
  int64_t V = w.shape[0], D = w.shape[1];
  HostTensor out(w.dtype, ctx.out_shapes.at(0));
  for (int64_t i = 0; i < idx.numel(); ++i) {
    int64_t row = checked_index(ctx, idx, i, V, false);
    for (int64_t d = 0; d < D; ++d) detail::copy_element(w, row * D + d, out, i * D + d);
  }
  return {out};
}

std::vector<TensorType> infer_gather(const InferContext& ctx) {
  detail::expect_index_dtype(ctx, 1);
  const auto& x = ctx.inputs[0].shape;
  if (x.empty()) ctx.fail("x " + describe_input(ctx, 0) + " must have rank >= 1");
  int64_t axis = ctx.axis(ctx.node.attr_int("axis", 0), x.size());
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), ctx.inputs[1].shape.begin(), ctx.inputs[1].shape.end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_gather(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const HostTensor& idx = ctx.in(1);
  int64_t axis = detail::wrap_axis(ctx.node.attr_int("axis", 0), x.rank());
  int64_t outer = detail::product(x.shape, 0, axis), n = x.shape[axis];
  int64_t inner = detail::product(x.shape, axis + 1, x.shape.size()), m = idx.numel();
  HostTensor out(x.dtype, ctx.out_shapes.at(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) {
      int64_t src = checked_index(ctx, idx, j, n, true);
      for (int64_t i = 0; i < inner; ++i)
        detail::copy_element(x, (o * n + src) * inner + i, out, (o * m + j) * inner + i);
    }
  return {out};
}

// ---- generators ---------------------------------------------------------------------------
// `length` (one extent, may be symbolic: arange(seq)) replaces `end` when the element count is
// only known at run time; the kernels fill numel(output) elements, so both forms lower alike.
std::vector<TensorType> infer_arange(const InferContext& ctx) {
  double step = ctx.node.attr_float("step", 1);
  if (step == 0) ctx.fail("step must not be 0");
  ir::DType dt = detail::dtype_attr(ctx, "dtype", "int64");
  if (ir::is_bool(dt)) ctx.fail("dtype must be numeric, got bool");
  if (ctx.node.has_attr("length")) {
    if (ctx.node.has_attr("end")) ctx.fail("give either end or length, not both");
    Shape len = ctx.node.attr_shape("length");
    if (len.size() != 1) ctx.fail("length must be one extent, got " + ir::shape_to_string(len));
    if (len[0].is_const() && len[0].const_value() < 0) ctx.fail("length must not be negative");
    if (!len[0].is_const()) {
      int64_t lo = 0;
      try {
        lo = len[0].bounds(ctx.dims).lo;
      } catch (const IrError& err) {
        ctx.fail("length '" + len[0].to_string() + "': " + err.what());
      }
      if (lo < 0)
        ctx.fail("length '" + len[0].to_string() + "' may be negative for some values of its dims (as small as " +
                 std::to_string(lo) + ")");
    }
    return {{dt, len}};
  }
  if (!ctx.node.has_attr("end")) ctx.fail("needs attribute end (or length)");
  double start = ctx.node.attr_float("start", 0), end = ctx.node.attr_float("end");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((end - start) / step)));
  return {{dt, {n}}};
}

std::vector<HostTensor> ref_arange(const RefContext& ctx) {
  double start = ctx.node.attr_float("start", 0), step = ctx.node.attr_float("step", 1);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t i = 0; i < out.numel(); ++i) out.set_as(i, start + double(i) * step);
  return {out};
}

std::vector<TensorType> infer_full(const InferContext& ctx) {
  Shape s = ctx.node.attr_shape("shape");
  for (const auto& e : s)
    if (e.is_const() && e.const_value() < 0) ctx.fail("shape " + ir::shape_to_string(s) + " has a negative extent");
  return {{detail::dtype_attr(ctx, "dtype", "float32"), s}};
}

std::vector<HostTensor> ref_full(const RefContext& ctx) {
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  double v = ctx.node.attr_float("value");
  for (int64_t i = 0; i < out.numel(); ++i) out.set_as(i, v);
  return {out};
}

OpDef make(const char* name, const char* doc, int min_in, int max_in, std::vector<AttrSpec> attrs,
           std::function<std::vector<TensorType>(const InferContext&)> infer,
           std::function<std::vector<HostTensor>(const RefContext&)> ref) {
  OpDef d;
  d.name = name;
  d.family = "shape";
  d.doc = doc;
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.attrs = std::move(attrs);
  d.infer = std::move(infer);
  d.reference = std::move(ref);
  return d;
}

std::vector<HostTensor> ref_view(const RefContext& ctx) { return {detail::reshaped_copy(ctx, 0, ctx.out_shapes.at(0))}; }

}  // namespace

void register_shape_ops(Registry& r) {
  using K = AttrKind;
  auto view = [](OpDef d) {
    d.view = true;
    return d;
  };
  r.add(view(make("reshape", "same elements, new shape (one -1 inferred)", 1, 1, {{"shape", K::shape, true, ""}},
                  infer_reshape, ref_view)));
  r.add(view(make("flatten", "merge axes start_dim..end_dim", 1, 1,
                  {{"start_dim", K::integer, false, "0"}, {"end_dim", K::integer, false, "-1"}}, infer_flatten,
                  ref_view)));
  r.add(view(make("squeeze", "drop size-1 axes", 1, 1, {{"axes", K::ints, false, "default: all static 1s"}},
                  infer_squeeze, ref_view)));
  r.add(view(make("unsqueeze", "insert size-1 axes at output positions", 1, 1, {{"axes", K::ints, true, ""}},
                  infer_unsqueeze, ref_view)));
  r.add(make("permute", "reorder axes", 1, 1,
             {{"dims", K::ints, true, ""},
              {"layout_edge", K::integer, false,
               "0; 1 marks an identity copy the CUDA lowering inserted at a channels-last conv's edge (it may store "
               "the conv side NHWC)"}},
             infer_permute, ref_permute));
  r.add(make("transpose", "swap two axes", 1, 1, {{"dim0", K::integer, true, ""}, {"dim1", K::integer, true, ""}},
             infer_permute, ref_permute));
  r.add(make("concatenate", "join along axis", 1, -1, {{"axis", K::integer, false, "0"}}, infer_concat, ref_concat));
  OpDef split = make("split", "cut along axis into len(sizes) outputs", 1, 1,
                     {{"sizes", K::ints, true, ""}, {"axis", K::integer, false, "0"}}, infer_split, ref_split);
  split.num_outputs = -1;
  r.add(std::move(split));
  r.add(make("slice", "NumPy basic slicing with positive steps", 1, 1,
             {{"starts", K::shape, true, "ints or symbolic extents"},
              {"ends", K::shape, true, "ints or symbolic extents; >= 2^31: to the end"}, {"axes", K::ints, false, ""},
              {"steps", K::ints, false, ""}},
             infer_slice, ref_slice));
  r.add(make("expand", "broadcast copy to shape (-1 keeps)", 1, 1, {{"shape", K::shape, true, ""}}, infer_expand,
             ref_expand));
  r.add(make("pad", "pad with constant / reflect / edge", 1, 1,
             {{"pads", K::ints, true, "begins then ends"}, {"mode", K::string, false, "constant"},
              {"value", K::floating, false, "0.0"}},
             infer_pad, ref_pad));
  r.add(make("embedding", "rows of weight[V, D] selected by indices", 2, 2, {}, infer_embedding, ref_embedding));
  r.add(make("gather", "NumPy take along axis", 2, 2, {{"axis", K::integer, false, "0"}}, infer_gather, ref_gather));
  r.add(make("arange", "start, start+step, ... < end", 0, 0,
             {{"start", K::floating, false, "0"}, {"end", K::floating, false, "required unless length is given"},
              {"step", K::floating, false, "1"}, {"dtype", K::string, false, "int64"},
              {"length", K::shape, false, "[n]: the element count instead of end; may be symbolic"}},
             infer_arange, ref_arange));
  r.add(make("full", "tensor of shape filled with value", 0, 0,
             {{"shape", K::shape, true, ""}, {"value", K::floating, true, ""}, {"dtype", K::string, false, "float32"}},
             infer_full, ref_full));
}

}  // namespace dinoml::ops
