// ONNX convolution, pooling, resizing and batch normalisation → the DinoML ops conv2d /
// conv2d_bias (1-d and 2-d), conv3d / conv3d_bias, max_pool2d, avg_pool2d (1-d, 2-d, and 3-d as
// two separable passes), global_avg_pool2d, interpolate and batch_norm, plus GlobalMaxPool as
// reduce_max. Spatial extents may be symbolic wherever the output extent stays an expression of
// them (explicit pads, SAME with stride 1, integer Resize scales). Attribute conventions:
// padding = (top, left, bottom, right), which is ONNX's pads order for two spatial axes.
#include <algorithm>
#include <cmath>
#include <functional>

#include "import/onnx/onnx_context.h"
#include "ops/registry.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

void require_op(const std::string& op) {
  if (!ops::Registry::global().find(op))
    throw Unsupported("the DinoML op '" + op + "' is not available in this build");
}

// Explicit ONNX-order pads (begin per spatial axis, then end per spatial axis) from pads /
// auto_pad for the spatial extents `in` (symbolic allowed). SAME_* pads total
// max(0, (ceil(in/s) - 1)·s + (k-1)·d + 1 - in): static for stride 1, and for a symbolic extent
// with stride > 1 it depends on the extent modulo the stride, which a compiled graph cannot follow.
std::vector<int64_t> onnx_pads(NodeView& n, const ir::Shape& in, const std::vector<int64_t>& k,
                               const std::vector<int64_t>& stride, const std::vector<int64_t>& dil) {
  const size_t sp = in.size();
  const std::string auto_pad = n.s("auto_pad", "NOTSET");
  std::vector<int64_t> pads = n.ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (pads.size() != 2 * sp)
    throw Invalid("node '" + n.name + "' (" + n.op() + "): pads must hold " + std::to_string(2 * sp) + " values for " +
                  std::to_string(sp) + " spatial axes, got " + std::to_string(pads.size()));
  if (auto_pad == "NOTSET") return pads;
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * sp, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") throw Invalid("auto_pad '" + auto_pad + "'");
  for (size_t i = 0; i < sp; ++i) {
    const int64_t keff = (k[i] - 1) * dil[i] + 1;
    int64_t total;
    if (in[i].is_const()) {
      const int64_t L = in[i].const_value(), o = (L + stride[i] - 1) / stride[i];
      total = std::max<int64_t>(0, (o - 1) * stride[i] + keff - L);
    } else if (stride[i] == 1) {
      total = keff - 1;
    } else {
      throw Unsupported("node '" + n.name + "' (" + n.op() + "): auto_pad " + auto_pad + " with stride " +
                        std::to_string(stride[i]) + " on the symbolic spatial extent '" + in[i].to_string() +
                        "' (the padding depends on the extent modulo the stride); give that axis a static size "
                        "(dims={name: value}) or export with explicit pads");
    }
    const int64_t small = total / 2, big = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : big;
    pads[i + sp] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

// Spatial extents (axes 2..) of x, rank-checked against `sp_max` spatial axes.
ir::Shape spatial_of(Importer& im, NodeView& n, const std::string& x, size_t sp_max) {
  const auto& s = im.type(x).shape;
  if (s.size() < 3 || s.size() > sp_max + 2)
    throw Unsupported(n.op() + " on a " + std::to_string(s.size()) + "-d input (1 to " + std::to_string(sp_max) +
                      " spatial axes, [N, C, ...])");
  return ir::Shape(s.begin() + 2, s.end());
}

// Conv on 1, 2 or 3 spatial axes: 2-d → conv2d(_bias); 3-d → conv3d(_bias); 1-d → conv2d on
// [N, C, 1, L] with weights [M, C/g, 1, k] (a unit height with stride, dilation 1 and no padding
// leaves every output position's window unchanged, so this is exact for every attribute).
std::string conv_impl(Importer& im, NodeView& n, const std::string& x, const std::string& w, const std::string& bias) {
  const ir::Shape in = spatial_of(im, n, x, 3);
  const size_t sp = in.size();
  const auto& ws = im.type(w).shape;
  if (ws.size() != sp + 2)
    throw Invalid("node '" + n.name + "' (" + n.op() + "): weights of rank " + std::to_string(ws.size()) + " for a " +
                  std::to_string(sp + 2) + "-d input");
  std::vector<int64_t> kw;
  for (size_t i = 2; i < ws.size(); ++i) {
    if (!ws[i].is_const()) throw Unsupported(n.op() + " weights with a symbolic kernel extent");
    kw.push_back(ws[i].const_value());
  }
  const std::vector<int64_t> k = n.ints("kernel_shape", kw);
  const std::vector<int64_t> stride = n.ints("strides", std::vector<int64_t>(sp, 1));
  const std::vector<int64_t> dil = n.ints("dilations", std::vector<int64_t>(sp, 1));
  if (k.size() != sp || stride.size() != sp || dil.size() != sp)
    throw Invalid("node '" + n.name + "' (" + n.op() + "): kernel_shape/strides/dilations must hold " +
                  std::to_string(sp) + " values");
  if (k != kw) throw Invalid("node '" + n.name + "' (" + n.op() + "): kernel_shape differs from the weights' extents");
  const std::vector<int64_t> pads = onnx_pads(n, in, k, stride, dil);
  const int64_t groups = n.i("group", 1);
  std::vector<std::string> ins = {x, w};
  if (!bias.empty()) ins.push_back(bias);
  if (sp == 3) {
    const char* op = bias.empty() ? "conv3d" : "conv3d_bias";
    require_op(op);
    return im.op(op, ins, {{"stride", stride}, {"padding", pads}, {"dilation", dil}, {"groups", groups}});
  }
  const char* op = bias.empty() ? "conv2d" : "conv2d_bias";
  require_op(op);
  if (sp == 2) return im.op(op, ins, {{"stride", stride}, {"padding", pads}, {"dilation", dil}, {"groups", groups}});
  const ir::Attrs unit_h = {{"axes", std::vector<int64_t>{2}}};
  ins[0] = im.op("unsqueeze", {x}, unit_h);
  ins[1] = im.op("unsqueeze", {w}, unit_h);
  const std::string y = im.op(op, ins, {{"stride", std::vector<int64_t>{1, stride[0]}},
                                        {"padding", std::vector<int64_t>{0, pads[0], 0, pads[1]}},
                                        {"dilation", std::vector<int64_t>{1, dil[0]}}, {"groups", groups}});
  return im.op("squeeze", {y}, unit_h);
}

void convert_conv(Importer& im, NodeView& n) {
  im.set(n, 0, conv_impl(im, n, im.in(n, 0), im.in(n, 1), n.has_input(2) ? im.in(n, 2) : std::string()));
}

// Pads (positive) or crops (negative) axis `axis` of x by `begin` / `end` elements.
std::string pad_or_crop(Importer& im, std::string x, int64_t axis, int64_t begin, int64_t end) {
  const auto s = im.type(x).shape;
  const ir::IntExpr& len = s[static_cast<size_t>(axis)];
  const int64_t cb = begin < 0 ? -begin : 0, ce = end < 0 ? -end : 0;
  if (cb || ce) {
    if (len.is_const() && cb + ce >= len.const_value())
      throw Unsupported("ConvTranspose whose padding removes the whole output (empty tensor)");
    // [cb : len - ce], the end counted from the end so that a symbolic extent works too.
    x = im.op("slice", {x}, {{"starts", std::vector<int64_t>{cb}}, {"ends", std::vector<int64_t>{ce ? -ce : int64_t(1) << 31}},
                             {"axes", std::vector<int64_t>{axis}}});
  }
  const int64_t pb = std::max<int64_t>(begin, 0), pe = std::max<int64_t>(end, 0);
  if (pb || pe) {
    std::vector<int64_t> pads(2 * s.size(), 0);
    pads[static_cast<size_t>(axis)] = pb;
    pads[static_cast<size_t>(axis) + s.size()] = pe;
    x = im.op("pad", {x}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
  }
  return x;
}

// ConvTranspose as a direct convolution: insert stride-1 zeros between input positions, pad each
// spatial axis by (k_eff - 1 - pad_begin, k_eff - 1 - pad_end + output_padding) (negative: crop),
// and convolve (stride 1, same dilation) with the weights flipped spatially and transposed per
// group ([C, M/g, kH, kW] → [M, C/g, kH, kW]). 1-d inputs run as 2-d with H = 1.
void convert_conv_transpose(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), w = im.in(n, 1);
  const auto xs0 = im.type(x).shape;
  const size_t sp = xs0.size() >= 2 ? xs0.size() - 2 : 0;
  if (sp < 1 || sp > 3) throw Unsupported("ConvTranspose with " + std::to_string(sp) + " spatial axes (1-d to 3-d only)");
  if (im.type(x).dtype != DType::f32 && im.type(x).dtype != DType::f16 && im.type(x).dtype != DType::bf16)
    throw Unsupported("ConvTranspose of " + std::string(ir::dtype_name(im.type(x).dtype)) + " tensors");
  const auto ws0 = im.type(w).shape;
  if (ws0.size() != sp + 2) throw Invalid("node '" + n.name + "' (ConvTranspose): weights of rank " + std::to_string(ws0.size()) + " for a " + std::to_string(sp + 2) + "-d input");
  // Spatial extents may be symbolic for 1-d and 2-d inputs without output_shape / SAME padding
  // (both need the input size to place the padding).
  const bool sym_spatial = std::any_of(xs0.begin() + 2, xs0.end(), [](const ir::IntExpr& e) { return !e.is_const(); });
  for (size_t i = 0; i < sp + 2; ++i)
    if (!ws0[i].is_const() || (i == 1 && !xs0[i].is_const()))
      throw Unsupported("ConvTranspose with symbolic channel or kernel extents");
  std::vector<int64_t> k(sp);
  for (size_t i = 0; i < sp; ++i) k[i] = ws0[i + 2].const_value();
  k = n.ints("kernel_shape", k);
  std::vector<int64_t> stride = n.ints("strides", std::vector<int64_t>(sp, 1)), dil = n.ints("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> opad = n.ints("output_padding", std::vector<int64_t>(sp, 0));
  std::vector<int64_t> pads = n.ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::vector<int64_t> oshape = n.ints("output_shape");
  const std::string auto_pad = n.s("auto_pad", "NOTSET");
  const int64_t g = n.i("group", 1);
  if (k.size() != sp || stride.size() != sp || dil.size() != sp || opad.size() != sp || pads.size() != 2 * sp)
    throw Invalid("node '" + n.name + "' (ConvTranspose): kernel_shape/strides/dilations/output_padding/pads do not match " + std::to_string(sp) + " spatial axes");
  for (size_t i = 0; i < sp; ++i)
    if (k[i] != ws0[i + 2].const_value()) throw Invalid("node '" + n.name + "' (ConvTranspose): kernel_shape differs from the weights");
  if (oshape.size() > sp) oshape.erase(oshape.begin(), oshape.end() - static_cast<std::ptrdiff_t>(sp));
  if (sym_spatial && (sp == 3 || !oshape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    throw Unsupported("ConvTranspose with symbolic spatial extents needs 1-d or 2-d input without output_shape or "
                      "SAME auto_pad (fix the spatial dims with dims=)");
  std::vector<int64_t> keff(sp);
  std::vector<ir::IntExpr> in(sp);
  for (size_t i = 0; i < sp; ++i) {
    in[i] = xs0[i + 2];
    keff[i] = (k[i] - 1) * dil[i] + 1;
  }
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (oshape.empty()) for (size_t i = 0; i < sp; ++i) oshape.push_back(in[i].const_value() * stride[i]);
  } else if (auto_pad == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  } else if (auto_pad != "NOTSET") {
    throw Invalid("auto_pad '" + auto_pad + "'");
  }
  if (!oshape.empty()) {
    if (oshape.size() != sp) throw Invalid("node '" + n.name + "' (ConvTranspose): output_shape must have one value per spatial axis");
    for (size_t i = 0; i < sp; ++i) {
      const int64_t total = stride[i] * (in[i].const_value() - 1) + opad[i] + keff[i] - oshape[i];
      // Floor division (a larger output_shape makes the total negative: extra zeros at the end).
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (auto_pad == "SAME_UPPER") { pads[i] = half; pads[i + sp] = total - half; }
      else { pads[i] = total - half; pads[i + sp] = half; }
    }
  }
  const int64_t C = xs0[1].const_value(), Mg = ws0[1].const_value();
  if (ws0[0].const_value() != C) throw Invalid("node '" + n.name + "' (ConvTranspose): weights have " + std::to_string(ws0[0].const_value()) + " input channels, x has " + std::to_string(C));
  if (g <= 0 || C % g != 0) throw Invalid("node '" + n.name + "' (ConvTranspose): group " + std::to_string(g) + " does not divide the " + std::to_string(C) + " channels");
  const int64_t Cg = C / g;
  if (sp == 3) {
    // Zero insertion on D, H, W; padding / cropping; then a stride-1 3-d convolution computed as
    // a sum over the kernel's depth taps of 2-d convolutions on [N·Do, C, Hp, Wp] depth slices.
    const int64_t Nn = xs0[0].is_const() ? xs0[0].const_value() : -1;
    if (Nn < 0) throw Unsupported("3-d ConvTranspose with a symbolic batch");
    if (stride[0] > 1 || stride[1] > 1 || stride[2] > 1) {
      x = im.reshape(x, {Nn, C, in[0], 1, in[1], 1, in[2], 1});  // static: 3-d needs constant extents
      std::vector<int64_t> zp(16, 0);
      zp[8 + 3] = stride[0] - 1;
      zp[8 + 5] = stride[1] - 1;
      zp[8 + 7] = stride[2] - 1;
      x = im.op("pad", {x}, {{"pads", zp}, {"mode", std::string("constant")}, {"value", 0.0}});
      x = im.reshape(x, {Nn, C, in[0] * IntExpr(stride[0]), in[1] * IntExpr(stride[1]), in[2] * IntExpr(stride[2])});
    }
    for (size_t i = 0; i < 3; ++i)
      x = pad_or_crop(im, x, static_cast<int64_t>(i) + 2, keff[i] - 1 - pads[i], keff[i] - 1 - pads[i + 3] + opad[i] - (stride[i] - 1));
    std::string wt = im.reshape(w, {g, Cg, Mg, k[0], k[1], k[2]});
    wt = im.op("permute", {wt}, {{"dims", std::vector<int64_t>{0, 2, 1, 3, 4, 5}}});
    wt = im.reshape(wt, {g * Mg, Cg, k[0], k[1], k[2]});
    for (int64_t a = 2; a < 5; ++a) {
      const int64_t len = k[static_cast<size_t>(a - 2)];
      if (len == 1) continue;
      ops::HostTensor rev(DType::i64, {len});
      for (int64_t i = 0; i < len; ++i) rev.set_i64(i, len - 1 - i);
      wt = im.op("gather", {wt, im.constant(rev, "flip_idx")}, {{"axis", a}});
    }
    const auto xp = im.type(x).shape;
    const int64_t Dp = xp[2].const_value(), Hp = xp[3].const_value(), Wp = xp[4].const_value();
    const int64_t Do = Dp - keff[0] + 1;
    require_op("conv2d");
    std::string acc;
    for (int64_t t = 0; t < k[0]; ++t) {
      std::string xs = im.op("slice", {x}, {{"starts", std::vector<int64_t>{t * dil[0]}}, {"ends", std::vector<int64_t>{t * dil[0] + Do}},
                                             {"axes", std::vector<int64_t>{2}}});
      xs = im.op("permute", {xs}, {{"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}});
      xs = im.reshape(xs, {Nn * Do, C, Hp, Wp});
      ops::HostTensor ti(DType::i64, {});
      ti.set_i64(0, t);
      std::string wk = im.op("gather", {wt, im.constant(ti, "depth_tap")}, {{"axis", int64_t{2}}});
      std::string y2 = im.op("conv2d", {xs, wk}, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0, 0, 0}},
                                                  {"dilation", std::vector<int64_t>{dil[1], dil[2]}}, {"groups", g}});
      acc = acc.empty() ? y2 : im.op("add", {acc, y2});
    }
    const auto ys = im.type(acc).shape;
    const int64_t M = g * Mg;
    std::string y = im.reshape(acc, {Nn, Do, M, ys[2], ys[3]});
    y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}});
    if (n.has_input(2)) y = im.op("add", {y, im.reshape(im.in(n, 2), {1, M, 1, 1, 1})});
    im.set(n, 0, y);
    return;
  }
  // 1-d → 2-d (H = 1).
  if (sp == 1) {
    x = im.op("unsqueeze", {x}, {{"axes", std::vector<int64_t>{2}}});
    w = im.op("unsqueeze", {w}, {{"axes", std::vector<int64_t>{2}}});
    k.insert(k.begin(), 1); keff.insert(keff.begin(), 1); stride.insert(stride.begin(), 1); dil.insert(dil.begin(), 1);
    opad.insert(opad.begin(), 0); in.insert(in.begin(), 1);
    pads = {0, pads[0], 0, pads[1]};
  }
  const auto xs = im.type(x).shape;
  // Zero insertion: [N, C, H, W] → [N, C, H, 1, W, 1] → pad → [N, C, H*sH, W*sW] (then the
  // trailing s-1 zeros of each axis are part of the end padding below).
  if (stride[0] > 1 || stride[1] > 1) {
    x = im.reshape(x, {xs[0], xs[1], in[0], 1, in[1], 1});
    x = im.op("pad", {x}, {{"pads", std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, stride[0] - 1, 0, stride[1] - 1}},
                           {"mode", std::string("constant")}, {"value", 0.0}});
    x = im.reshape(x, {xs[0], xs[1], in[0] * IntExpr(stride[0]), in[1] * IntExpr(stride[1])});
  }
  for (size_t i = 0; i < 2; ++i) {
    const int64_t begin = keff[i] - 1 - pads[i];
    const int64_t end = keff[i] - 1 - pads[i + 2] + opad[i] - (stride[i] - 1);
    x = pad_or_crop(im, x, static_cast<int64_t>(i) + 2, begin, end);
  }
  // Weights: [C, Mg, kH, kW] → [g, Cg, Mg, kH, kW] → [g, Mg, Cg, kH, kW] → [g*Mg, Cg, kH, kW], flipped.
  std::string wt = im.reshape(w, {g, Cg, Mg, k[0], k[1]});
  wt = im.op("permute", {wt}, {{"dims", std::vector<int64_t>{0, 2, 1, 3, 4}}});
  wt = im.reshape(wt, {g * Mg, Cg, k[0], k[1]});
  for (int64_t a = 2; a < 4; ++a) {
    const int64_t len = k[static_cast<size_t>(a - 2)];
    if (len == 1) continue;
    ops::HostTensor rev(DType::i64, {len});
    for (int64_t i = 0; i < len; ++i) rev.set_i64(i, len - 1 - i);
    wt = im.op("gather", {wt, im.constant(rev, "flip_idx")}, {{"axis", a}});
  }
  const bool bias = n.has_input(2);
  const char* op = bias ? "conv2d_bias" : "conv2d";
  require_op(op);
  std::vector<std::string> ins = {x, wt};
  if (bias) ins.push_back(im.in(n, 2));
  std::string y = im.op(op, ins, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{0, 0, 0, 0}},
                                  {"dilation", dil}, {"groups", g}});
  if (sp == 1) y = im.op("squeeze", {y}, {{"axes", std::vector<int64_t>{2}}});
  im.set(n, 0, y);
}

