// `dinoml onnx-conformance DIR`: runs the ONNX backend node tests (each case a folder with
// model.onnx and test_data_set_*/{input,output}_*.pb): import → compile for the CPU → run through
// the runtime → compare with the expected outputs.
//
// Isolation: every case runs in a forked child that reports one JSON line through a pipe; the
// parent is single-threaded (it only forks, polls and reaps), enforces the per-case timeout with
// SIGKILL and turns a crash into a "failed" row, so no case can take the runner down. `--jobs N`
// children run at once. Children share the kernel library and the compile cache: a case costs its
// small generated module only (and nothing on a re-run with a warm cache).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include <dinoml/compiler.hpp>

#include "cli/cli.h"
#include "import/onnx/onnx_import.h"
#include "ir/error.h"

namespace dinoml::cli {
namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct CaseResult {
  std::string name;
  std::string status;  // passed | failed | unsupported
  std::string reason;
  double seconds = 0;
  bool bound_inputs = false;
  std::vector<std::string> unread_inputs;  // test data replaced: the graph never reads them
};

std::string one_line(std::string s, size_t max = 400) {
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// Tolerances of the ONNX backend test runner are rtol 1e-3, atol 1e-7 for float32; ours allow
// for float32 transcendental functions computed in float (not double) and fp16 storage.
bool outputs_match(const ops::HostTensor& got, const ops::HostTensor& want, std::string& why) {
  if (got.dtype != want.dtype) {
    why = "dtype " + std::string(ir::dtype_name(got.dtype)) + ", expected " + std::string(ir::dtype_name(want.dtype));
    return false;
  }
  if (got.shape != want.shape) {
    why = "shape " + got.shape_string() + ", expected " + want.shape_string();
    return false;
  }
  double rtol = 0, atol = 0;
  if (want.dtype == ir::DType::f32) { rtol = 1e-3; atol = 1e-5; }
  else if (want.dtype == ir::DType::f16) { rtol = 1e-2; atol = 1e-3; }
  else if (want.dtype == ir::DType::bf16) { rtol = 2e-2; atol = 1e-2; }
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (ir::is_float(want.dtype)) {
      const double a = got.get_f64(i), b = want.get_f64(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;
      if (std::fabs(a - b) <= atol + rtol * std::fabs(b)) continue;
      std::ostringstream o;
      o << "value mismatch at flat index " << i << ": got " << a << ", expected " << b;
      why = o.str();
      return false;
    }
    if (got.get_i64(i) != want.get_i64(i)) {
      why = "value mismatch at flat index " + std::to_string(i) + ": got " + std::to_string(got.get_i64(i)) +
            ", expected " + std::to_string(want.get_i64(i));
      return false;
    }
  }
  return true;
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(prefix, 0) != 0 || e.path().extension() != ".pb") continue;
    v.push_back({std::stoi(n.substr(prefix.size())), e.path()});
  }
  std::sort(v.begin(), v.end());
  std::vector<fs::path> out;
  for (auto& [k, p] : v) out.push_back(p);
  return out;
}

// "node 'n' (Op): reason; ..." without the file path and the headline.
std::string problems_text(const onnx_import::OnnxImportError& e) {
  if (e.problems.empty()) return one_line(e.what());
  std::string out;
  for (const auto& p : e.problems) {
    if (!out.empty()) out += "; ";
    if (!p.node.empty()) out += "node '" + p.node + "' (" + p.op + "): ";
    out += p.what;
  }
  return one_line(out, 600);
}

