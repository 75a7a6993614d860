// ONNX Det, MaxUnpool, DFT, STFT, TfIdfVectorizer, CumSum and Einsum as DinoML graphs (each converter says how).
//   Det: Leibniz expansion over the n! permutations (n <= 4): sums of signed products of gathered
//        elements — exact arithmetic structure, meant for the small matrices Det is used on.
//   MaxUnpool: each input value placed at its flat index in the output via a one-hot comparison
//        with arange(out_numel) and a sum: O(in · out) work per (N, C) plane, for small planes.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <numeric>

#include "import/onnx/onnx_context.h"

namespace dinoml::onnx_import {
namespace {
using ir::DType;
using ir::IntExpr;

void convert_det(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  if (s.size() < 2) throw Invalid("node '" + n.name + "' (Det): input must have rank >= 2");
  if (!ir::is_float(im.type(x).dtype)) throw Unsupported("Det of " + std::string(ir::dtype_name(im.type(x).dtype)) + " tensors");
  const auto& a = s[s.size() - 2];
  const auto& b = s[s.size() - 1];
  if (!a.is_const() || !b.is_const()) throw Unsupported("Det of symbolic matrix extents");
  const int64_t m = a.const_value();
  if (m != b.const_value()) throw Invalid("node '" + n.name + "' (Det): matrices must be square, got " + std::to_string(m) + " x " + std::to_string(b.const_value()));
  if (m > 4) throw Unsupported("Det of " + std::to_string(m) + "x" + std::to_string(m) + " matrices (Leibniz expansion up to 4x4)");
  // Flatten the matrix: [..., m*m]; element (i, j) is column i*m+j.
  ir::Shape flat(s.begin(), s.end() - 2);
  flat.push_back(m * m);
  std::string xf = im.reshape(x, flat);
  const int64_t axis = static_cast<int64_t>(flat.size()) - 1;
  std::vector<int64_t> perm(static_cast<size_t>(m));
  std::iota(perm.begin(), perm.end(), 0);
  std::vector<std::string> cols(static_cast<size_t>(m * m));
  auto col = [&](int64_t k) {
    auto& c = cols[static_cast<size_t>(k)];
    if (c.empty()) {
      ops::HostTensor idx(DType::i64, {});
      idx.set_i64(0, k);
      c = im.op("gather", {xf, im.constant(idx, "det_idx")}, {{"axis", axis}});
    }
    return c;
  };
  std::string pos, neg;
  do {
    int inversions = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = i + 1; j < m; ++j) inversions += perm[static_cast<size_t>(i)] > perm[static_cast<size_t>(j)];
    std::string term = col(perm[0]);
    for (int64_t i = 1; i < m; ++i) term = im.op("mul", {term, col(i * m + perm[static_cast<size_t>(i)])});
    std::string& acc = inversions % 2 ? neg : pos;
    acc = acc.empty() ? term : im.op("add", {acc, term});
  } while (std::next_permutation(perm.begin(), perm.end()));
  im.set(n, 0, neg.empty() ? pos : im.op("sub", {pos, neg}));
}

void convert_max_unpool(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0), ind = im.in(n, 1);
  const auto s = im.type(x).shape;
  const size_t sp = s.size() >= 2 ? s.size() - 2 : 0;
  if (sp == 0) throw Invalid("node '" + n.name + "' (MaxUnpool): input must have rank >= 3");
  for (const auto& e : s)
    if (!e.is_const()) throw Unsupported("MaxUnpool with symbolic extents");
  if (!(im.type(ind).shape == s)) throw Invalid("node '" + n.name + "' (MaxUnpool): indices shape differs from X");
  std::vector<int64_t> k = n.ints("kernel_shape");
  std::vector<int64_t> stride = n.ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = n.ints("pads", std::vector<int64_t>(2 * sp, 0));
  if (k.size() != sp || stride.size() != sp || pads.size() != 2 * sp)
    throw Invalid("node '" + n.name + "' (MaxUnpool): kernel_shape/strides/pads do not match the spatial rank");
  // Indices address the default output ((in − 1)·stride + kernel − pads); a given output_shape
  // pads that result with zeros at the end of each spatial axis (as the reference does).
  std::vector<int64_t> out = {s[0].const_value(), s[1].const_value()};
  for (size_t i = 0; i < sp; ++i) out.push_back((s[i + 2].const_value() - 1) * stride[i] + k[i] - pads[i] - pads[i + sp]);
  std::vector<int64_t> given;
  if (n.has_input(2)) {
    given = im.ints_of(n, 2, "output_shape");
    if (given.size() != s.size()) throw Invalid("node '" + n.name + "' (MaxUnpool): output_shape must have one value per axis");
    for (size_t i = 0; i < s.size(); ++i)
      if (given[i] < out[i]) throw Unsupported("MaxUnpool output_shape smaller than the default output");
  }
  const int64_t N = s[0].const_value(), C = s[1].const_value();
  if (out[0] != N || out[1] != C) throw Invalid("node '" + n.name + "' (MaxUnpool): output_shape changes N or C");
  int64_t in_plane = 1, out_plane = 1;
  for (size_t i = 0; i < sp; ++i) {
    in_plane *= s[i + 2].const_value();
    out_plane *= out[i + 2];
  }
  if (in_plane * out_plane > (int64_t{1} << 24)) throw Unsupported("MaxUnpool planes this large (one-hot placement is O(in · out))");
  // ONNX indices are flat over the whole output tensor (N*C*spatial); make them per plane.
  std::string idx = im.cast(ind, DType::i64);
  ops::HostTensor base(DType::i64, {N, C, 1});
  for (int64_t i = 0; i < N * C; ++i) base.set_i64(i, i * out_plane);
  idx = im.op("sub", {im.reshape(idx, {N, C, in_plane}), im.constant(base, "unpool_base")});
  idx = im.reshape(idx, {N, C, in_plane, 1});
  std::string ar = im.reshape(im.op("arange", {}, {{"end", out_plane}, {"dtype", std::string("int64")}}), {1, 1, 1, out_plane});
  const DType dt = im.type(x).dtype;
  std::string onehot = im.cast(im.op("eq", {idx, ar}), dt);  // [N, C, in, out]
  std::string xv = im.reshape(x, {N, C, in_plane, 1});
  std::string y = im.op("reduce_sum", {im.op("mul", {onehot, xv})}, attrs_axes({2}, false));  // [N, C, out]
  y = im.reshape(y, ir::Shape(out.begin(), out.end()));
  if (!given.empty() && given != out) {
    std::vector<int64_t> p(2 * s.size(), 0);
    for (size_t i = 0; i < s.size(); ++i) p[i + s.size()] = given[i] - out[i];
    y = im.op("pad", {y}, {{"pads", p}, {"mode", std::string("constant")}, {"value", 0.0}});
  }
  im.set(n, 0, y);
}

