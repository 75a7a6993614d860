#include "dinoml/quant_ref.h"
#include "ops/interpreter.h"

#include "ir/error.h"
#include "ops/collective.h"
#include "ops/registry.h"

namespace dinoml::ops {
namespace {

std::map<std::string, int64_t> derive_dims(const ir::Graph& g, const std::map<std::string, HostTensor>& inputs) {
  std::map<std::string, int64_t> dims;
  for (const auto& name : g.inputs) {
    const auto& t = g.tensor(name);
    auto it = inputs.find(name);
    if (it == inputs.end()) throw IrError("reference interpreter: missing input '" + name + "'");
    const HostTensor& h = it->second;
    if (h.dtype != t.dtype)
      throw IrError("reference interpreter: input '" + name + "' has dtype " + std::string(ir::dtype_name(h.dtype)) +
                    ", expected " + std::string(ir::dtype_name(t.dtype)));
    if (h.shape.size() != t.shape.size())
      throw IrError("reference interpreter: input '" + name + "' has rank " + std::to_string(h.shape.size()) +
                    ", expected " + std::to_string(t.shape.size()));
    for (size_t a = 0; a < t.shape.size(); ++a) {
      const auto& e = t.shape[a];
      if (e.is_const()) {
        if (e.const_value() != h.shape[a])
          throw IrError("reference interpreter: input '" + name + "' axis " + std::to_string(a) + " is " +
                        std::to_string(h.shape[a]) + ", expected " + std::to_string(e.const_value()));
      } else if (e.is_dim()) {
        auto [pos, inserted] = dims.emplace(e.dim_name(), h.shape[a]);
        if (!inserted && pos->second != h.shape[a])
          throw IrError("reference interpreter: dim '" + e.dim_name() + "' is " + std::to_string(pos->second) +
                        " elsewhere but " + std::to_string(h.shape[a]) + " in input '" + name + "'");
      }
    }
  }
  for (const auto& d : g.dims) {
    auto it = dims.find(d.name);
    if (it == dims.end()) continue;
    if (it->second < d.min || it->second > d.max)
      throw IrError("reference interpreter: dim '" + d.name + "' = " + std::to_string(it->second) + " is outside [" +
                    std::to_string(d.min) + ", " + std::to_string(d.max) + "]");
  }
  return dims;
}

}  // namespace

HostTensor constant_tensor(const ir::Graph& g, const std::string& name) {
  const auto& t = g.tensor(name);
  std::vector<int64_t> shape;
  for (const auto& e : t.shape) shape.push_back(e.const_value());
  auto it = g.constant_data.find(name);
  if (it == g.constant_data.end() || !it->second) throw IrError("constant '" + name + "' has no data");
  if (t.quant) {
    // Reference semantics of a quantized constant: its exact dequantization (bit-identical to ggml).
    if (it->second->size() != ir::storage_bytes(t)) throw IrError("constant '" + name + "' has the wrong byte size");
    int64_t numel = 1;
    for (int64_t s : shape) numel *= s;
    std::vector<float> dense(static_cast<size_t>(numel));
    if (!quant::dequantize_row(dml_qtype_by_name(t.quant->type.c_str()), it->second->data(), dense.data(), numel))
      throw IrError("constant '" + name + "': cannot dequantize quant type '" + t.quant->type + "'");
    return HostTensor::from_bytes(t.dtype, shape, reinterpret_cast<const uint8_t*>(dense.data()), dense.size() * sizeof(float));
  }
  return HostTensor::from_bytes(t.dtype, shape, it->second->data(), it->second->size());
}

std::vector<HostTensor> run_node(const ir::Node& node, const std::vector<const HostTensor*>& inputs,
                                 const ir::Graph& g, const std::map<std::string, int64_t>& dims) {
  const OpDef& def = Registry::global().get(node.op);
  RefContext ctx(node, inputs, dims);
  for (const auto& o : node.outputs) {
    const auto& t = g.tensor(o);
    ctx.out_dtypes.push_back(t.dtype);
    ctx.out_shapes.push_back(ir::eval_shape(t.shape, dims));
  }
  auto out = def.reference(ctx);
  if (out.size() != node.outputs.size())
    throw OpError("node '" + node.name + "' (" + node.op + "): reference produced " + std::to_string(out.size()) +
                  " outputs, expected " + std::to_string(node.outputs.size()));
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].shape != ctx.out_shapes[i] || out[i].dtype != ctx.out_dtypes[i])
      throw OpError("node '" + node.name + "' (" + node.op + "): reference output " + std::to_string(i) + " is " +
                    out[i].shape_string() + " " + std::string(ir::dtype_name(out[i].dtype)) +
                    " but shape inference says " + ir::shape_to_string(g.tensor(node.outputs[i]).shape) + " " +
                    std::string(ir::dtype_name(ctx.out_dtypes[i])));
  return out;
}

namespace {

// One graph's run state: the environment of tensors by name and the deferred state writes.
struct RankRun {
  const ir::Graph* g = nullptr;
  std::map<std::string, int64_t> dims;
  std::map<std::string, HostTensor> env;
  std::map<std::string, HostTensor> state_updates;

