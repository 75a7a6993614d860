// GEMM family: gemm_{rcr,rrr}[_epilogue] and bmm_{rrr,rcr}.
// The twenty gemm names are the product of two tables (layout x epilogue) so that every
// variant shares one schema, one shape rule and one reference loop; an epilogue is just
// "which extra inputs (bias, residual d) and which activation". The tables are the family's
// only spelling of its names (gemm.h: gemm_variant / gemm_op_name).
#include "ops/gemm.h"

#include <map>

#include "ops/op_helpers.h"

namespace dinoml::ops {
namespace {

using Act = GemmAct;

struct Epilogue {
  const char* suffix;
  bool bias;      // + bias[N]
  bool residual;  // + d[..., M, N]
  Act act;        // applied last
  const char* doc;
  const char* code;  // the kernels' epilogue constant (gemm_epilogue_code)
};

const Epilogue kEpilogues[] = {
    {"", false, false, Act::none, "a·b", "NONE"},
    {"_bias", true, false, Act::none, "a·b + bias", "NONE"},
    {"_bias_relu", true, false, Act::relu, "relu(a·b + bias)", "RELU"},
    {"_bias_gelu", true, false, Act::gelu, "gelu(a·b + bias), erf form", "GELU"},
    {"_bias_fast_gelu", true, false, Act::fast_gelu, "gelu(a·b + bias), tanh form", "FAST_GELU"},
    {"_bias_swish", true, false, Act::swish, "swish(a·b + bias) = x·sigmoid(x)", "SWISH"},
    {"_bias_sigmoid", true, false, Act::sigmoid, "sigmoid(a·b + bias)", "SIGMOID"},
    {"_bias_tanh", true, false, Act::tanh, "tanh(a·b + bias)", "TANH"},
    {"_bias_add", true, true, Act::none, "a·b + bias + d", "ADD"},
    {"_bias_add_relu", true, true, Act::relu, "relu(a·b + bias + d)", "ADD_RELU"},
};

// Layout letters: r = row-major, c = column-major. Only b's layout varies here:
// "rcr" stores b as [N, K] (a Linear layer's weight), "rrr" as [K, N].
struct Layout {
  const char* name;
  bool b_is_nk;
};
const Layout kLayouts[] = {{"rcr", true}, {"rrr", false}};

// Elementwise ops that fold into a GEMM epilogue as its activation.
const std::map<std::string, Act>& elementwise_acts() {
  static const std::map<std::string, Act> m = {{"relu", Act::relu},       {"gelu", Act::gelu},
                                               {"fast_gelu", Act::fast_gelu}, {"silu", Act::swish},
                                               {"sigmoid", Act::sigmoid}, {"tanh", Act::tanh}};
  return m;
}

double activate(Act a, double x) {
  switch (a) {
    case Act::none: return x;
    case Act::relu: return detail::relu(x);
    case Act::gelu: return detail::gelu(x);
    case Act::fast_gelu: return detail::fast_gelu(x);
    case Act::swish: return detail::silu(x);
    case Act::sigmoid: return detail::sigmoid(x);
    case Act::tanh: return std::tanh(x);
  }
  return x;
}

const Epilogue& epilogue_of(const GemmVariant& v) {
  for (const Epilogue& e : kEpilogues)
    if (e.bias == v.bias && e.residual == v.residual && e.act == v.act) return e;
  return kEpilogues[0];  // not reached for a registered variant
}

void expect_float_same(const InferContext& ctx) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) ctx.expect_float(i);
  detail::expect_all_same_dtype(ctx);
}

// K/N extents of b for the layout; `axis` says which axis of b holds K (for messages).
struct BDims {
  ir::IntExpr k, n;
  size_t k_axis;
};
BDims b_dims(const ir::Shape& b, bool nk) {
  size_t r = b.size();
  return nk ? BDims{b[r - 1], b[r - 2], r - 1} : BDims{b[r - 2], b[r - 1], r - 2};
}

