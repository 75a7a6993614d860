// ONNX elementwise operators → DinoML elementwise ops (all fusible by fuse_elementwise, so the
// decompositions below collapse back into one generated loop).
#include <cmath>
#include <limits>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;

void expect_float_input(Importer& im, NodeView& n, size_t k) {
  const DType dt = im.in_dtype(n, k);
  if (!ir::is_float(dt))
    throw Unsupported("input " + std::to_string(k) + " has dtype " + std::string(ir::dtype_name(dt)) +
                      "; DinoML's " + n.op() + " mapping needs a float dtype");
}


Converter unary(const char* op, bool float_only = true) {
  return [op, float_only](Importer& im, NodeView& n) {
    if (float_only) expect_float_input(im, n, 0);
    std::string y = im.op(op, {im.in(n, 0)});
    // Neg / Abs of a widened type wrap as its C arithmetic does (-(-32768) is -32768 in int16).
    if (const int w = im.wide_of(n, 0)) y = wrap_widened(im, y, w);
    im.set(n, 0, y);
  };
}

// Opset < 7 arithmetic / comparison / logic: with broadcast = 1, B (of lower rank) is matched
// against A's axes starting at `axis` (default: A's trailing axes), which NumPy broadcasting
// spells as B reshaped to [1]*axis + B.shape + [1]*rest. Without it the shapes must be equal.
std::string legacy_b(Importer& im, NodeView& n, const std::string& a, const std::string& b) {
  if (n.opset >= 7) return b;
  if (n.i("broadcast", 0) == 0) {
    n.ignore("axis");
    return b;
  }
  const ir::Shape sa = im.type(a).shape, sb = im.type(b).shape;
  const int64_t ra = static_cast<int64_t>(sa.size()), rb = static_cast<int64_t>(sb.size());
  if (rb > ra) throw Invalid("broadcast = 1 with B of higher rank than A");
  int64_t axis = n.i("axis", ra - rb);
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) throw Invalid("axis " + std::to_string(axis) + " does not fit B's rank in A's");
  ir::Shape shape(static_cast<size_t>(axis), ir::IntExpr(1));
  shape.insert(shape.end(), sb.begin(), sb.end());
  while (static_cast<int64_t>(shape.size()) < ra) shape.push_back(ir::IntExpr(1));
  return im.reshape(b, shape);
}

Converter binary(const char* op) {
  return [op](Importer& im, NodeView& n) {
    std::string a = im.in(n, 0);
    std::string b = legacy_b(im, n, a, im.in(n, 1));
    if (const int w = im.wide_of(n, 0) ? im.wide_of(n, 0) : im.wide_of(n, 1)) {
      const std::string o = op;
      // Widened integers: comparisons in the type's order, arithmetic reduced modulo 2^bits.
      if (o == "add" || o == "sub" || o == "mul") im.set(n, 0, wrap_widened(im, im.op(op, {a, b}), w));
      else im.set(n, 0, widened_compare(im, o, a, b, w));
      return;
    }
    im.set(n, 0, im.op(op, {a, b}));
  };
}

// ONNX integer Div truncates toward zero; DinoML's integer div floors. Signed ints get the
// correction q + ((a - q*b) != 0 && (a < 0) != (b < 0)).
void convert_div(Importer& im, NodeView& n) {
  std::string a = im.in(n, 0), b = legacy_b(im, n, a, im.in(n, 1));
  if (const int w = im.wide_of(n, 0)) {
    if (w == onnx::TensorProto::UINT64) {
      im.set(n, 0, udivmod64(im, a, b).first);
      return;
    }
    // uint16 / uint32 values are non-negative (floor = truncation); int16 truncates like int32 and
    // wraps (-32768 / -1 is -32768).
    if (w != onnx::TensorProto::INT16) {
      im.set(n, 0, im.op("div", {a, b}));
      return;
    }
  }
  std::string q = im.op("div", {a, b});
  const DType dt = im.type(a).dtype;
  if (dt == DType::i8 || dt == DType::i32 || dt == DType::i64) {
    std::string r = im.op("sub", {a, im.op("mul", {q, b})});
    std::string zero = im.scalar(dt, 0);
    std::string rem_nz = im.op("ne", {r, zero});
    std::string signs_differ = im.op("ne", {im.op("lt", {a, zero}), im.op("lt", {b, zero})});
    std::string fix = im.op("where", {rem_nz, signs_differ, rem_nz});  // logical and
    q = im.op("add", {q, im.cast(fix, dt)});
  }
  if (const int w = im.wide_of(n, 0)) q = wrap_widened(im, q, w);
  im.set(n, 0, q);
}

