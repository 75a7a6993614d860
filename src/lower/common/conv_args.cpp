#include "lower/common/conv_args.h"

#include <map>

namespace dinoml::lower {

std::string i64_literal(int64_t v) { return "INT64_C(" + std::to_string(v) + ")"; }

ops::Window2d read_window(const ir::Node& n, bool groups, bool dilation, LoweringFail fail) {
  ops::Window2d w;
  if (auto e = ops::read_window2d(n, w, groups, dilation); !e.empty()) fail(n, e);
  return w;
}

Conv2dArgs conv2d_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  if (x.shape.size() != 4 || w.shape.size() != 4) fail(n, "expects x[N, C, H, W] and w[O, C/groups, kH, kW]");
  for (const auto& e : w.shape)
    if (!e.is_const()) fail(n, "weight shape must be static");
  Conv2dArgs c;
  c.win = read_window(n, true, true, fail);
  c.O = w.shape[0].const_value();
  c.Cg = w.shape[1].const_value();
  c.win.kh = w.shape[2].const_value();
  c.win.kw = w.shape[3].const_value();
  if (c.O % c.win.groups != 0) fail(n, "output channels not divisible by groups");
  c.bias = n.op != "conv2d";
  c.add = n.op == "conv2d_bias_add_relu";
  c.relu = n.op == "conv2d_bias_relu" || c.add;
  c.depthwise = c.win.groups > 1 && c.Cg == 1 && c.O == c.win.groups && x.shape[1].is_const() &&
                x.shape[1].const_value() == c.win.groups;
  const auto& win = c.win;
  c.fields = {cx.cpp(x.shape[0]),     cx.cpp(x.shape[1]),     cx.cpp(x.shape[2]),     cx.cpp(x.shape[3]),
              i64_literal(c.O),       i64_literal(win.kh),    i64_literal(win.kw),    i64_literal(win.sh),
              i64_literal(win.sw),    i64_literal(win.pt),    i64_literal(win.pl),    i64_literal(win.pb),
              i64_literal(win.pr),    i64_literal(win.dh),    i64_literal(win.dw),    i64_literal(win.groups)};
  return c;
}

std::vector<std::string> conv3d_fields(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  if (x.shape.size() != 5 || w.shape.size() != 5) fail(n, "expects x[N, C, D, H, W] and w[O, C/groups, kD, kH, kW]");
  for (const auto& e : w.shape)
    if (!e.is_const()) fail(n, "weight shape must be static");
  ops::Window3d win;
  if (auto e = ops::read_window3d(n, win); !e.empty()) fail(n, e);
  std::vector<std::string> f;
  for (size_t i = 0; i < 5; ++i) f.push_back(cx.cpp(x.shape[i]));
  f.push_back(i64_literal(w.shape[0].const_value()));
  for (size_t i = 2; i < 5; ++i) f.push_back(i64_literal(w.shape[i].const_value()));
  for (int64_t v : win.s) f.push_back(i64_literal(v));
  for (int64_t v : win.p) f.push_back(i64_literal(v));
  for (int64_t v : win.d) f.push_back(i64_literal(v));
  f.push_back(i64_literal(win.groups));
  return f;
}

std::vector<std::string> pool2d_fields(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const bool is_max = n.op == "max_pool2d";
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) fail(n, "expects x[N, C, H, W]");
  const ops::Window2d win = read_window(n, false, is_max, fail);
  const auto& k = n.attr_ints("kernel");
  if (k.size() != 2) fail(n, "kernel must hold 2 values");
  const bool include_pad = n.attr_bool("count_include_pad", true);
  return {cx.cpp(x.shape[0]),  cx.cpp(x.shape[1]),  cx.cpp(x.shape[2]),  cx.cpp(x.shape[3]),  cx.cpp(y.shape[2]),
          cx.cpp(y.shape[3]),  i64_literal(k[0]),   i64_literal(k[1]),   i64_literal(win.sh), i64_literal(win.sw),
          i64_literal(win.pt), i64_literal(win.pl), i64_literal(win.pb), i64_literal(win.pr), i64_literal(win.dh),
          i64_literal(win.dw), include_pad ? "1" : "0"};
}

std::string global_avg_pool_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() != 4) fail(n, "expects x[N, C, H, W]");
  return cx.cpp_prod(x.shape, 0, 2) + ", " + cx.cpp_prod(x.shape, 2, 4) + ", " + cx.ptr(n.inputs[0]) + ", " +
         cx.ptr(n.outputs[0]);
}

std::string interpolate_args(EmitContext& cx, const ir::Node& n, const std::string& prefix, LoweringFail fail,
                             std::string* mode_out) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) fail(n, "expects x[N, C, H, W]");
  const std::string mode = n.attr_str("mode", "nearest");
  static const std::map<std::string, std::string> ctms = {{"half_pixel", "COORD_HALF_PIXEL"},
                                                          {"pytorch_half_pixel", "COORD_PYTORCH_HALF_PIXEL"},
                                                          {"asymmetric", "COORD_ASYMMETRIC"},
                                                          {"align_corners", "COORD_ALIGN_CORNERS"}};
  static const std::map<std::string, std::string> nms = {{"round_prefer_floor", "NEAREST_ROUND_PREFER_FLOOR"},
                                                         {"round_prefer_ceil", "NEAREST_ROUND_PREFER_CEIL"},
                                                         {"floor", "NEAREST_FLOOR"},
                                                         {"ceil", "NEAREST_CEIL"}};
  const auto ctm = ctms.find(n.attr_str("coordinate_transformation_mode", "half_pixel"));
  const auto nm = nms.find(n.attr_str("nearest_mode", "round_prefer_floor"));
  if (ctm == ctms.end() || nm == nms.end() || (mode != "nearest" && mode != "bilinear"))
    fail(n, "unknown mode / coordinate_transformation_mode / nearest_mode");
  std::string rs[2];
  for (int a = 0; a < 2; ++a) {
    if (n.has_attr("scales"))
      rs[a] = float_literal(static_cast<float>(1.0 / n.attr_floats("scales").at(static_cast<size_t>(a))));
    else
      rs[a] = "((float)(" + cx.cpp(x.shape[2 + a]) + ") / (float)(" + cx.cpp(y.shape[2 + a]) + "))";
  }
  if (mode_out) *mode_out = mode;
  return prefix + (mode == "nearest" ? "INTERP_NEAREST" : "INTERP_BILINEAR") + ", " + prefix + ctm->second + ", " +
         prefix + nm->second + ", " + cx.cpp_prod(x.shape, 0, 2) + ", " + cx.cpp(x.shape[2]) + ", " +
         cx.cpp(x.shape[3]) + ", " + cx.cpp(y.shape[2]) + ", " + cx.cpp(y.shape[3]) + ", " + rs[0] + ", " + rs[1] +
         ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]);
}

std::string batch_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail) {
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() < 2) fail(n, "expects x[N, C, ...]");
  if (n.inputs.size() < 5) fail(n, "expects x, gamma, beta, running mean and running var");
  return cx.cpp(x.shape[0]) + ", " + cx.cpp(x.shape[1]) + ", " + cx.cpp_prod(x.shape, 2, x.shape.size()) + ", " +
         cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.inputs[2]) + ", " + cx.ptr(n.inputs[3]) +
         ", " + cx.ptr(n.inputs[4]) + ", " + float_literal(n.attr_float("eps", 1e-5)) + ", " + cx.ptr(n.outputs[0]);
}

}  // namespace dinoml::lower
