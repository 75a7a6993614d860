// ONNX RNN / GRU / LSTM → unrolled DinoML graphs (static sequence length; batch may be a dim).
// Per direction: one GEMM projects every time step's input at once (gemm_rcr_bias over
// [seq·batch, I]); each step adds h·Rᵀ (gemm_rcr) and applies the gate equations as elementwise
// ops that fuse_elementwise merges. Y stacks the per-step h along a new axis.
#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

struct RnnSpec {
  int64_t hidden = 0;
  int64_t dirs = 1;
  std::string direction;
  std::vector<std::string> acts;
  int64_t seq = 0;
  IntExpr batch = 1;
  IntExpr input = 1;
};

std::string act(Importer& im, const std::string& name, const std::string& x) {
  if (name == "Sigmoid") return im.op("sigmoid", {x});
  if (name == "Tanh") return im.op("tanh", {x});
  if (name == "Relu") return im.op("relu", {x});
  throw Unsupported("activation '" + name + "'");
}

// Rows [k*H, (k+1)*H) of a 2-d tensor (a constant slice folds at import time).
std::string rows(Importer& im, const std::string& t, int64_t k, int64_t H) {
  return im.op("slice", {t}, {{"starts", std::vector<int64_t>{k * H}}, {"ends", std::vector<int64_t>{(k + 1) * H}},
                              {"axes", std::vector<int64_t>{0}}});
}
std::string take(Importer& im, const std::string& t, int64_t axis, int64_t i) {
  std::string s = im.op("slice", {t}, {{"starts", std::vector<int64_t>{i}}, {"ends", std::vector<int64_t>{i + 1}},
                                       {"axes", std::vector<int64_t>{axis}}});
  return im.op("squeeze", {s}, {{"axes", std::vector<int64_t>{axis}}});
}
std::string cols(Importer& im, const std::string& t, int64_t k, int64_t H) {
  return im.op("slice", {t}, {{"starts", std::vector<int64_t>{k * H}}, {"ends", std::vector<int64_t>{(k + 1) * H}},
                              {"axes", std::vector<int64_t>{1}}});
}

RnnSpec common(Importer& im, NodeView& n, int gates, const std::vector<std::string>& default_acts, std::string& x) {
  RnnSpec s;
  s.hidden = n.i_req("hidden_size");
  s.direction = n.s("direction", "forward");
  if (s.direction != "forward" && s.direction != "reverse" && s.direction != "bidirectional")
    throw Invalid("direction '" + s.direction + "'");
  s.dirs = s.direction == "bidirectional" ? 2 : 1;
  if (n.has("clip")) throw Unsupported("clip");
  if (n.has("activation_alpha") || n.has("activation_beta")) throw Unsupported("activation_alpha/beta");
  // activations: one set per direction
  std::vector<std::string> acts;
  if (n.has("activations")) {
    for (const auto& a : n.p.attribute())
      if (a.name() == "activations")
        for (const auto& s2 : a.strings()) acts.push_back(s2);
    n.ignore("activations");
  } else {
    for (int64_t d = 0; d < s.dirs; ++d) acts.insert(acts.end(), default_acts.begin(), default_acts.end());
  }
  if (acts.size() != default_acts.size() * static_cast<size_t>(s.dirs)) throw Invalid("wrong number of activations");
  s.acts = acts;
  x = im.in(n, 0);
  if (!ir::is_float(im.type(x).dtype)) throw Unsupported("non-float recurrent input");
  if (n.i("layout", 0) != 0) x = im.op("permute", {x}, {{"dims", std::vector<int64_t>{1, 0, 2}}});
  const auto& xs = im.type(x).shape;
  if (xs.size() != 3) throw Invalid("X must be 3-d");
  if (!xs[0].is_const()) throw Unsupported("a symbolic sequence length (the recurrence is unrolled)");
  s.seq = xs[0].const_value();
  s.batch = xs[1];
  s.input = xs[2];
  if (n.has_input(4)) {
    const auto* sl = &im.value_of(n, 4, "sequence_lens");
    for (int64_t i = 0; i < sl->numel(); ++i)
      if (sl->get_i64(i) != s.seq) throw Unsupported("sequence_lens shorter than the sequence");
  }
  (void)gates;
  return s;
}

