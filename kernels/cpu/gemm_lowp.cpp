// The C ABI of the native low-precision GEMMs (bf16 on AVX512_BF16, int8 on AVX512_VNNI, both on
// AMX where present), built for the baseline ISA: CPU checks, argument checks and their messages,
// the packed-B format and its packing, threads, the K = 0 case. The compute lives in
// kernels/cpu/avx512_lowp/ (built with the AVX-512 / AMX flags) and is entered only after the CPU
// check here, so every refusal and every packing runs on any x86-64 CPU (lowp.h says more).
#include <cpuid.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "avx512_lowp/amx.h"
#include "avx512_lowp/lowp.h"
#include "gemm_isa.h"
#include "kernel_common.h"

namespace dml_cpu::lowp {

void* scratch(int slot, size_t bytes) { return scratch_bytes<ScratchPool::kLowp, 4>(slot, bytes); }

namespace amx {
namespace {

struct Hardware {
  bool bf16 = false, int8 = false;
};

// AMX-TILE / -BF16 / -INT8 in CPUID, tile state enabled by the OS (XCR0 bits 17-18) and granted to
// this process (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA). xgetbv through asm: the intrinsic
// would need the XSAVE target flag.
Hardware probe() {
  constexpr int kArchReqXcompPerm = 0x1023;
  constexpr int kXfeatureTileData = 18;
  Hardware h;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return h;
  const bool tile = d & (1u << 24), bf16 = d & (1u << 22), int8 = d & (1u << 25);
  if (!tile) return h;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return h;  // OSXSAVE
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const uint64_t xcr0 = (uint64_t(hi) << 32) | lo;
  if ((xcr0 & (3u << 17)) != (3u << 17)) return h;  // XTILECFG and XTILEDATA enabled by the OS
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) return h;
  h.bf16 = bf16;
  h.int8 = int8;
  return h;
}

}  // namespace

bool usable(Kind kind) {
  static const Hardware h = probe();
  if (kind == Kind::bf16) return h.bf16 && !isa_disabled("amxbf16");
  return h.int8 && !isa_disabled("amxint8");
}

}  // namespace amx

namespace {

constexpr char kS8Magic[8] = {'D', 'M', 'L', 'S', '8', 'Q', '2', '\0'};    // '2': groups padded for AMX
constexpr char kBf16Magic[8] = {'D', 'M', 'L', 'B', 'F', '1', '6', '2'};  // '2': groups padded for AMX

bool avx512_base() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}
bool s8_cpu_ok() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vnni") && avx512_base() && !isa_disabled("avx512vnni");
}
bool bf16_cpu_ok() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") && avx512_base() && !isa_disabled("avx512bf16");
}

int s8_unsupported(const char* kernel) {
  return fail_unsupported(kernel, ": this CPU does not support AVX512_VNNI (vpdpbusd)"
                                  " or DINOML_CPU_DISABLE_ISA names avx512vnni");
}
int bf16_unsupported(const char* kernel) {
  return fail_unsupported(kernel, ": this CPU does not support AVX512_BF16 (vdpbf16ps) or DINOML_CPU_DISABLE_ISA"
                                  " names avx512bf16; use dml_cpu_gemm with dtype bfloat16 (fp32 compute)");
}
int no_memory(const char* kernel, const char* what) {
  return fail(DML_CPU_ERR_MEMORY, std::string(kernel) + ": cannot allocate " + what);
}

// Threads: `forced` > 0 exactly that many; 0: OpenMP's count, 1 below ~2^18 multiply-adds or
// inside a parallel region (same rule as dml_cpu_gemm).
int choose_threads(int forced, int64_t M, int64_t N, int64_t K) {
  if (forced > 0) return forced;
  if (omp_in_parallel()) return 1;
  if (M * N * std::max<int64_t>(K, 1) < (int64_t{1} << 18)) return 1;
  return std::max(1, omp_get_max_threads());
}

void write_header(void* packed, const char* magic, int64_t N, int64_t K, int64_t groups) {
  PackedHeader h{};
  std::memcpy(h.magic, magic, 8);
  h.n = N;
  h.k = K;
  h.nr = kPanelCols;
  h.groups = groups;
  std::memcpy(packed, &h, sizeof h);
}

