// The GEMM kernels against a naive double-precision reference: every epilogue, odd sizes and
// tails on each path (dot / skinny / blocked), unaligned pointers, K = 0 and 1, packed weights,
// fp16/bf16, thread-count independence, and each ISA path this CPU can run (avx512, avx2, generic).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dinoml/half.h>
#include <dinoml/kernel_knobs.h>

#include "dinoml_cpu_kernels.h"

namespace {

constexpr int kEpilogues[] = {DML_CPU_EPI_NONE,  DML_CPU_EPI_RELU,    DML_CPU_EPI_GELU,
                              DML_CPU_EPI_FAST_GELU, DML_CPU_EPI_SWISH, DML_CPU_EPI_SIGMOID,
                              DML_CPU_EPI_TANH,  DML_CPU_EPI_ADD,     DML_CPU_EPI_ADD_RELU};

double act(int epi, double v) {
  switch (epi) {
    case DML_CPU_EPI_RELU: case DML_CPU_EPI_ADD_RELU: return v < 0 ? 0 : v;
    case DML_CPU_EPI_GELU: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case DML_CPU_EPI_FAST_GELU:  // 0.5v(1 + tanh u) written as v·sigmoid(2u): the same function without
                                 // the cancellation that makes 1 + tanh u exactly 0 for v < -9 in double
      return v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    case DML_CPU_EPI_SWISH: return v / (1 + std::exp(-v));
    case DML_CPU_EPI_SIGMOID: return 1 / (1 + std::exp(-v));
    case DML_CPU_EPI_TANH: return std::tanh(v);
    default: return v;
  }
}
bool has_add(int epi) { return epi == DML_CPU_EPI_ADD || epi == DML_CPU_EPI_ADD_RELU; }

// Operands held as doubles (the values the kernel sees after rounding to the dtype) plus the
// bytes handed to the kernel.
struct Operand {
  std::vector<double> v;
  std::vector<unsigned char> bytes;  // + 64 spare bytes so an unaligned view stays in bounds
  void* ptr(size_t offset_bytes) { return bytes.data() + offset_bytes; }
};

size_t esize(int dtype) { return dtype == DML_CPU_F32 ? 4 : 2; }

Operand make(int dtype, size_t n, uint32_t seed, size_t offset, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Operand o;
  o.v.resize(n);
  o.bytes.assign(n * esize(dtype) + 64, 0);
  for (size_t i = 0; i < n; ++i) {
    const float f = u(g);
    unsigned char* p = o.bytes.data() + offset + i * esize(dtype);
    if (dtype == DML_CPU_F32) {
      std::memcpy(p, &f, 4);
      o.v[i] = f;
    } else if (dtype == DML_CPU_F16) {
      const uint16_t h = dml_float_to_half(f);
      std::memcpy(p, &h, 2);
      o.v[i] = dml_half_to_float(h);
    } else {
      const uint16_t h = dml_float_to_bf16(f);
      std::memcpy(p, &h, 2);
      o.v[i] = dml_bf16_to_float(h);
    }
  }
  return o;
}

double read(int dtype, const void* base, size_t i) {
  const unsigned char* p = static_cast<const unsigned char*>(base) + i * esize(dtype);
  if (dtype == DML_CPU_F32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DML_CPU_F16 ? dml_half_to_float(h) : dml_bf16_to_float(h);
}

struct Case {
  int dtype = DML_CPU_F32, layout = DML_CPU_B_RRR, epi = DML_CPU_EPI_NONE;
  int64_t M = 1, N = 1, K = 1;
  bool bias = true, packed = false;
  size_t offset = 0;  // bytes added to every pointer (4: float-aligned only, 2: odd for fp32 never used)
};

std::string describe(const Case& c) {
  return "dtype=" + std::to_string(c.dtype) + " layout=" + std::to_string(c.layout) + " epi=" +
         std::to_string(c.epi) + " M=" + std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
         std::to_string(c.K) + " bias=" + std::to_string(c.bias) + " packed=" + std::to_string(c.packed) +
         " offset=" + std::to_string(c.offset);
}

// Runs one case; returns the output (as doubles) after checking it against the reference.
std::vector<double> run_and_check(const Case& c) {
  SCOPED_TRACE(describe(c));
  const uint32_t seed = static_cast<uint32_t>(c.M * 131 + c.N * 17 + c.K * 7 + c.epi);
  Operand a = make(c.dtype, c.M * c.K, seed, c.offset);
  Operand b = make(c.dtype, c.K * c.N, seed + 1, c.offset);
  Operand bias = make(c.dtype, c.N, seed + 2, c.offset);
  Operand d = make(c.dtype, c.M * c.N, seed + 3, c.offset);
  std::vector<unsigned char> out(c.M * c.N * esize(c.dtype) + 64, 0xcd);
  void* cptr = out.data() + c.offset;
  int st;
  if (c.packed) {
    std::vector<unsigned char> pk(dml_cpu_gemm_packed_b_size(c.N, c.K) + 64);
    void* pkp = pk.data() + 4;  // the packed form holds floats: 4-byte alignment is the contract
    EXPECT_EQ(dml_cpu_gemm_pack_b(c.dtype, c.layout, c.N, c.K, b.ptr(c.offset), pkp), 0) << dml_cpu_last_error();
    st = dml_cpu_gemm_prepacked(c.dtype, c.M, c.N, c.K, a.ptr(c.offset), pkp, c.bias ? bias.ptr(c.offset) : nullptr,
                                has_add(c.epi) ? d.ptr(c.offset) : nullptr, cptr, c.epi);
  } else {
    st = dml_cpu_gemm(c.dtype, c.layout, c.M, c.N, c.K, a.ptr(c.offset), b.ptr(c.offset),
                      c.bias ? bias.ptr(c.offset) : nullptr, has_add(c.epi) ? d.ptr(c.offset) : nullptr, cptr, c.epi);
  }
  EXPECT_EQ(st, 0) << dml_cpu_last_error();
  // Output dtype rounding dominates for fp16/bf16; for fp32 the bound is the epilogue's 1e-5
  // relative accuracy plus fp32 accumulation error: ulps of Σ|a·b| growing like √K (the error of a
  // sum of K rounded terms in any order, with margin), at least 2e-6.
  const double rel = c.dtype == DML_CPU_F32 ? 1e-5 : c.dtype == DML_CPU_F16 ? 1.5e-3 : 1.2e-2;
  const double acc_rel = std::max(2e-6, 1.2e-7 * (4 + std::sqrt(static_cast<double>(c.K))));
  std::vector<double> got(c.M * c.N);
  int bad = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double bv = c.layout == DML_CPU_B_RRR ? b.v[k * c.N + n] : b.v[n * c.K + k];
        s += a.v[m * c.K + k] * bv;
        mag += std::fabs(a.v[m * c.K + k] * bv);
      }
      if (c.bias) s += bias.v[n], mag += std::fabs(bias.v[n]);
      if (has_add(c.epi)) s += d.v[m * c.N + n], mag += std::fabs(d.v[m * c.N + n]);
      const double ref = act(c.epi, s);
      const double g = read(c.dtype, cptr, m * c.N + n);
      got[m * c.N + n] = g;
      const double tol = rel * std::fabs(ref) + (c.dtype == DML_CPU_F32 ? acc_rel : rel) * mag + 1e-30;
      if (!(std::fabs(g - ref) <= tol) && bad++ < 5)
        ADD_FAILURE() << "c[" << m << "," << n << "] = " << g << ", reference " << ref << " (tol " << tol << ")";
    }
  // Nothing written past the end of c.
  for (size_t i = c.offset + c.M * c.N * esize(c.dtype); i < out.size(); ++i)
    if (out[i] != 0xcd) {
      ADD_FAILURE() << "write past the end of c at byte " << i;
      break;
    }
  return got;
}

