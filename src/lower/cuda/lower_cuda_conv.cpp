// CUDA lowering of the convolution family (conv2d, conv2d_bias, conv2d_bias_relu,
// conv2d_bias_add_relu), batch_norm, max/avg/global_avg pooling and interpolate: one call each
// into libdinoml_cuda_kernels (kernels/cuda/conv.cu, pool.cu) on the run's stream, with the same
// attribute parsing (ops/conv_params.h) and coordinate-mode tables as the CPU lowering.
#include <map>
#include <set>

#include "ir/error.h"
#include "lower/cuda/emit_cuda.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cuda {
namespace {

using nlohmann::json;
using cpu::brace_list;
using cpu::EmitContext;

std::string i64(int64_t v) { return "INT64_C(" + std::to_string(v) + ")"; }

json manifest(const ir::Node& n, const json& cands, const std::string& sel, const std::string& reason) {
  return {{"node", n.name}, {"op", n.op}, {"candidates", cands}, {"selected", sel}, {"reason", reason}};
}

ops::Window2d window(const ir::Node& n, bool groups, bool dilation) {
  ops::Window2d w;
  if (auto e = ops::read_window2d(n, w, groups, dilation); !e.empty()) no_cuda_lowering(n, e);
  return w;
}

ir::DType expect_float_all(const EmitContext& cx, const ir::Node& n) {
  const ir::DType t = cx.tensor(n.inputs.at(0)).dtype;
  if (t != ir::DType::f32 && t != ir::DType::f16 && t != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(t)) + " (float32/float16/bfloat16 only)");
  for (const auto& in : n.inputs)
    if (cx.tensor(in).dtype != t) no_cuda_lowering(n, "every input must have x's dtype");
  return t;
}

std::string dt(ir::DType t) { return std::to_string(static_cast<int>(t)); }

