// The default pipeline (a plain list, so docs, flags and --dump-passes follow from it) and its
// driver: after every pass the graph is structurally validated (a broken pass is named at once),
// its canonical hash recorded, and with a dump directory written as NN_<pass>.dinoir.json with
// its constants in NN_<pass>.constants.bin (00_input is the graph before any pass).
#include "passes/pipeline.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/serialize.h"
#include "ir/validate.h"
#include "passes/stride_attention_operands.h"

namespace dinoml::passes {

std::vector<Pass> default_pipeline(const PipelineOptions& opts) {
  std::vector<Pass> p;
  p.push_back({"infer_shapes", "checks every node's declared output types against the op registry's inference", infer_shapes});
  p.push_back({"eliminate_dead_code", "removes nodes not needed by graph outputs or state writes", eliminate_dead_code});
  if (opts.fold_weights) {
    p.push_back({"fold_constants", "evaluates nodes with only constant inputs into constants (skips big broadcasts)", fold_constants});
    p.push_back({"eliminate_dead_code", "drops constants and nodes orphaned by folding", eliminate_dead_code});
  }
  if (opts.fuse) {
    p.push_back({"fuse_attention", "bmm(softmax(scale * bmm(q, k^T) [+ mask]), v) -> scaled_dot_product_attention", fuse_attention});
    if (opts.fold_weights)
      p.push_back({"fold_batch_norm", "batch_norm after a conv with constant weights -> conv2d_bias with folded weights", fold_batch_norm});
    p.push_back({"fuse_conv_epilogue", "conv + bias / relu / residual add + relu -> conv2d_bias_* ops", fuse_conv_epilogue});
    p.push_back({"fuse_gemm_epilogue", "gemm + bias + activation / residual add -> gemm_*_bias_* ops", fuse_gemm_epilogue});
    p.push_back({"fuse_elementwise", "elementwise chains and trees -> fused_elementwise nodes", fuse_elementwise});
  }
  p.push_back({"bind_outputs", "a graph output's producer writes the caller's buffer directly (no copy)", bind_outputs});
  p.push_back({"eliminate_views", "reshape-family outputs alias their input's buffer (view_of)", eliminate_views});
  p.push_back({"alias_kv_cache_write", "kv_cache_write of a state written back by state_assign updates it in place", alias_kv_cache_write});
  if (opts.strided_attention)
    p.push_back({"stride_attention_operands", "head permutes around sdpa -> strided views (no permute kernel)", stride_attention_operands});
  for (const auto& t : opts.target_passes) p.push_back(t);
  p.push_back({"infer_shapes", "re-checks every node after the rewrites", infer_shapes});
  return p;
}

namespace {

void dump(const ir::Graph& g, const std::string& dir, size_t index, const std::string& pass) {
  std::string stem = fmt::format("{:02d}_{}", index, pass);
  ir::write_graph(g, (std::filesystem::path(dir) / (stem + ".dinoir.json")).string(), stem + ".constants.bin");
}

}  // namespace

PipelineReport run_pipeline(ir::Graph& g, const PipelineOptions& opts) {
  PipelineReport report;
  if (!opts.dump_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opts.dump_dir, ec);
    if (ec) throw BuildError("cannot create pass dump directory '" + opts.dump_dir + "': " + ec.message());
    dump(g, opts.dump_dir, 0, "input");
  }
  const std::string input_hash = opts.dump_dir.empty() ? "" : ir::graph_hash(g);
  auto passes = default_pipeline(opts);
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& pass = passes[i];
    PassResult r;
    // Errors keep their type and gain the pass name, so a report says which step failed.
    try {
      r = pass.run(g);
    } catch (const IrError& e) {
      throw IrError("pass '" + pass.name + "': " + e.what());
    } catch (const OpError& e) {
      throw OpError("pass '" + pass.name + "': " + e.what());
    }
    try {
      ir::validate_structure(g);
    } catch (const IrError& e) {
      throw IrError("after pass '" + pass.name + "' the graph is invalid: " + e.what());
    }
    report.entries.push_back({pass.name, r.changed, r.stats, ir::graph_hash(g)});
    if (!opts.dump_dir.empty()) dump(g, opts.dump_dir, i + 1, pass.name);
  }
  if (!opts.dump_dir.empty()) {
    // Index of the dumps: which file came from which pass, whether it changed the graph, its
    // statistics and the graph hash after it (the same hash the file's content gives).
    nlohmann::json index = nlohmann::json::array();
    index.push_back({{"file", "00_input.dinoir.json"}, {"pass", "input"}, {"graph_hash", input_hash}});
    for (size_t i = 0; i < report.entries.size(); ++i) {
      const auto& e = report.entries[i];
      index.push_back({{"file", fmt::format("{:02d}_{}.dinoir.json", i + 1, e.pass)},
                       {"pass", e.pass},
                       {"changed", e.changed},
                       {"stats", e.stats},
                       {"graph_hash", e.graph_hash}});
    }
    std::ofstream f(std::filesystem::path(opts.dump_dir) / "passes.json");
    f << index.dump(1) << "\n";
  }
  return report;
}

}  // namespace dinoml::passes
