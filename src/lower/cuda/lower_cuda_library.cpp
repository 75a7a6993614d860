// Library ops of the CUDA lowering: one call into libdinoml_cuda_kernels per node, with the same
// canonical shapes as the CPU lowering (outer × axis × inner, padded batch shapes, axis masks)
// plus the run's stream. GEMM/BMM name their candidates (cuBLASLt, the own SIMT, mma.sync,
// sm_90a wgmma and small-M skinny kernels) in kernel_manifest.json; without a profile the default is selected unless
// the compile forced another.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "dinoml/skinny_pack.h"
#include "ir/error.h"
#include "ir/serialize.h"
#include "lower/common/library_args.h"
#include "lower/cuda/emit_cuda.h"

namespace dinoml::lower::cuda {
namespace {

using nlohmann::json;

std::string dtype_code(ir::DType t) { return std::to_string(static_cast<int>(t)); }

json manifest(const ir::Node& n, const std::string& kernel) {
  return {{"node", n.name}, {"op", n.op}, {"candidates", {kernel}}, {"selected", kernel},
          {"reason", "only candidate (not tunable)"}};
}


void expect_gpu_float(const ir::Node& n, ir::DType t) {
  if (t != ir::DType::f32 && t != ir::DType::f16 && t != ir::DType::bf16)
    no_cuda_lowering(n, "dtype " + std::string(ir::dtype_name(t)) + " (float32/float16/bfloat16 only)");
}

// The own sm_90a GEMM (kernels/cuda/gemm_wgmma.cu: wgmma.mma_async + TMA) is a candidate for
// fp16/bf16 with B as [N, K] (RCR) when the artifact targets sm_90a and K is a multiple of 8 (the
// tensor maps' row pitch must be a multiple of 16 bytes). A symbolic K is offered: the library
// checks K, alignment and the device at run time and falls back to the mma.sync kernel.
constexpr const char* kWgmmaName = "wgmma_sm90a_tma_128x128or256x64";
bool wgmma_candidate(const CudaLowerOptions& o, const std::string& dtype, bool rcr, const ir::IntExpr& K,
                     std::string* why = nullptr) {
  std::string no;
  if (o.arch.target != GpuTarget::cuda || o.arch.name != "sm_90a") no = "arch " + o.arch.name + " (sm_90a only)";
  else if (dtype == "float32") no = "float32 (float16/bfloat16 only)";
  else if (!rcr) no = "B as [K, N] (RRR; the kernel takes B as [N, K])";
  else if (K.is_const() && K.const_value() % 8 != 0) no = "K = " + std::to_string(K.const_value()) + " (a multiple of 8 is needed)";
  if (why) *why = no;
  return no.empty();
}

// The own persistent sm_90a GEMM whose fused epilogue runs on dedicated epilogue warps under the
// next tile's MMAs (kernels/cuda/gemm_wgmma_epi.cu) is offered wherever the wgmma kernel is. It is
// the unprofiled default for the exact (erf) GELU epilogue on the shapes where it beats both eager
// F.gelu(F.linear(...)) and cuBLASLt + the GELU pass on sm_90a (M, N ≥ 4096 and K ≤ 1024, all
// constant: the epilogue is then a large share of the work; at K = 4096 it is slower).
constexpr const char* kWgmmaEpiName = "wgmma_sm90a_persistent_128x256_epilogue_warps";
bool wgmma_epi_default(const std::string& epi, const ir::IntExpr& M, const ir::IntExpr& N, const ir::IntExpr& K) {
  return epi == "DML_CUDA_EPI_GELU" && M.is_const() && M.const_value() >= 4096 && N.is_const() && N.const_value() >= 4096 &&
         K.is_const() && K.const_value() <= 1024;
}

// The own skinny GEMM (kernels/cuda/gemm_skinny.cu: weight streamed once, mma.sync, in-block
// split-K) is a candidate for fp16/bf16 with B as [N, K] (RCR) on CUDA (every CUDA arch here is
// sm_80+) when M (rows of a) is at most 16 or symbolic (a dynamic batch may be small) and K is a
// multiple of 8 where constant; the library checks K and alignment at run time (mma.sync fallback)
// and runs any M correctly (weight re-read per 16 rows). Not the unprofiled default in general: it
// beats cuBLASLt only on the shapes skinny_default / skinny_packed_default name.
constexpr const char* kSkinnyName = "skinny_mma_m16n8k16_splitk";
bool skinny_candidate(const CudaLowerOptions& o, const std::string& dtype, bool rcr, const ir::IntExpr& M,
                      const ir::IntExpr& K, std::string* why = nullptr) {
  std::string no;
  if (o.arch.target != GpuTarget::cuda || o.arch.major < 8) no = "arch " + o.arch.name + " (CUDA sm_80+ only)";
  else if (dtype == "float32") no = "float32 (float16/bfloat16 only)";
  else if (!rcr) no = "B as [K, N] (RRR; the kernel takes B as [N, K])";
  else if (K.is_const() && K.const_value() % 8 != 0) no = "K = " + std::to_string(K.const_value()) + " (a multiple of 8 is needed)";
  else if (M.is_const() && M.const_value() > 16) no = "M = " + std::to_string(M.const_value()) + " (small M only: at most 16)";
  if (why) *why = no;
  return no.empty();
}

// M of a GEMM node: the product of a's leading dims (a constant when they all are).
ir::IntExpr gemm_rows(const ir::Shape& s, size_t n) {
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i) {
    if (!s[i].is_const()) return s[i];  // symbolic: the candidate check treats it as "may be small"
    p *= s[i].const_value();
  }
  return ir::IntExpr(p);
}

// GEMM/BMM candidates: the implementation code passed to dml_cuda_gemm / dml_cuda_bmm.
// CUDA: cuBLASLt (default), the own SIMT kernel and, for fp16/bf16, the own mma.sync tensor-core
// kernel, the own sm_90a wgmma kernels (plain and persistent with epilogue warps; the latter the
// default for large short-K erf-GELU GEMMs) and the own small-M skinny kernel where their checks allow. ROCm: the portable SIMT kernel (default; every arch and dtype) and, for fp16/bf16 on
// gfx90a, the own MFMA matrix-core kernel; no vendor BLAS (Debian 12 has no rocBLAS/hipBLASLt).
// DINOML_CUDA_GEMM / DINOML_ROCM_GEMM (CudaLowerOptions::gemm_impl) move the unprofiled default.
struct GemmCands {
  std::vector<std::pair<std::string, std::string>> c;  // name, impl code
  size_t def = 0;
  std::string reason = "default (not profiled)";
};

// The own skinny kernel as the unprofiled default of a GEMM with a constant weight (sm_90a, constant
// M <= 16, N and K; the weight-prefetching launch, as it is a constant): where it measures faster
// than cuBLASLt at M = 1 and 16 on sm_90a: 1024 <= N <= 4096 and 1024 <= K <= max(4096, 3.5 N)
// (e.g. N = 4096 with K = 1024, 4096, 11008 or 14336); cuBLASLt stays ahead for the wide weights
// (N = 11008 / 14336). Current numbers: docs/benchmarks.md, "CUDA skinny GEMM".
bool skinny_default(const CudaLowerOptions& o, const ir::IntExpr& M, const ir::IntExpr& N, const ir::IntExpr& K) {
  if (o.arch.name != "sm_90a" || !M.is_const() || !N.is_const() || !K.is_const()) return false;
  const int64_t m = M.const_value(), n = N.const_value(), k = K.const_value();
  return m >= 1 && m <= 16 && n >= 1024 && n <= 4096 && k >= 1024 && 2 * k <= std::max<int64_t>(2 * 4096, 7 * n);
}

// The skinny kernel with its weight prefetched under programmatic dependent launch
// (DML_CUDA_GEMM_SKINNY_PF): only for a constant weight (nothing earlier in the stream writes it) on sm_90a.
constexpr const char* kSkinnyPfName = "skinny_pdl_weight_prefetch";
// The same kernel reading a copy of the constant weight packed at module init
// (DML_CUDA_GEMM_SKINNY_PACKED, dml_cuda_pack_skinny_weight): every warp load 512 contiguous bytes.
constexpr const char* kSkinnyPackedName = "skinny_packed_pdl";

// Where the packed launch is the unprofiled default (sm_90a, constant M, N, K): inside skinny_default
// for K >= 2048, and for K < 2048 at M <= 8 with N >= 3072; and for the wide weights
// 4096 < N <= 14336, 2048 <= K <= 4096 at M <= 8. Those are the shapes where, with the variant rule
// skinny_variant_packed(M, N, K), the packed launch streams the weight faster than the prefetch launch
// (H100 and H200, bf16, % of the D2D copy) and, for the wide weights, faster than cuBLASLt; at K = 1024,
// M = 16 the prefetch launch stays ahead, and the wide weights at M 9..16 stay with cuBLASLt.
// `--profile` times both. Current numbers: docs/benchmarks.md, "CUDA skinny GEMM".
bool skinny_packed_default(const CudaLowerOptions& o, const ir::IntExpr& M, const ir::IntExpr& N, const ir::IntExpr& K) {
  if (!M.is_const() || !N.is_const() || !K.is_const()) return false;
  const int64_t m = M.const_value(), n = N.const_value(), k = K.const_value();
  if (skinny_default(o, M, N, K)) return k >= 2048 || (m <= 8 && n >= 3072);
  return o.arch.name == "sm_90a" && m >= 1 && m <= 8 && n > 4096 && n <= 14336 && k >= 2048 && k <= 4096;
}

GemmCands gemm_candidates(const CudaLowerOptions& o, const std::string& dtype, bool rcr, const ir::IntExpr& K,
                          const ir::IntExpr& M, const ir::IntExpr& N, bool b_const, const std::string& epi,
                          bool b_packed = false) {
  GemmCands g;
  if (o.arch.target == GpuTarget::rocm) {
    const bool mfma = o.arch.name == "gfx90a" && dtype != "float32";
    g.c = {{"simt_tiled_64x64", "DML_CUDA_GEMM_SIMT"}};
    if (mfma) g.c.push_back({"mfma_f32_16x16x16_64x64x32", "DML_CUDA_GEMM_MFMA"});
    if (o.gemm_impl == "mfma") {
      g.def = mfma ? 1 : 0;
      g.reason = mfma ? "forced by DINOML_ROCM_GEMM=mfma"
                      : "forced by DINOML_ROCM_GEMM=mfma (no MFMA kernel for " + dtype + " on " + o.arch.name + ": SIMT)";
    }
    return g;
  }
  const bool tf32 = o.allow_tf32 && dtype == "float32";
  g.c = {{std::string("cublaslt") + (tf32 ? ".tf32" : ""), "DML_CUDA_GEMM_CUBLASLT"}, {"simt_tiled_64x64", "DML_CUDA_GEMM_SIMT"}};
  if (dtype != "float32") g.c.push_back({"mma_sync_m16n8k16_64x64x32", "DML_CUDA_GEMM_MMA"});
  std::string no_wgmma;
  const bool wgmma = wgmma_candidate(o, dtype, rcr, K, &no_wgmma);
  if (wgmma) g.c.push_back({kWgmmaName, "DML_CUDA_GEMM_WGMMA"});
  const size_t wgmma_epi_index = g.c.size();
  if (wgmma) g.c.push_back({kWgmmaEpiName, "DML_CUDA_GEMM_WGMMA_EPI"});
  std::string no_skinny;
  const bool skinny = skinny_candidate(o, dtype, rcr, M, K, &no_skinny);
  if (skinny) g.c.push_back({kSkinnyName, "DML_CUDA_GEMM_SKINNY"});
  const size_t skinny_index = g.c.size() - 1;
  const bool skinny_pf = skinny && b_const && o.arch.name == "sm_90a";
  if (skinny_pf) g.c.push_back({kSkinnyPfName, "DML_CUDA_GEMM_SKINNY_PF"});
  const size_t skinny_pf_index = g.c.size() - 1;
  if (b_packed) g.c.push_back({kSkinnyPackedName, "DML_CUDA_GEMM_SKINNY_PACKED"});
  const size_t skinny_packed_index = g.c.size() - 1;
  // cuBLASLt's 2nd and 3rd heuristic algorithms: its first guess is not always the fastest.
  g.c.push_back({std::string("cublaslt") + (tf32 ? ".tf32" : "") + ".algo2", "DML_CUDA_GEMM_CUBLASLT_ALGO2"});
  g.c.push_back({std::string("cublaslt") + (tf32 ? ".tf32" : "") + ".algo3", "DML_CUDA_GEMM_CUBLASLT_ALGO3"});
  if (wgmma && o.gemm_impl == "cublaslt" && !o.gemm_impl_forced && wgmma_epi_default(epi, M, N, K)) {
    g.def = wgmma_epi_index;
    g.reason = "default for the exact GELU at M, N >= 4096, K <= 1024 (own persistent wgmma kernel with epilogue warps; "
               "H200: faster than cuBLASLt + the GELU pass)";
  } else if (o.gemm_impl == "simt") {
    g.def = 1;
    g.reason = "forced by DINOML_CUDA_GEMM=simt";
  } else if (o.gemm_impl == "mma") {
    g.def = dtype == "float32" ? 1 : 2;
    g.reason = dtype == "float32" ? "forced by DINOML_CUDA_GEMM=mma (float32 has no mma kernel: SIMT)" : "forced by DINOML_CUDA_GEMM=mma";
  } else if (o.gemm_impl == "wgmma") {
    g.def = wgmma ? 3 : dtype == "float32" ? 1 : 2;
    g.reason = wgmma ? "forced by DINOML_CUDA_GEMM=wgmma"
                     : "forced by DINOML_CUDA_GEMM=wgmma (no wgmma kernel for " + no_wgmma + ": " +
                           (dtype == "float32" ? "SIMT)" : "mma.sync)");
  } else if (o.gemm_impl == "cublaslt" && !o.gemm_impl_forced && skinny && b_const &&
             (skinny_default(o, M, N, K) || (b_packed && skinny_packed_default(o, M, N, K)))) {
    const bool packed = b_packed && skinny_packed_default(o, M, N, K);
    g.def = packed ? skinny_packed_index : skinny_pf ? skinny_pf_index : skinny_index;
    g.reason = std::string("default: own skinny kernel") + (packed ? " on the packed weight" : "") +
               " (sm_90a, M <= 16, N = " + std::to_string(N.const_value()) + ", K = " + std::to_string(K.const_value()) +
               ": measured faster than cuBLASLt on the H200)";
  } else if (o.gemm_impl == "skinny") {
    g.def = skinny ? skinny_index : dtype == "float32" ? 1 : 2;
    g.reason = skinny ? "forced by DINOML_CUDA_GEMM=skinny"
                      : "forced by DINOML_CUDA_GEMM=skinny (no skinny kernel for " + no_skinny + ": " +
                            (dtype == "float32" ? "SIMT)" : "mma.sync)");
  }
  return g;
}

// One tunable node whose candidates differ only in the implementation code: `call(code)` is the
// statement text of one candidate.
json emit_gemm_tunable(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, const std::string& dtype, bool rcr,
                       const ir::IntExpr& K, const ir::IntExpr& M, const ir::IntExpr& N, bool b_const,
                       const std::function<std::string(const std::string&)>& call, std::ostringstream& body,
                       const std::string& epi = "", bool b_packed = false) {
  const GemmCands g = gemm_candidates(o, dtype, rcr, K, M, N, b_const, epi, b_packed);
  std::vector<GpuCandidate> cands;
  for (const auto& [name, code] : g.c) cands.push_back({name, call(code)});
  const std::optional<ops::GemmVariant> v = ops::gemm_variant(n.op);
  return emit_gpu_tunable(cx, n, v && v->batched ? "bmm" : "gemm", cands, g.def, g.reason, body);
}

// Bytes of a GEMM node's constant weight packed for the skinny kernel, 0 where it is not packed.
size_t skinny_pack_bytes(const ir::Graph& g, const ir::Node& n, const CudaLowerOptions& o) {
  const std::optional<ops::GemmVariant> k = plain_gemm_variant(n.op);
  if (!k || !k->b_is_nk || n.inputs.size() < 2 || o.arch.name != "sm_90a") return 0;
  const ir::Tensor& a = g.tensor(n.inputs[0]);
  const ir::Tensor& b = g.tensor(n.inputs[1]);
  if (b.kind != ir::TensorKind::constant || b.quant || b.shape.size() != 2 || a.shape.size() < 2 ||
      (a.dtype != ir::DType::f16 && a.dtype != ir::DType::bf16) || b.dtype != a.dtype)
    return 0;
  const ir::IntExpr &N = b.shape[0], &K = b.shape[1];
  const ir::IntExpr M = gemm_rows(a.shape, a.shape.size() - 1);
  const std::string dtype(ir::dtype_name(a.dtype));
  if (!N.is_const() || !K.is_const() || !skinny_candidate(o, dtype, true, M, K)) return 0;
  // Pack only where the packed launch can run: in a bootstrap module (it is timed), where the
  // execution plan chose it for some bucket, or where it is the unprofiled default.
  bool use = o.bootstrap;
  if (!use) {
    auto it = o.choices.find(n.name);
    if (it != o.choices.end()) {
      for (const auto& c : it->second) use = use || c.kernel == kSkinnyPackedName;
    } else {
      const GemmCands c = gemm_candidates(o, dtype, true, K, M, N, true, gemm_epilogue(*k, "DML_CUDA_EPI_"), true);
      use = c.c[c.def].first == kSkinnyPackedName;
    }
  }
  if (!use) return 0;
  return static_cast<size_t>(dml_skinny_packed_elems(N.const_value(), K.const_value())) * 2;  // two-byte elements
}

json emit_gemm(EmitContext& cx, const ir::Node& n, const ops::GemmVariant& k, const CudaLowerOptions& o, std::ostringstream& body) {
  const std::string epilogue = gemm_epilogue(k, "DML_CUDA_EPI_");
  const auto& a = cx.tensor(n.inputs.at(0));
  const auto& b = cx.tensor(n.inputs.at(1));
  expect_gpu_float(n, a.dtype);
  if (a.shape.size() < 2 || b.shape.size() != 2) no_cuda_lowering(n, "expects a[..., M, K] and a 2-d b");
  const size_t ra = a.shape.size();
  const std::string M = cx.cpp_prod(a.shape, 0, ra - 1), K = cx.cpp(a.shape[ra - 1]);
  const std::string N = cx.cpp(k.b_is_nk ? b.shape[0] : b.shape[1]);
  size_t next = 2;
  const std::string bias = k.bias ? cx.ptr(n.inputs.at(next++)) : "NULL";
  const std::string d = k.residual ? cx.ptr(n.inputs.at(next++)) : "NULL";
  if (b.quant) return emit_cuda_qgemm(cx, n, k.b_is_nk, epilogue, bias, d, o, body);  // GGUF blocks (issue 6)
  // The call's text up to the implementation code, with `bp` as b.
  auto args = [&](const std::string& bp) {
    return "dml_cuda_gemm(" + dtype_code(a.dtype) + ", " + (k.b_is_nk ? "DML_CUDA_B_RCR" : "DML_CUDA_B_RRR") + ", " + M + ", " + N +
           ", " + K + ", " + cx.ptr(n.inputs[0]) + ", " + bp + ", " + bias + ", " + d + ", " + cx.ptr(n.outputs[0]) + ", " +
           epilogue + ", " + (o.allow_tf32 ? "1" : "0") + ", ";
  };
  // A constant weight the skinny kernel reads packed (plan_skinny_packs): packed into
  // DmlModuleState::dpack at module init, where the module plan placed it.
  std::string packed_b;
  const ModulePlan* plan = current_module_plan();
  const auto po = plan ? plan->pack_offset.find(n.name) : std::map<std::string, size_t>::const_iterator();
  if (plan && po != plan->pack_offset.end()) {
    const auto slots = ir::layout_constants(cx.g);
    const auto ws = slots.find(cx.root(n.inputs[1]));
    if (ws == slots.end()) no_cuda_lowering(n, "the weight is not in constants.bin");
    cx.init << "  if (dml_cuda_pack_skinny_weight(" << dtype_code(a.dtype) << ", " << N << ", " << K << ", st->dconst + "
            << ws->second.offset << ", st->dpack + " << po->second << ", NULL)) {  // " << comment_text(n.name) << "\n"
            << "    if (err && errlen) snprintf(err, errlen, \"node %s: packing the GEMM weight: %s\", "
            << cpp_string_literal(n.name) << ", dml_cuda_last_error());\n"
            << "    cudaFree(st->dpack); cudaFree(st->dconst); free(st);\n    return 1;\n  }\n";
    packed_b = "(((const DmlModuleState*)module_state)->dpack + " + std::to_string(po->second) + ")";
  }
  return emit_gemm_tunable(
      cx, n, o, std::string(ir::dtype_name(a.dtype)), k.b_is_nk, a.shape[ra - 1], gemm_rows(a.shape, ra - 1),
      k.b_is_nk ? b.shape[0] : b.shape[1], b.kind == ir::TensorKind::constant,
      [&](const std::string& code) {
        const bool packed = code == "DML_CUDA_GEMM_SKINNY_PACKED";
        return checked_cuda_call(n, args(packed ? packed_b : cx.ptr(n.inputs[1])) + code + ", stream)");
      },
      body, epilogue, !packed_b.empty());
}

json emit_bmm(EmitContext& cx, const ir::Node& n, bool rcr, const CudaLowerOptions& o, std::ostringstream& body) {
  const auto& a = cx.tensor(n.inputs.at(0));
  expect_gpu_float(n, a.dtype);
  const LibraryCallArgs args = bmm_args(cx, n, rcr, no_cuda_lowering, 6);
  auto call = [&](const std::string& code) {
    std::ostringstream block;
    emit_call_block(block, args,
                         checked_cuda_call(n, "dml_cuda_bmm(" + dtype_code(a.dtype) + ", " +
                                                  (rcr ? "DML_CUDA_B_RCR" : "DML_CUDA_B_RRR") + ", " + args.args + ", " +
                                                  (o.allow_tf32 ? "1" : "0") + ", " + code + ", stream)"));
    return block.str();
  };
  const auto& b = cx.tensor(n.inputs.at(1));
  return emit_gemm_tunable(cx, n, o, std::string(ir::dtype_name(a.dtype)), rcr, a.shape.back(),
                           a.shape.at(a.shape.size() - 2), rcr ? b.shape.at(b.shape.size() - 2) : b.shape.back(),
                           /*b_const=*/false, call, body);
}

std::string oai(EmitContext& cx, const ir::Shape& s, int64_t axis) {
  const size_t a = static_cast<size_t>(axis);
  if (s.empty()) return "INT64_C(1), INT64_C(1), INT64_C(1)";
  return cx.cpp_prod(s, 0, a) + ", " + cx.cpp(s[a]) + ", " + cx.cpp_prod(s, a + 1, s.size());
}

json emit_softmax(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  expect_gpu_float(n, x.dtype);
  const int64_t axis = norm_axis(n, n.attr_int("axis", -1), x.shape.size(), "axis");
  body << checked_cuda_call(n, "dml_cuda_softmax(" + dtype_code(x.dtype) + ", " + oai(cx, x.shape, axis) + ", " +
                                   (n.op == "log_softmax" ? "1" : "0") + ", " + cx.ptr(n.inputs[0]) + ", " +
                                   cx.ptr(n.outputs[0]) + ", stream)");
  return manifest(n, "dml_cuda_softmax.warp_or_block_rows");
}

// layer_norm / rms_norm / group_norm: a float x, the target-neutral arguments of `args`
// (library_args) after the dtype code, the session stream last.
using NormArgs = LibraryCallArgs (*)(EmitContext&, const ir::Node&, LoweringFail);
json emit_norm(EmitContext& cx, const ir::Node& n, const std::string& fn, NormArgs args, const std::string& kernel,
               std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  expect_gpu_float(n, x.dtype);
  body << checked_cuda_call(n, fn + "(" + dtype_code(x.dtype) + ", " + args(cx, n, no_cuda_lowering).args + ", stream)");
  return manifest(n, kernel);
}

json emit_reduce(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& x = cx.tensor(n.inputs.at(0));
  const auto& y = cx.tensor(n.outputs.at(0));
  expect_gpu_float(n, x.dtype);
  const size_t r = x.shape.size();
  if (r > 8) no_cuda_lowering(n, "rank > 8");
  if (x.dtype != y.dtype) no_cuda_lowering(n, "output dtype differs from the input's");
  const LibraryCallArgs a = reduce_args(cx, n, dtype_code(x.dtype), "DML_CUDA_REDUCE_");
  emit_call_block(body, a, checked_cuda_call(n, "dml_cuda_reduce(" + a.args + ", stream)"));
  return manifest(n, "dml_cuda_reduce.rows_or_strided");
}


// A channels-last conv's edge copy (insert_conv_layout_edges): the conv-side tensor is stored
// NHWC, so the identity copy is the transpose NCHW -> NHWC (input edge) or NHWC -> NCHW (output).
json emit_layout_edge(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const ModulePlan* p = current_module_plan();
  const bool in_cl = p && p->nhwc.count(n.inputs.at(0)), out_cl = p && p->nhwc.count(n.outputs.at(0));
  const auto& x = cx.tensor(n.inputs.at(0));
  if (x.shape.size() != 4) no_cuda_lowering(n, "a layout edge must be rank 4");
  const auto s = cx.cpp_shape(x.shape);  // N C H W (logical)
  std::string xs = brace_list(s), perm = "{0, 1, 2, 3}", sel = "dml_cuda_permute.copy";
  if (!in_cl && out_cl) {
    perm = "{0, 2, 3, 1}";
    sel = "dml_cuda_permute.nchw_to_nhwc";
  } else if (in_cl && !out_cl) {
    xs = brace_list(std::vector<std::string>{s[0], s[2], s[3], s[1]});  // stored N H W C
    perm = "{0, 3, 1, 2}";
    sel = "dml_cuda_permute.nhwc_to_nchw";
  }
  body << "  {\n    const int64_t xs[] = " << xs << ";\n    const int32_t perm[] = " << perm << ";\n  "
       << checked_cuda_call(n, "dml_cuda_permute(" + std::to_string(ir::dtype_size(x.dtype)) + ", 4, xs, perm, " +
                                   cx.ptr(n.inputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)")
       << "  }\n";
  json e = manifest(n, sel);
  e["reason"] = "layout edge of a channels-last conv";
  e["layout"] = {{"x", in_cl ? "NHWC" : "NCHW"}, {"y", out_cl ? "NHWC" : "NCHW"}};
  return e;
}

json emit_permute(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  // stride_attention_operands made the output a view (the sdpa reads / writes it through strides).
  if (cx.root(n.outputs.at(0)) == cx.root(n.inputs.at(0)))
    return {{"node", n.name}, {"op", n.op}, {"candidates", {"alias"}}, {"selected", "alias"},
            {"reason", "strided view: the attention kernel reads / writes this permute in place"}};
  if (cx.tensor(n.inputs.at(0)).shape.size() > 8) no_cuda_lowering(n, "rank > 8");
  if (is_layout_edge(n)) return emit_layout_edge(cx, n, body);
  const LibraryCallArgs a = permute_args(cx, n);
  emit_call_block(body, a, checked_cuda_call(n, "dml_cuda_permute(" + a.args + ", stream)"));
  return manifest(n, "dml_cuda_permute.strided_gather");
}

json emit_concat_split(EmitContext& cx, const ir::Node& n, bool split, std::ostringstream& body) {
  if (split)
    if (json alias = split_alias_entry(cx, n); !alias.is_null()) return alias;  // outputs are views
  const LibraryCallArgs a = concat_split_args(cx, n, split);
  emit_call_block(body, a, checked_cuda_call(n, std::string(split ? "dml_cuda_split(" : "dml_cuda_concat(") + a.args + ", stream)"));
  return manifest(n, split ? "dml_cuda_split.memcpy2d" : "dml_cuda_concat.memcpy2d");
}

json emit_slice(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const size_t r = cx.tensor(n.inputs.at(0)).shape.size();
  if (r > 8 || r < 1) no_cuda_lowering(n, "rank outside [1, 8]");
  const LibraryCallArgs a = slice_args(cx, n, [](const ir::Node& node, const std::string& why) { no_cuda_lowering(node, why); });
  emit_call_block(body, a, checked_cuda_call(n, "dml_cuda_slice(" + a.args + ", stream)"));
  return manifest(n, "dml_cuda_slice.strided_gather");
}

json emit_expand(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const size_t r = cx.tensor(n.outputs.at(0)).shape.size();
  if (r > 8 || r < 1 || cx.tensor(n.inputs.at(0)).shape.size() > r)
    no_cuda_lowering(n, "rank outside [1, 8] or input rank above output rank");
  const LibraryCallArgs a = expand_args(cx, n);
  emit_call_block(body, a, checked_cuda_call(n, "dml_cuda_expand(" + a.args + ", stream)"));
  return manifest(n, "dml_cuda_expand.strided_gather");
}

json emit_pad(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const LibraryCallArgs a = pad_args(cx, n, no_cuda_lowering);
  emit_call_block(body, a, checked_cuda_call(n, "dml_cuda_pad(" + a.args + ", stream)"));
  return manifest(n, "dml_cuda_pad.thread_per_element");
}

json emit_generator(EmitContext& cx, const ir::Node& n, std::ostringstream& body) {
  const auto& y = cx.tensor(n.outputs.at(0));
  const std::string dt = std::to_string(static_cast<int>(y.dtype));
  if (n.op == "arange") {
    body << checked_cuda_call(n, "dml_cuda_arange(" + dt + ", " + double_literal(n.attr_float("start", 0.0)) + ", " +
                                     double_literal(n.attr_float("step", 1.0)) + ", " + cx.numel(n.outputs[0]) +
                                     ", " + cx.ptr(n.outputs[0]) + ", stream)");
    return manifest(n, "dml_cuda_arange.grid_stride");
  }
  body << checked_cuda_call(n, "dml_cuda_fill(" + dt + ", " + double_literal(n.attr_float("value", 0.0)) + ", " +
                                   cx.numel(n.outputs[0]) + ", " + cx.ptr(n.outputs[0]) + ", stream)");
  return manifest(n, "dml_cuda_fill.grid_stride");
}

}  // namespace

bool is_cuda_library_op(const std::string& op) {
  static const std::set<std::string> ops = {"bmm_rrr",   "bmm_rcr",    "reduce_sum", "reduce_mean", "reduce_max",
                                            "reduce_min", "softmax",   "log_softmax", "layer_norm", "rms_norm", "group_norm", "pad",
                                            "permute",   "transpose",  "concatenate", "split",      "slice",
                                            "expand",    "full",       "arange"};
  return ops.count(op) != 0 || plain_gemm_variant(op);
}

json emit_cuda_library_op(EmitContext& cx, const ir::Node& n, const CudaLowerOptions& o, std::ostringstream& body) {
  const std::string& op = n.op;
  const std::optional<ops::GemmVariant> g = ops::gemm_variant(op);
  if (g && !g->batched) return emit_gemm(cx, n, *g, o, body);
  if (g) return emit_bmm(cx, n, g->b_is_nk, o, body);
  if (op.rfind("reduce_", 0) == 0) return emit_reduce(cx, n, body);
  if (op == "softmax" || op == "log_softmax") return emit_softmax(cx, n, body);
  if (op == "layer_norm")
    return emit_norm(cx, n, "dml_cuda_layer_norm", layer_norm_args, "dml_cuda_layer_norm.block_rows", body);
  if (op == "rms_norm") return emit_norm(cx, n, "dml_cuda_rms_norm", rms_norm_args, "dml_cuda_rms_norm.block_rows", body);
  if (op == "group_norm")
    return emit_norm(cx, n, "dml_cuda_group_norm", group_norm_args, "dml_cuda_group_norm.block_per_group", body);
  if (op == "pad") return emit_pad(cx, n, body);
  if (op == "permute" || op == "transpose") return emit_permute(cx, n, body);
  if (op == "concatenate") return emit_concat_split(cx, n, false, body);
  if (op == "split") return emit_concat_split(cx, n, true, body);
  if (op == "slice") return emit_slice(cx, n, body);
  if (op == "expand") return emit_expand(cx, n, body);
  if (op == "full" || op == "arange") return emit_generator(cx, n, body);
  no_cuda_lowering(n, "");
}

void plan_skinny_packs(const ir::Graph& g, const CudaLowerOptions& o, ModulePlan& p) {
  for (const auto& n : g.nodes)
    if (const size_t bytes = skinny_pack_bytes(g, n, o)) p.reserve_pack(n.name, bytes);
}

}  // namespace dinoml::lower::cuda