// Runs one case in the current process (the child).
CaseResult run_case(const fs::path& dir, const fs::path& work) {
  CaseResult r;
  r.name = dir.filename().string();
  const fs::path model = dir / "model.onnx";
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.status = "failed";
    r.reason = "no test_data_set_* folder";
    return r;
  }
  onnx_import::ImportOptions opts;
  ir::Graph g;
  std::vector<std::string> bound;
  onnx_import::GraphSignature sig;
  try {
    sig = onnx_import::read_graph_signature(model.string());
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = "import: " + one_line(e.what());
    return r;
  }
  auto try_import = [&](const onnx_import::ImportOptions& o) { g = onnx_import::import_onnx_file(model.string(), o); };
  // Input values of a data set (tensors, sequences, empty optionals, read as the model declares
  // them) with the names stored in the .pb files (positional where a file carries none).
  auto load_inputs = [&](const fs::path& set) {
    std::vector<std::pair<std::string, onnx_import::TestValue>> v;
    size_t k = 0;
    for (const auto& f : sorted_files(set, "input_")) {
      onnx_import::ValueType type;
      if (k < sig.inputs.size()) type = sig.inputs[k].second;
      auto t = onnx_import::read_value_pb(f.string(), type);
      std::string name = t.name.empty() && k < sig.inputs.size() ? sig.inputs[k].first : t.name;
      v.push_back({name, std::move(t)});
      ++k;
    }
    return v;
  };
  // The plain tensors of a data set (what may be bound at compile time).
  auto tensors_of = [](const std::vector<std::pair<std::string, onnx_import::TestValue>>& vals) {
    std::vector<std::pair<std::string, ops::HostTensor>> v;
    for (const auto& [name, tv] : vals)
      if (!tv.none && !tv.sequence && tv.tensors.size() == 1) v.push_back({name, tv.tensors[0]});
    return v;
  };
  std::vector<std::pair<std::string, onnx_import::TestValue>> first_values;
  std::vector<std::pair<std::string, ops::HostTensor>> first_inputs;
  bool have_first = false;
  auto read_first = [&]() {
    if (have_first) return true;
    try {
      first_values = load_inputs(sets[0]);
      first_inputs = tensors_of(first_values);
      have_first = true;
      return true;
    } catch (const onnx_import::OnnxImportError& e) {
      r.status = e.all_unsupported() ? "unsupported" : "failed";
      r.reason = "test data: " + problems_text(e);
      return false;
    }
  };
  // Sequence inputs get their length and element shapes from the first data set, optional inputs
  // their presence (every data set must agree: the artifact is compiled for one structure).
  auto structure_of = [&](const std::vector<std::pair<std::string, onnx_import::TestValue>>& vals) {
    std::string out;
    for (const auto& [name, tv] : vals) {
      if (tv.none) out += name + ":none;";
      if (!tv.sequence) continue;
      out += name + ":[";
      for (const auto& t : tv.tensors) out += t.shape_string() + ",";
      out += "];";
    }
    return out;
  };
  {
    // Data that cannot be read yet (e.g. strings) is left to the importer to report.
    try {
      first_values = load_inputs(sets[0]);
      first_inputs = tensors_of(first_values);
      have_first = true;
    } catch (const std::exception&) {
    }
    for (const auto& [name, tv] : first_values) {
      if (tv.none) opts.absent_inputs.insert(name);
      if (!tv.sequence) continue;
      auto& shapes = opts.sequence_inputs[name];
      for (const auto& t : tv.tensors) {
        std::vector<std::string> ext;
        for (int64_t e : t.shape) ext.push_back(std::to_string(e));
        shapes.push_back(ext);
      }
    }
  }
  // A symbolic dim of a graph input is fixed to the first data set's extent (the node tests check
  // values, not dynamic shapes); the case's reason says so.
  std::vector<std::string> fixed_dims;
  auto fix_symbolic_dims = [&](const onnx_import::OnnxImportError& e) {
    static const std::regex sym(R"(graph input '([^']*)' axis (\d+) (?:is the symbolic dim '([^']*)'|has no size and no dim_param \(DinoML names it '([^']*)'\)))");
    size_t added = 0;
    for (const auto& p : e.problems) {
      std::smatch m;
      if (!std::regex_search(p.what, m, sym)) continue;
      const std::string input = m[1].str(), dim = m[3].matched ? m[3].str() : m[4].str();
      const size_t axis = std::stoul(m[2].str());
      for (const auto& [name, tv] : first_values) {
        if (tv.none) continue;
        // A sequence input's element k is "<name>[k]".
        for (size_t i = 0; i < tv.tensors.size(); ++i) {
          const std::string en = tv.sequence ? name + "[" + std::to_string(i) + "]" : name;
          if (en != input || axis >= tv.tensors[i].shape.size() || opts.dims.count(dim)) continue;
          const int64_t ext = tv.tensors[i].shape[axis];
          ir::Dim d;
          d.name = dim;
          d.min = d.max = ext;
          opts.dims[dim] = d;
          fixed_dims.push_back(dim + "=" + std::to_string(ext));
          ++added;
        }
      }
    }
    return added;
  };
  for (int round = 0; round < 4; ++round) {
    try {
      onnx_import::import_onnx_file(model.string(), opts);
      break;
    } catch (const onnx_import::OnnxImportError& e) {
      if (!fix_symbolic_dims(e)) break;
    } catch (const std::exception&) {
      break;
    }
  }
  try {
    try_import(opts);
    if (!read_first()) return r;
  } catch (const onnx_import::OnnxImportError& e) {
    const std::string msg = e.what();
    // DinoML compiles static shapes: a shape-deciding graph input is bound to its test value.
    if (msg.find("must be known at compile time") != std::string::npos) {
      if (!read_first()) return r;
      // Bind exactly the inputs the importer names ("input 'what' ('NAME') must be known ...");
      // each converter stops at its first unknown input, so this repeats while it makes progress.
      // A value computed from graph inputs (not one itself) binds the small integer inputs, then
      // the scalar ones.
      static const std::regex named(R"(\('([^']*)'\) must be known at compile time)");
      onnx_import::OnnxImportError last = e;
      bool ok = false;
      for (int round = 0; round < 8 && !ok; ++round) {
        std::set<std::string> wanted;
        for (const auto& p : last.problems)
          for (std::sregex_iterator it(p.what.begin(), p.what.end(), named), end; it != end; ++it)
            wanted.insert((*it)[1].str());
        size_t added = 0;
        for (const auto& [name, t] : first_inputs)
          if (wanted.count(name) && !opts.bind_inputs.count(name)) {
            opts.bind_inputs[name] = t;
            bound.push_back(name);
            ++added;
          }
        if (added == 0)
          for (const auto& [name, t] : first_inputs)
            if (ir::is_int(t.dtype) && t.numel() <= 8 && !opts.bind_inputs.count(name)) {
              opts.bind_inputs[name] = t;
              bound.push_back(name);
              ++added;
            }
        // Then scalar inputs of any type (e.g. the float start / limit / delta of an expanded
        // Range, whose trip count decides the output's length).
        if (added == 0)
          for (const auto& [name, t] : first_inputs)
            if (t.numel() == 1 && !opts.bind_inputs.count(name)) {
              opts.bind_inputs[name] = t;
              bound.push_back(name);
              ++added;
            }
        if (added == 0) break;
        try {
          try_import(opts);
          ok = true;
        } catch (const onnx_import::OnnxImportError& e2) {
          last = e2;
          if (std::string(e2.what()).find("must be known at compile time") == std::string::npos) break;
        }
      }
      if (!ok) {
        r.status = last.all_unsupported() ? "unsupported" : "failed";
        r.reason = problems_text(last);
        return r;
      }
      r.bound_inputs = true;
    } else {
      r.status = e.all_unsupported() ? "unsupported" : "failed";
      r.reason = problems_text(e);
      return r;
    }
  } catch (const std::exception& e) {
    r.status = "failed";
    r.reason = "import: " + one_line(e.what());
    return r;
  }
  CompileOptions co;
  co.target = "cpu";
  co.out_dir = (work / r.name).string();
  co.progress = false;
  try {
    compile(g, co);
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    r.status = msg.find("no CPU lowering") != std::string::npos ? "unsupported" : "failed";
    r.reason = "compile: " + one_line(msg);
    return r;
  }
  const std::string structure = structure_of(first_values);
  for (const auto& set : sets) {
    std::map<std::string, ops::HostTensor> inputs;
    std::vector<onnx_import::TestValue> expected;
    try {
      auto vals = set == sets[0] ? first_values : load_inputs(set);
      if (structure_of(vals) != structure) {
        r.status = "unsupported";
        r.reason = set.filename().string() + " gives sequence / optional inputs another structure than the first data set "
                   "(the artifact is compiled for one)";
        return r;
      }
      for (auto& [name, tv] : vals) {
        if (std::find(bound.begin(), bound.end(), name) != bound.end() || tv.none) continue;
        if (tv.sequence) {
          for (size_t i = 0; i < tv.tensors.size(); ++i) inputs[name + "[" + std::to_string(i) + "]"] = tv.tensors[i];
        } else {
          inputs[name] = tv.tensors.at(0);
        }
      }
      size_t k = 0;
      for (const auto& f : sorted_files(set, "output_")) {
        onnx_import::ValueType type;
        if (k < sig.outputs.size()) type = sig.outputs[k].second;
        expected.push_back(onnx_import::read_value_pb(f.string(), type));
        ++k;
      }
    } catch (const std::exception& e) {
      r.status = "failed";
      r.reason = "test data: " + one_line(e.what());
      return r;
    }
    // Rename tensor inputs positionally when the files' names are not the graph's.
    if (inputs.size() == g.inputs.size()) {
      bool names_ok = true;
      for (const auto& in : g.inputs) names_ok &= inputs.count(in) != 0;
      if (!names_ok) {
        std::map<std::string, ops::HostTensor> renamed;
        size_t k = 0;
        for (const auto& [name, tv] : set == sets[0] ? first_values : load_inputs(set))
          if (std::find(bound.begin(), bound.end(), name) == bound.end() && !tv.none && !tv.sequence && k < g.inputs.size())
            renamed[g.inputs[k++]] = tv.tensors.at(0);
        if (renamed.size() == inputs.size()) inputs = renamed;
      }
    }
    // A graph input that no op reads (CastLike's `like` only lends its element type) cannot change
    // the outputs; where its test data disagrees with the declared static shape (some node tests
    // store a 1-element `like`), it is fed as zeros of the declared shape.
    {
      const auto cons = g.consumers();
      for (auto& [name, t] : inputs) {
        if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end()) continue;
        if (cons.count(name) || std::find(g.outputs.begin(), g.outputs.end(), name) != g.outputs.end()) continue;
        const auto& decl = g.tensor(name);
        std::vector<int64_t> shp;
        bool is_static = true;
        for (const auto& e : decl.shape) {
          if (!e.is_const()) { is_static = false; break; }
          shp.push_back(e.const_value());
        }
        if (!is_static || (shp == t.shape && decl.dtype == t.dtype)) continue;
        t = ops::HostTensor(decl.dtype, shp);
        if (std::find(r.unread_inputs.begin(), r.unread_inputs.end(), name) == r.unread_inputs.end()) r.unread_inputs.push_back(name);
      }
    }
    std::map<std::string, ops::HostTensor> got;
    try {
      got = run_artifact(co.out_dir, inputs);
    } catch (const std::exception& e) {
      r.status = "failed";
      r.reason = "run: " + one_line(e.what());
      return r;
    }
    if (expected.size() != sig.outputs.size()) {
      r.status = "failed";
      r.reason = "the model has " + std::to_string(sig.outputs.size()) + " outputs, the test data " +
                 std::to_string(expected.size());
      return r;
    }
    // Each ONNX output: a tensor under its name, a sequence as "<name>[k]" for k < its length (and
    // no more), an empty optional as no output at all.
    for (size_t k = 0; k < expected.size(); ++k) {
      const std::string& oname = sig.outputs[k].first;
      const auto& want = expected[k];
      std::vector<std::pair<std::string, const ops::HostTensor*>> pairs;
      std::string extra;
      if (want.none) {
        extra = oname;
      } else if (want.sequence) {
        for (size_t i = 0; i < want.tensors.size(); ++i) pairs.push_back({oname + "[" + std::to_string(i) + "]", &want.tensors[i]});
        extra = oname + "[" + std::to_string(want.tensors.size()) + "]";
      } else {
        pairs.push_back({oname, &want.tensors.at(0)});
      }
      if (got.count(extra)) {
        r.status = "failed";
        r.reason = set.filename().string() + " output '" + extra + "' exists; the expected " +
                   (want.none ? "optional is empty" : "sequence has " + std::to_string(want.tensors.size()) + " elements");
        return r;
      }
      for (const auto& [gname, wt] : pairs) {
        std::string why;
        auto it = got.find(gname);
        if (it == got.end()) {
          r.status = "failed";
          r.reason = "output '" + gname + "' missing";
          return r;
        }
        if (!outputs_match(it->second, *wt, why)) {
          r.status = "failed";
          r.reason = set.filename().string() + " output '" + gname + "': " + why;
          return r;
        }
      }
    }
  }
  r.status = "passed";
  if (!fixed_dims.empty()) {
    std::string list;
    for (const auto& d : fixed_dims) list += (list.empty() ? "" : ", ") + d;
    r.reason = "symbolic dims fixed to the test's sizes: " + list;
  }
  if (r.bound_inputs) {
    std::string list;
    for (const auto& b : bound) list += (list.empty() ? "" : ", ") + b;
    r.reason += (r.reason.empty() ? "" : "; ") + std::string("shape input(s) bound at compile time: ") + list;
  }
  if (!r.unread_inputs.empty()) {
    std::string list;
    for (const auto& b : r.unread_inputs) list += (list.empty() ? "" : ", ") + b;
    r.reason += (r.reason.empty() ? "" : "; ") + std::string("unread input(s) whose test data mismatch the declared shape fed as zeros: ") + list;
  }
  return r;
}

