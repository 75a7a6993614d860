// The header-only C++ wrapper (include/dinoml/runtime.hpp) and the C example app.
#include <dinoml/runtime.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "runtime/fixture.h"

using namespace dinoml_test;
namespace rt = dinoml::rt;

TEST(RuntimeHpp, LoadDescribeAndRun) {
  Artifact a = make_artifact();
  rt::Module module = rt::Module::load(a.dir.string());
  EXPECT_EQ(module.name(), "fixture");
  EXPECT_EQ(module.graph_hash(), "fixture-graph-hash-v1");
  auto inputs = module.inputs();
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(inputs[0].axes[0].dim_name, "batch");
  EXPECT_TRUE(inputs[0].axes[1].is_static());
  EXPECT_EQ(module.outputs()[1].axes[1].dim_name, "seq / 2");
  EXPECT_EQ(module.states()[0].name, "counter");

  rt::Session session = module.session();
  FixtureInputs in = FixtureInputs::make(3, 4);
  auto outputs = session.run({rt::Tensor::of("x", in.x, {3, 4}), rt::Tensor::of("tok", in.tok, {3, 4})});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].name, "y");
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(outputs[0].to_vector<float>(), in.expected_y());
  EXPECT_EQ(outputs[1].to_vector<int64_t>(), in.expected_s(0));
  EXPECT_THROW(outputs[1].data<float>(), rt::Error);  // int64 is not float

  // Owned outputs survive later runs; views point at session memory.
  FixtureInputs in2 = FixtureInputs::make(3, 4, 9);
  auto views = session.run_views({rt::Tensor::of("", in2.x.data(), {3, 4}), rt::Tensor::of("", in2.tok.data(), {3, 4})});
  EXPECT_EQ(outputs[0].to_vector<float>(), in.expected_y());
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(std::vector<float>(views[0].data<float>(), views[0].data<float>() + views[0].numel()), in2.expected_y());
  EXPECT_GT(session.arena_bytes(), 0u);
}

TEST(RuntimeHpp, RunIntoCallerBuffers) {
  Artifact a = make_artifact();
  rt::Session session = rt::Module::load(a.dir.string()).session();  // the session keeps the module
  FixtureInputs in = FixtureInputs::make(2, 8);
  std::vector<int64_t> s(8);
  std::vector<rt::Tensor> outputs = {rt::Tensor("s", DINOML_INT64, {}, s.data(), s.size() * sizeof(int64_t))};
  session.run_into({rt::Tensor::of("x", in.x, {2, 4}), rt::Tensor::of("tok", in.tok, {2, 8})}, outputs);
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s, in.expected_s(0));

  std::vector<int64_t> tiny(2);
  outputs = {rt::Tensor("s", DINOML_INT64, {}, tiny.data(), tiny.size() * sizeof(int64_t))};
  try {
    session.run_into({rt::Tensor::of("x", in.x, {2, 4}), rt::Tensor::of("tok", in.tok, {2, 8})}, outputs);
    FAIL() << "expected BUFFER_TOO_SMALL";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.status(), DINOML_ERR_BUFFER_TOO_SMALL);
    EXPECT_STREQ(e.status_name(), "BUFFER_TOO_SMALL");
    EXPECT_CONTAINS(e.what(), "'s'");
  }
}

TEST(RuntimeHpp, ErrorsCarryStatusAndMessage) {
  Artifact a = make_artifact();
  a.corrupt("constants.bin");
  try {
    rt::Module::load(a.dir.string());
    FAIL() << "expected an artifact error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.status(), DINOML_ERR_ARTIFACT);
    EXPECT_CONTAINS(e.what(), "constants.bin");
  }

  Artifact good = make_artifact();
  rt::Session session = rt::Module::load(good.dir.string()).session();
  FixtureInputs in = FixtureInputs::make(2, 4);
  try {
    session.run({rt::Tensor::of("x", in.x, {2, 4}), rt::Tensor::of("tok", in.x, {2, 4})});  // float as tok
    FAIL() << "expected a dtype error";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.status(), DINOML_ERR_INVALID_ARGUMENT);
    EXPECT_CONTAINS(e.what(), "'tok'");
  }
  EXPECT_THROW(rt::Tensor::of("x", in.x, {100, 4}), rt::Error);  // vector too short for the shape
}

TEST(RuntimeHpp, States) {
  Artifact a = make_artifact();
  rt::Module module = rt::Module::load(a.dir.string());
  rt::Session session(module);
  EXPECT_EQ(session.get_state_as<int64_t>("counter"), (std::vector<int64_t>{0}));
  session.set_state("counter", std::vector<int64_t>{41});
  FixtureInputs in = FixtureInputs::make(1, 2);
  session.run({rt::Tensor::of("x", in.x, {1, 4}), rt::Tensor::of("tok", in.tok, {1, 2})});
  EXPECT_EQ(session.get_state_as<int64_t>("counter"), (std::vector<int64_t>{42}));
  session.reset_states();
  EXPECT_EQ(session.get_state_as<int64_t>("counter"), (std::vector<int64_t>{0}));
  try {
    session.get_state("missing");
    FAIL() << "expected NOT_FOUND";
  } catch (const rt::Error& e) {
    EXPECT_EQ(e.status(), DINOML_ERR_NOT_FOUND);
  }
  rt::Session moved = std::move(session);
  EXPECT_EQ(moved.get_state_as<int64_t>("counter"), (std::vector<int64_t>{0}));
}

// The example app must load, describe and run an artifact using the C ABI alone.
TEST(RuntimeCApp, RunsTheFixture) {
  const fs::path app = fs::path(DINOML_BINARY_DIR) / "c_app";
  if (!fs::exists(app)) GTEST_SKIP() << "build the dinoml_c_app target to run this test";
  Artifact a = make_artifact();
  auto run = [&](const std::string& args, int& rc) {
    std::string cmd = "'" + app.string() + "' '" + a.dir.string() + "' " + args + " 2>&1";
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
    std::string out;
    char buf[512];
    while (pipe && fgets(buf, sizeof buf, pipe.get())) out += buf;
    rc = pipe ? pclose(pipe.release()) : -1;
    return out;
  };
  int rc = 0;
  std::string out = run("batch=3", rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_CONTAINS(out, "input x: float32 [batch in [1, 4], 4]");
  EXPECT_CONTAINS(out, "dim seq = 2 (min)");
  EXPECT_CONTAINS(out, "output y float32 [3, 4]:");
  // x pattern starts at -2 (i=0 -> (0-8)*0.25), so y[0] = -2 * 2 + 0.5.
  EXPECT_CONTAINS(out, "output y float32 [3, 4]: -3.5 ");
  EXPECT_CONTAINS(out, "output s int64 [3, 1]:");

  out = run("batch=9", rc);
  EXPECT_NE(rc, 0);
  EXPECT_CONTAINS(out, "'batch'");
  EXPECT_CONTAINS(out, "[1, 4]");
}
