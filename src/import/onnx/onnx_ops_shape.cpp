// ONNX shape and data-movement operators → DinoML reshape/squeeze/unsqueeze/permute/concatenate/
// split/slice/expand/pad/gather/arange/full, plus the import-time evaluation of shape
// computations (Shape → Gather → Concat → Reshape chains of exported models): their values are
// SymValues (IntExpr per element), so a Reshape of x[batch, 8] to Shape(x)[0] × 2 × 4 becomes a
// DinoML reshape to [batch, 2, 4].
#include <algorithm>
#include <cstring>
#include <limits>

#include "import/onnx/onnx_context.h"
#include "ir/error.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

bool all_const(const SymValue& s) {
  for (const auto& e : s.values)
    if (!e.is_const()) return false;
  return true;
}

ops::HostTensor ints_tensor(const std::vector<int64_t>& v, bool scalar = false) {
  ops::HostTensor h(DType::i64, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) h.set_i64(static_cast<int64_t>(i), v[i]);
  return h;
}

std::vector<int64_t> axes_input_or_attr(Importer& im, NodeView& n, int input_opset, const char* attr = "axes") {
  if (n.opset >= input_opset) return n.has_input(1) ? im.ints_of(n, 1, attr) : std::vector<int64_t>{};
  return n.ints(attr);
}

// ---- Constant / Shape / Size -----------------------------------------------------------------

void convert_constant(Importer& im, NodeView& n) {
  ops::HostTensor v;
  bool set = false;
  if (const auto* t = n.tensor("value")) {
    v = tensor_from_proto(*t, im.base_dir);
    if (widened_storage(t->data_type()) && n.has_output(0)) im.wide[n.p.output(0)] = t->data_type();
    set = true;
  }
  if (n.has("value_float")) { v = ops::HostTensor(DType::f32, {}); v.set_f64(0, n.f("value_float", 0)); set = true; }
  if (n.has("value_floats")) {
    auto f = n.floats("value_floats");
    v = ops::HostTensor(DType::f32, {static_cast<int64_t>(f.size())});
    for (size_t i = 0; i < f.size(); ++i) v.set_f64(static_cast<int64_t>(i), f[i]);
    set = true;
  }
  if (n.has("value_int")) { v = ints_tensor({n.i("value_int", 0)}, true); set = true; }
  if (n.has("value_ints")) { v = ints_tensor(n.ints("value_ints")); set = true; }
  if (n.has("value_string") || n.has("value_strings")) throw Unsupported("string constants");
  if (n.has("sparse_value")) throw Unsupported("sparse constants");
  if (!set) throw Invalid("Constant without a value");
  im.known[n.p.output(0)] = std::move(v);
}

