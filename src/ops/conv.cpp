// Convolution family: conv2d, conv2d_bias, conv2d_bias_relu, conv2d_bias_add_relu (NCHW, weights
// [O, C/groups, kH, kW], ONNX-order padding) and inference batch_norm. The four conv names share
// one schema, one shape rule and one reference loop; an epilogue is "bias?, residual?, relu?".
// Depthwise convolution is conv2d with groups == C (the CPU lowering gives it its own kernel).
#include <cmath>

#include "ops/conv_params.h"
#include "ops/op_helpers.h"

namespace dinoml::ops {

std::string read_window2d(const ir::Node& n, Window2d& w, bool has_groups, bool has_dilation) {
  auto pair = [&](const char* name, int64_t& a, int64_t& b, int64_t min) -> std::string {
    if (!n.has_attr(name)) return {};
    const auto& v = n.attr_ints(name);
    if (v.size() != 2) return std::string(name) + " must hold 2 values (h, w), got " + std::to_string(v.size());
    if (v[0] < min || v[1] < min)
      return std::string(name) + " values must be >= " + std::to_string(min) + ", got (" + std::to_string(v[0]) + ", " +
             std::to_string(v[1]) + ")";
    a = v[0];
    b = v[1];
    return {};
  };
  if (auto e = pair("stride", w.sh, w.sw, 1); !e.empty()) return e;
  if (has_dilation)
    if (auto e = pair("dilation", w.dh, w.dw, 1); !e.empty()) return e;
  if (n.has_attr("padding")) {
    const auto& p = n.attr_ints("padding");
    if (p.size() != 4)
      return "padding must hold 4 values (top, left, bottom, right), got " + std::to_string(p.size());
    for (int64_t v : p)
      if (v < 0) return "padding values must be >= 0, got " + std::to_string(v);
    w.pt = p[0];
    w.pl = p[1];
    w.pb = p[2];
    w.pr = p[3];
  }
  if (has_groups) {
    w.groups = n.attr_int("groups", 1);
    if (w.groups < 1) return "groups must be >= 1, got " + std::to_string(w.groups);
  }
  return {};
}

namespace {

struct ConvEpilogue {
  const char* name;
  bool bias, residual, relu;
  const char* doc;
};

const ConvEpilogue kConvOps[] = {
    {"conv2d", false, false, false, "2-D convolution y[N,O,Ho,Wo] of x[N,C,H,W] with w[O,C/groups,kH,kW]"},
    {"conv2d_bias", true, false, false, "conv2d(x, w) + b[O]"},
    {"conv2d_bias_relu", true, false, true, "relu(conv2d(x, w) + b[O])"},
    {"conv2d_bias_add_relu", true, true, true, "relu(conv2d(x, w) + b[O] + r), r with y's shape"},
};

ir::IntExpr out_extent(const ir::IntExpr& in, int64_t p0, int64_t p1, int64_t k, int64_t s, int64_t d) {
  return (in + ir::IntExpr(p0 + p1 - d * (k - 1) - 1)) / ir::IntExpr(s) + ir::IntExpr(int64_t{1});
}

void expect_positive(const InferContext& ctx, const ir::IntExpr& e, const char* axis, const std::string& detail) {
  if (e.is_const() && e.const_value() < 1)
    ctx.fail("output " + std::string(axis) + " extent would be " + std::to_string(e.const_value()) + " (" + detail +
             "): the window does not fit the padded input");
}

Window2d conv_window(const InferContext& ctx) {
  Window2d w;
  if (auto e = read_window2d(ctx.node, w, true, true); !e.empty()) ctx.fail(e);
  return w;
}

std::vector<TensorType> infer_conv(const ConvEpilogue& e, const InferContext& ctx) {
  detail::expect_conv_operands(ctx, 4, "[N, C, H, W]", "[O, C/groups, kH, kW]");
  const auto& x = ctx.inputs[0].shape;
  const auto& w = ctx.inputs[1].shape;
  for (size_t i = 0; i < 4; ++i)
    if (!w[i].is_const()) ctx.fail("w " + detail::describe_input(ctx, 1) + " must have a static shape");
  Window2d win = conv_window(ctx);
  const int64_t O = w[0].const_value(), Cg = w[1].const_value();
  win.kh = w[2].const_value();
  win.kw = w[3].const_value();
  if (O < 1 || Cg < 1 || win.kh < 1 || win.kw < 1)
    ctx.fail("w " + detail::describe_input(ctx, 1) + " must have non-zero extents");
  detail::expect_conv_groups(ctx, O, win.groups);
  if (win.groups > 1) {
    if (!x[1].is_const())
      ctx.fail("channels of x " + detail::describe_input(ctx, 0) + " must be static when groups > 1");
    if (x[1].const_value() != Cg * win.groups)
      ctx.fail("x " + detail::describe_input(ctx, 0) + " has C = " + std::to_string(x[1].const_value()) +
               " but w " + detail::describe_input(ctx, 1) + " expects C/groups = " + std::to_string(Cg) + " with groups = " +
               std::to_string(win.groups) + " (C = " + std::to_string(Cg * win.groups) + ")");
  }
  ir::Shape out = {x[0], w[0], out_extent(x[2], win.pt, win.pb, win.kh, win.sh, win.dh),
                   out_extent(x[3], win.pl, win.pr, win.kw, win.sw, win.dw)};
  expect_positive(ctx, out[2], "height", "H + pads - dilation*(kH-1) - 1 < 0");
  expect_positive(ctx, out[3], "width", "W + pads - dilation*(kW-1) - 1 < 0");
  if (e.bias) {
    const auto& b = ctx.inputs[2].shape;
    if (b.size() != 1 || b[0] != w[0])
      ctx.fail("bias " + detail::describe_input(ctx, 2) + " must have shape [O] = [" + std::to_string(O) + "]");
  }
  if (e.residual && ctx.inputs[3].shape != out)
    ctx.fail("residual r " + detail::describe_input(ctx, 3) + " must have the output shape " + ir::shape_to_string(out));
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_conv(const ConvEpilogue& e, const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const HostTensor& w = ctx.in(1);
  Window2d win;
  if (auto err = read_window2d(ctx.node, win, true, true); !err.empty()) detail::ref_fail(ctx, err);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  const int64_t Ho = out.shape[2], Wo = out.shape[3], Og = O / win.groups;
  if (Cg * win.groups != C) detail::ref_fail(ctx, "channels of x do not match w and groups");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          double acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < KH; ++i) {
              const int64_t ih = oh * win.sh - win.pt + i * win.dh;
              if (ih < 0 || ih >= H) continue;
              for (int64_t j = 0; j < KW; ++j) {
                const int64_t iw = ow * win.sw - win.pl + j * win.dw;
                if (iw < 0 || iw >= W) continue;
                acc += x.get_f64(((n * C + g * Cg + c) * H + ih) * W + iw) * w.get_f64(((o * Cg + c) * KH + i) * KW + j);
              }
            }
          const int64_t yi = ((n * O + o) * Ho + oh) * Wo + ow;
          if (e.bias) acc += ctx.in(2).get_f64(o);
          if (e.residual) acc += ctx.in(3).get_f64(yi);
          out.set_f64(yi, e.relu ? detail::relu(acc) : acc);
        }
    }
  return {out};
}

