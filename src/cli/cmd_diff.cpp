// `dinoml diff A B`: what differs between two artifacts, read from their JSON files only (no
// code is loaded). Sections: signature (dims, inputs, outputs, states), graph nodes (added,
// removed, changed op / inputs / attrs), fusions (generated kernels and their member nodes),
// kernel choices per node and bucket, constants by SHA-256, compile config, module.so hash.
// Exit 0 when nothing differs, 1 otherwise (like diff(1)).
#include <filesystem>
#include <iostream>
#include <set>

#include "cli/cli.h"

namespace dinoml::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct Artifact {
  json manifest, metadata, graph, kernels, codegen, config;
};

json read_optional(const fs::path& p) { return fs::exists(p) ? read_json_file(p.string()) : json(); }

Artifact load(const std::string& dir) {
  fs::path d(dir);
  if (!fs::exists(d / "manifest.json"))
    throw std::runtime_error("'" + dir + "' is not a DinoML artifact (no manifest.json)");
  return {read_json_file((d / "manifest.json").string()), read_json_file((d / "metadata.json").string()),
          read_json_file((d / "graph.dinoir.json").string()), read_optional(d / "kernel_manifest.json"),
          read_optional(d / "kernel_codegen_plan.json"), read_optional(d / "compile_config.json")};
}

// name -> element of an array of objects keyed by `key`.
std::map<std::string, json> by_key(const json& arr, const char* key) {
  std::map<std::string, json> m;
  if (arr.is_array())
    for (const auto& e : arr)
      if (e.contains(key) && e[key].is_string()) m[e[key].get<std::string>()] = e;
  return m;
}

class Report {
 public:
  void add(const std::string& section, const std::string& line) { j_[section].push_back(line); }
  bool empty() const { return j_.empty(); }
  const json& json_value() const { return j_; }

 private:
  json j_ = json::object();
};

// Keyed comparison of two maps: added / removed / changed (with `describe` giving the detail).
template <typename Describe>
void compare_maps(Report& r, const std::string& section, const std::string& what, const std::map<std::string, json>& a,
                  const std::map<std::string, json>& b, Describe describe) {
  for (const auto& [k, v] : a)
    if (!b.count(k)) r.add(section, "- " + what + " '" + k + "' only in A");
  for (const auto& [k, v] : b)
    if (!a.count(k)) r.add(section, "+ " + what + " '" + k + "' only in B");
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it != b.end() && v != it->second) r.add(section, "~ " + what + " '" + k + "': " + describe(v, it->second));
  }
}

std::string field_changes(const json& a, const json& b, const std::vector<std::string>& fields) {
  std::string s;
  for (const auto& f : fields) {
    json va = a.contains(f) ? a[f] : json(), vb = b.contains(f) ? b[f] : json();
    if (va != vb) s += (s.empty() ? "" : "; ") + f + " " + va.dump() + " -> " + vb.dump();
  }
  return s.empty() ? "differs" : s;
}

// Per node: the kernel of every bucket ("k" for all buckets when not tunable).
std::map<std::string, json> kernel_choices(const json& kernels) {
  std::map<std::string, json> m;
  if (!kernels.is_array()) return m;
  for (const auto& k : kernels) {
    json per = json::array();
    if (k.contains("selected_per_bucket"))
      for (const auto& b : k["selected_per_bucket"]) per.push_back(b.value("kernel", "?"));
    else
      per.push_back(k.value("selected", "?"));
    m[k.value("node", "?")] = per;
  }
  return m;
}

std::string module_hash(const json& manifest) {
  if (manifest.contains("files") && manifest["files"].contains("module.so")) return manifest["files"]["module.so"];
  return "?";
}

}  // namespace