void check_k(const InferContext& ctx, const ir::IntExpr& ka, const BDims& bd) {
  if (ka != bd.k)
    ctx.fail("K mismatch: a " + detail::describe_input(ctx, 0) + " has K = '" + ka.to_string() +
             "' (last axis) but b " + detail::describe_input(ctx, 1) + " has K = '" + bd.k.to_string() +
             "' (axis " + std::to_string(bd.k_axis) + ")");
}

std::vector<TensorType> infer_gemm(const GemmVariant& e, const InferContext& ctx) {
  expect_float_same(ctx);
  const auto& a = ctx.inputs[0].shape;
  const auto& b = ctx.inputs[1].shape;
  if (a.size() < 2) ctx.fail("a " + detail::describe_input(ctx, 0) + " must have rank >= 2 ([..., M, K])");
  if (b.size() != 2)
    ctx.fail("b " + detail::describe_input(ctx, 1) + " must have rank 2 (" + (e.b_is_nk ? "[N, K]" : "[K, N]") + ")");
  BDims bd = b_dims(b, e.b_is_nk);
  check_k(ctx, a.back(), bd);
  ir::Shape out(a.begin(), a.end() - 1);
  out.push_back(bd.n);
  if (e.bias) {
    const auto& bias = ctx.inputs[2].shape;
    if (bias.size() != 1 || bias[0] != bd.n)
      ctx.fail("bias " + detail::describe_input(ctx, 2) + " must have shape [N] = [" + bd.n.to_string() +
               "] (N from b " + detail::describe_input(ctx, 1) + ")");
  }
  if (e.residual && ctx.inputs[3].shape != out)
    ctx.fail("residual d " + detail::describe_input(ctx, 3) + " must have the output shape " +
             ir::shape_to_string(out));
  return {{ctx.inputs[0].dtype, out}};
}

std::vector<HostTensor> ref_gemm(const GemmVariant& e, const RefContext& ctx) {
  const HostTensor& a = ctx.in(0);
  const HostTensor& b = ctx.in(1);
  const int64_t K = a.shape.back();
  const int64_t N = e.b_is_nk ? b.shape[0] : b.shape[1];
  if ((e.b_is_nk ? b.shape[1] : b.shape[0]) != K)
    detail::ref_fail(ctx, "K mismatch: a " + a.shape_string() + " vs b " + b.shape_string());
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  // Leading dims of a fold into M (taken from the output so that K = 0 still works).
  const int64_t M = N ? out.numel() / N : 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += a.get_f64(m * K + k) * b.get_f64(e.b_is_nk ? n * K + k : k * N + n);
      if (e.bias) acc += ctx.in(2).get_f64(n);
      if (e.residual) acc += ctx.in(3).get_f64(m * N + n);
      out.set_f64(m * N + n, activate(e.act, acc));
    }
  return {out};
}

std::vector<TensorType> infer_bmm(const GemmVariant& l, const InferContext& ctx) {
  expect_float_same(ctx);
  const auto& a = ctx.inputs[0].shape;
  const auto& b = ctx.inputs[1].shape;
  if (a.size() < 3) ctx.fail("a " + detail::describe_input(ctx, 0) + " must have rank >= 3 ([..., M, K])");
  if (b.size() < 3)
    ctx.fail("b " + detail::describe_input(ctx, 1) + " must have rank >= 3 (" +
             (l.b_is_nk ? "[..., N, K]" : "[..., K, N]") + ")");
  BDims bd = b_dims(b, l.b_is_nk);
  check_k(ctx, a.back(), bd);
  ir::Shape batch;
  try {
    batch = ctx.broadcast(ir::Shape(a.begin(), a.end() - 2), ir::Shape(b.begin(), b.end() - 2));
  } catch (const OpError& err) {
    throw OpError(std::string(err.what()) + " (batch dims of a " + detail::describe_input(ctx, 0) + " and b " +
                  detail::describe_input(ctx, 1) + ")");
  }
  batch.push_back(a[a.size() - 2]);
  batch.push_back(bd.n);
  return {{ctx.inputs[0].dtype, batch}};
}

