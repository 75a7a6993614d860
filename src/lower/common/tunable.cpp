// The target-independent half of kernel selection (emit_context.h): which candidate each bucket
// runs, and the dispatch text, tunables entry and profile cases of a tunable node. The targets'
// candidate sets and call texts live in lower/cpu/lower_tunable.cpp and lower/cuda/lower_cuda_tunable.cpp.
#include <algorithm>
#include <set>

#include "ir/error.h"
#include "lower/common/emit_context.h"

namespace dinoml::lower {

using nlohmann::json;

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

}  // namespace dinoml::lower
