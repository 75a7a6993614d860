// Elementwise family: unary/binary math, comparisons, clamp, where, cast. All fusible.
// One table row per op holds its dtype class and its scalar functions (a double path for float
// dtypes, an int64 path for integer dtypes so int64 values stay exact); schema, inference and
// the reference implementation are derived from the row, and fused_elementwise evaluates its
// steps through the same eval_elementwise entry point.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {
using ir::DType;

enum class Kind { unary_numeric, unary_float, binary_numeric, binary_float, compare, clamp, where, cast };

struct EwDef {
  const char* name;
  Kind kind;
  double (*fd)(double, double);     // float path (unary ops ignore the second argument)
  int64_t (*fi)(int64_t, int64_t);  // integer / bool path; null for float-only ops
  const char* doc;
};

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;  // NumPy's integer `//` by zero yields 0 (with a warning)
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
// NaN-propagating maximum/minimum (NumPy maximum/minimum, torch.maximum/minimum).
double fmax_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
double fmin_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

// clang-format off
const EwDef kOps[] = {
  {"add", Kind::binary_numeric, [](double a, double b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; }, "a + b"},
  {"sub", Kind::binary_numeric, [](double a, double b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; }, "a - b"},
  {"mul", Kind::binary_numeric, [](double a, double b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; }, "a * b"},
  {"div", Kind::binary_numeric, [](double a, double b) { return a / b; }, floor_div, "a / b; integer division floors"},
  {"max", Kind::binary_numeric, fmax_nan, [](int64_t a, int64_t b) { return std::max(a, b); }, "elementwise maximum"},
  {"min", Kind::binary_numeric, fmin_nan, [](int64_t a, int64_t b) { return std::min(a, b); }, "elementwise minimum"},
  {"pow", Kind::binary_float, [](double a, double b) { return std::pow(a, b); }, nullptr, "a ** b"},
  {"relu", Kind::unary_numeric, [](double x, double) { return detail::relu(x); }, [](int64_t x, int64_t) { return std::max<int64_t>(x, 0); }, "max(x, 0)"},
  {"neg", Kind::unary_numeric, [](double x, double) { return -x; }, [](int64_t x, int64_t) { return -x; }, "-x"},
  {"abs", Kind::unary_numeric, [](double x, double) { return std::fabs(x); }, [](int64_t x, int64_t) { return x < 0 ? -x : x; }, "|x|"},
  {"gelu", Kind::unary_float, [](double x, double) { return detail::gelu(x); }, nullptr, "0.5x(1+erf(x/sqrt 2))"},
  {"fast_gelu", Kind::unary_float, [](double x, double) { return detail::fast_gelu(x); }, nullptr, "tanh-approximated gelu"},
  {"silu", Kind::unary_float, [](double x, double) { return detail::silu(x); }, nullptr, "x * sigmoid(x)"},
  {"sigmoid", Kind::unary_float, [](double x, double) { return detail::sigmoid(x); }, nullptr, "1 / (1 + exp(-x))"},
  {"tanh", Kind::unary_float, [](double x, double) { return std::tanh(x); }, nullptr, "tanh(x)"},
  {"exp", Kind::unary_float, [](double x, double) { return std::exp(x); }, nullptr, "exp(x)"},
  {"log", Kind::unary_float, [](double x, double) { return std::log(x); }, nullptr, "natural log"},
  {"sqrt", Kind::unary_float, [](double x, double) { return std::sqrt(x); }, nullptr, "sqrt(x)"},
  {"rsqrt", Kind::unary_float, [](double x, double) { return 1.0 / std::sqrt(x); }, nullptr, "1 / sqrt(x)"},
  {"sin", Kind::unary_float, [](double x, double) { return std::sin(x); }, nullptr, "sin(x)"},
  {"cos", Kind::unary_float, [](double x, double) { return std::cos(x); }, nullptr, "cos(x)"},
  {"erf", Kind::unary_float, [](double x, double) { return std::erf(x); }, nullptr, "erf(x)"},
  {"floor", Kind::unary_float, [](double x, double) { return std::floor(x); }, nullptr, "round toward -inf"},
  {"ceil", Kind::unary_float, [](double x, double) { return std::ceil(x); }, nullptr, "round toward +inf"},
  {"round", Kind::unary_float, [](double x, double) { return std::nearbyint(x); }, nullptr, "round half to even"},
  {"asin", Kind::unary_float, [](double x, double) { return std::asin(x); }, nullptr, "arcsine"},
  {"acos", Kind::unary_float, [](double x, double) { return std::acos(x); }, nullptr, "arccosine"},
  {"atan", Kind::unary_float, [](double x, double) { return std::atan(x); }, nullptr, "arctangent"},
  {"eq", Kind::compare, [](double a, double b) { return double(a == b); }, [](int64_t a, int64_t b) { return int64_t(a == b); }, "a == b"},
  {"ne", Kind::compare, [](double a, double b) { return double(a != b); }, [](int64_t a, int64_t b) { return int64_t(a != b); }, "a != b"},
  {"lt", Kind::compare, [](double a, double b) { return double(a < b); }, [](int64_t a, int64_t b) { return int64_t(a < b); }, "a < b"},
  {"le", Kind::compare, [](double a, double b) { return double(a <= b); }, [](int64_t a, int64_t b) { return int64_t(a <= b); }, "a <= b"},
  {"gt", Kind::compare, [](double a, double b) { return double(a > b); }, [](int64_t a, int64_t b) { return int64_t(a > b); }, "a > b"},
  {"ge", Kind::compare, [](double a, double b) { return double(a >= b); }, [](int64_t a, int64_t b) { return int64_t(a >= b); }, "a >= b"},
  {"clamp", Kind::clamp, nullptr, nullptr, "clamp to [min, max]; each bound optional"},
  {"where", Kind::where, nullptr, nullptr, "cond ? a : b"},
  {"cast", Kind::cast, nullptr, nullptr, "convert to attr dtype"},
};
// clang-format on