// The panels after the header of a packed B made by `packer` for K × N, or nullptr (and the
// message) when the buffer is of another format or shape.
const char* checked_panels(const void* packed, const char* magic, const char* packer, int64_t N, int64_t K,
                           const char* kernel, int* st) {
  PackedHeader h;
  std::memcpy(&h, packed, sizeof h);
  if (std::memcmp(h.magic, magic, 8) != 0) {
    *st = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b was not made by " + packer);
    return nullptr;
  }
  if (h.n != N || h.k != K || h.nr != kPanelCols) {
    *st = fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": packed_b holds a " + std::to_string(h.k) + "x" +
                                         std::to_string(h.n) + " weight, the call needs " + std::to_string(K) + "x" +
                                         std::to_string(N));
    return nullptr;
  }
  return static_cast<const char*>(packed) + kHeaderBytes;
}

int check_layout(int b_layout, const char* kernel) {
  if (b_layout != DML_CPU_B_RRR && b_layout != DML_CPU_B_RCR)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown b layout " + std::to_string(b_layout));
  return DML_CPU_OK;
}

// ---- int8 -------------------------------------------------------------------------------------

int64_t s8_comp_bytes(int64_t N) { return cdiv(N, kPanelCols) * kPanelCols * 4; }

// b (RRR: b[K, N], RCR: b[N, K]) into kPanelCols-column panels of K-quads, and comp[n] = 128·Σ_k b[k, n]
// (the correction of feeding s8 activations as u8 = s8 + 128, gemm_s8_avx512.cpp).
void s8_pack_b(const int8_t* b, int layout, int64_t N, int64_t K, int64_t G, uint32_t* out, int32_t* comp,
               int threads) {
  const int64_t panels = cdiv(N, kPanelCols);
  const bool fast = layout == DML_CPU_B_RRR && s8_cpu_ok();
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t j = 0; j < panels; ++j) {
    if (fast && (j + 1) * kPanelCols <= N) {
      s8_pack_rrr_panel_avx512(b, N, K, G, j, out, comp);
      continue;
    }
    uint32_t* o = out + j * G * kPanelCols;
    for (int64_t jj = 0; jj < kPanelCols; ++jj) {
      const int64_t n = j * kPanelCols + jj;
      int32_t sum = 0;
      for (int64_t g = 0; g < G; ++g) {
        uint8_t q[4] = {0, 0, 0, 0};
        if (n < N)
          for (int s = 0; s < 4; ++s) {
            const int64_t k = 4 * g + s;
            if (k < K) {
              const int8_t v = layout == DML_CPU_B_RRR ? b[k * N + n] : b[n * K + k];
              q[s] = static_cast<uint8_t>(v);
              sum += v;
            }
          }
        uint32_t w;
        std::memcpy(&w, q, 4);
        o[g * kPanelCols + jj] = w;
      }
      comp[n] = 128 * sum;
    }
  }
}

int s8_check_args(int a_dtype, int64_t M, int64_t N, int64_t K, const float* scale, const float* bias, int epilogue,
                  int threads, const char* kernel) {
  if (M < 0 || N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (a_dtype != DML_CPU_I8 && a_dtype != DML_CPU_U8)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": a dtype " + dtype_name(a_dtype) +
                                             " is not supported (int8 or uint8)");
  if (epilogue != DML_CPU_EPI_NONE && epilogue != DML_CPU_EPI_RELU)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": epilogue " + std::to_string(epilogue) +
                                             " is not supported (none or relu)");
  if (!scale && (bias || epilogue != DML_CPU_EPI_NONE))
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) +
                                          ": bias and relu need the dequantizing output (scale != NULL, fp32 c)");
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": threads < 0");
  if (int64_t(K) * 255 * 128 >= (int64_t{1} << 31))
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": K = " + std::to_string(K) +
                                          " could overflow the int32 accumulators (K < 65794)");
  return DML_CPU_OK;
}

// M × N, or K = 0: c = 0 (int32) or epilogue(bias) (fp32); else the AVX-512 / AMX compute.
int s8_run(const char* kernel, int a_dtype, int64_t M, int64_t N, int64_t K, const void* a, const uint32_t* panels,
           const int32_t* comp, const float* scale, const float* bias, void* c, int epilogue, int threads) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  const bool relu = epilogue == DML_CPU_EPI_RELU;
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        if (!scale) {
          static_cast<int32_t*>(c)[m * N + n] = 0;
        } else {
          const float v = bias ? bias[n] : 0.0f;
          static_cast<float*>(c)[m * N + n] = relu && v < 0 ? 0.0f : v;
        }
      }
    return DML_CPU_OK;
  }
  if (s8_run_avx512(a_dtype, M, N, K, a, panels, comp, scale, bias, c, relu, threads) != kRunOk)
    return no_memory(kernel, "the packed A operand");
  return DML_CPU_OK;
}

