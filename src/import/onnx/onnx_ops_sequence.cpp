// ONNX sequences and optionals, resolved at import time. A sequence value is a list of DinoML
// tensors whose length is known at compile time (Importer::seqs): construction, insertion, erasure
// and element access at compile-time positions rearrange the list; SplitToSequence and
// ConcatFromSequence become slices and a concatenation. An optional is either empty
// (Importer::nones) or its value, so OptionalHasElement is a compile-time constant.
// (SequenceMap, which runs a body per element, is with the control-flow converters.)
#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;

// Position input k (a compile-time scalar) normalised into [0, len] (insert: `inclusive`) or
// [0, len).
int64_t position(Importer& im, NodeView& n, size_t k, int64_t len, bool inclusive) {
  const auto v = im.ints_of(n, k, "position");
  if (v.size() != 1) throw Invalid("position must be a scalar");
  int64_t p = v[0] < 0 ? v[0] + len : v[0];
  if (p < 0 || p > len || (!inclusive && p == len))
    throw Invalid("position " + std::to_string(v[0]) + " is outside the sequence of length " + std::to_string(len));
  return p;
}

void check_elem(Importer& im, NodeView& n, const Importer::Sequence& s, const std::string& x, int wide) {
  const DType dt = im.type(x).dtype;
  if (!s.elems.empty() && (dt != s.dtype || wide != s.wide))
    throw Invalid("a " + std::string(ir::dtype_name(dt)) + " tensor joins a sequence of " + std::string(ir::dtype_name(s.dtype)));
  (void)n;
}

void convert_sequence_construct(Importer& im, NodeView& n) {
  Importer::Sequence s;
  for (size_t k = 0; k < n.num_inputs(); ++k) {
    const std::string x = im.in(n, k);
    if (k == 0) {
      s.dtype = im.type(x).dtype;
      s.wide = im.wide_of(n, 0);
    }
    check_elem(im, n, s, x, im.wide_of(n, k));
    s.elems.push_back(x);
  }
  if (s.elems.empty()) throw Invalid("SequenceConstruct needs at least one input");
  im.set_seq(n, 0, s);
}

void convert_sequence_empty(Importer& im, NodeView& n) {
  Importer::Sequence s;
  const int t = static_cast<int>(n.i("dtype", onnx::TensorProto::FLOAT));
  s.dtype = storage_dtype(t, "SequenceEmpty dtype");
  if (widened_storage(t)) s.wide = t;
  im.set_seq(n, 0, s);
}

void convert_sequence_at(Importer& im, NodeView& n) {
  const auto& s = im.seq_in(n, 0);
  const int64_t p = position(im, n, 1, static_cast<int64_t>(s.elems.size()), false);
  im.set(n, 0, s.elems[static_cast<size_t>(p)]);
  if (s.wide && n.has_output(0)) im.wide[n.p.output(0)] = s.wide;
}

void convert_sequence_insert(Importer& im, NodeView& n) {
  Importer::Sequence s = im.seq_in(n, 0);
  const std::string x = im.in(n, 1);
  if (s.elems.empty()) {
    s.dtype = im.type(x).dtype;
    s.wide = im.wide_of(n, 1);
  }
  check_elem(im, n, s, x, im.wide_of(n, 1));
  const int64_t len = static_cast<int64_t>(s.elems.size());
  const int64_t p = n.has_input(2) ? position(im, n, 2, len, true) : len;
  s.elems.insert(s.elems.begin() + p, x);
  im.set_seq(n, 0, s);
}

void convert_sequence_erase(Importer& im, NodeView& n) {
  Importer::Sequence s = im.seq_in(n, 0);
  const int64_t len = static_cast<int64_t>(s.elems.size());
  if (len == 0) throw Invalid("SequenceErase on an empty sequence");
  const int64_t p = n.has_input(1) ? position(im, n, 1, len, false) : len - 1;
  s.elems.erase(s.elems.begin() + p);
  im.set_seq(n, 0, s);
}

void convert_sequence_length(Importer& im, NodeView& n) {
  ops::HostTensor h(DType::i64, {});
  h.set_i64(0, static_cast<int64_t>(im.seq_in(n, 0).elems.size()));
  im.known[n.p.output(0)] = h;
}

