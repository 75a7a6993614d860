// `dinoml inspect`: reads the artifact's JSON files only (never loads its code).
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <iostream>

#include "cli/cli.h"
#include "ir/dtype.h"
#include "ir/int_expr.h"

#include <dinoml/runtime.h>

namespace dinoml::cli {
namespace fs = std::filesystem;
using nlohmann::json;

static std::string shape_text(const json& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    const auto& e = shape[i];
    std::string t = e.is_number() ? std::to_string(e.get<int64_t>()) : e.is_string() ? e.get<std::string>() : e.dump();
    s += (i ? ", " : "") + t;
  }
  return s + "]";
}

static std::string human_bytes(uint64_t b) {
  std::ostringstream o;
  if (b >= (1u << 20)) o << std::fixed << std::setprecision(2) << b / 1048576.0 << " MiB";
  else if (b >= 1024) o << std::fixed << std::setprecision(1) << b / 1024.0 << " KiB";
  else o << b << " B";
  return o.str();
}

static uint64_t round64(uint64_t b) { return b == 0 ? 64 : (b + 63) / 64 * 64; }

// What a session of this artifact holds at each bucket (the runtime's dinoml_session_memory):
// the planned arena, the states, the outputs when the caller passes no buffers (each rounded to
// 64 bytes, as the runtime allocates them) and the runtime's fixed overhead bound.
static json session_memory(const json& meta) {
  const json& states = meta["states"];
  const json& outputs = meta["outputs"];
  uint64_t state_bytes = 0;
  for (const auto& st : states) state_bytes += round64(st.value("nbytes", uint64_t{0}));
  const uint64_t overhead = dinoml_session_overhead_bytes(states.size(), outputs.size());
  json rows = json::array();
  for (const auto& b : meta["memory_plan"]["buckets"]) {
    std::map<std::string, int64_t> dims;
    for (const auto& [k, v] : b["dims"].items()) dims[k] = v.get<int64_t>();
    uint64_t out_bytes = 0;
    for (const auto& o : outputs) {
      uint64_t n = ir::dtype_size(ir::dtype_from_name_or_throw(o["dtype"].get<std::string>()));
      for (int64_t e : ir::eval_shape(ir::shape_from_json(o["shape"]), dims)) n *= static_cast<uint64_t>(e);
      out_bytes += round64(n);
    }
    const uint64_t arena = b.value("arena_bytes", uint64_t{0});
    const uint64_t arena_held = arena ? round64(arena) : 0;
    rows.push_back({{"dims", b["dims"]}, {"arena_bytes", arena_held}, {"state_bytes", state_bytes},
                    {"output_bytes", out_bytes}, {"overhead_bytes", overhead},
                    {"total_bytes", arena_held + state_bytes + out_bytes + overhead}});
  }
  return {{"buckets", rows}, {"constants_bytes", meta.value("constants_bytes", uint64_t{0})},
          {"overhead_bytes", overhead}};
}