void convert_shape(Importer& im, NodeView& n) {
  const auto shape = im.in_type(n, 0).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  int64_t start = n.i("start", 0), end = n.i("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  SymValue s;
  for (int64_t i = start; i < end; ++i) s.values.push_back(shape[static_cast<size_t>(i)]);
  im.set_sym(n, 0, s);
}

void convert_size(Importer& im, NodeView& n) {
  SymValue s;
  s.scalar = true;
  s.values.push_back(ir::shape_numel(im.in_type(n, 0).shape));
  im.set_sym(n, 0, s);
}

// ---- symbolic evaluation of shape arithmetic -----------------------------------------------------

// Broadcast elementwise over SymValues (rank 0/1).
bool sym_binary(Importer& im, NodeView& n, const SymValue& a, const SymValue& b) {
  const size_t na = a.values.size(), nb = b.values.size();
  if (na != nb && na != 1 && nb != 1) return false;
  SymValue out;
  out.scalar = a.scalar && b.scalar;
  const size_t len = std::max(na, nb);
  const std::string& op = n.op();
  for (size_t i = 0; i < len; ++i) {
    const IntExpr& x = a.values[na == 1 ? 0 : i];
    const IntExpr& y = b.values[nb == 1 ? 0 : i];
    if (op == "Add") out.values.push_back(x + y);
    else if (op == "Sub") out.values.push_back(x - y);
    else if (op == "Mul") out.values.push_back(x * y);
    else if (op == "Div") {
      if (y.is_const() && y.const_value() <= 0) return false;  // ONNX truncates; floor == trunc for positives only
      out.values.push_back(x / y);
    } else return false;
  }
  im.set_sym(n, 0, out);
  return true;
}

// Handles a node whose inputs include a SymValue with symbolic entries. Returns false to let the
// regular converter run (which then reports the value as unusable tensor data).
bool eval_symbolic(Importer& im, NodeView& n) {
  bool has_symbolic = false;
  for (size_t k = 0; k < n.num_inputs(); ++k) {
    if (!n.has_input(k)) continue;
    auto it = im.syms.find(n.input(k));
    if (it != im.syms.end() && !all_const(it->second)) has_symbolic = true;
  }
  if (!has_symbolic) return false;
  const std::string& op = n.op();
  auto sym = [&](size_t k) { return im.try_sym(n.input(k)); };
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    auto a = sym(0), b = sym(1);
    return a && b && sym_binary(im, n, *a, *b);
  }
  if (op == "Identity" || op == "Cast") {
    if (op == "Cast") {
      const int64_t to = n.i_req("to");
      if (to != onnx::TensorProto::INT64 && to != onnx::TensorProto::INT32) return false;
    }
    im.set_sym(n, 0, *sym(0));
    return true;
  }
  if (op == "Concat") {
    n.i_req("axis");
    SymValue out;
    for (size_t k = 0; k < n.num_inputs(); ++k) {
      auto s = sym(k);
      if (!s || s->scalar) return false;
      out.values.insert(out.values.end(), s->values.begin(), s->values.end());
    }
    im.set_sym(n, 0, out);
    return true;
  }
  if (op == "Gather") {
    auto data = sym(0);
    const auto* idx = im.in_value(n, 1);
    if (!data || data->scalar || !idx || idx->rank() > 1 || n.i("axis", 0) != 0) return false;
    SymValue out;
    out.scalar = idx->rank() == 0;
    const int64_t len = static_cast<int64_t>(data->values.size());
    for (int64_t i = 0; i < idx->numel(); ++i) {
      int64_t j = idx->get_i64(i);
      if (j < 0) j += len;
      if (j < 0 || j >= len) throw Invalid("Gather index " + std::to_string(idx->get_i64(i)) + " out of range");
      out.values.push_back(data->values[static_cast<size_t>(j)]);
    }
    im.set_sym(n, 0, out);
    return true;
  }
  if (op == "Unsqueeze") {
    auto s = sym(0);
    if (!s || !s->scalar) return false;
    auto axes = n.opset >= 13 ? im.ints_of(n, 1, "axes") : n.ints("axes");
    if (axes.size() != 1 || (axes[0] != 0 && axes[0] != -1)) return false;
    s->scalar = false;
    im.set_sym(n, 0, *s);
    return true;
  }
  if (op == "Squeeze") {
    auto s = sym(0);
    if (!s || s->scalar || s->values.size() != 1) return false;
    if (n.opset < 13) n.ints("axes");
    s->scalar = true;
    im.set_sym(n, 0, *s);
    return true;
  }
  if (op == "Slice" && n.opset >= 10) {
    auto s = sym(0);
    if (!s || s->scalar) return false;
    auto st = im.ints_of(n, 1, "starts"), en = im.ints_of(n, 2, "ends");
    auto steps = n.has_input(4) ? im.ints_of(n, 4, "steps") : std::vector<int64_t>{1};
    if (st.size() != 1 || en.size() != 1 || steps.size() != 1 || steps[0] != 1) return false;
    const int64_t len = static_cast<int64_t>(s->values.size());
    int64_t b = st[0] < 0 ? st[0] + len : st[0], e = en[0] < 0 ? en[0] + len : en[0];
    b = std::clamp<int64_t>(b, 0, len);
    e = std::clamp<int64_t>(e, 0, len);
    SymValue out;
    for (int64_t i = b; i < e; ++i) out.values.push_back(s->values[static_cast<size_t>(i)]);
    im.set_sym(n, 0, out);
    return true;
  }
  if (op == "Reshape" && n.opset >= 5) {
    // A shape value reshaped (the TorchScript exporter's Expand: Reshape(Concat(dims), [-1])):
    // the elements stay the same symbolic values; rank 0 and 1 only.
    auto s = sym(0);
    const auto* shp = im.in_value(n, 1);
    n.i("allowzero", 0);  // no 0 in a target of at most one element that keeps the length
    if (!s || !shp || shp->rank() != 1 || shp->numel() > 1) return false;
    const int64_t want = shp->numel() == 0 ? 1 : shp->get_i64(0);
    if (shp->numel() == 0 ? s->values.size() != 1 : (want != -1 && want != int64_t(s->values.size())))
      return false;
    s->scalar = shp->numel() == 0;
    im.set_sym(n, 0, *s);
    return true;
  }
  if (op == "Equal") {
    // A dim-based extent is >= 1, so comparing it with a constant <= 0 is statically false.
    auto a = sym(0), b = sym(1);
    if (!a || !b) return false;
    const size_t len = std::max(a->values.size(), b->values.size());
    ops::HostTensor out(DType::boolean, a->scalar && b->scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(len)});
    for (size_t i = 0; i < len; ++i) {
      const IntExpr& x = a->values[a->values.size() == 1 ? 0 : i];
      const IntExpr& y = b->values[b->values.size() == 1 ? 0 : i];
      bool v;
      if (x == y) v = true;
      else if (x.is_const() && y.is_const()) v = false;
      else if ((x.is_const() && x.const_value() <= 0) || (y.is_const() && y.const_value() <= 0)) v = false;
      else return false;
      out.set_i64(static_cast<int64_t>(i), v);
    }
    im.known[n.p.output(0)] = out;
    return true;
  }
  if (op == "Where") {
    const auto* c = im.in_value(n, 0);
    auto a = sym(1), b = sym(2);
    if (!c || !a || !b || c->rank() > 1) return false;
    const size_t len = std::max({size_t(c->numel()), a->values.size(), b->values.size()});
    SymValue out;
    out.scalar = c->rank() == 0 && a->scalar && b->scalar;
    for (size_t i = 0; i < len; ++i) {
      const bool ci = c->get_i64(c->numel() == 1 ? 0 : static_cast<int64_t>(i)) != 0;
      const SymValue& src = ci ? *a : *b;
      out.values.push_back(src.values[src.values.size() == 1 ? 0 : i]);
    }
    im.set_sym(n, 0, out);
    return true;
  }
  return false;
}

