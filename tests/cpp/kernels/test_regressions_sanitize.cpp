// Regression tests for sanitizer findings in the CPU kernels (scripts/sanitize asan;
// docs/reliability.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dinoml_cpu_kernels.h"

// Finding: dml_cpu_gemm_pack_b stored floats through a 2-byte-aligned packed buffer (UBSan
// misaligned store; the header promised "any alignment works"). The contract is now 4-byte
// alignment, and a misaligned buffer is refused instead of written.
TEST(KernelSanitizeRegressions, MisalignedPackedBufferIsRefused) {
  const int64_t N = 17, K = 5;
  std::vector<float> b(N * K, 1.0f);
  std::vector<unsigned char> pk(dml_cpu_gemm_packed_b_size(N, K) + 64);
  EXPECT_EQ(dml_cpu_gemm_pack_b(DML_CPU_F32, DML_CPU_B_RRR, N, K, b.data(), pk.data() + 2), DML_CPU_ERR_ARGUMENT);
  EXPECT_NE(std::string(dml_cpu_last_error()).find("4-byte aligned"), std::string::npos) << dml_cpu_last_error();
  ASSERT_EQ(dml_cpu_gemm_pack_b(DML_CPU_F32, DML_CPU_B_RRR, N, K, b.data(), pk.data() + 4), 0) << dml_cpu_last_error();
  std::vector<float> a(3 * K, 1.0f), c(3 * N, 0.0f);
  EXPECT_EQ(dml_cpu_gemm_prepacked(DML_CPU_F32, 3, N, K, a.data(), pk.data() + 6, nullptr, nullptr, c.data(), 0),
            DML_CPU_ERR_ARGUMENT);
  ASSERT_EQ(dml_cpu_gemm_prepacked(DML_CPU_F32, 3, N, K, a.data(), pk.data() + 4, nullptr, nullptr, c.data(), 0), 0)
      << dml_cpu_last_error();
  EXPECT_EQ(c[0], static_cast<float>(K));
}
