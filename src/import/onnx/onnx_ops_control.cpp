// ONNX control flow, unrolled at import time (DinoML graphs are static):
//   Loop: the trip count and the loop condition must be known at compile time (each iteration's
//         cond_out too); the body is converted once per iteration with iter_num as a constant,
//         carried values rebound, and scan outputs stacked on a new axis 0.
//   Scan: one body conversion per position of the scan axis (directions and axes honoured);
//         opset 8's batch axis is an outer unrolled loop (sequence_lens must be absent).
//   If:   a condition known at import time picks its branch; otherwise both branches are
//         converted and each output is where(cond, then, else) (the branches must agree in shape
//         and type; they are side-effect free).
// Body nodes see the enclosing scope's values, as ONNX specifies.
#include <algorithm>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;

constexpr int64_t kMaxUnroll = 4096;

// A value of the importer's scope: a DinoML tensor, an import-time constant, a symbolic int, a
// sequence or an empty optional; `wide` its widened ONNX type.
struct Bound {
  std::string dml;
  std::optional<ops::HostTensor> known;
  std::optional<SymValue> sym;
  std::optional<Importer::Sequence> seq;
  bool none = false;
  int wide = 0;
};

Bound capture(Importer& im, const std::string& onnx_name) {
  Bound b;
  if (auto it = im.syms.find(onnx_name); it != im.syms.end()) b.sym = it->second;
  else if (auto k = im.known.find(onnx_name); k != im.known.end()) b.known = k->second;
  else if (auto q = im.seqs.find(onnx_name); q != im.seqs.end()) b.seq = q->second;
  else if (im.nones.count(onnx_name)) b.none = true;
  else b.dml = im.t(onnx_name);
  if (auto w = im.wide.find(onnx_name); w != im.wide.end()) b.wide = w->second;
  return b;
}

void forget(Importer& im, const std::string& name) {
  im.names.erase(name);
  im.known.erase(name);
  im.syms.erase(name);
  im.seqs.erase(name);
  im.nones.erase(name);
  im.wide.erase(name);
}

void bind_value(Importer& im, const std::string& name, const Bound& v) {
  forget(im, name);
  if (v.sym) im.syms[name] = *v.sym;
  else if (v.known) im.known[name] = *v.known;
  else if (v.seq) im.seqs[name] = *v.seq;
  else if (v.none) im.nones.insert(name);
  else im.names[name] = v.dml;
  if (v.wide) im.wide[name] = v.wide;
}

// Binds output k of n to a captured value (tensor, constant, symbolic, sequence or empty optional).
void set_bound(Importer& im, NodeView& n, size_t k, const Bound& v) {
  if (!n.has_output(k)) return;
  const std::string& o = n.p.output(static_cast<int>(k));
  if (im.names.count(o) || im.known.count(o) || im.syms.count(o) || im.seqs.count(o) || im.nones.count(o))
    throw Invalid("value '" + o + "' is defined twice");
  bind_value(im, o, v);
}

std::string dml_of(Importer& im, const Bound& v) {
  if (v.seq || v.none) throw Unsupported("a sequence or optional where a tensor is expected");
  if (!v.dml.empty()) return v.dml;
  const std::string tmp = "__dinoml_control_tmp";
  bind_value(im, tmp, v);
  std::string d = im.t(tmp);
  forget(im, tmp);
  return d;
}

// Every value name a body defines (its inputs and its nodes' outputs, also inside nested If /
// Loop / Scan bodies, which convert into the same scope), for clearing between iterations.
void collect_body_names(const onnx::GraphProto& g, std::vector<std::string>& out) {
  for (const auto& vi : g.input()) out.push_back(vi.name());
  for (const auto& t : g.initializer()) out.push_back(t.name());
  for (const auto& np : g.node()) {
    for (const auto& o : np.output())
      if (!o.empty()) out.push_back(o);
    for (const auto& a : np.attribute()) {
      if (a.has_g()) collect_body_names(a.g(), out);
      for (const auto& sg : a.graphs()) collect_body_names(sg, out);
    }
  }
}
std::vector<std::string> body_names(const onnx::GraphProto& g) {
  std::vector<std::string> out;
  collect_body_names(g, out);
  return out;
}

