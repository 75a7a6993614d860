// Error plumbing of the runtime: internal code throws `Error`; the C ABI boundary converts every
// exception into a status plus a thread-local message (no exception may cross the C ABI).
#pragma once

#include <dinoml/runtime.h>

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <utility>

namespace dinoml::runtime {

class Error : public std::exception {
 public:
  Error(dinoml_status status, std::string message) : status_(status), message_(std::move(message)) {}
  dinoml_status status() const noexcept { return status_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  dinoml_status status_;
  std::string message_;
};

// Concatenates anything streamable; the runtime avoids fmt to keep its dependency list short.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(dinoml_status status, const Args&... args) {
  throw Error(status, cat(args...));
}

// noexcept: called from catch handlers, where a second exception would terminate the process.
void set_last_error(const char* prefix, const char* message) noexcept;
void clear_last_error() noexcept;
const char* last_error() noexcept;

// Runs `body` and maps whatever it throws onto a status + last error. Every exported function
// that can fail goes through here.
template <class F>
dinoml_status guard(F&& body) noexcept {
  try {
    clear_last_error();
    body();
    return DINOML_OK;
  } catch (const Error& e) {
    set_last_error("", e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("", "out of memory");
    return DINOML_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error("internal runtime error: ", e.what());
    return DINOML_ERR_RUNTIME;
  } catch (...) {
    set_last_error("internal runtime error: ", "unknown exception");
    return DINOML_ERR_RUNTIME;
  }
}

}  // namespace dinoml::runtime