// MaxPool with its Indices output (2-d): the windows are gathered from the padded, flattened
// plane with a constant [Ho·Wo·kH·kW] index map (padding holds the lowest float, never a max
// unless a window is all padding), argmax picks the first maximum of each window, and a constant
// table turns the window slot into the input's flat index (row-major, or column-major for
// storage_order 1) plus the (n, c) plane offset.
void maxpool_with_indices(Importer& im, NodeView& n, const std::string& x) {
  const auto s = im.type(x).shape;
  if (s.size() != 4) throw Unsupported("the Indices output of MaxPool on a " + std::to_string(s.size()) + "-d input (2-d spatial only)");
  for (const auto& e : s)
    if (!e.is_const()) throw Unsupported("the Indices output of MaxPool with symbolic extents");
  if (!ir::is_float(im.type(x).dtype)) throw Unsupported("the Indices output of MaxPool on integer tensors");
  const int64_t N = s[0].const_value(), C = s[1].const_value(), H = s[2].const_value(), W = s[3].const_value();
  std::vector<int64_t> k = n.ints("kernel_shape");
  std::vector<int64_t> stride = n.ints("strides", {1, 1}), dil = n.ints("dilations", {1, 1});
  if (k.size() != 2 || stride.size() != 2 || dil.size() != 2) throw Invalid("kernel_shape/strides/dilations must have 2 values");
  auto pads = onnx_pads(n, ir::Shape{ir::IntExpr(H), ir::IntExpr(W)}, k, stride, dil);
  if (n.i("ceil_mode", 0) != 0) throw Unsupported("ceil_mode with the Indices output of MaxPool");
  const bool col_major = n.i("storage_order", 0) != 0;
  const int64_t Hp = H + pads[0] + pads[2], Wp = W + pads[1] + pads[3];
  const int64_t Ho = (Hp - ((k[0] - 1) * dil[0] + 1)) / stride[0] + 1, Wo = (Wp - ((k[1] - 1) * dil[1] + 1)) / stride[1] + 1;
  if (Ho <= 0 || Wo <= 0) throw Invalid("node '" + n.name + "' (MaxPool): the window is larger than the padded input");
  const int64_t kk = k[0] * k[1];
  std::string xp = im.op("pad", {x}, {{"pads", std::vector<int64_t>{0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]}},
                                      {"mode", std::string("constant")}, {"value", -3.4028234663852886e38}});
  xp = im.reshape(xp, {N, C, Hp * Wp});
  ops::HostTensor gidx(DType::i64, {Ho * Wo * kk});
  ops::HostTensor table(DType::i64, {Ho, Wo, kk});
  for (int64_t oh = 0; oh < Ho; ++oh)
    for (int64_t ow = 0; ow < Wo; ++ow)
      for (int64_t a = 0; a < k[0]; ++a)
        for (int64_t b = 0; b < k[1]; ++b) {
          const int64_t hp = oh * stride[0] + a * dil[0], wp = ow * stride[1] + b * dil[1];
          const int64_t slot = ((oh * Wo + ow) * kk) + a * k[1] + b;
          gidx.set_i64(slot, hp * Wp + wp);
          const int64_t h = std::clamp<int64_t>(hp - pads[0], 0, H - 1), w = std::clamp<int64_t>(wp - pads[1], 0, W - 1);
          table.set_i64(slot, col_major ? w * H + h : h * W + w);
        }
  std::string win = im.op("gather", {xp, im.constant(gidx, "maxpool_windows")}, {{"axis", int64_t{2}}});
  win = im.reshape(win, {N, C, Ho, Wo, kk});
  std::string am = im.op("argmax", {win}, {{"axis", int64_t{4}}, {"keepdim", true}});
  std::string vals = im.op("reduce_max", {win}, attrs_axes({4}, false));
  std::string ar = im.reshape(im.op("arange", {}, {{"end", kk}, {"dtype", std::string("int64")}}), {1, 1, 1, 1, kk});
  std::string onehot = im.cast(im.op("eq", {im.cast(am, DType::i64), ar}), DType::i64);
  std::string idx = im.op("reduce_sum", {im.op("mul", {onehot, im.constant(table, "maxpool_index_table")})}, attrs_axes({4}, false));
  ops::HostTensor base(DType::i64, {N, C, 1, 1});
  for (int64_t i = 0; i < N * C; ++i) base.set_i64(i, i * H * W);
  idx = im.op("add", {idx, im.constant(base, "maxpool_plane_offset")});
  im.set(n, 0, vals);
  im.set(n, 1, idx);
}