// Transform over the last axis (length L) of xr (+ i·xi when xi is given) into K bins.
std::pair<std::string, std::string> dft_matrices(Importer& im, NodeView& n, const std::string& xr, const std::string& xi,
                                                 int64_t L, int64_t K, bool inverse) {
  ops::HostTensor cm(DType::f32, {L, K}), sm(DType::f32, {L, K});
  const double scale = inverse ? 1.0 / static_cast<double>(L) : 1.0;
  for (int64_t t = 0; t < L; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const double th = 2.0 * M_PI * static_cast<double>((k * t) % L) / static_cast<double>(L);
      cm.set_f64(t * K + k, scale * std::cos(th));
      sm.set_f64(t * K + k, scale * std::sin(th));
    }
  const std::string C = im.constant(cm, "dft_cos"), S = im.constant(sm, "dft_sin");
  std::string yr = onnx_matmul(im, n, xr, C);
  std::string yi = onnx_matmul(im, n, xr, S);
  if (!inverse) yi = im.op("neg", {yi});
  if (!xi.empty()) {
    std::string xis = onnx_matmul(im, n, xi, S), xic = onnx_matmul(im, n, xi, C);
    yr = inverse ? im.op("sub", {yr, xis}) : im.op("add", {yr, xis});
    yi = im.op("add", {yi, xic});
  }
  return {yr, yi};
}

