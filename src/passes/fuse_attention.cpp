// fuse_attention: attention written as separate ops (ONNX exports, hand-written graphs)
//   s = bmm_rrr(q [· c], kᵀ) | bmm_rcr(q [· c], k)     scores, q optionally scaled by a scalar c
//   s = s · c | s / c                                  (optional) scale on the scores
//   s = s + mask                                       (optional) additive mask, broadcasting
//     | where(cond, s, f) | where(cond, f, s)          or a where mask with a constant fill f,
//     | where(cond, s, f) + mask                       also with an additive mask after it (A,
//     | where(cond, s + mask, f)                       GPT-2) or inside it (B); f may lead there too
//   y = bmm_rrr(softmax(s, last axis), v)
// becomes one scaled_dot_product_attention(q, k, v[, mask], scale = product of the c's), whose
// kernels stream over keys instead of writing the [Lq, Lk] scores and reading them back twice.
// With bmm_rrr the kᵀ operand is turned back into k by a permute of its last two axes, composed
// with the permute that produced kᵀ when there is one (so a head permute stays one permute, which
// stride_attention_operands can then turn into a strided view).
// A where mask (HF-style exports: masked_fill(~mask, finfo.min), torch.where) becomes the
// additive mask where(cond, 0, f) (where(cond, f, 0) for the swapped form; a constant when cond
// is one) of cond's shape and the scores' dtype, when f is a constant holding one value that is
// -inf or <= -1e30: in fp32 s + f == f exactly for every |s| < 2^75 ≈ 3.8e22 (half an ulp of
// 1e30) and s + -inf == -inf, so the softmax is unchanged, fully masked rows included (uniform
// for a finite f, NaN for -inf). A larger fill (-1e4, -1e9) is left alone: s + f != f there.
// With an additive mask m as well (HF GPT-2: the causal where, then + attention_mask) the sdpa
// gets one combined mask, of the broadcast of cond's and m's shapes (so it broadcasts to the
// scores and is never larger; [B, 1, L, L] for a [1, 1, L, L] causal cond and a [B, 1, 1, L] m):
//   A: where(cond, s, f) + m  ->  where(cond, 0, f) + m. Kept: fl(s + fl(0 + m)) == fl(s + m);
//      masked: the original fl(f + m) does not depend on s, the fused fl(s + fl(f + m)) equals it
//      as |fl(f + m)| >= |f| (m <= 0: padding masks are 0 / finfo.min) or is ±inf / NaN, also when
//      f + m overflows (finfo.min + finfo.min = -inf in both). A key that only m masks gives
//      fl(s + finfo.min) == finfo.min in both, so a row whose kept keys are all padded is uniform
//      over them in both, and a row of -inf only is NaN in both. (A huge positive m, above ~2^98,
//      that cancels part of f would differ, as would scores of |s| >= 2^75: real masks have
//      neither.)
//   B: where(cond, s + m, f)  ->  where(cond, m, f): kept fl(s + m), masked f == fl(s + f) exactly.
// A runtime m (or cond) leaves a where / add node building the mask, which fuse_elementwise merges
// with m's and cond's own elementwise chains; with every input constant it is folded right away.
// An additive mask both inside and after the where is left unfused.
// Fuses only when every intermediate (scaled q, scores, probabilities, masked scores, s + m, the
// where before + m) is an intermediate read by the next op alone (m and cond themselves may have
// other readers: every layer reads the model's attention mask), q, k and v share their rank and
// batch extents (no broadcast between them), the scalars are constants with a positive product,
// and the masks (and cond) have the scores' dtype (cond: bool) and broadcast to them without
// growing them. Anything else is left as it is.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ops/interpreter.h"
#include "passes/pass_util.h"
#include "passes/pass.h"

namespace dinoml::passes {
namespace {

struct Match {
  size_t softmax = 0, scores_bmm = 0, out_bmm = 0;
  // mask: the additive mask; with a where mask, the one added after the where (form A), if any.
  std::string q, k_source, v, mask;
  // A where mask: where(where_cond, kept, fill) (where(where_cond, fill, kept) when fill_if_true),
  // kept = where_kept (the mask added to the scores inside the where, form B) or 0; the sdpa's
  // mask is that [+ mask], built by apply().
  std::string where_cond, where_kept;
  double where_fill = 0.0;
  bool fill_if_true = false;
  std::optional<std::vector<int64_t>> k_perm;  // k = permute(k_source, k_perm); none: k_source is k
  double scale = 1.0;
};

class AttentionFuser {
 public:
  explicit AttentionFuser(ir::Graph& g) : g_(g) {}