void convert_pow(Importer& im, NodeView& n) {
  std::string a = im.in(n, 0), b = legacy_b(im, n, a, im.in(n, 1));
  const DType dt = im.type(a).dtype;
  if (ir::is_bool(dt)) throw Unsupported("Pow with a bool base");
  if (im.wide_of(n, 0)) throw Unsupported("Pow with a " + widened_name(im.wide_of(n, 0)) + " base (cast it to int32 / int64 first)");
  // A widened exponent is converted to float from its (unsigned) value.
  if (const int w = im.wide_of(n, 1)) b = widened_to_float(im, b, w, ir::is_float(dt) ? dt : DType::f32);
  if (!ir::is_float(dt)) {
    // Integer base: computed in float32 and rounded (exact while results stay below 2^24).
    std::string p = im.op("pow", {im.cast(a, DType::f32), im.cast(b, DType::f32)});
    im.set(n, 0, im.cast(im.op("round", {p}), dt));
    return;
  }
  // x ** 2 with a constant exponent (LayerNorm's variance, exported decompositions): x · x, which is
  // what powf(x, 2) returns (both correctly rounded) without a powf call per element, and a plain
  // multiply that the elementwise fusion vectorises. Only when the exponent does not broadcast x.
  if (const ops::HostTensor* e = im.in_value(n, 1);
      e && e->numel() == 1 && e->rank() <= static_cast<int>(im.type(a).shape.size()) && e->get_as(0) == 2.0) {
    im.set(n, 0, im.op("mul", {a, a}));
    return;
  }
  im.set(n, 0, im.op("pow", {a, im.cast(b, dt)}));
}

// Max/Min/Sum/Mean: variadic with broadcasting.
Converter variadic(const char* op, bool mean = false) {
  return [op, mean](Importer& im, NodeView& n) {
    const size_t k = n.num_inputs();
    if (k == 0) throw Invalid("needs at least one input");
    std::string acc = im.in(n, 0);
    if (const int w = im.wide_of(n, 0)) {
      // Widened integers: max / min in the type's order (uint64 unsigned), sums wrapped.
      const std::string o = op;
      for (size_t i = 1; i < k; ++i) {
        const std::string x = im.in(n, i);
        if (o == "add") acc = wrap_widened(im, im.op("add", {acc, x}), w);
        else acc = im.op("where", {widened_compare(im, o == "max" ? "ge" : "le", acc, x, w), acc, x});
      }
      if (mean) throw Unsupported("Mean of " + widened_name(w) + " tensors");
      if (k == 1) acc = im.op("add", {acc, like(im, acc, 0)});
      im.set(n, 0, acc);
      return;
    }
    for (size_t i = 1; i < k; ++i) acc = im.op(op, {acc, im.in(n, i)});
    if (k == 1) acc = im.op("add", {acc, like(im, acc, 0)});  // a copy with the same dtype and shape
    if (mean) acc = im.op("div", {acc, like(im, acc, static_cast<double>(k))});
    im.set(n, 0, acc);
  };
}

