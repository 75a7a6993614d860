// ONNX MatMul/Gemm, softmax family, reductions, arg-reductions and normalisations → DinoML
// gemm/bmm, softmax, reduce_*, argmax, layer_norm, group_norm (+ elementwise glue).
#include <cmath>
#include <limits>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;


// NumPy matmul semantics on top of gemm_rrr (b is 2-d: a's leading dims fold into M) and
// bmm_rrr (batch dims broadcast).
std::string matmul(Importer& im, NodeView& n, std::string a, std::string b) {
  expect_float(im, n, a);
  const size_t ra = im.type(a).shape.size(), rb = im.type(b).shape.size();
  if (ra == 0 || rb == 0) throw Invalid("MatMul operands must have rank >= 1");
  bool squeeze_m = false, squeeze_n = false;
  if (ra == 1) { a = im.op("unsqueeze", {a}, {{"axes", std::vector<int64_t>{0}}}); squeeze_m = true; }
  if (rb == 1) { b = im.op("unsqueeze", {b}, {{"axes", std::vector<int64_t>{1}}}); squeeze_n = true; }
  const size_t ra2 = im.type(a).shape.size(), rb2 = im.type(b).shape.size();
  std::string y;
  if (rb2 == 2) {
    y = im.op("gemm_rrr", {a, b});
  } else {
    if (ra2 == 2) a = im.op("unsqueeze", {a}, {{"axes", std::vector<int64_t>{0}}});
    y = im.op("bmm_rrr", {a, b});
  }
  const int64_t ry = static_cast<int64_t>(im.type(y).shape.size());
  std::vector<int64_t> sq;
  if (squeeze_m) sq.push_back(ry - 2);
  if (squeeze_n) sq.push_back(ry - 1);
  if (!sq.empty()) y = im.op("squeeze", {y}, {{"axes", sq}});
  return y;
}

void convert_matmul(Importer& im, NodeView& n) { im.set(n, 0, matmul(im, n, im.in(n, 0), im.in(n, 1))); }

void convert_gemm(Importer& im, NodeView& n) {
  const double alpha = n.f("alpha", 1.0f), beta = n.f("beta", 1.0f);
  const bool ta = n.i("transA", 0) != 0, tb = n.i("transB", 0) != 0;
  if (n.opset < 7) n.ignore("broadcast");
  std::string a = im.in(n, 0), b = im.in(n, 1);
  expect_float(im, n, a);
  if (im.type(a).shape.size() != 2 || im.type(b).shape.size() != 2) throw Invalid("Gemm needs 2-d A and B");
  if (ta) a = im.op("transpose", {a}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  const std::string base = tb ? "gemm_rcr" : "gemm_rrr";
  std::string y;
  std::string c = n.has_input(2) ? im.in(n, 2) : "";
  const ir::IntExpr N = im.type(b).shape[tb ? 0 : 1];
  if (!c.empty() && alpha == 1.0 && beta == 1.0 && im.type(c).shape == ir::Shape{N} && im.type(c).dtype == im.type(a).dtype) {
    y = im.op(base + "_bias", {a, b, c});
  } else {
    y = im.op(base, {a, b});
    if (alpha != 1.0) y = im.op("mul", {y, like(im, y, alpha)});
    if (!c.empty() && beta != 0.0) {
      if (beta != 1.0) c = im.op("mul", {c, like(im, c, beta)});
      y = im.op("add", {y, c});
    }
  }
  im.set(n, 0, y);
}

// Softmax/LogSoftmax/Hardmax. Before opset 13 the input is coerced to 2-d at `axis` (default 1).
std::string flatten_2d(Importer& im, const std::string& x, int64_t axis) {
  const auto& s = im.type(x).shape;
  ir::IntExpr rows = 1, cols = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<int64_t>(i) < axis) rows = rows * s[i];
    else cols = cols * s[i];
  }
  return im.reshape(x, {rows, cols});
}

