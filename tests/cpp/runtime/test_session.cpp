// Sessions: states, lifetime, concurrency and the thread-local error.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "runtime/fixture.h"

using namespace dinoml_test;

namespace {

// One run's outputs, flattened to bytes so results compare bit for bit.
std::vector<uint8_t> run_once(dinoml_session* s, const FixtureInputs& in) {
  std::vector<dinoml_tensor> inputs = {in.x_tensor(), in.tok_tensor()};
  std::vector<dinoml_tensor> outputs(2);
  if (dinoml_session_run(s, inputs.data(), inputs.size(), outputs.data(), outputs.size()) != DINOML_OK) return {};
  std::vector<uint8_t> bytes;
  for (const dinoml_tensor& t : outputs) {
    const auto* p = static_cast<const uint8_t*>(t.data);
    bytes.insert(bytes.end(), p, p + t.nbytes);
  }
  return bytes;
}

// 200 runs over varying shapes (so arenas and output buffers regrow) with the state advancing.
std::vector<std::vector<uint8_t>> run_sequence(dinoml_session* s, const std::vector<FixtureInputs>& inputs) {
  std::vector<std::vector<uint8_t>> results;
  for (int i = 0; i < 200; ++i) results.push_back(run_once(s, inputs[i % inputs.size()]));
  return results;
}

std::vector<FixtureInputs> varied_inputs() {
  std::vector<FixtureInputs> v;
  for (int i = 0; i < 12; ++i) v.push_back(FixtureInputs::make(1 + i % 4, 2 + 2 * (i % 4), i));
  return v;
}

int64_t counter_of(dinoml_session* s) {
  int64_t c = -1;
  EXPECT_EQ(dinoml_session_get_state(s, "counter", &c, sizeof c), DINOML_OK) << last_error();
  return c;
}

}  // namespace

TEST(RuntimeStates, GetSetResetAndRunUpdates) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  EXPECT_EQ(counter_of(s.get()), 0);  // zero-initialised

  FixtureInputs in = FixtureInputs::make(2, 4);
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(run_once(s.get(), in).empty()) << last_error();
  EXPECT_EQ(counter_of(s.get()), 3);

  int64_t ten = 10;
  ASSERT_EQ(dinoml_session_set_state(s.get(), "counter", &ten, sizeof ten), DINOML_OK) << last_error();
  std::vector<dinoml_tensor> inputs = {in.x_tensor(), in.tok_tensor()};
  std::vector<dinoml_tensor> outputs(2);
  ASSERT_EQ(dinoml_session_run(s.get(), inputs.data(), 2, outputs.data(), 2), DINOML_OK);
  std::vector<int64_t> got(static_cast<const int64_t*>(outputs[1].data),
                           static_cast<const int64_t*>(outputs[1].data) + outputs[1].nbytes / 8);
  EXPECT_EQ(got, in.expected_s(10));
  EXPECT_EQ(counter_of(s.get()), 11);

  ASSERT_EQ(dinoml_session_reset_states(s.get()), DINOML_OK);
  EXPECT_EQ(counter_of(s.get()), 0);
}

TEST(RuntimeStates, SizeAndNameChecks) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  int32_t small = 0;
  EXPECT_EQ(dinoml_session_get_state(s.get(), "counter", &small, sizeof small), DINOML_ERR_BUFFER_TOO_SMALL);
  EXPECT_CONTAINS(last_error(), "'counter'");
  EXPECT_CONTAINS(last_error(), "8 bytes");
  EXPECT_EQ(dinoml_session_set_state(s.get(), "counter", &small, sizeof small), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "4 bytes were given");
  int64_t v = 0;
  EXPECT_EQ(dinoml_session_get_state(s.get(), "kv", &v, sizeof v), DINOML_ERR_NOT_FOUND);
  EXPECT_CONTAINS(last_error(), "'kv'");
  EXPECT_CONTAINS(last_error(), "'counter'");
  EXPECT_EQ(dinoml_session_set_state(s.get(), nullptr, &v, sizeof v), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dinoml_session_set_state(s.get(), "counter", nullptr, sizeof v), DINOML_ERR_INVALID_ARGUMENT);
}