void expect_bool(Importer& im, NodeView& n, size_t k) {
  if (!ir::is_bool(im.in_dtype(n, k))) throw Invalid("input " + std::to_string(k) + " must be bool");
}
void convert_and(Importer& im, NodeView& n) {
  expect_bool(im, n, 0);
  std::string a = im.in(n, 0), b = legacy_b(im, n, a, im.in(n, 1));
  // where(a, b, a) broadcasts a against b: a && b.
  im.set(n, 0, im.op("where", {a, b, a}));
}
void convert_or(Importer& im, NodeView& n) {
  expect_bool(im, n, 0);
  std::string a = im.in(n, 0), b = legacy_b(im, n, a, im.in(n, 1));
  im.set(n, 0, im.op("where", {a, a, b}));
}
void convert_xor(Importer& im, NodeView& n) {
  expect_bool(im, n, 0);
  std::string a = im.in(n, 0);
  im.set(n, 0, im.op("ne", {a, legacy_b(im, n, a, im.in(n, 1))}));
}
void convert_not(Importer& im, NodeView& n) {
  expect_bool(im, n, 0);
  std::string a = im.in(n, 0);
  im.set(n, 0, im.op("eq", {a, im.scalar(DType::boolean, 0)}));
}

// A cast of input 0 to ONNX type `to` (a DinoML dtype or a widened type).
void cast_to(Importer& im, NodeView& n, int to) {
  const std::string x = im.in(n, 0);
  const int from = im.wide_of(n, 0);
  if (widened_storage(to)) {
    im.set(n, 0, from == to ? x : cast_to_widened(im, x, from, to));
    if (n.has_output(0)) im.wide[n.p.output(0)] = to;
    return;
  }
  DType dt = dtype_from_onnx(to, "Cast target");
  if (from && ir::is_float(dt)) im.set(n, 0, widened_to_float(im, x, from, dt));
  else im.set(n, 0, im.cast(x, dt));  // to integers: the low bits, as C casts keep them
}
void convert_cast(Importer& im, NodeView& n) {
  const int64_t to = n.i_req("to");
  n.ignore("saturate");
  cast_to(im, n, static_cast<int>(to));
}
void convert_castlike(Importer& im, NodeView& n) {
  n.ignore("saturate");
  if (const int w = im.wide_of(n, 1)) {
    cast_to(im, n, w);
    return;
  }
  const DType dt = im.in_dtype(n, 1);
  if (im.wide_of(n, 0) && ir::is_float(dt)) im.set(n, 0, widened_to_float(im, im.in(n, 0), im.wide_of(n, 0), dt));
  else im.set(n, 0, im.cast(im.in(n, 0), dt));
}

// Identity passes tensors, sequences and optionals alike.
void convert_identity(Importer& im, NodeView& n) { im.alias(n, 0, n.input(0)); }

void convert_dropout(Importer& im, NodeView& n) {
  // Inference semantics: training_mode (input 2) must be absent or false; ratio is ignored then.
  n.ignore("seed");
  if (n.opset < 7) n.ignore("is_test");
  if (n.has("ratio")) n.f("ratio", 0.5f);
  if (n.has_input(2)) {
    const auto& tm = im.value_of(n, 2, "training_mode");
    if (tm.numel() > 0 && tm.get_as(0) != 0.0) {
      // Training mode drops at random unless the ratio is 0 (then it is the identity).
      double ratio = 0.5;
      if (n.has_input(1)) {
        const auto& r = im.value_of(n, 1, "ratio");
        if (r.numel() > 0) ratio = r.get_as(0);
      }
      if (ratio != 0.0) throw Unsupported("training_mode = true with a non-zero ratio (random dropout)");
    }
  }
  std::string x = im.in(n, 0);
  im.set(n, 0, x);
  if (n.has_output(1)) {
    ops::HostTensor ones(DType::boolean, {});
    ones.set_i64(0, 1);
    std::string one = im.constant(ones, "mask_true");
    im.set(n, 1, im.op("expand", {one}, {{"shape", im.type(x).shape}}));
  }
}

void convert_reciprocal(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  im.set(n, 0, im.op("div", {like(im, x, 1.0), x}));
}

void convert_tan(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  im.set(n, 0, im.op("div", {im.op("sin", {x}), im.op("cos", {x})}));
}

void convert_sinh_cosh(Importer& im, NodeView& n, bool sinh) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string ep = im.op("exp", {x}), em = im.op("exp", {im.op("neg", {x})});
  im.set(n, 0, im.op("mul", {im.op(sinh ? "sub" : "add", {ep, em}), like(im, x, 0.5)}));
}

