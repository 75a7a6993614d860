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
// * A *lone* capable conv (its input not produced by a conv or pool, its output not read only by
//   convs and pools: e.g. a one-conv model, NCHW in and out) would otherwise touch no NHWC tensor
//   and stay on the NCHW kernel. insert_conv_layout_edges (run by the CUDA compile before the
//   memory plan) gives it identity `permute` copies marked `layout_edge`: x -> x' (when C % 8 == 0;
//   the channels-last kernel reads a few channels through NCHW strides well), the residual likewise,
//   and y' -> y. The edges' conv-side tensors are NHWC, so the copies are the transposes (tiled,
//   kernels/cuda/data_movement.cu) and the conv runs the channels-last kernels, as cuDNN does.
//   Not for a plain 1x1 conv (stride 1, no padding, groups 1): on NCHW that is already one batched
//   GEMM (DML_CUDA_CONV_GEMM, kernels/cuda/conv.cu), cheaper than the two transposes.
// * Off: ROCm, sm < 80, DINOML_CUDA_GEMM=simt, DINOML_CUDA_CONV_LAYOUT=nchw
//   (CudaLowerOptions::conv_channels_last); DINOML_CUDA_CONV_EDGES=0 turns off only the edges.
#include <map>
#include <set>

#include "ir/error.h"
#include "lower/common/conv_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {
namespace {

thread_local const ModulePlan* t_module_plan = nullptr;

bool is_conv(const std::string& op) { return op.rfind("conv2d", 0) == 0; }

bool half_dtype(ir::DType t) { return t == ir::DType::f16 || t == ir::DType::bf16; }

bool is_pool(const std::string& op) { return op == "max_pool2d" || op == "avg_pool2d"; }

bool channels_last_on(const CudaLowerOptions& o) {
  return o.conv_channels_last && o.arch.target == GpuTarget::cuda && o.arch.major >= 8 && o.gemm_impl != "simt";
}

}  // namespace

bool plain_1x1_conv(const ops::Window2d& w) {
  return w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && w.pt == 0 && w.pl == 0 && w.pb == 0 && w.pr == 0 &&
         w.groups == 1;
}

bool is_layout_edge(const ir::Node& n) { return n.op == "permute" && n.attr_int("layout_edge", 0) == 1; }

bool nhwc_conv_capable(const ir::Graph& g, const ir::Node& n, const CudaLowerOptions& o) {
  if (!is_conv(n.op) || n.inputs.size() < 2) return false;
  if (!channels_last_on(o)) return false;
  const ir::Tensor& x = g.tensor(n.inputs[0]);
  const ir::Tensor& w = g.tensor(n.inputs[1]);
  if (!half_dtype(x.dtype) || x.shape.size() != 4 || w.shape.size() != 4 || w.kind != ir::TensorKind::constant) return false;
  for (const auto& in : n.inputs)
    if (g.tensor(in).dtype != x.dtype) return false;
  for (const auto& e : w.shape)
    if (!e.is_const()) return false;
  return n.attr_int("groups", 1) == 1;
}

