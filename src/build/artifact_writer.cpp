// Writes the artifact directory (layout in docs/architecture.md). The manifest is written last
// and records the SHA-256 of every other file; the runtime verifies them all before dlopen.
#include <filesystem>
#include <fstream>
#include <set>

#include "build/artifact.h"
#include "ir/error.h"
#include "ir/serialize.h"

#include <dinoml/module_abi.h>
#include <dinoml/runtime.h>

namespace dinoml::build {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  if (!f) throw BuildError("cannot write '" + p.string() + "'");
  f << text;
}

void write_json(const fs::path& p, const json& j) { write_file(p, j.dump(1) + "\n"); }

}  // namespace

json build_metadata(const ir::Graph& g, const passes::MemoryPlan& plan) {
  json m;
  m["dims"] = json::array();
  for (const auto& d : g.dims) m["dims"].push_back(ir::dim_to_json(d));
  std::set<std::string> notes;
  auto tensor_list = [&](const std::vector<std::string>& names) {
    json a = json::array();
    for (const auto& n : names) {
      const auto& t = g.tensor(n);
      json e = {{"name", n}, {"dtype", ir::dtype_name(t.dtype)}, {"shape", ir::shape_to_json(t.shape)}};
      // An input / output whose source model declares another element type (the ONNX importer
      // marks float64 ones, computed in float32, with source format "onnx"): run_numpy casts there.
      if (t.source && t.source->format == "onnx" && t.kind != ir::TensorKind::constant) {
        if (!t.source->type.empty()) {
          e["source_dtype"] = t.source->type;
          notes.insert("the source model declares '" + n + "' as " + t.source->type + "; DinoML " + t.source->policy);
        }
        // An element "<seq>[k]" of an ONNX sequence input / output (run_numpy takes and returns lists).
        const std::string& seq = t.source->tensor;
        if (seq != n && n.size() > seq.size() + 2 && n.compare(0, seq.size(), seq) == 0 && n[seq.size()] == '[') {
          e["sequence"] = seq;
          e["sequence_index"] = std::stoll(n.substr(seq.size() + 1));
        }
      }
      if (t.kind == ir::TensorKind::state) {
        int64_t numel = 1;
        for (const auto& x : t.shape) numel *= x.const_value();
        e["nbytes"] = static_cast<uint64_t>(numel) * ir::dtype_size(t.dtype);
      }
      a.push_back(e);
    }
    return a;
  };
  m["inputs"] = tensor_list(g.inputs);
  m["outputs"] = tensor_list(g.outputs);
  m["states"] = tensor_list(g.states);
  if (!notes.empty()) m["notes"] = std::vector<std::string>(notes.begin(), notes.end());
  m["memory_plan"] = passes::memory_plan_to_json(plan);
  uint64_t cbytes = 0;
  for (const auto& [n, s] : ir::layout_constants(g)) cbytes = std::max(cbytes, s.offset + s.nbytes);
  m["constants_bytes"] = cbytes;
  return m;
}