  std::optional<Match> find() {
    producers_ = g_.producers();
    consumers_ = g_.consumers();
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (auto m = match(i)) return m;
    return std::nullopt;
  }

  void apply(const Match& m) {
    const ir::Node out = g_.nodes[m.out_bmm];
    std::string k = m.k_source;
    std::vector<ir::Node> inserted;
    if (m.k_perm) {
      const ir::Tensor& src = g_.tensor(m.k_source);
      ir::Tensor kt;
      kt.name = g_.unique_name(out.name + "_k");
      kt.dtype = src.dtype;
      for (int64_t d : *m.k_perm) kt.shape.push_back(src.shape[static_cast<size_t>(d)]);
      g_.add_tensor(kt);
      ir::Node p;
      p.name = kt.name;
      p.op = "permute";
      p.inputs = {m.k_source};
      p.outputs = {kt.name};
      p.attrs["dims"] = *m.k_perm;
      inserted.push_back(std::move(p));
      k = kt.name;
    }
    std::string mask = m.mask;
    if (!m.where_cond.empty()) {
      mask = add_where_mask(m, out.name, inserted);
      if (!m.mask.empty()) mask = add_mask_node("add", {mask, m.mask}, out.name + "_mask", inserted);
    }
    ir::Node sdpa;
    sdpa.name = out.name;
    sdpa.op = "scaled_dot_product_attention";
    sdpa.inputs = {m.q, k, m.v};
    if (!mask.empty()) sdpa.inputs.push_back(mask);
    sdpa.outputs = out.outputs;
    sdpa.attrs["scale"] = m.scale;
    inserted.push_back(std::move(sdpa));
    // The new nodes take the output bmm's slot: q, k's source, v, the mask and cond all exist by then.
    g_.nodes.erase(g_.nodes.begin() + static_cast<std::ptrdiff_t>(m.out_bmm));
    g_.nodes.insert(g_.nodes.begin() + static_cast<std::ptrdiff_t>(m.out_bmm), inserted.begin(), inserted.end());
  }

 private:
  // where(cond, kept, fill) (or where(cond, fill, kept)), kept = m.where_kept or 0, of the broadcast
  // of cond's and kept's shapes and the scores' dtype; 0 and fill are rank-0 constants. Returns
  // its name (a constant when cond and kept are: a causal tril buffer).
  std::string add_where_mask(const Match& m, const std::string& base, std::vector<ir::Node>& inserted) {
    const ir::DType dt = g_.tensor(g_.nodes[m.softmax].inputs[0]).dtype;
    ops::HostTensor fill(dt, {});
    fill.set_f64(0, m.where_fill);
    const std::string f = pass_util::add_constant(g_, base + "_mask_fill", fill);
    std::string kept = m.where_kept;
    if (kept.empty()) kept = pass_util::add_constant(g_, base + "_mask_zero", ops::HostTensor(dt, {}));
    return add_mask_node("where", m.fill_if_true ? std::vector<std::string>{m.where_cond, f, kept}
                                                 : std::vector<std::string>{m.where_cond, kept, f},
                         base + "_mask", inserted);
  }

  // A new elementwise node `op`(inputs) whose output (named after `base`) has the broadcast of the
  // inputs' shapes (each broadcasts to the scores, so that does too, no larger than the scores)
  // and the dtype of the last input: appended to `inserted`, or, when every input is a constant of
  // a static shape and the result is at most 64 MiB, evaluated into a constant right away with the
  // reference interpreter (fold_constants has run already). Returns the output's name.
  std::string add_mask_node(const std::string& op, const std::vector<std::string>& inputs, const std::string& base,
                            std::vector<ir::Node>& inserted) {
    ir::Tensor t;
    t.name = g_.unique_name(base);
    t.dtype = g_.tensor(inputs.back()).dtype;
    for (const auto& in : inputs) t.shape = broadcast_within(t.shape, g_.tensor(in).shape);
    ir::Node n;
    n.name = t.name;
    n.op = op;
    n.inputs = inputs;
    n.outputs = {t.name};
    bool fold = ir::shape_is_static(t.shape);
    if (fold) {
      uint64_t bytes = ir::dtype_size(t.dtype);
      for (const auto& e : t.shape) bytes *= static_cast<uint64_t>(e.const_value());
      fold = bytes <= (64ull << 20);
    }
    for (const auto& in : inputs) {
      const ir::Tensor& it = g_.tensor(in);
      fold = fold && pass_util::is_const_tensor(g_, in) && !it.quant && ir::shape_is_static(it.shape);
    }
    g_.add_tensor(t);
    if (!fold) {
      inserted.push_back(std::move(n));
      return t.name;
    }
    std::vector<ops::HostTensor> held;
    for (const auto& in : inputs) held.push_back(ops::constant_tensor(g_, in));
    std::vector<const ops::HostTensor*> ptrs;
    for (const auto& h : held) ptrs.push_back(&h);
    auto outs = ops::run_node(n, ptrs, g_, {});
    g_.tensor(t.name).kind = ir::TensorKind::constant;
    g_.constant_data[t.name] = std::make_shared<const std::vector<uint8_t>>(std::move(outs.at(0).data));
    return t.name;
  }