// DFT as two real matrix products: with θ = 2π k n / L, the forward transform is
// Yr = Σ xr cos θ + xi sin θ, Yi = Σ xi cos θ − xr sin θ (inverse: signs of the sin terms flipped
// and a 1/L factor). The cos / sin matrices [L, K] are import-time constants (K = L, or L/2 + 1
// when onesided); the signal axis moves last for gemm_rrr and back afterwards.
void convert_dft(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  if (im.type(x).dtype != DType::f32) throw Unsupported("DFT of " + std::string(ir::dtype_name(im.type(x).dtype)) + " tensors (float32 only)");
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank < 2 || !s.back().is_const() || (s.back().const_value() != 1 && s.back().const_value() != 2))
    throw Invalid("node '" + n.name + "' (DFT): the last axis must hold 1 (real) or 2 (complex) components");
  const bool complex_in = s.back().const_value() == 2;
  int64_t axis = n.i("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1) throw Invalid("node '" + n.name + "' (DFT): axis " + std::to_string(n.i("axis", 1)) + " is not a signal axis");
  const bool inverse = n.i("inverse", 0) != 0, onesided = n.i("onesided", 0) != 0;
  if (inverse && onesided) throw Unsupported("onesided inverse DFT");
  if (!s[static_cast<size_t>(axis)].is_const()) throw Unsupported("DFT over a symbolic axis");
  int64_t N = s[static_cast<size_t>(axis)].const_value();
  int64_t L = N;
  if (n.has_input(1)) {
    auto v = im.ints_of(n, 1, "dft_length");
    if (v.size() != 1 || v[0] <= 0) throw Invalid("node '" + n.name + "' (DFT): dft_length must be one positive value");
    L = v[0];
  }
  const int64_t K = onesided ? L / 2 + 1 : L;
  // Components as [..., N] tensors with the signal axis last.
  auto component = [&](int64_t c) {
    ops::HostTensor idx(DType::i64, {});
    idx.set_i64(0, c);
    std::string v = im.op("gather", {x, im.constant(idx, "dft_component")}, {{"axis", rank - 1}});
    if (axis != rank - 2) {
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < rank - 1; ++i)
        if (i != axis) perm.push_back(i);
      perm.push_back(axis);
      v = im.op("permute", {v}, {{"dims", perm}});
    }
    const int64_t last = rank - 2;
    if (L < N) v = im.op("slice", {v}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{L}}, {"axes", std::vector<int64_t>{last}}});
    if (L > N) {
      std::vector<int64_t> pads(static_cast<size_t>(2 * (rank - 1)), 0);
      pads[static_cast<size_t>(2 * (rank - 1) - 1)] = L - N;
      v = im.op("pad", {v}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
    }
    return v;
  };
  auto [yr, yi] = dft_matrices(im, n, component(0), complex_in ? component(1) : std::string(), L, K, inverse);
  // Back to the signal axis' place, then stack (real, imaginary) on a new last axis.
  auto restore = [&](std::string v) {
    if (axis != rank - 2) {
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < rank - 1; ++i)
        if (i != axis) perm.push_back(i);
      perm.push_back(axis);
      std::vector<int64_t> inv(perm.size());
      for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
      v = im.op("permute", {v}, {{"dims", inv}});
    }
    return im.op("unsqueeze", {v}, {{"axes", std::vector<int64_t>{rank - 1}}});
  };
  im.set(n, 0, im.op("concatenate", {restore(yr), restore(yi)}, {{"axis", rank - 1}}));
}