Converter softmax(const char* op) {
  return [op](Importer& im, NodeView& n) {
    std::string x = im.in(n, 0);
    expect_float(im, n, x);
    const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
    if (n.opset >= 13) {
      const int64_t axis = normalize_axis(n.i("axis", -1), r, n);
      im.set(n, 0, im.op(op, {x}, {{"axis", axis}}));
      return;
    }
    const int64_t axis = r == 0 ? 0 : normalize_axis(n.i("axis", 1), r, n);
    if (axis == r - 1) {
      im.set(n, 0, im.op(op, {x}, {{"axis", axis}}));
      return;
    }
    std::string y = im.op(op, {flatten_2d(im, x, axis)}, {{"axis", int64_t{1}}});
    im.set(n, 0, im.reshape(y, im.type(x).shape));
  };
}

// Hardmax: one-hot of the first maximum along the axis.
void convert_hardmax(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto shape = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  std::string x2 = x;
  int64_t axis;
  if (n.opset >= 13) {
    axis = normalize_axis(n.i("axis", -1), r, n);
  } else {
    const int64_t a = normalize_axis(n.i("axis", 1), r, n);
    x2 = flatten_2d(im, x, a);
    axis = 1;
  }
  const auto& s2 = im.type(x2).shape;
  const int64_t r2 = static_cast<int64_t>(s2.size());
  if (!s2[static_cast<size_t>(axis)].is_const()) throw Unsupported("Hardmax over a symbolic axis");
  const int64_t len = s2[static_cast<size_t>(axis)].const_value();
  std::string idx = im.op("argmax", {x2}, {{"axis", axis}, {"keepdim", true}});
  std::string ar = im.op("arange", {}, {{"end", len}, {"dtype", std::string("int64")}});
  ir::Shape ar_shape(static_cast<size_t>(r2), ir::IntExpr(1));
  ar_shape[static_cast<size_t>(axis)] = len;
  ar = im.reshape(ar, ar_shape);
  std::string y = im.cast(im.op("eq", {idx, ar}), im.type(x).dtype);
  im.set(n, 0, im.reshape(y, shape));
}

// ---- reductions ------------------------------------------------------------------------------

