#include "errors.h"

namespace dinoml::runtime {
namespace {
// Thread-local so concurrent sessions never see each other's failures. Setting it may itself
// fail under memory pressure; the fallback is a static string that needs no allocation.
thread_local std::string t_last_error;
thread_local bool t_oom = false;
}  // namespace

void set_last_error(const char* prefix, const char* message) noexcept {
  try {
    t_last_error.assign(prefix);
    t_last_error.append(message);
    t_oom = false;
  } catch (...) {
    t_oom = true;
  }
}

void clear_last_error() noexcept {
  t_last_error.clear();
  t_oom = false;
}

const char* last_error() noexcept {
  return t_oom ? "out of memory while reporting an error" : t_last_error.c_str();
}

}  // namespace dinoml::runtime
