// Running: results, input matching, validation messages, output buffers, arena growth.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/fixture.h"

using namespace dinoml_test;

namespace {

class RuntimeRun : public ::testing::Test {
 protected:
  void SetUp() override {
    artifact_ = make_artifact();
    module_ = load_ok(artifact_.dir);
    ASSERT_NE(module_, nullptr);
    session_ = session_ok(module_.get());
    ASSERT_NE(session_, nullptr);
  }

  dinoml_status run(std::vector<dinoml_tensor> inputs, std::vector<dinoml_tensor>& outputs) {
    return dinoml_session_run(session_.get(), inputs.data(), inputs.size(), outputs.data(), outputs.size());
  }
  dinoml_status run(std::vector<dinoml_tensor> inputs) {
    std::vector<dinoml_tensor> outputs(2);
    return run(std::move(inputs), outputs);
  }
  // Runs expecting `status`; checks the message mentions every fragment.
  void expect_error(std::vector<dinoml_tensor> inputs, dinoml_status status, const std::vector<std::string>& fragments) {
    dinoml_status st = run(std::move(inputs));
    EXPECT_EQ(st, status) << dinoml_status_name(st) << ": " << last_error();
    for (const std::string& f : fragments) EXPECT_CONTAINS(last_error(), f);
  }

  Artifact artifact_;
  ModulePtr module_;
  SessionPtr session_;
};

template <class T>
std::vector<T> as_vector(const dinoml_tensor& t) {
  std::vector<T> v(t.nbytes / sizeof(T));
  std::memcpy(v.data(), t.data, t.nbytes);
  return v;
}

}  // namespace

TEST_F(RuntimeRun, NamedInputsProduceExpectedOutputs) {
  FixtureInputs in = FixtureInputs::make(3, 6);
  std::vector<dinoml_tensor> outputs(2);  // positional, runtime-allocated
  ASSERT_EQ(run({in.tok_tensor(), in.x_tensor()}, outputs), DINOML_OK) << last_error();
  EXPECT_EQ(outputs[0].dtype, DINOML_FLOAT32);
  ASSERT_EQ(outputs[0].ndim, 2);
  EXPECT_EQ(outputs[0].shape[0], 3);
  EXPECT_EQ(outputs[0].shape[1], 4);
  EXPECT_EQ(outputs[0].nbytes, 3u * 4 * sizeof(float));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(outputs[0].data) % 64, 0u);
  EXPECT_EQ(as_vector<float>(outputs[0]), in.expected_y());
  EXPECT_EQ(outputs[1].dtype, DINOML_INT64);
  EXPECT_EQ(outputs[1].shape[1], 3);
  EXPECT_EQ(as_vector<int64_t>(outputs[1]), in.expected_s(0));
  EXPECT_STREQ(last_error().c_str(), "");
}

TEST_F(RuntimeRun, PositionalInputsMatchNamedInputs) {
  FixtureInputs in = FixtureInputs::make(2, 4, 5);
  std::vector<dinoml_tensor> named(2), positional(2);
  ASSERT_EQ(run({in.x_tensor(), in.tok_tensor()}, named), DINOML_OK) << last_error();
  std::vector<float> y_named = as_vector<float>(named[0]);
  ASSERT_EQ(run({in.x_tensor(false), in.tok_tensor(false)}, positional), DINOML_OK) << last_error();
  EXPECT_EQ(as_vector<float>(positional[0]), y_named);
  EXPECT_EQ(as_vector<int64_t>(positional[1]), in.expected_s(1));
}

TEST_F(RuntimeRun, MixingNamedAndPositionalIsRejected) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  expect_error({in.x_tensor(true), in.tok_tensor(false)}, DINOML_ERR_INVALID_ARGUMENT, {"mix named and positional"});
}

TEST_F(RuntimeRun, CallerProvidedOutputs) {
  FixtureInputs in = FixtureInputs::make(4, 8);
  alignas(64) float y[16];
  std::vector<int64_t> s(16, -1);  // larger than needed is fine
  std::vector<dinoml_tensor> outputs(2);
  outputs[0].name = "y";
  outputs[0].data = y;
  outputs[0].nbytes = sizeof(y);
  outputs[1].name = "s";
  outputs[1].data = s.data();
  outputs[1].nbytes = s.size() * sizeof(int64_t);
  ASSERT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_OK) << last_error();
  EXPECT_EQ(outputs[0].data, y);
  EXPECT_EQ(outputs[1].data, s.data());
  EXPECT_EQ(outputs[1].nbytes, 16u * sizeof(int64_t));
  EXPECT_EQ(std::vector<float>(y, y + 16), in.expected_y());
  EXPECT_EQ(s, in.expected_s(0));
}

