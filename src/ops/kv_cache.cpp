// KV-cache plumbing: `kv_cache_write(cache, values, positions)` scatters rows into a cache.
//
//   y = cache;  y[..., positions[t], :] = values[..., t, :]   for t in [0, T)
//
// cache [..., S, D], values [..., T, D] (same leading dims, same D and dtype), positions [T]
// int32/int64 with every entry in [0, S) (no negative wrap: a position names a row). A repeated
// position keeps the last row written. The output has the cache's type; when the cache is a
// session state and the output is written back into it by state_assign (the decoder pattern),
// the `alias_kv_cache_write` pass makes the write happen in place in the state's buffer.
#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

std::vector<TensorType> infer_kv_cache_write(const InferContext& ctx) {
  const ir::Shape& c = ctx.inputs[0].shape;
  const ir::Shape& v = ctx.inputs[1].shape;
  const ir::Shape& p = ctx.inputs[2].shape;
  ctx.expect_same_dtype(0, 1);
  detail::expect_index_dtype(ctx, 2);
  if (c.size() < 2)
    ctx.fail("cache " + detail::describe_input(ctx, 0) + " must have rank >= 2: [..., S, D]");
  if (v.size() != c.size())
    ctx.fail("values " + detail::describe_input(ctx, 1) + " must have the cache's rank " + std::to_string(c.size()) +
             ": [..., T, D]");
  const size_t r = c.size();
  for (size_t a = 0; a + 2 < r; ++a)
    ctx.expect_same_extent(c[a], v[a], "leading axis " + std::to_string(a) + " of cache and values");
  ctx.expect_same_extent(c[r - 1], v[r - 1], "row size D of cache and values");
  if (p.size() != 1)
    ctx.fail("positions " + detail::describe_input(ctx, 2) + " must be 1-d [T] (one cache row per values row)");
  ctx.expect_same_extent(p[0], v[r - 2], "positions length and the row count T of values");
  return {{ctx.inputs[0].dtype, c}};
}

std::vector<HostTensor> ref_kv_cache_write(const RefContext& ctx) {
  const HostTensor& cache = ctx.in(0);
  const HostTensor& values = ctx.in(1);
  const HostTensor& pos = ctx.in(2);
  const size_t r = cache.shape.size();
  const int64_t S = cache.shape[r - 2], D = cache.shape[r - 1], T = values.shape[r - 2];
  const int64_t outer = detail::product(cache.shape, 0, r - 2);
  HostTensor out = cache;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t row = pos.get_i64(t);
    if (row < 0 || row >= S)
      detail::ref_fail(ctx, "position " + std::to_string(row) + " at index " + std::to_string(t) + " of '" +
                                ctx.node.inputs[2] + "' is outside the cache rows [0, " + std::to_string(S) + ")");
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t d = 0; d < D; ++d)
        detail::copy_element(values, (o * T + t) * D + d, out, (o * S + row) * D + d);
  }
  return {out};
}

}  // namespace

void register_kv_cache_ops(Registry& r) {
  OpDef d;
  d.name = "kv_cache_write";
  d.family = "kv_cache";
  d.doc = "cache with rows positions[t] (axis -2) replaced by values[..., t, :]";
  d.min_inputs = d.max_inputs = 3;
  d.infer = infer_kv_cache_write;
  d.reference = ref_kv_cache_write;
  r.add(std::move(d));
}

}  // namespace dinoml::ops
