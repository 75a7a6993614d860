// Graph plumbing: `output`, `state_assign`, and `fused_elementwise` (made by fuse_elementwise).
// A fused_elementwise program is checked step by step with the member ops' own shape/dtype
// inference, and interpreted with their own reference code (eval_elementwise), so fusion can
// never change what an op means.
#include <nlohmann/json.hpp>

#include "ir/serialize.h"
#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

struct Step {
  std::string op;
  std::vector<std::string> args;  // "inK" (node input K) or "sK" (result of step K)
  ir::DType dtype;
  ir::Attrs attrs;
};

[[noreturn]] void program_fail(const ir::Node& node, const std::string& rule) {
  throw OpError("node '" + node.name + "' (fused_elementwise): program " + rule);
}

std::vector<Step> parse_program(const ir::Node& node) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(node.attr_str("program"));
  } catch (const nlohmann::json::exception& e) {
    program_fail(node, std::string("is not valid JSON: ") + e.what());
  }
  if (!j.is_array() || j.empty()) program_fail(node, "must be a non-empty JSON list of steps");
  std::vector<Step> steps;
  for (size_t k = 0; k < j.size(); ++k) {
    const auto& s = j[k];
    std::string where = "step " + std::to_string(k);
    if (!s.is_object() || !s.contains("op") || !s["op"].is_string() || !s.contains("args") || !s["args"].is_array() ||
        !s.contains("dtype") || !s["dtype"].is_string())
      program_fail(node, where + " must be {\"op\": str, \"args\": [str], \"dtype\": str, \"attrs\": {}}");
    Step st;
    st.op = s["op"].get<std::string>();
    auto dt = ir::dtype_from_name(s["dtype"].get<std::string>());
    if (!dt) program_fail(node, where + " has unknown dtype '" + s["dtype"].get<std::string>() + "'");
    st.dtype = *dt;
    for (const auto& a : s["args"]) {
      if (!a.is_string()) program_fail(node, where + " has a non-string argument " + a.dump());
      st.args.push_back(a.get<std::string>());
    }
    if (s.contains("attrs")) {
      if (!s["attrs"].is_object()) program_fail(node, where + ": attrs must be an object");
      try {
        for (const auto& [key, v] : s["attrs"].items()) st.attrs[key] = ir::attr_from_json(v);
      } catch (const IrError& e) {
        program_fail(node, where + ": " + e.what());
      }
    }
    steps.push_back(std::move(st));
  }
  return steps;
}

// Resolves "inK"/"sK" to (is_input, K), checking the reference points backwards.
std::pair<bool, size_t> resolve_arg(const ir::Node& node, const std::string& a, size_t step, size_t n_inputs) {
  bool in = a.rfind("in", 0) == 0, st = !in && a.rfind("s", 0) == 0;
  std::string digits = a.substr(in ? 2 : 1);
  if ((!in && !st) || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    program_fail(node, "step " + std::to_string(step) + ": argument '" + a + "' is not inK or sK");
  size_t k = std::stoul(digits);
  if (in && k >= n_inputs)
    program_fail(node, "step " + std::to_string(step) + ": '" + a + "' but the node has " + std::to_string(n_inputs) +
                           " inputs");
  if (st && k >= step)
    program_fail(node, "step " + std::to_string(step) + ": '" + a + "' refers to a step that has not run yet");
  return {in, k};
}

std::vector<TensorType> infer_fused(const InferContext& ctx) {
  ir::DType out_dtype = detail::dtype_attr(ctx, "dtype", "");
  ir::Shape out = ctx.inputs[0].shape;
  try {
    for (size_t i = 1; i < ctx.inputs.size(); ++i) out = ctx.broadcast(out, ctx.inputs[i].shape);
  } catch (const OpError& e) {
    throw OpError(std::string(e.what()) + " (fused_elementwise inputs must broadcast together)");
  }
  auto steps = parse_program(ctx.node);
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    const OpDef* def = Registry::global().find(s.op);
    if (!def || !def->elementwise)
      program_fail(ctx.node, "step " + std::to_string(k) + ": '" + s.op + "' is not an elementwise op");
    // Each step is checked with the member op's own rules, as a node of its own.
    ir::Node sn;
    sn.name = ctx.node.name + "/step" + std::to_string(k);
    sn.op = s.op;
    sn.attrs = s.attrs;
    std::vector<TensorType> arg_types;
    for (const auto& a : s.args) {
      auto [is_in, i] = resolve_arg(ctx.node, a, k, ctx.inputs.size());
      sn.inputs.push_back(is_in ? ctx.node.inputs.at(i) : ctx.node.name + "/s" + std::to_string(i));
      arg_types.push_back(is_in ? ctx.inputs[i] : TensorType{steps[i].dtype, out});
    }
    auto res = infer_node(sn, arg_types, ctx.dims);
    if (res.at(0).dtype != s.dtype)
      program_fail(ctx.node, "step " + std::to_string(k) + " (" + s.op + ") declares dtype " +
                                 detail::dtype_str(s.dtype) + " but the op yields " + detail::dtype_str(res[0].dtype));
  }
  if (steps.back().dtype != out_dtype)
    program_fail(ctx.node, "ends with dtype " + detail::dtype_str(steps.back().dtype) + " but the node's dtype is " +
                               detail::dtype_str(out_dtype));
  return {{out_dtype, out}};
}