// Shapes that reach every path and tail: M ≤ 16 (dot for fp32 RCR, skinny otherwise), M > 16
// blocked with M % 6 ≠ 0, N % 16 ≠ 0, K across the KC block boundary.
const int64_t kShapes[][3] = {{1, 1, 1},    {1, 17, 33},  {3, 7, 3},    {7, 33, 17},  {16, 48, 64},
                              {17, 3, 7},   {33, 100, 1}, {33, 33, 300}, {70, 129, 260}, {1, 70, 1030}};

// Every GEMM ISA table this CPU can run (the others are reported and skipped).
std::vector<std::string> runnable_isas() {
  std::vector<std::string> out;
  const std::string initial = dml_cpu_gemm_isa();
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    if (dml_cpu_gemm_select_isa(isa) == 0)
      out.push_back(isa);
    else
      std::printf("[ ISA path %s cannot run on this CPU: skipped ]\n", isa);
  }
  dml_cpu_gemm_select_isa(initial.c_str());
  return out;
}

// Runs `body` once per runnable ISA table with that table selected, then restores the initial one.
template <typename F>
void for_each_isa(F&& body) {
  const std::string initial = dml_cpu_gemm_isa();
  for (const std::string& isa : runnable_isas()) {
    ASSERT_EQ(dml_cpu_gemm_select_isa(isa.c_str()), 0) << dml_cpu_last_error();
    SCOPED_TRACE("isa " + isa);
    ASSERT_EQ(std::string(dml_cpu_gemm_isa()), isa);
    body(isa);
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

// Runs `c` with 1, 2 and 3 threads (3: more threads than cores, uneven block counts), expects the
// three results bitwise equal, restores the thread count and returns the 1-thread result.
std::vector<double> same_across_threads(const Case& c) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run_and_check(c);
  omp_set_num_threads(2);
  const auto two = run_and_check(c);
  omp_set_num_threads(3);
  const auto three = run_and_check(c);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two) << describe(c);
  EXPECT_EQ(one, three) << describe(c);
  return one;
}

