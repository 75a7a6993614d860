// Tensor-parallel sharding: see shard_tensor_parallel.h for the rules.
#include "passes/shard_tensor_parallel.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "ir/error.h"
#include "ops/gemm.h"
#include "ops/registry.h"

namespace dinoml::passes {
namespace {

constexpr int kRep = -1;
using Sections = std::vector<std::pair<int64_t, int64_t>>;  // (offset, length) along an axis

bool is_reshape_like(const std::string& op) {
  return op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze";
}

const char* act_op(ops::GemmAct a) {
  switch (a) {
    case ops::GemmAct::none: return nullptr;
    case ops::GemmAct::relu: return "relu";
    case ops::GemmAct::gelu: return "gelu";
    case ops::GemmAct::fast_gelu: return "fast_gelu";
    case ops::GemmAct::swish: return "silu";
    case ops::GemmAct::sigmoid: return "sigmoid";
    case ops::GemmAct::tanh: return "tanh";
  }
  return nullptr;
}

class Sharder {
 public:
  Sharder(const ir::Graph& src, int world) : src_(src), W_(world) {
    out_.name = src.name;
    out_.dims = src.dims;
    out_.inputs = src.inputs;
    out_.outputs = src.outputs;
    out_.states = src.states;
    dims_ = src.dim_table();
    for (const auto& n : src.nodes) node_names_.insert(n.name);
    src_consumers_ = src.consumers();
    for (const auto& [name, t] : src.tensors)
      if (t.kind == ir::TensorKind::input || t.kind == ir::TensorKind::constant || t.kind == ir::TensorKind::state) {
        out_.tensors[name] = t;
        axis_[name] = kRep;
        if (t.kind == ir::TensorKind::state) undecided_.insert(name);
        if (t.kind == ir::TensorKind::constant) {
          auto it = src.constant_data.find(name);
          if (it != src.constant_data.end()) out_.constant_data[name] = it->second;
        }
      }
  }

  std::vector<ir::Graph> run(ShardReport* report) {
    for (const auto& n : src_.nodes) shard_node(n);
    // States nobody decided (read by no sharded op) stay replicated.
    out_.remove_unused_tensors();
    std::vector<ir::Graph> ranks(static_cast<size_t>(W_), out_);
    for (const auto& [name, per_rank] : rank_data_) {
      if (!out_.has_tensor(name)) continue;
      for (int r = 0; r < W_; ++r) ranks[static_cast<size_t>(r)].constant_data[name] = per_rank[static_cast<size_t>(r)];
    }
    if (report) *report = std::move(report_);
    return ranks;
  }

 private:
  const ir::Graph& src_;
  const int W_;
  ir::Graph out_;
  std::map<std::string, ir::Dim> dims_;
  std::map<std::string, int> axis_;                      // tensor of out_ -> split axis or kRep
  std::set<std::string> undecided_;                      // states whose layout no op has fixed yet
  std::map<std::string, std::vector<ir::ConstantBytes>> rank_data_;  // per-rank bytes of split constants
  std::map<std::string, int> inplace_split_;             // constant split under its own name -> axis
  std::map<std::tuple<std::string, int, Sections>, std::string> split_const_;
  std::map<std::pair<std::string, int>, std::string> local_, gathered_;
  std::map<std::string, Sections> sectioned_;  // column-split outputs whose sections are split separately
  std::map<std::string, std::vector<size_t>> src_consumers_;
  std::map<std::string, std::string> whole_;
  ShardReport report_;

  // ---- names and shapes --------------------------------------------------------------------
  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int i = 1; src_.has_tensor(n) || out_.has_tensor(n) || node_names_.count(n); ++i)
      n = base + "_" + std::to_string(i);
    return n;
  }
  std::set<std::string> node_names_;

  const ir::Shape& shape(const std::string& t) const { return out_.tensor(t).shape; }
  int rank(const std::string& t) const { return static_cast<int>(shape(t).size()); }
  bool divisible(const ir::IntExpr& e) const { return e.is_const() && e.const_value() >= W_ && e.const_value() % W_ == 0; }
  bool is_const(const std::string& t) const { return out_.tensor(t).kind == ir::TensorKind::constant; }
  bool is_one(const ir::IntExpr& e) const { return e.is_const() && e.const_value() == 1; }
  // Axis j of t is absent or a broadcast extent 1 (a split tensor's axis is never a broadcast, even
  // when its shard is 1 wide).
  bool broadcasts(const std::string& t, int j) {
    return j < 0 || (axis_of(t) != j && is_one(shape(t)[static_cast<size_t>(j)]));
  }
  // When every consumer of `t` slices it along `axis` (the last) into pieces whose boundaries all
  // divide by the world size, and there are several pieces: those pieces. Otherwise empty.
  Sections sections_of(const std::string& t, int axis) {
    const int64_t N = src_.tensor(t).shape[static_cast<size_t>(axis)].const_value();
    std::set<int64_t> cuts{0, N};
    if (!collect_cuts(t, axis, N, cuts) || cuts.size() <= 2) return {};
    Sections secs;
    for (auto i = cuts.begin(), j = std::next(i); j != cuts.end(); ++i, ++j) {
      if ((*j - *i) % W_ != 0) return {};
      secs.push_back({*i, *j - *i});
    }
    return secs;
  }

