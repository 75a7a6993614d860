#include "isa.h"

#include "errors.h"

#include <array>

namespace dinoml::runtime {
namespace {

struct IsaEntry {
  const char* name;
  bool (*supported)();
};

// __builtin_cpu_supports needs a literal, hence one lambda per name. It also checks that the OS
// saves the wider register state (XCR0), which a raw CPUID test would miss.
#define DINOML_ISA(name) IsaEntry{name, [] { return __builtin_cpu_supports(name) != 0; }}
const std::array kIsas = {
    DINOML_ISA("sse4.2"),     DINOML_ISA("avx"),          DINOML_ISA("avx2"),       DINOML_ISA("fma"),
    DINOML_ISA("f16c"),       DINOML_ISA("bmi2"),         DINOML_ISA("avxvnni"),    DINOML_ISA("avx512f"),
    DINOML_ISA("avx512bw"),   DINOML_ISA("avx512vl"),     DINOML_ISA("avx512dq"),   DINOML_ISA("avx512cd"),
    DINOML_ISA("avx512vnni"), DINOML_ISA("avx512bf16"),   DINOML_ISA("avx512fp16"), DINOML_ISA("avx512vbmi"),
    DINOML_ISA("avx512vbmi2"), DINOML_ISA("avx512ifma"),  DINOML_ISA("amx-tile"),   DINOML_ISA("amx-bf16"),
    DINOML_ISA("amx-int8"),
};
#undef DINOML_ISA

const IsaEntry* find(const std::string& name) noexcept {
  for (const IsaEntry& e : kIsas) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

}  // namespace

bool isa_known(const std::string& name) noexcept { return find(name) != nullptr; }

bool isa_supported(const std::string& name) noexcept {
  __builtin_cpu_init();  // idempotent; required when called before libgcc's constructor ran
  const IsaEntry* e = find(name);
  return e && e->supported();
}

void check_required_isa(const std::vector<std::string>& required, const std::string& artifact) {
  std::string unknown, missing;
  for (const std::string& name : required) {
    std::string& list = isa_known(name) ? missing : unknown;
    if (isa_known(name) && isa_supported(name)) continue;
    list += list.empty() ? "" : ", ";
    list += name;
  }
  if (!unknown.empty()) {
    fail(DINOML_ERR_ISA_MISMATCH, "artifact '", artifact, "' requires instruction set(s) ", unknown,
         " that this DinoML runtime does not know, so it cannot verify this CPU supports them; "
         "use a newer DinoML runtime or recompile the model for this CPU (e.g. with a lower --isa)");
  }
  if (!missing.empty()) {
    fail(DINOML_ERR_ISA_MISMATCH, "artifact '", artifact, "' was compiled for instruction set(s) ", missing,
         " that this CPU does not support; recompile the model for this CPU (e.g. with a lower --isa, "
         "or --isa native on this machine)");
  }
}

}  // namespace dinoml::runtime