void convert_asinh(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string r = im.op("sqrt", {im.op("add", {im.op("mul", {x, x}), like(im, x, 1.0)})});
  im.set(n, 0, im.op("log", {im.op("add", {x, r})}));
}
void convert_acosh(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string r = im.op("sqrt", {im.op("sub", {im.op("mul", {x, x}), like(im, x, 1.0)})});
  im.set(n, 0, im.op("log", {im.op("add", {x, r})}));
}
void convert_atanh(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string one = like(im, x, 1.0);
  std::string q = im.op("div", {im.op("add", {one, x}), im.op("sub", {one, x})});
  im.set(n, 0, im.op("mul", {im.op("log", {q}), like(im, x, 0.5)}));
}

void convert_leaky_relu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 0.01f);
  std::string x = im.in(n, 0);
  std::string zero = like(im, x, 0.0);
  im.set(n, 0, im.op("where", {im.op("lt", {x, zero}), im.op("mul", {x, like(im, x, alpha)}), x}));
}

void convert_prelu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0), slope = im.in(n, 1);
  // Opset < 7 (and Caffe2-era files): a 1-d slope of C values is per channel (axis 1), not per
  // element of the last axis as NumPy broadcasting would read it.
  const ir::Shape xs = im.type(x).shape, ss = im.type(slope).shape;
  if (ss.size() == 1 && xs.size() > 2 && ss[0] == xs[1] && ss[0] != ir::IntExpr(1) && (n.opset < 7 || ss[0] != xs.back())) {
    ir::Shape per_channel{ss[0]};
    while (per_channel.size() < xs.size() - 1) per_channel.push_back(ir::IntExpr(1));
    slope = im.reshape(slope, per_channel);
  }
  std::string zero = like(im, x, 0.0);
  std::string neg = im.op("mul", {x, slope});
  // where broadcasts all three operands: the slope may broadcast to x's shape (ONNX unidirectional).
  im.set(n, 0, im.op("where", {im.op("lt", {x, zero}), neg, x}));
}

void convert_elu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 1.0f);
  std::string x = im.in(n, 0);
  std::string em1 = im.op("sub", {im.op("exp", {x}), like(im, x, 1.0)});
  im.set(n, 0, im.op("where", {im.op("lt", {x, like(im, x, 0.0)}), im.op("mul", {em1, like(im, x, alpha)}), x}));
}

void convert_celu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 1.0f);
  std::string x = im.in(n, 0);
  // max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  std::string e = im.op("sub", {im.op("exp", {im.op("div", {x, like(im, x, alpha)})}), like(im, x, 1.0)});
  std::string neg = im.op("min", {like(im, x, 0.0), im.op("mul", {e, like(im, x, alpha)})});
  im.set(n, 0, im.op("add", {im.op("max", {x, like(im, x, 0.0)}), neg}));
}

void convert_selu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 1.67326319217681884765625f);
  const double gamma = n.f("gamma", 1.05070102214813232421875f);
  std::string x = im.in(n, 0);
  std::string neg = im.op("mul", {im.op("sub", {im.op("exp", {x}), like(im, x, 1.0)}), like(im, x, alpha)});
  std::string y = im.op("where", {im.op("gt", {x, like(im, x, 0.0)}), x, neg});
  im.set(n, 0, im.op("mul", {y, like(im, x, gamma)}));
}

void convert_hard_sigmoid(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 0.2f), beta = n.f("beta", 0.5f);
  std::string x = im.in(n, 0);
  std::string y = im.op("add", {im.op("mul", {x, like(im, x, alpha)}), like(im, x, beta)});
  im.set(n, 0, im.op("clamp", {y}, {{"min", 0.0}, {"max", 1.0}}));
}

void convert_hard_swish(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string y = im.op("add", {im.op("mul", {x, like(im, x, 1.0 / 6.0)}), like(im, x, 0.5)});
  im.set(n, 0, im.op("mul", {x, im.op("clamp", {y}, {{"min", 0.0}, {"max", 1.0}})}));
}

void convert_softplus(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  // log(1 + exp(x)) written as max(x, 0) + log(1 + exp(-|x|)), which never overflows.
  std::string t = im.op("log", {im.op("add", {like(im, x, 1.0), im.op("exp", {im.op("neg", {im.op("abs", {x})})})})});
  im.set(n, 0, im.op("add", {im.op("max", {x, like(im, x, 0.0)}), t}));
}