TEST(GemmKernels, EveryEpilogueEveryPathFloat32) {
 for_each_isa([&](const std::string&) {
  for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
    for (int epi : kEpilogues)
      for (const auto& s : kShapes) {
        Case c;
        c.layout = layout;
        c.epi = epi;
        c.M = s[0], c.N = s[1], c.K = s[2];
        c.bias = (s[0] + s[1]) % 2 == 0 || epi == DML_CPU_EPI_NONE;
        run_and_check(c);
      }
 });
}

TEST(GemmKernels, HalfAndBfloat16) {
 for_each_isa([&](const std::string&) {
  for (int dtype : {DML_CPU_F16, DML_CPU_BF16})
    for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
      for (int epi : {DML_CPU_EPI_NONE, DML_CPU_EPI_GELU, DML_CPU_EPI_ADD_RELU})
        for (const auto& s : {std::array<int64_t, 3>{1, 17, 33}, {7, 33, 17}, {33, 33, 300}, {70, 129, 20}})
          for (bool packed : {false, true}) {
            Case c;
            c.dtype = dtype, c.layout = layout, c.epi = epi, c.packed = packed;
            c.M = s[0], c.N = s[1], c.K = s[2];
            run_and_check(c);
          }
 });
}

// M = 1 against prepacked weights: the multi-stream GEMV (run_gemv_packed), on each ISA path this
// CPU runs, with panel counts that leave uneven per-thread runs and short last streams (N = 1, 17,
// 200 = 13 panels, 1000 = 63 panels, 333 = 21), K from 1 to past the KC block (the larger ones run
// on every thread), every epilogue and dtype.
TEST(GemmKernels, PrepackedGemvStreams) {
  const std::string initial = dml_cpu_gemm_isa();
  for (const std::string& isa : runnable_isas()) {
    ASSERT_EQ(dml_cpu_gemm_select_isa(isa.c_str()), 0);
    SCOPED_TRACE(isa);
    for (int dtype : {DML_CPU_F32, DML_CPU_F16, DML_CPU_BF16})
      for (int epi : kEpilogues)
        for (const auto& nk : {std::array<int64_t, 2>{1, 1}, {17, 33}, {200, 1030}, {1000, 70}, {1000, 300}, {333, 1030}}) {
          if (dtype != DML_CPU_F32 && epi % 3 != 0) continue;  // half types: a third of the epilogues
          Case c;
          c.dtype = dtype, c.epi = epi, c.packed = true, c.layout = (nk[0] + epi) % 2;
          c.M = 1, c.N = nk[0], c.K = nk[1];
          run_and_check(c);
        }
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

TEST(GemmKernels, UnalignedPointers) {
 for_each_isa([&](const std::string&) {
  for (int dtype : {DML_CPU_F32, DML_CPU_F16})
    for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
      for (const auto& s : {std::array<int64_t, 3>{3, 17, 33}, {40, 37, 21}}) {
        Case c;
        c.dtype = dtype, c.layout = layout, c.epi = DML_CPU_EPI_ADD;
        c.M = s[0], c.N = s[1], c.K = s[2];
        c.offset = dtype == DML_CPU_F32 ? 4 : 2;  // element-aligned, never 16/32-byte aligned
        run_and_check(c);
        c.packed = true;
        run_and_check(c);
      }
 });
}

TEST(GemmKernels, ZeroAndUnitDepth) {
 for_each_isa([&](const std::string&) {
  for (int epi : {DML_CPU_EPI_NONE, DML_CPU_EPI_SIGMOID, DML_CPU_EPI_ADD_RELU})
    for (int64_t M : {1, 5, 20}) {
      Case c;
      c.epi = epi, c.M = M, c.N = 19, c.K = 0;
      run_and_check(c);  // c = epilogue(bias + d)
      c.K = 1;
      run_and_check(c);
      c.packed = true;
      run_and_check(c);
    }
  // Empty outputs are a no-op.
  EXPECT_EQ(dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, 0, 5, 5, nullptr, nullptr, nullptr, nullptr, nullptr, 0), 0);
 });
}

// For b[K, N] the packed weights feed the same tiles with the same values in the same order as
// per-call packing, so the results are bitwise identical. (fp32 b[N, K] with small M is read in
// place by dot products, a different summation order: compared within tolerance everywhere else.)
TEST(GemmKernels, PrepackedMatchesUnpackedBitwise) {
 for_each_isa([&](const std::string&) {
  for (int layout : {DML_CPU_B_RRR})
    for (const auto& s : {std::array<int64_t, 3>{5, 40, 300}, {17, 33, 65}, {100, 64, 513}}) {
      Case c;
      c.layout = layout, c.epi = DML_CPU_EPI_FAST_GELU, c.M = s[0], c.N = s[1], c.K = s[2];
      const auto plain = run_and_check(c);
      c.packed = true;
      const auto packed = run_and_check(c);
      EXPECT_EQ(plain, packed) << describe(c);
    }
 });
}

// The thread split changes which thread computes a block, never the order of the K sums.
TEST(GemmKernels, ThreadCountDoesNotChangeResults) {
 for_each_isa([&](const std::string&) {
  for (const auto& s : {std::array<int64_t, 3>{8, 300, 200}, {200, 150, 300}, {130, 520, 64}}) {
    Case c;
    c.epi = DML_CPU_EPI_SWISH, c.M = s[0], c.N = s[1], c.K = s[2];
    same_across_threads(c);
  }
 });
}

// Prepacked GEMMs past 256 rows with enough column groups take the slice path while A and the C
// block of a group stay small (kernels/cpu/gemm.cpp, packed_slice): checked against the reference,
// bitwise across thread counts and against the per-call GEMM, with a residual. Per call, M ≤ 1024
// takes the slice path as well (B slices packed on the fly); M = 1100 per call is the blocked path.
TEST(GemmKernels, PrepackedSliceBeyond256Rows) {
 for_each_isa([&](const std::string&) {
  const int saved = omp_get_max_threads();
  for (const auto& s : {std::array<int64_t, 3>{300, 1000, 40}, {520, 1030, 67}, {1100, 520, 45}}) {
    Case c;
    c.epi = DML_CPU_EPI_ADD_RELU, c.M = s[0], c.N = s[1], c.K = s[2], c.bias = true;
    omp_set_num_threads(2);
    const auto per_call = run_and_check(c);
    omp_set_num_threads(saved);
    c.packed = true;
    EXPECT_EQ(same_across_threads(c), per_call) << describe(c);
  }
 });
}

// The slice path (M ≤ 512) with K over several chunks of the longest K block a rule takes (1024 where
// 512-bit FMAs run at half rate, kernels/cpu/gemm.cpp blocking_for_m; L1-sized elsewhere) and a last
// partial one; N = 150 ends in a group of a whole and a 6-column panel. Checked against the reference, bitwise across thread counts, and per call
// against prepacked where both take the slice path.
TEST(GemmKernels, SliceLongKChunks) {
 for_each_isa([&](const std::string&) {
  for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
    for (const auto& s : {std::array<int64_t, 3>{100, 150, 2300}, {40, 150, 1030}}) {
      Case c;
      c.epi = DML_CPU_EPI_GELU, c.M = s[0], c.N = s[1], c.K = s[2], c.bias = true, c.layout = layout;
      const auto per_call = same_across_threads(c);
      c.packed = true;
      // (b[N, K] per call at M ≤ 96 takes the transposed skinny path: another order of the sums.)
      if (layout == DML_CPU_B_RRR || c.M > 96) EXPECT_EQ(same_across_threads(c), per_call) << describe(c);
      else same_across_threads(c);
    }
 });
}

// Each ISA path this CPU can run passes the same checks.
// Transformer-sized M with packed weights and a residual: several M blocks per thread handed out
// dynamically (kernels/cpu/gemm.cpp), the residual prefetched before the last K chunk and the next
// B panel prefetched per tile; checked against the reference and bitwise across thread counts.
TEST(GemmKernels, PrepackedManyBlocksWithResidual) {
 for_each_isa([&](const std::string&) {
  for (const auto& s : {std::array<int64_t, 3>{777, 70, 530}, {1024, 48, 300}}) {
    Case c;
    c.epi = DML_CPU_EPI_ADD, c.M = s[0], c.N = s[1], c.K = s[2], c.packed = true;
    same_across_threads(c);
  }
 });
}

// The blocked path (M past the slice path's 1024 rows) with K over several kc passes: the tiles
// accumulate in the private tile-order block of C and the last pass's finish writes C with the
// epilogue (kernels/cpu/gemm.cpp, run_blocked). N = 70 leaves a one-panel group with 6 live columns;
// every epilogue, fp32 / fp16 / bf16, per call and prepacked, bitwise across thread counts.
TEST(GemmKernels, BlockedSeveralKPassesWithTail) {
 for_each_isa([&](const std::string&) {
  for (int dtype : {DML_CPU_F32, DML_CPU_F16, DML_CPU_BF16})
    for (int epi : kEpilogues) {
      if (dtype != DML_CPU_F32 && epi % 3 != 0) continue;
      Case c;
      c.dtype = dtype, c.epi = epi, c.M = 1100, c.N = 70, c.K = 530, c.bias = epi % 2 == 0;
      c.layout = epi % 2;
      const auto per_call = same_across_threads(c);
      c.packed = true;
      if (c.layout == DML_CPU_B_RRR) EXPECT_EQ(same_across_threads(c), per_call) << describe(c);
      else same_across_threads(c);
    }
 });
}

// A per-call packed B over kStreamPackBytes (1 MiB: 38 panels × 600 rows × 64 bytes = 1.4 MiB), fp32
// b[N, K] and b[K, N]: the panels are written with non-temporal stores (N = 600: the last panel of 8
// columns the ordinary way); same values as the prepacked B, at any thread count.
TEST(GemmKernels, BlockedStreamedPackOfLargeB) {
  for (int layout : {DML_CPU_B_RCR, DML_CPU_B_RRR}) {
    Case c;
    c.dtype = DML_CPU_F32, c.epi = DML_CPU_EPI_RELU, c.M = 1100, c.N = 600, c.K = 600, c.bias = true;
    c.layout = layout;
    const auto per_call = same_across_threads(c);
    c.packed = true;
    EXPECT_EQ(same_across_threads(c), per_call) << describe(c);
  }
}

TEST(GemmKernels, EveryIsaPath) {
  const std::string initial = dml_cpu_gemm_isa();
  for (const char* isa : {"avx512", "avx2", "generic"}) {
    if (dml_cpu_gemm_select_isa(isa) != 0) {
      std::printf("ISA path %s cannot run on this CPU: skipped (%s)\n", isa, dml_cpu_last_error());
      continue;
    }
    SCOPED_TRACE(isa);
    EXPECT_STREQ(dml_cpu_gemm_isa(), isa);
    for (int epi : kEpilogues)
      for (const auto& s : {std::array<int64_t, 3>{3, 21, 40}, {29, 35, 300}}) {
        Case c;
        c.epi = epi, c.M = s[0], c.N = s[1], c.K = s[2], c.layout = epi % 2;
        run_and_check(c);
      }
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
  EXPECT_NE(dml_cpu_gemm_select_isa("avx1024"), 0);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("avx1024"), std::string::npos);
}

// Every activation over a dense grid including the far tails, with a single exact product
// (a = 1, b = x) so the only error is the vectorised math: relative error ≤ 1e-5. Results below
// 1e-35 (about 100·FLT_MIN, where float has lost its precision anyway) may flush to zero.
TEST(GemmKernels, EpilogueMathAccuracy) {
 for_each_isa([](const std::string& isa) {
  // The generic table is the plain formulas of kernel_common.h (0.5x(1 + tanh u) cancels to 0 for
  // x < -9): the relative-accuracy contract is the vectorised tables'.
  if (isa == "generic") return;
  std::vector<float> xs;
  for (float x = -30.0f; x <= 30.0f; x += 0.0137f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-7f, -1e-7f, 1e-3f, -1e-3f, 0.625f, -0.625f, 0.6249f, 88.0f, -88.0f})
    xs.push_back(x);
  const int64_t N = static_cast<int64_t>(xs.size());
  for (int epi : {DML_CPU_EPI_GELU, DML_CPU_EPI_FAST_GELU, DML_CPU_EPI_SWISH, DML_CPU_EPI_SIGMOID,
                  DML_CPU_EPI_TANH}) {
    const float one = 1.0f;
    std::vector<float> out(N);
    ASSERT_EQ(dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, 1, N, 1, &one, xs.data(), nullptr, nullptr, out.data(), epi), 0);
    int bad = 0;
    for (int64_t i = 0; i < N; ++i) {
      const double ref = act(epi, xs[i]);
      if (!(std::fabs(out[i] - ref) <= 1e-5 * std::fabs(ref) + 1e-35) && bad++ < 5)
        ADD_FAILURE() << "epilogue " << epi << " at x=" << xs[i] << ": " << out[i] << " vs " << ref;
    }
  }
 });
}