// STFT: frames gathered with a constant [frames, frame_length] index map, multiplied by the
// window, then the DFT matrices above (onesided: frame_length/2 + 1 bins).
void convert_stft(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  if (im.type(x).dtype != DType::f32) throw Unsupported("STFT of " + std::string(ir::dtype_name(im.type(x).dtype)) + " signals (float32 only)");
  if (s.size() != 3 || !s[1].is_const() || !s[2].is_const() || (s[2].const_value() != 1 && s[2].const_value() != 2))
    throw Invalid("node '" + n.name + "' (STFT): signal must be [batch, length, 1 or 2]");
  const int64_t len = s[1].const_value();
  const bool complex_in = s[2].const_value() == 2;
  const bool onesided = n.i("onesided", 1) != 0;
  if (onesided && complex_in) throw Invalid("node '" + n.name + "' (STFT): onesided output of a complex signal");
  auto step_v = im.ints_of(n, 1, "frame_step");
  if (step_v.size() != 1 || step_v[0] <= 0) throw Invalid("node '" + n.name + "' (STFT): frame_step must be one positive value");
  const int64_t step = step_v[0];
  std::string window = n.has_input(2) ? im.in(n, 2) : std::string();
  int64_t flen = -1;
  if (n.has_input(3)) {
    auto v = im.ints_of(n, 3, "frame_length");
    if (v.size() != 1 || v[0] <= 0) throw Invalid("node '" + n.name + "' (STFT): frame_length must be one positive value");
    flen = v[0];
  }
  if (!window.empty()) {
    const auto ws = im.type(window).shape;
    if (ws.size() != 1 || !ws[0].is_const()) throw Invalid("node '" + n.name + "' (STFT): window must be 1-d with a static length");
    if (flen >= 0 && flen != ws[0].const_value()) throw Invalid("node '" + n.name + "' (STFT): window length differs from frame_length");
    flen = ws[0].const_value();
  }
  if (flen < 0) throw Invalid("node '" + n.name + "' (STFT): needs a window or frame_length");
  if (flen > len) throw Invalid("node '" + n.name + "' (STFT): frame_length exceeds the signal length");
  const int64_t frames = (len - flen) / step + 1;
  const int64_t K = onesided ? flen / 2 + 1 : flen;
  ops::HostTensor idx(DType::i64, {frames, flen});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < flen; ++t) idx.set_i64(f * flen + t, f * step + t);
  const std::string frame_idx = im.constant(idx, "stft_frames");
  auto component = [&](int64_t c) {
    ops::HostTensor ci(DType::i64, {});
    ci.set_i64(0, c);
    std::string v = im.op("gather", {x, im.constant(ci, "stft_component")}, {{"axis", int64_t{2}}});  // [B, len]
    v = im.op("gather", {v, frame_idx}, {{"axis", int64_t{1}}});                                        // [B, F, flen]
    if (!window.empty()) v = im.op("mul", {v, window});
    return v;
  };
  auto [yr, yi] = dft_matrices(im, n, component(0), complex_in ? component(1) : std::string(), flen, K, false);
  yr = im.op("unsqueeze", {yr}, {{"axes", std::vector<int64_t>{3}}});
  yi = im.op("unsqueeze", {yi}, {{"axes", std::vector<int64_t>{3}}});
  im.set(n, 0, im.op("concatenate", {yr, yi}, {{"axis", int64_t{3}}}));
}