// 3-d pooling separated into a 2-d pool over (H, W) on [N, C·D, H, W] and a pool over D on
// [N, C, H'·W', D] with a (1, kD) window: max of maxes is the max; for averages both the
// count_include_pad divisor and the valid-element count of a 3-d window are products of per-axis
// factors, so the average of per-axis averages equals the 3-d average. `pads` in ONNX order.
std::string pool3d(Importer& im, const std::string& x, const std::vector<int64_t>& k, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& pads, const std::vector<int64_t>& dil,
                   const std::function<std::string(const std::string&, std::vector<int64_t>, std::vector<int64_t>,
                                                   std::vector<int64_t>, std::vector<int64_t>)>& pool) {
  const auto s = im.type(x).shape;
  std::string y = im.reshape(x, {s[0], s[1] * s[2], s[3], s[4]});
  y = pool(y, {k[1], k[2]}, {stride[1], stride[2]}, {pads[1], pads[2], pads[4], pads[5]}, {dil[1], dil[2]});
  const auto s2 = im.type(y).shape;
  y = im.reshape(y, {s[0], s[1], s[2], s2[2] * s2[3]});
  y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
  y = pool(y, {1, k[0]}, {1, stride[0]}, {0, pads[0], 0, pads[3]}, {1, dil[0]});
  const ir::IntExpr Do = im.type(y).shape[3];
  y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{0, 1, 3, 2}}});
  return im.reshape(y, {s[0], s[1], Do, s2[2], s2[3]});
}

