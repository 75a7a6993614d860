// `dinoml run`, `validate` and `benchmark`: run artifacts through the runtime's C ABI, exactly
// as a deployed application would.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>

#include <dinoml/runtime.h>

#include "cli/cli.h"
#include "cli/npy.h"
#include "ir/serialize.h"
#include "ops/interpreter.h"

namespace dinoml::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void runtime_fail(const std::string& what) {
  throw std::runtime_error(what + ": " + dinoml_last_error());
}

struct Loaded {
  dinoml_module* module = nullptr;
  dinoml_session* session = nullptr;
  explicit Loaded(const std::string& dir) {
    if (dinoml_module_load(dir.c_str(), &module) != DINOML_OK) runtime_fail("loading '" + dir + "'");
    if (dinoml_session_create(module, &session) != DINOML_OK) runtime_fail("creating a session");
  }
  ~Loaded() {
    dinoml_session_free(session);
    dinoml_module_free(module);
  }
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;

  // node_seconds != nullptr: a timed run (dinoml_session_run_timed), nodes' seconds added to it.
  std::map<std::string, ops::HostTensor> run(const std::map<std::string, ops::HostTensor>& inputs,
                                             std::vector<double>* node_seconds = nullptr) {
    std::vector<dinoml_tensor> in;
    for (const auto& [name, t] : inputs) {
      dinoml_tensor d{};
      d.name = name.c_str();
      d.data = const_cast<uint8_t*>(t.data.data());
      d.nbytes = t.data.size();
      d.dtype = static_cast<dinoml_dtype>(t.dtype);
      d.ndim = t.rank();
      for (int a = 0; a < t.rank(); ++a) d.shape[a] = t.shape[a];
      in.push_back(d);
    }
    size_t nout = dinoml_module_num_outputs(module);
    std::vector<dinoml_tensor> out(nout);
    std::vector<std::string> names(nout);
    for (size_t i = 0; i < nout; ++i) {
      dinoml_tensor_info info;
      dinoml_module_output_info(module, i, &info);
      names[i] = info.name;
      out[i] = dinoml_tensor{};
      out[i].name = names[i].c_str();
    }
    const dinoml_status st =
        node_seconds ? dinoml_session_run_timed(session, in.data(), in.size(), out.data(), out.size(),
                                                node_seconds->data(), node_seconds->size())
                     : dinoml_session_run(session, in.data(), in.size(), out.data(), out.size());
    if (st != DINOML_OK) runtime_fail(node_seconds ? "timed run" : "run");
    std::map<std::string, ops::HostTensor> res;
    for (size_t i = 0; i < nout; ++i) {
      std::vector<int64_t> shape(out[i].shape, out[i].shape + out[i].ndim);
      res[names[i]] = ops::HostTensor::from_bytes(static_cast<ir::DType>(out[i].dtype), shape,
                                                  static_cast<const uint8_t*>(out[i].data), out[i].nbytes);
    }
    return res;
  }
};

std::vector<int64_t> concrete_shape(const json& shape, const std::map<std::string, int64_t>& dims) {
  std::vector<int64_t> s;
  for (const auto& e : shape) s.push_back(e.is_number() ? e.get<int64_t>() : dims.at(e.get<std::string>()));
  return s;
}

}  // namespace

std::map<std::string, int64_t> parse_dims(const json& meta, const std::vector<std::string>& specs) {
  std::map<std::string, int64_t> dims;
  for (const auto& d : meta["dims"]) dims[d["name"]] = d["typical"].get<int64_t>();
  for (const auto& s : specs) {
    auto eq = s.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--dim expects name=value, got '" + s + "'");
    std::string name = s.substr(0, eq);
    if (!dims.count(name)) {
      std::string known;
      for (const auto& [k, v] : dims) known += (known.empty() ? "" : ", ") + k;
      throw std::runtime_error("--dim: the model has no dim '" + name + "' (dims: " + (known.empty() ? "none" : known) + ")");
    }
    dims[name] = std::stoll(s.substr(eq + 1));
  }
  return dims;
}

std::map<std::string, ops::HostTensor> random_inputs(const json& meta, const std::map<std::string, int64_t>& dims,
                                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uf(-1.0, 1.0);
  std::uniform_int_distribution<int64_t> ui(0, 3);  // small, so index inputs stay in range
  std::map<std::string, ops::HostTensor> out;
  for (const auto& in : meta["inputs"]) {
    ops::HostTensor t(ir::dtype_from_name_or_throw(in["dtype"].get<std::string>()), concrete_shape(in["shape"], dims));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (ir::is_float(t.dtype)) t.set_f64(i, uf(rng));
      else t.set_i64(i, ir::is_bool(t.dtype) ? ui(rng) & 1 : ui(rng));
    }
    out[in["name"]] = std::move(t);
  }
  return out;
}

