// Per-node emitters of the CPU lowering (module.cpp run() body), over the shared EmitContext
// (lower/common/emit_context.h).
#pragma once
#include <functional>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "lower/common/emit_context.h"
#include "lower/cpu/candidates.h"
#include "lower/cpu/lower_cpu.h"

namespace dinoml::lower::cpu {

// Thrown text for an op the CPU target cannot lower.
[[noreturn]] void no_lowering(const ir::Node& n, const std::string& why = "");

// Emits `n` into `body` (statements inside run()) and returns its kernel_manifest entry.
// Library ops (lower_library_ops.cpp).
bool is_library_op(const std::string& op);
nlohmann::json emit_library_op(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
// scaled_dot_product_attention (lower_attention.cpp).
nlohmann::json emit_sdpa(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
// Elementwise ops and fused_elementwise (lower_fused.cpp).
nlohmann::json emit_fused(EmitContext& cx, const ir::Node& n, std::ostringstream& body);

// A tunable node (lower_tunable.cpp): `common_args` are the family's call arguments; `wrap_pre`
// / `wrap_post` surround each call (e.g. a block declaring shape arrays). Emits the selected
// candidate (a switch on the bucket when buckets chose differently) and returns the manifest entry.
// `hooks` (optional) adapt the family's candidates to one node.
struct TunableHooks {
  std::function<bool(const KernelCandidate&)> applies;      // false drops a candidate for this node
  std::function<int(const KernelCandidate&)> rank;          // lower first (stable); index 0 = default
  std::function<void(const KernelCandidate&)> prepare;      // once per emitted candidate (e.g. init code)
  std::function<std::string(const KernelCandidate&)> call;  // call text; empty function = candidate_call
  // Unprofiled buckets only: the candidate (by name) a bucket's dims call for instead of the default,
  // with the reason for the plan; an empty name keeps the default.
  std::function<std::pair<std::string, std::string>(size_t bucket)> bucket_default;
};
nlohmann::json emit_tunable(EmitContext& cx, const ir::Node& n, CandidateFamily family, const std::string& common_args,
                            std::ostringstream& body, const std::string& wrap_pre = "", const std::string& wrap_post = "",
                            const TunableHooks* hooks = nullptr);
// Statement block for dinoml_module_init packing a constant into a new buffer of the module state
// (returned: the name `dml_packed_<id>` run() binds to it): `size_expr` gives the bytes,
// `pack_call` fills `p` and returns a status. Every init (the first load and every weight swap)
// packs into its own state, so runs on the previous state keep their buffers. Shared by the gemm
// and conv lowerings.
std::string emit_init_packing(EmitContext& cx, const ir::Node& n, const std::string& setup, const std::string& size_expr,
                              const std::string& pack_call);
// The statements opening run() and profile(): `cbase` (the constants) and each packed buffer's
// name bound from `module_state` (a DmlCpuState).
std::string emit_state_bindings(const EmitContext& cx);

// The dinoml_module_profile entry point of a bootstrap module (empty text otherwise).
std::string emit_profile_entry(EmitContext& cx, const std::string& storage);

// `DML_CHECK(call, node)` line that turns a kernel status into an error naming the node.
std::string checked_call(const ir::Node& n, const std::string& call);

}  // namespace dinoml::lower::cpu