// ---- reshape family --------------------------------------------------------------------------

void convert_reshape(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto in_shape = im.type(x).shape;
  std::vector<IntExpr> target;
  if (n.opset < 5) {
    for (int64_t v : n.ints("shape")) target.push_back(v);
  } else {
    target = im.sym_of(n, 1, "shape").values;
  }
  const bool allowzero = n.i("allowzero", 0) != 0;
  ir::Shape shape;
  for (size_t i = 0; i < target.size(); ++i) {
    const IntExpr& e = target[i];
    if (e.is_const() && e.const_value() == 0 && !allowzero) {
      if (i >= in_shape.size()) throw Invalid("Reshape copies axis " + std::to_string(i) + " the input does not have");
      shape.push_back(in_shape[i]);
    } else {
      shape.push_back(e);
    }
  }
  im.set(n, 0, im.op("reshape", {x}, {{"shape", shape}}));
}

void convert_flatten(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = n.i("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) throw Invalid("Flatten axis out of range");
  IntExpr rows = 1, cols = 1;
  for (int64_t i = 0; i < r; ++i) {
    if (i < axis) rows = rows * s[static_cast<size_t>(i)];
    else cols = cols * s[static_cast<size_t>(i)];
  }
  im.set(n, 0, im.op("reshape", {x}, {{"shape", ir::Shape{rows, cols}}}));
}

void convert_squeeze(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  auto axes = axes_input_or_attr(im, n, 13);
  if (axes.empty()) {
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].is_const() && s[i].const_value() == 1) axes.push_back(static_cast<int64_t>(i));
  }
  axes = normalize_axes(axes, static_cast<int64_t>(s.size()), n);
  im.set(n, 0, axes.empty() ? im.op("reshape", {x}, {{"shape", s}}) : im.op("squeeze", {x}, {{"axes", axes}}));
}

void convert_unsqueeze(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  auto axes = axes_input_or_attr(im, n, 13);
  const int64_t out_rank = static_cast<int64_t>(im.type(x).shape.size() + axes.size());
  axes = normalize_axes(axes, out_rank, n);
  im.set(n, 0, im.op("unsqueeze", {x}, {{"axes", axes}}));
}

void convert_transpose(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
  std::vector<int64_t> perm = n.ints("perm");
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != r) throw Invalid("Transpose perm length differs from the rank");
  im.set(n, 0, r <= 1 ? im.op("reshape", {x}, {{"shape", im.type(x).shape}}) : im.op("permute", {x}, {{"dims", perm}}));
}