json emit_conv(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& w = cx.tensor(n.inputs.at(1));
  if (x.shape.size() != 4 || w.shape.size() != 4) no_cuda_lowering(n, "expects x[N, C, H, W] and w[O, C/groups, kH, kW]");
  for (const auto& e : w.shape)
    if (!e.is_const()) no_cuda_lowering(n, "weight shape must be static");
  ops::Window2d win = window(n, true, true);
  const int64_t O = w.shape[0].const_value(), Cg = w.shape[1].const_value();
  win.kh = w.shape[2].const_value();
  win.kw = w.shape[3].const_value();
  if (O % win.groups != 0) no_cuda_lowering(n, "output channels not divisible by groups");
  const bool bias = n.op != "conv2d", add = n.op == "conv2d_bias_add_relu";
  const bool relu = n.op == "conv2d_bias_relu" || add;
  const int64_t Og = O / win.groups;
  // mma.sync exists only on CUDA: on ROCm the library never picks it (no candidate).
  const bool half = t != ir::DType::f32 && o.arch.target == GpuTarget::cuda;
  // Candidates; the kernel library's automatic choice (direct for < 16 output channels per group,
  // else mma on fp16/bf16, SIMT on fp32) unless DINOML_CUDA_GEMM forced simt / mma.
  json cands = {"implicit_gemm_simt_64x64", "direct"};
  if (half) cands.push_back("implicit_gemm_mma_m16n8k16_64x64x32");
  std::string impl = "DML_CUDA_CONV_AUTO", sel, reason = "default (not profiled)";
  sel = Og < 16 ? "direct" : half ? "implicit_gemm_mma_m16n8k16_64x64x32" : "implicit_gemm_simt_64x64";
  if (o.gemm_impl == "simt" && o.arch.target == GpuTarget::cuda) {  // ROCm: simt is the default, not forced
    impl = "DML_CUDA_CONV_SIMT";
    sel = "implicit_gemm_simt_64x64";
    reason = "forced by DINOML_CUDA_GEMM=simt";
  } else if (o.gemm_impl == "mma" && half) {
    impl = "DML_CUDA_CONV_MMA";
    sel = "implicit_gemm_mma_m16n8k16_64x64x32";
    reason = "forced by DINOML_CUDA_GEMM=mma";
  }
  const std::vector<std::string> fields = {
      cx.cpp(x.shape[0]), cx.cpp(x.shape[1]), cx.cpp(x.shape[2]), cx.cpp(x.shape[3]), i64(O),      i64(win.kh),
      i64(win.kw),        i64(win.sh),        i64(win.sw),        i64(win.pt),        i64(win.pl), i64(win.pb),
      i64(win.pr),        i64(win.dh),        i64(win.dw),        i64(win.groups)};
  (void)Cg;
  body << "  {\n    const dml_cuda_conv2d_shape cs = " << brace_list(fields) << ";\n  "
       << checked_cuda_call(n, "dml_cuda_conv2d(" + dt(t) + ", &cs, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) +
                                   ", " + (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", " + (add ? cx.ptr(n.inputs[3]) : "NULL") +
                                   ", " + cx.ptr(n.outputs[0]) + ", " + (relu ? "1" : "0") + ", " + impl + ", stream)")
       << "  }\n";
  return manifest(n, cands, sel, reason);
}

json emit_pool(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const bool is_max = n.op == "max_pool2d";
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) no_cuda_lowering(n, "expects x[N, C, H, W]");
  ops::Window2d win = window(n, false, is_max);
  const auto& k = n.attr_ints("kernel");
  if (k.size() != 2) no_cuda_lowering(n, "kernel must hold 2 values");
  const bool include_pad = n.attr_bool("count_include_pad", true);
  const std::vector<std::string> fields = {
      cx.cpp(x.shape[0]), cx.cpp(x.shape[1]), cx.cpp(x.shape[2]), cx.cpp(x.shape[3]), cx.cpp(y.shape[2]),
      cx.cpp(y.shape[3]), i64(k[0]),          i64(k[1]),          i64(win.sh),        i64(win.sw),
      i64(win.pt),        i64(win.pl),        i64(win.pb),        i64(win.pr),        i64(win.dh),
      i64(win.dw),        include_pad ? "1" : "0"};
  const std::string fn = is_max ? "dml_cuda_max_pool2d" : "dml_cuda_avg_pool2d";
  body << "  {\n    const dml_cuda_pool2d_shape ps = " << brace_list(fields) << ";\n  "
       << checked_cuda_call(n, fn + "(" + dt(t) + ", &ps, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)")
       << "  }\n";
  return manifest(n, {fn + ".per_output"}, fn + ".per_output", "only candidate (not tunable)");
}

json emit_global_avg(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() != 4) no_cuda_lowering(n, "expects x[N, C, H, W]");
  body << checked_cuda_call(n, "dml_cuda_global_avg_pool2d(" + dt(t) + ", " + cx.cpp_prod(x.shape, 0, 2) + ", " +
                                   cx.cpp_prod(x.shape, 2, 4) + ", " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) +
                                   ", stream)");
  return manifest(n, {"dml_cuda_global_avg_pool2d.warp_per_plane"}, "dml_cuda_global_avg_pool2d.warp_per_plane",
                  "only candidate (not tunable)");
}

