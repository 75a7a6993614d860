// The one place where environment variables reach the kernel libraries. The kernels read no
// environment: their tuning and debugging knobs (docs/architecture.md "Debugging knobs") are set
// through dml_cpu_set_knob / dml_cuda_set_knob. apply_kernel_knobs() sets every knob whose
// environment variable (the knob's name) is set; the runtime calls it when it loads a module (and
// the profiler when it loads a bootstrap module), before the module's init. Header-only: the
// runtime and the compiler are separate libraries and neither links the kernel libraries.
#pragma once
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace dinoml {

// Sets the knobs of the kernel libraries that `handle` (a dlopen handle of a module.so, or
// RTLD_DEFAULT for a program linked against the kernel libraries) reaches, from the environment.
inline void apply_kernel_knobs(void* handle) noexcept {
  using Count = size_t (*)();
  using Name = const char* (*)(size_t);
  using Set = int (*)(const char*, const char*);
  for (const char* lib : {"dml_cpu", "dml_cuda"}) {
    char sym[64];
    auto find = [&](const char* suffix) {
      std::strcpy(sym, lib);
      std::strcat(sym, suffix);
      return dlsym(handle, sym);
    };
    const auto count = reinterpret_cast<Count>(find("_knob_count"));
    const auto name = reinterpret_cast<Name>(find("_knob_name"));
    const auto set = reinterpret_cast<Set>(find("_set_knob"));
    if (!count || !name || !set) continue;  // this module does not link that library
    for (size_t i = 0, n = count(); i < n; ++i)
      if (const char* knob = name(i))
        if (const char* value = std::getenv(knob)) set(knob, value);
  }
}

// DINOML_CPU_DISABLE_ISA: a comma-separated list of ISA names ("avx512f,avx512bf16") that the
// runtime's required_isa check and the compiler's candidate sets treat as absent (the kernel
// library's ISA-gated kernels get the same list as a knob), so a deployment for a smaller CPU can
// be checked on a bigger one. True when the list names `isa` exactly ("avx" does not name "avx2").
inline bool isa_disabled_by_env(const char* isa) noexcept {
  const char* list = std::getenv("DINOML_CPU_DISABLE_ISA");
  if (!list || !isa) return false;
  const size_t n = std::strlen(isa);
  for (const char* p = list;;) {
    const char* comma = std::strchr(p, ',');
    const size_t len = comma ? static_cast<size_t>(comma - p) : std::strlen(p);
    if (len == n && std::strncmp(p, isa, n) == 0) return true;
    if (!comma) return false;
    p = comma + 1;
  }
}

}  // namespace dinoml
