// ONNX integer types without a DinoML dtype (INT16, UINT16, UINT32, UINT64), computed exactly in a
// wider storage dtype (widened_storage: int32 for the 16-bit ones, int64 for the 32- and 64-bit
// unsigned ones; a uint64 is held as the int64 with the same bits).
//
// Contract: a widened value always holds the exact ONNX value (the 16- and 32-bit types) or its
// bits (uint64). Operations that can leave the type's range (Add, Sub, Mul, Neg, Abs, Div of
// int16, left shifts, casts into the type) are reduced modulo 2^bits afterwards, as ONNX Runtime's
// C++ arithmetic wraps. uint64 needs its own comparisons, division, right shifts and conversion to
// float (its values >= 2^63 are negative int64s); these helpers compute them without signed
// overflow. uint64 Add / Sub / Mul wrap as DinoML's int64 arithmetic does (two's complement).
//
// The driver (onnx_import.cpp) calls widened_node_check before a converter runs: a node reading a
// widened value must be one of the operators below, which know the representation; any other is
// reported naming the node and the type. After conversion, the outputs of type-preserving
// operators are marked widened (widened_mark_outputs).
#include <limits>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
using ir::DType;

namespace {

// Operators whose output element type is their (widened) input's: the outputs stay widened.
const std::set<std::string>& preserving_ops() {
  static const std::set<std::string> s = {"Identity", "Reshape",  "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                          "Concat",   "Slice",    "Gather",  "Expand",  "Tile",      "Split",
                                          "Where",    "Max",      "Min",     "Add",     "Sub",       "Mul",
                                          "Div",      "Mod",      "BitShift", "Neg",    "Abs",       "Sum"};
  return s;
}
// Operators that read widened values and produce other types (bool, float, int64 shapes, or the
// type named by their attribute).
const std::set<std::string>& reading_ops() {
  static const std::set<std::string> s = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                          "Cast",  "CastLike", "Pow", "Shape", "Size"};
  return s;
}

std::string i64(Importer& im, double v) { return im.scalar(DType::i64, v); }

}  // namespace

int Importer::wide_of(NodeView& n, size_t k) const {
  if (!n.has_input(k)) return 0;
  auto it = wide.find(n.input(k));
  return it == wide.end() ? 0 : it->second;
}

int widened_node_check(Importer& im, NodeView& n) {
  int w = 0;
  for (size_t k = 0; k < n.num_inputs(); ++k) {
    const int t = im.wide_of(n, k);
    if (!t) continue;
    if (w && t != w && n.op() != "Where")
      throw Invalid("inputs of types " + widened_name(w) + " and " + widened_name(t) + " are mixed");
    w = t;
  }
  if (!w) return 0;
  if (!preserving_ops().count(n.op()) && !reading_ops().count(n.op()))
    throw Unsupported(n.op() + " on " + widened_name(w) +
                      " tensors is not supported (DinoML computes int16 / uint16 / uint32 / uint64 in a wider integer type for "
                      "elementwise arithmetic, comparisons, casts, shifts and data movement only); cast to int32 / int64 "
                      "before this node");
  return w;
}

void widened_mark_outputs(Importer& im, NodeView& n, int w) {
  if (!w || !preserving_ops().count(n.op())) return;
  const DType st = *widened_storage(w);
  for (size_t k = 0; k < n.num_outputs(); ++k) {
    if (!n.has_output(k)) continue;
    const std::string& o = n.p.output(static_cast<int>(k));
    if (im.wide.count(o)) continue;
    auto it = im.names.find(o);
    if (it != im.names.end() && im.type(it->second).dtype == st) im.wide[o] = w;
  }
}

std::string wrap_widened(Importer& im, const std::string& x, int type) {
  const DType dt = im.type(x).dtype;
  auto floor_mod = [&](const std::string& v, double m) {
    const std::string mm = im.scalar(dt, m);
    return im.op("sub", {v, im.op("mul", {im.op("div", {v, mm}), mm})});  // integer div floors: v - ⌊v/m⌋·m ∈ [0, m)
  };
  switch (type) {
    case onnx::TensorProto::UINT16: return floor_mod(x, 65536.0);
    case onnx::TensorProto::INT16:
      return im.op("sub", {floor_mod(im.op("add", {x, im.scalar(dt, 32768.0)}), 65536.0), im.scalar(dt, 32768.0)});
    case onnx::TensorProto::UINT32: return floor_mod(x, 4294967296.0);
    default: return x;  // uint64: the int64 bits are the value modulo 2^64
  }
}

std::string widened_compare(Importer& im, const std::string& op, const std::string& a, const std::string& b, int type) {
  if (type != onnx::TensorProto::UINT64) return im.op(op, {a, b});
  if (op == "eq" || op == "ne") return im.op(op, {a, b});
  // Unsigned order of int64 bit patterns: where the signs differ the non-negative one (< 2^63) is
  // the smaller; otherwise the signed order is the unsigned one.
  const std::string zero = i64(im, 0);
  const std::string sa = im.op("lt", {a, zero}), sb = im.op("lt", {b, zero});
  const std::string differ = im.op("ne", {sa, sb});
  // Where the signs differ: a < b, a <= b ⟺ b is the negative one; a > b, a >= b ⟺ a is.
  const std::string by_sign = (op == "lt" || op == "le") ? sb : sa;
  return im.op("where", {differ, by_sign, im.op(op, {a, b})});
}

