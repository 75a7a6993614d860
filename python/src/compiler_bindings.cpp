// Binding of dinoml::compile. Every failure inside the compiler (IR, op, build errors and
// anything else) surfaces as CompileError carrying the C++ message unchanged.
#include "bindings.h"
#include "dinoml/compiler.hpp"
#include "ir/error.h"
#include "ir/graph.h"

namespace dinoml::py_ext {

void bind_compiler(py::module_& m) {
  m.def("compile", [](const ir::Graph& g, const std::string& target, const std::string& out_dir, bool dump_passes,
                      bool fuse, const std::string& cache_dir, bool use_cache, bool verbose, bool profile,
                      const std::string& execution_plan, bool strict, const std::string& profile_cache,
                      bool use_profile_cache, bool progress, const std::string& arch, bool allow_tf32,
                      const std::string& fp32_matmul_precision, const std::string& weights, int tensor_parallel) {
    CompileOptions o;
    o.target = target;
    o.out_dir = out_dir;
    o.dump_passes = dump_passes;
    o.fuse = fuse;
    o.cache_dir = cache_dir;
    o.use_cache = use_cache;
    o.verbose = verbose;
    o.profile = profile;
    o.execution_plan = execution_plan;
    o.strict = strict;
    o.profile_cache = profile_cache;
    o.use_profile_cache = use_profile_cache;
    o.progress = progress;
    o.arch = arch;
    o.allow_tf32 = allow_tf32;
    o.fp32_matmul_precision = fp32_matmul_precision;
    o.weights = weights;
    o.tensor_parallel = tensor_parallel;
    CompileResult r;
    std::string error;
    {
      // Compiling runs g++ for seconds: let other Python threads go on meanwhile.
      py::gil_scoped_release release;
      try {
        r = dinoml::compile(g, o);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (!error.empty()) {
      PyErr_SetString(errors().compile_error, error.c_str());
      throw py::error_already_set();
    }
    py::dict d;
    d["artifact_dir"] = r.artifact_dir;
    d["graph_hash"] = r.graph_hash;
    d["cache_hit"] = r.cache_hit;
    d["seconds"] = r.seconds;
    d["pass_report"] = r.pass_report.dump();
    d["kernel_selection"] = r.kernel_selection;
    d["profile"] = r.profile.is_null() ? std::string() : r.profile.dump();
    return d;
  }, py::arg("graph"), py::arg("target") = "cpu", py::arg("out_dir"), py::arg("dump_passes") = false,
     py::arg("fuse") = true, py::arg("cache_dir") = "", py::arg("use_cache") = true, py::arg("verbose") = false,
     py::arg("profile") = false, py::arg("execution_plan") = "", py::arg("strict") = false,
     py::arg("profile_cache") = "", py::arg("use_profile_cache") = true, py::arg("progress") = true, py::arg("arch") = "",
     py::arg("allow_tf32") = true, py::arg("fp32_matmul_precision") = "highest",
     py::arg("weights") = "embedded", py::arg("tensor_parallel") = 1);
}

}  // namespace dinoml::py_ext