TEST(GemmKernels, ClearErrors) {
  float x = 0;
  EXPECT_EQ(dml_cpu_gemm(DML_CPU_F32, 7, 1, 1, 1, &x, &x, nullptr, nullptr, &x, 0), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("b layout"), std::string::npos);
  EXPECT_EQ(dml_cpu_gemm(DML_CPU_F32, 0, 1, 1, 1, &x, &x, nullptr, nullptr, &x, DML_CPU_EPI_ADD), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("residual"), std::string::npos);
  EXPECT_EQ(dml_cpu_gemm(DML_CPU_I32, 0, 1, 1, 1, &x, &x, nullptr, nullptr, &x, 0), DML_CPU_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("int32"), std::string::npos);
  // A packed buffer of another shape is refused, naming both shapes.
  std::vector<float> b(12), pk(dml_cpu_gemm_packed_b_size(4, 3) / 4 + 1);
  ASSERT_EQ(dml_cpu_gemm_pack_b(DML_CPU_F32, DML_CPU_B_RRR, 4, 3, b.data(), pk.data()), 0);
  std::vector<float> a(30), c(40);
  EXPECT_EQ(dml_cpu_gemm_prepacked(DML_CPU_F32, 2, 4, 5, a.data(), pk.data(), nullptr, nullptr, c.data(), 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("K=5"), std::string::npos);
  std::vector<float> junk(64, 1.0f);
  EXPECT_EQ(dml_cpu_gemm_prepacked(DML_CPU_F32, 2, 4, 3, a.data(), junk.data(), nullptr, nullptr, c.data(), 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("dml_cpu_gemm_pack_b"), std::string::npos);
}

TEST(GemmKernels, BatchedWithBroadcast) {
 for_each_isa([](const std::string&) {
  const int64_t B = 3, M = 19, N = 21, K = 35;
  Operand a = make(DML_CPU_F32, B * M * K, 1, 0), b = make(DML_CPU_F32, K * N, 2, 0);
  std::vector<float> c(B * M * N);
  const int64_t ys[] = {B}, as[] = {B}, bs[] = {1};
  ASSERT_EQ(dml_cpu_bmm(DML_CPU_F32, DML_CPU_B_RRR, 1, ys, as, bs, M, N, K, a.ptr(0), b.ptr(0), c.data()), 0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a.v[(i * M + m) * K + k] * b.v[k * N + n];
        ASSERT_NEAR(c[(i * M + m) * N + n], s, 1e-5);
      }
 });
}

// dml_cpu_bmm and the profiler's dml_cpu_bmm_tiled share the batch-axis walk: two batch axes where
// a broadcasts the outer one and b the inner one give the same products from both, and a batch
// that does not broadcast (or a bad rank) is refused by both with the kernel's name and the axis.
TEST(GemmKernels, BatchAxesSharedByBmmAndTiled) {
  const int64_t M = 5, N = 7, K = 9;
  const int64_t ys[] = {2, 3}, as[] = {1, 3}, bs[] = {2, 1};
  Operand a = make(DML_CPU_F32, 3 * M * K, 1, 0), b = make(DML_CPU_F32, 2 * K * N, 2, 0);
  std::vector<float> c(6 * M * N), ct(6 * M * N);
  ASSERT_EQ(dml_cpu_bmm(DML_CPU_F32, DML_CPU_B_RRR, 2, ys, as, bs, M, N, K, a.ptr(0), b.ptr(0), c.data()), 0);
  for (int over : {0, 1}) {
    ASSERT_EQ(dml_cpu_bmm_tiled(DML_CPU_F32, DML_CPU_B_RRR, 2, ys, as, bs, M, N, K, a.ptr(0), b.ptr(0), ct.data(), 6,
                                16, 16, over),
              0);
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += a.v[(j * M + m) * K + k] * b.v[(i * K + k) * N + n];
            const int64_t o = ((i * 3 + j) * M + m) * N + n;
            ASSERT_NEAR(c[o], s, 1e-5);
            ASSERT_NEAR(ct[o], s, 1e-5);
          }
  }
  const int64_t bad_a[] = {1, 2};
  EXPECT_EQ(dml_cpu_bmm(DML_CPU_F32, DML_CPU_B_RRR, 2, ys, bad_a, bs, M, N, K, a.ptr(0), b.ptr(0), c.data()),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("dml_cpu_bmm: batch axis 1 of the operands (2, 1)"),
            std::string::npos)
      << dml_cpu_last_error();
  EXPECT_EQ(dml_cpu_bmm_tiled(DML_CPU_F32, DML_CPU_B_RRR, 2, ys, bad_a, bs, M, N, K, a.ptr(0), b.ptr(0), ct.data(), 6,
                              16, 16, 0),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("dml_cpu_bmm_tiled: batch axis 1"), std::string::npos)
      << dml_cpu_last_error();
  EXPECT_EQ(dml_cpu_bmm(DML_CPU_F32, DML_CPU_B_RRR, 9, ys, as, bs, M, N, K, a.ptr(0), b.ptr(0), c.data()),
            DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("batch rank 9"), std::string::npos);
  EXPECT_EQ(dml_cpu_bmm_tiled(DML_CPU_F32, DML_CPU_B_RRR, 1, nullptr, as, bs, M, N, K, a.ptr(0), b.ptr(0), ct.data(), 6,
                              16, 16, 0),
            DML_CPU_ERR_ARGUMENT);
}

}  // namespace

