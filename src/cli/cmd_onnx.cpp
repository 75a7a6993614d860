// `dinoml compile MODEL.onnx --dim ...` and `dinoml validate ARTIFACT --against MODEL.onnx`.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include <dinoml/compiler.hpp>

#include "cli/cli.h"
#include "cli/npy.h"
#include "import/onnx/onnx_import.h"
#include "ir/serialize.h"
#include "ops/interpreter.h"

namespace dinoml::cli {
namespace fs = std::filesystem;
using nlohmann::json;

bool is_onnx_path(const std::string& p) {
  return p.size() > 5 && p.substr(p.size() - 5) == ".onnx";
}

onnx_import::ImportOptions onnx_options_from_dims(const std::vector<std::string>& dim_specs) {
  onnx_import::ImportOptions o;
  for (const auto& s : dim_specs) {
    ir::Dim d = onnx_import::parse_dim_spec(s);
    o.dims[d.name] = d;
  }
  return o;
}

int cmd_compile_onnx(const std::string& model, const std::string& target, const std::string& out,
                     const std::vector<std::string>& dim_specs, bool dump_passes, bool no_cache, bool no_fuse,
                     const CompileTuneFlags& tune) {
  ir::Graph g = onnx_import::import_onnx_file(model, onnx_options_from_dims(dim_specs));
  auto res = compile(g, compile_options(target, out, dump_passes, no_cache, no_fuse, tune));
  std::cout << "imported '" << model << "' (" << g.nodes.size() << " DinoML nodes), compiled -> " << res.artifact_dir
            << " in " << res.seconds << " s" << (res.cache_hit ? " (module from cache)" : "") << "\n";
  return 0;
}

// Compares the artifact with the reference interpreter running the freshly imported ONNX model:
// at every bucket's upper bound and each dim's minimum, with random inputs (or the given ones).
int cmd_validate_onnx(const std::string& artifact, const std::string& model, const std::vector<std::string>& input_specs,
                      double atol, double rtol, int seed) {
  json meta = read_json_file((fs::path(artifact) / "metadata.json").string());
  onnx_import::ImportOptions o;
  for (const auto& d : meta["dims"]) {
    ir::Dim dim = ir::dim_from_json(d);
    o.dims[dim.name] = dim;
  }
  ir::Graph g = onnx_import::import_onnx_file(model, o);
  std::map<std::string, ops::HostTensor> given;
  for (const auto& s : input_specs) {
    auto eq = s.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--input expects name=file.npy|file.pb, got '" + s + "'");
    const std::string file = s.substr(eq + 1);
    given[s.substr(0, eq)] = file.size() > 3 && file.substr(file.size() - 3) == ".pb" ? onnx_import::read_tensor_pb(file)
                                                                                      : read_npy(file);
  }
  std::vector<std::map<std::string, int64_t>> cases;
  if (!given.empty()) {
    cases.push_back({});
  } else {
    for (const auto& b : meta["memory_plan"]["buckets"]) cases.push_back(b["dims"].get<std::map<std::string, int64_t>>());
    std::map<std::string, int64_t> mins;
    for (const auto& d : meta["dims"]) mins[d["name"]] = d["min"].get<int64_t>();
    cases.push_back(mins);
  }
  int failures = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    auto inputs = given.empty() ? random_inputs(meta, cases[c], static_cast<uint64_t>(seed) + c) : given;
    auto got = run_artifact(artifact, inputs);
    auto want = ops::interpret(g, inputs).outputs;
    for (const auto& [name, w] : want) {
      auto it = got.find(name);
      if (it == got.end()) {
        std::cout << "FAIL output " << name << ": missing from the artifact\n";
        ++failures;
        continue;
      }
      const auto& o = it->second;
      if (o.shape != w.shape || o.dtype != w.dtype) {
        std::cout << "FAIL output " << name << ": artifact gives " << ir::dtype_name(o.dtype) << o.shape_string()
                  << ", the ONNX model " << ir::dtype_name(w.dtype) << w.shape_string() << "\n";
        ++failures;
        continue;
      }
      double worst = 0;
      int64_t bad = -1;
      for (int64_t i = 0; i < w.numel(); ++i) {
        double a = o.get_as(i), b = w.get_as(i);
        double err = std::fabs(a - b);
        bool ok = err <= atol + rtol * std::fabs(b) || (std::isnan(a) && std::isnan(b)) || a == b;
        if (!ok && bad < 0) bad = i;
        if (std::isfinite(err)) worst = std::max(worst, err);
      }
      std::cout << (bad < 0 ? "ok   " : "FAIL ") << "dims " << json(cases[c]).dump() << " output " << name
                << ": max abs err " << std::scientific << std::setprecision(2) << worst << std::defaultfloat;
      if (bad >= 0) {
        std::cout << " (first mismatch at flat index " << bad << ": got " << o.get_as(bad) << ", ONNX model "
                  << w.get_as(bad) << ")";
        ++failures;
      }
      std::cout << "\n";
    }
  }
  std::cout << (failures ? "validation FAILED" : "validation passed") << " against '" << model << "' ("
            << cases.size() << " input setting(s), atol " << atol << ", rtol " << rtol << ")\n";
  return failures ? 2 : 0;
}

int cmd_onnx_ops() {
  for (const auto& op : onnx_import::supported_onnx_ops()) std::cout << op << "\n";
  return 0;
}

}  // namespace dinoml::cli
