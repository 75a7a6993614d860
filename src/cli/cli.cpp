#include "cli/cli.h"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

#include "ir/error.h"

namespace dinoml::cli {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open '" + path + "'");
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("'" + path + "' is not valid JSON: " + e.what());
  }
}

int main(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  return main(static_cast<int>(argv.size()), argv.data());
}

int main(int argc, char** argv) {
  CLI::App app{"DinoML: ahead-of-time ML compiler and runtime"};
  app.require_subcommand(1);

  std::string model, target = "cpu", out;
  bool dump_passes = false, no_cache = false, no_fuse = false;
  auto* c = app.add_subcommand("compile", "compile MODEL.py (defines build_spec()), MODEL.pt2 (torch.export.save), MODEL.dinoir.json or MODEL.onnx into an artifact");
  c->add_option("model", model, "model file")->required();
  c->add_option("--target", target, "cpu, cuda or rocm")->check(CLI::IsMember({"cpu", "cuda", "rocm"}));
  c->add_option("--out,-o", out, "artifact directory")->required();
  c->add_flag("--dump-passes", dump_passes, "write the graph after each pass to debug/passes/");
  c->add_flag("--no-cache", no_cache, "do not use the compile cache");
  c->add_flag("--no-fuse", no_fuse, "skip fusion passes");
  CompileTuneFlags tune;
  c->add_flag("--profile", tune.profile, "time every kernel candidate per shape bucket and keep the fastest "
                                         "(writes execution_plan.json; results cached in profile.sqlite)");
  c->add_option("--execution-plan", tune.execution_plan, "reuse the kernel choices of this execution_plan.json");
  c->add_flag("--strict", tune.strict, "fail when a tunable node has no measured kernel choice");
  c->add_option("--arch", tune.arch, "target cuda: sm_80, sm_86 or sm_90a (default sm_90a); target rocm: gfx90a, gfx1030 "
                                     "or gfx1100 (required; compiled and checked here, never run on AMD hardware)")
      ->check(CLI::IsMember({"sm_80", "sm_86", "sm_90a", "gfx90a", "gfx1030", "gfx1100"}));
  c->add_flag("--no-tf32", tune.no_tf32, "target cuda: float32 GEMMs without TF32 tensor cores");
  c->add_option("--fp32-matmul-precision", tune.fp32_matmul_precision,
                "target cpu: highest (default) or bf16 (float32 GEMMs with constant weights may multiply in bfloat16 "
                "on AMX / AVX512_BF16, fp32 accumulation: faster, ~3 significant digits)")
      ->check(CLI::IsMember({"highest", "bf16"}));
  c->add_option("--weights", tune.weights, "embedded (default: constants.bin, constant folding allowed), swappable "
                                           "(constants.bin, no folding: every constant replaceable at run time) or external "
                                           "(no constants.bin: load with a safetensors file)")
      ->check(CLI::IsMember({"embedded", "swappable", "external"}));
  c->add_option("--tensor-parallel", tune.tensor_parallel,
                "shard the model over N ranks (Megatron-style; one artifact, each rank's constants; run it with "
                "dinoml.runtime.load_group)")
      ->check(CLI::Range(1, 1024));
  std::string model_gguf;
  std::vector<std::string> model_kv;
  c->add_option("--gguf", model_gguf, "MODEL.py: build_spec(gguf=FILE), e.g. examples/llama/model.py");
  c->add_option("--model-arg", model_kv, "MODEL.py: build_spec(KEY=VALUE) (repeatable)");
  std::vector<std::string> onnx_dims;
  c->add_option("--dim", onnx_dims, "ONNX models and .pt2 programs: bounds of a symbolic dim, name=min:max[:bucket,...][:%divisor] or name=value");

  std::string artifact;
  bool as_json = false;
  auto* i = app.add_subcommand("inspect", "show inputs, outputs, dims, nodes with their kernels, memory plan, sizes");
  i->add_option("artifact", artifact)->required();
  i->add_flag("--json", as_json, "machine-readable summary");
  std::string html_out;
  i->add_option("--html", html_out, "write a self-contained HTML page (graph, kernels, memory plan) to this file");

  std::vector<std::string> inputs, dims;
  std::string save_dir;
  auto* r = app.add_subcommand("run", "run an artifact once (random inputs unless --input is given)");
  r->add_option("artifact", artifact)->required();
  r->add_option("--input,-i", inputs, "name=file.npy");
  r->add_option("--dim,-d", dims, "name=value for random inputs (default: each dim's typical value)");
  r->add_option("--save", save_dir, "write outputs as .npy into this directory");

  double atol = 1e-4, rtol = 1e-4;
  int seed = 0;
  auto* v = app.add_subcommand("validate", "compare an artifact with the reference interpreter on random inputs");
  v->add_option("artifact", artifact)->required();
  v->add_option("--atol", atol);
  v->add_option("--rtol", rtol);
  v->add_option("--seed", seed);
  std::string against;
  std::vector<std::string> validate_inputs;
  v->add_option("--against", against, "compare with this ONNX model (imported and run by the reference interpreter)");
  v->add_option("--input,-i", validate_inputs, "with --against: name=file.npy|file.pb instead of random inputs");

  int warmup = 10, iterations = 100;
  auto* b = app.add_subcommand("benchmark", "latency of session.run: warm-up, iterations, p50/p90/p99");
  b->add_option("artifact", artifact)->required();
  b->add_option("--dim,-d", dims, "name=value (default: typical)");
  b->add_option("--warmup", warmup);
  b->add_option("--iterations,-n", iterations);
  bool per_node = false;
  int top = 25;
  b->add_flag("--per-node", per_node, "also time every graph node (CPU artifacts): mean per run, share, kernel");
  b->add_option("--top", top, "with --per-node: rows shown, slowest first (0 = all)");

  // ---- further subcommands register here (one block each) ----

  std::string oc_dir, oc_filter, oc_cases, oc_json, oc_work;
  int oc_jobs = 2;
  double oc_timeout = 120;
  bool oc_require = false, oc_quiet = false;
  auto* oc = app.add_subcommand("onnx-conformance", "run the ONNX backend node tests in DIR (import, compile for the CPU, "
                                                    "run, compare) and print passed/failed/unsupported per case");
  oc->add_option("dir", oc_dir, "e.g. /usr/share/libonnx-testdata/data/node")->required();
  oc->add_option("--jobs,-j", oc_jobs, "cases compiled and run at once (default 2)");
  oc->add_option("--filter", oc_filter, "only cases whose name matches this regex");
  oc->add_option("--cases-file", oc_cases, "only the cases listed in this file (one per line, # comments)");
  oc->add_option("--timeout", oc_timeout, "seconds per case (default 120)");
  oc->add_option("--json", oc_json, "write the results as JSON to this file");
  oc->add_option("--work-dir", oc_work, "keep artifacts here (default: a temporary directory, removed)");
  oc->add_flag("--require-all-pass", oc_require, "exit 1 unless every selected case passes");
  oc->add_flag("--quiet,-q", oc_quiet, "only the final table");

  auto* oo = app.add_subcommand("onnx-ops", "list the ONNX operators (default domain) the importer converts");

  std::string diff_a, diff_b;
  bool diff_json = false;
  auto* df = app.add_subcommand("diff", "what differs between two artifacts: signature, graph nodes, fusions, kernel "
                                        "choices per bucket, constants, module; exit 0 = identical, 1 = different");
  df->add_option("a", diff_a)->required();
  df->add_option("b", diff_b)->required();
  df->add_flag("--json", diff_json, "machine-readable report");

  bool verify_json = false;
  auto* vf = app.add_subcommand("verify", "check an artifact's integrity and fit (manifest, ABI, ISA, paths, SHA-256, "
                                          "bounds) without loading its code; exit 0 = verified, 1 = refused");
  vf->add_option("artifact", artifact)->required();
  vf->add_flag("--json", verify_json, "machine-readable report");

  std::string gguf_path;
  bool gguf_json = false;
  size_t gguf_items = 8;
  auto* gi = app.add_subcommand("gguf-info", "list a GGUF file's metadata and tensors");
  gi->add_option("file", gguf_path)->required();
  gi->add_flag("--json", gguf_json, "machine-readable listing");
  gi->add_option("--max-items", gguf_items, "array elements shown per key (default 8)");

  TokenizeFlags tk;
  auto* tz = app.add_subcommand("tokenize", "token ids of a text under a GGUF file's tokenizer (or --decode ids)");
  tz->add_option("file", tk.path, "GGUF file (a vocab-only file works)")->required();
  tz->add_option("--text,-t", tk.text, "the text");
  tz->add_option("--file,-f", tk.text_file, "read the text from this file");
  tz->add_option("--decode", tk.decode, "comma-separated ids to turn into text instead");
  tz->add_flag("--no-special", tk.no_special, "no BOS/EOS added (with --decode: leading BOS / trailing EOS kept)");
  tz->add_flag("--parse-special", tk.parse_special, "control tokens written in the text (<|im_start|>) become their ids; "
                                                    "with --decode: control tokens are rendered");
  tz->add_flag("--ids", tk.ids_only, "print the ids only, comma-separated");
  tz->add_flag("--json", tk.as_json, "print {\"ids\": [...], \"tokens\": [...]}");

  // Benchmarks against PyTorch / oneDNN / OpenBLAS live in Python (python/dinoml/tools): forwarded.
  auto* bo = app.add_subcommand("benchmark-ops", "time ops over shape sweeps: cpu (vs PyTorch, oneDNN, OpenBLAS) or cuda (vs PyTorch on the GPU; ratios)");
  bo->prefix_command();
  auto* bt = app.add_subcommand("benchmark-torch-ops", "time ops over shape sweeps vs PyTorch (--device cpu or cuda)");
  bt->prefix_command();
  // Generation with a compiled decoder (examples/llama): python/dinoml/tools/generate.py, chat.py.
  auto* gen = app.add_subcommand("generate", "text generation with a compiled llama artifact: DIR --gguf MODEL.gguf "
                                             "--prompt TEXT [--temperature T --top-k K --top-p P --seed S] (or --tokens 1,2,3)");
  gen->prefix_command();
  auto* chat = app.add_subcommand("chat", "interactive chat with a compiled llama artifact: DIR --gguf MODEL.gguf");
  chat->prefix_command();

  std::string ew_out;
  auto* ew = app.add_subcommand("export-weights", "write an artifact's constants (constants.bin) as a safetensors file "
                                                  "(load it with runtime.load(DIR, weights=FILE) into any artifact of the graph)");
  ew->add_option("artifact", artifact)->required();
  ew->add_option("out", ew_out, "FILE.safetensors")->required();

  // The inference server (KServe v2 + OpenAI API) is Python (uvicorn): python/dinoml/serve.
  auto* srv = app.add_subcommand("serve", "serve artifacts over HTTP: KServe v2 for tensor models, the OpenAI API for "
                                          "LLM artifacts: DIR... --port P (dinoml serve --help)");
  srv->prefix_command();
  srv->set_help_flag();  // `dinoml serve --help` is answered by the Python side, which has the options

  bool markdown = false;
  auto* o = app.add_subcommand("ops", "list the registered ops");
  o->add_flag("--markdown", markdown);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto* fwd : {bo, bt, gen, chat, srv})
      if (fwd->parsed()) {
        std::vector<std::string> args = {fwd->get_name()};
        for (const auto& r : fwd->remaining()) args.push_back(r);
        return run_python_cli(args);
      }
    auto model_ends = [&](const std::string& ext) {
      return model.size() > ext.size() && model.compare(model.size() - ext.size(), ext.size(), ext) == 0;
    };
    if (c->parsed() && !model_gguf.empty() && !model_ends(".py"))
      throw std::runtime_error("--gguf applies to MODEL.py files only (got '" + model + "')");
    if (c->parsed() && !model_kv.empty() && !model_ends(".py") && !model_ends(".gguf"))
      throw std::runtime_error("--model-arg applies to MODEL.py and MODEL.gguf files only (got '" + model + "')");
    if (c->parsed() && is_onnx_path(model))
      return cmd_compile_onnx(model, target, out, onnx_dims, dump_passes, no_cache, no_fuse, tune);
    const bool pt2 = model.size() > 4 && model.compare(model.size() - 4, 4, ".pt2") == 0;
    if (c->parsed() && !onnx_dims.empty() && !pt2)
      throw std::runtime_error("--dim applies to ONNX models (.onnx) and torch.export programs (.pt2) only");
    if (c->parsed() && pt2)
      for (const auto& d : onnx_dims) tune.model_args.insert(tune.model_args.end(), {"--dim", d});
    if (oo->parsed()) return cmd_onnx_ops();
    if (oc->parsed())
      return cmd_onnx_conformance(oc_dir, oc_jobs, oc_filter, oc_cases, oc_timeout, oc_json, oc_work, oc_require, oc_quiet);
    if (v->parsed() && !against.empty()) return cmd_validate_onnx(artifact, against, validate_inputs, atol, rtol, seed);
    if (c->parsed()) {
      if (!model_gguf.empty()) tune.model_args.insert(tune.model_args.end(), {"--gguf", model_gguf});
      for (const auto& kv : model_kv) tune.model_args.insert(tune.model_args.end(), {"--model-arg", kv});
      return cmd_compile(model, target, out, dump_passes, no_cache, no_fuse, tune);
    }
    if (df->parsed()) return cmd_diff(diff_a, diff_b, diff_json);
    if (i->parsed() && !html_out.empty()) return cmd_inspect_html(artifact, html_out);
    if (i->parsed()) return cmd_inspect(artifact, as_json);
    if (vf->parsed()) return cmd_verify(artifact, verify_json);
    if (ew->parsed()) return cmd_export_weights(artifact, ew_out);
    if (r->parsed()) return cmd_run(artifact, inputs, dims, save_dir);
    if (v->parsed()) return cmd_validate(artifact, atol, rtol, seed);
    if (b->parsed()) return cmd_benchmark(artifact, dims, warmup, iterations, per_node, top);
    if (o->parsed()) return cmd_ops(markdown);
    if (gi->parsed()) return cmd_gguf_info(gguf_path, gguf_json, gguf_items);
    if (tz->parsed()) return cmd_tokenize(tk);
  } catch (const std::exception& e) {
    std::cerr << "dinoml: error: " << e.what() << "\n";
    return 1;
  }
  return 1;
}

}  // namespace dinoml::cli