namespace {

// The profiler's forced variants: every path and thread count gives the reference's answer.
TEST(GemmKernels, ForcedPathsAndThreads) {
 for_each_isa([](const std::string&) {
  for (int path = 0; path <= 3; ++path)
    for (int threads : {0, 1, 2})
      for (int layout : {DML_CPU_B_RRR, DML_CPU_B_RCR})
        for (const auto& s : {std::array<int64_t, 3>{1, 35, 70}, {23, 40, 520}, {90, 17, 9}}) {
          const int64_t M = s[0], N = s[1], K = s[2];
          Operand a = make(DML_CPU_F32, M * K, 11, 0), b = make(DML_CPU_F32, K * N, 12, 0);
          Operand bias = make(DML_CPU_F32, N, 13, 0);
          std::vector<float> c(M * N);
          ASSERT_EQ(dml_cpu_gemm_variant(DML_CPU_F32, layout, M, N, K, a.ptr(0), b.ptr(0), bias.ptr(0), nullptr,
                                         c.data(), DML_CPU_EPI_RELU, path, threads),
                    0)
              << dml_cpu_last_error();
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double r = bias.v[n];
              for (int64_t k = 0; k < K; ++k)
                r += a.v[m * K + k] * (layout == DML_CPU_B_RRR ? b.v[k * N + n] : b.v[n * K + k]);
              ASSERT_NEAR(c[m * N + n], r < 0 ? 0 : r, 1e-5 * (1 + std::fabs(r)))
                  << "path " << path << " threads " << threads << " layout " << layout << " M=" << M;
            }
        }
  float x = 0;
  EXPECT_EQ(dml_cpu_gemm_variant(DML_CPU_F32, 0, 1, 1, 1, &x, &x, nullptr, nullptr, &x, 0, 9, 0), DML_CPU_ERR_ARGUMENT);
 });
}