  // The cuts the consumers of `t` make along its last axis `axis` (extent N): slices and splits
  // of that axis, also behind reshapes that keep it as the last axis (a [T, 3N] GEMM viewed as
  // [B, S, 3N] and split). False when some consumer uses `t` otherwise.
  bool collect_cuts(const std::string& t, int axis, int64_t N, std::set<int64_t>& cuts) {
    auto it = src_consumers_.find(t);
    const ir::Tensor& tt = src_.tensor(t);
    if (it == src_consumers_.end() || tt.kind != ir::TensorKind::intermediate) return false;
    const int64_t rank_t = static_cast<int64_t>(tt.shape.size());
    if (axis != rank_t - 1) return false;
    for (size_t c : it->second) {
      const ir::Node& s = src_.nodes[c];
      if (s.inputs[0] != t) return false;
      if (is_reshape_like(s.op)) {
        const ir::Shape& so = src_.tensor(s.outputs[0]).shape;
        if (so.empty() || so.back() != tt.shape.back()) return false;
        if (!collect_cuts(s.outputs[0], static_cast<int>(so.size()) - 1, N, cuts)) return false;
        continue;
      }
      if (s.op == "split") {  // sizes along the axis: cuts at their running sums
        int64_t ax = s.attr_int("axis", 0);
        if ((ax < 0 ? ax + rank_t : ax) != axis) return false;
        int64_t at = 0;
        for (int64_t size : s.attr_ints("sizes")) cuts.insert(at += size);
        continue;
      }
      if (s.op != "slice" || !s.has_attr("axes") || s.attr_ints("axes").size() != 1) return false;
      int64_t ax = s.attr_ints("axes")[0];
      if ((ax < 0 ? ax + rank_t : ax) != axis) return false;
      if (s.has_attr("steps") && s.attr_ints("steps") != std::vector<int64_t>{1}) return false;
      const ir::Shape st = s.attr_shape("starts"), en = s.attr_shape("ends");
      if (!st[0].is_const() || !en[0].is_const()) return false;
      auto clampi = [N](int64_t v) { return std::clamp(v < 0 ? v + N : v, int64_t{0}, N); };
      cuts.insert(clampi(st[0].const_value()));
      cuts.insert(clampi(en[0].const_value()));
    }
    return true;
  }

  // A constant of the source graph (weights the pass may slice per rank).
  bool src_const(const std::string& t) const {
    return src_.has_tensor(t) && src_.tensor(t).kind == ir::TensorKind::constant && src_.constant_data.count(t);
  }

  int axis_of(const std::string& t) {
    if (undecided_.count(t)) decide_state(t, kRep);
    auto it = axis_.find(t);
    return it == axis_.end() ? kRep : it->second;
  }

  void decide_state(const std::string& s, int a) {
    undecided_.erase(s);
    axis_[s] = a;
    if (a != kRep) {
      ir::Tensor& t = out_.tensor(s);
      t.shape[static_cast<size_t>(a)] = ir::IntExpr(t.shape[static_cast<size_t>(a)].const_value() / W_);
    }
  }

  bool can_split(const std::string& t, int a) {
    if (a < 0 || a >= rank(t)) return false;
    if (undecided_.count(t)) return divisible(shape(t)[static_cast<size_t>(a)]);
    const ir::Tensor& tt = out_.tensor(t);
    if (axis_of(t) == a) return true;
    if (!divisible(tt.shape[static_cast<size_t>(a)])) return false;
    if (tt.quant && a == 1) return (tt.shape[1].const_value() / W_) % tt.quant->block_size == 0;
    return true;
  }

  // ---- layout changes ----------------------------------------------------------------------
  ir::Node make_node(const std::string& base, const std::string& op, std::vector<std::string> inputs, ir::Attrs attrs = {}) {
    ir::Node n;
    n.name = fresh(base);
    node_names_.insert(n.name);
    n.op = op;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    return n;
  }

  // Appends `n` to the graph; its outputs get the registry's inferred types and layout `a`.
  void emit(ir::Node n, int a) {
    std::vector<ops::TensorType> in;
    for (const auto& i : n.inputs) in.push_back({out_.tensor(i).dtype, out_.tensor(i).shape});
    auto types = ops::infer_node(n, in, dims_);
    if (n.outputs.empty() && !types.empty())
      for (size_t k = 0; k < types.size(); ++k) n.outputs.push_back(fresh(n.name + (k ? "_out" + std::to_string(k) : "_out")));
    for (size_t k = 0; k < types.size(); ++k) {
      ir::Tensor t;
      if (src_.has_tensor(n.outputs[k])) t = src_.tensor(n.outputs[k]);
      t.name = n.outputs[k];
      t.dtype = types[k].dtype;
      t.shape = types[k].shape;
      if (!src_.has_tensor(n.outputs[k])) t.kind = ir::TensorKind::intermediate;
      out_.tensors[t.name] = t;
      axis_[t.name] = a;
    }
    node_names_.insert(n.name);
    out_.nodes.push_back(std::move(n));
  }