// ---- bf16 -------------------------------------------------------------------------------------

inline uint32_t bf16_at(const void* x, int dtype, int64_t idx) {
  if (dtype == DML_CPU_BF16) return static_cast<const uint16_t*>(x)[idx];
  return dml_float_to_bf16(static_cast<const float*>(x)[idx]);
}

// b (RRR: b[K, N], RCR: b[N, K]; bf16 or fp32 rounded to nearest even) into kPanelCols-column
// panels of K-pairs: word (g, n) = b[2g, n] | b[2g + 1, n] << 16.
void bf16_pack_b(const void* b, int dtype, int layout, int64_t N, int64_t K, int64_t G, uint32_t* out,
                 int threads) {
  const int64_t panels = cdiv(N, kPanelCols);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (int64_t j = 0; j < panels; ++j) {
    uint32_t* o = out + j * G * kPanelCols;
    const bool full_panel = (j + 1) * kPanelCols <= N;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t k0 = 2 * g, k1 = 2 * g + 1;
      uint32_t* og = o + g * kPanelCols;
      if (dtype == DML_CPU_BF16 && layout == DML_CPU_B_RRR && full_panel && k1 < K) {
        // Two contiguous rows of the panel's columns (the compiler vectorizes this loop).
        const uint16_t* r0 = static_cast<const uint16_t*>(b) + k0 * N + j * kPanelCols;
        const uint16_t* r1 = r0 + N;
        for (int64_t jj = 0; jj < kPanelCols; ++jj) og[jj] = uint32_t(r0[jj]) | (uint32_t(r1[jj]) << 16);
        continue;
      }
      for (int64_t jj = 0; jj < kPanelCols; ++jj) {
        const int64_t n = j * kPanelCols + jj;
        uint32_t w = 0;
        if (n < N && k0 < K) {
          const int64_t i0 = layout == DML_CPU_B_RRR ? k0 * N + n : n * K + k0;
          const int64_t i1 = layout == DML_CPU_B_RRR ? k1 * N + n : n * K + k1;
          w = bf16_at(b, dtype, i0) | (k1 < K ? bf16_at(b, dtype, i1) << 16 : 0u);
        }
        og[jj] = w;
      }
    }
  }
}

int bf16_check_args(int a_dtype, int64_t M, int64_t N, int64_t K, int c_dtype, int epilogue, const void* d,
                    int threads, const char* kernel) {
  if (M < 0 || N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": negative extent");
  if (c_dtype != DML_CPU_F32 && c_dtype != DML_CPU_BF16)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": output dtype " + dtype_name(c_dtype) +
                                             " is not supported (float32 or bfloat16)");
  if (epilogue < DML_CPU_EPI_NONE || epilogue > DML_CPU_EPI_ADD_RELU)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": unknown epilogue " + std::to_string(epilogue));
  if ((epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) && !d)
    return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": the add epilogue needs the residual operand d");
  if (a_dtype != DML_CPU_BF16 && a_dtype != DML_CPU_F32)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kernel) + ": a dtype " + dtype_name(a_dtype) +
                                             " is not supported (bfloat16, or float32 rounded to bfloat16)");
  if (threads < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kernel) + ": threads < 0");
  return DML_CPU_OK;
}

