// Kernel candidates of the CPU lowering: for each tunable op family, the kernel library
// functions (and their speed parameters) the profiler may choose from. A candidate's name is
// stable: it keys the profile cache and execution_plan.json, so renaming one invalidates both.
//
// Adding a candidate is one line in candidates.cpp's table: the family's call arguments are
// fixed (see CandidateFamily), a candidate adds only its function and trailing arguments.
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
enum class CandidateFamily { gemm, bmm, softmax, qgemm };

struct KernelCandidate {
  CandidateFamily family;
  std::string name;        // stable, e.g. "dml.gemm.tiled.mc96_kc256_nc256"
  std::string function;    // C function of libdinoml_cpu_kernels
  std::string extra_args;  // trailing call arguments ("" for none)
  std::string isa;         // ISA the kernel needs beyond the module's baseline ("" = none), e.g. "avx512f"
  std::string doc;         // one line: what this variant does differently
  // Vendor provider (kernels/cpu/providers): the library holding `function` ("dinoml_cpu_onednn"),
  // linked into module.so and shipped in lib/ only when the candidate is compiled in, and the
  // system library it needs at run time ("libdnnl.so.2", recorded in the manifest). "" = the
  // kernel library itself.
  std::string library;
  std::string system_library;
  bool float32_only = false;  // the provider offers float32 only
  // gemm only: `function` takes (dtype, M, N, K, a, packed_b, bias, d, c, epilogue) with b packed
  // once at module init; offered only when b is a constant (see GemmCallInfo).
  bool packed_constant_b = false;
};

// What emit_tunable needs to know about a gemm node to offer the candidates above: its dtype,
// and for a constant b its slot in constants.bin and layout (empty `b_offset` = b is computed).
struct GemmCallInfo {
  bool float32 = true;
  bool b_constant = false;
  uint64_t b_offset = 0;
  std::string dtype_code, b_layout, M, N, K, a, bias, d, c, epilogue;
};

const char* family_name(CandidateFamily f);

// All registered candidates, in table order.
const std::vector<KernelCandidate>& candidate_table();

// The candidates of `f` usable on this machine, in table order. Index 0 is the family's default
// (the library's own entry point), used when nothing was measured.
std::vector<KernelCandidate> candidates_for(CandidateFamily f, bool only_supported_here = true);

// Whether the CPU running the compiler has `isa` (a comma-separated list; "" = yes).
bool isa_supported_here(const std::string& isa);

// The call statement text "function(common, extra)".
std::string candidate_call(const KernelCandidate& c, const std::string& common_args);

}  // namespace dinoml::lower::cpu
