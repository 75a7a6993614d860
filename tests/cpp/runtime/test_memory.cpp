// A session's memory: exactly the planned arena + states + session-owned outputs + the reported
// fixed overhead (issue 8). Measured with glibc's heap statistics around session creation and runs.
#include <gtest/gtest.h>
#include <malloc.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/fixture.h"

using namespace dinoml_test;

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kHeapStatsUsable = false;  // sanitizer allocators do not feed mallinfo2
#else
constexpr bool kHeapStatsUsable = true;
#endif

size_t heap_in_use() {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;  // small chunks in use + mmapped chunks
}

dinoml_status run_positional(dinoml_session* s, const FixtureInputs& in) {
  std::vector<dinoml_tensor> inputs = {in.x_tensor(), in.tok_tensor()};
  std::vector<dinoml_tensor> outputs(2);  // data = NULL: the session allocates the outputs
  return dinoml_session_run(s, inputs.data(), inputs.size(), outputs.data(), outputs.size());
}

dinoml_session_memory memory_of(dinoml_session* s) {
  dinoml_session_memory m{};
  EXPECT_EQ(dinoml_session_memory_info(s, &m), DINOML_OK) << last_error();
  return m;
}

}  // namespace

TEST(RuntimeMemory, ReportAddsUpAndFollowsThePlan) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  dinoml_session_memory before = memory_of(s.get());
  EXPECT_EQ(before.arena_bytes, 0u);  // nothing planned before the first run
  EXPECT_EQ(before.state_bytes, 64u);  // counter: 8 bytes, rounded to 64
  EXPECT_EQ(before.output_bytes, 0u);
  EXPECT_EQ(before.overhead_bytes, dinoml_session_overhead_bytes(1, 2));
  EXPECT_EQ(before.constants_bytes, kConstants.size() * sizeof(float));
  EXPECT_EQ(before.device_bytes, 0u);  // a CPU artifact holds no device memory

  // batch 2 (bucket <= 2): the fixture plans 2 * 4 floats of arena.
  ASSERT_EQ(run_positional(s.get(), FixtureInputs::make(2, 4)), DINOML_OK) << last_error();
  dinoml_session_memory m2 = memory_of(s.get());
  EXPECT_EQ(m2.arena_bytes, 64u);
  EXPECT_EQ(m2.output_bytes, 64u + 64u);  // y: 2*4 floats; s: 2*2 int64
  EXPECT_EQ(m2.total_bytes, m2.arena_bytes + m2.state_bytes + m2.output_bytes + m2.overhead_bytes);
  EXPECT_EQ(m2.overhead_bytes, before.overhead_bytes);  // fixed: does not grow with the bucket

  // batch 4: arena 4 * 4 floats = 64 bytes, outputs grow.
  ASSERT_EQ(run_positional(s.get(), FixtureInputs::make(4, 8)), DINOML_OK) << last_error();
  dinoml_session_memory m4 = memory_of(s.get());
  EXPECT_EQ(m4.arena_bytes, 64u);
  EXPECT_EQ(m4.output_bytes, 64u + 128u);  // y: 64 B; s: 4*4 int64 = 128 B
  EXPECT_EQ(m4.overhead_bytes, before.overhead_bytes);
}

// glibc's per-thread cache keeps freed chunks counted as "in use", so the measurement runs in a
// child process (this test binary, re-executed) with the cache off.
TEST(RuntimeMemory, MeasuredHeapIsThePlanPlusTheReportedOverhead) {
  if (!kHeapStatsUsable) GTEST_SKIP() << "heap statistics are not available under sanitizers";
  if (!std::getenv("DINOML_MEMORY_CHILD")) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("DINOML_MEMORY_CHILD", "1", 1);
      setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
      execl("/proc/self/exe", "dinoml_runtime_tests", "--gtest_filter=RuntimeMemory.MeasuredHeapIsThePlanPlusTheReportedOverhead",
            static_cast<char*>(nullptr));
      _exit(127);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the measuring child failed (status " << status
                                                               << "); run it alone to see its output";
    return;
  }
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  {  // warm any lazily allocated process-wide state (thread-locals, loader caches)
    SessionPtr warm = session_ok(m.get());
    ASSERT_EQ(run_positional(warm.get(), FixtureInputs::make(4, 8)), DINOML_OK) << last_error();
  }
  for (int64_t batch : {1, 4}) {
    const size_t h0 = heap_in_use();
    dinoml_session* s = nullptr;
    ASSERT_EQ(dinoml_session_create(m.get(), &s), DINOML_OK) << last_error();
    ASSERT_EQ(run_positional(s, FixtureInputs::make(batch, 8)), DINOML_OK) << last_error();
    const size_t grown = heap_in_use() - h0;
    dinoml_session_memory r = memory_of(s);
    const size_t buffers = r.arena_bytes + r.state_bytes + r.output_bytes;
    EXPECT_GE(grown, buffers) << "batch " << batch;
    EXPECT_LE(grown, r.total_bytes) << "batch " << batch << ": the session holds more than it reports";
    dinoml_session_free(s);
    EXPECT_LE(heap_in_use(), h0) << "batch " << batch << ": freeing the session left memory behind";
  }
}

TEST(RuntimeMemory, ArgumentErrors) {
  dinoml_session_memory m{};
  EXPECT_EQ(dinoml_session_memory_info(nullptr, &m), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "session is NULL");
  Artifact a = make_artifact();
  ModulePtr mod = load_ok(a.dir);
  SessionPtr s = session_ok(mod.get());
  EXPECT_EQ(dinoml_session_memory_info(s.get(), nullptr), DINOML_ERR_INVALID_ARGUMENT);
}