// bias widened to fp32 when bf16; K = 0: c = epilogue(bias + d); else the AVX-512 / AMX compute.
int bf16_run(const char* kernel, int64_t M, int64_t N, int64_t K, const void* a, int a_dtype,
             const uint32_t* panels, const void* bias, const void* d, void* c, int c_dtype, int epilogue,
             int threads) {
  if (M == 0 || N == 0) return DML_CPU_OK;
  const float* bias32 = static_cast<const float*>(bias);
  if (bias && c_dtype == DML_CPU_BF16) {
    float* bf = static_cast<float*>(scratch(kSlotAux, size_t(N) * 4));
    if (!bf) return no_memory(kernel, "the bias buffer");
    for (int64_t j = 0; j < N; ++j) bf[j] = dml_bf16_to_float(static_cast<const uint16_t*>(bias)[j]);
    bias32 = bf;
  }
  gemm::Epilogue e;
  e.kind = epilogue;
  e.d = (epilogue == DML_CPU_EPI_ADD || epilogue == DML_CPU_EPI_ADD_RELU) ? d : nullptr;
  e.dtype = c_dtype;
  e.ldd = N;
  e.bias = bias32;
  if (K == 0) {
    const gemm::IsaKernels& isa = *gemm::active_isa();
    std::vector<float> z(size_t(N), 0.0f);
    for (int64_t m = 0; m < M; ++m) isa.finish(z.data(), 0, 1, N, m, 0, e, c, N);
    return DML_CPU_OK;
  }
  if (bf16_run_avx512(M, N, K, a, a_dtype, panels, e, c, threads) != kRunOk)
    return no_memory(kernel, "the packed A operand");
  return DML_CPU_OK;
}

}  // namespace
}  // namespace dml_cpu::lowp

using namespace dml_cpu;
using namespace dml_cpu::lowp;

// ---- int8 C ABI -------------------------------------------------------------------------------

extern "C" int dml_cpu_gemm_s8_supported(void) { return s8_cpu_ok() ? 1 : 0; }
extern "C" int dml_cpu_gemm_s8_amx(void) {
  return s8_cpu_ok() && g_knobs.s8_amx_min_m > 0 && amx::usable(amx::Kind::s8) ? 1 : 0;
}

extern "C" int64_t dml_cpu_gemm_s8_packed_b_size(int64_t N, int64_t K) {
  if (N < 0 || K < 0) return -1;
  return kHeaderBytes + panels_bytes(N, s8_groups(K)) + s8_comp_bytes(N);
}

// Packing is plain integer moves (no VNNI needed), so weights can be packed on any CPU.
extern "C" int dml_cpu_gemm_s8_pack_b(int b_layout, int64_t N, int64_t K, const int8_t* b, void* packed_b) {
  const char* kn = "dml_cpu_gemm_s8_pack_b";
  if (N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": negative extent");
  if (int st = check_layout(b_layout, kn)) return st;
  if (!packed_b || (!b && N * K > 0)) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": NULL buffer");
  const int64_t G = s8_groups(K);
  write_header(packed_b, kS8Magic, N, K, G);
  char* base = static_cast<char*>(packed_b) + kHeaderBytes;
  s8_pack_b(b, b_layout, N, K, G, reinterpret_cast<uint32_t*>(base),
            reinterpret_cast<int32_t*>(base + panels_bytes(N, G)), choose_threads(0, N, K, 16));
  return DML_CPU_OK;
}

extern "C" int dml_cpu_gemm_s8_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                         const void* packed_b, const float* scale, const float* bias, void* c,
                                         int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_s8_prepacked";
  if (int st = s8_check_args(a_dtype, M, N, K, scale, bias, epilogue, threads, kn)) return st;
  if (!packed_b) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b is NULL");
  if (!s8_cpu_ok()) return s8_unsupported(kn);
  int st = DML_CPU_OK;
  const char* base = checked_panels(packed_b, kS8Magic, "dml_cpu_gemm_s8_pack_b", N, K, kn, &st);
  if (!base) return st;
  return s8_run(kn, a_dtype, M, N, K, a, reinterpret_cast<const uint32_t*>(base),
                reinterpret_cast<const int32_t*>(base + panels_bytes(N, s8_groups(K))), scale, bias, c, epilogue,
                choose_threads(threads, M, N, K));
}

extern "C" int dml_cpu_gemm_s8(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                               const int8_t* b, const float* scale, const float* bias, void* c, int epilogue,
                               int threads) {
  const char* kn = "dml_cpu_gemm_s8";
  if (int st = s8_check_args(a_dtype, M, N, K, scale, bias, epilogue, threads, kn)) return st;
  if (int st = check_layout(b_layout, kn)) return st;
  if (!s8_cpu_ok()) return s8_unsupported(kn);
  const int nt = choose_threads(threads, M, N, K);
  const int64_t G = s8_groups(K);
  char* buf = static_cast<char*>(scratch(kSlotB, size_t(panels_bytes(N, G) + s8_comp_bytes(N) + 64)));
  if (!buf) return no_memory(kn, "the packed B operand");
  uint32_t* panels = reinterpret_cast<uint32_t*>(buf);
  int32_t* comp = reinterpret_cast<int32_t*>(buf + panels_bytes(N, G));
  s8_pack_b(b, b_layout, N, K, G, panels, comp, nt);
  return s8_run(kn, a_dtype, M, N, K, a, panels, comp, scale, bias, c, epilogue, nt);
}