  // The NumPy broadcast of a and b when both broadcast to one shape (each extent equal to the
  // other's or a constant 1): a 1 takes the other's extent.
  static ir::Shape broadcast_within(const ir::Shape& a, const ir::Shape& b) {
    ir::Shape out(std::max(a.size(), b.size()), ir::IntExpr(int64_t{1}));
    for (size_t i = 0; i < out.size(); ++i) {
      const ir::IntExpr* ea = i < a.size() ? &a[a.size() - 1 - i] : nullptr;
      const ir::IntExpr* eb = i < b.size() ? &b[b.size() - 1 - i] : nullptr;
      const bool a_one = !ea || (ea->is_const() && ea->const_value() == 1);
      out[out.size() - 1 - i] = a_one ? (eb ? *eb : ir::IntExpr(int64_t{1})) : *ea;
    }
    return out;
  }

  // The node producing `t` when `t` is an intermediate read once by exactly one node.
  std::optional<size_t> sole_producer(const std::string& t) {
    if (pass_util::single_consumer(g_, consumers_, t) < 0) return std::nullopt;
    auto p = producers_.find(t);
    if (p == producers_.end()) return std::nullopt;
    return p->second;
  }

  // The value of a constant scalar (one element), if `t` is one.
  std::optional<double> scalar(const std::string& t) {
    const ir::Tensor& tt = g_.tensor(t);
    if (tt.kind != ir::TensorKind::constant || tt.quant || !g_.constant_data.count(t)) return std::nullopt;
    for (const auto& d : tt.shape)
      if (!d.is_const() || d.const_value() != 1) return std::nullopt;
    if (!ir::is_float(tt.dtype)) return std::nullopt;
    return pass_util::read_constant(g_, t).get_f64(0);
  }

  // The one value every element of the float constant `t` holds, if it holds one value.
  std::optional<double> uniform_constant(const std::string& t) {
    const ir::Tensor& tt = g_.tensor(t);
    if (tt.kind != ir::TensorKind::constant || tt.quant || !g_.constant_data.count(t) || !ir::is_float(tt.dtype))
      return std::nullopt;
    for (const auto& d : tt.shape)
      if (!d.is_const()) return std::nullopt;
    const ops::HostTensor h = pass_util::read_constant(g_, t);
    if (h.numel() < 1) return std::nullopt;
    const double v = h.get_f64(0);
    for (int64_t i = 1; i < h.numel(); ++i)
      if (!(h.get_f64(i) == v)) return std::nullopt;
    return v;
  }

  struct WhereMask {
    std::string scores, cond;
    double fill = 0.0;
    bool fill_if_true = false;
  };

  // Scores masked as sum = where(cond, sc, f) (or where(cond, f, sc)) with a constant fill f for
  // which sc + f == f: sc, cond and f, else nothing.
  std::optional<WhereMask> where_masked(const ir::Node& w) {
    if (w.op != "where" || w.inputs.size() != 3 || w.outputs.size() != 1 || !w.attrs.empty()) return std::nullopt;
    const ir::Tensor& sum = g_.tensor(w.outputs[0]);
    const std::string& cond = w.inputs[0];
    const ir::Tensor& ct = g_.tensor(cond);
    if (!ir::is_bool(ct.dtype) || !ir::broadcasts_to(ct.shape, sum.shape)) return std::nullopt;
    for (int fill_side = 2; fill_side >= 1; --fill_side) {  // where(cond, sc, f), then where(cond, f, sc)
      const std::string& f = w.inputs[static_cast<size_t>(fill_side)];
      const std::string& sc = w.inputs[static_cast<size_t>(3 - fill_side)];
      const ir::Tensor &sct = g_.tensor(sc), &ft = g_.tensor(f);
      if (sct.shape != sum.shape || sct.dtype != sum.dtype || ft.dtype != sum.dtype ||
          !ir::broadcasts_to(ft.shape, sum.shape))
        continue;
      auto v = uniform_constant(f);
      // -inf, or so far below any score that adding the score does not change it (see the top).
      if (!v || !(*v <= -1e30)) continue;
      return WhereMask{sc, cond, *v, fill_side == 1};
    }
    return std::nullopt;
  }