// Converts the body's nodes in the current scope; problems name the enclosing node and the body
// node.
void convert_body(Importer& im, NodeView& outer, const onnx::GraphProto& g, const std::string& where) {
  for (const auto& t : g.initializer()) im.known[t.name()] = tensor_from_proto(t, im.base_dir);
  const auto& table = converters();
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& np = g.node(i);
    const std::string display = where + "/" + (np.name().empty() ? "#" + std::to_string(i) + " " + np.op_type() : np.name());
    if (!np.domain().empty() && np.domain() != "ai.onnx")
      throw Unsupported("body node '" + display + "': operator domain '" + np.domain() + "' is not supported");
    auto it = table.find(np.op_type());
    if (it == table.end()) throw Unsupported("body node '" + display + "': operator " + np.op_type() + " is not supported");
    NodeView nv(np, display, outer.opset);
    try {
      // Widened integer values follow the same rules in bodies as in the main graph.
      const int widened = widened_node_check(im, nv);
      it->second(im, nv);
      widened_mark_outputs(im, nv, widened);
    } catch (const Unsupported& e) {
      throw Unsupported("body node '" + display + "' (" + np.op_type() + "): " + e.what());
    } catch (const Invalid& e) {
      throw Invalid("body node '" + display + "' (" + np.op_type() + "): " + e.what());
    }
    auto unread = nv.unread_attributes();
    if (!unread.empty()) throw Unsupported("body node '" + display + "' (" + np.op_type() + "): attribute " + unread[0] + " not supported");
  }
}

const onnx::GraphProto& graph_attr(NodeView& n, const std::string& name) {
  n.ignore(name);
  for (const auto& a : n.p.attribute())
    if (a.name() == name && a.has_g()) return a.g();
  throw Invalid("node '" + n.name + "' (" + n.op() + "): graph attribute '" + name + "' is missing");
}

std::string stack0(Importer& im, const std::vector<Bound>& parts) {
  std::vector<std::string> us;
  for (const auto& p : parts) us.push_back(im.op("unsqueeze", {dml_of(im, p)}, {{"axes", std::vector<int64_t>{0}}}));
  return us.size() == 1 ? us[0] : im.op("concatenate", us, {{"axis", int64_t{0}}});
}

