// Loads llama.cpp's libggml-base.so (the oracle of the GGUF tests) with dlopen.
//
// The library comes from the npm package @node-llama-cpp/linux-x64, installed on demand by
// scripts/fetch-ggml-ref (or taken from $DINOML_GGML_REF_DIR). Tests skip only when npm is not
// available (the script exits with status 2); any other failure to get the library fails them.
#pragma once
#include <dlfcn.h>
#include <stdio.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace ggml_ref {

struct Lib {
  void* handle = nullptr;
  bool skip = false;       // npm unavailable
  std::string problem;     // why there is no handle

  template <class F>
  F sym(const char* name) const {
    void* p = handle ? dlsym(handle, name) : nullptr;
    if (!p) throw std::runtime_error(std::string("libggml-base.so lacks symbol ") + name);
    return reinterpret_cast<F>(p);
  }
};

inline std::string fetch_dir(bool& npm_missing, std::string& problem) {
  if (const char* d = std::getenv("DINOML_GGML_REF_DIR"); d && *d) return d;
  std::string cmd = std::string(DINOML_SOURCE_DIR) + "/scripts/fetch-ggml-ref";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    problem = "cannot run " + cmd;
    return "";
  }
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  int st = pclose(p);
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (rc == 2) {
    npm_missing = true;
    problem = "npm is not available, so llama.cpp's reference library (@node-llama-cpp/linux-x64) cannot be "
              "installed; install npm to run the ggml parity tests";
    return "";
  }
  if (rc != 0) {
    problem = cmd + " failed with status " + std::to_string(rc);
    return "";
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  auto nl = out.rfind('\n');
  return nl == std::string::npos ? out : out.substr(nl + 1);
}

inline const Lib& lib() {
  static Lib L = [] {
    Lib l;
    bool npm_missing = false;
    std::string dir = fetch_dir(npm_missing, l.problem);
    if (dir.empty()) {
      l.skip = npm_missing;
      return l;
    }
    std::string path = dir + "/libggml-base.so";
    l.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!l.handle) l.problem = std::string("dlopen ") + path + ": " + dlerror();
    return l;
  }();
  return L;
}

}  // namespace ggml_ref

// In a TEST body: skips (npm missing) or fails (anything else) when the library is unavailable.
#define REQUIRE_GGML()                                              \
  do {                                                              \
    const auto& lib_ = ggml_ref::lib();                             \
    if (!lib_.handle) {                                             \
      if (lib_.skip) GTEST_SKIP() << lib_.problem;                  \
      FAIL() << "ggml reference library unavailable: " << lib_.problem; \
    }                                                               \
  } while (0)