void convert_concat(Importer& im, NodeView& n) {
  std::vector<std::string> ins;
  for (size_t k = 0; k < n.num_inputs(); ++k) ins.push_back(im.in(n, k));
  const int64_t r = static_cast<int64_t>(im.type(ins.at(0)).shape.size());
  if (r == 0) throw Invalid("Concat of rank-0 inputs (ONNX requires rank >= 1)");
  const int64_t axis = normalize_axis(n.i_req("axis"), r, n);
  // Inputs with a zero extent on the axis contribute nothing.
  std::vector<std::string> kept;
  for (const auto& i : ins) {
    // Ranks are checked here (before the op's own shape rules) because the axis indexes them all.
    if (static_cast<int64_t>(im.type(i).shape.size()) != r)
      throw Invalid("Concat inputs have different ranks (" + std::to_string(r) + " and " +
                    std::to_string(im.type(i).shape.size()) + ")");
    const auto& e = im.type(i).shape[static_cast<size_t>(axis)];
    if (!(e.is_const() && e.const_value() == 0)) kept.push_back(i);
  }
  if (kept.empty()) kept.push_back(ins[0]);
  im.set(n, 0, kept.size() == 1 ? im.op("reshape", {kept[0]}, {{"shape", im.type(kept[0]).shape}})
                                : im.op("concatenate", kept, {{"axis", axis}}));
}

void convert_split(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  const int64_t axis = normalize_axis(n.i("axis", 0), static_cast<int64_t>(s.size()), n);
  const auto& e = s[static_cast<size_t>(axis)];
  if (!e.is_const()) throw Unsupported("Split of a symbolic axis");
  const int64_t len = e.const_value();
  std::vector<int64_t> sizes;
  if (n.opset >= 13) {
    if (n.has_input(1)) sizes = im.ints_of(n, 1, "split");
  } else {
    sizes = n.ints("split");
  }
  const int64_t parts = n.has("num_outputs") ? n.i("num_outputs", 0) : static_cast<int64_t>(n.num_outputs());
  if (sizes.empty()) {
    if (parts <= 0) throw Invalid("Split needs outputs");
    const int64_t chunk = (len + parts - 1) / parts;
    for (int64_t p = 0, left = len; p < parts; ++p) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
    if (n.opset < 18 && len % parts != 0) throw Invalid("Split: extent " + std::to_string(len) + " is not divisible by " + std::to_string(parts));
  }
  if (sizes.size() == 1) {
    im.set(n, 0, im.op("reshape", {x}, {{"shape", s}}));
    return;
  }
  auto outs = im.opn("split", {x}, {{"sizes", sizes}, {"axis", axis}});
  for (size_t k = 0; k < outs.size(); ++k) im.set(n, k, outs[k]);
}

// ---- slicing and indexing --------------------------------------------------------------------

// Indices selected by a NumPy-style slice of a static extent.
std::vector<int64_t> slice_indices(int64_t len, int64_t start, int64_t end, int64_t step) {
  std::vector<int64_t> out;
  if (step > 0) {
    if (start < 0) start += len;
    if (end < 0) end += len;
    start = std::clamp<int64_t>(start, 0, len);
    end = std::clamp<int64_t>(end, 0, len);
    for (int64_t i = start; i < end; i += step) out.push_back(i);
  } else {
    if (start < 0) start += len;
    if (end < 0) end += len;
    start = std::clamp<int64_t>(start, -1, len - 1);
    end = std::clamp<int64_t>(end, -1, len - 1);
    for (int64_t i = start; i > end; i += step) out.push_back(i);
  }
  return out;
}