void convert_loop(Importer& im, NodeView& n) {
  const auto& body = graph_attr(n, "body");
  const int nin = body.input_size(), nout = body.output_size();
  const int nc = std::max(0, static_cast<int>(n.p.input_size()) - 2);
  if (nin != nc + 2 || nout < nc + 1) throw Invalid("node '" + n.name + "' (Loop): body inputs/outputs do not match the loop-carried values");
  int64_t trip = kMaxUnroll + 1;
  bool has_trip = false;
  if (n.has_input(0)) {
    const auto& v = im.value_of(n, 0, "M");
    if (v.numel() != 1) throw Invalid("node '" + n.name + "' (Loop): M must be a scalar");
    trip = v.get_i64(0);
    has_trip = true;
  }
  bool cond = true;
  if (n.has_input(1)) {
    const auto& v = im.value_of(n, 1, "cond");
    if (v.numel() != 1) throw Invalid("node '" + n.name + "' (Loop): cond must be a scalar");
    cond = v.get_i64(0) != 0;
  }
  if (!has_trip && !n.has_input(1)) throw Unsupported("a Loop without trip count or condition (infinite)");
  if (has_trip && trip > kMaxUnroll) throw Unsupported("Loop of " + std::to_string(trip) + " iterations (unrolled up to " + std::to_string(kMaxUnroll) + ")");
  std::vector<Bound> state;
  for (int k = 0; k < nc; ++k) state.push_back(capture(im, n.input(static_cast<size_t>(k) + 2)));
  const int nscan = nout - 1 - nc;
  std::vector<std::vector<Bound>> scans(static_cast<size_t>(nscan));
  const auto names = body_names(body);
  int64_t it = 0;
  for (; cond && (!has_trip || it < trip); ++it) {
    if (it >= kMaxUnroll) throw Unsupported("Loop running past " + std::to_string(kMaxUnroll) + " iterations (unrolled)");
    for (const auto& nm : names) forget(im, nm);
    ops::HostTensor iv(DType::i64, {});
    iv.set_i64(0, it);
    ops::HostTensor cv(DType::boolean, {});
    cv.set_i64(0, 1);
    im.known[body.input(0).name()] = iv;
    im.known[body.input(1).name()] = cv;
    for (int k = 0; k < nc; ++k) bind_value(im, body.input(k + 2).name(), state[static_cast<size_t>(k)]);
    convert_body(im, n, body, n.name + "/iteration " + std::to_string(it));
    const auto* c = im.value(body.output(0).name());
    if (!c) throw Unsupported("the loop condition computed by the body must be known at compile time (DinoML unrolls loops)");
    cond = c->get_i64(0) != 0;
    for (int k = 0; k < nc; ++k) state[static_cast<size_t>(k)] = capture(im, body.output(k + 1).name());
    for (int k = 0; k < nscan; ++k) scans[static_cast<size_t>(k)].push_back(capture(im, body.output(1 + nc + k).name()));
  }
  for (const auto& nm : names) forget(im, nm);
  for (int k = 0; k < nc; ++k) set_bound(im, n, static_cast<size_t>(k), state[static_cast<size_t>(k)]);
  for (int k = 0; k < nscan; ++k) {
    if (!n.has_output(static_cast<size_t>(nc + k))) continue;
    if (scans[static_cast<size_t>(k)].empty()) throw Unsupported("a Loop with zero iterations (empty scan outputs)");
    im.set(n, static_cast<size_t>(nc + k), stack0(im, scans[static_cast<size_t>(k)]));
  }
}

