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
#include "lower/cpu/emit_context.h"

namespace dinoml::lower::cpu {

using nlohmann::json;

namespace {

// The candidates this node can use: ISA of this CPU (candidates_for), provider libraries built
// here, then the node's own limits (hooks->applies), ordered by hooks->rank.
std::vector<KernelCandidate> node_candidates(const EmitContext& cx, CandidateFamily family, const TunableHooks* hooks) {
  std::vector<KernelCandidate> out;
  for (const auto& c : candidates_for(family)) {
    if (!c.library.empty()) {
      const auto& avail = cx.options ? cx.options->providers : std::vector<std::string>{};
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

TunableSelection select_tunable(const EmitContext& cx, const ir::Node& n, const std::vector<std::string>& names,
                                size_t default_index, const std::string& default_reason, const std::string& where) {
  const size_t nb = std::max<size_t>(cx.plan.buckets.size(), 1);
  TunableSelection s;
  s.default_index = default_index;
  s.sel.assign(nb, KernelChoice{names.at(default_index), default_reason, false, json()});
  if (cx.choices) {
    auto it = cx.choices->find(n.name);
    if (it != cx.choices->end()) {
      if (it->second.size() != nb)
        throw BuildError("kernel selection for node '" + n.name + "' (" + n.op + ") lists " +
                         std::to_string(it->second.size()) + " buckets, the graph has " + std::to_string(nb) +
                         ": the execution plan was made for a different model or dims");
      s.sel = it->second;
    }
  }
  s.idx.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    size_t i = 0;
    while (i < names.size() && names[i] != s.sel[b].kernel) ++i;
    if (i == names.size()) {
      std::string list;
      for (const auto& c : names) list += (list.empty() ? "" : ", ") + c;
      throw BuildError("kernel selection for node '" + n.name + "' (" + n.op + "), bucket " + std::to_string(b) +
                       ": '" + s.sel[b].kernel + "' is not a candidate of this node " + where + " (candidates: " +
                       list + ")");
    }
    s.idx[b] = i;
  }
  return s;
}

json emit_tunable_dispatch(EmitContext& cx, const ir::Node& n, const std::string& family,
                           const std::vector<std::string>& names, const TunableSelection& s,
                           const std::function<std::string(size_t)>& call, std::ostringstream& body) {
  const size_t nb = s.idx.size();
  const std::set<size_t> distinct(s.idx.begin(), s.idx.end());
  if (distinct.size() == 1) {
    body << call(s.idx[0]);
  } else {
    // Buckets chose differently: dispatch on the runtime bucket. The last group takes `default`
    // so the compiler sees every path return.
    body << "  switch (b) {  // kernel chosen per shape bucket\n";
    size_t seen = 0;
    for (size_t ci : distinct) {
      body << "  ";
      if (++seen == distinct.size()) body << " default:";
      else
        for (size_t b = 0; b < nb; ++b)
          if (s.idx[b] == ci) body << " case " << b << ":";
      body << " {  // " << comment_text(names[ci]) << "\n" << call(ci) << "  } break;\n";
    }
    body << "  }\n";
  }

  json jnames = json::array(), per_bucket = json::array();
  for (const auto& c : names) jnames.push_back(c);
  for (size_t b = 0; b < nb; ++b) {
    json e = {{"bucket", b}, {"kernel", s.sel[b].kernel}, {"reason", s.sel[b].reason}, {"measured", s.sel[b].measured}};
    if (b < cx.plan.buckets.size()) e["dims"] = cx.plan.buckets[b].dims;
    if (!s.sel[b].timings.is_null()) e["timings"] = s.sel[b].timings;
    per_bucket.push_back(e);
  }
  const size_t slot = cx.tunables.size();
  cx.tunables.push_back({{"slot", slot}, {"node", n.name}, {"op", n.op}, {"family", family},
                         {"candidates", jnames}, {"default", names[s.default_index]}, {"selected", per_bucket}});
  if (cx.bootstrap) {
    cx.profile_cases << "    case " << slot << ":  // " << comment_text(n.name) << "\n      switch (candidate) {\n";
    for (size_t ci = 0; ci < names.size(); ++ci)
      cx.profile_cases << "      case " << ci << ": {  // " << comment_text(names[ci]) << "\n"
                       << call(ci) << "      } break;\n";
    cx.profile_cases << "      default: goto bad_slot;\n      }\n      break;\n";
  }
  const bool uniform = distinct.size() == 1;
  std::string reason = uniform ? s.sel[0].reason : "chosen per shape bucket (see selected_per_bucket)";
  return {{"node", n.name}, {"op", n.op}, {"tunable", true}, {"family", family}, {"candidates", jnames},
          {"selected", uniform ? s.sel[0].kernel : "per bucket"}, {"reason", reason}, {"selected_per_bucket", per_bucket}};
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

std::string emit_plan_entry(EmitContext& cx, const std::string& who) {
  std::ostringstream os;
  os << "DML_EXPORT int dinoml_module_plan(const int64_t* dims, size_t* arena_bytes, int64_t* out_shapes, char* err,\n"
        "                                    size_t errlen) {\n"
        "  const int64_t* d = dims;\n"
        "  if (dml_check_dims(d, err, errlen)) return 1;\n"
        "  const int b = dml_bucket_index(d);\n"
        "  *arena_bytes = (size_t)kArenaBytes[b];\n";
  const ir::Graph& g = cx.g;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const auto& shape = g.tensor(g.outputs[i]).shape;
    if (shape.size() > 8) throw IrError(who + ": output '" + g.outputs[i] + "' has rank > 8");
    for (size_t a = 0; a < shape.size(); ++a) os << "  out_shapes[" << i * 8 + a << "] = " << cx.cpp(shape[a]) << ";\n";
  }
  if (g.outputs.empty()) os << "  (void)out_shapes;\n";
  os << "  return 0;\n}\n\n";
  return os.str();
}

}  // namespace dinoml::lower::cpu