std::pair<std::string, std::string> udivmod64(Importer& im, const std::string& n, const std::string& d) {
  // Unsigned n / d for int64 bit patterns, no signed overflow anywhere (both where branches are
  // evaluated, so each is kept in range).
  const std::string zero = i64(im, 0), one = i64(im, 1), two = i64(im, 2);
  const std::string n_neg = im.op("lt", {n, zero}), d_neg = im.op("lt", {d, zero});
  // d >= 2^63: the quotient is 1 when n >= d (unsigned), else 0.
  const std::string big_ge = widened_compare(im, "ge", n, d, onnx::TensorProto::UINT64);
  const std::string q_big = im.cast(big_ge, DType::i64);
  const std::string r_big = im.op("sub", {n, im.op("where", {big_ge, d, zero})});
  // d < 2^63: n = 2h + b0 with h = n >> 1 (logical) < 2^63; h = fq·d + rh; then n = 2fq·d + (2rh + b0)
  // with 2rh + b0 < 2d: one correction step.
  const std::string fn = im.op("div", {n, two});                                      // ⌊n/2⌋ (signed)
  const std::string b0 = im.op("sub", {n, im.op("mul", {fn, two})});                  // n & 1
  const std::string c = im.op("where", {n_neg, i64(im, 4611686018427387904.0), zero});  // 2^62 where n < 0
  const std::string h = im.op("add", {im.op("add", {fn, c}), c});                      // ⌊n/2⌋ + 2^63 for n < 0
  const std::string ds = im.op("where", {d_neg, one, d});                              // the small path's divisor (> 0)
  const std::string fq = im.op("div", {h, ds});
  const std::string rh = im.op("sub", {h, im.op("mul", {fq, ds})});                   // [0, ds)
  // 2rh + b0 >= ds ⟺ rh >= ds - rh - b0 (all terms in range).
  const std::string gap = im.op("sub", {im.op("sub", {ds, rh}), b0});
  const std::string bump = im.op("ge", {rh, gap});
  const std::string r_hi = im.op("sub", {rh, gap});                                    // 2rh + b0 - ds where bump
  const std::string rh_lo = im.op("where", {bump, zero, rh});
  const std::string r_lo = im.op("add", {im.op("add", {rh_lo, rh_lo}), b0});           // 2rh + b0 where not bump
  const std::string r_small = im.op("where", {bump, r_hi, r_lo});
  // 2fq overflows only for ds = 1 (quotient n itself).
  const std::string d_one = im.op("eq", {ds, one});
  const std::string fq_safe = im.op("where", {d_one, zero, fq});
  const std::string q_small = im.op("where", {d_one, n, im.op("add", {im.op("add", {fq_safe, fq_safe}), im.cast(bump, DType::i64)})});
  return {im.op("where", {d_neg, q_big, q_small}), im.op("where", {d_neg, r_big, r_small})};
}

std::string widened_to_float(Importer& im, const std::string& x, int type, DType to) {
  if (type != onnx::TensorProto::UINT64) return im.cast(x, to);
  // x >= 2^63 (negative as int64): convert h | b0 (h = x >> 1, b0 = x & 1 kept as a sticky bit, so
  // the one rounding is the correct one) and double it.
  const std::string zero = i64(im, 0), two = i64(im, 2);
  const std::string fn = im.op("div", {x, two});
  const std::string b0 = im.op("sub", {x, im.op("mul", {fn, two})});
  const std::string c = im.op("where", {im.op("lt", {x, zero}), i64(im, 4611686018427387904.0), zero});
  const std::string h = im.op("add", {im.op("add", {fn, c}), c});
  const std::string h_odd = im.op("sub", {h, im.op("mul", {im.op("div", {h, two}), two})});
  const std::string sticky = im.op("add", {h, im.op("mul", {b0, im.op("sub", {i64(im, 1), h_odd})})});
  const std::string big = im.op("mul", {im.cast(sticky, DType::f32), im.scalar(DType::f32, 2.0)});
  return im.cast(im.op("where", {im.op("lt", {x, zero}), big, im.cast(x, DType::f32)}), to);
}

std::string cast_to_widened(Importer& im, const std::string& x, int from_wide, int to) {
  const DType st = *widened_storage(to);
  const DType dt = im.type(x).dtype;
  if (ir::is_float(dt) && to == onnx::TensorProto::UINT64) {
    // Values in [2^63, 2^64) do not fit int64: x - 2^64 (exact in float) has the same bits.
    const std::string xf = im.cast(x, DType::f32);
    const std::string big = im.op("ge", {xf, im.scalar(DType::f32, 9223372036854775808.0)});
    const std::string shifted = im.op("where", {big, im.op("sub", {xf, im.scalar(DType::f32, 18446744073709551616.0)}), xf});
    return im.cast(shifted, st);
  }
  (void)from_wide;  // a widened source holds its exact value (uint64: its bits): a plain cast then the wrap
  return wrap_widened(im, im.cast(x, st), to);
}

}  // namespace dinoml::onnx_import