// One Scan (opset 9 semantics) over states / scan inputs given as bound values.
std::vector<Bound> run_scan(Importer& im, NodeView& n, const onnx::GraphProto& body, std::vector<Bound> state,
                            const std::vector<std::string>& scan_in, const std::vector<int64_t>& in_axes,
                            const std::vector<int64_t>& in_dirs, int nscan_out, const std::string& where) {
  const int ns = static_cast<int>(state.size()), m = static_cast<int>(scan_in.size());
  int64_t len = -1;
  for (int k = 0; k < m; ++k) {
    const auto& s = im.type(scan_in[static_cast<size_t>(k)]).shape;
    const auto& e = s[static_cast<size_t>(in_axes[static_cast<size_t>(k)])];
    if (!e.is_const()) throw Unsupported("Scan over a symbolic axis");
    if (len >= 0 && e.const_value() != len) throw Invalid("node '" + n.name + "' (Scan): scan inputs differ in length");
    len = e.const_value();
  }
  if (len <= 0) throw Unsupported("Scan of zero length (empty tensors)");
  if (len > kMaxUnroll) throw Unsupported("Scan of " + std::to_string(len) + " steps (unrolled up to " + std::to_string(kMaxUnroll) + ")");
  const auto names = body_names(body);
  std::vector<std::vector<Bound>> outs(static_cast<size_t>(nscan_out));
  for (int64_t t = 0; t < len; ++t) {
    for (const auto& nm : names) forget(im, nm);
    for (int k = 0; k < ns; ++k) bind_value(im, body.input(k).name(), state[static_cast<size_t>(k)]);
    for (int k = 0; k < m; ++k) {
      const int64_t pos = in_dirs[static_cast<size_t>(k)] ? len - 1 - t : t;
      ops::HostTensor idx(DType::i64, {});
      idx.set_i64(0, pos);
      Bound b;
      b.dml = im.op("gather", {scan_in[static_cast<size_t>(k)], im.constant(idx, "scan_pos")}, {{"axis", in_axes[static_cast<size_t>(k)]}});
      bind_value(im, body.input(ns + k).name(), b);
    }
    convert_body(im, n, body, where + "/step " + std::to_string(t));
    for (int k = 0; k < ns; ++k) state[static_cast<size_t>(k)] = capture(im, body.output(k).name());
    for (int k = 0; k < nscan_out; ++k) outs[static_cast<size_t>(k)].push_back(capture(im, body.output(ns + k).name()));
  }
  for (const auto& nm : names) forget(im, nm);
  std::vector<int64_t> out_axes = n.ints("scan_output_axes", std::vector<int64_t>(static_cast<size_t>(nscan_out), 0));
  std::vector<int64_t> out_dirs = n.ints("scan_output_directions", std::vector<int64_t>(static_cast<size_t>(nscan_out), 0));
  if (out_axes.size() != static_cast<size_t>(nscan_out) || out_dirs.size() != static_cast<size_t>(nscan_out))
    throw Invalid("node '" + n.name + "' (Scan): scan_output_axes/directions must have one value per scan output");
  std::vector<Bound> result = state;
  for (int k = 0; k < nscan_out; ++k) {
    auto parts = outs[static_cast<size_t>(k)];
    if (out_dirs[static_cast<size_t>(k)]) std::reverse(parts.begin(), parts.end());
    std::string y = stack0(im, parts);
    const int64_t r = static_cast<int64_t>(im.type(y).shape.size());
    const int64_t ax = normalize_axis(out_axes[static_cast<size_t>(k)], r, n);
    if (ax != 0) {
      std::vector<int64_t> perm;
      for (int64_t i = 1; i < r; ++i) perm.push_back(i);
      perm.insert(perm.begin() + ax, 0);
      y = im.op("permute", {y}, {{"dims", perm}});
    }
    Bound b;
    b.dml = y;
    result.push_back(b);
  }
  return result;
}

