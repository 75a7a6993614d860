// ONNX indexing operators without a direct DinoML op, built from gather / one-hot selections:
// GatherElements, ScatterElements (and Scatter), GatherND, ScatterND, ReverseSequence.
#include <algorithm>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

// GatherElements as a one-hot selection: out[p] = Σ_l (idx[p] == l) · data'[p, l], where data'
// is data restricted to the index tensor's extents with the gathered axis moved last. O(numel·L)
// work, exact for every dtype but bool.
void convert_gather_elements(Importer& im, NodeView& n) {
  std::string data = im.in(n, 0), idx = im.in(n, 1);
  const auto ds = im.type(data).shape, is = im.type(idx).shape;
  const int64_t r = static_cast<int64_t>(ds.size());
  if (static_cast<int64_t>(is.size()) != r) throw Invalid("GatherElements: data and indices ranks differ");
  const int64_t axis = normalize_axis(n.i("axis", 0), r, n);
  const auto& le = ds[static_cast<size_t>(axis)];
  if (!le.is_const()) throw Unsupported("GatherElements over a symbolic axis");
  if (ir::is_bool(im.type(data).dtype)) throw Unsupported("GatherElements on bool data");
  const int64_t L = le.const_value();
  // Restrict data to the indices' extents on the other axes.
  std::vector<int64_t> starts, ends, axes;
  for (int64_t a = 0; a < r; ++a) {
    if (a == axis || ds[static_cast<size_t>(a)] == is[static_cast<size_t>(a)]) continue;
    if (!is[static_cast<size_t>(a)].is_const()) throw Unsupported("GatherElements with symbolic index extents");
    starts.push_back(0);
    ends.push_back(is[static_cast<size_t>(a)].const_value());
    axes.push_back(a);
  }
  if (!axes.empty()) data = im.op("slice", {data}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < r; ++a)
    if (a != axis) perm.push_back(a);
  perm.push_back(axis);
  if (axis != r - 1) data = im.op("permute", {data}, {{"dims", perm}});
  data = im.op("unsqueeze", {data}, {{"axes", std::vector<int64_t>{axis}}});  // [.., 1 at axis, .., L]
  std::string iv = im.cast(idx, DType::i64);
  iv = im.op("where", {im.op("lt", {iv, im.scalar(DType::i64, 0)}), im.op("add", {iv, im.scalar(DType::i64, double(L))}), iv});
  iv = im.op("unsqueeze", {iv}, {{"axes", std::vector<int64_t>{r}}});
  ir::Shape ar_shape(static_cast<size_t>(r + 1), IntExpr(1));
  ar_shape[static_cast<size_t>(r)] = L;
  std::string ar = im.reshape(im.op("arange", {}, {{"end", L}, {"dtype", std::string("int64")}}), ar_shape);
  std::string hot = im.op("eq", {iv, ar});
  std::string picked = im.op("where", {hot, data, im.scalar(im.type(data).dtype, 0)});
  im.set(n, 0, im.op("reduce_sum", {picked}, attrs_axes({r}, false)));
}