std::string describe(const ops::HostTensor& t, size_t max_values) {
  std::ostringstream o;
  o << ir::dtype_name(t.dtype) << t.shape_string() << " [";
  size_t n = std::min<size_t>(static_cast<size_t>(t.numel()), max_values);
  for (size_t i = 0; i < n; ++i) {
    if (i) o << ", ";
    if (ir::is_float(t.dtype)) o << std::setprecision(6) << t.get_f64(static_cast<int64_t>(i));
    else o << t.get_i64(static_cast<int64_t>(i));
  }
  if (static_cast<size_t>(t.numel()) > n) o << ", ...";
  o << "]";
  return o.str();
}

std::map<std::string, ops::HostTensor> run_artifact(const std::string& artifact,
                                                    const std::map<std::string, ops::HostTensor>& inputs) {
  Loaded l(artifact);
  return l.run(inputs);
}

int cmd_run(const std::string& artifact, const std::vector<std::string>& input_specs,
            const std::vector<std::string>& dim_specs, const std::string& save_dir) {
  json meta = read_json_file((fs::path(artifact) / "metadata.json").string());
  auto dims = parse_dims(meta, dim_specs);
  auto inputs = random_inputs(meta, dims, 0);
  for (const auto& s : input_specs) {
    auto eq = s.find('=');
    if (eq == std::string::npos) throw std::runtime_error("--input expects name=file.npy, got '" + s + "'");
    std::string name = s.substr(0, eq);
    if (!inputs.count(name)) throw std::runtime_error("--input: the model has no input '" + name + "'");
    inputs[name] = read_npy(s.substr(eq + 1));
  }
  Loaded l(artifact);
  auto t0 = std::chrono::steady_clock::now();
  auto outs = l.run(inputs);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& [name, t] : inputs) std::cout << "input  " << name << ": " << describe(t) << "\n";
  for (const auto& [name, t] : outs) {
    std::cout << "output " << name << ": " << describe(t, 16) << "\n";
    if (!save_dir.empty()) {
      // Output names come from the model ("onnx::Flatten_0", "save_infer_model/scale_0.tmp_1"):
      // characters that are not safe in a file name become '_'.
      std::string file = name;
      for (char& c : file)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-')) c = '_';
      if (file.empty() || file[0] == '.') file = "_" + file;
      fs::create_directories(save_dir);
      write_npy((fs::path(save_dir) / (file + ".npy")).string(), t);
      if (file != name) std::cout << "       saved as " << file << ".npy\n";
    }
  }
  std::cout << "latency " << std::fixed << std::setprecision(3) << ms << " ms (first run, includes warm-up)\n";
  return 0;
}

int cmd_validate(const std::string& artifact, double atol, double rtol, int seed) {
  json meta = read_json_file((fs::path(artifact) / "metadata.json").string());
  ir::Graph g = ir::read_graph((fs::path(artifact) / "graph.dinoir.json").string());
  // Every bucket's upper bound plus each dim's minimum: the edges where plans change.
  std::vector<std::map<std::string, int64_t>> cases;
  for (const auto& b : meta["memory_plan"]["buckets"]) cases.push_back(b["dims"].get<std::map<std::string, int64_t>>());
  std::map<std::string, int64_t> mins;
  for (const auto& d : meta["dims"]) mins[d["name"]] = d["min"].get<int64_t>();
  cases.push_back(mins);
  Loaded l(artifact);
  int failures = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    auto inputs = random_inputs(meta, cases[c], static_cast<uint64_t>(seed) + c);
    auto got = l.run(inputs);
    auto want = ops::interpret(g, inputs).outputs;
    for (const auto& [name, w] : want) {
      const auto& o = got.at(name);
      double worst = 0;
      int64_t bad = -1;
      for (int64_t i = 0; i < w.numel(); ++i) {
        double a = o.get_as(i), b = w.get_as(i);
        double err = std::fabs(a - b);
        bool ok = err <= atol + rtol * std::fabs(b) || (std::isnan(a) && std::isnan(b));
        if (!ok && bad < 0) bad = i;
        worst = std::max(worst, err);
      }
      std::cout << (bad < 0 ? "ok   " : "FAIL ") << "dims " << json(cases[c]).dump() << " output " << name
                << ": max abs err " << std::scientific << std::setprecision(2) << worst << std::defaultfloat;
      if (bad >= 0) {
        std::cout << " (first mismatch at flat index " << bad << ": got " << o.get_as(bad) << ", reference "
                  << w.get_as(bad) << ")";
        ++failures;
      }
      std::cout << "\n";
    }
  }
  std::cout << (failures ? "validation FAILED" : "validation passed") << " (" << cases.size()
            << " dim settings, atol " << atol << ", rtol " << rtol << ")\n";
  return failures ? 2 : 0;
}