std::vector<HostTensor> ref_bmm(const GemmVariant& l, const RefContext& ctx) {
  const HostTensor& a = ctx.in(0);
  const HostTensor& b = ctx.in(1);
  HostTensor out(ctx.out_dtypes.at(0), ctx.out_shapes.at(0));
  const int64_t M = a.shape[a.rank() - 2], K = a.shape.back();
  const int64_t N = l.b_is_nk ? b.shape[b.rank() - 2] : b.shape.back();
  std::vector<int64_t> a_batch(a.shape.begin(), a.shape.end() - 2), b_batch(b.shape.begin(), b.shape.end() - 2);
  std::vector<int64_t> o_batch(out.shape.begin(), out.shape.end() - 2);
  detail::for_each_index(o_batch, [&](const std::vector<int64_t>& idx, int64_t ob) {
    int64_t ao = broadcast_offset(idx, a_batch) * M * K;
    int64_t bo = broadcast_offset(idx, b_batch) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a.get_f64(ao + m * K + k) * b.get_f64(bo + (l.b_is_nk ? n * K + k : k * N + n));
        out.set_f64(ob * M * N + m * N + n, acc);
      }
  });
  return {out};
}

}  // namespace

const std::vector<GemmOp>& gemm_ops() {
  static const std::vector<GemmOp> ops = [] {
    std::vector<GemmOp> v;
    for (const Layout& l : kLayouts) {
      for (const Epilogue& e : kEpilogues)
        v.push_back({std::string("gemm_") + l.name + e.suffix, GemmVariant{false, l.b_is_nk, e.bias, e.residual, e.act}, e.doc});
      v.push_back({std::string("bmm_") + l.name, GemmVariant{true, l.b_is_nk, false, false, Act::none}, ""});
    }
    return v;
  }();
  return ops;
}

std::optional<GemmVariant> gemm_variant(const std::string& op) {
  static const std::map<std::string, GemmVariant> by_name = [] {
    std::map<std::string, GemmVariant> m;
    for (const GemmOp& g : gemm_ops()) m[g.name] = g.variant;
    return m;
  }();
  auto it = by_name.find(op);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> gemm_op_name(const GemmVariant& v) {
  for (const GemmOp& g : gemm_ops())
    if (g.variant == v) return g.name;
  return std::nullopt;
}

std::optional<GemmAct> gemm_act_of_elementwise(const std::string& op) {
  auto it = elementwise_acts().find(op);
  if (it == elementwise_acts().end()) return std::nullopt;
  return it->second;
}

const char* gemm_act_name(GemmAct a) {
  switch (a) {
    case Act::none: return "none";
    case Act::relu: return "relu";
    case Act::gelu: return "gelu";
    case Act::fast_gelu: return "fast_gelu";
    case Act::swish: return "swish";
    case Act::sigmoid: return "sigmoid";
    case Act::tanh: return "tanh";
  }
  return "none";
}

std::string gemm_epilogue_code(const GemmVariant& v) {
  if (!gemm_op_name(v)) return "";
  return epilogue_of(v).code;
}

void register_gemm_ops(Registry& r) {
  for (const GemmOp& g : gemm_ops()) {
    const GemmVariant v = g.variant;
    OpDef def;
    def.name = g.name;
    def.family = "gemm";
    if (v.batched) {
      def.doc = std::string("batched a[..., M, K] · b ") + (v.b_is_nk ? "[..., N, K]" : "[..., K, N]") +
                ", batch dims broadcast";
      def.min_inputs = def.max_inputs = 2;
      def.infer = [v](const InferContext& ctx) { return infer_bmm(v, ctx); };
      def.reference = [v](const RefContext& ctx) { return ref_bmm(v, ctx); };
    } else {
      def.doc = g.doc + "; a[..., M, K], b " + (v.b_is_nk ? "[N, K]" : "[K, N]");
      def.min_inputs = def.max_inputs = 2 + int(v.bias) + int(v.residual);
      def.infer = [v](const InferContext& ctx) { return infer_gemm(v, ctx); };
      def.reference = [v](const RefContext& ctx) { return ref_gemm(v, ctx); };
    }
    r.add(std::move(def));
  }
}

}  // namespace dinoml::ops