// TfIdfVectorizer (integer pool, mode TF): for every n-gram length n in [min, max] and every
// element distance d (1 .. max_skip_count + 1; unigrams once), the windows X[.., i + j·d]
// (j < n) are compared with each pool n-gram (slices of X against constants, a product of the
// per-position matches) and summed over the start positions; a constant 0/1 matrix then places
// each pool entry's count at its ngram_indexes output position.
void convert_tfidf(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto xs = im.type(x).shape;
  const DType xt = im.type(x).dtype;
  if (xt != DType::i32 && xt != DType::i64) throw Unsupported("TfIdfVectorizer on " + std::string(ir::dtype_name(xt)) + " input (integer pools only)");
  if (xs.empty() || xs.size() > 2 || !xs.back().is_const()) throw Unsupported("TfIdfVectorizer input must be [L] or [B, L] with a static L");
  if (n.has("pool_strings")) throw Unsupported("string pools");
  const std::string mode = n.s("mode", "TF");
  if (mode != "TF") throw Unsupported("mode '" + mode + "' (TF only)");
  if (n.has("weights")) throw Unsupported("weights (mode TF ignores them)");
  const int64_t mn = n.i_req("min_gram_length"), mx = n.i_req("max_gram_length"), skip = n.i_req("max_skip_count");
  const auto counts = n.ints("ngram_counts"), indexes = n.ints("ngram_indexes"), pool = n.ints("pool_int64s");
  if (mn < 1 || mx < mn || skip < 0) throw Invalid("node '" + n.name + "' (TfIdfVectorizer): bad gram lengths or max_skip_count");
  // Pool entries per n-gram length: counts[k] is the start (in pool values) of the (k+1)-grams.
  struct Gram { int64_t len; std::vector<int64_t> vals; int64_t pos; };
  std::vector<Gram> grams;
  int64_t pos = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    const int64_t len = static_cast<int64_t>(k) + 1;
    const int64_t begin = counts[k], end = k + 1 < counts.size() ? counts[k + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % len != 0)
      throw Invalid("node '" + n.name + "' (TfIdfVectorizer): ngram_counts do not partition pool_int64s");
    for (int64_t p = begin; p < end; p += len) grams.push_back({len, std::vector<int64_t>(pool.begin() + p, pool.begin() + p + len), pos++});
  }
  if (indexes.size() != grams.size()) throw Invalid("node '" + n.name + "' (TfIdfVectorizer): ngram_indexes must hold one index per pool n-gram");
  int64_t out_size = 0;
  for (auto v : indexes) {
    if (v < 0) throw Invalid("node '" + n.name + "' (TfIdfVectorizer): negative ngram_indexes");
    out_size = std::max(out_size, v + 1);
  }
  const int64_t L = xs.back().const_value();
  const int64_t last = static_cast<int64_t>(xs.size()) - 1;
  std::string xi = im.cast(x, DType::i64);
  ir::Shape count_shape(xs.begin(), xs.end() - 1);
  count_shape.push_back(static_cast<int64_t>(grams.size()));
  std::string total;  // [.., P] counts per pool entry
  for (int64_t len = mn; len <= mx; ++len) {
    std::vector<const Gram*> gs;
    for (const auto& g : grams)
      if (g.len == len) gs.push_back(&g);
    if (gs.empty()) continue;
    const int64_t G = static_cast<int64_t>(gs.size());
    // Pool values of this length: [len][G], and the placement of these G entries among all P.
    ops::HostTensor place(DType::f32, {G, static_cast<int64_t>(grams.size())});
    for (int64_t g = 0; g < G; ++g) place.set_f64(g * static_cast<int64_t>(grams.size()) + gs[static_cast<size_t>(g)]->pos, 1.0);
    std::string acc;
    const int64_t dmax = len == 1 ? 1 : skip + 1;
    for (int64_t d = 1; d <= dmax; ++d) {
      const int64_t Lw = L - (len - 1) * d;
      if (Lw <= 0) break;
      std::string match;
      for (int64_t j = 0; j < len; ++j) {
        std::string sl = im.op("slice", {xi}, {{"starts", std::vector<int64_t>{j * d}}, {"ends", std::vector<int64_t>{j * d + Lw}},
                                                {"axes", std::vector<int64_t>{last}}});
        sl = im.op("unsqueeze", {sl}, {{"axes", std::vector<int64_t>{last + 1}}});
        ops::HostTensor vals(DType::i64, {G});
        for (int64_t g = 0; g < G; ++g) vals.set_i64(g, gs[static_cast<size_t>(g)]->vals[static_cast<size_t>(j)]);
        std::string eq = im.cast(im.op("eq", {sl, im.constant(vals, "tfidf_pool")}), DType::f32);  // [.., Lw, G]
        match = match.empty() ? eq : im.op("mul", {match, eq});
      }
      std::string c = im.op("reduce_sum", {match}, attrs_axes({last}, false));  // [.., G]
      acc = acc.empty() ? c : im.op("add", {acc, c});
    }
    if (acc.empty()) continue;
    std::string placed = onnx_matmul(im, n, acc, im.constant(place, "tfidf_place"));  // [.., P]
    total = total.empty() ? placed : im.op("add", {total, placed});
  }
  ops::HostTensor out_map(DType::f32, {static_cast<int64_t>(grams.size()), out_size});
  for (size_t p = 0; p < grams.size(); ++p) out_map.set_f64(static_cast<int64_t>(p) * out_size + indexes[p], 1.0);
  std::string y;
  if (total.empty()) {
    ir::Shape ys(xs.begin(), xs.end() - 1);
    ys.push_back(out_size);
    y = im.op("full", {}, {{"shape", ys}, {"value", 0.0}, {"dtype", std::string("float32")}});
  } else {
    y = onnx_matmul(im, n, total, im.constant(out_map, "tfidf_out"));
  }
  im.set(n, 0, y);
}