// Every ISA table on the odd-size grid M, N, K ∈ {1, 5, 17, 31, 33, 65, 127, 255} (all 512 shapes:
// tails of the 6-row tiles, of 16-column panels and of 32-column AVX-512 tiles, K across the KC
// block), each shape with one configuration from a rotation over every epilogue, dtype, layout,
// per-call / prepacked B, 1 or 2 threads and element-aligned (never vector-aligned) pointers.
TEST(GemmKernels, IsaParityOddSizeGrid) {
  const int saved = omp_get_max_threads();
  const int64_t sizes[] = {1, 5, 17, 31, 33, 65, 127, 255};
  for_each_isa([&](const std::string&) {
    int idx = 0;
    for (int64_t M : sizes)
      for (int64_t N : sizes)
        for (int64_t K : sizes) {
          const int r = idx++;
          Case c;
          c.M = M, c.N = N, c.K = K;
          c.epi = kEpilogues[r % 9];
          c.dtype = (r / 9) % 3 == 0 ? DML_CPU_F32 : (r / 9) % 3 == 1 ? DML_CPU_F16 : DML_CPU_BF16;
          if (r % 4 == 0) c.dtype = DML_CPU_F32;  // fp32 gets half the cases (the dot path is fp32-only)
          c.layout = (r / 2) % 2;
          c.packed = (r / 5) % 2 == 1;
          c.bias = r % 7 != 3;
          c.offset = (r / 3) % 2 ? esize(c.dtype) : 0;
          omp_set_num_threads(1 + r % 2);
          run_and_check(c);
          if (::testing::Test::HasFailure()) {
            omp_set_num_threads(saved);
            return;  // one broken configuration is enough to report
          }
        }
  });
  omp_set_num_threads(saved);
}

