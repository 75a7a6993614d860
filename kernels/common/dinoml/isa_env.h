// DINOML_CPU_DISABLE_ISA: a comma-separated list of ISA names ("avx512f,avx512bf16") that the
// runtime's required_isa check and the kernel library's ISA-gated kernels treat as absent, so a
// deployment for a smaller CPU can be checked on a bigger one. One parser for both (header-only:
// the runtime and the kernel library are separate shared libraries). Read at each call.
#pragma once

#include <cstdlib>
#include <cstring>

namespace dinoml {

// true when DINOML_CPU_DISABLE_ISA names `isa` exactly (an entry "avx" does not name "avx2").
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