TEST(RuntimeStates, SessionsHaveIndependentStates) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s1 = session_ok(m.get());
  SessionPtr s2 = session_ok(m.get());
  FixtureInputs in = FixtureInputs::make(1, 2);
  run_once(s1.get(), in);
  run_once(s1.get(), in);
  run_once(s2.get(), in);
  EXPECT_EQ(counter_of(s1.get()), 2);
  EXPECT_EQ(counter_of(s2.get()), 1);
}

TEST(RuntimeSessions, CreateFreeLoop) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  FixtureInputs in = FixtureInputs::make(4, 8);
  for (int i = 0; i < 2000; ++i) {
    SessionPtr s = session_ok(m.get());
    ASSERT_NE(s, nullptr);
    if (i % 100 == 0) {
      ASSERT_FALSE(run_once(s.get(), in).empty()) << last_error();
    }
  }
}

TEST(RuntimeSessions, LoadFreeLoop) {
  Artifact a = make_artifact();
  FixtureInputs in = FixtureInputs::make(2, 2);
  for (int i = 0; i < 50; ++i) {
    ModulePtr m = load_ok(a.dir);
    SessionPtr s = session_ok(m.get());
    ASSERT_FALSE(run_once(s.get(), in).empty()) << last_error();
  }
}

TEST(RuntimeSessions, SessionOutlivesModuleHandle) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  m.reset();  // the session keeps the loaded code alive
  FixtureInputs in = FixtureInputs::make(2, 4);
  EXPECT_FALSE(run_once(s.get(), in).empty()) << last_error();
}

TEST(RuntimeSessions, ThreadsWithOwnSessionsAreBitIdenticalToSingleThread) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  const std::vector<FixtureInputs> inputs = varied_inputs();

  SessionPtr reference_session = session_ok(m.get());
  const auto reference = run_sequence(reference_session.get(), inputs);
  for (const auto& r : reference) ASSERT_FALSE(r.empty());

  constexpr int kThreads = 8;
  std::vector<std::vector<std::vector<uint8_t>>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      dinoml_session* s = nullptr;
      if (dinoml_session_create(m.get(), &s) != DINOML_OK) return;
      results[t] = run_sequence(s, inputs);
      dinoml_session_free(s);
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(results[t], reference) << "thread " << t;
}

TEST(RuntimeSessions, SharedSessionSerialisesCalls) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  SessionPtr s = session_ok(m.get());
  const std::vector<FixtureInputs> inputs = varied_inputs();
  constexpr int kThreads = 4, kRuns = 100;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        const FixtureInputs& in = inputs[(t + i) % inputs.size()];
        std::vector<dinoml_tensor> in_c = {in.x_tensor(), in.tok_tensor()};
        // Caller-owned outputs: session-owned ones may be reused by another thread's run.
        std::vector<float> y(in.x.size());
        std::vector<dinoml_tensor> out(1);
        out[0].name = "y";
        out[0].data = y.data();
        out[0].nbytes = y.size() * sizeof(float);
        if (dinoml_session_run(s.get(), in_c.data(), 2, out.data(), 1) != DINOML_OK || y != in.expected_y()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(counter_of(s.get()), kThreads * kRuns);  // no lost state update
}

TEST(RuntimeSessions, LastErrorIsThreadLocal) {
  EXPECT_EQ(dinoml_session_run(nullptr, nullptr, 0, nullptr, 0), DINOML_ERR_INVALID_ARGUMENT);
  const std::string here = last_error();
  EXPECT_CONTAINS(here, "session is NULL");
  std::string other = "unset";
  std::thread([&] { other = dinoml_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(last_error(), here);
}
