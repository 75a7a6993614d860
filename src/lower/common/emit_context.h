// Shared state and text helpers of every target's lowering (CPU module.cpp, GPU module.cu): how a
// tensor's storage is named in the generated run() body, how shape expressions become C++, the
// module skeleton pieces (arena tables, bucket selection, storage, graph plumbing ops) and the
// target-independent half of kernel selection. Target emitters live in lower/<target>/.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "lower/common/kernel_choice.h"
#include "passes/plan_memory.h"

namespace dinoml::lower {

// C++ string literal for arbitrary text (node names can hold quotes, backslashes, newlines).
std::string cpp_string_literal(const std::string& s);
// Text safe inside a // comment (no newlines or control characters).
std::string comment_text(const std::string& s);
// A float literal that round-trips the double through float ("1.5f", "-INFINITY", "NAN").
std::string float_literal(double v);
// A double literal with full precision.
std::string double_literal(double v);
// "{a, b, c}" (a single 0 for an empty list: C++ has no zero-length arrays).
std::string brace_list(const std::vector<std::string>& items);

// The target's "no lowering" error (throws): cpu::no_lowering, cuda::no_cuda_lowering.
using LoweringFail = void (*)(const ir::Node& n, const std::string& why);

class EmitContext {
 public:
  EmitContext(const ir::Graph& g, const passes::MemoryPlan& plan) : g(g), plan(plan) {}

  const ir::Graph& g;
  const passes::MemoryPlan& plan;
  // Storage root tensor → name of its `unsigned char*` variable in run().
  std::map<std::string, std::string> storage_var;
  // Deferred tail of run(): state copies that must happen after every node.
  std::ostringstream tail;
  // Statements run in dinoml_module_init (after the constants check), e.g. weight prepacking;
  // they see `constants`, the new state `st`, `err`, `errlen` and return non-zero on failure
  // (after dml_state_free(st)).
  std::ostringstream init;
  // Buffers init packs per module state (emit_init_packing): variable names, index = slot in
  // DmlCpuState::packed. run() binds each name to its slot of the state it is given.
  std::vector<std::string> packed_vars;
  // Generated kernels (static functions placed before run()) and their plan entries.
  std::ostringstream functions;
  nlohmann::json codegen_plan = nlohmann::json::array();
  int next_kernel_id = 0;
  // Kernel selection (lower/common/tunable.cpp and the targets' tunable lowerings): the tunable
  // nodes met so far, the `case slot:` blocks of dinoml_module_profile (bootstrap only), ISA the
  // chosen kernels add. `providers` and `bf16_matmul` are the CPU options the CPU candidates read
  // (CpuLowerOptions::providers / bf16_matmul); other targets leave them empty.
  std::vector<std::string> providers;
  bool bf16_matmul = false;
  // The target-independent part of kernel selection, set by every lowering (CPU and GPU) from its
  // options: chosen kernels per tunable node and bucket, and whether this is a bootstrap module.
  const std::map<std::string, std::vector<KernelChoice>>* choices = nullptr;
  bool bootstrap = false;
  nlohmann::json tunables = nlohmann::json::array();
  std::ostringstream profile_cases;
  std::vector<std::string> extra_isa;
  // Provider libraries the emitted candidates call (linked, shipped in lib/) and the system
  // libraries those need, in first-use order.
  std::vector<std::string> libraries, system_libraries;

