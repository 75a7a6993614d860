#include "ir/validate.h"

#include <set>

#include "dinoml/quant_blocks.h"
#include "ir/error.h"

namespace dinoml::ir {
namespace {

[[noreturn]] void fail(const Graph& g, const std::string& what, const std::string& rule) {
  throw IrError("graph '" + g.name + "': " + what + ": " + rule);
}

void check_listed(const Graph& g, const std::vector<std::string>& names, TensorKind kind, const char* list) {
  std::set<std::string> seen;
  for (const auto& n : names) {
    if (!g.has_tensor(n)) fail(g, std::string(list) + " entry '" + n + "'", "no such tensor");
    if (!seen.insert(n).second) fail(g, std::string(list) + " entry '" + n + "'", "listed twice");
    if (g.tensor(n).kind != kind)
      fail(g, "tensor '" + n + "'", std::string("listed in ") + list + " but its kind is " +
                                        std::string(tensor_kind_name(g.tensor(n).kind)));
  }
}

}  // namespace

void validate_structure(const Graph& g) {
  std::set<std::string> dim_names;
  for (auto d : g.dims) {
    if (!dim_names.insert(d.name).second) fail(g, "dim '" + d.name + "'", "declared twice");
    d.normalize_and_validate();
  }
  auto dims = g.dim_table();

  for (const auto& [name, t] : g.tensors) {
    std::string what = "tensor '" + name + "'";
    if (name.empty()) fail(g, "a tensor", "has an empty name");
    if (t.shape.size() > 8) fail(g, what, "rank " + std::to_string(t.shape.size()) + " exceeds the maximum of 8");
    std::set<std::string> used;
    for (const auto& e : t.shape) e.collect_dims(used);
    for (const auto& d : used)
      if (!dims.count(d)) fail(g, what, "shape " + shape_to_string(t.shape) + " uses undeclared dim '" + d + "'");
    for (const auto& e : t.shape) {
      Interval b = e.bounds(dims);
      if (b.lo < 0) fail(g, what, "extent '" + e.to_string() + "' may be negative");
    }
    if (t.kind == TensorKind::constant || t.kind == TensorKind::state) {
      if (!shape_is_static(t.shape))
        fail(g, what, "a " + std::string(tensor_kind_name(t.kind)) + " must have a static shape, got " + shape_to_string(t.shape));
    }
    if (t.quant) {
      if (t.kind != TensorKind::constant) fail(g, what, "only constants can be stored quantized ('quant')");
      if (t.dtype != DType::f32 || t.shape.size() != 2)
        fail(g, what, "a quantized constant must be a 2-d float32 weight [N, K], got " + std::string(dtype_name(t.dtype)) +
                          shape_to_string(t.shape));
      const dml_qtype_traits* tr = dml_qtype_get(dml_qtype_by_name(t.quant->type.c_str()));
      if (!tr || !tr->supported || !tr->is_quantized)
        fail(g, what, "unknown or unsupported quant type '" + t.quant->type + "'");
      if (t.quant->block_size != tr->block_size || t.quant->block_bytes != tr->type_size)
        fail(g, what, "quant " + t.quant->type + " has blocks of " + std::to_string(tr->block_size) + " elements / " +
                          std::to_string(tr->type_size) + " bytes, the tensor says " + std::to_string(t.quant->block_size) +
                          " / " + std::to_string(t.quant->block_bytes));
    }
    if (t.kind == TensorKind::constant) {
      const size_t want = storage_bytes(t);
      if (g.constant_bytes(name) != want)
        fail(g, what, "constant holds " + std::to_string(g.constant_bytes(name)) + " bytes, its shape " +
                          shape_to_string(t.shape) + " x " + std::string(dtype_name(t.dtype)) +
                          (t.quant ? " in " + t.quant->type + " blocks" : std::string()) + " needs " + std::to_string(want));
    }
    if (t.kind == TensorKind::input)
      for (const auto& e : t.shape)
        if (!e.is_const() && !e.is_dim())
          fail(g, what, "graph input extents must be ints or dims, got '" + e.to_string() + "'");
    if (t.view_of && !g.has_tensor(*t.view_of)) fail(g, what, "is a view of unknown tensor '" + *t.view_of + "'");
  }
  check_listed(g, g.inputs, TensorKind::input, "inputs");
  check_listed(g, g.outputs, TensorKind::output, "outputs");
  check_listed(g, g.states, TensorKind::state, "states");
  if (g.outputs.empty()) fail(g, "outputs", "the graph has no outputs (mark results with ops.output)");

  std::set<std::string> available(g.inputs.begin(), g.inputs.end());
  available.insert(g.states.begin(), g.states.end());
  for (const auto& [name, t] : g.tensors)
    if (t.kind == TensorKind::constant) available.insert(name);
  std::set<std::string> node_names;
  for (const auto& n : g.nodes) {
    std::string what = "node '" + n.name + "' (" + n.op + ")";
    if (n.name.empty()) fail(g, "a node of op '" + n.op + "'", "has an empty name");
    if (!node_names.insert(n.name).second) fail(g, what, "node name used twice");
    if (n.op.empty()) fail(g, what, "has no op");
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const auto& in = n.inputs[i];
      if (!g.has_tensor(in)) fail(g, what, "input '" + in + "' is not a tensor of the graph");
      if (const auto& q = g.tensor(in).quant;
          q && !(i == 1 && (n.op.rfind("gemm_rcr", 0) == 0 || n.op == "embedding")))
        fail(g, what, "reads quantized constant '" + in + "' (" + q->type + ", kept as GGUF blocks) as input " +
                          std::to_string(i) + "; only gemm_rcr* (as b) and embedding (as the table) can consume "
                          "quantized weights: bind it with policy 'dequantize' instead");
      if (!available.count(in)) fail(g, what, "input '" + in + "' is used before any node produces it (nodes must be in topological order)");
    }
    for (const auto& out : n.outputs) {
      if (!g.has_tensor(out)) fail(g, what, "output '" + out + "' is not a tensor of the graph");
      auto k = g.tensor(out).kind;
      if (k == TensorKind::input || k == TensorKind::constant || k == TensorKind::state)
        fail(g, what, "output '" + out + "' is a graph " + std::string(tensor_kind_name(k)) + " and cannot be produced by a node");
      if (!available.insert(out).second) fail(g, what, "output '" + out + "' is produced twice");
    }
  }
  for (const auto& [name, t] : g.tensors)
    if ((t.kind == TensorKind::intermediate || t.kind == TensorKind::output) && !available.count(name))
      fail(g, "tensor '" + name + "'", "no node produces it");
}

}  // namespace dinoml::ir