// Reduction axes: attribute before `axes_input_opset`, the optional second input from then on.
// Returns false when the reduction is a no-op (empty axes with noop_with_empty_axes).
bool reduce_axes(Importer& im, NodeView& n, int axes_input_opset, int64_t rank, std::vector<int64_t>& axes) {
  const bool noop = n.i("noop_with_empty_axes", 0) != 0;
  if (n.opset >= axes_input_opset) {
    if (n.has_input(1)) axes = im.ints_of(n, 1, "axes");
  } else {
    axes = n.ints("axes");
  }
  if (axes.empty()) {
    if (noop) return false;
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  axes = normalize_axes(axes, rank, n);
  return true;
}

enum class Red { sum, mean, max, min, l1, l2, sum_square, log_sum, log_sum_exp, prod };

Converter reduce(Red kind, int axes_input_opset) {
  return [kind, axes_input_opset](Importer& im, NodeView& n) {
    std::string x = im.in(n, 0);
    const bool keep = n.i("keepdims", 1) != 0;
    const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
    std::vector<int64_t> axes;
    const DType dt = im.type(x).dtype;
    if (!reduce_axes(im, n, axes_input_opset, r, axes)) {
      im.set(n, 0, im.op("add", {x, like(im, x, 0)}));
      return;
    }
    auto red = [&](const char* op, const std::string& v, bool kd) { return im.op(op, {v}, attrs_axes(axes, kd)); };
    std::string y;
    switch (kind) {
      case Red::sum: y = red("reduce_sum", x, keep); break;
      case Red::mean:
        if (!ir::is_float(dt)) throw Unsupported("ReduceMean on integer tensors");
        y = red("reduce_mean", x, keep);
        break;
      case Red::max: y = red("reduce_max", x, keep); break;
      case Red::min: y = red("reduce_min", x, keep); break;
      case Red::l1: y = red("reduce_sum", im.op("abs", {x}), keep); break;
      case Red::sum_square: y = red("reduce_sum", im.op("mul", {x, x}), keep); break;
      case Red::l2:
        expect_float(im, n, x);
        y = im.op("sqrt", {red("reduce_sum", im.op("mul", {x, x}), keep)});
        break;
      case Red::log_sum:
        expect_float(im, n, x);
        y = im.op("log", {red("reduce_sum", x, keep)});
        break;
      case Red::log_sum_exp: {
        expect_float(im, n, x);
        // max-shifted: log(sum(exp(x - m))) + m
        std::string m = red("reduce_max", x, true);
        std::string s = red("reduce_sum", im.op("exp", {im.op("sub", {x, m})}), keep);
        std::string mk = keep ? m : im.op("squeeze", {m}, {{"axes", axes}});
        y = im.op("add", {im.op("log", {s}), mk});
        break;
      }
      case Red::prod: {
        // Float product as sign · exp(Σ log|x|), exactly 0 when a factor is 0; the sign is the
        // parity of the negative factors.
        expect_float(im, n, x);
        std::string zero = like(im, x, 0.0);
        std::string mag = im.op("exp", {red("reduce_sum", im.op("log", {im.op("abs", {x})}), keep)});
        std::string negs = red("reduce_sum", im.cast(im.op("lt", {x, zero}), DType::i32), keep);
        std::string odd = im.op("ne", {im.op("sub", {negs, im.op("mul", {im.op("div", {negs, im.scalar(DType::i32, 2)}),
                                                                          im.scalar(DType::i32, 2)})}),
                                        im.scalar(DType::i32, 0)});
        std::string signed_mag = im.op("where", {odd, im.op("neg", {mag}), mag});
        std::string any_zero = im.op("gt", {red("reduce_sum", im.cast(im.op("eq", {x, zero}), DType::i32), keep),
                                            im.scalar(DType::i32, 0)});
        y = im.op("where", {any_zero, zero, signed_mag});
        break;
      }
    }
    im.set(n, 0, y);
  };
}

Converter arg_reduce(bool is_max) {
  return [is_max](Importer& im, NodeView& n) {
    std::string x = im.in(n, 0);
    const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
    const int64_t axis = normalize_axis(n.i("axis", 0), r, n);
    const bool keep = n.i("keepdims", 1) != 0;
    const bool last = n.i("select_last_index", 0) != 0;
    std::string v = x;
    const DType dt = im.type(x).dtype;
    if (!is_max) {
      if (dt == DType::u8 || dt == DType::boolean) v = im.cast(v, DType::i32);
      v = im.op("neg", {v});
    }
    if (last) {
      // The last extreme of x is the first extreme of x reversed along the axis:
      // index = len - 1 - argmax(reverse(x)).
      const auto& e = im.type(v).shape[static_cast<size_t>(axis)];
      if (!e.is_const()) throw Unsupported("select_last_index over a symbolic axis");
      const int64_t len = e.const_value();
      std::vector<int64_t> idx;
      for (int64_t i = len - 1; i >= 0; --i) idx.push_back(i);
      ops::HostTensor it(DType::i64, {len});
      for (int64_t i = 0; i < len; ++i) it.set_i64(i, idx[static_cast<size_t>(i)]);
      std::string rev = im.op("gather", {v, im.constant(it, "reverse_idx")}, {{"axis", axis}});
      std::string a = im.op("argmax", {rev}, {{"axis", axis}, {"keepdim", keep}});
      im.set(n, 0, im.op("sub", {im.scalar(DType::i64, static_cast<double>(len - 1)), a}));
      return;
    }
    im.set(n, 0, im.op("argmax", {v}, {{"axis", axis}, {"keepdim", keep}}));
  };
}

// ---- normalisations --------------------------------------------------------------------------

void convert_layer_norm(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto shape = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t axis = normalize_axis(n.i("axis", -1), r, n);
  const double eps = n.f("epsilon", 1e-5f);
  const int64_t stash = n.i("stash_type", 1);
  if (stash != 1) throw Unsupported("stash_type " + std::to_string(stash));
  ir::Shape norm_shape(shape.begin() + axis, shape.end());
  auto fit = [&](std::string p) {
    if (im.type(p).dtype != im.type(x).dtype) p = im.cast(p, im.type(x).dtype);
    if (im.type(p).shape != norm_shape) p = im.op("expand", {p}, {{"shape", norm_shape}});
    return p;
  };
  std::vector<std::string> ins = {x, fit(im.in(n, 1))};
  if (n.has_input(2)) ins.push_back(fit(im.in(n, 2)));
  im.set(n, 0, im.op("layer_norm", ins, {{"eps", eps}}));
  if (n.has_output(1) || n.has_output(2)) {
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < r; ++a) axes.push_back(a);
    std::string mean = im.op("reduce_mean", {x}, attrs_axes(axes, true));
    std::string d = im.op("sub", {x, mean});
    std::string var = im.op("reduce_mean", {im.op("mul", {d, d})}, attrs_axes(axes, true));
    im.set(n, 1, mean);
    im.set(n, 2, im.op("rsqrt", {im.op("add", {var, like(im, var, eps)})}));
  }
}