  const ir::Tensor& tensor(const std::string& name) const { return g.tensor(name); }
  // Expression of the buffer holding `tensor` (its storage root's variable).
  std::string ptr(const std::string& tensor) const;
  std::string root(const std::string& tensor) const;
  // C++ expression of a shape expression over the run()'s `d` array.
  std::string cpp(const ir::IntExpr& e) const;
  std::vector<std::string> cpp_shape(const ir::Shape& s) const;
  // Product of s[b, e) as a C++ expression (simplified symbolically first).
  std::string cpp_prod(const ir::Shape& s, size_t b, size_t e) const;
  std::string numel(const std::string& tensor) const;
  std::string nbytes(const std::string& tensor) const;
  // Statement copying `bytes` from src to dst (both storage expressions). CPU: memcpy; the CUDA
  // lowering sets a device-to-device copy on the run's stream.
  std::function<std::string(const std::string& dst, const std::string& src, const std::string& bytes)> copy_fn;
  std::string copy_stmt(const std::string& dst, const std::string& src, const std::string& bytes) const {
    if (copy_fn) return copy_fn(dst, src, bytes);
    return "  memcpy(" + dst + ", " + src + ", " + bytes + ");\n";
  }
};

// ---- module skeleton pieces shared by every target's lowering (emit_context.cpp) ----
// The arena and the storage of a module: `tables` holds kArenaBytes[bucket] and
// kOffsets[bucket][arena tensor] (the arena tensors: the storage roots of kind intermediate);
// `storage` one `unsigned char* const tN` per storage root for the top of run(). Fills
// cx.storage_var, so it runs before any node is emitted.
struct ModuleStorage {
  std::string tables, storage;
};
ModuleStorage emit_module_storage(EmitContext& cx);
// dml_check_dims(d, err, errlen) and dml_bucket_index(d).
void emit_bucket_selection(std::ostringstream& os, const ir::Graph& g, const passes::MemoryPlan& plan);
// run()'s node statements, in node order: per node a comment naming it, the target's timing
// statements `timing_before(i)` / `timing_after(i)` (either may be empty) around its code, and its
// kernel-manifest entry (returned, one per node). output, state_assign and view nodes are the
// graph plumbing below; every other node is the target's: `emit_op(n)` writes its code to `body`
// and returns its entry (or throws the target's "no lowering" error).
nlohmann::json emit_nodes(EmitContext& cx, std::ostringstream& body, const std::function<std::string(size_t)>& timing_before,
                          const std::function<std::string(size_t)>& timing_after,
                          const std::function<nlohmann::json(const ir::Node&)>& emit_op);
// The op's OpDef facts (ops/registry.h): a view (reshape family) / fusible elementwise op; false
// for ops the registry does not know.
bool is_view_op(const std::string& op);
bool is_elementwise_op(const std::string& op);
// Graph plumbing ops, copies through cx.copy_stmt.
nlohmann::json emit_output(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
nlohmann::json emit_view(EmitContext& cx, const ir::Node& n, std::ostringstream& body);
// A split whose outputs eliminate_views made views of its input (passes/view_offset.h) emits
// nothing: its manifest entry, or null when the split copies.
nlohmann::json split_alias_entry(const EmitContext& cx, const ir::Node& n);
nlohmann::json emit_state_assign(EmitContext& cx, const ir::Node& n, size_t index, std::ostringstream& body);

// The target-independent half of a tunable node, shared by the CPU and GPU lowerings.
// select_tunable: the kernel of each bucket: cx.choices' entry for the node (checked: bucket count,
// candidate names), else `names[default_index]` with `default_reason`. `where` ends the
// not-a-candidate message ("on this CPU").
struct TunableSelection {
  std::vector<KernelChoice> sel;  // per bucket
  std::vector<size_t> idx;        // per bucket: index into the candidate names
  size_t default_index = 0;       // the unprofiled choice (tunables entry "default"; plan reasons compare to it)
};
TunableSelection select_tunable(const EmitContext& cx, const ir::Node& n, const std::vector<std::string>& names,
                                size_t default_index, const std::string& default_reason, const std::string& where);
// Emits the chosen candidates' calls into `body` (one call, or a switch on the bucket index `b`),
// the node's `case slot:` block of the profile entry (bootstrap: every candidate), records the
// node in cx.tunables and returns its kernel_manifest entry. `call(i)` is candidate i's statement
// text.
nlohmann::json emit_tunable_dispatch(EmitContext& cx, const ir::Node& n, const std::string& family,
                                     const std::vector<std::string>& names, const TunableSelection& s,
                                     const std::function<std::string(size_t)>& call, std::ostringstream& body);

// The dinoml_module_plan entry point (arena bytes and output shapes per bucket); shared by the
// CPU and GPU modules. `who` names the lowering in errors ("CPU lowering").
std::string emit_plan_entry(EmitContext& cx, const std::string& who);

}  // namespace dinoml::lower
