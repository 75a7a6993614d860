// Binding of the C++ `dinoml` command (`dinoml::cli::main`), so `python -m dinoml.cli` offers
// every subcommand without duplicating them. The CLI's header may not exist yet in a given
// checkout: then cli_main raises a clear error instead of breaking the whole extension's build.
#include <cstdio>
#include <iostream>

#include "bindings.h"

#if __has_include("cli/cli.h")
#include "cli/cli.h"
#define DINOML_PY_HAVE_CLI 1
#else
#define DINOML_PY_HAVE_CLI 0
#endif

namespace dinoml::py_ext {

void bind_cli(py::module_& m) {
  m.attr("HAVE_CLI") = bool(DINOML_PY_HAVE_CLI);
  m.def("cli_main", [](const std::vector<std::string>& args) -> int {
#if DINOML_PY_HAVE_CLI
    std::vector<std::string> argv_storage;
    argv_storage.reserve(args.size() + 1);
    argv_storage.push_back("dinoml");
    for (const auto& a : args) argv_storage.push_back(a);
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    // The CLI prints to the process's stdout/stderr; release the GIL since commands such as
    // `benchmark` run for a while.
    py::gil_scoped_release release;
    int rc = dinoml::cli::main(static_cast<int>(argv_storage.size()), argv.data());
    // Flush C++ and C buffers so the CLI's text is not interleaved with later Python output.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(stdout);
    std::fflush(stderr);
    return rc;
#else
    throw std::runtime_error("this build of _dinoml has no C++ CLI (src/cli/cli.h was missing when it was built); "
                             "rebuild the _dinoml target once the CLI exists");
#endif
  }, py::arg("args"), "Runs `dinoml ARGS...` (the C++ CLI) in this process; returns its exit code.");
}

}  // namespace dinoml::py_ext