void convert_instance_norm(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto& s = im.type(x).shape;
  if (s.size() < 3) throw Invalid("InstanceNormalization needs x[N, C, ...]");
  if (!s[1].is_const()) throw Unsupported("InstanceNormalization with a symbolic channel count");
  const double eps = n.f("epsilon", 1e-5f);
  im.set(n, 0, im.op("group_norm", {x, im.in(n, 1), im.in(n, 2)}, {{"num_groups", s[1].const_value()}, {"eps", eps}}));
}

void convert_mvn(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
  auto axes = normalize_axes(n.ints("axes", {0, 2, 3}), r, n);
  std::string mean = im.op("reduce_mean", {x}, attrs_axes(axes, true));
  std::string ex2 = im.op("reduce_mean", {im.op("mul", {x, x})}, attrs_axes(axes, true));
  std::string var = im.op("sub", {ex2, im.op("mul", {mean, mean})});
  std::string den = im.op("add", {im.op("sqrt", {var}), like(im, x, 1e-9)});
  im.set(n, 0, im.op("div", {im.op("sub", {x, mean}), den}));
}

void convert_lp_norm(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const int64_t r = static_cast<int64_t>(im.type(x).shape.size());
  const int64_t axis = normalize_axis(n.i("axis", -1), r, n);
  const int64_t p = n.i("p", 2);
  std::string den;
  if (p == 1) den = im.op("reduce_sum", {im.op("abs", {x})}, attrs_axes({axis}, true));
  else if (p == 2) den = im.op("sqrt", {im.op("reduce_sum", {im.op("mul", {x, x})}, attrs_axes({axis}, true))});
  else throw Invalid("LpNormalization p must be 1 or 2");
  im.set(n, 0, im.op("div", {x, den}));
}

// ---- losses --------------------------------------------------------------------------------------