void convert_softsign(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  im.set(n, 0, im.op("div", {x, im.op("add", {im.op("abs", {x}), like(im, x, 1.0)})}));
}

void convert_thresholded_relu(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const double alpha = n.f("alpha", 1.0f);
  std::string x = im.in(n, 0);
  im.set(n, 0, im.op("where", {im.op("gt", {x, like(im, x, alpha)}), x, like(im, x, 0.0)}));
}

void convert_mish(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  std::string sp = im.op("add", {im.op("max", {x, like(im, x, 0.0)}),
                                 im.op("log", {im.op("add", {like(im, x, 1.0), im.op("exp", {im.op("neg", {im.op("abs", {x})})})})})});
  im.set(n, 0, im.op("mul", {x, im.op("tanh", {sp})}));
}

void convert_shrink(Importer& im, NodeView& n) {
  const double lambd = n.f("lambd", 0.5f), bias = n.f("bias", 0.0f);
  std::string x = im.in(n, 0);
  std::string lo = im.op("add", {x, like(im, x, bias)}), hi = im.op("sub", {x, like(im, x, bias)});
  std::string y = im.op("where", {im.op("lt", {x, like(im, x, -lambd)}), lo, like(im, x, 0.0)});
  im.set(n, 0, im.op("where", {im.op("gt", {x, like(im, x, lambd)}), hi, y}));
}

void convert_sign(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const DType dt = im.type(x).dtype;
  std::string zero = like(im, x, 0.0);
  std::string pos = im.cast(im.op("gt", {x, zero}), dt), neg = im.cast(im.op("lt", {x, zero}), dt);
  im.set(n, 0, im.op("sub", {pos, neg}));
}

void convert_isnan(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  std::string x = im.in(n, 0);
  im.set(n, 0, im.op("ne", {x, x}));
}

void convert_isinf(Importer& im, NodeView& n) {
  expect_float_input(im, n, 0);
  const bool pos = n.i("detect_positive", 1) != 0, neg = n.i("detect_negative", 1) != 0;
  std::string x = im.in(n, 0);
  const double inf = std::numeric_limits<double>::infinity();
  std::string p = im.op("eq", {x, like(im, x, inf)}), m = im.op("eq", {x, like(im, x, -inf)});
  std::string none = im.op("ne", {x, x});
  none = im.op("where", {none, im.op("eq", {x, like(im, x, inf)}), none});  // always false, right shape
  if (pos && neg) im.set(n, 0, im.op("where", {p, p, m}));
  else if (pos) im.set(n, 0, p);
  else if (neg) im.set(n, 0, m);
  else im.set(n, 0, none);
}

void convert_clip(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const DType dt = im.type(x).dtype;
  if (n.opset < 11) {
    ir::Attrs a;
    if (n.has("min")) a["min"] = static_cast<double>(n.f("min", 0));
    if (n.has("max")) a["max"] = static_cast<double>(n.f("max", 0));
    im.set(n, 0, a.empty() ? im.op("add", {x, like(im, x, 0)}) : im.op("clamp", {x}, a));
    return;
  }
  std::string y = x;
  bool any = false;
  for (size_t k = 1; k <= 2; ++k) {
    if (!n.has_input(k)) continue;
    std::string bound = im.in(n, k);
    if (im.type(bound).dtype != dt) throw Invalid("Clip bounds must have the input's dtype");
    y = im.op(k == 1 ? "max" : "min", {y, bound});
    any = true;
  }
  if (!any) y = im.op("add", {x, like(im, x, 0)});
  im.set(n, 0, y);
}

void convert_where(Importer& im, NodeView& n) { im.set(n, 0, im.op("where", {im.in(n, 0), im.in(n, 1), im.in(n, 2)})); }

