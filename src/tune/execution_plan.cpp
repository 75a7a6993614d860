#include "tune/execution_plan.h"

#include <fstream>

#include "ir/error.h"

namespace dinoml::tune {
using nlohmann::json;

Choices read_execution_plan(const std::string& path, const json& tunables, json* plan_out) {
  std::ifstream f(path);
  if (!f) throw BuildError("cannot open the execution plan '" + path + "'");
  json plan;
  try {
    plan = json::parse(f);
  } catch (const json::exception& e) {
    throw BuildError("execution plan '" + path + "' is not valid JSON: " + e.what());
  }
  Choices c = choices_from_plan(plan, tunables, "execution plan '" + path + "'");
  if (plan_out) *plan_out = plan;
  return c;
}

Choices choices_from_plan(const json& plan, const json& tunables, const std::string& where) {
  if (!plan.is_object() || plan.value("schema_version", 0) != kExecutionPlanSchemaVersion || !plan.contains("nodes") ||
      !plan["nodes"].is_array())
    throw BuildError(where + ": not an execution plan (expected schema_version " +
                     std::to_string(kExecutionPlanSchemaVersion) + " and a \"nodes\" list)");
  std::map<std::string, const json*> by_name;
  std::string known;
  for (const auto& t : tunables) {
    by_name[t["node"].get<std::string>()] = &t;
    known += (known.empty() ? "" : ", ") + t["node"].get<std::string>();
  }
  Choices out;
  for (const auto& pn : plan["nodes"]) {
    const std::string node = pn.value("node", "");
    auto it = by_name.find(node);
    if (it == by_name.end())
      throw BuildError(where + ": node '" + node + "' is not a tunable node of this graph (tunable nodes: " +
                       (known.empty() ? "none" : known) + ")");
    const json& t = *it->second;
    const size_t nb = t["selected"].size();
    if (!pn.contains("buckets") || !pn["buckets"].is_array() || pn["buckets"].size() != nb)
      throw BuildError(where + ": node '" + node + "' lists " +
                       std::to_string(pn.contains("buckets") ? pn["buckets"].size() : 0) + " buckets, the graph has " +
                       std::to_string(nb));
    std::vector<lower::KernelChoice> per(nb);
    for (const auto& pb : pn["buckets"]) {
      const size_t b = pb.value("bucket", nb);
      if (b >= nb) throw BuildError(where + ": node '" + node + "' has an entry for bucket " + std::to_string(b) +
                                    " outside [0, " + std::to_string(nb) + ")");
      const std::string winner = pb.value("winner", "");
      bool ok = false;
      for (const auto& c : t["candidates"]) ok |= c == winner;
      if (!ok)
        throw BuildError(where + ": node '" + node + "', bucket " + std::to_string(b) + ": unknown candidate '" +
                         winner + "' (candidates: " + t["candidates"].dump() + ")");
      auto& k = per[b];
      k.kernel = winner;
      k.measured = pb.contains("timings") && pb["timings"].is_array() && !pb["timings"].empty();
      k.reason = std::string(k.measured ? "" : "set in the execution plan (not measured)") +
                 (pb.contains("reason") ? (k.measured ? "" : ": ") + pb["reason"].get<std::string>() : "");
      if (k.measured) k.timings = pb["timings"];
    }
    for (size_t b = 0; b < nb; ++b)
      if (per[b].kernel.empty())
        throw BuildError(where + ": node '" + node + "' has no entry for bucket " + std::to_string(b));
    out[node] = per;
  }
  return out;
}

std::vector<std::string> unmeasured_nodes(const json& tunables, const Choices& choices) {
  std::vector<std::string> out;
  for (const auto& t : tunables) {
    const std::string node = t["node"];
    auto it = choices.find(node);
    bool ok = it != choices.end();
    if (ok)
      for (const auto& k : it->second) ok &= k.measured;
    if (!ok) out.push_back(node);
  }
  return out;
}

}  // namespace dinoml::tune
