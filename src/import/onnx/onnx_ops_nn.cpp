// ONNX convolution, pooling, resizing and batch normalisation → the DinoML ops conv2d /
// conv2d_bias, max_pool2d, avg_pool2d, global_avg_pool2d, interpolate and batch_norm (2-d, NCHW),
// plus GlobalMaxPool as reduce_max. Attribute conventions: padding = (top, left, bottom, right),
// which is ONNX's pads order for two spatial axes.
#include <cmath>

#include "import/onnx/onnx_context.h"
#include "ops/registry.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;

void require_op(const std::string& op) {
  if (!ops::Registry::global().find(op))
    throw Unsupported("the DinoML op '" + op + "' is not available in this build");
}

std::vector<int64_t> static_hw(Importer& im, const std::string& x, const char* what) {
  const auto& s = im.type(x).shape;
  if (s.size() != 4) throw Unsupported(std::string(what) + " on a " + std::to_string(s.size()) + "-d input (only 2-d spatial, NCHW)");
  std::vector<int64_t> hw;
  for (size_t i = 2; i < 4; ++i) {
    if (!s[i].is_const()) throw Unsupported(std::string(what) + " on symbolic spatial extents");
    hw.push_back(s[i].const_value());
  }
  return hw;
}

// Explicit (top, left, bottom, right) padding from pads / auto_pad.
std::vector<int64_t> padding_of(NodeView& n, const std::vector<int64_t>& hw, const std::vector<int64_t>& k,
                                const std::vector<int64_t>& stride, const std::vector<int64_t>& dil) {
  const std::string auto_pad = n.s("auto_pad", "NOTSET");
  std::vector<int64_t> pads = n.ints("pads", {0, 0, 0, 0});
  if (pads.size() != 4) throw Invalid("pads must hold 4 values for 2-d spatial input");
  if (auto_pad == "NOTSET") return pads;
  if (auto_pad == "VALID") return {0, 0, 0, 0};
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") throw Invalid("auto_pad '" + auto_pad + "'");
  std::vector<int64_t> out(4);
  for (size_t i = 0; i < 2; ++i) {
    const int64_t o = (hw[i] + stride[i] - 1) / stride[i];
    const int64_t total = std::max<int64_t>(0, (o - 1) * stride[i] + (k[i] - 1) * dil[i] + 1 - hw[i]);
    const int64_t small = total / 2, big = total - small;
    out[i] = auto_pad == "SAME_UPPER" ? small : big;
    out[i + 2] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return out;
}

void convert_conv(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), w = im.in(n, 1);
  auto hw = static_hw(im, x, "Conv");
  const auto& ws = im.type(w).shape;
  if (ws.size() != 4 || !ws[2].is_const() || !ws[3].is_const()) throw Unsupported("Conv weights must be [M, C/g, kH, kW] with static kernel");
  std::vector<int64_t> k = n.ints("kernel_shape", {ws[2].const_value(), ws[3].const_value()});
  std::vector<int64_t> stride = n.ints("strides", {1, 1}), dil = n.ints("dilations", {1, 1});
  if (stride.size() != 2 || dil.size() != 2 || k.size() != 2) throw Invalid("strides/dilations/kernel_shape must have 2 values");
  auto pads = padding_of(n, hw, k, stride, dil);
  const int64_t groups = n.i("group", 1);
  const bool bias = n.has_input(2);
  const char* op = bias ? "conv2d_bias" : "conv2d";
  require_op(op);
  std::vector<std::string> ins = {x, w};
  if (bias) ins.push_back(im.in(n, 2));
  im.set(n, 0, im.op(op, ins, {{"stride", stride}, {"padding", pads}, {"dilation", dil}, {"groups", groups}}));
}

void convert_pool(Importer& im, NodeView& n, bool max) {
  std::string x = im.in(n, 0);
  auto hw = static_hw(im, x, n.op().c_str());
  std::vector<int64_t> k = n.ints("kernel_shape");
  std::vector<int64_t> stride = n.ints("strides", {1, 1});
  std::vector<int64_t> dil = n.ints("dilations", {1, 1});
  if (k.size() != 2 || stride.size() != 2 || dil.size() != 2) throw Unsupported("only 2-d pooling");
  auto pads = padding_of(n, hw, k, stride, dil);
  const bool ceil_mode = n.i("ceil_mode", 0) != 0;
  if (n.has_output(1)) throw Unsupported("the Indices output of MaxPool");
  ir::Attrs a = {{"kernel", k}, {"stride", stride}, {"padding", pads}, {"ceil_mode", ceil_mode}};
  if (max) {
    if (n.i("storage_order", 0) != 0) throw Unsupported("storage_order = 1");
    a["dilation"] = dil;
    require_op("max_pool2d");
    im.set(n, 0, im.op("max_pool2d", {x}, a));
  } else {
    if (dil != std::vector<int64_t>{1, 1}) throw Unsupported("dilated AveragePool");
    a["count_include_pad"] = n.i("count_include_pad", 0) != 0;
    require_op("avg_pool2d");
    im.set(n, 0, im.op("avg_pool2d", {x}, a));
  }
}