const EwDef* find_ew(const std::string& name) {
  for (const auto& d : kOps)
    if (name == d.name) return &d;
  return nullptr;
}

size_t arity(Kind k) {
  switch (k) {
    case Kind::binary_numeric: case Kind::binary_float: case Kind::compare: return 2;
    case Kind::where: return 3;
    default: return 1;
  }
}

// Broadcast of all inputs' shapes; the message names every input when they do not agree.
ir::Shape broadcast_all(const InferContext& ctx) {
  ir::Shape s = ctx.inputs.at(0).shape;
  try {
    for (size_t i = 1; i < ctx.inputs.size(); ++i) s = ctx.broadcast(s, ctx.inputs[i].shape);
  } catch (const OpError& e) {
    std::string names;
    for (size_t i = 0; i < ctx.inputs.size(); ++i) names += (i ? ", " : "") + detail::describe_input(ctx, i);
    throw OpError(std::string(e.what()) + " (inputs " + names + ")");
  }
  return s;
}

std::vector<TensorType> infer_ew(const EwDef& d, const InferContext& ctx) {
  switch (d.kind) {
    case Kind::unary_numeric: case Kind::clamp:
      detail::expect_numeric(ctx, 0);
      return {ctx.inputs[0]};
    case Kind::unary_float:
      ctx.expect_float(0);
      return {ctx.inputs[0]};
    case Kind::binary_numeric:
      ctx.expect_same_dtype(0, 1);
      detail::expect_numeric(ctx, 0);
      return {{ctx.inputs[0].dtype, broadcast_all(ctx)}};
    case Kind::binary_float:
      ctx.expect_same_dtype(0, 1);
      ctx.expect_float(0);
      return {{ctx.inputs[0].dtype, broadcast_all(ctx)}};
    case Kind::compare:
      ctx.expect_same_dtype(0, 1);
      return {{DType::boolean, broadcast_all(ctx)}};
    case Kind::where:
      if (!ir::is_bool(ctx.inputs[0].dtype))
        ctx.fail("condition " + detail::describe_input(ctx, 0) + " must be bool");
      ctx.expect_same_dtype(1, 2);
      return {{ctx.inputs[1].dtype, broadcast_all(ctx)}};
    case Kind::cast:
      return {{detail::dtype_attr(ctx, "dtype", ""), ctx.inputs[0].shape}};
  }
  return {};
}

// Element conversion with cast's rules: float->int truncates toward zero (non-finite -> 0),
// ->bool is != 0, int->int wraps, everything else rounds through double.
void cast_element(const HostTensor& x, int64_t i, HostTensor& out, int64_t o) {
  if (ir::is_bool(out.dtype)) out.set_i64(o, x.get_as(i) != 0.0);
  else if (ir::is_float(out.dtype)) out.set_f64(o, ir::is_float(x.dtype) ? x.get_f64(i) : double(x.get_i64(i)));
  else if (ir::is_float(x.dtype)) {
    double v = x.get_f64(i);
    out.set_i64(o, std::isfinite(v) ? static_cast<int64_t>(std::trunc(v)) : 0);
  } else out.set_i64(o, x.get_i64(i));
}

}  // namespace