void convert_scan(Importer& im, NodeView& n) {
  const auto& body = graph_attr(n, "body");
  const int m = static_cast<int>(n.i_req("num_scan_inputs"));
  const bool v8 = n.opset < 9;
  const int first = v8 ? 1 : 0;
  if (v8 && n.has_input(0)) throw Unsupported("Scan sequence_lens");
  const int total_in = static_cast<int>(n.p.input_size()) - first;
  const int ns = total_in - m;
  if (ns < 0 || body.input_size() != total_in) throw Invalid("node '" + n.name + "' (Scan): body inputs do not match the states and scan inputs");
  const int nscan_out = body.output_size() - ns;
  if (nscan_out < 0) throw Invalid("node '" + n.name + "' (Scan): body has fewer outputs than states");
  std::vector<int64_t> in_axes(static_cast<size_t>(m), 0), in_dirs(static_cast<size_t>(m), 0);
  if (v8) {
    in_dirs = n.ints("directions", in_dirs);
  } else {
    in_axes = n.ints("scan_input_axes", in_axes);
    in_dirs = n.ints("scan_input_directions", in_dirs);
  }
  if (in_axes.size() != static_cast<size_t>(m) || in_dirs.size() != static_cast<size_t>(m))
    throw Invalid("node '" + n.name + "' (Scan): scan input axes/directions must have one value per scan input");
  std::vector<std::string> states, scan_in;
  for (int k = 0; k < ns; ++k) states.push_back(im.in(n, static_cast<size_t>(first + k)));
  for (int k = 0; k < m; ++k) scan_in.push_back(im.in(n, static_cast<size_t>(first + ns + k)));
  if (!v8) {
    for (int k = 0; k < m; ++k)
      in_axes[static_cast<size_t>(k)] = normalize_axis(in_axes[static_cast<size_t>(k)], static_cast<int64_t>(im.type(scan_in[static_cast<size_t>(k)]).shape.size()), n);
    std::vector<Bound> st;
    for (int k = 0; k < ns; ++k) st.push_back(capture(im, n.input(static_cast<size_t>(first + k))));
    auto res = run_scan(im, n, body, st, scan_in, in_axes, in_dirs, nscan_out, n.name);
    for (size_t k = 0; k < res.size(); ++k)
      if (n.has_output(k)) im.set(n, k, dml_of(im, res[k]));
    return;
  }
  // Opset 8: axis 0 of states and scan inputs is a batch axis; the scan axis is 1.
  const auto& s0 = im.type(ns ? states[0] : scan_in[0]).shape;
  if (s0.empty() || !s0[0].is_const()) throw Unsupported("Scan with a symbolic batch axis");
  const int64_t batch = s0[0].const_value();
  std::vector<std::vector<std::string>> per_out(static_cast<size_t>(ns + nscan_out));
  for (int64_t b = 0; b < batch; ++b) {
    ops::HostTensor idx(DType::i64, {});
    idx.set_i64(0, b);
    const std::string bi = im.constant(idx, "scan_batch");
    std::vector<Bound> st;
    for (const auto& s : states) {
      Bound bb;
      bb.dml = im.op("gather", {s, bi}, {{"axis", int64_t{0}}});
      st.push_back(bb);
    }
    std::vector<std::string> si;
    for (const auto& s : scan_in) si.push_back(im.op("gather", {s, bi}, {{"axis", int64_t{0}}}));
    auto res = run_scan(im, n, body, st, si, in_axes, in_dirs, nscan_out, n.name + "/batch " + std::to_string(b));
    for (size_t k = 0; k < res.size(); ++k) per_out[k].push_back(dml_of(im, res[k]));
  }
  for (size_t k = 0; k < per_out.size(); ++k) {
    if (!n.has_output(k)) continue;
    std::vector<Bound> parts;
    for (const auto& d : per_out[k]) {
      Bound bb;
      bb.dml = d;
      parts.push_back(bb);
    }
    im.set(n, k, stack0(im, parts));
  }
}

void convert_if(Importer& im, NodeView& n) {
  const auto& then_g = graph_attr(n, "then_branch");
  const auto& else_g = graph_attr(n, "else_branch");
  if (then_g.output_size() != else_g.output_size() || then_g.output_size() != static_cast<int>(n.num_outputs()))
    throw Invalid("node '" + n.name + "' (If): the branches and the node differ in their number of outputs");
  if (const auto* c = im.in_value(n, 0)) {
    const auto& g = c->get_i64(0) ? then_g : else_g;
    convert_body(im, n, g, n.name + (c->get_i64(0) ? "/then" : "/else"));
    for (int k = 0; k < g.output_size(); ++k) set_bound(im, n, static_cast<size_t>(k), capture(im, g.output(k).name()));
    return;
  }
  std::string cond = im.in(n, 0);
  if (im.type(cond).dtype != DType::boolean || ir::shape_numel(im.type(cond).shape) != ir::IntExpr(1))
    throw Invalid("node '" + n.name + "' (If): cond must be a one-element bool tensor");
  cond = im.reshape(cond, {});
  convert_body(im, n, then_g, n.name + "/then");
  std::vector<Bound> tb, eb;
  for (int k = 0; k < then_g.output_size(); ++k) tb.push_back(capture(im, then_g.output(k).name()));
  convert_body(im, n, else_g, n.name + "/else");
  for (int k = 0; k < else_g.output_size(); ++k) eb.push_back(capture(im, else_g.output(k).name()));
  // A runtime condition selects elementwise, so both branches must give values of one structure:
  // tensors of one shape and type, sequences of one length, or both empty optionals.
  const std::string needs_cond = "input 'cond' ('" + n.input(0) + "') must be known at compile time: ";
  auto select = [&](const std::string& a, const std::string& b, size_t k) {
    const auto& ta = im.type(a);
    const auto& tb2 = im.type(b);
    if (!(ta.shape == tb2.shape) || ta.dtype != tb2.dtype)
      throw Unsupported(needs_cond + "the branches give output " + std::to_string(k) + " different shapes or types (" +
                        ir::shape_to_string(ta.shape) + " vs " + ir::shape_to_string(tb2.shape) + ")");
    return im.op("where", {cond, a, b});
  };
  for (size_t k = 0; k < tb.size(); ++k) {
    const Bound& a = tb[k];
    const Bound& b = eb[k];
    Bound r;
    r.wide = a.wide;
    if (a.none || b.none || a.seq || b.seq) {
      if (a.none && b.none) {
        r.none = true;
      } else if (a.seq && b.seq && a.seq->elems.size() == b.seq->elems.size()) {
        r.seq = a.seq;
        for (size_t i = 0; i < a.seq->elems.size(); ++i) r.seq->elems[i] = select(a.seq->elems[i], b.seq->elems[i], k);
      } else {
        throw Unsupported(needs_cond + "the branches give output " + std::to_string(k) +
                          " as sequences of different lengths or an optional that is empty in one branch only");
      }
    } else {
      r.dml = select(dml_of(im, a), dml_of(im, b), k);
    }
    set_bound(im, n, k, r);
  }
}

