// Kernel candidates of the CPU lowering: for each tunable op family, the kernel library
// functions (and their speed parameters) the profiler may choose from. A candidate's name is
// stable: it keys the profile cache and execution_plan.json, so renaming one invalidates both.
//
// Adding a candidate is one line in candidates.cpp's table: the family's call arguments are
// fixed (see CandidateFamily), a candidate adds only its function and trailing integer arguments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dinoml::lower::cpu {

// Every candidate of a family takes the family's common arguments, in this order, then its own
// `extra_args` (dinoml_cpu_kernels.h documents the functions):
//   gemm:    (dtype, b_layout, M, N, K, a, b, bias, d, c, epilogue [, extra])
//   bmm:     (dtype, b_layout, batch_rank, batch_shape, a_batch, b_batch, M, N, K, a, b, c [, extra])
//   softmax: (dtype, outer, axis_len, inner, log, x, y [, extra])
//   qgemm:   (qtype, M, N, K, a, w, bias, d, c, epilogue [, extra])  — gemm_rcr* with a quantized b
//   conv:    (dtype, &shape, x, w, packed_w, bias, r, y, epilogue) — conv2d* with constant weights,
//            packed once at module init in the candidate's `variant`
enum class CandidateFamily { gemm, bmm, softmax, qgemm, conv };

// Every field has a default, so a table row names only what it sets (designated initializers).
struct KernelCandidate {
  CandidateFamily family = CandidateFamily::gemm;
  std::string name = {};        // stable, e.g. "dml.gemm.tiled.mc96_kc256_nc256"
  std::string function = {};    // C function of libdinoml_cpu_kernels
  std::vector<int64_t> extra_args = {};  // trailing integer call arguments (the variant's speed parameters)
  std::string isa = {};         // ISA the kernel needs beyond the module's baseline ("" = none), e.g. "avx512f"
  std::string doc = {};         // one line: what this variant does differently
  // Vendor provider (kernels/cpu/providers): the library holding `function` ("dinoml_cpu_onednn"),
  // linked into module.so and shipped in lib/ only when the candidate is compiled in, and the
  // system library it needs at run time ("libdnnl.so.2", recorded in the manifest). "" = the
  // kernel library itself.
  std::string library = {};
  std::string system_library = {};
  bool float32_only = false;  // the provider offers float32 only
  // gemm: `function` takes (dtype, M, N, K, a, packed_b, bias, d, c, epilogue) with a constant b
  // packed once at module init. conv: the packed-weight variant (0 GEMM panels, 2 / 4 Winograd).
  bool packed_constant_b = false;
  int variant = -1;
  // gemm: the native bf16 GEMM (bf16 a, b and c only); `function` takes (dtype, M, N, K, a,
  // packed_b, bias, d, c, c_dtype, epilogue, threads), b packed at init by dml_cpu_gemm_bf16_pack_b.
  bool bf16_only = false;
  // gemm: float32 a and c through the bf16 GEMM (`function` as for bf16_only, a rounded to bf16
  // while packed, b packed from float32); offered only with fp32_matmul_precision "bf16".
  bool bf16_math = false;
};


const char* family_name(CandidateFamily f);

// All registered candidates, in table order.
const std::vector<KernelCandidate>& candidate_table();

// The candidates of `f` usable on this machine, in table order. Index 0 is the family's default
// (the library's own entry point), used when nothing was measured.
std::vector<KernelCandidate> candidates_for(CandidateFamily f, bool only_supported_here = true);

// ", a, b, ..." for the candidate's extra_args ("" for none).
std::string extra_args_text(const KernelCandidate& c);
// The call statement text "function(common, extra)".
std::string candidate_call(const KernelCandidate& c, const std::string& common_args);

}  // namespace dinoml::lower::cpu