// MaxPool / AveragePool on 1, 2 or 3 spatial axes (symbolic extents allowed): 2-d → max_pool2d /
// avg_pool2d; 1-d → the 2-d op on [N, C, 1, L] with a (1, k) window (exact: the unit axis has one
// window of one element); 3-d → pool3d above.
void convert_pool(Importer& im, NodeView& n, bool max) {
  std::string x = im.in(n, 0);
  const ir::Shape in = spatial_of(im, n, x, 3);
  const size_t sp = in.size();
  std::vector<int64_t> k = n.ints("kernel_shape");
  std::vector<int64_t> stride = n.ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = n.ints("dilations", std::vector<int64_t>(sp, 1));
  if (k.size() != sp || stride.size() != sp || dil.size() != sp)
    throw Invalid("node '" + n.name + "' (" + n.op() + "): kernel_shape/strides/dilations must hold " +
                  std::to_string(sp) + " values for a " + std::to_string(sp + 2) + "-d input");
  std::vector<int64_t> pads = onnx_pads(n, in, k, stride, dil);
  const bool ceil_mode = n.i("ceil_mode", 0) != 0;
  if (n.has_output(1)) {
    if (!max || sp != 2) throw Unsupported("the Indices output of a " + std::to_string(sp) + "-d MaxPool (2-d only)");
    maxpool_with_indices(im, n, x);
    return;
  }
  if (max && n.i("storage_order", 0) != 0) throw Unsupported("storage_order = 1");
  if (!max && dil != std::vector<int64_t>(sp, 1)) throw Unsupported("dilated AveragePool");
  const bool cip = !max && n.i("count_include_pad", 0) != 0;
  // 8-bit integers pool exactly in float32 (every value is representable; max picks one).
  const DType dt = im.type(x).dtype;
  const bool int8ish = max && (dt == DType::u8 || dt == DType::i8);
  if (!ir::is_float(dt) && !int8ish) throw Unsupported(n.op() + " of " + std::string(ir::dtype_name(dt)) + " tensors");
  if (int8ish) x = im.cast(x, DType::f32);
  auto pool = [&](const std::string& v, std::vector<int64_t> kk, std::vector<int64_t> ss, std::vector<int64_t> pp,
                  std::vector<int64_t> dd) {
    ir::Attrs a = {{"kernel", kk}, {"stride", ss}, {"padding", pp}, {"ceil_mode", ceil_mode}};
    if (max) {
      a["dilation"] = dd;
      require_op("max_pool2d");
      return im.op("max_pool2d", {v}, a);
    }
    a["count_include_pad"] = cip;
    require_op("avg_pool2d");
    return im.op("avg_pool2d", {v}, a);
  };
  std::string y;
  if (sp == 3) {
    y = pool3d(im, x, k, stride, pads, dil, pool);
  } else if (sp == 2) {
    y = pool(x, k, stride, pads, dil);
  } else {
    const ir::Attrs unit_h = {{"axes", std::vector<int64_t>{2}}};
    y = pool(im.op("unsqueeze", {x}, unit_h), {1, k[0]}, {1, stride[0]}, {0, pads[0], 0, pads[1]}, {1, dil[0]});
    y = im.op("squeeze", {y}, unit_h);
  }
  if (int8ish) y = im.cast(y, dt);
  im.set(n, 0, y);
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
  if (n.i("training_mode", 0) != 0 || n.num_outputs() > 1) {
    // Training mode: normalise with the batch statistics (population variance over every axis but
    // C) and output the updated running mean / variance: r·momentum + batch·(1 − momentum).
    if (n.opset < 14) throw Unsupported("training-mode BatchNormalization before opset 14");
    const double eps = n.f("epsilon", 1e-5f), mom = n.f("momentum", 0.9f);
    std::string x = im.in(n, 0);
    const size_t rank = im.type(x).shape.size();
    if (rank < 2 || !ir::is_float(im.type(x).dtype)) throw Unsupported("training-mode BatchNormalization needs a float [N, C, ...] input");
    std::vector<int64_t> axes;
    for (size_t a = 0; a < rank; ++a)
      if (a != 1) axes.push_back(static_cast<int64_t>(a));
    std::string mean = im.op("reduce_mean", {x}, attrs_axes(axes, false));  // [C]
    ir::Shape bc(rank, ir::IntExpr(int64_t{1}));
    bc[1] = im.type(x).shape[1];
    std::string d = im.op("sub", {x, im.reshape(mean, bc)});
    std::string var = im.op("reduce_mean", {im.op("mul", {d, d})}, attrs_axes(axes, false));
    require_op("batch_norm");
    im.set(n, 0, im.op("batch_norm", {x, mean, var, im.in(n, 1), im.in(n, 2)}, {{"eps", eps}}));
    auto running = [&](size_t k, const std::string& batch) {
      std::string r = im.op("mul", {im.in(n, k), im.scalar(im.type(batch).dtype, mom)});
      return im.op("add", {r, im.op("mul", {batch, im.scalar(im.type(batch).dtype, 1.0 - mom)})});
    };
    if (n.has_output(1)) im.set(n, 1, running(3, mean));
    if (n.has_output(2)) im.set(n, 2, running(4, var));
    return;
  }
  if (n.opset < 9 && n.i("spatial", 1) != 1) throw Unsupported("spatial = 0");
  if (n.opset < 7) n.ignore("is_test");
  n.ignore("momentum");
  const double eps = n.f("epsilon", 1e-5f);
  require_op("batch_norm");
  // ONNX order: X, scale, B, mean, var; DinoML: (x, mean, var, gamma, beta).
  im.set(n, 0, im.op("batch_norm", {im.in(n, 0), im.in(n, 3), im.in(n, 4), im.in(n, 1), im.in(n, 2)}, {{"eps", eps}}));
}