int cmd_inspect(const std::string& artifact, bool as_json) {
  fs::path dir(artifact);
  json manifest = read_json_file((dir / "manifest.json").string());
  json meta = read_json_file((dir / "metadata.json").string());
  json kernels = read_json_file((dir / "kernel_manifest.json").string());
  json codegen = read_json_file((dir / "kernel_codegen_plan.json").string());
  json graph = read_json_file((dir / "graph.dinoir.json").string());
  uint64_t total = 0;
  for (const auto& [f, h] : manifest["files"].items())
    if (fs::exists(dir / f)) total += fs::file_size(dir / f);
  if (as_json) {
    std::cout << json{{"manifest", manifest}, {"metadata", meta}, {"kernels", kernels}, {"generated_kernels", codegen},
                      {"total_bytes", total}, {"session_memory", session_memory(meta)}}.dump(1)
              << "\n";
    return 0;
  }
  std::cout << "artifact " << manifest.value("name", "?") << "  (" << dir.string() << ")\n"
            << "  target " << manifest.value("target", "?") << " / " << manifest.value("arch", "?") << ", requires "
            << manifest["required_isa"].dump() << "\n"
            << "  graph hash " << manifest.value("graph_hash", "?") << "\n"
            << "  runtime ABI " << manifest.value("runtime_abi_version", 0) << ", built with "
            << manifest["toolchain"].value("cxx", "?") << "\n";
  if (manifest.contains("tensor_parallel"))
    std::cout << "  tensor parallel: " << manifest["tensor_parallel"].value("world_size", 0)
              << " ranks (run with dinoml.runtime.load_group; tensor_parallel.json says what is split)\n";
  std::cout << "dims\n";
  for (const auto& d : meta["dims"])
    std::cout << "  " << d["name"].get<std::string>() << " in [" << d["min"] << ", " << d["max"] << "], typical "
              << d["typical"] << ", buckets " << d["buckets"].dump() << "\n";
  auto list = [&](const char* title, const json& arr) {
    std::cout << title << "\n";
    for (const auto& t : arr)
      std::cout << "  " << std::left << std::setw(20) << t["name"].get<std::string>() << " " << std::setw(9)
                << t["dtype"].get<std::string>() << " " << shape_text(t["shape"])
                << (t.contains("source_dtype") ? "  (source model: " + t["source_dtype"].get<std::string>() + ")" : "")
                << "\n";
  };
  list("inputs", meta["inputs"]);
  list("outputs", meta["outputs"]);
  if (!meta["states"].empty()) list("states", meta["states"]);
  if (meta.contains("notes")) {
    std::cout << "notes\n";
    for (const auto& n : meta["notes"]) std::cout << "  " << n.get<std::string>() << "\n";
  }
  std::cout << "nodes (" << graph["nodes"].size() << ")\n";
  std::map<std::string, json> by_node;
  for (const auto& k : kernels) by_node[k.value("node", "")] = k;
  for (const auto& n : graph["nodes"]) {
    std::string name = n["name"], op = n["op"];
    std::string kernel = by_node.count(name) ? by_node[name].value("selected", "-") : "-";
    std::cout << "  " << std::left << std::setw(28) << name << " " << std::setw(26) << op << " -> " << kernel << "\n";
    // Tunable nodes: the winner of every bucket, with its median time when it was measured.
    if (by_node.count(name) && by_node[name].contains("selected_per_bucket"))
      for (const auto& pb : by_node[name]["selected_per_bucket"]) {
        if (!pb.contains("timings") && kernel != "per bucket") continue;
        std::cout << "      bucket " << pb.value("bucket", 0) << " " << (pb.contains("dims") ? pb["dims"].dump() : "")
                  << ": " << pb.value("kernel", "?");
        for (const auto& t : pb.contains("timings") ? pb["timings"] : json::array())
          if (t.value("candidate", "") == pb.value("kernel", ""))
            std::cout << "  " << std::setprecision(3) << t.value("median_s", 0.0) * 1e6 << " us";
        if (pb.contains("timings") && !pb["timings"].empty())
          std::cout << " (default " << pb["timings"][0].value("median_s", 0.0) * 1e6 << " us)";
        std::cout << "  [" << pb.value("reason", "") << "]\n";
      }
  }
  if (fs::exists(dir / "execution_plan.json") || fs::exists(dir / "compile_config.json")) {
    json cfg = fs::exists(dir / "compile_config.json") ? read_json_file((dir / "compile_config.json").string()) : json();
    std::cout << "kernel selection: " << cfg.value("kernel_selection", "default")
              << (fs::exists(dir / "execution_plan.json") ? " (execution_plan.json)" : " (default (not profiled))") << "\n";
  }
  std::cout << "generated kernels (" << codegen.size() << ")\n";
  for (const auto& k : codegen) {
    std::cout << "  " << k.value("name", "?") << ": ";
    if (k.contains("members")) std::cout << k["members"].size() << " fused ops " << k["members"].dump();
    std::cout << "\n";
  }
  const auto& mp = meta["memory_plan"];
  uint64_t sum = mp.value("sum_intermediate_bytes", uint64_t{0});
  std::cout << "memory plan (alignment " << mp.value("alignment", 64) << ", intermediates without reuse "
            << human_bytes(sum) << ")\n";
  for (const auto& b : mp["buckets"]) {
    uint64_t arena = b.value("arena_bytes", uint64_t{0});
    std::cout << "  bucket " << b["dims"].dump() << ": arena " << human_bytes(arena) << ", " << b["allocations"].size()
              << " buffers\n";
  }
  const json sm = session_memory(meta);
  std::cout << "session memory (per session; constants " << human_bytes(sm["constants_bytes"].get<uint64_t>())
            << " are mapped once per module and shared)\n";
  for (const auto& r : sm["buckets"]) {
    std::cout << "  bucket " << r["dims"].dump() << ": " << human_bytes(r["total_bytes"].get<uint64_t>()) << " = arena "
              << human_bytes(r["arena_bytes"].get<uint64_t>()) << " + states " << human_bytes(r["state_bytes"].get<uint64_t>())
              << " + outputs " << human_bytes(r["output_bytes"].get<uint64_t>()) << " (when no output buffers are passed)"
              << " + overhead " << human_bytes(r["overhead_bytes"].get<uint64_t>()) << "\n";
  }
  std::cout << "sizes: constants " << human_bytes(meta.value("constants_bytes", uint64_t{0})) << ", artifact "
            << human_bytes(total) << "\n";
  return 0;
}

}  // namespace dinoml::cli