json emit_interpolate(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  if (x.shape.size() != 4) no_cuda_lowering(n, "expects x[N, C, H, W]");
  const std::string mode = n.attr_str("mode", "nearest");
  static const std::map<std::string, std::string> ctms = {{"half_pixel", "DML_CUDA_COORD_HALF_PIXEL"},
                                                          {"pytorch_half_pixel", "DML_CUDA_COORD_PYTORCH_HALF_PIXEL"},
                                                          {"asymmetric", "DML_CUDA_COORD_ASYMMETRIC"},
                                                          {"align_corners", "DML_CUDA_COORD_ALIGN_CORNERS"}};
  static const std::map<std::string, std::string> nms = {{"round_prefer_floor", "DML_CUDA_NEAREST_ROUND_PREFER_FLOOR"},
                                                         {"round_prefer_ceil", "DML_CUDA_NEAREST_ROUND_PREFER_CEIL"},
                                                         {"floor", "DML_CUDA_NEAREST_FLOOR"},
                                                         {"ceil", "DML_CUDA_NEAREST_CEIL"}};
  const auto ctm = ctms.find(n.attr_str("coordinate_transformation_mode", "half_pixel"));
  const auto nm = nms.find(n.attr_str("nearest_mode", "round_prefer_floor"));
  if (ctm == ctms.end() || nm == nms.end() || (mode != "nearest" && mode != "bilinear"))
    no_cuda_lowering(n, "unknown mode / coordinate_transformation_mode / nearest_mode");
  std::string rs[2];
  for (int a = 0; a < 2; ++a) {
    if (n.has_attr("scales"))
      rs[a] = cpu::float_literal(static_cast<float>(1.0 / n.attr_floats("scales").at(static_cast<size_t>(a))));
    else
      rs[a] = "((float)(" + cx.cpp(x.shape[2 + a]) + ") / (float)(" + cx.cpp(y.shape[2 + a]) + "))";
  }
  body << checked_cuda_call(n, "dml_cuda_interpolate(" + dt(t) + ", " +
                                   (mode == "nearest" ? "DML_CUDA_INTERP_NEAREST" : "DML_CUDA_INTERP_BILINEAR") + ", " +
                                   ctm->second + ", " + nm->second + ", " + cx.cpp_prod(x.shape, 0, 2) + ", " +
                                   cx.cpp(x.shape[2]) + ", " + cx.cpp(x.shape[3]) + ", " + cx.cpp(y.shape[2]) + ", " +
                                   cx.cpp(y.shape[3]) + ", " + rs[0] + ", " + rs[1] + ", " + cx.ptr(n.inputs[0]) + ", " +
                                   cx.ptr(n.outputs[0]) + ", stream)");
  return manifest(n, {"dml_cuda_interpolate." + mode}, "dml_cuda_interpolate." + mode, "only candidate (not tunable)");
}

json emit_batch_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() < 2) no_cuda_lowering(n, "expects x[N, C, ...]");
  body << checked_cuda_call(n, "dml_cuda_batch_norm(" + dt(t) + ", " + cx.cpp(x.shape[0]) + ", " + cx.cpp(x.shape[1]) + ", " +
                                   cx.cpp_prod(x.shape, 2, x.shape.size()) + ", " + cx.ptr(n.inputs[0]) + ", " +
                                   cx.ptr(n.inputs[1]) + ", " + cx.ptr(n.inputs[2]) + ", " + cx.ptr(n.inputs[3]) + ", " +
                                   cx.ptr(n.inputs[4]) + ", " + cpu::float_literal(n.attr_float("eps", 1e-5)) + ", " +
                                   cx.ptr(n.outputs[0]) + ", stream)");
  return manifest(n, {"dml_cuda_batch_norm.per_element"}, "dml_cuda_batch_norm.per_element", "only candidate (not tunable)");
}

}  // namespace

bool is_cuda_conv_op(const std::string& op) {
  static const std::set<std::string> ops = {"conv2d",     "conv2d_bias",       "conv2d_bias_relu", "conv2d_bias_add_relu",
                                            "batch_norm", "max_pool2d",        "avg_pool2d",       "global_avg_pool2d",
                                            "interpolate"};
  return ops.count(op) != 0;
}

json emit_cuda_conv_op(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const std::string& op = n.op;
  if (op.rfind("conv2d", 0) == 0) return emit_conv(cx, n, o, body);
  if (op == "max_pool2d" || op == "avg_pool2d") return emit_pool(cx, n, body);
  if (op == "global_avg_pool2d") return emit_global_avg(cx, n, body);
  if (op == "interpolate") return emit_interpolate(cx, n, body);
  if (op == "batch_norm") return emit_batch_norm(cx, n, body);
  no_cuda_lowering(n, "");
}

}  // namespace dinoml::lower::cuda