// SequenceMap: the body runs once per position of the (equally long) sequence inputs; a tensor
// input is passed whole to every run. Each body output becomes a sequence of the runs' results.
void convert_sequence_map(Importer& im, NodeView& n) {
  const auto& body = graph_attr(n, "body");
  const int nin = static_cast<int>(n.num_inputs());
  if (body.input_size() != nin) throw Invalid("node '" + n.name + "' (SequenceMap): the body's inputs do not match the node's");
  const size_t len = im.seq_in(n, 0).elems.size();
  std::vector<Bound> ins;
  for (int k = 0; k < nin; ++k) {
    ins.push_back(capture(im, n.input(static_cast<size_t>(k))));
    if (ins.back().seq && ins.back().seq->elems.size() != len)
      throw Invalid("node '" + n.name + "' (SequenceMap): the input sequences differ in length");
  }
  const auto names = body_names(body);
  std::vector<Importer::Sequence> outs(static_cast<size_t>(body.output_size()));
  for (size_t i = 0; i < len; ++i) {
    for (const auto& nm : names) forget(im, nm);
    for (int k = 0; k < nin; ++k) {
      const Bound& b = ins[static_cast<size_t>(k)];
      Bound v;
      if (b.seq) {
        v.dml = b.seq->elems[i];
        v.wide = b.seq->wide;
      } else {
        v = b;
      }
      bind_value(im, body.input(k).name(), v);
    }
    convert_body(im, n, body, n.name + "/element " + std::to_string(i));
    for (int k = 0; k < body.output_size(); ++k) {
      Bound r = capture(im, body.output(k).name());
      auto& s = outs[static_cast<size_t>(k)];
      s.elems.push_back(dml_of(im, r));
      s.dtype = im.type(s.elems.back()).dtype;
      s.wide = r.wide;
    }
  }
  for (const auto& nm : names) forget(im, nm);
  for (int k = 0; k < body.output_size(); ++k) {
    auto& s = outs[static_cast<size_t>(k)];
    if (len == 0) {
      // The element type of an empty result: the body output's declared type.
      const auto& vt = body.output(k).type();
      if (vt.has_tensor_type() && vt.tensor_type().elem_type() != 0) s.dtype = storage_dtype(vt.tensor_type().elem_type(), "SequenceMap output");
    }
    im.set_seq(n, static_cast<size_t>(k), s);
  }
}

}  // namespace

void register_control_converters(ConverterTable& t) {
  t["Loop"] = convert_loop;
  t["Scan"] = convert_scan;
  t["If"] = convert_if;
  t["SequenceMap"] = convert_sequence_map;
}

}  // namespace dinoml::onnx_import
