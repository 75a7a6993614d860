// Kernel selection in the generated module.
//
// A tunable node (gemm family, bmm, softmax) has a candidate set (candidates.h). The lowering
// emits only the candidates chosen for it: one call when every bucket chose the same kernel,
// otherwise a `switch (b)` on the bucket index run() already computes. A bootstrap module
// (CpuLowerOptions::bootstrap) additionally exports
//
//   int dinoml_module_profile(void* module_state, const int64_t* dims, const void* const* inputs,
//                             void* const* outputs, void* const* states, void* arena, int slot,
//                             int candidate, int reps, double* seconds, char* err, size_t errlen);
//
// which runs tunable node `slot` (its index in LoweredModule::tunables) with candidate
// `candidate` `reps` times on the real storage of run() (same arena offsets, constants, inputs)
// and writes each call's wall time. The profiler (src/tune/profiler.cpp) drives it.
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "lower/cpu/emit_cpu.h"

namespace dinoml::lower::cpu {

using nlohmann::json;

namespace {

// The candidates this node can use: ISA of this CPU (candidates_for), provider libraries built
// here, then the node's own limits (hooks->applies), ordered by hooks->rank.
std::vector<KernelCandidate> node_candidates(const EmitContext& cx, CandidateFamily family, const TunableHooks* hooks) {
  std::vector<KernelCandidate> out;
  for (const auto& c : candidates_for(family)) {
    if (!c.library.empty()) {
      const auto& avail = cx.providers;
      if (std::find(avail.begin(), avail.end(), c.library) == avail.end()) continue;
    }
    if (hooks && hooks->applies && !hooks->applies(c)) continue;
    out.push_back(c);
  }
  if (hooks && hooks->rank)
    std::stable_sort(out.begin(), out.end(),
                     [&](const KernelCandidate& x, const KernelCandidate& y) { return hooks->rank(x) < hooks->rank(y); });
  return out;
}

}  // namespace

std::string emit_init_packing(EmitContext& cx, const ir::Node& n, const std::string& setup, const std::string& size_expr,
                              const std::string& pack_call) {
  const std::string var = "dml_packed_" + std::to_string(cx.next_kernel_id++);
  const size_t slot = cx.packed_vars.size();
  cx.packed_vars.push_back(var);
  cx.init << "  {  // " << comment_text(n.name) << "\n"
          << setup << "    const int64_t sz = " << size_expr << ";\n"
          << "    void* p = sz > 0 ? aligned_alloc(64, (size_t)((sz + 63) / 64 * 64)) : NULL;\n"
          << "    int st_ = p ? " << pack_call << " : DML_CPU_ERR_MEMORY;\n"
          << "    if (st_) {\n      free(p);\n      dml_state_free(st);\n      return dml_node_error(err, errlen, "
          << cpp_string_literal(n.name) << ", " << cpp_string_literal(n.op) << ", st_);\n    }\n"
          << "    st->packed[" << slot << "] = p;\n"
          << "  }\n";
  return var;
}

std::string emit_state_bindings(const EmitContext& cx) {
  std::string s = "  [[maybe_unused]] const DmlCpuState* const dml_st = (const DmlCpuState*)module_state;\n"
                  "  [[maybe_unused]] const unsigned char* const cbase = dml_st->constants;\n";
  for (size_t i = 0; i < cx.packed_vars.size(); ++i)
    s += "  [[maybe_unused]] void* const " + cx.packed_vars[i] + " = dml_st->packed[" + std::to_string(i) + "];\n";
  return s;
}

json emit_tunable(EmitContext& cx, const ir::Node& n, CandidateFamily family, const std::string& common_args,
                  std::ostringstream& body, const std::string& wrap_pre, const std::string& wrap_post,
                  const TunableHooks* hooks) {
  const std::vector<KernelCandidate> cands = node_candidates(cx, family, hooks);
  if (cands.empty()) throw BuildError("no " + std::string(family_name(family)) + " kernel candidate runs on this CPU");
  std::vector<std::string> names;
  for (const auto& c : cands) names.push_back(c.name);
  TunableSelection s = select_tunable(cx, n, names, 0, "default (not profiled)", "on this CPU");
  if (hooks && hooks->bucket_default && !(cx.choices && cx.choices->count(n.name)))
    for (size_t b = 0; b < s.idx.size(); ++b) {
      const auto [kernel, reason] = hooks->bucket_default(b);
      const auto it = std::find(names.begin(), names.end(), kernel);
      if (kernel.empty() || it == names.end()) continue;
      s.idx[b] = static_cast<size_t>(it - names.begin());
      s.sel[b] = KernelChoice{kernel, "default (not profiled): " + reason, false, json()};
    }
  for (size_t i : s.idx)
    if (!cands[i].isa.empty()) cx.extra_isa.push_back(cands[i].isa);
  // What the emitted candidates need: the chosen ones, or all of them in a bootstrap module.
  for (size_t ci = 0; ci < cands.size(); ++ci) {
    if (!cx.bootstrap && std::find(s.idx.begin(), s.idx.end(), ci) == s.idx.end()) continue;
    const KernelCandidate& c = cands[ci];
    if (hooks && hooks->prepare) hooks->prepare(c);
    if (!c.library.empty() && std::find(cx.libraries.begin(), cx.libraries.end(), c.library) == cx.libraries.end()) {
      cx.libraries.push_back(c.library);
      cx.system_libraries.push_back(c.system_library);
      cx.functions << "extern \"C\" int " << c.function
                   << "(int, int, int64_t, int64_t, int64_t, const void*, const void*, const void*, const void*, void*, int);"
                      "  // provider lib"
                   << c.library << ".so\n";
    }
  }
  auto call = [&](size_t ci) {
    const KernelCandidate& c = cands[ci];
    const std::string text = hooks && hooks->call ? hooks->call(c) : candidate_call(c, common_args);
    return wrap_pre + checked_call(n, text) + wrap_post;
  };
  return emit_tunable_dispatch(cx, n, family_name(family), names, s, call, body);
}

std::string emit_profile_entry(EmitContext& cx, const std::string& storage) {
  if (!cx.bootstrap) return "";
  std::ostringstream os;
  os << "#include <time.h>\n\nstatic double dml_now(void) {\n  struct timespec ts;\n  clock_gettime(CLOCK_MONOTONIC, &ts);\n"
        "  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;\n}\n\n"
        "// Bootstrap module only: times tunable node `slot` with candidate `candidate` (lower_tunable.cpp).\n"
        "DML_EXPORT int dinoml_module_profile(void* module_state, const int64_t* dims, const void* const* inputs,\n"
        "                                     void* const* outputs, void* const* states, void* arena, int slot,\n"
        "                                     int candidate, int reps, double* seconds, char* err, size_t errlen) {\n"
        "  (void)inputs; (void)outputs; (void)states;\n"
        "  const int64_t* d = dims;\n"
        "  if (dml_check_dims(d, err, errlen)) return 1;\n"
        "  [[maybe_unused]] const int b = dml_bucket_index(d);\n"
     << emit_state_bindings(cx)
     << "  [[maybe_unused]] unsigned char* const abase = (unsigned char*)arena;\n"
     << storage
     << "  for (int rep = 0; rep < reps; ++rep) {\n"
        "    const double dml_start = dml_now();\n"
        "    switch (slot) {\n"
     << cx.profile_cases.str()
     << "    default: goto bad_slot;\n"
        "    }\n"
        "    seconds[rep] = dml_now() - dml_start;\n"
        "  }\n"
        "  return 0;\n"
        "bad_slot:\n"
        "  if (err && errlen) snprintf(err, errlen, \"dinoml_module_profile: no tunable slot %d / candidate %d\", slot, candidate);\n"
        "  return 1;\n"
        "}\n\n";
  return os.str();
}

}  // namespace dinoml::lower::cpu