void convert_slice(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto shape = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  std::vector<IntExpr> starts_e, ends_e;  // constants, or symbolic (computed from shapes: x[:, :seq])
  std::vector<int64_t> axes, steps;
  auto exprs = [](const std::vector<int64_t>& v) { return std::vector<IntExpr>(v.begin(), v.end()); };
  if (n.opset < 10) {
    starts_e = exprs(n.ints("starts"));
    ends_e = exprs(n.ints("ends"));
    axes = n.ints("axes");
  } else {
    starts_e = im.sym_of(n, 1, "starts").values;
    ends_e = im.sym_of(n, 2, "ends").values;
    if (n.has_input(3)) axes = im.ints_of(n, 3, "axes");
    if (n.has_input(4)) steps = im.ints_of(n, 4, "steps");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts_e.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts_e.size(), 1);
  if (ends_e.size() != starts_e.size() || axes.size() != starts_e.size() || steps.size() != starts_e.size())
    throw Invalid("Slice starts/ends/axes/steps lengths differ");
  bool negative = false, symbolic = false;
  for (auto& a : axes) a = normalize_axis(a, r, n);
  for (auto st : steps) {
    if (st == 0) throw Invalid("Slice step 0");
    if (st < 0) negative = true;
  }
  for (size_t i = 0; i < starts_e.size(); ++i) symbolic |= !starts_e[i].is_const() || !ends_e[i].is_const();
  constexpr int64_t kToEnd = int64_t(1) << 31;
  if (!negative) {
    ir::Shape s2, e2;
    for (const auto& e : ends_e)
      e2.push_back(!e.is_const() ? e : IntExpr(std::clamp<int64_t>(e.const_value(), -kToEnd, kToEnd)));
    for (const auto& v : starts_e)
      s2.push_back(!v.is_const() ? v : IntExpr(std::clamp<int64_t>(v.const_value(), -kToEnd, kToEnd)));
    im.set(n, 0, im.op("slice", {x}, {{"starts", s2}, {"ends", e2}, {"axes", axes}, {"steps", steps}}));
    return;
  }
  if (symbolic)
    throw Unsupported("node '" + n.name + "' (Slice): a negative step with symbolic starts/ends (" +
                      ir::shape_to_string(starts_e) + " : " + ir::shape_to_string(ends_e) + ")");
  std::vector<int64_t> starts, ends;
  for (const auto& v : starts_e) starts.push_back(v.const_value());
  for (const auto& v : ends_e) ends.push_back(v.const_value());
  // Negative steps: explicit indices along each sliced axis (static extents), one gather each.
  std::string y = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto& e = shape[static_cast<size_t>(axes[i])];
    if (!e.is_const()) throw Unsupported("Slice with a negative step on a symbolic axis");
    auto idx = slice_indices(e.const_value(), starts[i], ends[i], steps[i]);
    if (idx.empty()) throw Unsupported("Slice producing an empty axis");
    y = im.op("gather", {y, im.constant(ints_tensor(idx), "slice_idx")}, {{"axis", axes[i]}});
  }
  im.set(n, 0, y);
}

void convert_gather(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), idx = im.in(n, 1);
  const int64_t axis = normalize_axis(n.i("axis", 0), static_cast<int64_t>(im.type(x).shape.size()), n);
  im.set(n, 0, im.op("gather", {x, idx}, {{"axis", axis}}));
}

void convert_expand(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  auto target = im.sym_of(n, 1, "shape").values;
  const auto xs = im.type(x).shape;
  const size_t r = std::max(xs.size(), target.size());
  ir::Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const bool hx = i >= r - xs.size(), ht = i >= r - target.size();
    IntExpr ex = hx ? xs[i - (r - xs.size())] : IntExpr(1);
    IntExpr et = ht ? target[i - (r - target.size())] : IntExpr(1);
    if (et.is_const() && et.const_value() == 1) out[i] = ex;
    else if (ex.is_const() && ex.const_value() == 1) out[i] = et;
    else if (ex == et) out[i] = ex;
    else if (et.is_const() && et.const_value() == -1) out[i] = ex;
    else throw Invalid("Expand: extent " + ex.to_string() + " cannot broadcast to " + et.to_string());
  }
  if (out == xs) {
    im.set(n, 0, im.op("reshape", {x}, {{"shape", xs}}));
    return;
  }
  if (xs.size() < r) {
    ir::Shape padded(r - xs.size(), IntExpr(1));
    padded.insert(padded.end(), xs.begin(), xs.end());
    x = im.reshape(x, padded);
  }
  im.set(n, 0, im.op("expand", {x}, {{"shape", out}}));
}