// NegativeLogLikelihoodLoss on log-probabilities x[N, C, d...] and integer targets t[N, d...]:
// the class pick is a one-hot mask (eq(t, arange(C))) reduced over C, so no gather-elements op is
// needed; ignore_index (in or out of [0, C)) zeroes the pick and its weight.
std::string nll(Importer& im, NodeView& n, const std::string& x, std::string t, const std::string& weight,
                const std::string& reduction) {
  const auto xs = im.type(x).shape;
  if (xs.size() < 2 || !xs[1].is_const()) throw Unsupported("NLL loss needs x[N, C, ...] with a static C");
  const int64_t C = xs[1].const_value();
  const DType dt = im.type(x).dtype;
  t = im.cast(t, DType::i64);
  std::string tu = im.op("unsqueeze", {t}, {{"axes", std::vector<int64_t>{1}}});
  ir::Shape cshape(xs.size(), ir::IntExpr(1));
  cshape[1] = C;
  std::string ar = im.reshape(im.op("arange", {}, {{"end", C}, {"dtype", std::string("int64")}}), cshape);
  std::string hot = im.op("eq", {tu, ar});
  if (n.has("ignore_index")) {
    const int64_t ig = n.i("ignore_index", 0);
    std::string keep = im.op("ne", {tu, im.scalar(DType::i64, static_cast<double>(ig))});
    hot = im.op("where", {keep, hot, keep});  // hot && keep
  }
  std::string zero = im.scalar(dt, 0);
  std::string picked = im.op("reduce_sum", {im.op("where", {hot, x, zero})}, attrs_axes({1}, false));
  std::string w;
  if (!weight.empty()) w = im.op("reduce_sum", {im.op("where", {hot, im.reshape(weight, cshape), zero})}, attrs_axes({1}, false));
  else w = im.op("reduce_sum", {im.cast(hot, dt)}, attrs_axes({1}, false));
  std::string loss = im.op("neg", {im.op("mul", {picked, w})});
  if (reduction == "none") return loss;
  std::vector<int64_t> all;
  for (size_t a = 0; a < im.type(loss).shape.size(); ++a) all.push_back(static_cast<int64_t>(a));
  std::string total = im.op("reduce_sum", {loss}, attrs_axes(all, false));
  if (reduction == "sum") return total;
  if (reduction != "mean") throw Invalid("reduction '" + reduction + "'");
  return im.op("div", {total, im.op("reduce_sum", {w}, attrs_axes(all, false))});
}

void convert_nll_loss(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const std::string reduction = n.s("reduction", "mean");
  im.set(n, 0, nll(im, n, x, im.in(n, 1), n.has_input(2) ? im.in(n, 2) : "", reduction));
}

void convert_softmax_ce(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const std::string reduction = n.s("reduction", "mean");
  std::string lp = im.op("log_softmax", {x}, {{"axis", int64_t{1}}});
  im.set(n, 0, nll(im, n, lp, im.in(n, 1), n.has_input(2) ? im.in(n, 2) : "", reduction));
  im.set(n, 1, lp);
}

