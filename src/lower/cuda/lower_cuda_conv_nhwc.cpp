// Channels-last conv chains on CUDA: which tensors the module keeps NHWC, and where each conv's
// prepacked weights live. The graph is not rewritten: a tensor's storage holds the same elements
// in either layout, so the memory plan is unchanged and only the kernels that touch the tensor
// must agree on its layout; the lowering picks that layout per tensor.
//
// * A conv is *channels-last capable* on sm_80+ CUDA for fp16/bf16, groups == 1 and constant
//   weights (kernels/cuda/conv_nhwc.cu; the weights are packed to [O][kh][kw][C] once at module
//   init into one device buffer, DmlModuleState::dpack). max/avg pool2d read and write any
//   layout through strides; global_avg_pool2d reads NHWC (its [N, C, 1, 1] output is the same in
//   both layouts).
// * An intermediate rank-4 tensor is NHWC when its producer is a capable conv or a pool and every
//   consumer is a capable conv (as x or residual), a pool or a global_avg_pool2d. Graph inputs,
//   outputs, constants and anything a view or another op reads stay NCHW, so the layout changes
//   only at the chain's edges, inside the first conv (strided NCHW read) and the last kernel
//   (strided NCHW write): no transpose nodes.
// * A residual conv's output and residual share one layout (the memory plan may alias them):
//   where they differ, both fall back to NCHW, repeated until stable.
// * Off: ROCm, sm < 80, DINOML_CUDA_GEMM=simt, DINOML_CUDA_CONV_LAYOUT=nchw
//   (CudaLowerOptions::conv_channels_last).
#include <map>
#include <set>

#include "ir/error.h"
#include "lower/cpu/conv_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {
namespace {

thread_local const ConvNhwcPlan* t_conv_plan = nullptr;

bool is_conv(const std::string& op) { return op.rfind("conv2d", 0) == 0; }

bool half_dtype(ir::DType t) { return t == ir::DType::f16 || t == ir::DType::bf16; }

}  // namespace

bool nhwc_conv_capable(const ir::Graph& g, const ir::Node& n, const CudaLowerOptions& o) {
  if (!is_conv(n.op) || n.inputs.size() < 2) return false;
  if (!o.conv_channels_last || o.arch.target != GpuTarget::cuda || o.arch.major < 8 || o.gemm_impl == "simt") return false;
  const ir::Tensor& x = g.tensor(n.inputs[0]);
  const ir::Tensor& w = g.tensor(n.inputs[1]);
  if (!half_dtype(x.dtype) || x.shape.size() != 4 || w.shape.size() != 4 || w.kind != ir::TensorKind::constant) return false;
  for (const auto& in : n.inputs)
    if (g.tensor(in).dtype != x.dtype) return false;
  for (const auto& e : w.shape)
    if (!e.is_const()) return false;
  return n.attr_int("groups", 1) == 1;
}

ConvNhwcPlan plan_conv_nhwc(const ir::Graph& g, const CudaLowerOptions& o) {
  ConvNhwcPlan p;
  std::map<std::string, std::vector<std::pair<const ir::Node*, size_t>>> consumers;
  std::map<std::string, const ir::Node*> producer;
  for (const auto& n : g.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) consumers[n.inputs[i]].push_back({&n, i});
    for (const auto& out : n.outputs) producer[out] = &n;
  }
  auto reads_nhwc = [&](const ir::Node& c, size_t slot) {
    if (is_conv(c.op)) return nhwc_conv_capable(g, c, o) && (slot == 0 || slot == 3);
    if (c.op == "max_pool2d" || c.op == "avg_pool2d" || c.op == "global_avg_pool2d") return slot == 0;
    return false;
  };
  auto writes_nhwc = [&](const ir::Node& n) {
    if (is_conv(n.op)) return nhwc_conv_capable(g, n, o);
    return n.op == "max_pool2d" || n.op == "avg_pool2d";
  };
  if (o.conv_channels_last && o.arch.target == GpuTarget::cuda && o.arch.major >= 8 && o.gemm_impl != "simt") {
    for (const auto& n : g.nodes) {
      if (!writes_nhwc(n) || n.outputs.empty()) continue;
      const std::string& t = n.outputs[0];
      const ir::Tensor& tt = g.tensor(t);
      if (tt.kind != ir::TensorKind::intermediate || tt.shape.size() != 4 || !half_dtype(tt.dtype)) continue;
      auto it = consumers.find(t);
      if (it == consumers.end()) continue;
      bool ok = true;
      for (const auto& [c, slot] : it->second) ok = ok && reads_nhwc(*c, slot);
      // A pool between two NCHW tensors gains nothing: only pools fed by an NHWC producer qualify.
      if (ok && !is_conv(n.op)) {
        auto pr = producer.find(n.inputs[0]);
        ok = pr != producer.end() && writes_nhwc(*pr->second);
      }
      if (ok) p.nhwc.insert(t);
    }
    // Pools whose input did not end up NHWC would only transpose: drop their outputs again, and
    // make a residual conv's output and residual agree; repeat until nothing changes.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& n : g.nodes) {
        if (n.outputs.empty() || !p.nhwc.count(n.outputs[0])) continue;
        if ((n.op == "max_pool2d" || n.op == "avg_pool2d") && !p.nhwc.count(n.inputs[0])) {
          p.nhwc.erase(n.outputs[0]);
          changed = true;
        }
      }
      for (const auto& n : g.nodes) {
        if (n.op != "conv2d_bias_add_relu" || n.inputs.size() < 4) continue;
        const bool y = p.nhwc.count(n.outputs[0]) != 0, r = p.nhwc.count(n.inputs[3]) != 0;
        if (y != r) {
          p.nhwc.erase(n.outputs[0]);
          p.nhwc.erase(n.inputs[3]);
          changed = true;
        }
      }
    }
  }
  // Convs that touch an NHWC tensor run the channels-last kernel and get packed weights.
  for (const auto& n : g.nodes) {
    if (!is_conv(n.op) || !nhwc_conv_capable(g, n, o)) continue;
    if (!p.nhwc.count(n.inputs[0]) && !p.nhwc.count(n.outputs[0])) continue;
    const ir::Tensor& w = g.tensor(n.inputs[1]);
    size_t bytes = ir::dtype_size(w.dtype);
    for (const auto& e : w.shape) bytes *= static_cast<size_t>(e.const_value());
    p.pack_offset[n.name] = p.pack_bytes;
    p.pack_bytes += (bytes + 255) / 256 * 256;
  }
  return p;
}

const ConvNhwcPlan* current_conv_plan() { return t_conv_plan; }

ConvPlanScope::ConvPlanScope(const ConvNhwcPlan* p) : saved_(t_conv_plan) { t_conv_plan = p; }
ConvPlanScope::~ConvPlanScope() { t_conv_plan = saved_; }

std::string nhwc_strides(const cpu::EmitContext& cx, const std::string& tensor, bool nhwc) {
  const auto s = cx.cpp_shape(cx.tensor(tensor).shape);  // N C H W
  auto mul = [](const std::string& a, const std::string& b) { return "(" + a + ") * (" + b + ")"; };
  if (nhwc) return "{" + mul(mul(s[1], s[2]), s[3]) + ", INT64_C(1), " + mul(s[3], s[1]) + ", " + s[1] + "}";
  return "{" + mul(mul(s[1], s[2]), s[3]) + ", " + mul(s[2], s[3]) + ", " + s[3] + ", INT64_C(1)}";
}

}  // namespace dinoml::lower::cuda