// ---- bf16 C ABI -------------------------------------------------------------------------------

extern "C" int dml_cpu_gemm_bf16_supported(void) { return bf16_cpu_ok() ? 1 : 0; }
extern "C" int dml_cpu_gemm_bf16_amx(void) {
  return bf16_cpu_ok() && g_knobs.bf16_amx_min_m > 0 && amx::usable(amx::Kind::bf16) ? 1 : 0;
}

extern "C" int64_t dml_cpu_gemm_bf16_packed_b_size(int64_t N, int64_t K) {
  if (N < 0 || K < 0) return -1;
  return kHeaderBytes + panels_bytes(N, bf16_groups(K));
}

// Packing is plain integer moves (no AVX512_BF16 needed), so weights can be packed on any CPU.
extern "C" int dml_cpu_gemm_bf16_pack_b(int b_dtype, int b_layout, int64_t N, int64_t K, const void* b,
                                        void* packed_b) {
  const char* kn = "dml_cpu_gemm_bf16_pack_b";
  if (N < 0 || K < 0) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": negative extent");
  if (int st = check_layout(b_layout, kn)) return st;
  if (b_dtype != DML_CPU_BF16 && b_dtype != DML_CPU_F32)
    return fail(DML_CPU_ERR_UNSUPPORTED, std::string(kn) + ": b dtype " + dtype_name(b_dtype) +
                                             " is not supported (bfloat16, or float32 rounded to bfloat16)");
  if (!packed_b || (!b && N * K > 0)) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": NULL buffer");
  const int64_t G = bf16_groups(K);
  write_header(packed_b, kBf16Magic, N, K, G);
  bf16_pack_b(b, b_dtype, b_layout, N, K, G, reinterpret_cast<uint32_t*>(static_cast<char*>(packed_b) + kHeaderBytes),
              choose_threads(0, N, K, 16));
  return DML_CPU_OK;
}

extern "C" int dml_cpu_gemm_bf16_native(int a_dtype, int b_layout, int64_t M, int64_t N, int64_t K, const void* a,
                                        const void* b, const void* bias, const void* d, void* c, int c_dtype,
                                        int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_bf16_native";
  if (int st = bf16_check_args(a_dtype, M, N, K, c_dtype, epilogue, d, threads, kn)) return st;
  if (int st = check_layout(b_layout, kn)) return st;
  if (!bf16_cpu_ok()) return bf16_unsupported(kn);
  const int nt = choose_threads(threads, M, N, K);
  const int64_t G = bf16_groups(K);
  uint32_t* panels = static_cast<uint32_t*>(scratch(kSlotB, size_t(std::max<int64_t>(panels_bytes(N, G), 4))));
  if (!panels) return no_memory(kn, "the packed B operand");
  bf16_pack_b(b, DML_CPU_BF16, b_layout, N, K, G, panels, nt);
  return bf16_run(kn, M, N, K, a, a_dtype, panels, bias, d, c, c_dtype, epilogue, nt);
}

extern "C" int dml_cpu_gemm_bf16_prepacked(int a_dtype, int64_t M, int64_t N, int64_t K, const void* a,
                                           const void* packed_b, const void* bias, const void* d, void* c,
                                           int c_dtype, int epilogue, int threads) {
  const char* kn = "dml_cpu_gemm_bf16_prepacked";
  if (int st = bf16_check_args(a_dtype, M, N, K, c_dtype, epilogue, d, threads, kn)) return st;
  if (!packed_b) return fail(DML_CPU_ERR_ARGUMENT, std::string(kn) + ": packed_b is NULL");
  if (!bf16_cpu_ok()) return bf16_unsupported(kn);
  int st = DML_CPU_OK;
  const char* base = checked_panels(packed_b, kBf16Magic, "dml_cpu_gemm_bf16_pack_b", N, K, kn, &st);
  if (!base) return st;
  return bf16_run(kn, M, N, K, a, a_dtype, reinterpret_cast<const uint32_t*>(base), bias, d, c, c_dtype, epilogue,
                  choose_threads(threads, M, N, K));
}