// Mod: fmod = 0 is the floored (Python) modulo of integers; fmod = 1 the truncated (C) one.
void convert_mod(Importer& im, NodeView& n) {
  const bool fmod = n.i("fmod", 0) != 0;
  std::string a = im.in(n, 0), b = im.in(n, 1);
  const DType dt = im.type(a).dtype;
  if (im.wide_of(n, 0) == onnx::TensorProto::UINT64) {
    im.set(n, 0, udivmod64(im, a, b).second);  // unsigned: floored and truncated remainders agree
    return;
  }
  if (ir::is_float(dt)) {
    if (!fmod) throw Invalid("Mod on float tensors requires fmod = 1");
    // C fmod: a - trunc(a / b) * b, trunc(q) = q < 0 ? ceil(q) : floor(q).
    std::string q = im.op("div", {a, b});
    std::string tq = im.op("where", {im.op("lt", {q, im.scalar(dt, 0)}), im.op("ceil", {q}), im.op("floor", {q})});
    im.set(n, 0, im.op("sub", {a, im.op("mul", {tq, b})}));
    return;
  }
  if (!fmod) {
    im.set(n, 0, im.op("sub", {a, im.op("mul", {im.op("div", {a, b}), b})}));
    return;
  }
  std::string q = im.op("div", {a, b});
  std::string r = im.op("sub", {a, im.op("mul", {q, b})});
  if (dt == DType::u8 || (im.wide_of(n, 0) && im.wide_of(n, 0) != onnx::TensorProto::INT16)) { im.set(n, 0, r); return; }
  // Truncated remainder = floored remainder - b when it is non-zero and the signs differ.
  std::string zero = im.scalar(dt, 0);
  std::string rem_nz = im.op("ne", {r, zero});
  std::string signs_differ = im.op("ne", {im.op("lt", {a, zero}), im.op("lt", {b, zero})});
  std::string fix = im.op("where", {rem_nz, signs_differ, rem_nz});
  im.set(n, 0, im.op("sub", {r, im.op("mul", {im.cast(fix, dt), b})}));
}

// BitShift on uint8 (DinoML's only unsigned type): x · 2^y or ⌊x / 2^y⌋ computed in int32,
// wrapped back to uint8 (shifts of 8 or more give 0 as in C on the promoted value, masked).
// uint16 / uint32 / uint64 (widened): x · 2^y wrapped, or the unsigned ⌊x / 2^y⌋; shifts by the bit
// width or more give 0.
void bitshift_widened(Importer& im, NodeView& n, int w, bool left) {
  const std::string x = im.in(n, 0), y = im.in(n, 1);
  const DType st = *widened_storage(w);
  const double bits = w == onnx::TensorProto::UINT16 ? 16 : w == onnx::TensorProto::UINT32 ? 32 : 64;
  // y's unsigned value, clamped to [0, bits]: negative int64s are uint64 values >= 2^63.
  const std::string zero = im.scalar(st, 0), wide_y = im.scalar(st, bits);
  const std::string yc = im.op("where", {im.op("lt", {y, zero}), wide_y, im.op("min", {y, wide_y})});
  const std::string too_far = im.op("ge", {yc, wide_y});
  // 2^min(y, 62) exactly (float32 powers of two are exact), and one more doubling for y = 63.
  const std::string y62 = im.op("min", {yc, im.scalar(st, 62)});
  const std::string p = im.cast(im.op("pow", {im.scalar(DType::f32, 2.0), im.cast(y62, DType::f32)}), st);
  std::string r;
  if (left) {
    r = im.op("mul", {x, p});
    if (bits == 64) r = im.op("mul", {r, im.op("where", {im.op("eq", {yc, im.scalar(st, 63)}), im.scalar(st, 2), im.scalar(st, 1)})});
    r = wrap_widened(im, r, w);
  } else if (bits == 64) {
    // 2^63 is the int64 bit pattern INT64_MIN.
    const std::string p63 = im.op("where", {im.op("eq", {yc, im.scalar(st, 63)}), im.scalar(st, -9223372036854775808.0), p});
    r = udivmod64(im, x, p63).first;
  } else {
    r = im.op("div", {x, p});
  }
  im.set(n, 0, im.op("where", {too_far, zero, r}));
}

