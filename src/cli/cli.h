// The `dinoml` command. The same entry point serves the C++ binary and `python -m dinoml.cli`
// (through the extension), so every subcommand has one implementation.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <dinoml/compiler.hpp>
#include <nlohmann/json.hpp>

#include "ops/host_tensor.h"

namespace dinoml::cli {

int main(int argc, char** argv);
int main(const std::vector<std::string>& args);  // args[0] is the program name

// Subcommands (each in its own file).
// Kernel selection flags of `dinoml compile` (src/tune/).
struct CompileTuneFlags {
  bool profile = false;
  std::string execution_plan;
  bool strict = false;
  std::string arch;       // target cuda: sm_80 | sm_86 | sm_90a
  bool no_tf32 = false;   // target cuda: exact float32 GEMMs
  std::string fp32_matmul_precision = "highest";  // target cpu: highest | bf16
  std::string weights = "embedded";                // embedded | swappable | external (docs/deploy.md)
  int tensor_parallel = 1;                         // > 1: shard over this many ranks (docs/deploy.md)
  std::vector<std::string> model_args;  // MODEL.py only: forwarded as is (--gguf FILE, --model-arg K=V)
};
int cmd_compile(const std::string& model, const std::string& target, const std::string& out, bool dump_passes,
                bool no_cache, bool no_fuse, const CompileTuneFlags& tune = {});
// The options `dinoml compile` (IR files) and `dinoml compile-onnx` pass to dinoml::compile.
CompileOptions compile_options(const std::string& target, const std::string& out, bool dump_passes, bool no_cache,
                               bool no_fuse, const CompileTuneFlags& tune);
// `dinoml diff A B` (src/cli/cmd_diff.cpp): 0 identical, 1 different.
int cmd_diff(const std::string& a, const std::string& b, bool as_json);
int cmd_inspect(const std::string& artifact, bool as_json);
int cmd_run(const std::string& artifact, const std::vector<std::string>& inputs, const std::vector<std::string>& dims,
            const std::string& save_dir);
int cmd_validate(const std::string& artifact, double atol, double rtol, int seed);
int cmd_benchmark(const std::string& artifact, const std::vector<std::string>& dims, int warmup, int iterations,
                  bool per_node = false, int top = 25);
int cmd_ops(bool markdown);
// Runs `python -m dinoml.cli ARGS...` ($DINOML_PYTHON, default /usr/bin/python3) with the source
// tree's python/ on PYTHONPATH; returns its exit status.
int run_python_cli(const std::vector<std::string>& args);
int cmd_verify(const std::string& artifact, bool as_json);
// `dinoml export-weights DIR FILE`: the artifact's constants as a safetensors file.
int cmd_export_weights(const std::string& artifact, const std::string& out);
// `dinoml gguf-info FILE` (src/cli/cmd_gguf.cpp).
int cmd_gguf_info(const std::string& path, bool as_json, size_t max_items);
// `dinoml tokenize FILE` (src/cli/cmd_tokenize.cpp).
struct TokenizeFlags {
  std::string path, text, text_file, decode;
  bool no_special = false;     // no BOS/EOS added (decode: keep them)
  bool parse_special = false;  // control tokens written in the text become their ids
  bool ids_only = false, as_json = false;
};
int cmd_tokenize(const TokenizeFlags& flags);
// Writes the self-contained HTML report of an artifact (src/cli/inspect_html.cpp).
int cmd_inspect_html(const std::string& artifact, const std::string& out_html);

// ONNX (src/cli/cmd_onnx.cpp, src/cli/onnx_conformance.cpp).
bool is_onnx_path(const std::string& path);
int cmd_compile_onnx(const std::string& model, const std::string& target, const std::string& out,
                     const std::vector<std::string>& dim_specs, bool dump_passes, bool no_cache, bool no_fuse,
                     const CompileTuneFlags& tune);
// `dinoml onnx-ops`: the ONNX op types the importer converts, one per line.
int cmd_onnx_ops();
int cmd_validate_onnx(const std::string& artifact, const std::string& model, const std::vector<std::string>& inputs,
                      double atol, double rtol, int seed);
int cmd_onnx_conformance(const std::string& dir, int jobs, const std::string& filter, const std::string& cases_file,
                         double timeout_s, const std::string& json_out, const std::string& work_dir,
                         bool require_all_pass, bool quiet);

// Shared helpers for commands that run artifacts.
nlohmann::json read_json_file(const std::string& path);
// Deterministic random inputs for the artifact's metadata at the given dim values.
std::map<std::string, ops::HostTensor> random_inputs(const nlohmann::json& metadata,
                                                     const std::map<std::string, int64_t>& dims, uint64_t seed);
std::map<std::string, int64_t> parse_dims(const nlohmann::json& metadata, const std::vector<std::string>& specs);
// Runs one artifact once through the runtime C ABI; throws std::runtime_error with the
// runtime's message on failure.
std::map<std::string, ops::HostTensor> run_artifact(const std::string& artifact,
                                                    const std::map<std::string, ops::HostTensor>& inputs);
std::string describe(const ops::HostTensor& t, size_t max_values = 8);

}  // namespace dinoml::cli
