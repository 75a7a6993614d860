// plan_memory: an analysis (the graph is not modified). For every shape bucket (cartesian product
// of the dims' buckets, first dim varying slowest) it sizes each arena buffer at the bucket's
// upper bounds and places it with a greedy best-fit: buffers sorted by size (desc), then first
// use, each at the lowest 64-byte-aligned offset that does not overlap any already placed buffer
// whose lifetime [first, last] overlaps its own.
// Buffers: intermediate tensors that own storage (no view_of). Inputs, outputs, constants and
// states live outside the arena; views use their storage root's buffer and extend its lifetime
// to their own last reader. A value read by `state_assign` lives to the end of the run (the state
// write may happen after the last node).
#include "passes/plan_memory.h"

#include <algorithm>
#include <set>

#include "ir/error.h"

namespace dinoml::passes {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Buffer {
  std::string tensor;
  int first = 0, last = 0;
};

// Storage-owning intermediates with their lifetimes (bucket independent).
std::vector<Buffer> collect_buffers(const ir::Graph& g) {
  std::map<std::string, Buffer> bufs;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) {
      const auto& t = g.tensor(o);
      if (t.kind == ir::TensorKind::intermediate && !t.view_of)
        bufs[o] = Buffer{o, static_cast<int>(i), static_cast<int>(i)};
    }
  const int end_of_run = static_cast<int>(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      auto b = bufs.find(storage_root(g, n.inputs[k]));
      if (b == bufs.end()) continue;
      int use = (n.op == "state_assign" && k == 1) ? end_of_run : static_cast<int>(i);
      b->second.last = std::max(b->second.last, use);
    }
  }
  std::vector<Buffer> out;
  for (auto& [name, b] : bufs) out.push_back(b);
  return out;
}

BucketPlan plan_bucket(const ir::Graph& g, const std::vector<Buffer>& bufs, std::map<std::string, int64_t> dims,
                       std::map<std::string, int64_t> dims_lo, uint64_t alignment) {
  BucketPlan bp;
  bp.dims = std::move(dims);
  bp.dims_lo = std::move(dims_lo);
  std::vector<Allocation> allocs;
  for (const auto& b : bufs) {
    const auto& t = g.tensor(b.tensor);
    uint64_t nbytes = ir::dtype_size(t.dtype);
    for (const auto& e : t.shape) {
      int64_t v = e.eval(bp.dims);
      if (v < 0) throw IrError("plan_memory: tensor '" + t.name + "' has negative extent " + e.to_string());
      nbytes *= static_cast<uint64_t>(v);
    }
    allocs.push_back(Allocation{b.tensor, 0, nbytes, b.first, b.last});
  }
  std::vector<size_t> order(allocs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto &x = allocs[a], &y = allocs[b];
    if (x.nbytes != y.nbytes) return x.nbytes > y.nbytes;
    if (x.first != y.first) return x.first < y.first;
    return x.tensor < y.tensor;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    Allocation& a = allocs[idx];
    std::vector<const Allocation*> live;
    for (size_t p : placed) {
      const Allocation& o = allocs[p];
      if (o.nbytes > 0 && o.first <= a.last && a.first <= o.last) live.push_back(&o);
    }
    std::sort(live.begin(), live.end(), [](const Allocation* x, const Allocation* y) { return x->offset < y->offset; });
    uint64_t off = 0;
    if (a.nbytes > 0)
      for (const Allocation* o : live) {
        if (off + a.nbytes <= o->offset) break;  // fits in the gap below `o`
        off = std::max(off, align_up(o->offset + o->nbytes, alignment));
      }
    a.offset = off;
    bp.arena_bytes = std::max(bp.arena_bytes, align_up(off + a.nbytes, alignment));
    placed.push_back(idx);
  }
  // Listed in execution order (first use, then name) so the plan reads like the program.
  std::sort(allocs.begin(), allocs.end(), [](const Allocation& x, const Allocation& y) {
    return x.first != y.first ? x.first < y.first : x.tensor < y.tensor;
  });
  bp.allocations = std::move(allocs);
  return bp;
}

}  // namespace

std::string storage_root(const ir::Graph& g, const std::string& tensor) {
  std::string cur = tensor;
  std::set<std::string> seen;
  while (true) {
    const auto& t = g.tensor(cur);
    if (!t.view_of) return cur;
    if (!seen.insert(cur).second) throw IrError("tensor '" + tensor + "': view_of chain forms a cycle at '" + cur + "'");
    cur = *t.view_of;
  }
}

MemoryPlan plan_memory(const ir::Graph& g) {
  MemoryPlan plan;
  std::vector<ir::Dim> dims = g.dims;
  for (auto& d : dims) {
    d.normalize_and_validate();  // fills buckets when a hand-made graph left them empty
    plan.dim_order.push_back(d.name);
  }
  const auto bufs = collect_buffers(g);
  // Odometer over bucket indices; the last dim varies fastest.
  std::vector<size_t> k(dims.size(), 0);
  while (true) {
    std::map<std::string, int64_t> hi, lo;
    for (size_t i = 0; i < dims.size(); ++i) {
      hi[dims[i].name] = dims[i].buckets[k[i]];
      lo[dims[i].name] = dims[i].bucket_lo(k[i]);
    }
    plan.buckets.push_back(plan_bucket(g, bufs, hi, lo, plan.alignment));
    size_t i = dims.size();
    while (i > 0 && ++k[i - 1] == dims[i - 1].buckets.size()) k[--i] = 0;
    if (i == 0) break;
  }
  // The last bucket has every dim at its max: the largest sizes.
  for (const auto& a : plan.buckets.back().allocations) plan.sum_intermediate_bytes += a.nbytes;
  return plan;
}

nlohmann::json memory_plan_to_json(const MemoryPlan& p) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : p.buckets) {
    nlohmann::json allocs = nlohmann::json::array();
    for (const auto& a : b.allocations)
      allocs.push_back({{"tensor", a.tensor}, {"offset", a.offset}, {"nbytes", a.nbytes}, {"first", a.first}, {"last", a.last}});
    buckets.push_back({{"dims", b.dims}, {"dims_lo", b.dims_lo}, {"arena_bytes", b.arena_bytes}, {"allocations", allocs}});
  }
  return {{"alignment", p.alignment}, {"sum_intermediate_bytes", p.sum_intermediate_bytes}, {"buckets", buckets}};
}

}  // namespace dinoml::passes