std::vector<HostTensor> ref_fused(const RefContext& ctx) {
  auto steps = parse_program(ctx.node);
  const auto& out_shape = ctx.out_shapes.at(0);
  std::vector<HostTensor> results;
  results.reserve(steps.size());
  for (size_t k = 0; k < steps.size(); ++k) {
    std::vector<const HostTensor*> args;
    for (const auto& a : steps[k].args) {
      auto [is_in, i] = resolve_arg(ctx.node, a, k, ctx.inputs.size());
      args.push_back(is_in ? ctx.inputs.at(i) : &results.at(i));
    }
    results.push_back(eval_elementwise(steps[k].op, steps[k].attrs, args, steps[k].dtype, out_shape));
  }
  return {results.back().cast(ctx.out_dtypes.at(0))};
}

}  // namespace

void register_misc_ops(Registry& r) {
  OpDef out;
  out.name = "output";
  out.family = "misc";
  out.doc = "marks a graph output (identity)";
  out.infer = [](const InferContext& ctx) { return std::vector<TensorType>{ctx.inputs[0]}; };
  out.reference = [](const RefContext& ctx) { return std::vector<HostTensor>{ctx.in(0)}; };
  r.add(std::move(out));

  OpDef sa;
  sa.name = "state_assign";
  sa.family = "misc";
  sa.doc = "the state holds value after the run";
  sa.min_inputs = sa.max_inputs = 2;
  sa.num_outputs = 0;
  sa.infer = [](const InferContext& ctx) {
    ctx.expect_same_dtype(0, 1);
    // Broadcast-free on purpose: the write is a plain copy of value's bytes into the state.
    if (ctx.inputs[0].shape != ctx.inputs[1].shape)
      ctx.fail("value " + detail::describe_input(ctx, 1) + " must have exactly the shape of state " +
               detail::describe_input(ctx, 0));
    return std::vector<TensorType>{};
  };
  // The interpreter applies the write itself at the end of the run.
  sa.reference = [](const RefContext&) { return std::vector<HostTensor>{}; };
  r.add(std::move(sa));

  OpDef fe;
  fe.name = "fused_elementwise";
  fe.family = "misc";
  fe.doc = "a chain of elementwise steps evaluated in one loop over the broadcast output";
  fe.min_inputs = 1;
  fe.max_inputs = -1;
  fe.attrs = {{"program", AttrKind::string, true, "JSON list of steps (docs/architecture.md)"},
              {"dtype", AttrKind::string, true, "output dtype"},
              {"members", AttrKind::strs, false, "names of the fused source nodes (for reports)"}};
  fe.infer = infer_fused;
  fe.reference = ref_fused;
  r.add(std::move(fe));
}

}  // namespace dinoml::ops
