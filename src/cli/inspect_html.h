// `dinoml inspect ARTIFACT --html OUT.html`: one self-contained page (inline CSS, JS and SVG; no
// network) showing the optimized graph as a layered DAG coloured by kernel provider, fused groups
// boxed, the memory plan per bucket as a timeline, and per-node times when the artifact was
// profiled. Reads the artifact's JSON files only; never loads its code.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dinoml::cli::html {

// Where a node's code comes from, read from kernel_manifest.json's "selected" kernel.
enum class Provider { input, output, library, generated, alias, memcpy, onednn, openblas, other };
const char* provider_name(Provider p);
Provider classify_kernel(const std::string& selected);

struct DrawNode {
  std::string name, op, kernel, reason;
  Provider provider = Provider::other;
  std::vector<std::string> members;  // fused_elementwise: the ops it replaced
  std::string epilogue;              // gemm with an epilogue: "bias + gelu"
  bool epilogue_fused = false;       // ... that fuse_gemm_epilogue folded in (vs traced that way)
  std::vector<size_t> preds;         // indices into Layout::nodes
  std::vector<std::string> pred_tensors;
  std::vector<std::pair<std::string, double>> times_ms;  // (bucket label, ms) from execution_plan.json
  int layer = 0;
  double x = 0, y = 0, w = 0, h = 0;  // box, top-left corner
};

struct Layout {
  std::vector<DrawNode> nodes;
  double width = 0, height = 0;
};

// Longest-path layering (sources on layer 0) then barycentre ordering sweeps within layers.
Layout layout_graph(const nlohmann::json& graph, const nlohmann::json& kernels, const nlohmann::json& codegen,
                    const std::map<std::string, std::vector<std::pair<std::string, double>>>& times);

// Per-node times from execution_plan.json in whatever shape the profiler writes: any object with a
// string "node" and a time field (…_ms or …_us) contributes one entry.
std::map<std::string, std::vector<std::pair<std::string, double>>> read_node_times(const nlohmann::json& plan);

// The complete page.
std::string render_page(const std::string& artifact_dir);

}  // namespace dinoml::cli::html
