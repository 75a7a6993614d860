// fuse_elementwise: replaces every elementwise node (OpDef.elementwise) — single ones included, so
// the code generator is the only emitter of elementwise code — with `fused_elementwise` nodes.
// Groups grow from a root (the latest unassigned elementwise node) towards its producers: a
// producer joins when it is elementwise with one output, that output is an intermediate that is
// not a graph output, every consumer of it is already in the group, and its shape broadcasts into
// the root's shape (equal, or smaller with 1s / missing leading axes). Since only the root's value
// leaves the group, a smaller member can be recomputed at the output shape (elementwise ops
// commute with broadcasting), and the fused node cannot create a cycle.
// The fused node is named fused_<root>, takes the group's external inputs in first-use order, and
// carries attrs `dtype`, `program` (JSON steps, docs/architecture.md) and `members` (original node
// names). Leaves alone: non-elementwise ops, existing fused_elementwise nodes, multi-output nodes.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/serialize.h"
#include "ops/registry.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

bool is_fusible(const ir::Node& n) {
  if (n.op == "fused_elementwise" || n.outputs.size() != 1) return false;
  const ops::OpDef* def = ops::Registry::global().find(n.op);
  return def && def->elementwise;
}

// True when `s` broadcasts into `target` without changing it (NumPy rules, structural extents).
bool broadcasts_into(const ir::Shape& s, const ir::Shape& target) {
  if (s.size() > target.size()) return false;
  size_t off = target.size() - s.size();
  for (size_t k = 0; k < s.size(); ++k) {
    const auto& e = s[k];
    if (e == target[off + k]) continue;
    if (e.is_const() && e.const_value() == 1) continue;
    return false;
  }
  return true;
}

nlohmann::json attrs_json(const ir::Attrs& attrs) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : attrs) j[k] = ir::attr_to_json(v);
  return j;
}

}  // namespace

PassResult fuse_elementwise(ir::Graph& g) {
  PassResult r;
  const auto producers = g.producers();
  const auto consumers = g.consumers();
  const size_t n = g.nodes.size();
  std::vector<int> group_of(n, -1);
  std::vector<std::vector<size_t>> groups;  // member indices, ascending; back() is the root

  for (size_t root = n; root-- > 0;) {
    if (group_of[root] >= 0 || !is_fusible(g.nodes[root])) continue;
    int gid = static_cast<int>(groups.size());
    const ir::Shape& out_shape = g.tensor(g.nodes[root].outputs[0]).shape;
    std::vector<size_t> members{root};
    group_of[root] = gid;
    // Max-heap of candidate producers: producers always precede consumers, so candidates pop in
    // descending order and every consumer of a candidate has been decided before it is examined.
    std::priority_queue<size_t> cand;
    auto push_producers = [&](size_t m) {
      for (const auto& in : g.nodes[m].inputs) {
        auto p = producers.find(in);
        if (p != producers.end()) cand.push(p->second);
      }
    };
    push_producers(root);
    size_t last = n;
    while (!cand.empty()) {
      size_t p = cand.top();
      cand.pop();
      if (p == last) continue;  // duplicates (an input used by several members)
      last = p;
      const ir::Node& pn = g.nodes[p];
      if (group_of[p] >= 0 || !is_fusible(pn)) continue;
      const ir::Tensor& t = g.tensor(pn.outputs[0]);
      if (t.kind != ir::TensorKind::intermediate) continue;
      auto c = consumers.find(t.name);
      if (c == consumers.end() || c->second.empty()) continue;
      bool inside = std::all_of(c->second.begin(), c->second.end(), [&](size_t ci) { return group_of[ci] == gid; });
      if (!inside || !broadcasts_into(t.shape, out_shape)) continue;
      group_of[p] = gid;
      members.push_back(p);
      push_producers(p);
    }
    std::sort(members.begin(), members.end());
    groups.push_back(std::move(members));
  }
  if (groups.empty()) {
    r.stats["groups"] = 0;
    r.stats["fused_nodes"] = 0;
    return r;
  }

  // Build one fused node per group, placed at its root's position.
  std::map<size_t, ir::Node> fused_at_root;
  int64_t fused_nodes = 0, largest = 0;
  for (const auto& members : groups) {
    std::map<std::string, std::string> local;  // member output tensor -> "sK"
    std::vector<std::string> ext_inputs;
    std::map<std::string, std::string> ext_ref;  // external tensor -> "inK"
    nlohmann::json program = nlohmann::json::array();
    std::vector<std::string> member_names;
    for (size_t k = 0; k < members.size(); ++k) {
      const ir::Node& m = g.nodes[members[k]];
      nlohmann::json args = nlohmann::json::array();
      for (const auto& in : m.inputs) {
        if (auto l = local.find(in); l != local.end()) {
          args.push_back(l->second);
          continue;
        }
        auto [e, inserted] = ext_ref.emplace(in, "in" + std::to_string(ext_inputs.size()));
        if (inserted) ext_inputs.push_back(in);
        args.push_back(e->second);
      }
      const ir::Tensor& out = g.tensor(m.outputs[0]);
      program.push_back({{"op", m.op}, {"args", args}, {"dtype", std::string(ir::dtype_name(out.dtype))},
                         {"attrs", attrs_json(m.attrs)}});
      local[m.outputs[0]] = "s" + std::to_string(k);
      member_names.push_back(m.name);
    }
    const ir::Node& root = g.nodes[members.back()];
    ir::Node f;
    f.name = "fused_" + root.name;
    f.op = "fused_elementwise";
    f.inputs = ext_inputs;
    f.outputs = root.outputs;
    f.attrs["dtype"] = std::string(ir::dtype_name(g.tensor(root.outputs[0]).dtype));
    f.attrs["program"] = program.dump();
    f.attrs["members"] = member_names;
    fused_at_root.emplace(members.back(), std::move(f));
    fused_nodes += static_cast<int64_t>(members.size());
    largest = std::max<int64_t>(largest, static_cast<int64_t>(members.size()));
  }

  std::set<std::string> dead_tensors;
  std::vector<ir::Node> out_nodes;
  out_nodes.reserve(n);
  std::vector<bool> is_new(n, false);  // indexes out_nodes
  for (size_t i = 0; i < n; ++i) {
    if (group_of[i] < 0) {
      out_nodes.push_back(std::move(g.nodes[i]));
      continue;
    }
    auto f = fused_at_root.find(i);
    if (f != fused_at_root.end()) {
      out_nodes.push_back(std::move(f->second));
      is_new[out_nodes.size() - 1] = true;
    } else {
      dead_tensors.insert(g.nodes[i].outputs[0]);  // internal value of a group
    }
  }
  g.nodes = std::move(out_nodes);
  for (const auto& t : dead_tensors) g.tensors.erase(t);
  // Names: fused_<root> could collide with an existing node/tensor name; make them unique now
  // that the originals are gone (deterministic: node order).
  std::set<std::string> taken;
  for (const auto& [name, t] : g.tensors) taken.insert(name);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!is_new[i]) taken.insert(g.nodes[i].name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!is_new[i]) continue;
    auto& node = g.nodes[i];
    std::string base = node.name;
    for (int k = 1; taken.count(node.name); ++k) node.name = base + "_" + std::to_string(k);
    taken.insert(node.name);
  }
  r.changed = true;
  r.stats["groups"] = static_cast<int64_t>(groups.size());
  r.stats["fused_nodes"] = fused_nodes;
  r.stats["largest_group"] = largest;
  return r;
}

}  // namespace dinoml::passes