namespace {

// The kernel a node ran for these dims: its bucket's choice in kernel_manifest.json, else the
// node's selection ("alias" for views, the generated function for fused loops).
std::string node_kernel(const json& entry, const std::map<std::string, int64_t>& dims) {
  if (entry.contains("selected_per_bucket"))
    for (const auto& b : entry["selected_per_bucket"]) {
      bool match = b.contains("dims");
      if (match)
        for (const auto& [k, v] : b["dims"].items())
          if (!dims.count(k) || dims.at(k) != v.get<int64_t>()) match = false;
      if (match) return b.value("kernel", "?");
    }
  if (entry.contains("selected") && entry["selected"].is_string()) return entry["selected"].get<std::string>();
  if (entry.contains("function") && entry["function"].is_string()) return entry["function"].get<std::string>();
  return "";
}

// `dinoml benchmark --per-node`: timed runs, then one row per node (slowest first).
void print_per_node(const std::string& artifact, Loaded& l, const std::map<std::string, ops::HostTensor>& inputs,
                    const std::map<std::string, int64_t>& dims, int iterations, int top, double run_p50_ms) {
  const size_t n = dinoml_module_num_nodes(l.module);
  json kernels = read_json_file((fs::path(artifact) / "kernel_manifest.json").string());
  if (n == 0) {
    std::vector<double> probe(1, 0.0);  // let the runtime say why (an artifact of an older DinoML)
    l.run(inputs, &probe);
  }
  if (!kernels.is_array() || kernels.size() != n)
    throw std::runtime_error("artifact '" + artifact + "': kernel_manifest.json lists " +
                             std::to_string(kernels.is_array() ? kernels.size() : 0) + " nodes but module.so times " +
                             std::to_string(n) + "; the artifact is inconsistent, recompile it");
  std::vector<double> sec(n, 0.0);
  const int runs = std::max(iterations, 1);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < runs; ++i) l.run(inputs, &sec);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / runs;
  double total = 0;
  for (double v : sec) total += v;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sec[a] > sec[b]; });
  const double node_ms = 1e3 * total / runs;
  std::cout << "per node (" << runs << " timed runs; mean per run): nodes " << std::fixed << std::setprecision(4) << node_ms
            << " ms of " << wall_ms << " ms per timed run (untimed p50 " << run_p50_ms
            << " ms; the rest is input binding, output copies and the clock reads)\n";
  std::cout << "  " << std::left << std::setw(5) << "#" << std::setw(34) << "node" << std::setw(22) << "op" << std::right
            << std::setw(11) << "ms" << std::setw(8) << "%" << "  kernel\n";
  const size_t rows = top > 0 ? std::min<size_t>(n, static_cast<size_t>(top)) : n;
  for (size_t r = 0; r < rows; ++r) {
    const size_t i = order[r];
    const json& e = kernels[i];
    std::cout << "  " << std::left << std::setw(5) << i << std::setw(34) << e.value("node", "?") << std::setw(22)
              << e.value("op", "?") << std::right << std::setw(11) << std::setprecision(4) << 1e3 * sec[i] / runs
              << std::setw(8) << std::setprecision(1) << (total > 0 ? 100.0 * sec[i] / total : 0.0) << "  "
              << node_kernel(e, dims) << "\n";
  }
  if (rows < n) std::cout << "  (" << n - rows << " more nodes; --top 0 lists all)\n";
  // The same time by op (views and other code-free nodes included, at ~0).
  std::map<std::string, std::pair<double, int>> by_op;
  for (size_t i = 0; i < n; ++i) {
    auto& [t, c] = by_op[kernels[i].value("op", "?")];
    t += sec[i];
    ++c;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(by_op.begin(), by_op.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::cout << "by op\n";
  for (const auto& [op, tc] : ops)
    std::cout << "  " << std::left << std::setw(39) << op << std::right << std::setw(5) << tc.second << " x "
              << std::setw(11) << std::setprecision(4) << 1e3 * tc.first / runs << " ms" << std::setw(8)
              << std::setprecision(1) << (total > 0 ? 100.0 * tc.first / total : 0.0) << " %\n";
}

}  // namespace

int cmd_benchmark(const std::string& artifact, const std::vector<std::string>& dim_specs, int warmup, int iterations,
                  bool per_node, int top) {
  json meta = read_json_file((fs::path(artifact) / "metadata.json").string());
  auto dims = parse_dims(meta, dim_specs);
  auto inputs = random_inputs(meta, dims, 0);
  Loaded l(artifact);
  for (int i = 0; i < warmup; ++i) l.run(inputs);
  std::vector<double> ms;
  for (int i = 0; i < std::max(iterations, 1); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    l.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) { return ms[std::min(ms.size() - 1, static_cast<size_t>(p * (ms.size() - 1) + 0.5))]; };
  std::cout << "benchmark " << artifact << " dims " << json(dims).dump() << " (session.run incl. output copies, "
            << iterations << " iterations after " << warmup << " warm-up)\n"
            << std::fixed << std::setprecision(4) << "  p50 " << pct(0.5) << " ms  p90 " << pct(0.9) << " ms  p99 "
            << pct(0.99) << " ms  min " << ms.front() << " ms\n";
  if (per_node) print_per_node(artifact, l, inputs, dims, iterations, top, pct(0.5));
  return 0;
}

}  // namespace dinoml::cli
