// Target-neutral call arguments of the convolution / pooling / resampling family, shared by the
// CPU lowering (lower_conv.cpp → kernels/cpu) and the GPU lowering (lower_cuda_conv.cpp →
// kernels/cuda, CUDA and ROCm): the attribute parsing (ops/conv_params.h), the shape-struct field
// lists and the mode tables live here once; each target adds its own function name, constant
// prefix ("DML_CPU_" / "DML_CUDA_") and trailing arguments (the stream).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/common/library_args.h"
#include "ops/conv_params.h"

namespace dinoml::lower {

std::string i64_literal(int64_t v);  // "INT64_C(v)"

// Window attributes (kernel / stride / padding / dilation / groups) of node `n`, or fail(n, why).
ops::Window2d read_window(const ir::Node& n, bool groups, bool dilation, LoweringFail fail);

struct Conv2dArgs {
  ops::Window2d win;        // kh / kw from the (static) weight shape
  int64_t O = 0, Cg = 0;    // output channels, input channels per group
  bool bias = false, add = false, relu = false;
  bool depthwise = false;   // groups == C == O, one input channel per group
  std::vector<std::string> fields;  // the conv2d shape struct: N C H W O kh kw sh sw pt pl pb pr dh dw groups
};
// conv2d / conv2d_bias / conv2d_bias_relu / conv2d_bias_add_relu: x[N, C, H, W], static w[O, C/g, kH, kW].
Conv2dArgs conv2d_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);

// conv3d / conv3d_bias: the conv3d shape struct (N C D H W O kd kh kw sd sh sw pd0 ph0 pw0 pd1 ph1 pw1
// dd dh dw groups) of x[N, C, D, H, W] and static w[O, C/g, kD, kH, kW].
std::vector<std::string> conv3d_fields(EmitContext& cx, const ir::Node& n, LoweringFail fail);

// max_pool2d / avg_pool2d: the pool2d shape struct (N C H W OH OW kh kw sh sw pt pl pb pr dh dw include_pad).
std::vector<std::string> pool2d_fields(EmitContext& cx, const ir::Node& n, LoweringFail fail);

// global_avg_pool2d: planes, plane size, x, y.
std::string global_avg_pool_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);

// interpolate: mode, coordinate mode, nearest mode (constants with `prefix`), planes, H, W, OH, OW,
// 1/scale_h, 1/scale_w, x, y. `mode_out` gets "nearest" / "bilinear".
std::string interpolate_args(EmitContext& cx, const ir::Node& n, const std::string& prefix, LoweringFail fail,
                             std::string* mode_out);

// batch_norm (inference): N, C, inner, x, gamma, beta, mean, var, eps, y.
std::string batch_norm_args(EmitContext& cx, const ir::Node& n, LoweringFail fail);

}  // namespace dinoml::lower
