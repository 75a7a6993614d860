// CUDA lowering of the convolution family (conv2d, conv2d_bias, conv2d_bias_relu,
// conv2d_bias_add_relu), batch_norm, max/avg/global_avg pooling and interpolate: one call each
// into libdinoml_cuda_kernels (kernels/cuda/conv.cu, pool.cu) on the run's stream, with the same
// attribute parsing (ops/conv_params.h) and coordinate-mode tables as the CPU lowering.
#include <map>
#include <set>

#include "ir/error.h"
#include "lower/cpu/conv_args.h"
#include "lower/cuda/emit_cuda.h"
#include "ops/conv_params.h"

namespace dinoml::lower::cuda {
namespace {

using nlohmann::json;
using cpu::brace_list;
using cpu::EmitContext;

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

json emit_conv(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const cpu::Conv2dArgs ca = cpu::conv2d_args(cx, n, no_cuda_lowering);
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

json emit_pool(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  const std::string fn = n.op == "max_pool2d" ? "dml_cuda_max_pool2d" : "dml_cuda_avg_pool2d";
  body << "  {\n    const dml_cuda_pool2d_shape ps = " << brace_list(cpu::pool2d_fields(cx, n, no_cuda_lowering)) << ";\n  "
       << checked_cuda_call(n, fn + "(" + dt(t) + ", &ps, " + cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)")
       << "  }\n";
  return manifest(n, {fn + ".per_output"}, fn + ".per_output", "only candidate (not tunable)");
}

json emit_global_avg(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  body << checked_cuda_call(n, "dml_cuda_global_avg_pool2d(" + dt(t) + ", " + cpu::global_avg_pool_args(cx, n, no_cuda_lowering) +
                                   ", stream)");
  return manifest(n, {"dml_cuda_global_avg_pool2d.warp_per_plane"}, "dml_cuda_global_avg_pool2d.warp_per_plane",
                  "only candidate (not tunable)");
}

json emit_interpolate(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  std::string mode;
  const std::string args = cpu::interpolate_args(cx, n, "DML_CUDA_", no_cuda_lowering, &mode);
  body << checked_cuda_call(n, "dml_cuda_interpolate(" + dt(t) + ", " + args + ", stream)");
  return manifest(n, {"dml_cuda_interpolate." + mode}, "dml_cuda_interpolate." + mode, "only candidate (not tunable)");
}

json emit_batch_norm(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ir::DType t = expect_float_all(cx, n);
  body << checked_cuda_call(n, "dml_cuda_batch_norm(" + dt(t) + ", " + cpu::batch_norm_args(cx, n, no_cuda_lowering) +
                                   ", stream)");
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