TEST_F(RuntimeRun, NamedOutputsMaySelectASubsetInAnyOrder) {
  FixtureInputs in = FixtureInputs::make(1, 2);
  std::vector<dinoml_tensor> outputs(1);
  outputs[0].name = "s";
  ASSERT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_OK) << last_error();
  EXPECT_EQ(as_vector<int64_t>(outputs[0]), in.expected_s(0));

  outputs[0].name = "nope";
  outputs[0].data = nullptr;
  EXPECT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "'nope' is not an output");
  EXPECT_CONTAINS(last_error(), "'y', 's'");
}

TEST_F(RuntimeRun, NoOutputSlotsStillRuns) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  std::vector<dinoml_tensor> inputs = {in.x_tensor(), in.tok_tensor()};
  ASSERT_EQ(dinoml_session_run(session_.get(), inputs.data(), 2, nullptr, 0), DINOML_OK) << last_error();
  int64_t counter = 0;
  ASSERT_EQ(dinoml_session_get_state(session_.get(), "counter", &counter, sizeof counter), DINOML_OK);
  EXPECT_EQ(counter, 1);
}

TEST_F(RuntimeRun, PartialPositionalOutputsAreRejected) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  std::vector<dinoml_tensor> outputs(1);
  EXPECT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "2 outputs");
}

TEST_F(RuntimeRun, BufferTooSmall) {
  FixtureInputs in = FixtureInputs::make(3, 4);
  float y[11];
  std::vector<dinoml_tensor> outputs(2);
  outputs[0].data = y;
  outputs[0].nbytes = sizeof(y);
  ASSERT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_ERR_BUFFER_TOO_SMALL);
  EXPECT_CONTAINS(last_error(), "'y'");
  EXPECT_CONTAINS(last_error(), "48 bytes");
  EXPECT_CONTAINS(last_error(), "44");
  // A rejected run changes nothing: the state was not advanced.
  int64_t counter = -1;
  ASSERT_EQ(dinoml_session_get_state(session_.get(), "counter", &counter, sizeof counter), DINOML_OK);
  EXPECT_EQ(counter, 0);
  EXPECT_EQ(outputs[1].data, nullptr);
}

TEST_F(RuntimeRun, UnknownInputNameListsTheInputs) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  dinoml_tensor bad = in.x_tensor();
  bad.name = "input_ids";
  expect_error({bad, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'input_ids'", "'x', 'tok'"});
}

TEST_F(RuntimeRun, DuplicateAndMissingInputs) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  expect_error({in.x_tensor(), in.x_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "more than once"});
  expect_error({in.x_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"missing", "'tok'"});
  expect_error({in.x_tensor(false)}, DINOML_ERR_INVALID_ARGUMENT, {"takes 2 inputs", "1 were passed"});
  EXPECT_EQ(dinoml_session_run(session_.get(), nullptr, 2, nullptr, 0), DINOML_ERR_INVALID_ARGUMENT);
}

TEST_F(RuntimeRun, WrongDtypeNamesBothDtypes) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  dinoml_tensor x = in.x_tensor();
  x.dtype = DINOML_INT32;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "int32", "float32"});
  x.dtype = static_cast<dinoml_dtype>(42);
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "unknown"});
}

TEST_F(RuntimeRun, WrongRank) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  dinoml_tensor x = in.x_tensor();
  x.ndim = 3;
  x.shape[2] = 1;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "rank 3", "rank 2", "[batch, 4]"});
  x.ndim = 99;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "rank 99"});
}

TEST_F(RuntimeRun, WrongStaticSize) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  dinoml_tensor x = in.x_tensor();
  x.shape[1] = 5;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "axis 1", "size 5", "expects 4"});
}

TEST_F(RuntimeRun, DimOutOfBounds) {
  FixtureInputs in = FixtureInputs::make(4, 4);
  dinoml_tensor x = in.x_tensor();
  dinoml_tensor tok = in.tok_tensor();
  x.shape[0] = tok.shape[0] = 5;
  expect_error({x, tok}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "axis 0", "'batch'", "size 5", "[1, 4]"});
  x.shape[0] = tok.shape[0] = 0;
  expect_error({x, tok}, DINOML_ERR_INVALID_ARGUMENT, {"'batch'", "size 0", "[1, 4]"});
  FixtureInputs big = FixtureInputs::make(2, 10);
  expect_error({big.x_tensor(), big.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'tok'", "axis 1", "'seq'", "[2, 8]"});
}

TEST_F(RuntimeRun, DimNotDivisible) {
  FixtureInputs in = FixtureInputs::make(2, 3);
  expect_error({in.x_tensor(), in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT,
               {"'tok'", "axis 1", "'seq'", "size 3", "multiple of 2"});
}

TEST_F(RuntimeRun, InconsistentDims) {
  FixtureInputs a = FixtureInputs::make(2, 4);
  FixtureInputs b = FixtureInputs::make(3, 4);
  expect_error({a.x_tensor(), b.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT,
               {"'tok'", "axis 0", "size 3", "'x'", "'batch' = 2"});
}

TEST_F(RuntimeRun, NullDataAndShortBuffers) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  dinoml_tensor x = in.x_tensor();
  x.data = nullptr;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "NULL"});
  x = in.x_tensor();
  x.nbytes = 8;
  expect_error({x, in.tok_tensor()}, DINOML_ERR_INVALID_ARGUMENT, {"'x'", "8 bytes", "needs 32"});
}