// Every epilogue and dtype on the shapes that reach each path of every table: GEMV (M = 1, packed:
// the multi-stream kernel; fp32 b[N, K]: dot products or, on AVX-512, the transposed path), M ≤ 16
// slice tiles, blocked with M, N and K
// tails, N with an odd number of 16-column panels (a one-panel tile at the end of a 32-column group),
// 1 and 2 threads.
TEST(GemmKernels, IsaEveryEpilogueDtypeAndPath) {
  const int saved = omp_get_max_threads();
  // (M = 2, 3-4, 5-8 with fp32 b[N, K] reach the AVX-512 transposed path's 8-, 4- and 2-float
  // grouped broadcasts, M = 9-16 its 16-row panel; odd K leaves a masked group tail.)
  const int64_t shapes[][3] = {{1, 48, 255}, {1, 33, 65},  {2, 40, 37},  {3, 50, 21},   {4, 33, 130},  {5, 80, 127},
                               {8, 17, 301}, {9, 20, 33},  {12, 55, 99}, {16, 17, 300}, {65, 112, 33}, {127, 31, 600}};
  for_each_isa([&](const std::string&) {
    for (int threads : {1, 2})
      for (int dtype : {DML_CPU_F32, DML_CPU_F16, DML_CPU_BF16})
        for (int epi : kEpilogues)
          for (const auto& s : shapes)
            for (bool packed : {false, true}) {
              Case c;
              c.dtype = dtype, c.epi = epi, c.packed = packed;
              c.M = s[0], c.N = s[1], c.K = s[2];
              c.layout = (s[0] + epi) % 2;
              omp_set_num_threads(threads);
              run_and_check(c);
            }
  });
  omp_set_num_threads(saved);
}

// The blocked path's results do not depend on the thread count on any table (panels are grouped
// into wide tiles from panel 0 whatever the blocks), and prepacked equals per-call packing bitwise.
TEST(GemmKernels, IsaThreadCountAndPackingBitwise) {
  for_each_isa([&](const std::string&) {
    for (const auto& s : {std::array<int64_t, 3>{200, 150, 300}, {130, 80, 64}, {97, 48, 513}, {300, 16, 40}}) {
      Case c;
      c.epi = DML_CPU_EPI_GELU, c.M = s[0], c.N = s[1], c.K = s[2];
      const auto plain = same_across_threads(c);
      c.packed = true;
      EXPECT_EQ(plain, run_and_check(c)) << describe(c);
    }
  });
}