void plan_conv_nhwc(const ir::Graph& g, const CudaLowerOptions& o, ModulePlan& p) {
  std::map<std::string, std::vector<std::pair<const ir::Node*, size_t>>> consumers;
  std::map<std::string, const ir::Node*> producer;
  for (const auto& n : g.nodes) {
    for (size_t i = 0; i < n.inputs.size(); ++i) consumers[n.inputs[i]].push_back({&n, i});
    for (const auto& out : n.outputs) producer[out] = &n;
  }
  auto reads_nhwc = [&](const ir::Node& c, size_t slot) {
    if (is_conv(c.op)) return nhwc_conv_capable(g, c, o) && (slot == 0 || slot == 3);
    if (is_pool(c.op) || c.op == "global_avg_pool2d" || is_layout_edge(c)) return slot == 0;
    return false;
  };
  auto writes_nhwc = [&](const ir::Node& n) {
    if (is_conv(n.op)) return nhwc_conv_capable(g, n, o);
    return is_pool(n.op) || is_layout_edge(n);
  };
  if (channels_last_on(o)) {
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
      if (ok && is_pool(n.op)) {
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
        if (is_pool(n.op) && !p.nhwc.count(n.inputs[0])) {
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
    p.reserve_pack(n.name, bytes);
  }
}

passes::PassResult insert_conv_layout_edges(ir::Graph& g, const CudaLowerOptions& o) {
  passes::PassResult res;
  if (!channels_last_on(o)) return res;
  const auto producers = g.producers();
  const auto consumers = g.consumers();
  // Could the plan keep `t` NHWC through a chain? (its producer a capable conv or a pool)
  auto from_chain = [&](const std::string& t) {
    auto p = producers.find(t);
    if (p == producers.end()) return false;
    const ir::Node& pn = g.nodes[p->second];
    return is_pool(pn.op) || (is_conv(pn.op) && nhwc_conv_capable(g, pn, o));
  };
  auto into_chain = [&](const std::string& t) {  // every reader takes NHWC
    if (g.tensor(t).kind != ir::TensorKind::intermediate) return false;
    auto c = consumers.find(t);
    if (c == consumers.end()) return false;
    for (size_t i : c->second) {
      const ir::Node& cn = g.nodes[i];
      const bool conv_slot = is_conv(cn.op) && nhwc_conv_capable(g, cn, o) &&
                             (cn.inputs[0] == t || (cn.inputs.size() > 3 && cn.inputs[3] == t));
      if (!conv_slot && !is_pool(cn.op) && cn.op != "global_avg_pool2d") return false;
    }
    return true;
  };
  std::map<size_t, std::vector<ir::Node>> before, after;  // edge nodes to insert around node i
  std::map<std::string, std::string> in_edge;             // graph-side tensor -> its NHWC copy (one
                                                          // per tensor, read by every lone conv of it)
  std::vector<size_t> lone;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!is_conv(n.op) || !nhwc_conv_capable(g, n, o)) continue;
    if (from_chain(n.inputs[0]) || into_chain(n.outputs[0])) continue;
    // A plain 1x1 conv runs as one batched GEMM on NCHW (DML_CUDA_CONV_GEMM): no transposes needed.
    if (plain_1x1_conv(read_window(n, true, true, no_cuda_lowering))) continue;
    const ir::TensorKind yk = g.tensor(n.outputs[0]).kind;
    if (yk != ir::TensorKind::intermediate && yk != ir::TensorKind::output) continue;
    lone.push_back(i);
  }
  auto edge = [&](const std::string& name, const std::string& from, const std::string& to) {
    ir::Node e;
    e.name = g.unique_name(name);
    e.op = "permute";
    e.inputs = {from};
    e.outputs = {to};
    e.attrs["dims"] = std::vector<int64_t>{0, 1, 2, 3};
    e.attrs["layout_edge"] = int64_t{1};
    return e;
  };
  auto copy_tensor = [&](const std::string& of, const std::string& name) {
    ir::Tensor t;
    t.name = g.unique_name(name);
    t.dtype = g.tensor(of).dtype;
    t.shape = g.tensor(of).shape;
    t.kind = ir::TensorKind::intermediate;
    return g.add_tensor(t).name;
  };
  for (size_t i : lone) {
    ir::Node& n = g.nodes[i];
    const int64_t C = g.tensor(n.inputs[1]).shape[1].const_value();
    for (size_t slot : {size_t{0}, size_t{3}}) {
      if (slot >= n.inputs.size() || (slot == 3 && n.op != "conv2d_bias_add_relu")) continue;
      const std::string src = n.inputs[slot];
      if (from_chain(src) || (slot == 0 && C % 8 != 0)) continue;
      auto it = in_edge.find(src);
      if (it == in_edge.end()) {
        const std::string t = copy_tensor(src, src + "_nhwc");
        before[i].push_back(edge(n.name + "_layout_in", src, t));
        it = in_edge.emplace(src, t).first;
        res.stats["input_edges"]++;
      }
      n.inputs[slot] = it->second;
    }
    const std::string y = n.outputs[0];
    const std::string yc = copy_tensor(y, y + "_nhwc");
    n.outputs[0] = yc;
    after[i].push_back(edge(n.name + "_layout_out", yc, y));
    res.stats["output_edges"]++;
  }
  if (lone.empty()) return res;
  std::vector<ir::Node> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (auto& e : before[i]) nodes.push_back(std::move(e));
    nodes.push_back(std::move(g.nodes[i]));
    for (auto& e : after[i]) nodes.push_back(std::move(e));
  }
  g.nodes = std::move(nodes);
  res.changed = true;
  return res;
}

const ModulePlan* current_module_plan() { return t_module_plan; }

ModulePlanScope::ModulePlanScope(const ModulePlan* p) : saved_(t_module_plan) { t_module_plan = p; }
ModulePlanScope::~ModulePlanScope() { t_module_plan = saved_; }

std::string nhwc_strides(const EmitContext& cx, const std::string& tensor, bool nhwc) {
  const auto s = cx.cpp_shape(cx.tensor(tensor).shape);  // N C H W
  auto mul = [](const std::string& a, const std::string& b) { return "(" + a + ") * (" + b + ")"; };
  if (nhwc) return "{" + mul(mul(s[1], s[2]), s[3]) + ", INT64_C(1), " + mul(s[3], s[1]) + ", " + s[1] + "}";
  return "{" + mul(mul(s[1], s[2]), s[3]) + ", " + mul(s[2], s[3]) + ", " + s[3] + ", INT64_C(1)}";
}

}  // namespace dinoml::lower::cuda
