// Collective ops of a tensor-parallel graph (passes/shard_tensor_parallel.cpp inserts them). Every
// rank runs the same graph on its own shard of the weights; a collective combines one tensor
// across the `world_size` ranks:
//
//   all_reduce(x)            y = x_0 + x_1 + ... + x_{W-1}            (attr reduce: "sum")
//   all_gather(x, axis=a)    y = concatenate([x_0, ..., x_{W-1}], a)   (extent of axis a × W)
//
// A single graph cannot see the other ranks, so the per-node reference implementation only
// covers world_size 1 (the identity); `interpret_group` (interpreter.h) runs the rank graphs in
// lockstep and computes collectives with `collective_reference` below.
#include "ops/collective.h"

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

int64_t world_of(const InferContext& ctx) {
  int64_t w = ctx.node.attr_int("world_size");
  if (w < 1) ctx.fail("world_size " + std::to_string(w) + " must be >= 1");
  return w;
}

std::vector<TensorType> infer_all_reduce(const InferContext& ctx) {
  world_of(ctx);
  detail::expect_numeric(ctx, 0);
  std::string reduce = ctx.node.attr_str("reduce", "sum");
  if (reduce != "sum") ctx.fail("reduce '" + reduce + "' is not supported (supported: sum)");
  return {ctx.inputs[0]};
}

std::vector<TensorType> infer_all_gather(const InferContext& ctx) {
  int64_t w = world_of(ctx);
  TensorType t = ctx.inputs[0];
  int64_t a = ctx.axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(t.shape.size()));
  t.shape[static_cast<size_t>(a)] = t.shape[static_cast<size_t>(a)] * ir::IntExpr(w);
  return {t};
}

std::vector<HostTensor> ref_single_rank(const RefContext& ctx) {
  if (ctx.node.attr_int("world_size") != 1)
    detail::ref_fail(ctx, "a collective of world_size " + std::to_string(ctx.node.attr_int("world_size")) +
                              " needs every rank: run the rank graphs together (interpret_group)");
  return {ctx.in(0)};
}

}  // namespace

bool is_collective(const std::string& op) { return op == "all_reduce" || op == "all_gather"; }

std::vector<HostTensor> collective_reference(const ir::Node& node, const std::vector<const HostTensor*>& per_rank) {
  const size_t W = per_rank.size();
  if (W == 0 || static_cast<int64_t>(W) != node.attr_int("world_size"))
    throw OpError("node '" + node.name + "' (" + node.op + "): " + std::to_string(W) +
                  " ranks given for world_size " + std::to_string(node.attr_int("world_size")));
  const HostTensor& x0 = *per_rank[0];
  for (size_t r = 1; r < W; ++r)
    if (per_rank[r]->shape != x0.shape || per_rank[r]->dtype != x0.dtype)
      throw OpError("node '" + node.name + "' (" + node.op + "): rank " + std::to_string(r) + " holds " +
                    per_rank[r]->shape_string() + " but rank 0 holds " + x0.shape_string() +
                    " (every rank must contribute the same type)");
  if (node.op == "all_reduce") {
    HostTensor sum = x0;
    const int64_t n = sum.numel();
    for (int64_t i = 0; i < n; ++i) {
      double acc = 0;
      for (size_t r = 0; r < W; ++r) acc += per_rank[r]->get_as(i);
      sum.set_as(i, acc);
    }
    return std::vector<HostTensor>(W, sum);
  }
  if (node.op == "all_gather") {
    const int64_t rank = x0.rank();
    const int64_t a = detail::wrap_axis(node.attr_int("axis", 0), rank);
    std::vector<int64_t> shape = x0.shape;
    shape[static_cast<size_t>(a)] *= static_cast<int64_t>(W);
    HostTensor out(x0.dtype, shape);
    const int64_t outer = detail::product(x0.shape, 0, static_cast<size_t>(a));
    const size_t chunk = static_cast<size_t>(detail::product(x0.shape, static_cast<size_t>(a), x0.shape.size())) *
                         ir::dtype_size(x0.dtype);
    for (int64_t o = 0; o < outer; ++o)
      for (size_t r = 0; r < W; ++r)
        std::copy_n(per_rank[r]->data.data() + o * chunk, chunk, out.data.data() + (o * W + r) * chunk);
    return std::vector<HostTensor>(W, out);
  }
  throw OpError("node '" + node.name + "': '" + node.op + "' is not a collective op");
}

void register_collective_ops(Registry& r) {
  // Both collectives: a world_size attribute and the single-rank reference (interpret_group runs
  // the group).
  auto collective = [&](const char* name, const char* doc, AttrSpec extra, decltype(OpDef::infer) infer) {
    OpDef d;
    d.name = name;
    d.family = "collective";
    d.doc = doc;
    d.attrs = {{"world_size", AttrKind::integer, true, "ranks in the group"}, std::move(extra)};
    d.infer = infer;
    d.reference = ref_single_rank;
    r.add(d);
  };
  collective("all_reduce", "sum of x over the ranks of a tensor-parallel group (attrs world_size, reduce = sum)",
             {"reduce", AttrKind::string, false, "sum"}, infer_all_reduce);
  collective("all_gather", "the ranks' x concatenated along attr axis, in rank order (attrs world_size, axis)",
             {"axis", AttrKind::integer, false, "0"}, infer_all_gather);
}

}  // namespace dinoml::ops
