// Volumetric convolution: conv3d and conv3d_bias on NCDHW tensors, weights [O, C/groups, kD, kH, kW],
// padding in ONNX pads order (d0, h0, w0, d1, h1, w1). Any stride, padding, dilation and group
// count; spatial extents may be symbolic (the output extent is the usual floor rule per axis).
// 1-d convolution needs no op of its own: it is conv2d with a unit height (exact for every
// attribute combination), which is how the importer and the Python front end express it.
#include "ops/conv_params.h"
#include "ops/op_helpers.h"

namespace dinoml::ops {

std::string read_window3d(const ir::Node& n, Window3d& w) {
  auto triple = [&](const char* name, int64_t* dst, int64_t min) -> std::string {
    if (!n.has_attr(name)) return {};
    const auto& v = n.attr_ints(name);
    if (v.size() != 3) return std::string(name) + " must hold 3 values (d, h, w), got " + std::to_string(v.size());
    for (size_t i = 0; i < 3; ++i) {
      if (v[i] < min) return std::string(name) + " values must be >= " + std::to_string(min) + ", got " + std::to_string(v[i]);
      dst[i] = v[i];
    }
    return {};
  };
  if (auto e = triple("stride", w.s, 1); !e.empty()) return e;
  if (auto e = triple("dilation", w.d, 1); !e.empty()) return e;
  if (n.has_attr("padding")) {
    const auto& p = n.attr_ints("padding");
    if (p.size() != 6) return "padding must hold 6 values (d0, h0, w0, d1, h1, w1), got " + std::to_string(p.size());
    for (size_t i = 0; i < 6; ++i) {
      if (p[i] < 0) return "padding values must be >= 0, got " + std::to_string(p[i]);
      w.p[i] = p[i];
    }
  }
  w.groups = n.attr_int("groups", 1);
  if (w.groups < 1) return "groups must be >= 1, got " + std::to_string(w.groups);
  return {};
}

namespace {

std::vector<TensorType> infer_conv3d(bool bias, const InferContext& ctx) {
  detail::expect_conv_operands(ctx, 5, "[N, C, D, H, W]", "[O, C/groups, kD, kH, kW]");
  const auto& x = ctx.inputs[0].shape;
  const auto& w = ctx.inputs[1].shape;
  for (const auto& e : w)
    if (!e.is_const() || e.const_value() < 1)
      ctx.fail("w " + detail::describe_input(ctx, 1) + " must have a static shape with non-zero extents");
  Window3d win;
  if (auto e = read_window3d(ctx.node, win); !e.empty()) ctx.fail(e);
  const int64_t O = w[0].const_value(), Cg = w[1].const_value();
  detail::expect_conv_groups(ctx, O, win.groups);
  if (win.groups > 1 && (!x[1].is_const() || x[1].const_value() != Cg * win.groups)) {
    ctx.fail("x " + detail::describe_input(ctx, 0) + " must have C = C/groups * groups = " +
             std::to_string(Cg * win.groups) + " (static) for w " + detail::describe_input(ctx, 1) + " and groups = " +
             std::to_string(win.groups));
  }
  ir::Shape out = {x[0], w[0]};
  static const char* axis[] = {"depth", "height", "width"};
  for (size_t a = 0; a < 3; ++a) {
    const int64_t k = w[2 + a].const_value();
    const int64_t c = win.p[a] + win.p[a + 3] - win.d[a] * (k - 1) - 1;
    ir::IntExpr e = (x[2 + a] + ir::IntExpr(c)) / ir::IntExpr(win.s[a]) + ir::IntExpr(int64_t{1});
    if (x[2 + a].is_const() && x[2 + a].const_value() + c < 0)
      ctx.fail(std::string("output ") + axis[a] + " extent would be < 1: the (dilated) window does not fit the padded input");
    out.push_back(e);
  }
  if (bias) {
    const auto& b = ctx.inputs[2].shape;
    if (b.size() != 1 || b[0] != w[0])
      ctx.fail("bias " + detail::describe_input(ctx, 2) + " must have shape [O] = [" + std::to_string(O) + "]");
  }
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_conv3d(bool bias, const RefContext& ctx) {
  const HostTensor& x = ctx.in(0);
  const HostTensor& w = ctx.in(1);
  Window3d win;
  if (auto err = read_window3d(ctx.node, win); !err.empty()) detail::ref_fail(ctx, err);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t N = x.shape[0], C = x.shape[1], D = x.shape[2], H = x.shape[3], W = x.shape[4];
  const int64_t O = w.shape[0], Cg = w.shape[1], KD = w.shape[2], KH = w.shape[3], KW = w.shape[4];
  const int64_t Do = out.shape[2], Ho = out.shape[3], Wo = out.shape[4], Og = O / win.groups;
  if (Cg * win.groups != C) detail::ref_fail(ctx, "channels of x do not match w and groups");
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const int64_t g = o / Og;
      for (int64_t od = 0; od < Do; ++od)
        for (int64_t oh = 0; oh < Ho; ++oh)
          for (int64_t ow = 0; ow < Wo; ++ow) {
            double acc = bias ? ctx.in(2).get_f64(o) : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t a = 0; a < KD; ++a) {
                const int64_t id = od * win.s[0] - win.p[0] + a * win.d[0];
                if (id < 0 || id >= D) continue;
                for (int64_t i = 0; i < KH; ++i) {
                  const int64_t ih = oh * win.s[1] - win.p[1] + i * win.d[1];
                  if (ih < 0 || ih >= H) continue;
                  for (int64_t j = 0; j < KW; ++j) {
                    const int64_t iw = ow * win.s[2] - win.p[2] + j * win.d[2];
                    if (iw < 0 || iw >= W) continue;
                    acc += x.get_f64((((n * C + g * Cg + c) * D + id) * H + ih) * W + iw) *
                           w.get_f64((((o * Cg + c) * KD + a) * KH + i) * KW + j);
                  }
                }
              }
            out.set_f64((((n * O + o) * Do + od) * Ho + oh) * Wo + ow, acc);
          }
    }
  return {out};
}

}  // namespace

void register_conv3d_ops(Registry& r) {
  for (const bool bias : {false, true}) {
    OpDef def;
    def.name = bias ? "conv3d_bias" : "conv3d";
    def.family = "conv";
    def.doc = bias ? "conv3d(x, w) + b[O]"
                   : "3-D convolution y[N,O,Do,Ho,Wo] of x[N,C,D,H,W] with w[O,C/groups,kD,kH,kW]";
    def.min_inputs = def.max_inputs = bias ? 3 : 2;
    def.attrs = {{"stride", AttrKind::ints, false, "(sd, sh, sw), default (1, 1, 1)"},
                 {"padding", AttrKind::ints, false, "(d0, h0, w0, d1, h1, w1) as ONNX pads, default 0s"},
                 {"dilation", AttrKind::ints, false, "(dd, dh, dw), default (1, 1, 1)"},
                 {"groups", AttrKind::integer, false, "channel groups (C and O divisible), default 1"}};
    def.infer = [bias](const InferContext& ctx) { return infer_conv3d(bias, ctx); };
    def.reference = [bias](const RefContext& ctx) { return ref_conv3d(bias, ctx); };
    r.add(std::move(def));
  }
}

}  // namespace dinoml::ops