void write_artifact(const ArtifactContents& c, const Toolchain& tc, const std::string& out_dir) {
  const ir::Graph& g = *c.graph;
  fs::path out = fs::absolute(out_dir).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();
  if (fs::exists(out) && !fs::is_directory(out))
    throw BuildError("output path '" + out.string() + "' exists and is not a directory");
  if (fs::exists(out) && !fs::is_empty(out) && !fs::exists(out / "manifest.json"))
    throw BuildError("output directory '" + out.string() +
                     "' is not empty and is not a DinoML artifact; refusing to overwrite it (choose another --out)");
  fs::path tmp = out.string() + ".tmp-dinoml";
  fs::remove_all(tmp);
  fs::create_directories(tmp / "lib");

  auto layout = ir::layout_constants(g);
  auto blob = ir::pack_constants(g, layout);
  const bool external = c.weights.is_object() && c.weights.value("policy", "") == "external";
  if (!external) {
    std::ofstream f(tmp / "constants.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
  }
  write_json(tmp / "graph.dinoir.json", ir::graph_to_json(g, "constants.bin"));
  // Each further rank's constants, at the offsets of constants.bin (the ranks share the layout).
  std::vector<std::string> rank_files = {"constants.bin"};
  for (size_t r = 0; r < c.rank_graphs.size(); ++r) {
    const ir::Graph& rg = *c.rank_graphs[r];
    const auto rl = ir::layout_constants(rg);
    bool same = rl.size() == layout.size();
    for (auto i = rl.cbegin(), j = layout.cbegin(); same && i != rl.cend(); ++i, ++j)
      same = i->first == j->first && i->second.offset == j->second.offset && i->second.nbytes == j->second.nbytes;
    if (!same)
      throw BuildError("tensor parallel: rank " + std::to_string(r + 1) + "'s constants are laid out differently "
                       "from rank 0's (the ranks must share one graph)");
    auto rblob = ir::pack_constants(rg, layout);
    const std::string rel = "ranks/constants.rank" + std::to_string(r + 1) + ".bin";
    fs::create_directories(tmp / "ranks");
    std::ofstream f(tmp / rel, std::ios::binary);
    f.write(reinterpret_cast<const char*>(rblob.data()), static_cast<std::streamsize>(rblob.size()));
    rank_files.push_back(rel);
  }
  json metadata = build_metadata(g, *c.plan);
  if (c.weights.is_object()) metadata["weights"] = c.weights;
  write_json(tmp / "metadata.json", metadata);
  write_json(tmp / "compile_config.json", c.compile_config);
  const bool cuda = c.cuda != nullptr;
  write_json(tmp / "kernel_manifest.json", cuda ? c.cuda->kernel_manifest : c.lowered->kernel_manifest);
  write_json(tmp / "kernel_codegen_plan.json", cuda ? c.cuda->kernel_codegen_plan : c.lowered->kernel_codegen_plan);
  if (cuda) write_file(tmp / "debug/module.cu", c.cuda->source);
  else write_file(tmp / "debug/module.cpp", c.lowered->source);
  for (const auto& [rel, text] : c.extra_files) write_file(tmp / rel, text);
  fs::copy_file(c.module_so_path, tmp / "module.so");
  fs::copy_file(fs::path(tc.lib_dir) / "libdinoml_runtime.so", tmp / "lib" / "libdinoml_runtime.so");
  const bool rocm = c.rocm_tc != nullptr;
  if (rocm) {
    // The ROCm kernel library of the artifact's arch; the HIP runtime (libamdhip64.so.5) and the
    // ROCm driver stack come from the system.
    fs::copy_file(c.rocm_tc->kernels_lib, tmp / "lib" / "libdinoml_rocm_kernels.so");
  } else if (cuda) {
    // The module links the CUDA runtime dynamically; it ships here so a machine with only the
    // driver runs the artifact. cuBLASLt (over 500 MB) is not shipped: the system's libcublasLt.so.13.
    fs::copy_file(fs::path(c.cuda_tc->lib_dir) / "libdinoml_cuda_kernels.so", tmp / "lib" / "libdinoml_cuda_kernels.so");
    fs::copy_file(c.cuda_tc->cudart, tmp / "lib" / "libcudart.so.13");
  } else {
    fs::copy_file(fs::path(tc.lib_dir) / "libdinoml_cpu_kernels.so", tmp / "lib" / "libdinoml_cpu_kernels.so");
    for (const auto& lib : c.lowered->libraries)  // vendor providers the chosen kernels call
      fs::copy_file(fs::path(tc.lib_dir) / ("lib" + lib + ".so"), tmp / "lib" / ("lib" + lib + ".so"));
  }
  if (!c.pass_dump_dir.empty() && fs::exists(c.pass_dump_dir)) {
    fs::create_directories(tmp / "debug/passes");
    for (const auto& e : fs::directory_iterator(c.pass_dump_dir))
      fs::copy_file(e.path(), tmp / "debug/passes" / e.path().filename());
  }

  // Every file but the manifest, sorted, with its hash.
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(tmp))
    if (e.is_regular_file()) files[fs::relative(e.path(), tmp).generic_string()] = ir::sha256_file(e.path().string());
  json manifest;
  manifest["artifact_schema_version"] = 1;
  manifest["runtime_abi_version"] = DINOML_RUNTIME_ABI_VERSION;
  manifest["module_abi_version"] = DINOML_MODULE_ABI_VERSION;
  manifest["name"] = g.name;
  if (rocm) {
    const auto a = lower::cuda::parse_rocm_arch(c.cuda_arch);
    manifest["target"] = "rocm";
    manifest["arch"] = c.cuda_arch;
    manifest["host_arch"] = "x86-64";
    manifest["required_isa"] = json::array();
    manifest["rocm"] = {{"arch", c.cuda_arch},
                        {"wavefront_size", a.lanes},
                        {"hip_runtime_version", c.rocm_tc->hip_version},
                        {"kernel_library", "lib/libdinoml_rocm_kernels.so"},
                        {"runtime_libraries", json::array()},
                        {"system_libraries", {"libamdhip64.so.5"}},
                        {"run_on_hardware", false},
                        {"note", "compiled and checked by the compiler only (code objects, disassembly); never run on an AMD GPU"}};
  } else if (cuda) {
    const auto a = lower::cuda::parse_arch(c.cuda_arch);
    manifest["target"] = "cuda";
    manifest["arch"] = c.cuda_arch;
    manifest["host_arch"] = "x86-64";
    manifest["required_isa"] = json::array();
    manifest["cuda"] = {{"arch", c.cuda_arch},
                        {"compute_capability", std::to_string(a.major) + "." + std::to_string(a.minor)},
                        {"arch_specific", a.arch_specific},
                        {"cuda_runtime_major", 13},
                        {"runtime_libraries", {"lib/libcudart.so.13"}},
                        {"system_libraries", {"libcublasLt.so.13", "libcuda.so.1"}}};
  } else {
    manifest["target"] = "cpu";
    manifest["arch"] = "x86-64";
    manifest["required_isa"] = c.lowered->required_isa;
    // Vendor libraries of chosen provider kernels: not shipped (they are large and system-wide);
    // the loader checks they load before it opens module.so.
    manifest["system_libraries"] = c.lowered->system_libraries;
  }
  manifest["graph_hash"] = ir::graph_hash(g);
  manifest["dinoml_version"] = DINOML_VERSION;
  if (rocm)
    manifest["toolchain"] = {{"cxx", tc.version}, {"hipcc", c.rocm_tc->version}, {"hipcc_flags", c.cuda->nvcc_flags}};
  else if (cuda)
    manifest["toolchain"] = {{"cxx", tc.version}, {"nvcc", c.cuda_tc->version}, {"nvcc_flags", c.cuda->nvcc_flags}};
  else
    manifest["toolchain"] = {{"cxx", tc.version}, {"cxx_flags", c.lowered->cxx_flags}};
  if (external)  // the constants come from a safetensors file at load (dinoml_module_load_with_weights)
    manifest["constants"] = {{"file", nullptr}, {"policy", "external_safetensors"}, {"nbytes", blob.size()}};
  else
    manifest["constants"] = {{"file", "constants.bin"}, {"policy", "mmap_readonly"}, {"nbytes", blob.size()}};
  if (!c.rank_graphs.empty())
    manifest["tensor_parallel"] = {{"world_size", rank_files.size()}, {"constants", rank_files}};
  manifest["files"] = files;
  write_json(tmp / "manifest.json", manifest);

  fs::remove_all(out);
  fs::rename(tmp, out);
}

}  // namespace dinoml::build