// Y [seq, dirs, batch, H] (layout 0) or [batch, seq, dirs, H] (layout 1) from per-direction steps.
void set_outputs(Importer& im, NodeView& n, const RnnSpec& s, const std::vector<std::vector<std::string>>& hs,
                 const std::vector<std::string>& h_last, const std::vector<std::string>& c_last) {
  const bool layout1 = n.i("layout", 0) != 0;
  if (n.has_output(0)) {
    std::vector<std::string> per_dir;
    for (const auto& steps : hs) {
      std::vector<std::string> un;
      for (const auto& h : steps) un.push_back(im.op("unsqueeze", {h}, {{"axes", std::vector<int64_t>{0}}}));
      per_dir.push_back(un.size() == 1 ? un[0] : im.op("concatenate", un, {{"axis", int64_t{0}}}));  // [seq, batch, H]
    }
    for (auto& p : per_dir) p = im.op("unsqueeze", {p}, {{"axes", std::vector<int64_t>{1}}});  // [seq, 1, batch, H]
    std::string y = per_dir.size() == 1 ? per_dir[0] : im.op("concatenate", per_dir, {{"axis", int64_t{1}}});
    if (layout1) y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{2, 0, 1, 3}}});
    im.set(n, 0, y);
  }
  auto stack = [&](const std::vector<std::string>& v) {
    std::vector<std::string> un;
    for (const auto& h : v) un.push_back(im.op("unsqueeze", {h}, {{"axes", std::vector<int64_t>{0}}}));
    std::string y = un.size() == 1 ? un[0] : im.op("concatenate", un, {{"axis", int64_t{0}}});
    if (layout1) y = im.op("permute", {y}, {{"dims", std::vector<int64_t>{1, 0, 2}}});
    return y;
  };
  if (n.has_output(1)) im.set(n, 1, stack(h_last));
  if (n.has_output(2)) im.set(n, 2, stack(c_last));
}

// Initial state of direction d: [batch, H] (zeros when absent).
std::string initial(Importer& im, NodeView& n, size_t input, int64_t d, const RnnSpec& s, DType dt) {
  if (n.has_input(input)) {
    std::string t = im.in(n, input);
    if (n.i("layout", 0) != 0) t = im.op("permute", {t}, {{"dims", std::vector<int64_t>{1, 0, 2}}});
    return take(im, t, 0, d);
  }
  return im.op("full", {}, {{"shape", ir::Shape{s.batch, IntExpr(s.hidden)}}, {"value", 0.0},
                            {"dtype", std::string(ir::dtype_name(dt))}});
}

// Input projection of every step at once: [seq, batch, G*H] = X·Wᵀ + (Wb + Rb).
std::string project(Importer& im, const std::string& x, const std::string& w, const std::string& bias, const RnnSpec& s,
                    int64_t G) {
  std::string x2 = im.reshape(x, {IntExpr(s.seq) * s.batch, s.input});
  std::string p = bias.empty() ? im.op("gemm_rcr", {x2, w}) : im.op("gemm_rcr_bias", {x2, w, bias});
  return im.reshape(p, {IntExpr(s.seq), s.batch, IntExpr(G * s.hidden)});
}