TEST_F(RuntimeRun, ModuleFailureIsRuntimeError) {
  FixtureInputs in = FixtureInputs::make(2, 4);
  in.x[0] = std::numeric_limits<float>::quiet_NaN();
  expect_error({in.x_tensor(), in.tok_tensor()}, DINOML_ERR_RUNTIME, {"fixture", "x[0] is NaN"});
  // The session stays usable.
  FixtureInputs ok = FixtureInputs::make(2, 4);
  EXPECT_EQ(run({ok.x_tensor(), ok.tok_tensor()}), DINOML_OK) << last_error();
}

TEST_F(RuntimeRun, ArenaGrowsToLargestBucket) {
  EXPECT_EQ(dinoml_session_arena_bytes(session_.get()), 0u);
  FixtureInputs b1 = FixtureInputs::make(1, 4);
  ASSERT_EQ(run({b1.x_tensor(), b1.tok_tensor()}), DINOML_OK) << last_error();
  EXPECT_EQ(dinoml_session_arena_bytes(session_.get()), 2u * 4 * sizeof(float));  // bucket (.., 2]
  FixtureInputs b3 = FixtureInputs::make(3, 4);
  ASSERT_EQ(run({b3.x_tensor(), b3.tok_tensor()}), DINOML_OK) << last_error();
  EXPECT_EQ(dinoml_session_arena_bytes(session_.get()), 4u * 4 * sizeof(float));  // bucket (2, 4]
  ASSERT_EQ(run({b1.x_tensor(), b1.tok_tensor()}), DINOML_OK) << last_error();
  EXPECT_EQ(dinoml_session_arena_bytes(session_.get()), 4u * 4 * sizeof(float));  // never shrinks
}

TEST_F(RuntimeRun, RuntimeOutputsFollowTheShapeOfEachRun) {
  for (int64_t batch : {4, 1, 3, 2}) {
    for (int64_t seq : {8, 2, 6}) {
      FixtureInputs in = FixtureInputs::make(batch, seq, static_cast<int>(batch * seq));
      std::vector<dinoml_tensor> outputs(2);
      ASSERT_EQ(run({in.x_tensor(), in.tok_tensor()}, outputs), DINOML_OK) << last_error();
      EXPECT_EQ(as_vector<float>(outputs[0]), in.expected_y());
      EXPECT_EQ(outputs[1].shape[1], seq / 2);
      ASSERT_EQ(dinoml_session_reset_states(session_.get()), DINOML_OK);
      EXPECT_EQ(as_vector<int64_t>(outputs[1]), in.expected_s(0));
    }
  }
}

TEST(RuntimeErrors, StatusAndDtypeHelpers) {
  EXPECT_STREQ(dinoml_status_name(DINOML_OK), "OK");
  EXPECT_STREQ(dinoml_status_name(DINOML_ERR_BUFFER_TOO_SMALL), "BUFFER_TOO_SMALL");
  EXPECT_STREQ(dinoml_status_name(static_cast<dinoml_status>(77)), "UNKNOWN_STATUS");
  EXPECT_STREQ(dinoml_dtype_name(DINOML_BFLOAT16), "bfloat16");
  EXPECT_STREQ(dinoml_dtype_name(static_cast<dinoml_dtype>(-1)), "unknown");
  EXPECT_EQ(dinoml_dtype_size(DINOML_INT64), 8u);
  EXPECT_EQ(dinoml_dtype_size(DINOML_BOOL), 1u);
  EXPECT_EQ(dinoml_dtype_size(static_cast<dinoml_dtype>(8)), 0u);
  EXPECT_EQ(dinoml_runtime_abi_version(), DINOML_RUNTIME_ABI_VERSION);
}