// CumSum along a compile-time axis as a log-step (Hillis–Steele) prefix sum: ⌈log2 L⌉ rounds of
// y += y shifted by d (pad d zeros in front, drop the last d), d = 1, 2, 4, ... — exact for
// integers, float sums in a tree order. exclusive shifts x by one first; reverse flips the axis
// (a constant `gather`) before and after.
void convert_cumsum(Importer& im, NodeView& n) {
  std::string x = im.in(n, 0);
  const auto s = im.type(x).shape;
  const DType dt = im.type(x).dtype;
  if (ir::is_bool(dt)) throw Unsupported("CumSum of bool tensors");
  auto av = im.ints_of(n, 1, "axis");
  if (av.size() != 1) throw Invalid("node '" + n.name + "' (CumSum): axis must be a scalar");
  const int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0) throw Invalid("node '" + n.name + "' (CumSum): input must have rank >= 1");
  const int64_t axis = normalize_axis(av[0], rank, n);
  if (!s[static_cast<size_t>(axis)].is_const()) throw Unsupported("CumSum over a symbolic axis");
  const int64_t L = s[static_cast<size_t>(axis)].const_value();
  const bool exclusive = n.i("exclusive", 0) != 0, reverse = n.i("reverse", 0) != 0;
  std::string rev;
  if (reverse && L > 1) {
    ops::HostTensor r(DType::i64, {L});
    for (int64_t i = 0; i < L; ++i) r.set_i64(i, L - 1 - i);
    rev = im.constant(r, "cumsum_reverse");
    x = im.op("gather", {x, rev}, {{"axis", axis}});
  }
  auto shift = [&](const std::string& v, int64_t d) {  // v[.., i - d, ..] with zeros for i < d
    std::string cut = im.op("slice", {v}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{L - d}}, {"axes", std::vector<int64_t>{axis}}});
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(axis)] = d;
    return im.op("pad", {cut}, {{"pads", pads}, {"mode", std::string("constant")}, {"value", 0.0}});
  };
  std::string y = x;
  if (exclusive) y = L > 1 ? shift(x, 1) : im.op("mul", {x, im.scalar(dt, 0.0)});
  for (int64_t d = 1; d < L; d *= 2) y = im.op("add", {y, shift(y, d)});
  if (!rev.empty()) y = im.op("gather", {y, rev}, {{"axis", axis}});
  im.set(n, 0, y);
}

// Einsum (float, explicit or implicit output, no ellipsis, no repeated index within one operand):
// each operand first sums out the indices no one else needs; operands are then folded left to
// right as batched matmuls — shared indices still needed later are batch axes, shared indices
// needed nowhere else are contracted (K), the rest are M / N — with permutes and reshapes around
// `bmm_rrr`; a final permute puts the output's index order.
struct EinTensor {
  std::string t;
  std::string idx;  // one letter per axis
};

