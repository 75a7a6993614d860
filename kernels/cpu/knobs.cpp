// The knob table of libdinoml_cpu_kernels (knobs.h) and its C entry points.
#include "knobs.h"

#include <atomic>
#include <deque>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernel_common.h"

namespace dml_cpu {

Knobs g_knobs;

namespace {

const Knobs kDefaults;

// An integer knob: a null or empty value restores the default, anything else is read by atoll.
struct IntKnob {
  const char* name;
  int64_t Knobs::*field;
};
const IntKnob kIntKnobs[] = {
    {"DINOML_GEMM_DOT_MAX_M", &Knobs::gemm_dot_max_m},
    {"DINOML_GEMM_SLICE_MAX_M", &Knobs::gemm_slice_max_m},
    {"DINOML_GEMM_DOT_T_MAX_M", &Knobs::gemm_dot_t_max_m},
    {"DINOML_GEMM_SKINNY_PACKED_MAX_M", &Knobs::gemm_skinny_packed_max_m},
    {"DINOML_GEMM_BLOCKS_PER_THREAD", &Knobs::gemm_blocks_per_thread},
    {"DINOML_GEMM_PREFETCH_B", &Knobs::gemm_prefetch_b},
    {"DINOML_GEMM_STREAM_PACK_BYTES", &Knobs::gemm_stream_pack_bytes},
    {"DINOML_GEMM_PREFETCH_SLICE_B", &Knobs::gemm_prefetch_slice_b},
    {"DINOML_GEMM_SLICE_CHUNK_DIV", &Knobs::gemm_slice_chunk_div},
    {"DINOML_GEMM_SLICE_STATIC", &Knobs::gemm_slice_static},
    {"DINOML_GEMM_SLICE_FINISH_TILE", &Knobs::gemm_slice_finish_tile},
    {"DINOML_GEMM_SLICE_DIRECT_C", &Knobs::gemm_slice_direct_c},
    {"DINOML_GEMM_KC", &Knobs::gemm_kc},
    {"DINOML_GEMM_MC", &Knobs::gemm_mc},
    {"DINOML_GEMM_NC", &Knobs::gemm_nc},
    {"DINOML_GEMM_DOT_T_STATIC", &Knobs::gemm_dot_t_static},
    {"DINOML_GEMM_SLICE_MAX_A_BYTES", &Knobs::gemm_slice_max_a_bytes},
    {"DINOML_GEMM_SLICE_UNPACKED_MAX_M", &Knobs::gemm_slice_unpacked_max_m},
    {"DINOML_GEMM_SLICE_KC", &Knobs::gemm_slice_kc},
    {"DINOML_BF16_MC", &Knobs::bf16_mc},
    {"DINOML_BF16_KC", &Knobs::bf16_kc},
    {"DINOML_BF16_AMX_MIN_M", &Knobs::bf16_amx_min_m},
    {"DINOML_S8_MC", &Knobs::s8_mc},
    {"DINOML_S8_KC", &Knobs::s8_kc},
    {"DINOML_S8_AMX_MIN_M", &Knobs::s8_amx_min_m},
    {"DINOML_AMX_A_BLOCK_KB", &Knobs::amx_a_block_kb},
    {"DINOML_CONV_CV_KC", &Knobs::conv_cv_kc},
    {"DINOML_CONV_WINO_DENSE", &Knobs::conv_wino_dense},
    {"DINOML_QGEMM_DOT_MAX_M", &Knobs::qgemm_dot_max_m},
};
// Knobs read as text: on/off and mode switches, ISA names, seconds.
const char* const kTextKnobs[] = {"DINOML_CONV_DIRECT", "DINOML_CONV_WINOGRAD", "DINOML_CPU_GEMM_ISA",
                                  "DINOML_CPU_DISABLE_ISA", "DINOML_COLLECTIVE_TIMEOUT_S"};
constexpr size_t kIntCount = sizeof kIntKnobs / sizeof kIntKnobs[0];
constexpr size_t kTextCount = sizeof kTextKnobs / sizeof kTextKnobs[0];

// DINOML_CPU_DISABLE_ISA's list; replaced whole on each set (by a pointer to an interned copy: a reader
// may still hold the previous one).
std::atomic<const std::string*> g_disabled_isa{nullptr};

// The strings g_disabled_isa points to: kept for the process's life (a reader may still hold the
// previous one after a store), one copy per distinct value, so setting the knob repeatedly does not
// grow memory.
const std::string* interned(const char* value) {
  static std::mutex mu;
  static std::deque<std::string> values;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& v : values)
    if (v == value) return &v;
  values.emplace_back(value);
  return &values.back();
}

}  // namespace

bool isa_disabled(const char* isa) {
  const std::string* list = g_disabled_isa.load(std::memory_order_acquire);
  if (!list || !isa) return false;
  const size_t n = std::strlen(isa);
  for (size_t p = 0;;) {
    const size_t comma = list->find(',', p);
    const size_t len = (comma == std::string::npos ? list->size() : comma) - p;
    if (len == n && list->compare(p, n, isa) == 0) return true;
    if (comma == std::string::npos) return false;
    p = comma + 1;
  }
}

}  // namespace dml_cpu

using dml_cpu::g_knobs;

extern "C" int dml_cpu_set_knob(const char* name, const char* value) {
  if (!name) return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_set_knob: null knob name");
  for (const auto& k : dml_cpu::kIntKnobs)
    if (std::strcmp(k.name, name) == 0) {
      g_knobs.*k.field = value && *value ? std::atoll(value) : dml_cpu::kDefaults.*k.field;
      return 0;
    }
  const std::string n(name);
  if (n == "DINOML_CONV_DIRECT") {
    g_knobs.conv_direct = value && value[0] == '0' ? 0 : 1;
  } else if (n == "DINOML_CONV_WINOGRAD") {
    g_knobs.conv_winograd = !value || !*value ? 4 : value[0] == '0' ? 0 : value[0] == '2' ? 2 : 4;
  } else if (n == "DINOML_CPU_GEMM_ISA") {
    dml_cpu::gemm::select_isa_knob(value);
  } else if (n == "DINOML_CPU_DISABLE_ISA") {
    dml_cpu::g_disabled_isa.store(value ? dml_cpu::interned(value) : nullptr, std::memory_order_release);
  } else if (n == "DINOML_COLLECTIVE_TIMEOUT_S") {
    const double s = value ? std::atof(value) : 0.0;
    g_knobs.collective_timeout_s = s > 0 ? s : dml_cpu::kDefaults.collective_timeout_s;
  } else {
    return dml_cpu::fail(DML_CPU_ERR_ARGUMENT, "dml_cpu_set_knob: no knob named '" + n +
                                                   "' (docs/architecture.md \"Debugging knobs\" lists them)");
  }
  return 0;
}

extern "C" size_t dml_cpu_knob_count(void) { return dml_cpu::kIntCount + dml_cpu::kTextCount; }

extern "C" const char* dml_cpu_knob_name(size_t i) {
  if (i < dml_cpu::kIntCount) return dml_cpu::kIntKnobs[i].name;
  if (i < dml_cpu::kIntCount + dml_cpu::kTextCount) return dml_cpu::kTextKnobs[i - dml_cpu::kIntCount];
  return nullptr;
}
