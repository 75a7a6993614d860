// CUDA lowering of the convolution family (conv2d, conv2d_bias, conv2d_bias_relu,
// conv2d_bias_add_relu), conv3d(_bias), batch_norm, max/avg/global_avg pooling and interpolate: one call each
// into libdinoml_cuda_kernels (kernels/cuda/conv.cu, pool.cu) on the run's stream, with the same
// attribute parsing (ops/conv_params.h) and coordinate-mode tables as the CPU lowering.
#include <map>
#include <set>

#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/common/conv_args.h"
#include "lower/cuda/emit_cuda.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cuda {
namespace {

using nlohmann::json;

json manifest(const ir::Node& n, const json& cands, const std::string& sel, const std::string& reason) {
  return {{"node", n.name}, {"op", n.op}, {"candidates", cands}, {"selected", sel}, {"reason", reason}};
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

bool is_nhwc(const std::string& tensor) {
  const ModulePlan* p = current_module_plan();
  return p && p->nhwc.count(tensor) != 0;
}

// A conv touching a channels-last tensor (lower_cuda_conv_nhwc.cpp): the weights are packed to
// [O][kh][kw][C] at module init; candidates are the tiles of dml_cuda_conv2d_nhwc, the run-time
// rule (kernels/cuda/dinoml_cuda_kernels.h: DML_CUDA_CONV_TILE_AUTO) first, then the mma.sync
// kernel's own rule and tiles; on sm_90a with C % 8 == 0, O % 8 == 0 and channels-last x and y the
// wgmma kernel's tiles; for a 1x1 / stride 1 / unpadded conv between channels-last tensors the GEMM
// routes (cuBLASLt, and on sm_90a the own TMA + wgmma GEMM).
json emit_conv_nhwc(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, ir::DType t, const Conv2dArgs& ca,
                    size_t pack_off, std::ostringstream& body) {
  const bool bias = ca.bias, add = ca.add, relu = ca.relu;
  const auto slots = ir::layout_constants(cx.g);
  const auto ws = slots.find(cx.root(n.inputs[1]));
  if (ws == slots.end()) no_cuda_lowering(n, "the weight is not in constants.bin");
  const auto& w = cx.tensor(n.inputs[1]);
  cx.init << "  if (dml_cuda_conv2d_pack_ohwi(" << dt(t) << ", " << w.shape[0].const_value() << ", "
          << w.shape[1].const_value() << ", " << w.shape[2].const_value() << ", " << w.shape[3].const_value()
          << ", st->dconst + " << ws->second.offset << ", st->dpack + " << pack_off << ", NULL)) {  // "
          << comment_text(n.name) << "\n"
          << "    if (err && errlen) snprintf(err, errlen, \"node %s: packing conv weights: %s\", "
          << cpp_string_literal(n.name) << ", dml_cuda_last_error());\n"
          << "    cudaFree(st->dpack); cudaFree(st->dconst); free(st);\n    return 1;\n  }\n";
  const std::string wp = "(((const DmlModuleState*)module_state)->dpack + " + std::to_string(pack_off) + ")";
  const std::string xs = nhwc_strides(cx, n.inputs[0], is_nhwc(n.inputs[0]));
  const std::string ys = nhwc_strides(cx, n.outputs[0], is_nhwc(n.outputs[0]));
  const std::string rs = add ? nhwc_strides(cx, n.inputs[3], is_nhwc(n.inputs[3])) : "{0, 0, 0, 0}";
  std::vector<std::pair<std::string, std::string>> c = {
      {"implicit_gemm_nhwc_auto", "DML_CUDA_CONV_TILE_AUTO"},
      {"implicit_gemm_nhwc_mma_auto_tile", "DML_CUDA_CONV_TILE_MMA_AUTO"},
      {"implicit_gemm_nhwc_mma_128x128x32_s4", "DML_CUDA_CONV_TILE_128x128"},
      {"implicit_gemm_nhwc_mma_128x64x32_s4", "DML_CUDA_CONV_TILE_128x64"},
      {"implicit_gemm_nhwc_mma_64x64x32_s4", "DML_CUDA_CONV_TILE_64x64"},
      {"implicit_gemm_nhwc_mma_128x128x64_s3", "DML_CUDA_CONV_TILE_128x128x64"},
      {"implicit_gemm_nhwc_mma_128x64x64_s3", "DML_CUDA_CONV_TILE_128x64x64"}};
  const bool x_cl = is_nhwc(n.inputs[0]), y_cl = is_nhwc(n.outputs[0]), r_cl = !add || is_nhwc(n.inputs[3]);
  const bool sm90 = o.arch.target == GpuTarget::cuda && o.arch.major == 9;
  if (sm90 && x_cl && y_cl && r_cl && ca.Cg % 8 == 0 && ca.O % 8 == 0) {
    c.push_back({"implicit_gemm_nhwc_wgmma_128x128x64_s6", "DML_CUDA_CONV_TILE_WGMMA_128x128"});
    c.push_back({"implicit_gemm_nhwc_wgmma_128x64x64_s4", "DML_CUDA_CONV_TILE_WGMMA_128x64"});
    c.push_back({"implicit_gemm_nhwc_wgmma_64x64x64_s4", "DML_CUDA_CONV_TILE_WGMMA_64x64"});
  }
  const auto& win = ca.win;
  if (x_cl && y_cl && r_cl && win.kh == 1 && win.kw == 1 && win.sh == 1 && win.sw == 1 && win.pt == 0 && win.pl == 0 &&
      win.pb == 0 && win.pr == 0) {
    c.push_back({"gemm_nhwc_cublaslt", "DML_CUDA_CONV_TILE_GEMM_CUBLASLT"});
    if (sm90) c.push_back({"gemm_nhwc_wgmma_tma", "DML_CUDA_CONV_TILE_GEMM_WGMMA"});
  }
  std::vector<GpuCandidate> cands;
  for (const auto& [name, tile] : c) {
    std::ostringstream call;
    call << "  {\n    const dml_cuda_conv2d_shape cs = " << brace_list(ca.fields) << ";\n"
         << "    const int64_t xs[4] = " << xs << ", ys[4] = " << ys << ", rs[4] = " << rs << ";\n  "
         << checked_cuda_call(n, "dml_cuda_conv2d_nhwc(" + dt(t) + ", &cs, xs, " + cx.ptr(n.inputs[0]) + ", " + wp + ", " +
                                     (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", rs, " + (add ? cx.ptr(n.inputs[3]) : "NULL") +
                                     ", ys, " + cx.ptr(n.outputs[0]) + ", " + (relu ? "1" : "0") + ", " + tile + ", stream)")
         << "  }\n";
    cands.push_back({name, call.str()});
  }
  json e = emit_gpu_tunable(cx, n, "conv", cands, 0, "default (not profiled): channels-last chain", body);
  e["layout"] = {{"x", is_nhwc(n.inputs[0]) ? "NHWC" : "NCHW"}, {"y", is_nhwc(n.outputs[0]) ? "NHWC" : "NCHW"}};
  return e;
}

json emit_conv(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const Conv2dArgs ca = conv2d_args(cx, n, no_cuda_lowering);
  if (const ModulePlan* p = current_module_plan()) {
    auto it = p->pack_offset.find(n.name);
    if (it != p->pack_offset.end()) return emit_conv_nhwc(cx, n, o, t, ca, it->second, body);
  }
  const bool bias = ca.bias, add = ca.add, relu = ca.relu;
  const int64_t Og = ca.O / ca.win.groups;
  // mma.sync exists only on CUDA: on ROCm the library never picks it (no candidate).
  const bool half = t != ir::DType::f32 && o.arch.target == GpuTarget::cuda;
  // Candidates (emit_gpu_tunable puts the unprofiled default first): the kernel library's automatic rule (direct for < 16
  // output channels per group, else mma on fp16/bf16, SIMT on fp32) unless DINOML_CUDA_GEMM forced
  // simt / mma. Every candidate runs every geometry (mma: fp16/bf16 on CUDA only).
  std::vector<std::pair<std::string, std::string>> c = {{"implicit_gemm_simt_64x64", "DML_CUDA_CONV_SIMT"},
                                                        {"direct", "DML_CUDA_CONV_DIRECT"}};
  if (half) c.push_back({"implicit_gemm_mma_m16n8k16_64x64x32", "DML_CUDA_CONV_MMA"});
  size_t def = Og < 16 ? 1 : half ? 2 : 0;
  std::string reason = "default (not profiled)";
  // A plain 1x1 conv is one batched GEMM on NCHW (kernels/cuda/conv.cu): the default wherever it applies
  // (on the 1x1 ResNet shapes it is 2-5x faster than the implicit GEMMs).
  if (plain_1x1_conv(ca.win)) {
    c.push_back({"gemm_nchw_1x1_batched", "DML_CUDA_CONV_GEMM"});
    def = c.size() - 1;
  }
  if (o.gemm_impl == "simt" && o.arch.target == GpuTarget::cuda) {  // ROCm: simt is the default, not forced
    def = 0;
    reason = "forced by DINOML_CUDA_GEMM=simt";
  } else if (o.gemm_impl == "mma" && half) {
    def = 2;
    reason = "forced by DINOML_CUDA_GEMM=mma";
  }
  std::vector<GpuCandidate> cands;
  for (const auto& [name, impl] : c) {
    std::ostringstream call;
    call << "  {\n    const dml_cuda_conv2d_shape cs = " << brace_list(ca.fields) << ";\n  "
         << checked_cuda_call(n, "dml_cuda_conv2d(" + dt(t) + ", &cs, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) +
                                     ", " + (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", " + (add ? cx.ptr(n.inputs[3]) : "NULL") +
                                     ", " + cx.ptr(n.outputs[0]) + ", " + (relu ? "1" : "0") + ", " + impl + ", stream)")
         << "  }\n";
    cands.push_back({name, call.str()});
  }
  return emit_gpu_tunable(cx, n, "conv", cands, def, reason, body);
}

json emit_conv3d(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const bool bias = n.op == "conv3d_bias";
  body << "  {\n    const dml_cuda_conv3d_shape cs = " << brace_list(conv3d_fields(cx, n, no_cuda_lowering)) << ";\n  "
       << checked_cuda_call(n, "dml_cuda_conv3d(" + dt(t) + ", &cs, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.inputs[1]) +
                                   ", " + (bias ? cx.ptr(n.inputs[2]) : "NULL") + ", " + cx.ptr(n.outputs[0]) + ", stream)")
       << "  }\n";
  return manifest(n, {"dml_cuda_conv3d.implicit_gemm_simt_64x64"}, "dml_cuda_conv3d.implicit_gemm_simt_64x64",
                  "only candidate (not tunable)");
}

json emit_pool(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  if (is_nhwc(n.inputs[0]) || is_nhwc(n.outputs[0])) {  // a channels-last chain (lower_cuda_conv_nhwc.cpp)
    body << "  {\n    const dml_cuda_pool2d_shape ps = " << brace_list(pool2d_fields(cx, n, no_cuda_lowering)) << ";\n"
         << "    const int64_t xs[4] = " << nhwc_strides(cx, n.inputs[0], is_nhwc(n.inputs[0]))
         << ", ys[4] = " << nhwc_strides(cx, n.outputs[0], is_nhwc(n.outputs[0])) << ";\n  "
         << checked_cuda_call(n, "dml_cuda_pool2d_strided(" + dt(t) + ", " + (n.op == "max_pool2d" ? "1" : "0") +
                                     ", &ps, xs, " + cx.ptr(n.inputs[0]) + ", ys, " + cx.ptr(n.outputs[0]) + ", stream)")
         << "  }\n";
    json e = manifest(n, {"dml_cuda_pool2d_strided.channel_fastest"}, "dml_cuda_pool2d_strided.channel_fastest",
                      "only candidate (not tunable): channels-last chain");
    e["layout"] = {{"x", is_nhwc(n.inputs[0]) ? "NHWC" : "NCHW"}, {"y", is_nhwc(n.outputs[0]) ? "NHWC" : "NCHW"}};
    return e;
  }
  const std::string fn = n.op == "max_pool2d" ? "dml_cuda_max_pool2d" : "dml_cuda_avg_pool2d";
  body << "  {\n    const dml_cuda_pool2d_shape ps = " << brace_list(pool2d_fields(cx, n, no_cuda_lowering)) << ";\n  "
       << checked_cuda_call(n, fn + "(" + dt(t) + ", &ps, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)")
       << "  }\n";
  return manifest(n, {fn + ".per_output"}, fn + ".per_output", "only candidate (not tunable)");
}

json emit_global_avg(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  if (is_nhwc(n.inputs[0])) {
    const auto sh = cx.cpp_shape(cx.tensor(n.inputs[0]).shape);
    body << checked_cuda_call(n, "dml_cuda_global_avg_pool2d_nhwc(" + dt(t) + ", " + sh[0] + ", " + sh[1] + ", (" + sh[2] +
                                     ") * (" + sh[3] + "), " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)");
    json e = manifest(n, {"dml_cuda_global_avg_pool2d_nhwc.thread_per_channel"},
                      "dml_cuda_global_avg_pool2d_nhwc.thread_per_channel", "only candidate (not tunable): channels-last input");
    e["layout"] = {{"x", "NHWC"}, {"y", "NCHW"}};
    return e;
  }
  body << checked_cuda_call(n, "dml_cuda_global_avg_pool2d(" + dt(t) + ", " + global_avg_pool_args(cx, n, no_cuda_lowering) +
                                   ", stream)");
  return manifest(n, {"dml_cuda_global_avg_pool2d.warp_per_plane"}, "dml_cuda_global_avg_pool2d.warp_per_plane",
                  "only candidate (not tunable)");
}

json emit_interpolate(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  std::string mode;
  const std::string args = interpolate_args(cx, n, "DML_CUDA_", no_cuda_lowering, &mode);
  body << checked_cuda_call(n, "dml_cuda_interpolate(" + dt(t) + ", " + args + ", stream)");
  return manifest(n, {"dml_cuda_interpolate." + mode}, "dml_cuda_interpolate." + mode, "only candidate (not tunable)");
}

json emit_batch_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  body << checked_cuda_call(n, "dml_cuda_batch_norm(" + dt(t) + ", " + batch_norm_args(cx, n, no_cuda_lowering) +
                                   ", stream)");
  return manifest(n, {"dml_cuda_batch_norm.per_element"}, "dml_cuda_batch_norm.per_element", "only candidate (not tunable)");
}

}  // namespace

bool is_cuda_conv_op(const std::string& op) {
  static const std::set<std::string> ops = {"conv2d",     "conv2d_bias",       "conv2d_bias_relu", "conv2d_bias_add_relu",
                                            "batch_norm", "max_pool2d",        "avg_pool2d",       "global_avg_pool2d",
                                            "interpolate", "conv3d",            "conv3d_bias"};
  return ops.count(op) != 0;
}

json emit_cuda_conv_op(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const std::string& op = n.op;
  if (op.rfind("conv2d", 0) == 0) return emit_conv(cx, n, o, body);
  if (op == "conv3d" || op == "conv3d_bias") return emit_conv3d(cx, n, body);
  if (op == "max_pool2d" || op == "avg_pool2d") return emit_pool(cx, n, body);
  if (op == "global_avg_pool2d") return emit_global_avg(cx, n, body);
  if (op == "interpolate") return emit_interpolate(cx, n, body);
  if (op == "batch_norm") return emit_batch_norm(cx, n, body);
  no_cuda_lowering(n, "");
}

}  // namespace dinoml::lower::cuda