struct Running {
  pid_t pid;
  int fd;
  std::string name;
  Clock::time_point start;
  std::string buf;
  bool killed = false;
};

}  // namespace

int cmd_onnx_conformance(const std::string& dir, int jobs, const std::string& filter, const std::string& cases_file,
                         double timeout_s, const std::string& json_out, const std::string& work_dir, bool require_all_pass,
                         bool quiet) {
  if (!fs::is_directory(dir)) throw std::runtime_error("'" + dir + "' is not a directory");
  std::vector<std::string> names;
  if (!cases_file.empty()) {
    std::ifstream f(cases_file);
    if (!f) throw std::runtime_error("cannot open cases file '" + cases_file + "'");
    std::string line;
    while (std::getline(f, line)) {
      line.erase(0, line.find_first_not_of(" \t"));
      if (auto h = line.find('#'); h != std::string::npos) line.erase(h);
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (line.empty()) continue;
      if (!fs::exists(fs::path(dir) / line / "model.onnx")) throw std::runtime_error("cases file names '" + line + "', which is not a case in " + dir);
      names.push_back(line);
    }
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (!filter.empty()) {
    std::regex re(filter);
    names.erase(std::remove_if(names.begin(), names.end(), [&](const std::string& n) { return !std::regex_search(n, re); }),
                names.end());
  }
  fs::path work = work_dir.empty() ? fs::temp_directory_path() / ("dinoml-onnx-conformance-" + std::to_string(getpid()))
                                   : fs::path(work_dir);
  fs::create_directories(work);
  std::cout.setf(std::ios::unitbuf);
  const auto t0 = Clock::now();
  std::vector<CaseResult> results;
  std::vector<Running> running;
  size_t next = 0;
  jobs = std::max(jobs, 1);
  auto finish = [&](Running& r, int status) {
    CaseResult res;
    res.name = r.name;
    res.seconds = std::chrono::duration<double>(Clock::now() - r.start).count();
    auto nl = r.buf.find('\n');
    if (r.killed) {
      res.status = "failed";
      res.reason = "timeout after " + std::to_string(static_cast<int>(timeout_s)) + " s";
    } else if (nl != std::string::npos) {
      try {
        json j = json::parse(r.buf.substr(0, nl));
        res.status = j["status"];
        res.reason = j["reason"];
      } catch (const std::exception&) {
        res.status = "failed";
        res.reason = "unreadable result from the case process";
      }
    } else if (WIFSIGNALED(status)) {
      res.status = "failed";
      res.reason = "crashed (signal " + std::to_string(WTERMSIG(status)) + ": " + strsignal(WTERMSIG(status)) + ")";
    } else {
      res.status = "failed";
      res.reason = "case process exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                   " without a result";
    }
    if (!quiet)
      std::cout << "[" << std::setw(4) << results.size() + 1 << "/" << names.size() << "] " << std::left << std::setw(12)
                << res.status << std::setw(55) << res.name << std::right << std::fixed << std::setprecision(1)
                << res.seconds << " s  " << one_line(res.reason, 160) << "\n";
    results.push_back(res);
    close(r.fd);
    std::error_code ec;
    fs::remove_all(work / r.name, ec);
  };
  while (next < names.size() || !running.empty()) {
    while (next < names.size() && static_cast<int>(running.size()) < jobs) {
      const std::string name = names[next++];
      int p[2];
      if (pipe(p) != 0) throw std::runtime_error("pipe() failed");
      pid_t pid = fork();
      if (pid < 0) throw std::runtime_error("fork() failed");
      if (pid == 0) {
        close(p[0]);
        // Quiet child: compiler diagnostics stay out of the table. DINOML_CONFORMANCE_VERBOSE=1
        // keeps its stderr (e.g. a sanitizer report behind "exited ... without a result").
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0 && !std::getenv("DINOML_CONFORMANCE_VERBOSE")) { dup2(devnull, 1); dup2(devnull, 2); }
        CaseResult res;
        try {
          res = run_case(fs::path(dir) / name, work);
        } catch (const std::exception& e) {
          res.status = "failed";
          res.reason = std::string("runner: ") + e.what();
        }
        std::string line = json{{"status", res.status}, {"reason", res.reason}}.dump() + "\n";
        size_t off = 0;
        while (off < line.size()) {
          ssize_t w = write(p[1], line.data() + off, line.size() - off);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
        _exit(0);
      }
      close(p[1]);
      running.push_back({pid, p[0], name, Clock::now(), "", false});
    }
    std::vector<pollfd> fds;
    for (auto& r : running) fds.push_back({r.fd, POLLIN, 0});
    poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < running.size();) {
      auto& r = running[i];
      if (fds[i].revents & (POLLIN | POLLHUP)) {
        char b[4096];
        ssize_t n = read(r.fd, b, sizeof b);
        if (n > 0) r.buf.append(b, static_cast<size_t>(n));
      }
      if (!r.killed && std::chrono::duration<double>(Clock::now() - r.start).count() > timeout_s) {
        kill(r.pid, SIGKILL);
        r.killed = true;
      }
      int status = 0;
      pid_t w = waitpid(r.pid, &status, WNOHANG);
      if (w == r.pid) {
        // Drain what is left in the pipe.
        char b[4096];
        ssize_t n;
        while ((n = read(r.fd, b, sizeof b)) > 0) r.buf.append(b, static_cast<size_t>(n));
        finish(r, status);
        fds.erase(fds.begin() + static_cast<long>(i));
        running.erase(running.begin() + static_cast<long>(i));
        continue;
      }
      ++i;
    }
  }
  const double total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(results.begin(), results.end(), [](const CaseResult& a, const CaseResult& b) { return a.name < b.name; });
  size_t passed = 0, failed = 0, unsupported = 0;
  for (const auto& r : results) {
    if (r.status == "passed") ++passed;
    else if (r.status == "unsupported") ++unsupported;
    else ++failed;
  }
  std::cout << "\n" << std::left << std::setw(58) << "case" << std::setw(12) << "status" << "reason\n";
  for (const auto& r : results)
    std::cout << std::left << std::setw(58) << r.name << std::setw(12) << r.status << one_line(r.reason, 300) << "\n";
  std::cout << std::right << "\ntotal " << results.size() << ": passed " << passed << " (" << std::fixed
            << std::setprecision(1) << (results.empty() ? 0.0 : 100.0 * passed / results.size()) << "%), failed " << failed
            << ", unsupported " << unsupported << "; " << std::setprecision(1) << total_s << " s wall with " << jobs
            << " job(s)\n";
  if (!json_out.empty()) {
    json j = {{"total", results.size()}, {"passed", passed}, {"failed", failed}, {"unsupported", unsupported},
              {"wall_seconds", total_s}, {"jobs", jobs}, {"cases", json::array()}};
    for (const auto& r : results)
      j["cases"].push_back({{"name", r.name}, {"status", r.status}, {"reason", r.reason}, {"seconds", r.seconds}});
    std::ofstream(json_out) << j.dump(1) << "\n";
  }
  std::error_code ec;
  if (work_dir.empty()) fs::remove_all(work, ec);
  if (require_all_pass && passed != results.size()) return 1;
  return 0;
}

}  // namespace dinoml::cli
