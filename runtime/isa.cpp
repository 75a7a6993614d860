#include "isa.h"

#include "errors.h"

#include <dinoml/kernel_knobs.h>

#include <array>
#include <cstdlib>
#include <string>
#if defined(__clang__)
#include <cpuid.h>
#endif

namespace dinoml::runtime {
namespace {

struct IsaEntry {
  const char* name;
  bool (*supported)();
};

// __builtin_cpu_supports needs a literal, hence one lambda per name. It also checks that the OS
// saves the wider register state (XCR0), which a raw CPUID test would miss.
#define DINOML_ISA(name) IsaEntry{name, [] { return __builtin_cpu_supports(name) != 0; }}
#if defined(__clang__) && __clang_major__ < 16
// clang 14 (used only for the fuzz build, scripts/fuzz) does not know these names in
// __builtin_cpu_supports: test CPUID leaf/register/bit and the OS-enabled XCR0 state directly.
bool cpuid_bit(unsigned leaf, unsigned sub, int reg, int bit, unsigned long long xcr0_mask) {
  unsigned r[4] = {0, 0, 0, 0};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) || !((r[reg] >> bit) & 1)) return false;
  unsigned c1[4] = {0, 0, 0, 0};
  __get_cpuid(1, &c1[0], &c1[1], &c1[2], &c1[3]);
  if (!((c1[2] >> 27) & 1)) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return ((static_cast<unsigned long long>(hi) << 32 | lo) & xcr0_mask) == xcr0_mask;
}
constexpr unsigned long long kXcrAvx = 0x6, kXcrAvx512 = 0xe6, kXcrAmx = 0x60000;
#undef DINOML_ISA
#define DINOML_ISA(name) IsaEntry{name, [] { return dinoml_isa_clang(name); }}
bool dinoml_isa_clang(const std::string& n) {
  if (n == "f16c") return cpuid_bit(1, 0, 2, 29, kXcrAvx);
  if (n == "avxvnni") return cpuid_bit(7, 1, 0, 4, kXcrAvx);
  if (n == "avx512fp16") return cpuid_bit(7, 0, 3, 23, kXcrAvx512);
  if (n == "amx-tile") return cpuid_bit(7, 0, 3, 24, kXcrAmx);
  if (n == "amx-bf16") return cpuid_bit(7, 0, 3, 22, kXcrAmx);
  if (n == "amx-int8") return cpuid_bit(7, 0, 3, 25, kXcrAmx);
#define DINOML_BUILTIN(s) if (n == s) return __builtin_cpu_supports(s) != 0;
  DINOML_BUILTIN("sse4.2") DINOML_BUILTIN("avx") DINOML_BUILTIN("avx2") DINOML_BUILTIN("fma") DINOML_BUILTIN("bmi2")
  DINOML_BUILTIN("avx512f") DINOML_BUILTIN("avx512bw") DINOML_BUILTIN("avx512vl") DINOML_BUILTIN("avx512dq")
  DINOML_BUILTIN("avx512cd") DINOML_BUILTIN("avx512vnni") DINOML_BUILTIN("avx512bf16") DINOML_BUILTIN("avx512vbmi")
  DINOML_BUILTIN("avx512vbmi2") DINOML_BUILTIN("avx512ifma")
#undef DINOML_BUILTIN
  return false;
}
#endif
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

bool isa_disabled(const std::string& name) noexcept { return dinoml::isa_disabled_by_env(name.c_str()); }

bool isa_supported(const std::string& name) noexcept {
  __builtin_cpu_init();  // idempotent; required when called before libgcc's constructor ran
  const IsaEntry* e = find(name);
  return e && e->supported() && !isa_disabled(name);
}

void check_required_isa(const std::vector<std::string>& required, const std::string& artifact) {
  std::string unknown, missing;
  bool by_env = false;
  for (const std::string& name : required) {
    std::string& list = isa_known(name) ? missing : unknown;
    if (isa_known(name) && isa_supported(name)) continue;
    by_env = by_env || isa_disabled(name);
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
         "or --isa native on this machine)",
         by_env ? " [DINOML_CPU_DISABLE_ISA is set and names at least one of them: unset it if this CPU has them]"
                : "");
  }
}

}  // namespace dinoml::runtime