// ScatterElements (and the older Scatter) as a one-hot selection: for every output position q on
// the axis, hot[p, q] = (idx[p] == q); the scattered value is Σ_p-on-axis hot · updates, and
// positions that no index hits keep `data`. Needs the index tensor to span data's other axes.
void convert_scatter_elements(Importer& im, NodeView& n) {
  std::string data = im.in(n, 0), idx = im.in(n, 1), upd = im.in(n, 2);
  const auto ds = im.type(data).shape, is = im.type(idx).shape;
  const int64_t r = static_cast<int64_t>(ds.size());
  if (static_cast<int64_t>(is.size()) != r) throw Invalid("ScatterElements: data and indices ranks differ");
  const int64_t axis = normalize_axis(n.i("axis", 0), r, n);
  const std::string reduction = n.s("reduction", "none");
  if (reduction != "none" && reduction != "add") throw Unsupported("reduction '" + reduction + "'");
  for (int64_t a = 0; a < r; ++a)
    if (a != axis && !(ds[static_cast<size_t>(a)] == is[static_cast<size_t>(a)]))
      throw Unsupported("ScatterElements whose indices do not span data's other axes");
  const auto& le = ds[static_cast<size_t>(axis)];
  if (!le.is_const()) throw Unsupported("ScatterElements over a symbolic axis");
  const DType dt = im.type(data).dtype;
  if (ir::is_bool(dt)) throw Unsupported("ScatterElements on bool data");
  const int64_t L = le.const_value();
  std::string iv = im.cast(idx, DType::i64);
  iv = im.op("where", {im.op("lt", {iv, im.scalar(DType::i64, 0)}), im.op("add", {iv, im.scalar(DType::i64, double(L))}), iv});
  iv = im.op("unsqueeze", {iv}, {{"axes", std::vector<int64_t>{r}}});  // [I..., 1]
  ir::Shape ar_shape(static_cast<size_t>(r + 1), IntExpr(1));
  ar_shape[static_cast<size_t>(r)] = L;
  std::string ar = im.reshape(im.op("arange", {}, {{"end", L}, {"dtype", std::string("int64")}}), ar_shape);
  std::string hot = im.op("eq", {iv, ar});  // [I..., L]
  std::string u = im.op("unsqueeze", {upd}, {{"axes", std::vector<int64_t>{r}}});
  std::string summed = im.op("reduce_sum", {im.op("where", {hot, u, im.scalar(dt, 0)})}, attrs_axes({axis}, false));
  std::string hit = im.op("gt", {im.op("reduce_sum", {im.cast(hot, DType::i32)}, attrs_axes({axis}, false)), im.scalar(DType::i32, 0)});
  // summed/hit have data's axes without `axis`, plus L last: move L back to `axis`.
  std::vector<int64_t> perm;
  for (int64_t a = 0; a < r; ++a) perm.push_back(a < axis ? a : (a == axis ? r - 1 : a - 1));
  if (axis != r - 1) {
    summed = im.op("permute", {summed}, {{"dims", perm}});
    hit = im.op("permute", {hit}, {{"dims", perm}});
  }
  std::string scattered = reduction == "add" ? im.op("add", {data, summed}) : summed;
  im.set(n, 0, im.op("where", {hit, scattered, data}));
}

// GatherND (batch_dims = 0): the first k axes of data are flattened into one, the index tuples
// become linear indices Σ idx_j · stride_j (negative components wrapped), and one gather on the
// flattened axis picks the slices.
void convert_gather_nd(Importer& im, NodeView& n) {
  std::string data = im.in(n, 0), idx = im.in(n, 1);
  const int64_t bd = n.i("batch_dims", 0);
  auto ds = im.type(data).shape, is = im.type(idx).shape;
  if (is.empty() || !is.back().is_const()) throw Unsupported("GatherND needs a static index depth");
  ir::Shape out_batch;
  if (bd != 0) {
    // batch_dims b: flatten the b batch axes of data and indices into one axis of extent B and
    // prepend the batch position to every index tuple; then it is GatherND with batch_dims 0.
    if (bd < 0 || bd >= static_cast<int64_t>(std::min(ds.size(), is.size())))
      throw Invalid("node '" + n.name + "' (GatherND): batch_dims " + std::to_string(bd) + " out of range");
    int64_t B = 1;
    for (int64_t j = 0; j < bd; ++j) {
      if (!ds[static_cast<size_t>(j)].is_const() || !(ds[static_cast<size_t>(j)] == is[static_cast<size_t>(j)]))
        throw Unsupported("GatherND batch axes must be static and equal in data and indices");
      B *= ds[static_cast<size_t>(j)].const_value();
      out_batch.push_back(ds[static_cast<size_t>(j)]);
    }
    ir::Shape dflat{IntExpr(B)}, iflat{IntExpr(B)}, bshape{IntExpr(B)};
    dflat.insert(dflat.end(), ds.begin() + bd, ds.end());
    iflat.insert(iflat.end(), is.begin() + bd, is.end());
    data = im.reshape(data, dflat);
    idx = im.reshape(im.cast(idx, DType::i64), iflat);
    for (size_t j = static_cast<size_t>(bd); j < is.size(); ++j) bshape.push_back(IntExpr(1));
    ir::Shape bfull = iflat;
    bfull.back() = IntExpr(1);
    std::string bidx = im.reshape(im.op("arange", {}, {{"end", B}, {"dtype", std::string("int64")}}), bshape);
    bidx = im.op("expand", {bidx}, {{"shape", bfull}});
    idx = im.op("concatenate", {bidx, idx}, {{"axis", static_cast<int64_t>(iflat.size()) - 1}});
    ds = im.type(data).shape;
    is = im.type(idx).shape;
  }
  const int64_t k = is.back().const_value();
  if (k < 1 || k > static_cast<int64_t>(ds.size())) throw Invalid("GatherND index depth out of range");
  // Extents and strides of the k indexed axes; symbolic ones (a [batch, seq] mask indexed by
  // position tuples) become run-time tensors.
  SymValue extent, stride;
  stride.values.assign(static_cast<size_t>(k), IntExpr(1));
  IntExpr st(1);
  for (int64_t j = k - 1; j >= 0; --j) {
    stride.values[static_cast<size_t>(j)] = st;
    st = st * ds[static_cast<size_t>(j)];
  }
  extent.values.assign(ds.begin(), ds.begin() + k);
  std::string iv = im.cast(idx, DType::i64);
  std::string ext = im.sym_tensor(extent, "gathernd_extent");
  iv = im.op("where", {im.op("lt", {iv, im.scalar(DType::i64, 0)}), im.op("add", {iv, ext}), iv});
  const int64_t ri = static_cast<int64_t>(is.size());
  std::string lin = im.op("reduce_sum", {im.op("mul", {iv, im.sym_tensor(stride, "gathernd_stride")})}, attrs_axes({ri - 1}, false));
  ir::Shape flat{st};
  flat.insert(flat.end(), ds.begin() + k, ds.end());
  std::string y = im.op("gather", {im.reshape(data, flat), lin}, {{"axis", int64_t{0}}});
  if (bd != 0) {
    ir::Shape ys = out_batch;
    const auto s1 = im.type(y).shape;
    ys.insert(ys.end(), s1.begin() + 1, s1.end());
    y = im.reshape(y, ys);
  }
  im.set(n, 0, y);
}