void convert_pad(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
  std::vector<int64_t> pads;
  double value = 0.0;
  std::string mode = n.s("mode", "constant");
  if (n.opset < 11) {
    pads = n.opset < 2 ? n.ints("paddings") : n.ints("pads");
    value = n.f("value", 0.0f);
  } else {
    pads = im.ints_of(n, 1, "pads");
    if (n.has_input(2)) {
      const auto* v = &im.value_of(n, 2, "constant_value");
      if (v->numel() > 0) value = v->get_as(0);
    }
    if (n.has_input(3)) {
      auto axes = normalize_axes(im.ints_of(n, 3, "axes"), r, n);
      std::vector<int64_t> full(static_cast<size_t>(2 * r), 0);
      // pads lists begins for `axes` (in the given order), then ends.
      auto given = im.ints_of(n, 3, "axes");
      for (size_t i = 0; i < given.size(); ++i) {
        const int64_t a = normalize_axis(given[i], r, n);
        full[static_cast<size_t>(a)] = pads.at(i);
        full[static_cast<size_t>(a + r)] = pads.at(i + given.size());
      }
      pads = full;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * r) throw Invalid("Pad pads must hold 2 × rank values");
  if (mode != "constant" && mode != "reflect" && mode != "edge") throw Unsupported("Pad mode '" + mode + "'");
  for (int64_t p : pads)
    if (p < 0) throw Unsupported("negative pads (cropping)");
  im.set(n, 0, im.op("pad", {x}, {{"pads", pads}, {"mode", mode}, {"value", value}}));
}

void convert_constant_of_shape(Importer& im, NodeView& n) {
  auto shape = im.sym_of(n, 0, "input").values;
  DType dt = DType::f32;
  double v = 0.0;
  if (const auto* t = n.tensor("value")) {
    auto h = tensor_from_proto(*t, im.base_dir);
    if (h.numel() != 1) throw Invalid("ConstantOfShape value must hold one element");
    dt = h.dtype;
    v = h.get_as(0);
  }
  for (const auto& e : shape)
    if (e.is_const() && e.const_value() == 0) throw Unsupported("ConstantOfShape with a zero extent (empty tensor)");
  im.set(n, 0, im.op("full", {}, {{"shape", ir::Shape(shape.begin(), shape.end())}, {"value", v},
                                  {"dtype", std::string(ir::dtype_name(dt))}}));
}

void convert_range(Importer& im, NodeView& n) {
  const auto* s = im.in_value(n, 0);
  const auto* l = im.in_value(n, 1);
  const auto* d = im.in_value(n, 2);
  if (s && l && d) {
    im.set(n, 0, im.op("arange", {}, {{"start", s->get_as(0)}, {"end", l->get_as(0)}, {"step", d->get_as(0)},
                                       {"dtype", std::string(ir::dtype_name(s->dtype))}}));
    return;
  }
  // A limit computed from shapes (Range(0, seq): position ids, causal masks): integer start and
  // delta known, so the element count ceil((limit - start) / delta) is a symbolic extent.
  if (!d) im.value_of(n, 2, "delta");  // throws the "must be known at compile time" error
  const DType dt = d->dtype;
  // A float range's element count depends on the values of start and limit: they must be known.
  if (!ir::is_int(dt)) {
    if (!s) im.value_of(n, 0, "start");
    if (!l) im.value_of(n, 1, "limit");
  }
  if (!ir::is_int(dt))
    throw Unsupported("node '" + n.name + "' (Range): a symbolic limit needs integer start/limit/delta, got " +
                      std::string(ir::dtype_name(dt)));
  const SymValue start = im.sym_of(n, 0, "start"), limit = im.sym_of(n, 1, "limit");
  if (start.values.size() != 1 || limit.values.size() != 1) throw Invalid("Range: start and limit must be scalars");
  const int64_t step = static_cast<int64_t>(d->get_as(0));
  if (step <= 0)
    throw Unsupported("node '" + n.name + "' (Range): a symbolic limit needs a positive delta, got " +
                      std::to_string(step));
  const IntExpr span = limit.values[0] - start.values[0];
  const IntExpr count = step == 1 ? span : (span + IntExpr(step - 1)) / IntExpr(step);
  const std::string dts(ir::dtype_name(dt));
  if (start.values[0].is_const()) {
    im.set(n, 0, im.op("arange", {}, {{"start", double(start.values[0].const_value())}, {"step", double(step)},
                                       {"length", ir::Shape{count}}, {"dtype", dts}}));
    return;
  }
  // A symbolic start too (Range(past, past + seq): positions after a KV cache): arange from 0,
  // plus the start as a run-time scalar.
  const std::string base = im.op("arange", {}, {{"start", 0.0}, {"step", double(step)},
                                                {"length", ir::Shape{count}}, {"dtype", dts}});
  im.set(n, 0, im.op("add", {base, im.cast(im.sym_tensor(start, "range_start"), dt)}));
}

void convert_tile(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  auto reps = im.sym_of(n, 1, "repeats").values;  // may be symbolic (Tile by the batch size)
  const auto s = im.type(x).shape;
  if (reps.size() != s.size()) throw Invalid("Tile repeats length differs from the rank");
  // [d0, d1] → [1, d0, 1, d1] → expand [r0, d0, r1, d1] → reshape [r0*d0, r1*d1]
  ir::Shape inter, expanded, out;
  for (size_t i = 0; i < s.size(); ++i) {
    inter.push_back(1);
    inter.push_back(s[i]);
    expanded.push_back(reps[i]);
    expanded.push_back(s[i]);
    out.push_back(s[i] * reps[i]);
  }
  std::string y = im.reshape(x, inter);
  y = im.op("expand", {y}, {{"shape", expanded}});
  im.set(n, 0, im.reshape(y, out));
}

void convert_depth_to_space(Importer& im, NodeView& n, bool to_space) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  if (s.size() != 4) throw Invalid("expects a 4-d input");
  const int64_t b = n.i_req("blocksize");
  const IntExpr N = s[0], C = s[1], H = s[2], W = s[3];
  if (to_space) {
    const std::string mode = n.s("mode", "DCR");
    if (mode == "DCR") {
      std::string y = im.reshape(x, {N, IntExpr(b), IntExpr(b), C / IntExpr(b * b), H, W});
      y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 3, 4, 1, 5, 2}}});
      im.set(n, 0, im.reshape(y, {N, C / IntExpr(b * b), H * IntExpr(b), W * IntExpr(b)}));
    } else if (mode == "CRD") {
      std::string y = im.reshape(x, {N, C / IntExpr(b * b), IntExpr(b), IntExpr(b), H, W});
      y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 1, 4, 2, 5, 3}}});
      im.set(n, 0, im.reshape(y, {N, C / IntExpr(b * b), H * IntExpr(b), W * IntExpr(b)}));
    } else {
      throw Invalid("DepthToSpace mode '" + mode + "'");
    }
  } else {
    std::string y = im.reshape(x, {N, C, H / IntExpr(b), IntExpr(b), W / IntExpr(b), IntExpr(b)});
    y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 3, 5, 1, 2, 4}}});
    im.set(n, 0, im.reshape(y, {N, C * IntExpr(b * b), H / IntExpr(b), W / IntExpr(b)}));
  }
}