  RankRun(const ir::Graph& graph, const std::map<std::string, HostTensor>& inputs,
          const std::map<std::string, HostTensor>& states)
      : g(&graph), dims(derive_dims(graph, inputs)) {
    for (const auto& n : graph.inputs) env[n] = inputs.at(n);
    for (const auto& [name, t] : graph.tensors)
      if (t.kind == ir::TensorKind::constant) env[name] = constant_tensor(graph, name);
    for (const auto& s : graph.states) {
      auto it = states.find(s);
      const auto& t = graph.tensor(s);
      std::vector<int64_t> shape = ir::eval_shape(t.shape, dims);
      if (it != states.end()) {
        // A state from another graph or run must match exactly: ops read its bytes as typed.
        if (it->second.dtype != t.dtype || it->second.shape != shape)
          throw IrError("reference interpreter: state '" + s + "' is " + it->second.shape_string() + " " +
                        std::string(ir::dtype_name(it->second.dtype)) + ", expected " + ir::shape_to_string(t.shape) +
                        " " + std::string(ir::dtype_name(t.dtype)));
        env[s] = it->second;
      } else {
        env[s] = HostTensor(t.dtype, shape);
      }
    }
  }

  std::vector<const HostTensor*> inputs_of(const ir::Node& node) {
    std::vector<const HostTensor*> ins;
    for (const auto& i : node.inputs) ins.push_back(&env.at(i));
    if (node.op == "state_assign")
      // Writes happen at the end of the run so that every read in this run sees the old value.
      state_updates[node.inputs.at(0)] = env.at(node.inputs.at(1)).cast(g->tensor(node.inputs.at(0)).dtype);
    return ins;
  }

  void store(const ir::Node& node, std::vector<HostTensor> outs) {
    for (size_t i = 0; i < outs.size(); ++i) env[node.outputs[i]] = std::move(outs[i]);
  }

  InterpretResult result() {
    InterpretResult res;
    for (const auto& o : g->outputs) res.outputs[o] = env.at(o);
    for (const auto& s : g->states) res.states[s] = state_updates.count(s) ? state_updates[s] : env.at(s);
    return res;
  }
};

}  // namespace

InterpretResult interpret(const ir::Graph& g, const std::map<std::string, HostTensor>& inputs,
                          const std::map<std::string, HostTensor>& states) {
  RankRun run(g, inputs, states);
  for (const auto& node : g.nodes) run.store(node, run_node(node, run.inputs_of(node), g, run.dims));
  return run.result();
}

std::vector<InterpretResult> interpret_group(const std::vector<const ir::Graph*>& ranks,
                                             const std::map<std::string, HostTensor>& inputs,
                                             const std::vector<std::map<std::string, HostTensor>>& states) {
  if (ranks.empty()) throw IrError("interpret_group: no rank graphs");
  if (!states.empty() && states.size() != ranks.size())
    throw IrError("interpret_group: " + std::to_string(states.size()) + " state sets for " +
                  std::to_string(ranks.size()) + " ranks");
  const ir::Graph& g0 = *ranks[0];
  std::vector<RankRun> runs;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const ir::Graph& g = *ranks[r];
    if (g.nodes.size() != g0.nodes.size())
      throw IrError("interpret_group: rank " + std::to_string(r) + " has " + std::to_string(g.nodes.size()) +
                    " nodes, rank 0 has " + std::to_string(g0.nodes.size()) + " (the ranks must share one graph)");
    static const std::map<std::string, HostTensor> no_states;
    runs.emplace_back(g, inputs, states.empty() ? no_states : states[r]);
  }
  for (size_t i = 0; i < g0.nodes.size(); ++i) {
    const ir::Node& node = g0.nodes[i];
    for (size_t r = 1; r < ranks.size(); ++r)
      if (ranks[r]->nodes[i].name != node.name || ranks[r]->nodes[i].op != node.op)
        throw IrError("interpret_group: node " + std::to_string(i) + " is '" + ranks[r]->nodes[i].name + "' (" +
                      ranks[r]->nodes[i].op + ") on rank " + std::to_string(r) + " but '" + node.name + "' (" +
                      node.op + ") on rank 0");
    if (is_collective(node.op)) {
      std::vector<const HostTensor*> per_rank;
      for (size_t r = 0; r < runs.size(); ++r) per_rank.push_back(runs[r].inputs_of(ranks[r]->nodes[i]).at(0));
      auto outs = collective_reference(node, per_rank);
      for (size_t r = 0; r < runs.size(); ++r) runs[r].store(ranks[r]->nodes[i], {std::move(outs[r])});
    } else {
      for (size_t r = 0; r < runs.size(); ++r) {
        const ir::Node& nr = ranks[r]->nodes[i];
        runs[r].store(nr, run_node(nr, runs[r].inputs_of(nr), *ranks[r], runs[r].dims));
      }
    }
  }
  std::vector<InterpretResult> res;
  for (auto& run : runs) res.push_back(run.result());
  return res;
}

}  // namespace dinoml::ops
