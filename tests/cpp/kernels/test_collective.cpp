// The CPU collectives (kernels/cpu/collective.cpp) called directly: ranks are threads bound to one
// communicator; all_reduce leaves every rank the sum; the DINOML_COLLECTIVE_TIMEOUT_S knob bounds
// how long a rank waits for one that never arrives.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "dinoml_cpu_kernels.h"

TEST(CpuCollective, AllReduceSumsOverTheRanks) {
  void* comm = dml_cpu_comm_create(2);
  ASSERT_NE(comm, nullptr);
  std::vector<std::vector<float>> bufs = {{1, 2, 3}, {10, 20, 30}};
  int status[2] = {-1, -1};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      dml_cpu_comm_bind(comm, r);
      status[r] = dml_cpu_all_reduce(DML_CPU_F32, 3, bufs[r].data(), 2);
      dml_cpu_comm_bind(nullptr, -1);
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 0);
  EXPECT_EQ(bufs[0], (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(bufs[1], bufs[0]);
  dml_cpu_comm_destroy(comm);
}

TEST(CpuCollective, TimeoutKnobBoundsTheWaitForAMissingRank) {
  ASSERT_EQ(dml_cpu_set_knob("DINOML_COLLECTIVE_TIMEOUT_S", "0.2"), 0);
  void* comm = dml_cpu_comm_create(2);
  dml_cpu_comm_bind(comm, 0);
  float x = 1.0f;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(dml_cpu_all_reduce(DML_CPU_F32, 1, &x, 2), 0);  // rank 1 never arrives
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  const std::string err = dml_cpu_last_error();
  EXPECT_NE(err.find("waited"), std::string::npos) << err;
  dml_cpu_comm_bind(nullptr, -1);
  dml_cpu_comm_destroy(comm);
  ASSERT_EQ(dml_cpu_set_knob("DINOML_COLLECTIVE_TIMEOUT_S", nullptr), 0);  // back to the default (300 s)
}