// The AVX-512 and AVX2 epilogues are the same formulas in the same order: identical activations.
TEST(GemmKernels, Avx512EpilogueMatchesAvx2) {
  const std::string initial = dml_cpu_gemm_isa();
  if (dml_cpu_gemm_select_isa("avx512") != 0 || dml_cpu_gemm_select_isa("avx2") != 0)
    GTEST_SKIP() << "this CPU cannot run both the avx512 and the avx2 GEMM table (no AVX-512 F/BW/DQ/VL with zmm state)";
  std::vector<float> xs;
  for (float x = -40.0f; x <= 40.0f; x += 0.0371f) xs.push_back(x);
  const int64_t N = static_cast<int64_t>(xs.size());
  const float one = 1.0f;
  for (int epi : kEpilogues) {
    if (has_add(epi)) continue;
    std::vector<float> o2(N), o5(N);
    ASSERT_EQ(dml_cpu_gemm_select_isa("avx2"), 0);
    ASSERT_EQ(dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, 1, N, 1, &one, xs.data(), nullptr, nullptr, o2.data(), epi), 0);
    ASSERT_EQ(dml_cpu_gemm_select_isa("avx512"), 0);
    ASSERT_EQ(dml_cpu_gemm(DML_CPU_F32, DML_CPU_B_RRR, 1, N, 1, &one, xs.data(), nullptr, nullptr, o5.data(), epi), 0);
    EXPECT_EQ(std::memcmp(o2.data(), o5.data(), N * sizeof(float)), 0) << "epilogue " << epi;
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

}  // namespace

namespace {

// DINOML_CPU_GEMM_ISA reaches the library through the one place that reads knobs from the
// environment (include/dinoml/kernel_knobs.h, as the runtime applies it when it loads a module), so
// it is checked in a child process (this test binary re-run with a filter): a runnable name selects
// that table; an unknown name, or one this CPU cannot run, warns on stderr and keeps the CPUID
// choice — never an illegal instruction.
TEST(GemmKernels, IsaOverrideChild) {
  if (!std::getenv("DML_GEMM_ISA_CHILD")) GTEST_SKIP() << "runs only as IsaOverrideVariable's child";
  dinoml::apply_kernel_knobs(RTLD_DEFAULT);
  std::printf("child isa=%s\n", dml_cpu_gemm_isa());
  // The chosen table computes correctly.
  Case c;
  c.M = 7, c.N = 40, c.K = 33, c.epi = DML_CPU_EPI_GELU, c.layout = DML_CPU_B_RCR;
  run_and_check(c);
}

std::string run_child(const std::string& isa_value) {
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    ADD_FAILURE() << "cannot find this test binary";
    return "";
  }
  self[len] = '\0';
  const std::string cmd = "DML_GEMM_ISA_CHILD=1 DINOML_CPU_GEMM_ISA=" + isa_value + " '" + self +
                          "' --gtest_filter=GemmKernels.IsaOverrideChild 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    const int st = pclose(f);
    EXPECT_EQ(st, 0) << out;
  } else {
    ADD_FAILURE() << "cannot run " << cmd;
  }
  return out;
}

TEST(GemmKernels, IsaOverrideVariable) {
  if (std::getenv("DML_GEMM_ISA_CHILD")) GTEST_SKIP() << "this process is IsaOverrideVariable's child";
  const std::string initial = dml_cpu_gemm_isa();  // this process: the CPUID choice (unless overridden)
  for (const std::string& isa : runnable_isas()) {
    const std::string out = run_child(isa);
    EXPECT_NE(out.find("child isa=" + isa + "\n"), std::string::npos) << out;
    EXPECT_EQ(out.find("dinoml: DINOML_CPU_GEMM_ISA"), std::string::npos) << out;
  }
  if (std::getenv("DINOML_CPU_GEMM_ISA")) return;  // the parent's own choice is not the CPUID one
  const std::string bogus = run_child("avx1024");
  EXPECT_NE(bogus.find("dinoml: DINOML_CPU_GEMM_ISA=avx1024 is not a GEMM ISA path"), std::string::npos) << bogus;
  EXPECT_NE(bogus.find("child isa=" + initial + "\n"), std::string::npos) << bogus;
  for (const char* isa : {"avx512", "avx2"}) {
    if (dml_cpu_gemm_select_isa(isa) == 0) continue;  // runnable here: covered above
    const std::string out = run_child(isa);
    EXPECT_NE(out.find(std::string("DINOML_CPU_GEMM_ISA=") + isa + " cannot run on this CPU"), std::string::npos) << out;
    EXPECT_NE(out.find("child isa=" + initial + "\n"), std::string::npos) << out;
  }
  EXPECT_EQ(dml_cpu_gemm_select_isa(initial.c_str()), 0);
}

}  // namespace