  static bool is_scores_op(const std::string& op) {
    return op == "bmm_rrr" || op == "bmm_rcr" || op == "mul" || op == "div";
  }

  struct AddedMask {
    std::string scores, mask;
    size_t producer = 0;  // of `scores`
  };

  // sum = add(x, mask) | add(mask, x): x has the sum's shape and dtype and is read by the add alone,
  // its producer a scores op (bmm / scale) or, with `where_scores`, a where mask of the scores
  // (form A); the mask has the sum's dtype and broadcasts to it. A scores-op x is preferred.
  std::optional<AddedMask> added_mask(const ir::Node& add, bool where_scores) {
    if (add.op != "add" || add.inputs.size() != 2 || add.outputs.size() != 1 || !add.attrs.empty()) return std::nullopt;
    const ir::Tensor& sum = g_.tensor(add.outputs[0]);
    for (int pass = 0; pass < (where_scores ? 2 : 1); ++pass) {
      for (int side = 0; side < 2; ++side) {
        const std::string& sc = add.inputs[static_cast<size_t>(side)];
        const std::string& mk = add.inputs[static_cast<size_t>(1 - side)];
        const ir::Tensor &sct = g_.tensor(sc), &mkt = g_.tensor(mk);
        if (sct.shape != sum.shape || sct.dtype != sum.dtype || mkt.dtype != sum.dtype ||
            !ir::broadcasts_to(mkt.shape, sum.shape))
          continue;
        auto sp = sole_producer(sc);
        if (!sp) continue;
        const ir::Node& pn = g_.nodes[*sp];
        if (pass == 0 ? is_scores_op(pn.op) : where_masked(pn).has_value()) return AddedMask{sc, mk, *sp};
      }
    }
    return std::nullopt;
  }

  // x · c, c · x or x / c with a constant scalar c that does not change x's type: (x, factor).
  std::optional<std::pair<std::string, double>> scaled(const ir::Node& n) {
    if ((n.op != "mul" && n.op != "div") || n.inputs.size() != 2 || n.outputs.size() != 1 || !n.attrs.empty())
      return std::nullopt;
    const ir::Tensor& y = g_.tensor(n.outputs[0]);
    for (int s = 0; s < (n.op == "mul" ? 2 : 1); ++s) {
      const std::string& x = n.inputs[static_cast<size_t>(s)];
      auto c = scalar(n.inputs[static_cast<size_t>(1 - s)]);
      if (!c || !(std::isfinite(*c)) || *c == 0.0) continue;
      const ir::Tensor& xt = g_.tensor(x);
      if (xt.shape != y.shape || xt.dtype != y.dtype) continue;
      return std::make_pair(x, n.op == "mul" ? *c : 1.0 / *c);
    }
    return std::nullopt;
  }

  static bool same_batch(const ir::Shape& a, const ir::Shape& b) {
    if (a.size() != b.size() || a.size() < 3) return false;
    for (size_t i = 0; i + 2 < a.size(); ++i)
      if (!(a[i] == b[i])) return false;
    return true;
  }