HostTensor eval_elementwise(const std::string& op, const ir::Attrs& attrs, const std::vector<const HostTensor*>& args,
                            ir::DType out_dtype, const std::vector<int64_t>& out_shape) {
  const EwDef* d = find_ew(op);
  if (!d) throw OpError("'" + op + "' is not an elementwise op");
  if (args.size() != arity(d->kind))
    throw OpError("elementwise '" + op + "' takes " + std::to_string(arity(d->kind)) + " arguments, got " +
                  std::to_string(args.size()));
  for (size_t k = 0; k < args.size(); ++k)
    if (broadcast_shapes(args[k]->shape, out_shape, "elementwise '" + op + "'") != out_shape)
      throw OpError("elementwise '" + op + "': argument " + std::to_string(k) + " of shape " +
                    args[k]->shape_string() + " does not broadcast to the output shape");
  // Attributes are read through a Node so that type errors use the IR's wording.
  ir::Node an;
  an.name = op;
  an.op = op;
  an.attrs = attrs;

  HostTensor out(out_dtype, out_shape);
  std::vector<int64_t> off(args.size());
  const HostTensor& v0 = *args[d->kind == Kind::where ? 1 : 0];
  const bool fp = ir::is_float(v0.dtype);
  // clamp bounds: for integer tensors the bounds become the nearest integers inside [min, max].
  const bool has_lo = an.has_attr("min"), has_hi = an.has_attr("max");
  const double lo = an.attr_float("min", 0.0), hi = an.attr_float("max", 0.0);
  auto clamp_i = [&](double b, bool up) {
    double r = up ? std::ceil(b) : std::floor(b);
    return static_cast<int64_t>(std::clamp(r, -9.2e18, 9.2e18));
  };
  const int64_t ilo = clamp_i(lo, true), ihi = clamp_i(hi, false);

  detail::for_each_index(out_shape, [&](const std::vector<int64_t>& idx, int64_t o) {
    for (size_t k = 0; k < args.size(); ++k) off[k] = broadcast_offset(idx, args[k]->shape);
    switch (d->kind) {
      case Kind::cast: cast_element(*args[0], off[0], out, o); break;
      case Kind::where:
        detail::copy_element(*args[args[0]->get_i64(off[0]) ? 1 : 2], args[0]->get_i64(off[0]) ? off[1] : off[2],
                             out, o);
        break;
      case Kind::clamp:
        if (fp) {
          double v = args[0]->get_f64(off[0]);
          if (has_lo && v < lo) v = lo;
          if (has_hi && v > hi) v = hi;
          out.set_f64(o, v);
        } else {
          int64_t v = args[0]->get_i64(off[0]);
          if (has_lo && v < ilo) v = ilo;
          if (has_hi && v > ihi) v = ihi;
          out.set_i64(o, v);
        }
        break;
      default: {
        bool two = args.size() == 2;
        if (fp || !d->fi) {
          double r = d->fd(args[0]->get_as(off[0]), two ? args[1]->get_as(off[1]) : 0.0);
          out.set_f64(o, r);
        } else {
          int64_t r = d->fi(args[0]->get_i64(off[0]), two ? args[1]->get_i64(off[1]) : 0);
          out.set_i64(o, r);
        }
      }
    }
  });
  return out;
}

void register_elementwise_ops(Registry& r) {
  for (const auto& d : kOps) {
    OpDef def;
    def.name = d.name;
    def.family = "elementwise";
    def.doc = d.doc;
    def.min_inputs = def.max_inputs = static_cast<int>(arity(d.kind));
    def.elementwise = true;
    if (d.kind == Kind::clamp)
      def.attrs = {{"min", AttrKind::floating, false, "lower bound (optional)"},
                   {"max", AttrKind::floating, false, "upper bound (optional)"}};
    if (d.kind == Kind::cast) def.attrs = {{"dtype", AttrKind::string, true, "target dtype"}};
    const EwDef* row = &d;
    def.infer = [row](const InferContext& ctx) { return infer_ew(*row, ctx); };
    def.reference = [](const RefContext& ctx) {
      return std::vector<HostTensor>{
          eval_elementwise(ctx.node.op, ctx.node.attrs, ctx.inputs, ctx.out_dtypes.at(0), ctx.out_shapes.at(0))};
    };
    r.add(std::move(def));
  }
}

}  // namespace dinoml::ops