// LRN over channels: x / (bias + alpha/size · Σ_window x²)^beta, the window being
// [c - ⌊(size-1)/2⌋, c + ⌈(size-1)/2⌉] (zero-padded at the edges).
void convert_lrn(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto s = im.type(x).shape;
  if (s.size() < 3 || !s[1].is_const()) throw Unsupported("LRN needs x[N, C, ...] with a static C");
  const int64_t size = n.i_req("size");
  const double alpha = n.f("alpha", 1e-4f), beta = n.f("beta", 0.75f), bias = n.f("bias", 1.0f);
  const int64_t C = s[1].const_value(), r = static_cast<int64_t>(s.size());
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  std::vector<int64_t> pads(static_cast<size_t>(2 * r), 0);
  pads[1] = lo;
  pads[static_cast<size_t>(r + 1)] = hi;
  std::string sq = im.op("pad", {im.op("mul", {x, x})}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
  std::string acc;
  for (int64_t k = 0; k < size; ++k) {
    std::string part = im.op("slice", {sq}, {{"starts", std::vector<int64_t>{k}}, {"ends", std::vector<int64_t>{k + C}},
                                             {"axes", std::vector<int64_t>{1}}});
    acc = acc.empty() ? part : im.op("add", {acc, part});
  }
  std::string den = im.op("add", {like(im, x, bias), im.op("mul", {acc, like(im, x, alpha / static_cast<double>(size))})});
  im.set(n, 0, im.op("div", {x, im.op("pow", {den, like(im, x, beta)})}));
}

// TopK with a compile-time k: k rounds of argmax, each masking its winner with -inf (ties go to
// the lower index, as ONNX specifies). largest = 0 runs on -x.
void convert_topk(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  expect_float(im, n, x);
  const auto s = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(s.size());
  const int64_t axis = normalize_axis(n.i("axis", -1), r, n);
  const bool largest = n.i("largest", 1) != 0;
  if (n.i("sorted", 1) == 0) n.ignore("sorted");  // any order is allowed; ours is sorted
  int64_t k = n.opset >= 10 ? im.ints_of(n, 1, "K").at(0) : n.i_req("k");
  const auto& le = s[static_cast<size_t>(axis)];
  if (!le.is_const()) throw Unsupported("TopK over a symbolic axis");
  const int64_t L = le.const_value();
  if (k < 1 || k > L) throw Unsupported("TopK with k = " + std::to_string(k) + " on an axis of " + std::to_string(L));
  std::string v = largest ? x : im.op("neg", {x});
  ir::Shape ar_shape(static_cast<size_t>(r), ir::IntExpr(1));
  ar_shape[static_cast<size_t>(axis)] = L;
  std::string ar = im.reshape(im.op("arange", {}, {{"end", L}, {"dtype", std::string("int64")}}), ar_shape);
  std::string ninf = like(im, x, -std::numeric_limits<double>::infinity());
  std::vector<std::string> vals, idxs;
  for (int64_t i = 0; i < k; ++i) {
    std::string idx = im.op("argmax", {v}, {{"axis", axis}, {"keepdim", true}});
    std::string hot = im.op("eq", {ar, idx});
    vals.push_back(im.op("reduce_max", {im.op("where", {hot, v, ninf})}, attrs_axes({axis}, true)));
    idxs.push_back(idx);
    v = im.op("where", {hot, ninf, v});
  }
  std::string values = vals.size() == 1 ? vals[0] : im.op("concatenate", vals, {{"axis", axis}});
  if (!largest) values = im.op("neg", {values});
  im.set(n, 0, values);
  im.set(n, 1, idxs.size() == 1 ? idxs[0] : im.op("concatenate", idxs, {{"axis", axis}}));
}

}  // namespace

std::string onnx_matmul(Importer& im, NodeView& n, const std::string& a, const std::string& b) { return matmul(im, n, a, b); }

void register_math_converters(ConverterTable& t) {
  t["MatMul"] = convert_matmul;
  t["Gemm"] = convert_gemm;
  t["Softmax"] = softmax("softmax");
  t["LogSoftmax"] = softmax("log_softmax");
  t["Hardmax"] = convert_hardmax;
  t["ReduceSum"] = reduce(Red::sum, 13);
  t["ReduceMean"] = reduce(Red::mean, 18);
  t["ReduceMax"] = reduce(Red::max, 18);
  t["ReduceMin"] = reduce(Red::min, 18);
  t["ReduceL1"] = reduce(Red::l1, 18);
  t["ReduceL2"] = reduce(Red::l2, 18);
  t["ReduceSumSquare"] = reduce(Red::sum_square, 18);
  t["ReduceLogSum"] = reduce(Red::log_sum, 18);
  t["ReduceLogSumExp"] = reduce(Red::log_sum_exp, 18);
  t["ReduceProd"] = reduce(Red::prod, 18);
  t["ArgMax"] = arg_reduce(true);
  t["ArgMin"] = arg_reduce(false);
  t["LayerNormalization"] = convert_layer_norm;
  t["InstanceNormalization"] = convert_instance_norm;
  t["MeanVarianceNormalization"] = convert_mvn;
  t["LpNormalization"] = convert_lp_norm;
  t["NegativeLogLikelihoodLoss"] = convert_nll_loss;
  t["LRN"] = convert_lrn;
  t["TopK"] = convert_topk;
  t["SoftmaxCrossEntropyLoss"] = convert_softmax_ce;
}

}  // namespace dinoml::onnx_import