// ReverseSequence with compile-time sequence_lens: one gather over the flattened [batch·time]
// axis with the constant index map b·T + (t < len_b ? len_b − 1 − t : t).
void convert_reverse_sequence(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto& lens = im.value_of(n, 1, "sequence_lens");
  const int64_t batch_axis = n.i("batch_axis", 1), time_axis = n.i("time_axis", 0);
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    throw Invalid("batch_axis/time_axis must be 0 and 1");
  auto s = im.type(x).shape;
  if (s.size() < 2 || !s[0].is_const() || !s[1].is_const()) throw Unsupported("ReverseSequence with symbolic batch/time");
  std::vector<int64_t> perm;
  for (size_t a = 0; a < s.size(); ++a) perm.push_back(static_cast<int64_t>(a));
  if (batch_axis == 1) {
    std::swap(perm[0], perm[1]);
    x = im.op("permute", {x}, {{"dims", perm}});
    s = im.type(x).shape;
  }
  const int64_t B = s[0].const_value(), T = s[1].const_value();
  if (lens.numel() != B) throw Invalid("sequence_lens must hold one length per batch entry");
  ops::HostTensor map(DType::i64, {B * T});
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = std::clamp<int64_t>(lens.get_i64(b), 0, T);
    for (int64_t t = 0; t < T; ++t) map.set_i64(b * T + t, b * T + (t < len ? len - 1 - t : t));
  }
  ir::Shape flat{IntExpr(B * T)};
  flat.insert(flat.end(), s.begin() + 2, s.end());
  std::string y = im.op("gather", {im.reshape(x, flat), im.constant(map, "reverse_map")}, {{"axis", int64_t{0}}});
  y = im.reshape(y, s);
  if (batch_axis == 1) y = im.op("permute", {y}, {{"dims", perm}});
  im.set(n, 0, y);
}