// ONNX's 1-d resampling rule (the reference implementation's, per output position `x`):
// source coordinate from the coordinate transformation, the n nearest source positions of the
// edge-padded axis, and their coefficients (nearest / linear / cubic). Returns, for one output
// position, (source index, weight) pairs with indices clamped to the axis (edge padding);
// `outside` is set when tf_crop_and_resize puts the position outside the input (the output there
// is extrapolation_value).
struct ResizeAxisRule {
  std::string mode, ctm, nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double roi_start = 0, roi_end = 1;
};

std::vector<std::pair<int64_t, double>> resize_taps(const ResizeAxisRule& r, int64_t in, int64_t out, double scale,
                                                    int64_t x, bool& outside) {
  outside = false;
  const double out_w = scale * static_cast<double>(in);  // the reference uses scale * input length
  double xo = 0;
  const double xd = static_cast<double>(x);
  if (r.ctm == "align_corners") {
    xo = out_w == 1 ? 0.0 : xd * (in - 1) / (out_w - 1);
  } else if (r.ctm == "asymmetric") {
    xo = xd / scale;
  } else if (r.ctm == "tf_crop_and_resize") {
    xo = out == 1 ? (r.roi_end - r.roi_start) * (in - 1) / 2.0 : xd * (r.roi_end - r.roi_start) * (in - 1) / static_cast<double>(out - 1);
    xo += r.roi_start * (in - 1);
    if (xo < 0 || xo > in - 1) { outside = true; return {}; }
  } else if (r.ctm == "pytorch_half_pixel") {
    xo = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  } else if (r.ctm == "half_pixel") {
    xo = (xd + 0.5) / scale - 0.5;
  } else if (r.ctm == "tf_half_pixel_for_nn") {
    xo = (xd + 0.5) / scale;
  }
  const double fl = std::floor(xo);
  const bool integral = xo == fl;
  const double ratio = integral ? 1.0 : xo - fl;
  std::vector<double> c;
  if (r.mode == "nearest") {
    if (integral) c = {0, 1};
    else if (r.nearest_mode == "round_prefer_floor") c = {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
    else if (r.nearest_mode == "round_prefer_ceil") c = {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    else if (r.nearest_mode == "floor") c = {1, 0};
    else c = {0, 1};  // ceil
  } else if (r.mode == "linear") {
    c = {1 - ratio, ratio};
  } else {  // cubic
    const double A = r.cubic_a, t = ratio, u = 1 - ratio;
    c = {((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
         ((A + 2) * u - (A + 3)) * u * u + 1, ((A * (u + 1) - 5 * A) * (u + 1) + 8 * A) * (u + 1) - 4 * A};
  }
  // The n positions nearest to xo (ties → the lower), on the axis padded by ceil(n/2) edge copies.
  const int64_t nt = static_cast<int64_t>(c.size()), pad = (nt + 1) / 2, limit = in + 2 * pad;
  const double xp = xo + pad;
  std::vector<int64_t> cand;
  for (int64_t i = static_cast<int64_t>(std::floor(xp)) - nt - 1; i <= static_cast<int64_t>(std::floor(xp)) + nt + 1; ++i)
    if (i >= 0 && i < limit) cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
    const double da = std::fabs(xp - a), db = std::fabs(xp - b);
    return da != db ? da < db : a < b;
  });
  cand.resize(std::min<size_t>(cand.size(), static_cast<size_t>(nt)));
  std::sort(cand.begin(), cand.end());
  std::vector<std::pair<int64_t, double>> taps;
  double sum = 0;
  for (size_t k = 0; k < cand.size(); ++k) {
    const int64_t idx = cand[k] - pad;
    double w = c[k];
    if (r.exclude_outside && (idx < 0 || idx >= in)) w = 0;
    sum += w;
    taps.push_back({std::clamp<int64_t>(idx, 0, in - 1), w});
  }
  if (r.exclude_outside && sum != 0)
    for (auto& tp : taps) tp.second /= sum;
  return taps;
}

// Resize as one interpolation matrix per resized axis: y = x ×_axis M (M[in, out] built at import
// time from the rule above), applied with gemm_rrr after moving the axis last. Handles every
// mode / coordinate transformation / exclude_outside combination of the reference exactly, for
// any rank; tf_crop_and_resize positions outside the input get extrapolation_value.
std::string resize_by_matrices(Importer& im, NodeView& n, const std::string& x, const ResizeAxisRule& base_rule,
                               const std::vector<double>& scales, const std::vector<int64_t>& out_sizes,
                               const std::vector<double>& roi, double extrapolation) {
  const auto shape = im.type(x).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::string y = x;
  std::vector<std::vector<char>> outside_masks(static_cast<size_t>(rank));
  bool any_outside = false;
  for (int64_t a = 0; a < rank; ++a) {
    const int64_t out = out_sizes[static_cast<size_t>(a)];
    if (!shape[static_cast<size_t>(a)].is_const()) {
      if (shape[static_cast<size_t>(a)] == ir::IntExpr(out) || scales[static_cast<size_t>(a)] == 1.0) continue;
      throw Unsupported("Resize of a symbolic axis");
    }
    const int64_t in = shape[static_cast<size_t>(a)].const_value();
    ResizeAxisRule r = base_rule;
    if (!roi.empty()) { r.roi_start = roi[static_cast<size_t>(a)]; r.roi_end = roi[static_cast<size_t>(a + rank)]; }
    ops::HostTensor m(DType::f32, {in, out});
    bool identity = in == out;
    std::vector<char> outside(static_cast<size_t>(out), 0);
    for (int64_t o = 0; o < out; ++o) {
      bool outs = false;
      auto taps = resize_taps(r, in, out, scales[static_cast<size_t>(a)], o, outs);
      if (outs) { outside[static_cast<size_t>(o)] = 1; any_outside = true; identity = false; continue; }
      std::vector<double> col(static_cast<size_t>(in), 0.0);
      for (auto& tp : taps) col[static_cast<size_t>(tp.first)] += tp.second;
      for (int64_t i = 0; i < in; ++i) {
        m.set_f64(i * out + o, col[static_cast<size_t>(i)]);
        if (col[static_cast<size_t>(i)] != (i == o ? 1.0 : 0.0)) identity = false;
      }
    }
    outside_masks[static_cast<size_t>(a)] = outside;
    if (identity) continue;
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      if (i != a) perm.push_back(i);
    perm.push_back(a);
    std::vector<int64_t> inv(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) inv[static_cast<size_t>(perm[static_cast<size_t>(i)])] = i;
    const bool moved = a != rank - 1;
    std::string t = moved ? im.op("permute", {y}, {{"dims", perm}}) : y;
    t = onnx_matmul(im, n, t, im.constant(m, "resize_weights"));
    y = moved ? im.op("permute", {t}, {{"dims", inv}}) : t;
  }
  if (any_outside && extrapolation != 0.0) {
    // Outside positions are 0 after the matrices (zero columns); add extrapolation_value there.
    std::vector<int64_t> oshape(out_sizes.begin(), out_sizes.end());
    ops::HostTensor add(DType::f32, oshape);
    const auto strides = ops::contiguous_strides(oshape);
    for (int64_t i = 0; i < add.numel(); ++i) {
      bool outs = false;
      for (int64_t a = 0; a < rank && !outs; ++a) {
        const int64_t idx = (i / strides[static_cast<size_t>(a)]) % oshape[static_cast<size_t>(a)];
        const auto& om = outside_masks[static_cast<size_t>(a)];
        outs = !om.empty() && om[static_cast<size_t>(idx)];
      }
      add.set_f64(i, outs ? extrapolation : 0.0);
    }
    y = im.op("add", {y, im.constant(add, "resize_extrapolation")});
  }
  return y;
}

void convert_resize(Importer& im, NodeView& n, bool upsample) {
  std::string x = im.in(n, 0);
  const auto& xs = im.type(x).shape;
  const size_t rank = xs.size();
  std::string mode = n.s("mode", "nearest");
  std::string ctm = upsample ? "asymmetric" : n.s("coordinate_transformation_mode", "half_pixel");
  std::string nearest_mode = upsample ? "floor" : n.s("nearest_mode", "round_prefer_floor");
  bool exclude_outside = false;
  double cubic_a = -0.75, extrapolation = 0.0;
  if (!upsample) {
    exclude_outside = n.i("exclude_outside", 0) != 0;
    cubic_a = n.f("cubic_coeff_a", -0.75f);
    extrapolation = n.f("extrapolation_value", 0.0f);
    if (n.i("antialias", 0) != 0) throw Unsupported("antialias");
    if (n.has("axes")) throw Unsupported("the axes attribute");
    if (n.s("keep_aspect_ratio_policy", "stretch") != "stretch") throw Unsupported("keep_aspect_ratio_policy");
  }
  if (mode == "bilinear" || mode == "trilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  if (mode != "nearest" && mode != "linear" && mode != "cubic") throw Unsupported("mode '" + mode + "'");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "asymmetric" && ctm != "align_corners" &&
      ctm != "tf_half_pixel_for_nn" && ctm != "tf_crop_and_resize")
    throw Unsupported("coordinate_transformation_mode '" + ctm + "'");
  if (nearest_mode != "round_prefer_floor" && nearest_mode != "round_prefer_ceil" && nearest_mode != "floor" && nearest_mode != "ceil")
    throw Unsupported("nearest_mode '" + nearest_mode + "'");
  std::vector<double> scales, roi;
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
    if (ctm == "tf_crop_and_resize") {
      if (!n.has_input(1)) throw Invalid("tf_crop_and_resize needs the roi input");
      roi = im.floats_of(n, 1, "roi");
      if (roi.size() != 2 * rank) throw Invalid("roi must hold 2 * rank values");
    }
  }
  if (scales.empty() && sizes.empty()) throw Invalid("Resize needs scales or sizes");
  if (!sizes.empty() && sizes.size() != rank) throw Invalid("sizes must hold one value per axis");
  if (!scales.empty() && scales.size() != rank) throw Invalid("scales must hold one value per axis");
  // Output extents and per-axis scales as the reference computes them.
  std::vector<int64_t> out(rank);
  std::vector<double> sc(rank, 1.0);
  for (size_t a = 0; a < rank; ++a) {
    if (!sizes.empty()) {
      out[a] = sizes[a];
      // A symbolic axis resized to a fixed size has no static scale (0 marks it; see below).
      sc[a] = xs[a].is_const() ? static_cast<double>(sizes[a]) / static_cast<double>(xs[a].const_value()) : 0.0;
    } else {
      if (scales[a] <= 0) throw Invalid("scales must be positive");
      sc[a] = scales[a];
      if (xs[a].is_const()) out[a] = static_cast<int64_t>(std::floor(static_cast<double>(xs[a].const_value()) * scales[a]));
    }
    if (xs[a].is_const() && out[a] <= 0) throw Invalid("Resize output extent " + std::to_string(out[a]) + " on axis " + std::to_string(a));
  }
  // The direct `interpolate` op covers 2-d NCHW nearest/linear resizing from scales whose
  // products are whole numbers (where its coordinate rule equals the reference's). On a symbolic
  // H or W it takes whole-number scales >= 1 (output extent = extent · scale), or, in linear mode,
  // fixed output sizes (the op derives the scale from the run's extent). Everything else goes
  // through interpolation matrices (static extents).
  auto whole = [](double v) { return v >= 1 && v == std::floor(v); };
  bool direct = rank == 4 && sc[0] == 1.0 && sc[1] == 1.0 && mode != "cubic" && !exclude_outside &&
                (ctm == "half_pixel" || ctm == "pytorch_half_pixel" || ctm == "asymmetric" || ctm == "align_corners") &&
                ops::Registry::global().find("interpolate") && (sizes.empty() || !xs[2].is_const() || !xs[3].is_const());
  bool symbolic_hw = false;
  if (direct)
    for (size_t a = 2; a < 4; ++a) {
      if (!xs[a].is_const()) {
        symbolic_hw = true;
        if (sizes.empty() ? !whole(sc[a]) : mode != "linear") direct = false;
      } else if (static_cast<double>(out[a]) != sc[a] * static_cast<double>(xs[a].const_value())) {
        direct = false;
      }
    }
  if (direct) {
    ir::Attrs at = {{"mode", std::string(mode == "linear" ? "bilinear" : "nearest")},
                    {"coordinate_transformation_mode", ctm},
                    {"nearest_mode", nearest_mode}};
    if (sizes.empty()) at["scales"] = std::vector<double>{sc[2], sc[3]};
    if (!sizes.empty() || !symbolic_hw) at["size"] = std::vector<int64_t>{out[2], out[3]};
    im.set(n, 0, im.op("interpolate", {x}, at));
    return;
  }
  for (size_t a = 0; a < rank; ++a)
    if (!xs[a].is_const() && (sc[a] != 1.0 || !sizes.empty()))
      throw Unsupported("Resize of the symbolic axis " + std::to_string(a) + " ('" + xs[a].to_string() +
                        "') in this mode: symbolic H and W of a 4-d input take nearest/linear resizing by whole-number "
                        "scales, or linear resizing to fixed sizes; give the axis a static size (dims={name: value})");
  if (im.type(x).dtype != DType::f32) throw Unsupported("Resize of " + std::string(ir::dtype_name(im.type(x).dtype)) + " tensors in this mode (float32 only)");
  ResizeAxisRule r;
  r.mode = mode;
  r.ctm = ctm;
  r.nearest_mode = nearest_mode;
  r.cubic_a = cubic_a;
  r.exclude_outside = exclude_outside;
  im.set(n, 0, resize_by_matrices(im, n, x, r, sc, out, roi, extrapolation));
}

}  // namespace

std::string onnx_conv(Importer& im, NodeView& n, const std::string& x, const std::string& w, const std::string& bias) {
  return conv_impl(im, n, x, w, bias);
}

void register_nn_converters(ConverterTable& t) {
  t["Conv"] = convert_conv;
  t["ConvTranspose"] = convert_conv_transpose;
  t["MaxPool"] = [](Importer& im, NodeView& n) { convert_pool(im, n, true); };
  t["AveragePool"] = [](Importer& im, NodeView& n) { convert_pool(im, n, false); };
  t["GlobalAveragePool"] = convert_global_avg_pool;
  t["GlobalMaxPool"] = convert_global_max_pool;
  t["BatchNormalization"] = convert_batch_norm;
  t["Resize"] = [](Importer& im, NodeView& n) { convert_resize(im, n, false); };
  t["Upsample"] = [](Importer& im, NodeView& n) { convert_resize(im, n, true); };
}

}  // namespace dinoml::onnx_import