void convert_global_avg_pool(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  if (im.type(x).shape.size() == 4) {
    require_op("global_avg_pool2d");
    im.set(n, 0, im.op("global_avg_pool2d", {x}));
    return;
  }
  std::vector<int64_t> axes;
  for (size_t a = 2; a < im.type(x).shape.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  im.set(n, 0, im.op("reduce_mean", {x}, attrs_axes(axes, true)));
}

void convert_global_max_pool(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  std::vector<int64_t> axes;
  for (size_t a = 2; a < im.type(x).shape.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  im.set(n, 0, im.op("reduce_max", {x}, attrs_axes(axes, true)));
}

void convert_batch_norm(Importer& im, NodeView& n) {
  if (n.i("training_mode", 0) != 0 || n.num_outputs() > 1) throw Unsupported("training-mode BatchNormalization");
  if (n.opset < 9 && n.i("spatial", 1) != 1) throw Unsupported("spatial = 0");
  if (n.opset < 7) n.ignore("is_test");
  n.ignore("momentum");
  const double eps = n.f("epsilon", 1e-5f);
  require_op("batch_norm");
  // ONNX order: X, scale, B, mean, var; DinoML: (x, mean, var, gamma, beta).
  im.set(n, 0, im.op("batch_norm", {im.in(n, 0), im.in(n, 3), im.in(n, 4), im.in(n, 1), im.in(n, 2)}, {{"eps", eps}}));
}

void convert_resize(Importer& im, NodeView& n, bool upsample) {
  std::string x = im.in(n, 0);
  auto hw = static_hw(im, x, n.op().c_str());
  std::string mode = n.s("mode", "nearest");
  std::string ctm = upsample ? "asymmetric" : n.s("coordinate_transformation_mode", "half_pixel");
  std::string nearest_mode = upsample ? "floor" : n.s("nearest_mode", "round_prefer_floor");
  if (!upsample) {
    if (n.i("exclude_outside", 0) != 0) throw Unsupported("exclude_outside = 1");
    n.f("cubic_coeff_a", -0.75f);
    n.f("extrapolation_value", 0.0f);
    if (n.i("antialias", 0) != 0) throw Unsupported("antialias");
    if (n.has("axes")) throw Unsupported("the axes attribute");
    if (n.s("keep_aspect_ratio_policy", "stretch") != "stretch") throw Unsupported("keep_aspect_ratio_policy");
  }
  if (mode == "linear" || mode == "bilinear") mode = "bilinear";
  else if (mode != "nearest") throw Unsupported("mode '" + mode + "'");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "asymmetric" && ctm != "align_corners")
    throw Unsupported("coordinate_transformation_mode '" + ctm + "'");
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (upsample) {
    if (n.opset < 9) {
      auto f = n.floats("scales");
      scales.assign(f.begin(), f.end());
    } else {
      scales = im.floats_of(n, 1, "scales");
    }
  } else if (n.opset < 11) {
    scales = im.floats_of(n, 1, "scales");
  } else {
    if (n.has_input(3)) sizes = im.ints_of(n, 3, "sizes");
    else if (n.has_input(2)) scales = im.floats_of(n, 2, "scales");
  }
  if (scales.empty() && sizes.empty()) throw Invalid("Resize needs scales or sizes");
  ir::Attrs a = {{"mode", mode}, {"coordinate_transformation_mode", ctm}, {"nearest_mode", nearest_mode}};
  std::vector<int64_t> out_hw(2);
  if (!sizes.empty()) {
    if (sizes.size() != 4) throw Invalid("sizes must have 4 values");
    const auto& s = im.type(x).shape;
    if (!(s[0] == ir::IntExpr(sizes[0])) || !(s[1] == ir::IntExpr(sizes[1]))) throw Unsupported("resizing N or C");
    out_hw = {sizes[2], sizes[3]};
  } else {
    if (scales.size() != 4) throw Invalid("scales must have 4 values");
    if (scales[0] != 1.0 || scales[1] != 1.0) throw Unsupported("scaling N or C");
    for (size_t i = 0; i < 2; ++i) out_hw[i] = static_cast<int64_t>(std::floor(hw[i] * scales[i + 2]));
    a["scales"] = std::vector<double>{scales[2], scales[3]};
  }
  a["size"] = out_hw;
  require_op("interpolate");
  im.set(n, 0, im.op("interpolate", {x}, a));
}

}  // namespace

void register_nn_converters(ConverterTable& t) {
  t["Conv"] = convert_conv;
  t["MaxPool"] = [](Importer& im, NodeView& n) { convert_pool(im, n, true); };
  t["AveragePool"] = [](Importer& im, NodeView& n) { convert_pool(im, n, false); };
  t["GlobalAveragePool"] = convert_global_avg_pool;
  t["GlobalMaxPool"] = convert_global_max_pool;
  t["BatchNormalization"] = convert_batch_norm;
  t["Resize"] = [](Importer& im, NodeView& n) { convert_resize(im, n, false); };
  t["Upsample"] = [](Importer& im, NodeView& n) { convert_resize(im, n, true); };
}

}  // namespace dinoml::onnx_import