void convert_bitshift(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), y = im.in(n, 1);
  const DType dt = im.type(x).dtype;
  const std::string dir = n.s("direction", "");
  if (dir != "LEFT" && dir != "RIGHT") throw Invalid("direction must be LEFT or RIGHT");
  if (const int w = im.wide_of(n, 0)) {
    if (w == onnx::TensorProto::INT16) throw Invalid("BitShift is defined on unsigned types");
    bitshift_widened(im, n, w, dir == "LEFT");
    return;
  }
  if (dt != DType::u8) throw Unsupported("BitShift on " + std::string(ir::dtype_name(dt)));
  std::string yi = im.op("clamp", {im.cast(y, DType::i32)}, {{"min", 0.0}, {"max", 8.0}});
  std::string p2 = im.cast(im.op("round", {im.op("pow", {im.scalar(DType::f32, 2.0), im.cast(yi, DType::f32)})}), DType::i32);
  std::string xi = im.cast(x, DType::i32);
  std::string r = im.op(dir == "LEFT" ? "mul" : "div", {xi, p2});
  im.set(n, 0, im.cast(r, DType::u8));
}

}  // namespace

void register_elementwise_converters(ConverterTable& t) {
  t["Add"] = binary("add");
  t["Sub"] = binary("sub");
  t["Mul"] = binary("mul");
  t["Div"] = convert_div;
  t["Pow"] = convert_pow;
  t["Max"] = variadic("max");
  t["Min"] = variadic("min");
  t["Sum"] = variadic("add");
  t["Mean"] = variadic("add", true);
  t["Equal"] = binary("eq");
  t["Less"] = binary("lt");
  t["LessOrEqual"] = binary("le");
  t["Greater"] = binary("gt");
  t["GreaterOrEqual"] = binary("ge");
  t["And"] = convert_and;
  t["Or"] = convert_or;
  t["Xor"] = convert_xor;
  t["Not"] = convert_not;
  t["Where"] = convert_where;
  t["Relu"] = unary("relu", false);
  t["Neg"] = unary("neg", false);
  t["Abs"] = unary("abs", false);
  t["Sigmoid"] = unary("sigmoid");
  t["Tanh"] = unary("tanh");
  t["Exp"] = unary("exp");
  t["Log"] = unary("log");
  t["Sqrt"] = unary("sqrt");
  t["Sin"] = unary("sin");
  t["Cos"] = unary("cos");
  t["Erf"] = unary("erf");
  t["Floor"] = unary("floor");
  t["Ceil"] = unary("ceil");
  t["Round"] = unary("round");
  t["Asin"] = unary("asin");
  t["Acos"] = unary("acos");
  t["Atan"] = unary("atan");
  t["Tan"] = convert_tan;
  t["Sinh"] = [](Importer& im, NodeView& n) { convert_sinh_cosh(im, n, true); };
  t["Cosh"] = [](Importer& im, NodeView& n) { convert_sinh_cosh(im, n, false); };
  t["Asinh"] = convert_asinh;
  t["Acosh"] = convert_acosh;
  t["Atanh"] = convert_atanh;
  t["Reciprocal"] = convert_reciprocal;
  t["Identity"] = convert_identity;
  t["Dropout"] = convert_dropout;
  t["Cast"] = convert_cast;
  t["CastLike"] = convert_castlike;
  t["LeakyRelu"] = convert_leaky_relu;
  t["PRelu"] = convert_prelu;
  t["Elu"] = convert_elu;
  t["Celu"] = convert_celu;
  t["Selu"] = convert_selu;
  t["HardSigmoid"] = convert_hard_sigmoid;
  t["HardSwish"] = convert_hard_swish;
  t["Softplus"] = convert_softplus;
  t["Softsign"] = convert_softsign;
  t["ThresholdedRelu"] = convert_thresholded_relu;
  t["Mish"] = convert_mish;
  t["Shrink"] = convert_shrink;
  t["Sign"] = convert_sign;
  t["IsNaN"] = convert_isnan;
  t["IsInf"] = convert_isinf;
  t["Clip"] = convert_clip;
  t["Mod"] = convert_mod;
  t["BitShift"] = convert_bitshift;
}

}  // namespace dinoml::onnx_import
