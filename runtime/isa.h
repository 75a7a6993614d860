// CPU instruction-set checks for manifest "required_isa", done before any artifact code loads:
// running AVX-512 code on a CPU without it dies with SIGILL, far from the cause.
#pragma once

#include <string>
#include <vector>

namespace dinoml::runtime {

// true when this runtime knows the ISA name (see isa.cpp for the list).
bool isa_known(const std::string& name) noexcept;
// true when this CPU (and the OS) support it and DINOML_CPU_DISABLE_ISA (a comma-separated list of
// ISA names, e.g. "avx512f,avx512bw") does not name it. The variable lets a deployment be checked
// on a bigger machine than its target: the runtime then refuses what the smaller CPU would.
bool isa_supported(const std::string& name) noexcept;
bool isa_disabled(const std::string& name) noexcept;

// Throws DINOML_ERR_ISA_MISMATCH naming every missing or unknown ISA.
void check_required_isa(const std::vector<std::string>& required, const std::string& artifact);

}  // namespace dinoml::runtime