int cmd_diff(const std::string& path_a, const std::string& path_b, bool as_json) {
  const Artifact a = load(path_a), b = load(path_b);
  Report r;
  for (const char* f : {"name", "target", "arch", "required_isa", "graph_hash"})
    if (a.manifest.value(f, json()) != b.manifest.value(f, json()))
      r.add("artifact", std::string(f) + ": " + a.manifest.value(f, json()).dump() + " -> " + b.manifest.value(f, json()).dump());

  auto sig = [&](const char* field, const char* what) {
    compare_maps(r, "signature", what, by_key(a.metadata.value(field, json()), "name"),
                 by_key(b.metadata.value(field, json()), "name"),
                 [](const json& x, const json& y) { return field_changes(x, y, {"dtype", "shape", "min", "max", "typical", "buckets", "divisible_by"}); });
  };
  sig("dims", "dim");
  sig("inputs", "input");
  sig("outputs", "output");
  sig("states", "state");

  compare_maps(r, "nodes", "node", by_key(a.graph.value("nodes", json()), "name"),
               by_key(b.graph.value("nodes", json()), "name"),
               [](const json& x, const json& y) { return field_changes(x, y, {"op", "inputs", "outputs", "attrs"}); });

  auto fusions = [](const json& codegen) {
    std::map<std::string, json> m;
    if (codegen.is_array())
      for (const auto& k : codegen) m[k.value("node", k.value("name", "?"))] = k.value("members", json::array());
    return m;
  };
  compare_maps(r, "fusions", "fused group", fusions(a.codegen), fusions(b.codegen),
               [](const json& x, const json& y) { return "members " + x.dump() + " -> " + y.dump(); });

  compare_maps(r, "kernels", "kernel choice of node", kernel_choices(a.kernels), kernel_choices(b.kernels),
               [](const json& x, const json& y) {
                 if (x.size() != y.size()) return x.dump() + " -> " + y.dump();
                 std::string s;
                 for (size_t i = 0; i < x.size(); ++i)
                   if (x[i] != y[i])
                     s += (s.empty() ? "" : "; ") + std::string("bucket ") + std::to_string(i) + " " +
                          x[i].get<std::string>() + " -> " + y[i].get<std::string>();
                 return s;
               });

  auto constants = [](const json& graph) {
    std::map<std::string, json> m;
    for (const auto& t : graph.value("tensors", json::array()))
      if (t.contains("constant")) m[t.value("name", "?")] = t["constant"].value("sha256", "");
    return m;
  };
  compare_maps(r, "constants", "constant", constants(a.graph), constants(b.graph),
               [](const json& x, const json& y) { return "sha256 " + x.get<std::string>().substr(0, 16) + ".. -> " + y.get<std::string>().substr(0, 16) + ".."; });

  const json cfg_a = a.config.is_object() ? a.config : json::object();
  for (const auto& [k, v] : cfg_a.items()) {
    if (k == "passes") continue;  // per-pass graph hashes: the node/fusion sections say what changed
    json w = b.config.is_object() && b.config.contains(k) ? b.config[k] : json();
    if (v != w) r.add("config", k + ": " + v.dump() + " -> " + w.dump());
  }
  if (b.config.is_object())
    for (const auto& [k, v] : b.config.items())
      if (!(a.config.is_object() && a.config.contains(k))) r.add("config", k + ": (absent) -> " + v.dump());

  const std::string ma = module_hash(a.manifest), mb = module_hash(b.manifest);
  if (ma != mb) r.add("module", "module.so sha256 " + ma.substr(0, 16) + ".. -> " + mb.substr(0, 16) + "..");

  if (as_json) {
    std::cout << json{{"a", path_a}, {"b", path_b}, {"identical", r.empty()}, {"differences", r.json_value()}}.dump(1)
              << "\n";
  } else if (r.empty()) {
    std::cout << "artifacts are identical (signature, graph, fusions, kernels, constants, config, module " << ma.substr(0, 16)
              << "..)\n";
  } else {
    std::cout << "--- A " << path_a << "\n+++ B " << path_b << "\n";
    for (const auto& [section, lines] : r.json_value().items()) {
      std::cout << section << ":\n";
      for (const auto& l : lines) std::cout << "  " << l.get<std::string>() << "\n";
    }
  }
  return r.empty() ? 0 : 1;
}

}  // namespace dinoml::cli