void convert_einsum(Importer& im, NodeView& n) {
  std::string eq = n.s("equation", "");
  std::string e;
  for (char c : eq)
    if (c != ' ') e += c;
  if (e.find("...") != std::string::npos) throw Unsupported("Einsum with an ellipsis");
  std::string lhs = e, out;
  const auto arrow = e.find("->");
  const bool explicit_out = arrow != std::string::npos;
  if (explicit_out) {
    lhs = e.substr(0, arrow);
    out = e.substr(arrow + 2);
  }
  std::vector<std::string> terms;
  {
    std::string cur;
    for (char c : lhs) {
      if (c == ',') { terms.push_back(cur); cur.clear(); }
      else cur += c;
    }
    terms.push_back(cur);
  }
  if (terms.size() != n.num_inputs()) throw Invalid("node '" + n.name + "' (Einsum): the equation has " + std::to_string(terms.size()) + " operands, the node " + std::to_string(n.num_inputs()));
  std::map<char, int> count;
  std::map<char, ir::IntExpr> extent;
  std::vector<EinTensor> ops_;
  for (size_t k = 0; k < terms.size(); ++k) {
    const std::string x = im.in(n, k);
    if (!ir::is_float(im.type(x).dtype)) throw Unsupported("Einsum on " + std::string(ir::dtype_name(im.type(x).dtype)) + " tensors (float only)");
    const auto& s = im.type(x).shape;
    if (terms[k].size() != s.size()) throw Invalid("node '" + n.name + "' (Einsum): operand " + std::to_string(k) + " has rank " + std::to_string(s.size()) + " but '" + terms[k] + "' names " + std::to_string(terms[k].size()) + " axes");
    std::set<char> seen;
    for (size_t a = 0; a < terms[k].size(); ++a) {
      const char c = terms[k][a];
      if (!std::isalpha(static_cast<unsigned char>(c))) throw Invalid("node '" + n.name + "' (Einsum): bad index '" + std::string(1, c) + "'");
      if (!seen.insert(c).second) throw Unsupported("Einsum with a repeated index within one operand (diagonals)");
      ++count[c];
      if (extent.count(c) && !(extent[c] == s[a])) throw Invalid("node '" + n.name + "' (Einsum): index '" + std::string(1, c) + "' has different extents");
      extent[c] = s[a];
    }
    ops_.push_back({x, terms[k]});
  }
  if (!explicit_out)
    for (const auto& [c, k] : count)
      if (k == 1) out += c;  // implicit: indices appearing once, alphabetical
  for (char c : out)
    if (!count.count(c)) throw Invalid("node '" + n.name + "' (Einsum): output index '" + std::string(1, c) + "' is not in any operand");
  auto needed_later = [&](char c, size_t from) {
    if (out.find(c) != std::string::npos) return true;
    for (size_t k = from; k < ops_.size(); ++k)
      if (ops_[k].idx.find(c) != std::string::npos) return true;
    return false;
  };
  auto sum_out = [&](EinTensor& t, size_t from_other) {
    std::vector<int64_t> axes;
    std::string keep;
    for (size_t a = 0; a < t.idx.size(); ++a) {
      bool other = false;
      for (size_t k = 0; k < ops_.size(); ++k)
        if (k != from_other && ops_[k].idx.find(t.idx[a]) != std::string::npos && &ops_[k] != &t) other = true;
      if (!other && out.find(t.idx[a]) == std::string::npos) axes.push_back(static_cast<int64_t>(a));
      else keep += t.idx[a];
    }
    if (!axes.empty()) {
      t.t = im.op("reduce_sum", {t.t}, attrs_axes(axes, false));
      t.idx = keep;
    }
  };
  auto permute_to = [&](const EinTensor& t, const std::string& order) {
    if (t.idx == order) return t.t;
    std::vector<int64_t> perm;
    for (char c : order) perm.push_back(static_cast<int64_t>(t.idx.find(c)));
    return im.op("permute", {t.t}, {{"dims", perm}});
  };
  auto prod = [&](const std::string& letters) {
    ir::IntExpr p(int64_t{1});
    for (char c : letters) p = p * extent[c];
    return p;
  };
  EinTensor acc = ops_[0];
  sum_out(acc, 0);
  for (size_t k = 1; k < ops_.size(); ++k) {
    EinTensor b = ops_[k];
    sum_out(b, k);
    std::string batch, contract, left, right;
    for (char c : acc.idx) {
      if (b.idx.find(c) != std::string::npos) (needed_later(c, k + 1) ? batch : contract) += c;
      else left += c;
    }
    for (char c : b.idx)
      if (acc.idx.find(c) == std::string::npos) right += c;
    std::string a3 = im.reshape(permute_to(acc, batch + left + contract), {prod(batch), prod(left), prod(contract)});
    std::string b3 = im.reshape(permute_to(b, batch + contract + right), {prod(batch), prod(contract), prod(right)});
    ir::Shape rs;
    for (char c : batch + left + right) rs.push_back(extent[c]);
    acc = {im.reshape(im.op("bmm_rrr", {a3, b3}), rs), batch + left + right};
    // Indices of the result that nobody needs any more are summed out.
    std::vector<int64_t> axes;
    std::string keep;
    for (size_t a = 0; a < acc.idx.size(); ++a) {
      if (needed_later(acc.idx[a], k + 1)) keep += acc.idx[a];
      else axes.push_back(static_cast<int64_t>(a));
    }
    if (!axes.empty()) acc = {im.op("reduce_sum", {acc.t}, attrs_axes(axes, false)), keep};
  }
  if (ops_.size() == 1) {
    std::vector<int64_t> axes;
    std::string keep;
    for (size_t a = 0; a < acc.idx.size(); ++a) {
      if (out.find(acc.idx[a]) == std::string::npos) axes.push_back(static_cast<int64_t>(a));
      else keep += acc.idx[a];
    }
    if (!axes.empty()) acc = {im.op("reduce_sum", {acc.t}, attrs_axes(axes, false)), keep};
  }
  for (char c : acc.idx)
    if (out.find(c) == std::string::npos) throw Invalid("node '" + n.name + "' (Einsum): internal index bookkeeping");
  im.set(n, 0, out.empty() ? acc.t : permute_to(acc, out));
}

}  // namespace

void register_misc_converters(ConverterTable& t) {
  t["Det"] = convert_det;
  t["MaxUnpool"] = convert_max_unpool;
  t["DFT"] = convert_dft;
  t["CumSum"] = convert_cumsum;
  t["Einsum"] = convert_einsum;
  t["STFT"] = convert_stft;
  t["TfIdfVectorizer"] = convert_tfidf;
}

}  // namespace dinoml::onnx_import