void convert_split_to_sequence(Importer& im, NodeView& n) {
  const std::string x = im.in(n, 0);
  const ir::Shape shape = im.type(x).shape;
  const int64_t r = static_cast<int64_t>(shape.size());
  const int64_t axis = normalize_axis(n.i("axis", 0), r, n);
  const bool keepdims = n.i("keepdims", 1) != 0;
  const ir::IntExpr ext = shape[static_cast<size_t>(axis)];
  if (!ext.is_const()) throw Unsupported("SplitToSequence along a symbolic axis (the sequence length must be known at compile time)");
  const int64_t len = ext.const_value();
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (n.has_input(1)) {
    const auto* v = im.in_value(n, 1);
    auto sp = im.ints_of(n, 1, "split");
    if (v && v->rank() == 0) {
      // One chunk size: chunks of that size, the last one smaller.
      if (sp[0] <= 0) throw Invalid("split must be positive");
      for (int64_t at = 0; at < len; at += sp[0]) sizes.push_back(std::min(sp[0], len - at));
    } else {
      sizes = sp;
    }
  } else {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = !keepdims;
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != len) throw Invalid("split sizes add up to " + std::to_string(total) + ", the axis has " + std::to_string(len));
  Importer::Sequence s;
  s.dtype = im.type(x).dtype;
  s.wide = im.wide_of(n, 0);
  int64_t at = 0;
  for (int64_t sz : sizes) {
    std::string part = im.op("slice", {x}, {{"starts", std::vector<int64_t>{at}}, {"ends", std::vector<int64_t>{at + sz}},
                                            {"axes", std::vector<int64_t>{axis}}, {"steps", std::vector<int64_t>{1}}});
    if (squeeze) part = im.op("squeeze", {part}, {{"axes", std::vector<int64_t>{axis}}});
    s.elems.push_back(part);
    at += sz;
  }
  im.set_seq(n, 0, s);
}

void convert_concat_from_sequence(Importer& im, NodeView& n) {
  const auto& s = im.seq_in(n, 0);
  if (s.elems.empty()) throw Unsupported("ConcatFromSequence of an empty sequence (empty tensor)");
  const bool new_axis = n.i("new_axis", 0) != 0;
  const int64_t r = static_cast<int64_t>(im.type(s.elems[0]).shape.size());
  const int64_t axis = normalize_axis(n.i_req("axis"), new_axis ? r + 1 : r, n);
  std::vector<std::string> parts;
  for (const auto& e : s.elems) parts.push_back(new_axis ? im.op("unsqueeze", {e}, {{"axes", std::vector<int64_t>{axis}}}) : e);
  im.set(n, 0, parts.size() == 1 ? im.op("add", {parts[0], like(im, parts[0], 0)})
                                 : im.op("concatenate", parts, {{"axis", axis}}));
  if (s.wide && n.has_output(0)) im.wide[n.p.output(0)] = s.wide;
}

void convert_optional(Importer& im, NodeView& n) {
  n.ignore("type");
  if (n.has_input(0)) im.alias(n, 0, n.input(0));
  else im.nones.insert(n.p.output(0));
}

void convert_optional_has_element(Importer& im, NodeView& n) {
  ops::HostTensor h(DType::boolean, {});
  h.set_i64(0, n.has_input(0) && !im.nones.count(n.input(0)) ? 1 : 0);
  im.known[n.p.output(0)] = h;
}

void convert_optional_get_element(Importer& im, NodeView& n) {
  if (im.nones.count(n.input(0))) throw Invalid("OptionalGetElement of an empty optional");
  im.alias(n, 0, n.input(0));
}

}  // namespace

void register_sequence_converters(ConverterTable& t) {
  t["SequenceConstruct"] = convert_sequence_construct;
  t["SequenceEmpty"] = convert_sequence_empty;
  t["SequenceAt"] = convert_sequence_at;
  t["SequenceInsert"] = convert_sequence_insert;
  t["SequenceErase"] = convert_sequence_erase;
  t["SequenceLength"] = convert_sequence_length;
  t["SplitToSequence"] = convert_split_to_sequence;
  t["ConcatFromSequence"] = convert_concat_from_sequence;
  t["Optional"] = convert_optional;
  t["OptionalHasElement"] = convert_optional_has_element;
  t["OptionalGetElement"] = convert_optional_get_element;
}

}  // namespace dinoml::onnx_import