std::vector<int64_t> static_shape(const ir::Shape& s, const char* what) {
  std::vector<int64_t> out;
  for (const auto& e : s) {
    if (!e.is_const()) throw Unsupported(std::string(what) + " needs a static shape");
    out.push_back(e.const_value());
  }
  return out;
}

void convert_eye_like(Importer& im, NodeView& n) {
  const auto shape = static_shape(im.in_type(n, 0).shape, "EyeLike");
  if (shape.size() != 2) throw Invalid("EyeLike needs a 2-d input");
  const int64_t k = n.i("k", 0);
  DType dt = n.has("dtype") ? dtype_from_onnx(static_cast<int>(n.i("dtype", 1)), "EyeLike dtype") : im.in_dtype(n, 0);
  ops::HostTensor h(dt, shape);
  for (int64_t i = 0; i < shape[0]; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < shape[1]) h.set_as(i * shape[1] + j, 1.0);
  }
  im.set(n, 0, im.constant(h, "eye"));
}

void convert_trilu(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  if (s.size() < 2) throw Invalid("Trilu needs rank >= 2");
  const bool upper = n.i("upper", 1) != 0;
  int64_t k = 0;
  if (n.has_input(1)) k = im.ints_of(n, 1, "k").at(0);
  const auto& he = s[s.size() - 2];
  const auto& we = s[s.size() - 1];
  if (!he.is_const() || !we.is_const()) throw Unsupported("Trilu on symbolic matrix extents");
  const int64_t H = he.const_value(), W = we.const_value();
  ops::HostTensor mask(DType::boolean, {H, W});
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = 0; j < W; ++j) mask.set_i64(i * W + j, upper ? (j - i >= k) : (j - i <= k));
  std::string zero = im.scalar(im.type(x).dtype, 0);
  im.set(n, 0, im.op("where", {im.constant(mask, "trilu_mask"), x, zero}));
}

void convert_one_hot(Importer& im, NodeView& n) {
  std::string idx = im.in(n, 0);
  const auto* depth_v = &im.value_of(n, 1, "depth");
  const auto* values = &im.value_of(n, 2, "values");
  const int64_t depth = static_cast<int64_t>(depth_v->get_as(0));
  const int64_t r = static_cast<int64_t>(im.type(idx).shape.size());
  int64_t axis = n.i("axis", -1);
  if (axis < 0) axis += r + 1;
  if (axis < 0 || axis > r) throw Invalid("OneHot axis out of range");
  std::string iv = idx;
  if (ir::is_float(im.type(iv).dtype)) iv = im.cast(iv, DType::i64);
  iv = im.cast(iv, DType::i64);
  // Negative indices count from the end.
  std::string dep = im.scalar(DType::i64, static_cast<double>(depth));
  iv = im.op("where", {im.op("lt", {iv, im.scalar(DType::i64, 0)}), im.op("add", {iv, dep}), iv});
  iv = im.op("unsqueeze", {iv}, {{"axes", std::vector<int64_t>{axis}}});
  std::string ar = im.op("arange", {}, {{"end", depth}, {"dtype", std::string("int64")}});
  ir::Shape ar_shape(static_cast<size_t>(r + 1), IntExpr(1));
  ar_shape[static_cast<size_t>(axis)] = depth;
  ar = im.reshape(ar, ar_shape);
  std::string hot = im.op("eq", {iv, ar});
  ops::HostTensor off(values->dtype, {}), on(values->dtype, {});

  off.set_as(0, values->get_as(0));
  on.set_as(0, values->get_as(1));
  im.set(n, 0, im.op("where", {hot, im.constant(on, "on_value"), im.constant(off, "off_value")}));
}