void convert_rnn_family(Importer& im, NodeView& n, const std::string& kind) {
  std::string x;
  const std::vector<std::string> defaults =
      kind == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                     : kind == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"} : std::vector<std::string>{"Tanh"};
  const int64_t G = kind == "LSTM" ? 4 : kind == "GRU" ? 3 : 1;
  RnnSpec s = common(im, n, static_cast<int>(G), defaults, x);
  const DType dt = im.type(x).dtype;
  const int64_t H = s.hidden;
  const bool lbr = kind == "GRU" && n.i("linear_before_reset", 0) != 0;
  if (kind == "LSTM" && n.i("input_forget", 0) != 0) throw Unsupported("input_forget");

  std::string W = im.in(n, 1), R = im.in(n, 2);
  std::string B = n.has_input(3) ? im.in(n, 3) : "";
  std::vector<std::vector<std::string>> hs(static_cast<size_t>(s.dirs));
  std::vector<std::string> h_last, c_last;
  for (int64_t d = 0; d < s.dirs; ++d) {
    const bool reverse = s.direction == "reverse" || d == 1;
    const size_t a0 = static_cast<size_t>(d) * defaults.size();
    std::string Wd = take(im, W, 0, d), Rd = take(im, R, 0, d);  // [G*H, I], [G*H, H]
    std::string Wb, Rb;
    if (!B.empty()) {
      std::string Bd = take(im, B, 0, d);  // [2*G*H]
      Wb = im.op("slice", {Bd}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{G * H}}});
      Rb = im.op("slice", {Bd}, {{"starts", std::vector<int64_t>{G * H}}, {"ends", std::vector<int64_t>{2 * G * H}}});
    }
    // For GRU the recurrent bias of the h gate stays inside the reset product (linear_before_reset)
    // or inside the h gate's own GEMM; z and r fold both biases into the projection.
    std::string proj_bias;
    if (!B.empty()) {
      if (kind == "GRU") {
        std::string zr = im.op("add", {im.op("slice", {Wb}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{2 * H}}}),
                                       im.op("slice", {Rb}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{2 * H}}})});
        std::string hb = im.op("slice", {Wb}, {{"starts", std::vector<int64_t>{2 * H}}, {"ends", std::vector<int64_t>{3 * H}}});
        proj_bias = im.op("concatenate", {zr, hb}, {{"axis", int64_t{0}}});
      } else {
        proj_bias = im.op("add", {Wb, Rb});
      }
    }
    std::string P = project(im, x, Wd, proj_bias, s, G);
    std::string h = initial(im, n, 5, d, s, dt);
    std::string c = kind == "LSTM" ? initial(im, n, 6, d, s, dt) : "";
    // Peepholes P[d] = [Pi, Po, Pf] ([3H]): i and f see the previous cell, o the new one.
    std::string Pi, Po, Pf;
    if (kind == "LSTM" && n.has_input(7)) {
      std::string Pd = take(im, im.in(n, 7), 0, d);
      auto part = [&](int64_t k) {
        return im.op("slice", {Pd}, {{"starts", std::vector<int64_t>{k * H}}, {"ends", std::vector<int64_t>{(k + 1) * H}}});
      };
      Pi = part(0);
      Po = part(1);
      Pf = part(2);
    }
    std::string Rzr, Rh, Rbh;
    if (kind == "GRU") {
      Rzr = im.op("slice", {Rd}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{2 * H}}, {"axes", std::vector<int64_t>{0}}});
      Rh = rows(im, Rd, 2, H);
      if (!B.empty()) Rbh = im.op("slice", {Rb}, {{"starts", std::vector<int64_t>{2 * H}}, {"ends", std::vector<int64_t>{3 * H}}});
    }
    std::vector<std::string> steps(static_cast<size_t>(s.seq));
    for (int64_t i = 0; i < s.seq; ++i) {
      const int64_t t = reverse ? s.seq - 1 - i : i;
      std::string xt = take(im, P, 0, t);  // [batch, G*H]
      if (kind == "LSTM") {
        std::string g = im.op("add", {xt, im.op("gemm_rcr", {h, Rd})});
        std::string gi = cols(im, g, 0, H), go = cols(im, g, 1, H), gf = cols(im, g, 2, H);
        if (!Pi.empty()) {
          gi = im.op("add", {gi, im.op("mul", {Pi, c})});
          gf = im.op("add", {gf, im.op("mul", {Pf, c})});
        }
        std::string it = act(im, s.acts[a0], gi);
        std::string ft = act(im, s.acts[a0], gf);
        std::string ct = act(im, s.acts[a0 + 1], cols(im, g, 3, H));
        c = im.op("add", {im.op("mul", {ft, c}), im.op("mul", {it, ct})});
        if (!Po.empty()) go = im.op("add", {go, im.op("mul", {Po, c})});
        std::string ot = act(im, s.acts[a0], go);
        h = im.op("mul", {ot, act(im, s.acts[a0 + 2], c)});
      } else if (kind == "GRU") {
        std::string gzr = im.op("add", {cols(im, xt, 0, 2 * H), im.op("gemm_rcr", {h, Rzr})});
        std::string zt = act(im, s.acts[a0], cols(im, gzr, 0, H));
        std::string rt = act(im, s.acts[a0], cols(im, gzr, 1, H));
        std::string xh = cols(im, xt, 2, H);
        std::string hh;
        if (lbr) {
          std::string rec = Rbh.empty() ? im.op("gemm_rcr", {h, Rh}) : im.op("gemm_rcr_bias", {h, Rh, Rbh});
          hh = act(im, s.acts[a0 + 1], im.op("add", {xh, im.op("mul", {rt, rec})}));
        } else {
          std::string rec = Rbh.empty() ? im.op("gemm_rcr", {im.op("mul", {rt, h}), Rh})
                                        : im.op("gemm_rcr_bias", {im.op("mul", {rt, h}), Rh, Rbh});
          hh = act(im, s.acts[a0 + 1], im.op("add", {xh, rec}));
        }
        std::string one = im.scalar(dt, 1.0);
        h = im.op("add", {im.op("mul", {im.op("sub", {one, zt}), hh}), im.op("mul", {zt, h})});
      } else {
        h = act(im, s.acts[a0], im.op("add", {xt, im.op("gemm_rcr", {h, Rd})}));
      }
      steps[static_cast<size_t>(t)] = h;
    }
    hs[static_cast<size_t>(d)] = steps;
    h_last.push_back(h);
    if (kind == "LSTM") c_last.push_back(c);
  }
  set_outputs(im, n, s, hs, h_last, c_last);
}

}  // namespace

void register_rnn_converters(ConverterTable& t) {
  t["RNN"] = [](Importer& im, NodeView& n) { convert_rnn_family(im, n, "RNN"); };
  t["GRU"] = [](Importer& im, NodeView& n) { convert_rnn_family(im, n, "GRU"); };
  t["LSTM"] = [](Importer& im, NodeView& n) { convert_rnn_family(im, n, "LSTM"); };
}

}  // namespace dinoml::onnx_import