// ScatterND: index tuples become linear indices into data's first k axes flattened to M rows; a
// one-hot [U, M] against arange(M) places the U update slices (reduction none / add: one masked
// sum; mul / max / min: the U updates applied in order, one masked step each, exact).
void convert_scatter_nd(Importer& im, NodeView& n) {
  std::string data = im.in(n, 0), idx = im.in(n, 1), upd = im.in(n, 2);
  const std::string reduction = n.s("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min")
    throw Invalid("reduction '" + reduction + "' (none, add, mul, max or min)");
  const auto ds = im.type(data).shape, is = im.type(idx).shape;
  const DType dt = im.type(data).dtype;
  if (ir::is_bool(dt)) throw Unsupported("ScatterND on bool data");
  if (is.empty() || !is.back().is_const()) throw Unsupported("ScatterND needs a static index depth");
  const int64_t k = is.back().const_value();
  if (k < 1 || k > static_cast<int64_t>(ds.size())) throw Invalid("ScatterND index depth out of range");
  int64_t M = 1;
  ops::HostTensor extent(DType::i64, {k}), stride(DType::i64, {k});
  for (int64_t j = k - 1; j >= 0; --j) {
    if (!ds[static_cast<size_t>(j)].is_const()) throw Unsupported("ScatterND over symbolic axes");
    extent.set_i64(j, ds[static_cast<size_t>(j)].const_value());
    stride.set_i64(j, M);
    M *= ds[static_cast<size_t>(j)].const_value();
  }
  ir::Shape rest(ds.begin() + k, ds.end());
  const int64_t rr = static_cast<int64_t>(rest.size());
  std::string iv = im.cast(idx, DType::i64);
  iv = im.op("where", {im.op("lt", {iv, im.scalar(DType::i64, 0)}), im.op("add", {iv, im.constant(extent, "scatternd_extent")}), iv});
  const int64_t ri = static_cast<int64_t>(is.size());
  std::string lin = im.op("reduce_sum", {im.op("mul", {iv, im.constant(stride, "scatternd_stride")})}, attrs_axes({ri - 1}, false));
  IntExpr U = ir::shape_numel(im.type(lin).shape);
  ir::Shape hot_shape{U, IntExpr(1)};
  lin = im.reshape(lin, hot_shape);  // [U, 1]
  std::string ar = im.reshape(im.op("arange", {}, {{"end", M}, {"dtype", std::string("int64")}}), {IntExpr(1), IntExpr(M)});
  std::string hot = im.op("eq", {lin, ar});  // [U, M]
  ir::Shape hot_b{U, IntExpr(M)};
  for (int64_t a = 0; a < rr; ++a) hot_b.push_back(1);
  std::string hotb = im.reshape(hot, hot_b);
  ir::Shape upd_b{U, IntExpr(1)};
  upd_b.insert(upd_b.end(), rest.begin(), rest.end());
  std::string u = im.reshape(upd, upd_b);
  ir::Shape flat{IntExpr(M)};
  flat.insert(flat.end(), rest.begin(), rest.end());
  if (reduction == "mul" || reduction == "max" || reduction == "min") {
    if (!U.is_const()) throw Unsupported("ScatterND reduction '" + reduction + "' with a symbolic number of updates");
    if (U.const_value() > 4096) throw Unsupported("ScatterND reduction '" + reduction + "' of more than 4096 updates (unrolled)");
    std::string res = im.reshape(data, flat);
    const std::string op = reduction == "mul" ? "mul" : reduction;
    for (int64_t i = 0; i < U.const_value(); ++i) {
      auto row = [&](const std::string& t) {
        return im.op("squeeze", {im.op("slice", {t}, {{"starts", std::vector<int64_t>{i}}, {"ends", std::vector<int64_t>{i + 1}},
                                                       {"axes", std::vector<int64_t>{0}}, {"steps", std::vector<int64_t>{1}}})},
                     {{"axes", std::vector<int64_t>{0}}});
      };
      res = im.op("where", {row(hotb), im.op(op, {res, row(u)}), res});
    }
    im.set(n, 0, im.reshape(res, ds));
    return;
  }
  std::string scattered = im.op("reduce_sum", {im.op("where", {hotb, u, im.scalar(dt, 0)})}, attrs_axes({0}, false));
  std::string hit = im.op("gt", {im.op("reduce_sum", {im.cast(hotb, DType::i32)}, attrs_axes({0}, false)), im.scalar(DType::i32, 0)});
  std::string d = im.reshape(data, flat);
  std::string res = reduction == "add" ? im.op("add", {d, scattered}) : scattered;
  im.set(n, 0, im.reshape(im.op("where", {hit, res, d}), ds));
}

}  // namespace

void register_indexing_converters(ConverterTable& t) {
  t["GatherElements"] = convert_gather_elements;
  t["ScatterElements"] = convert_scatter_elements;
  t["Scatter"] = convert_scatter_elements;
  t["GatherND"] = convert_gather_nd;
  t["ScatterND"] = convert_scatter_nd;
  t["ReverseSequence"] = convert_reverse_sequence;
}

}  // namespace dinoml::onnx_import