  // `m` computes each rank's partial sum of `out`: emitted under a new name, then all_reduce
  // writes `out`.
  void emit_partial(ir::Node m, const std::string& out) {
    m.outputs = {fresh(out + ".partial")};
    std::string p = m.outputs[0];
    emit(std::move(m), kRep);
    ++report_.stats["all_reduce"];
    add(out + ".reduced", "all_reduce", {p}, {{"world_size", int64_t{W_}}}, kRep, out);
  }

  // A new one-output node; returns its output name.
  std::string add(const std::string& base, const std::string& op, std::vector<std::string> inputs, ir::Attrs attrs,
                  int a, const std::string& out_name = "") {
    ir::Node n = make_node(base, op, std::move(inputs), std::move(attrs));
    n.outputs = {out_name.empty() ? fresh(base) : out_name};
    std::string o = n.outputs[0];
    emit(std::move(n), a);
    return o;
  }

  std::string add_constant(const std::string& base, ir::DType dt, ir::Shape shp, std::vector<ir::ConstantBytes> per_rank) {
    ir::Tensor t;
    t.name = fresh(base);
    t.dtype = dt;
    t.shape = std::move(shp);
    t.kind = ir::TensorKind::constant;
    out_.tensors[t.name] = t;
    out_.constant_data[t.name] = per_rank[0];
    rank_data_[t.name] = std::move(per_rank);
    axis_[t.name] = kRep;
    return t.name;
  }