void convert_compress(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto* cond = &im.value_of(n, 1, "condition");
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < cond->numel(); ++i)
    if (cond->get_i64(i)) idx.push_back(i);
  if (idx.empty()) throw Unsupported("Compress producing an empty tensor");
  if (n.has("axis")) {
    const int64_t axis = normalize_axis(n.i("axis", 0), static_cast<int64_t>(im.type(x).shape.size()), n);
    im.set(n, 0, im.op("gather", {x, im.constant(ints_tensor(idx), "compress_idx")}, {{"axis", axis}}));
  } else {
    std::string flat = im.reshape(x, {ir::shape_numel(im.type(x).shape)});
    im.set(n, 0, im.op("gather", {flat, im.constant(ints_tensor(idx), "compress_idx")}, {{"axis", int64_t{0}}}));
  }
}

// NonZero: the output's extent is the number of non-zero elements, so the input must be known at
// compile time (a constant, or computed from constants and shapes); the coordinates [rank, count]
// (row-major order) are a constant.
void convert_nonzero(Importer& im, NodeView& n) {
  const auto& x = im.value_of(n, 0, "X");
  const int64_t r = x.rank();
  if (r == 0) throw Unsupported("NonZero of a scalar");
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.get_as(i) != 0.0) hits.push_back(i);  // NaN counts as non-zero, as in NumPy
  if (hits.empty()) throw Unsupported("NonZero finding no non-zero element (an empty tensor)");
  const int64_t cnt = static_cast<int64_t>(hits.size());
  ops::HostTensor out(DType::i64, {r, cnt});
  for (int64_t j = 0; j < cnt; ++j) {
    int64_t rem = hits[static_cast<size_t>(j)];
    for (int64_t a = r - 1; a >= 0; --a) {
      const int64_t e = x.shape[static_cast<size_t>(a)];
      out.set_i64(a * cnt + j, rem % e);
      rem /= e;
    }
  }
  im.known[n.p.output(0)] = std::move(out);
}

}  // namespace

void register_shape_converters(ConverterTable& t) {
  // Nodes with symbolic shape values as inputs are evaluated at import time first.
  auto sym_first = [](Converter c) {
    return [c](Importer& im, NodeView& n) {
      if (!eval_symbolic(im, n)) c(im, n);
    };
  };
  t["Constant"] = convert_constant;
  t["Shape"] = convert_shape;
  t["Size"] = convert_size;
  t["Reshape"] = sym_first(convert_reshape);
  t["Flatten"] = convert_flatten;
  t["Squeeze"] = sym_first(convert_squeeze);
  t["Unsqueeze"] = sym_first(convert_unsqueeze);
  t["Transpose"] = convert_transpose;
  t["Concat"] = sym_first(convert_concat);
  t["Split"] = convert_split;
  t["Slice"] = sym_first(convert_slice);
  t["Gather"] = sym_first(convert_gather);
  t["Expand"] = convert_expand;
  t["Pad"] = convert_pad;
  t["ConstantOfShape"] = convert_constant_of_shape;
  t["Range"] = convert_range;
  t["Tile"] = convert_tile;
  t["DepthToSpace"] = [](Importer& im, NodeView& n) { convert_depth_to_space(im, n, true); };
  t["SpaceToDepth"] = [](Importer& im, NodeView& n) { convert_depth_to_space(im, n, false); };
  t["EyeLike"] = convert_eye_like;
  t["Trilu"] = convert_trilu;
  t["OneHot"] = convert_one_hot;
  t["Compress"] = convert_compress;
  t["NonZero"] = convert_nonzero;
  // Arithmetic and selection on shape values (the tensor converters run otherwise).
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Identity", "Cast", "Equal", "Where"}) {
    auto it = t.find(op);
    if (it != t.end()) it->second = sym_first(it->second);
  }
}

}  // namespace dinoml::onnx_import