// ---- batch_norm (inference) -------------------------------------------------------------------
std::vector<TensorType> infer_batch_norm(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.expect_float(i);
  detail::expect_all_same_dtype(ctx);
  const auto& x = ctx.inputs[0].shape;
  if (x.size() < 2) ctx.fail("x " + detail::describe_input(ctx, 0) + " must be [N, C, ...] (rank >= 2)");
  static const char* names[] = {"", "mean", "var", "gamma", "beta"};
  for (size_t i = 1; i < 5; ++i)
    if (ctx.inputs[i].shape != ir::Shape{x[1]})
      ctx.fail(std::string(names[i]) + " " + detail::describe_input(ctx, i) + " must have shape [C] = [" +
               x[1].to_string() + "] (C from x " + detail::describe_input(ctx, 0) + ")");
  if (ctx.node.attr_float("eps", 1e-5) < 0) ctx.fail("eps must be >= 0");
  return {ctx.inputs[0]};
}

std::vector<HostTensor> ref_batch_norm(const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const double eps = ctx.node.attr_float("eps", 1e-5);
  const int64_t N = x.shape[0], C = x.shape[1], S = detail::product(x.shape, 2, x.shape.size());
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  for (int64_t c = 0; c < C; ++c) {
    const double scale = ctx.in(3).get_f64(c) / std::sqrt(ctx.in(2).get_f64(c) + eps);
    const double mean = ctx.in(1).get_f64(c), beta = ctx.in(4).get_f64(c);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        out.set_f64(i, (x.get_f64(i) - mean) * scale + beta);
      }
  }
  return {out};
}

}  // namespace

void register_conv_ops(Registry& r) {
  for (const ConvEpilogue& e : kConvOps) {
    OpDef def;
    def.name = e.name;
    def.family = "conv";
    def.doc = e.doc;
    def.min_inputs = def.max_inputs = 2 + int(e.bias) + int(e.residual);
    def.attrs = {{"stride", AttrKind::ints, false, "(sh, sw), default (1, 1)"},
                 {"padding", AttrKind::ints, false, "(top, left, bottom, right), default 0s"},
                 {"dilation", AttrKind::ints, false, "(dh, dw), default (1, 1)"},
                 {"groups", AttrKind::integer, false, "channel groups (C and O divisible), default 1"}};
    const ConvEpilogue* ep = &e;
    def.infer = [ep](const InferContext& ctx) { return infer_conv(*ep, ctx); };
    def.reference = [ep](const RefContext& ctx) { return ref_conv(*ep, ctx); };
    r.add(std::move(def));
  }
  OpDef bn;
  bn.name = "batch_norm";
  bn.family = "conv";
  bn.doc = "inference batch norm of x[N, C, ...]: (x - mean) / sqrt(var + eps) * gamma + beta, params [C]";
  bn.min_inputs = bn.max_inputs = 5;
  bn.attrs = {{"eps", AttrKind::floating, false, "variance epsilon (1e-5)"}};
  bn.infer = infer_batch_norm;
  bn.reference = ref_batch_norm;
  r.add(std::move(bn));
}

}  // namespace dinoml::ops