  // Each rank's bytes of constant `t` split along axis a. `sections` (offset, length) along the
  // axis are split separately (a fused q|k|v weight: rank r takes its part of each section);
  // empty = one section, the whole axis.
  std::vector<ir::ConstantBytes> slice_constant(const ir::Tensor& t, const ir::ConstantBytes& bytes, int a,
                                                const Sections& sections) {
    std::vector<int64_t> s;
    for (const auto& e : t.shape) s.push_back(e.const_value());
    int64_t outer = 1, inner = 1, ext = s[static_cast<size_t>(a)], unit = 1;
    for (int i = 0; i < a; ++i) outer *= s[static_cast<size_t>(i)];
    if (t.quant) {  // [N, K] rows of blocks
      const int64_t row = s[1] / t.quant->block_size * t.quant->block_bytes;
      if (a == 0) inner = row;
      else ext = s[1] / t.quant->block_size, inner = t.quant->block_bytes, unit = t.quant->block_size;
    } else {
      for (size_t i = static_cast<size_t>(a) + 1; i < s.size(); ++i) inner *= s[i];
      inner *= static_cast<int64_t>(ir::dtype_size(t.dtype));
    }
    Sections secs = sections.empty() ? Sections{{0, ext * unit}} : sections;
    std::vector<ir::ConstantBytes> out;
    for (int r = 0; r < W_; ++r) {
      auto v = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(outer * (ext / W_) * inner));
      uint8_t* dst = v->data();
      for (int64_t o = 0; o < outer; ++o)
        for (const auto& [off, len] : secs) {
          const int64_t piece = len / unit / W_, start = off / unit + r * piece;
          dst = std::copy_n(bytes->data() + (o * ext + start) * inner, piece * inner, dst);
        }
      out.push_back(std::move(v));
    }
    return out;
  }

  // Constant `c` (a source constant) split along axis a: under its own name the first time,
  // later layouts get their own copies.
  std::string split_constant(const std::string& c, int a, const Sections& sections = {}) {
    auto key = std::make_tuple(c, a, sections);
    if (auto it = split_const_.find(key); it != split_const_.end()) return it->second;
    const ir::Tensor& st = src_.tensor(c);
    auto per_rank = slice_constant(st, src_.constant_data.at(c), a, sections);
    std::string name = c;
    if (inplace_split_.count(c) || whole_.count(c)) {
      name = fresh(c + ".shard" + std::to_string(a));
      ir::Tensor t = st;
      t.name = name;
      out_.tensors[name] = t;
    } else {
      inplace_split_[c] = a;
    }
    ir::Tensor& t = out_.tensor(name);
    t.shape[static_cast<size_t>(a)] = ir::IntExpr(st.shape[static_cast<size_t>(a)].const_value() / W_);
    t.source.reset();  // the bytes are a slice now, not the file's tensor
    out_.constant_data[name] = per_rank[0];
    rank_data_[name] = std::move(per_rank);
    axis_[name] = kRep;  // each rank's tensor is what it computes with
    split_const_[key] = name;
    return name;
  }

  // `t` replicated on every rank (all_gather of a split tensor; the whole of a constant).
  std::string rep(const std::string& t) {
    if (is_const(t)) {
      auto it = inplace_split_.find(t);
      if (it == inplace_split_.end() || !src_.has_tensor(t)) return t;
      if (auto w = whole_.find(t); w != whole_.end()) return w->second;
      ir::Tensor wt = src_.tensor(t);
      wt.name = fresh(t + ".whole");
      out_.tensors[wt.name] = wt;
      out_.constant_data[wt.name] = src_.constant_data.at(t);
      axis_[wt.name] = kRep;
      whole_[t] = wt.name;
      return wt.name;
    }
    int a = axis_of(t);
    if (a == kRep) return t;
    auto key = std::make_pair(t, a);
    if (auto it = gathered_.find(key); it != gathered_.end()) return it->second;
    std::string g = add(t + ".gathered", "all_gather", {t}, {{"world_size", int64_t{W_}}, {"axis", int64_t{a}}}, kRep);
    ++report_.stats["all_gather"];
    gathered_[key] = g;
    return g;
  }

  // `t` split along axis a (call can_split first). A replicated activation is cut locally (a
  // gather of the rank's index range: no communication).
  std::string to_split(const std::string& t, int a) {
    if (undecided_.count(t)) {
      decide_state(t, a);
      return t;
    }
    int cur = axis_of(t);
    if (cur == a) return t;
    if (src_const(t) && cur == kRep)
      return split_constant(t, a);
    std::string r = rep(t);
    auto key = std::make_pair(r, a);
    if (auto it = local_.find(key); it != local_.end()) return it->second;
    const int64_t ext = shape(r)[static_cast<size_t>(a)].const_value(), piece = ext / W_;
    std::vector<ir::ConstantBytes> idx;
    for (int k = 0; k < W_; ++k) {
      auto v = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(piece) * sizeof(int64_t));
      for (int64_t i = 0; i < piece; ++i) {
        int64_t x = k * piece + i;
        std::copy_n(reinterpret_cast<const uint8_t*>(&x), sizeof x, v->data() + i * sizeof x);
      }
      idx.push_back(std::move(v));
    }
    std::string ic = add_constant(r + ".shard_index", ir::DType::i64, {ir::IntExpr(piece)}, std::move(idx));
    std::string o = add(r + ".shard", "gather", {r, ic}, {{"axis", int64_t{a}}}, a);
    local_[key] = o;
    return o;
  }

  // ---- per-op rules ------------------------------------------------------------------------
  // Emits `n` with every input replicated; outputs replicated.
  void replicated(const ir::Node& n, const std::string& why = "") {
    ir::Node m = n;
    bool had_split = false;
    for (auto& i : m.inputs) {
      had_split |= !is_const(i) && axis_of(i) != kRep;
      i = rep(i);
    }
    if (had_split && !why.empty()) report_.replicated.push_back("'" + n.name + "' (" + n.op + "): " + why);
    emit(std::move(m), kRep);
  }

  void shard_node(const ir::Node& n) {
    const ops::OpDef* def = ops::Registry::global().find(n.op);
    if (n.op == "output") return replicated(n);
    if (n.op == "state_assign") return state_assign(n);
    if (n.op == "kv_cache_write") return kv_cache_write(n);
    if (auto v = ops::gemm_variant(n.op)) return v->batched ? bmm(n, *v) : gemm(n, *v);
    if (n.op == "embedding") return embedding(n);
    if (def && def->elementwise) return elementwise(n);
    // From here on: ops with one data input whose split passes through when the op does not mix
    // the split axis.
    bool any_split = false;
    for (const auto& i : n.inputs) any_split |= !is_const(i) && !undecided_.count(i) && axis_of(i) != kRep;
    if (!any_split) return replicated(n);
    if (is_reshape_like(n.op)) return reshape(n);
    if (n.op == "permute" || n.op == "transpose") return permute(n);
    if (n.op == "expand") return expand(n);
    if (n.op == "slice") return slice(n);
    if (n.op == "concatenate") return concatenate(n);
    if (n.op == "split") return split(n);
    if (n.op == "rms_norm" || n.op == "layer_norm") return norm(n);
    if (n.op == "softmax" || n.op == "log_softmax") return softmax(n);
    if (n.op.rfind("reduce_", 0) == 0) return reduce(n);
    if (n.op == "gather") return gather(n);
    if (n.op == "scaled_dot_product_attention") return attention(n);
    replicated(n, "no tensor-parallel rule for this op");
  }

  // Output axis of input i's axis a under right-aligned broadcasting to rank R.
  void elementwise(const ir::Node& n) {
    const int R = static_cast<int>(src_.tensor(n.outputs[0]).shape.size());
    int cand = kRep;
    for (const auto& i : n.inputs) {
      int a = axis_of(i);
      if (a == kRep || is_const(i)) continue;
      int oa = a + R - rank(i);
      if (cand == kRep) cand = oa;
      else if (cand != oa) return replicated(n, "inputs split along different axes");
    }
    if (cand == kRep) return replicated(n);
    ir::Node m = n;
    for (auto& i : m.inputs) {
      int j = cand - (R - rank(i));
      if (broadcasts(i, j)) {
        i = rep(i);
        continue;
      }
      if (!can_split(i, j)) return replicated(n, "input '" + i + "' cannot be split along axis " + std::to_string(j));
      // A replicated activation (the residual stream) meets a split one: gather the split one
      // rather than cutting the stream, which later ops would have to gather again.
      if (!is_const(i) && axis_of(i) == kRep) return replicated(n);
    }
    for (auto& i : m.inputs) {
      int j = cand - (R - rank(i));
      if (!broadcasts(i, j)) i = to_split(i, j);
    }
    emit(std::move(m), cand);
  }

  void gemm(const ir::Node& n, const ops::GemmVariant& v) {
    const std::string& a = n.inputs[0];
    const std::string& b = n.inputs[1];
    const int ra = rank(a), sa = axis_of(a);
    const int n_axis = v.b_is_nk ? 0 : 1, k_axis = 1 - n_axis;
    const bool b_const = src_const(b);
    ir::Node m = n;
    if (b_const && sa == kRep && can_split(b, n_axis)) {  // column-parallel
      const int oa = static_cast<int>(src_.tensor(n.outputs[0]).shape.size()) - 1;
      if (v.residual && !can_split(n.inputs.back(), oa)) return replicated(n, "residual cannot be split");
      Sections secs = sections_of(n.outputs[0], oa);
      if (!secs.empty()) {  // a fused projection (q|k|v, gate|up): each section split on its own
        m.inputs[1] = split_constant(b, n_axis, secs);
        if (v.bias) {
          if (!src_const(n.inputs[2])) return replicated(n, "bias of a fused projection is not a constant");
          m.inputs[2] = split_constant(n.inputs[2], 0, secs);
        }
        if (v.residual) return replicated(n, "residual on a fused projection");
        sectioned_[n.outputs[0]] = secs;
        ++report_.stats["column_gemms"];
        return emit(std::move(m), oa);
      }
      m.inputs[1] = to_split(b, n_axis);
      if (v.bias) m.inputs[2] = to_split(n.inputs[2], 0);
      if (v.residual) m.inputs.back() = to_split(n.inputs.back(), oa);
      ++report_.stats["column_gemms"];
      return emit(std::move(m), oa);
    }
    if (b_const && sa == ra - 1 && can_split(b, k_axis)) {  // row-parallel: partial sums
      ops::GemmVariant plain{false, v.b_is_nk, false, false, ops::GemmAct::none};
      std::string y = add(n.outputs[0] + ".partial", *ops::gemm_op_name(plain), {a, to_split(b, k_axis)}, {}, kRep);
      ++report_.stats["row_gemms"];
      ++report_.stats["all_reduce"];
      const bool last_is_reduce = !v.bias && !v.residual && v.act == ops::GemmAct::none;
      y = add(n.outputs[0] + ".reduced", "all_reduce", {y}, {{"world_size", int64_t{W_}}}, kRep,
              last_is_reduce ? n.outputs[0] : "");
      if (v.bias)
        y = add(n.outputs[0] + ".bias", "add", {y, rep(n.inputs[2])}, {}, kRep,
                !v.residual && v.act == ops::GemmAct::none ? n.outputs[0] : "");
      if (v.residual)
        y = add(n.outputs[0] + ".residual", "add", {y, rep(n.inputs.back())}, {}, kRep,
                v.act == ops::GemmAct::none ? n.outputs[0] : "");
      if (const char* act = act_op(v.act)) add(n.outputs[0] + ".act", act, {y}, {}, kRep, n.outputs[0]);
      return;
    }
    if (sa != kRep && sa < ra - 1 && (b_const || axis_of(b) == kRep)) {  // rows split: data parallel
      if (v.residual && !can_split(n.inputs.back(), sa)) return replicated(n, "residual cannot be split");
      m.inputs[1] = rep(b);
      if (v.bias) m.inputs[2] = rep(n.inputs[2]);
      if (v.residual) m.inputs.back() = to_split(n.inputs.back(), sa);
      return emit(std::move(m), sa);
    }
    replicated(n, b_const ? "the weight's N or K does not divide by the world size" : "weight is not a constant");
  }

  void bmm(const ir::Node& n, const ops::GemmVariant& v) {
    const std::string &a = n.inputs[0], &b = n.inputs[1];
    const int ra = rank(a), rb = rank(b), R = static_cast<int>(src_.tensor(n.outputs[0]).shape.size());
    int sa = axis_of(a), sb = axis_of(b);
    if (is_const(a)) sa = kRep;
    if (is_const(b)) sb = kRep;
    const int bk = v.b_is_nk ? rb - 1 : rb - 2, bn = v.b_is_nk ? rb - 2 : rb - 1;
    ir::Node m = n;
    // Batch axes (right-aligned) split alike on both operands.
    int batch = kRep;
    if (sa != kRep && sa < ra - 2) batch = sa + R - ra;
    else if (sb != kRep && sb < rb - 2) batch = sb + R - rb;
    if (batch != kRep) {
      for (size_t k = 0; k < 2; ++k) {
        const std::string& t = n.inputs[k];
        int j = batch - (R - rank(t));
        if (broadcasts(t, j)) {
          m.inputs[k] = rep(t);
        } else {
          if (!can_split(t, j)) return replicated(n, "operand '" + t + "' cannot be split along its batch axis");
          m.inputs[k] = to_split(t, j);
        }
      }
      return emit(std::move(m), batch);
    }
    if (sa == ra - 2 && sb == kRep) {  // rows of a
      m.inputs[1] = rep(b);
      return emit(std::move(m), R - 2);
    }
    if (sa == kRep && (sb == bn || (sb == kRep && src_const(b) && can_split(b, bn)))) {  // columns of b
      m.inputs[0] = rep(a);
      m.inputs[1] = to_split(b, bn);
      return emit(std::move(m), R - 1);
    }
    if (sa == ra - 1 && (sb == bk || (sb == kRep && can_split(b, bk)))) {  // K split: partial sums
      m.inputs[1] = to_split(b, bk);
      return emit_partial(std::move(m), n.outputs[0]);
    }
    replicated(n, "operands split along axes that do not match");
  }

  // Vocabulary-parallel embedding: rank r holds rows [r·V/W, (r+1)·V/W); ids outside give zero
  // rows and all_reduce adds the ranks' rows.
  void embedding(const ir::Node& n) {
    const std::string &ids = n.inputs[0], &table = n.inputs[1];
    const bool table_const = src_const(table);
    if (!table_const || !can_split(table, 0) || rank(table) != 2) {
      int s = axis_of(ids);
      if (s != kRep && axis_of(table) == kRep) {  // ids split: rows follow
        ir::Node m = n;
        m.inputs[1] = rep(table);
        return emit(std::move(m), s);
      }
      return replicated(n, "the table is not a constant whose rows divide by the world size");
    }
    const std::string id = rep(ids);
    const ir::DType idt = out_.tensor(id).dtype;
    const int64_t piece = shape(table)[0].const_value() / W_;
    std::vector<ir::ConstantBytes> offs;
    for (int r = 0; r < W_; ++r) {
      const int64_t o = r * piece;
      auto v = std::make_shared<std::vector<uint8_t>>(ir::dtype_size(idt));
      if (idt == ir::DType::i64) std::copy_n(reinterpret_cast<const uint8_t*>(&o), 8, v->data());
      else {
        const int32_t o32 = static_cast<int32_t>(o);
        std::copy_n(reinterpret_cast<const uint8_t*>(&o32), 4, v->data());
      }
      offs.push_back(std::move(v));
    }
    const std::string base = n.outputs[0];
    std::string off = add_constant(table + ".vocab_offset", idt, {ir::IntExpr(1)}, std::move(offs));
    std::string local = add(base + ".local_ids", "sub", {id, off}, {}, kRep);
    std::string clamped = add(base + ".clamped_ids", "clamp", {local},
                              {{"min", 0.0}, {"max", static_cast<double>(piece - 1)}}, kRep);
    std::string hit = add(base + ".in_shard", "eq", {local, clamped}, {}, kRep);
    std::string rows = add(base + ".shard_rows", "embedding", {clamped, split_constant(table, 0)}, {}, kRep);
    std::string w = add(base + ".in_shard_f", "cast", {hit}, {{"dtype", std::string(ir::dtype_name(out_.tensor(rows).dtype))}}, kRep);
    w = add(base + ".in_shard_col", "unsqueeze", {w}, {{"axes", std::vector<int64_t>{rank(w)}}}, kRep);
    std::string masked = add(base + ".masked_rows", "mul", {rows, w}, {}, kRep);
    add(base + ".reduced", "all_reduce", {masked}, {{"world_size", int64_t{W_}}}, kRep, n.outputs[0]);
    ++report_.stats["vocab_embeddings"];
    ++report_.stats["all_reduce"];
  }

  void state_assign(const ir::Node& n) {
    const std::string &s = n.inputs[0], &v = n.inputs[1];
    ir::Node m = n;
    int sv = axis_of(v);
    if (undecided_.count(s)) decide_state(s, sv != kRep && can_split(s, sv) ? sv : kRep);
    int ss = axis_of(s);
    if (ss == kRep) m.inputs[1] = rep(v);
    else if (sv != ss) {
      if (!can_split(v, ss)) throw IrError("shard_tensor_parallel: state '" + s + "' is split but '" + v + "' cannot be");
      m.inputs[1] = to_split(v, ss);
    }
    emit(std::move(m), kRep);
  }

  void kv_cache_write(const ir::Node& n) {
    const std::string &c = n.inputs[0], &v = n.inputs[1], &p = n.inputs[2];
    const int r = rank(c);
    int sv = undecided_.count(v) ? kRep : axis_of(v);
    if (undecided_.count(c)) decide_state(c, sv != kRep && sv < r - 2 && can_split(c, sv) ? sv : kRep);
    int sc = axis_of(c);
    ir::Node m = n;
    m.inputs[2] = rep(p);
    if (sc == kRep) {
      m.inputs[0] = c;
      m.inputs[1] = rep(v);
      if (sv != kRep) report_.replicated.push_back("'" + n.name + "' (kv_cache_write): the cache is replicated");
      return emit(std::move(m), kRep);
    }
    if (sv != sc) {
      if (!can_split(v, sc)) throw IrError("shard_tensor_parallel: cache '" + c + "' is split but '" + v + "' cannot be");
      m.inputs[1] = to_split(v, sc);
    }
    emit(std::move(m), sc);
  }

  // Maps a split axis through a reshape: equal leading / trailing extents map one to one; the
  // first axis of the reshaped middle maps to the first axis of the new middle when both divide.
  void reshape(const ir::Node& n) {
    const std::string& x = n.inputs[0];
    const int a = axis_of(x);
    const ir::Shape& si = src_.tensor(x).shape;
    const ir::Shape& so = src_.tensor(n.outputs[0]).shape;
    const int li = static_cast<int>(si.size()), lo = static_cast<int>(so.size());
    int p = 0, s = 0;
    while (p < std::min(li, lo) && si[static_cast<size_t>(p)] == so[static_cast<size_t>(p)]) ++p;
    while (s < std::min(li, lo) - p && si[static_cast<size_t>(li - 1 - s)] == so[static_cast<size_t>(lo - 1 - s)]) ++s;
    int oa = -1;
    if (a < p) oa = a;
    else if (a >= li - s) oa = a - li + lo;
    else if (a == p && p < lo - s && divisible(so[static_cast<size_t>(p)])) oa = p;
    if (oa < 0) return replicated(n, "the reshape mixes the split axis with others");
    if (auto sec = sectioned_.find(x); sec != sectioned_.end() && oa == lo - 1)
      sectioned_[n.outputs[0]] = sec->second;  // a view of a fused projection keeps its sections
    ir::Node m = n;
    if (n.op == "reshape") {
      ir::Shape target = so;
      target[static_cast<size_t>(oa)] = ir::IntExpr(so[static_cast<size_t>(oa)].const_value() / W_);
      m.attrs["shape"] = target;
    } else if (n.op == "squeeze" && !n.has_attr("axes")) {
      std::vector<int64_t> axes;
      for (int i = 0; i < li; ++i)
        if (is_one(si[static_cast<size_t>(i)])) axes.push_back(i);
      m.attrs["axes"] = axes;
    }
    emit(std::move(m), oa);
  }

  void permute(const ir::Node& n) {
    const int a = axis_of(n.inputs[0]);
    int oa = a;
    if (n.op == "transpose") {
      const int r = rank(n.inputs[0]);
      int d0 = static_cast<int>(n.attr_int("dim0")), d1 = static_cast<int>(n.attr_int("dim1"));
      d0 = d0 < 0 ? d0 + r : d0;
      d1 = d1 < 0 ? d1 + r : d1;
      oa = a == d0 ? d1 : a == d1 ? d0 : a;
    } else {
      const auto& d = n.attr_ints("dims");
      const int r = rank(n.inputs[0]);
      for (size_t j = 0; j < d.size(); ++j)
        if ((d[j] < 0 ? d[j] + r : d[j]) == a) oa = static_cast<int>(j);
    }
    emit(n, oa);
  }

  void expand(const ir::Node& n) {
    const int a = axis_of(n.inputs[0]);
    const int R = static_cast<int>(src_.tensor(n.outputs[0]).shape.size());
    const int oa = a + R - rank(n.inputs[0]);
    ir::Node m = n;
    ir::Shape target = n.attr_shape("shape");
    target[static_cast<size_t>(oa)] = ir::IntExpr(-1);
    m.attrs["shape"] = target;
    emit(std::move(m), oa);
  }

  void slice(const ir::Node& n) {
    const std::string& x = n.inputs[0];
    const int a = axis_of(x);
    if (sectioned_.count(x)) {  // a section of a fused projection: its rank part, at offset / W
      const int64_t N = src_.tensor(x).shape[static_cast<size_t>(a)].const_value();
      auto scaled = [&](const ir::IntExpr& e) {
        int64_t v = e.const_value();
        return ir::IntExpr(std::clamp(v < 0 ? v + N : v, int64_t{0}, N) / W_);
      };
      ir::Node m = n;
      m.attrs["starts"] = ir::Shape{scaled(n.attr_shape("starts")[0])};
      m.attrs["ends"] = ir::Shape{scaled(n.attr_shape("ends")[0])};
      return emit(std::move(m), a);
    }
    const ir::Shape& si = src_.tensor(x).shape;
    const ir::Shape& so = src_.tensor(n.outputs[0]).shape;
    if (si[static_cast<size_t>(a)] != so[static_cast<size_t>(a)])
      return replicated(n, "the slice cuts the split axis");
    // The split axis is kept whole: drop it from the slice so that each rank keeps its piece.
    ir::Node m = n;
    std::vector<int64_t> axes;
    if (n.has_attr("axes")) axes = n.attr_ints("axes");
    else for (size_t i = 0; i < n.attr_shape("starts").size(); ++i) axes.push_back(static_cast<int64_t>(i));
    for (auto& ax : axes) if (ax < 0) ax += rank(x);
    auto it = std::find(axes.begin(), axes.end(), a);
    if (it != axes.end()) {
      size_t k = static_cast<size_t>(it - axes.begin());
      ir::Shape st = n.attr_shape("starts"), en = n.attr_shape("ends");
      st.erase(st.begin() + static_cast<long>(k));
      en.erase(en.begin() + static_cast<long>(k));
      axes.erase(it);
      m.attrs["starts"] = st;
      m.attrs["ends"] = en;
      m.attrs["axes"] = axes;
      if (n.has_attr("steps")) {
        auto steps = n.attr_ints("steps");
        steps.erase(steps.begin() + static_cast<long>(k));
        m.attrs["steps"] = steps;
      }
      if (axes.empty()) {  // nothing left to slice
        m.op = "reshape";
        m.attrs.clear();
        ir::Shape target = so;
        target[static_cast<size_t>(a)] = ir::IntExpr(so[static_cast<size_t>(a)].const_value() / W_);
        m.attrs["shape"] = target;
      }
    }
    emit(std::move(m), a);
  }

  void concatenate(const ir::Node& n) {
    const int R = rank(n.inputs[0]);
    int cat = static_cast<int>(n.attr_int("axis", 0));
    if (cat < 0) cat += R;
    int cand = kRep;
    for (const auto& i : n.inputs)
      if (!is_const(i) && axis_of(i) != kRep) {
        if (cand == kRep) cand = axis_of(i);
        else if (cand != axis_of(i)) return replicated(n, "inputs split along different axes");
      }
    if (cand == cat) return replicated(n, "concatenation along the split axis");
    for (const auto& i : n.inputs)
      if (!can_split(i, cand)) return replicated(n, "input '" + i + "' cannot be split");
    ir::Node m = n;
    for (auto& i : m.inputs) i = to_split(i, cand);
    emit(std::move(m), cand);
  }

  void split(const ir::Node& n) {
    const int a = axis_of(n.inputs[0]);
    int ax = static_cast<int>(n.attr_int("axis", 0));
    if (ax < 0) ax += rank(n.inputs[0]);
    if (sectioned_.count(n.inputs[0])) {  // the sections of a fused projection: each rank's parts
      ir::Node m = n;
      std::vector<int64_t> sizes = n.attr_ints("sizes");
      for (auto& v : sizes) v /= W_;
      m.attrs["sizes"] = sizes;
      return emit(std::move(m), a);
    }
    if (a == ax) return replicated(n, "split along the split axis");
    emit(n, a);
  }

  void norm(const ir::Node& n) {
    const std::string& x = n.inputs[0];
    const int a = axis_of(x), r = rank(x);
    const int k = n.op == "rms_norm" ? 1 : static_cast<int>(n.attr_int("normalized_ndim", n.inputs.size() > 1 ? rank(n.inputs[1]) : 1));
    if (a >= r - k) return replicated(n, "the split axis is normalized");
    ir::Node m = n;
    for (size_t i = 1; i < m.inputs.size(); ++i) m.inputs[i] = rep(m.inputs[i]);
    emit(std::move(m), a);
  }

  void softmax(const ir::Node& n) {
    const int a = axis_of(n.inputs[0]), r = rank(n.inputs[0]);
    int ax = static_cast<int>(n.attr_int("axis", -1));
    if (ax < 0) ax += r;
    if (a == ax) return replicated(n, "softmax over the split axis");
    emit(n, a);
  }

  void reduce(const ir::Node& n) {
    const std::string& x = n.inputs[0];
    const int a = axis_of(x), r = rank(x);
    std::vector<int64_t> axes;
    if (n.has_attr("axes")) axes = n.attr_ints("axes");
    if (axes.empty()) for (int i = 0; i < r; ++i) axes.push_back(i);
    for (auto& ax : axes) if (ax < 0) ax += r;
    const bool keep = n.attr_bool("keepdim", false);
    if (std::find(axes.begin(), axes.end(), a) == axes.end()) {
      int oa = a;
      if (!keep) for (auto ax : axes) oa -= ax < a;
      return emit(n, oa);
    }
    if (n.op == "reduce_sum") {  // partial sums
      return emit_partial(n, n.outputs[0]);
    }
    replicated(n, "reduction over the split axis");
  }

  void gather(const ir::Node& n) {
    const std::string &x = n.inputs[0], &idx = n.inputs[1];
    int ax = static_cast<int>(n.attr_int("axis", 0));
    if (ax < 0) ax += rank(x);
    const int sx = is_const(x) ? kRep : axis_of(x), si = axis_of(idx);
    ir::Node m = n;
    if (sx != kRep && sx != ax && si == kRep) return emit(n, sx < ax ? sx : sx + rank(idx) - 1);
    if (sx == kRep && si != kRep) {
      m.inputs[0] = rep(x);
      return emit(std::move(m), ax + si);
    }
    replicated(n, "gather along the split axis");
  }

  void attention(const ir::Node& n) {
    const int R = rank(n.inputs[0]);
    int cand = kRep;
    for (size_t k = 0; k < std::min<size_t>(3, n.inputs.size()); ++k) {
      int a = axis_of(n.inputs[k]);
      if (a == kRep) continue;
      int oa = a + R - rank(n.inputs[k]);
      if (a >= rank(n.inputs[k]) - 2) return replicated(n, "q/k/v split along a row or feature axis");
      if (cand == kRep) cand = oa;
      else if (cand != oa) return replicated(n, "q, k and v split along different axes");
    }
    ir::Node m = n;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const std::string& t = n.inputs[k];
      int j = cand - (R - rank(t));
      if (broadcasts(t, j)) {
        m.inputs[k] = rep(t);
        continue;
      }
      if (!can_split(t, j)) return replicated(n, "input '" + t + "' cannot be split along the head axis");
    }
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      int j = cand - (R - rank(n.inputs[k]));
      if (!broadcasts(n.inputs[k], j)) m.inputs[k] = to_split(n.inputs[k], j);
    }
    emit(std::move(m), cand);
  }
};

}  // namespace

std::vector<ir::Graph> shard_tensor_parallel(const ir::Graph& g, int world_size, ShardReport* report) {
  if (world_size < 1) throw IrError("tensor parallel: world size " + std::to_string(world_size) + " must be >= 1");
  if (world_size == 1) {
    if (report) *report = {};
    return {g};
  }
  return Sharder(g, world_size).run(report);
}

}  // namespace dinoml::passes