  std::optional<Match> match(size_t ci) {
    const ir::Node& c = g_.nodes[ci];
    if (c.op != "bmm_rrr" || c.inputs.size() != 2 || c.outputs.size() != 1) return std::nullopt;
    Match m;
    m.out_bmm = ci;
    m.v = c.inputs[1];
    auto smi = sole_producer(c.inputs[0]);
    if (!smi) return std::nullopt;
    const ir::Node& sm = g_.nodes[*smi];
    const ir::Tensor& probs = g_.tensor(c.inputs[0]);
    const int64_t r = static_cast<int64_t>(probs.shape.size());
    if (sm.op != "softmax" || sm.inputs.size() != 1 || r < 3) return std::nullopt;
    int64_t axis = sm.attr_int("axis", -1);
    if (axis < 0) axis += r;
    if (axis != r - 1) return std::nullopt;
    m.softmax = *smi;
    // Walk back from the softmax input: [+ mask] [where mask [over + mask]] [· c | / c] bmm, with
    // at most one additive mask (the where's inside it: form B, after it: form A).
    std::string s = sm.inputs[0];
    std::optional<size_t> pi = sole_producer(s);
    if (!pi) return std::nullopt;
    if (auto a = added_mask(g_.nodes[*pi], /*where_scores=*/true)) {
      m.mask = a->mask;
      s = a->scores;
      pi = a->producer;
    }
    if (auto w = where_masked(g_.nodes[*pi])) {
      m.where_cond = w->cond;
      m.where_fill = w->fill;
      m.fill_if_true = w->fill_if_true;
      s = w->scores;
      pi = sole_producer(s);
      if (!pi) return std::nullopt;
      if (m.mask.empty()) {
        if (auto a = added_mask(g_.nodes[*pi], /*where_scores=*/false)) {
          m.where_kept = a->mask;
          s = a->scores;
          pi = a->producer;
        }
      }
    }
    if (!is_scores_op(g_.nodes[*pi].op)) return std::nullopt;
    if (auto sc = scaled(g_.nodes[*pi])) {
      m.scale *= sc->second;
      s = sc->first;
      pi = sole_producer(s);
      if (!pi) return std::nullopt;
    }
    const ir::Node& b1 = g_.nodes[*pi];
    if ((b1.op != "bmm_rrr" && b1.op != "bmm_rcr") || b1.inputs.size() != 2) return std::nullopt;
    m.scores_bmm = *pi;
    m.q = b1.inputs[0];
    if (auto qi = sole_producer(m.q)) {
      if (auto sc = scaled(g_.nodes[*qi])) {
        m.scale *= sc->second;
        m.q = sc->first;
      }
    }
    if (!(m.scale > 0.0) || !std::isfinite(m.scale)) return std::nullopt;
    const std::string& kb = b1.inputs[1];
    const ir::Tensor& kbt = g_.tensor(kb);
    const size_t kr = kbt.shape.size();
    if (b1.op == "bmm_rcr") {
      m.k_source = kb;
    } else if (kr >= 3) {
      std::vector<int64_t> swap(kr);
      std::iota(swap.begin(), swap.end(), 0);
      std::swap(swap[kr - 1], swap[kr - 2]);
      m.k_source = kb;
      m.k_perm = swap;
      // kᵀ = permute(k0, p) read by this bmm alone: k = permute(k0, p ∘ swap).
      if (auto kp = sole_producer(kb); kp && g_.nodes[*kp].op == "permute" && g_.nodes[*kp].inputs.size() == 1) {
        std::vector<int64_t> p = g_.nodes[*kp].attr_ints("dims");
        if (p.size() == kr) {
          for (auto& d : p)
            if (d < 0) d += static_cast<int64_t>(kr);
          std::vector<int64_t> composed(kr);
          for (size_t i = 0; i < kr; ++i) composed[i] = p[static_cast<size_t>(swap[i])];
          m.k_source = g_.nodes[*kp].inputs[0];
          m.k_perm = composed;
          if (std::is_sorted(composed.begin(), composed.end())) m.k_perm.reset();  // identity
        }
      }
    } else {
      return std::nullopt;
    }
    // q [.., Lq, D], k [.., Lk, D], v [.., Lk, Dv]: same rank and batch extents, dtypes alike.
    const ir::Tensor &qt = g_.tensor(m.q), &vt = g_.tensor(m.v), &src = g_.tensor(m.k_source);
    ir::Shape ks;
    if (m.k_perm)
      for (int64_t d : *m.k_perm) ks.push_back(src.shape[static_cast<size_t>(d)]);
    else
      ks = src.shape;
    if (!ir::is_float(qt.dtype) || src.dtype != qt.dtype || vt.dtype != qt.dtype) return std::nullopt;
    if (!same_batch(qt.shape, ks) || !same_batch(qt.shape, vt.shape)) return std::nullopt;
    if (!(qt.shape.back() == ks.back()) || !(ks[ks.size() - 2] == vt.shape[vt.shape.size() - 2])) return std::nullopt;
    if (g_.tensor(c.outputs[0]).dtype != qt.dtype) return std::nullopt;
    return m;
  }

  ir::Graph& g_;
  std::map<std::string, size_t> producers_;
  std::map<std::string, std::vector<size_t>> consumers_;
};

}  // namespace

PassResult fuse_attention(ir::Graph& g) {
  PassResult r;
  r.stats["attention"] = 0;
  r.stats["attention_masked"] = 0;
  r.stats["attention_where_masked"] = 0;  // counted in attention_masked too
  AttentionFuser f(g);
  while (auto m = f.find()) {
    f.apply(*m);
    const bool masked = !m->mask.empty() || !m->where_cond.empty();
    ++r.stats[masked ? "attention_masked" : "attention"];
    if (!m->where_cond.empty()) ++r.stats["attention_where_masked"];
    r.changed = true;
  }
  // The scores, softmax, scale, where and kᵀ permute nodes are now unread.
  if (r.changed) eliminate_dead_code(g);
  return r;
}

}  // namespace dinoml::passes