TEST(RuntimeErrors, NullHandlesAreHandled) {
  EXPECT_EQ(dinoml_session_run(nullptr, nullptr, 0, nullptr, 0), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dinoml_session_create(nullptr, nullptr), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(dinoml_module_num_inputs(nullptr), 0u);
  EXPECT_STREQ(dinoml_module_name(nullptr), "");
  EXPECT_EQ(dinoml_session_arena_bytes(nullptr), 0u);
  dinoml_module_free(nullptr);
  dinoml_session_free(nullptr);
}

TEST_F(RuntimeRun, PlanOutputsDescribesWithoutRunning) {
  FixtureInputs in = FixtureInputs::make(3, 6);
  std::vector<dinoml_tensor> inputs{in.tok_tensor(), in.x_tensor()};
  std::vector<dinoml_tensor> planned(2);
  ASSERT_EQ(dinoml_session_plan_outputs(session_.get(), inputs.data(), inputs.size(), planned.data(), planned.size()),
            DINOML_OK)
      << last_error();
  EXPECT_EQ(planned[0].data, nullptr);  // nothing allocated, nothing run
  EXPECT_EQ(planned[0].dtype, DINOML_FLOAT32);
  ASSERT_EQ(planned[0].ndim, 2);
  EXPECT_EQ(planned[0].shape[0], 3);
  EXPECT_EQ(planned[0].shape[1], 4);
  EXPECT_EQ(planned[0].nbytes, 3u * 4 * sizeof(float));
  EXPECT_EQ(planned[1].dtype, DINOML_INT64);
  // Caller buffers of exactly the planned sizes are accepted by run and written in place.
  std::vector<float> y(planned[0].nbytes / sizeof(float));
  std::vector<int64_t> s(planned[1].nbytes / sizeof(int64_t));
  std::vector<dinoml_tensor> outputs(2);
  outputs[0].data = y.data();
  outputs[0].nbytes = planned[0].nbytes;
  outputs[1].data = s.data();
  outputs[1].nbytes = planned[1].nbytes;
  ASSERT_EQ(run(inputs, outputs), DINOML_OK) << last_error();
  EXPECT_EQ(outputs[0].data, y.data());
  EXPECT_EQ(y, in.expected_y());
  dinoml_session_memory mem{};
  ASSERT_EQ(dinoml_session_memory_info(session_.get(), &mem), DINOML_OK);
  EXPECT_EQ(mem.output_bytes, 0u);  // the session allocated no output memory
  // The same validation as run: a bad input is rejected with run's message.
  FixtureInputs bad = FixtureInputs::make(3, 6);
  std::vector<dinoml_tensor> wrong{bad.tok_tensor(), bad.x_tensor()};
  wrong[1].dtype = DINOML_INT32;
  EXPECT_EQ(dinoml_session_plan_outputs(session_.get(), wrong.data(), wrong.size(), planned.data(), planned.size()),
            DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "dtype");
  EXPECT_EQ(dinoml_session_plan_outputs(nullptr, inputs.data(), inputs.size(), planned.data(), planned.size()),
            DINOML_ERR_INVALID_ARGUMENT);
}

// Per-node timing needs the module's timed entry: the hand-written fixture module predates it, so
// the runtime refuses with a message that says to recompile (the timed path itself is covered by
// tests/python/test_node_timing.py with compiled models), and checks its own arguments first.
TEST_F(RuntimeRun, TimedRunRefusesModulesWithoutTheTimedEntry) {
  EXPECT_EQ(dinoml_module_num_nodes(module_.get()), 0u);
  EXPECT_EQ(dinoml_module_num_nodes(nullptr), 0u);
  FixtureInputs in = FixtureInputs::make(3, 6);
  std::vector<dinoml_tensor> inputs{in.tok_tensor(), in.x_tensor()}, outputs(2);
  double sec[4] = {0, 0, 0, 0};
  EXPECT_EQ(dinoml_session_run_timed(session_.get(), inputs.data(), inputs.size(), outputs.data(), outputs.size(), nullptr, 0),
            DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "node_seconds is NULL");
  EXPECT_EQ(dinoml_session_run_timed(session_.get(), inputs.data(), inputs.size(), outputs.data(), outputs.size(), sec, 4),
            DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "without per-node timing");
  EXPECT_CONTAINS(last_error(), "recompile");
  EXPECT_EQ(dinoml_session_run_timed(nullptr, inputs.data(), inputs.size(), outputs.data(), outputs.size(), sec, 4),
            DINOML_ERR_INVALID_ARGUMENT);
  // The untimed run is unaffected.
  EXPECT_EQ(dinoml_session_run(session_.get(), inputs.data(), inputs.size(), outputs.data(), outputs.size()), DINOML_OK)
      << last_error();
}
