// stride_attention_operands: see the header for what it rewrites. Left alone: masked sdpa (the
// mask path keeps the copy), permutes that move the last axis, permutes whose output (or any
// view of it) has a reader other than an sdpa operand, graph inputs / outputs / states, splits
// whose outputs are not views already, and anything a reshape maps other than by adding or
// dropping extent-1 axes.
#include "passes/stride_attention_operands.h"

#include <map>
#include <set>

#include "ir/error.h"
#include "ops/registry.h"
#include "passes/plan_memory.h"

namespace dinoml::passes {
namespace {

bool is_const1(const ir::IntExpr& e) { return e.is_const() && e.const_value() == 1; }

std::vector<int64_t> permute_dims(const ir::Node& n, size_t rank) {
  std::vector<int64_t> p = n.attr_ints("dims");
  for (auto& d : p)
    if (d < 0) d += static_cast<int64_t>(rank);
  return p;
}

bool keeps_last_axis(const ir::Node& n, size_t rank) {
  if (rank < 2) return false;
  const auto p = permute_dims(n, rank);
  return p.size() == rank && p.back() == static_cast<int64_t>(rank) - 1;
}

bool is_view_node(const ir::Node& n) {
  const ops::OpDef* def = ops::Registry::global().find(n.op);
  return def && def->view && n.inputs.size() >= 1 && n.outputs.size() == 1;
}

std::vector<ir::IntExpr> contiguous(const ir::Shape& s) {
  std::vector<ir::IntExpr> st(s.size(), ir::IntExpr(1));
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

struct Walker {
  const ir::Graph& g;
  std::map<std::string, size_t> prod = g.producers();
  std::map<std::string, std::vector<size_t>> cons = g.consumers();

  StridedLayout layout(const std::string& name, size_t depth = 0) const {
    const ir::Tensor& t = g.tensor(name);
    if (t.layout != kStridedLayout) return {name, ir::IntExpr(0), contiguous(t.shape)};
    if (depth > g.tensors.size()) throw IrError("tensor '" + name + "': strided view chain forms a cycle");
    auto bad = [&](const std::string& why) -> StridedLayout {
      throw IrError("tensor '" + name + "' has layout 'strided' but " + why);
    };
    if (!t.view_of) {
      // Output side: the buffer holds z = permute(t) row-major, z a view of t.
      auto c = cons.find(name);
      if (c != cons.end())
        for (size_t ci : c->second) {
          const ir::Node& p = g.nodes[ci];
          if (p.op != "permute" || p.inputs.at(0) != name) continue;
          const ir::Tensor& z = g.tensor(p.outputs.at(0));
          if (z.view_of != name || z.layout == kStridedLayout) continue;
          const auto perm = permute_dims(p, t.shape.size());
          const auto cz = contiguous(z.shape);
          std::vector<ir::IntExpr> st(t.shape.size(), ir::IntExpr(0));
          for (size_t i = 0; i < perm.size(); ++i) st.at(static_cast<size_t>(perm[i])) = cz[i];
          return {name, ir::IntExpr(0), st};
        }
      return bad("no permute reader holds its buffer row-major");
    }
    auto pi = prod.find(name);
    if (pi == prod.end()) return bad("no producer");
    const ir::Node& p = g.nodes[pi->second];
    const std::string& src = p.inputs.at(0);
    if (*t.view_of != src) return bad("it is not a view of its producer's input");
    const StridedLayout in = layout(src, depth + 1);
    if (p.op == "permute") {
      const auto perm = permute_dims(p, t.shape.size());
      StridedLayout out{in.base, in.offset, {}};
      for (int64_t d : perm) out.strides.push_back(in.strides.at(static_cast<size_t>(d)));
      return out;
    }
    if (p.op == "split") {
      const ir::Tensor& x = g.tensor(src);
      int64_t axis = p.attr_int("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(x.shape.size());
      ir::IntExpr before(0);
      for (const auto& o : p.outputs) {
        if (o == name) break;
        before = before + g.tensor(o).shape.at(static_cast<size_t>(axis));
      }
      return {in.base, in.offset + before * in.strides.at(static_cast<size_t>(axis)), in.strides};
    }
    if (is_view_node(p)) {
      // Only extent-1 axes may come and go: the other extents must match in order.
      const ir::Tensor& x = g.tensor(src);
      std::vector<ir::IntExpr> st;
      size_t j = 0;
      for (const auto& e : t.shape) {
        if (is_const1(e)) {
          st.push_back(ir::IntExpr(0));
          continue;
        }
        while (j < x.shape.size() && is_const1(x.shape[j])) ++j;
        if (j >= x.shape.size() || x.shape[j] != e) return bad("its reshape does more than add or drop extent-1 axes");
        st.push_back(in.strides[j++]);
      }
      while (j < x.shape.size() && is_const1(x.shape[j])) ++j;
      if (j != x.shape.size()) return bad("its reshape does more than add or drop extent-1 axes");
      return {in.base, in.offset, st};
    }
    return bad("its producer (" + p.op + ") is not a permute, split or view");
  }
};

bool row_major_intermediate(const ir::Tensor& t) {
  return t.kind == ir::TensorKind::intermediate && !t.view_of && t.layout != kStridedLayout;
}

bool is_plain_sdpa(const ir::Node& n) { return n.op == "scaled_dot_product_attention" && n.inputs.size() == 3; }

// Output side: o = sdpa(...) read only by z = permute(o) (last axis kept).
bool try_output(ir::Graph& g, const std::map<std::string, std::vector<size_t>>& cons, const ir::Node& n) {
  if (!is_plain_sdpa(n) || n.outputs.size() != 1) return false;
  const std::string& o = n.outputs[0];
  ir::Tensor& to = g.tensor(o);
  if (!row_major_intermediate(to)) return false;
  auto c = cons.find(o);
  if (c == cons.end() || c->second.size() != 1) return false;
  const ir::Node& p = g.nodes[c->second[0]];
  if (p.op != "permute" || p.inputs.size() != 1 || p.inputs[0] != o || !keeps_last_axis(p, to.shape.size())) return false;
  ir::Tensor& tz = g.tensor(p.outputs.at(0));
  if (!row_major_intermediate(tz)) return false;
  tz.view_of = o;
  to.layout = kStridedLayout;
  return true;
}

// Input side: y = permute(x) whose view closure is read only as sdpa q / k / v. Marks it, then
// checks every operand's layout (head dim contiguous); undoes the marks when one does not hold.
bool try_input(ir::Graph& g, const std::map<std::string, std::vector<size_t>>& cons, const ir::Node& p) {
  if (p.op != "permute" || p.inputs.size() != 1 || p.outputs.size() != 1) return false;
  const std::string& x = p.inputs[0];
  const std::string& y = p.outputs[0];
  const ir::Tensor& tx = g.tensor(x);
  if (tx.layout == kStridedLayout || !keeps_last_axis(p, tx.shape.size())) return false;
  if (g.tensor(storage_root(g, x)).kind != ir::TensorKind::intermediate) return false;
  if (!row_major_intermediate(g.tensor(y))) return false;
  std::vector<std::string> closure{y}, operands;
  for (size_t i = 0; i < closure.size(); ++i) {
    const std::string u = closure[i];
    auto c = cons.find(u);
    if (c == cons.end()) continue;
    for (size_t ci : c->second) {
      const ir::Node& r = g.nodes[ci];
      if (is_plain_sdpa(r)) {
        if (r.inputs[0] != u && r.inputs[1] != u && r.inputs[2] != u) return false;
        operands.push_back(u);
      } else if (r.op == "split" && r.inputs.size() == 1 && r.inputs[0] == u) {
        for (const auto& o : r.outputs) {
          const ir::Tensor& to = g.tensor(o);
          if (to.kind != ir::TensorKind::intermediate || to.view_of != u || to.layout == kStridedLayout) return false;
          closure.push_back(o);
        }
      } else if (is_view_node(r) && r.inputs[0] == u) {
        const ir::Tensor& to = g.tensor(r.outputs[0]);
        if (to.kind != ir::TensorKind::intermediate || to.view_of != u || to.layout == kStridedLayout) return false;
        closure.push_back(r.outputs[0]);
      } else {
        return false;
      }
    }
  }
  if (operands.empty()) return false;
  std::vector<std::string> old_layout;
  for (const auto& t : closure) old_layout.push_back(g.tensor(t).layout);
  g.tensor(y).view_of = x;
  for (const auto& t : closure) g.tensor(t).layout = kStridedLayout;
  bool ok = true;
  try {
    const Walker w{g};
    for (const auto& t : operands) {
      const StridedLayout l = w.layout(t);
      ok &= !l.strides.empty() && is_const1(l.strides.back());
    }
  } catch (const IrError&) {
    ok = false;
  }
  if (!ok) {
    g.tensor(y).view_of.reset();
    for (size_t i = 0; i < closure.size(); ++i) g.tensor(closure[i]).layout = old_layout[i];
  }
  return ok;
}

}  // namespace

StridedLayout strided_layout(const ir::Graph& g, const std::string& tensor) {
  if (g.tensor(tensor).layout != kStridedLayout) return {tensor, ir::IntExpr(0), contiguous(g.tensor(tensor).shape)};
  return Walker{g}.layout(tensor);
}

PassResult stride_attention_operands(ir::Graph& g) {
  PassResult r;
  int64_t in = 0, out = 0;
  {
    const auto cons = g.consumers();
    for (const auto& n : g.nodes) out += try_output(g, cons, n) ? 1 : 0;
  }
  const auto cons = g.consumers();
  for (const auto& n : g.nodes) in += try_input(g, cons, n) ? 1 : 0;
  r.changed = in + out > 0;
  r.stats["input_permutes_viewed"] = in;
  r.stats["output_permutes_viewed"] = out;
  return r;
}

}  // namespace dinoml::passes
