// The seed Linear model built from C++ with the same builder Python uses, compiled to an
// artifact and run through the runtime's C ABI.
//   cpp_linear [OUT_DIR]
#include <cstdio>
#include <cstring>
#include <vector>

#include <dinoml/compiler.hpp>
#include <dinoml/runtime.h>

#include "builder/graph_builder.h"

using namespace dinoml;

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : "out/cpp_linear";
  try {
    builder::GraphBuilder b("linear");
    b.add_dim(ir::Dim{"batch", 1, 4, 3, {1, 3, 4}, 1});
    b.input("x", ir::DType::f32, {ir::IntExpr::dim("batch"), 8});
    std::vector<float> w(8 * 6), bias(6);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = 0.5f * static_cast<float>(i);
    auto bytes = [](const std::vector<float>& v) {
      const auto* p = reinterpret_cast<const uint8_t*>(v.data());
      return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
    };
    b.constant("weight", ir::DType::f32, {8, 6}, bytes(w));
    b.constant("bias", ir::DType::f32, {6}, bytes(bias));
    auto y = b.op1("gemm_rrr_bias", {"x", "weight", "bias"});
    b.output(y, "y");
    CompileOptions opts;
    opts.out_dir = out;
    auto res = compile(b.finish(), opts);
    std::printf("compiled %s in %.2f s\n", res.artifact_dir.c_str(), res.seconds);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compile failed: %s\n", e.what());
    return 1;
  }

  dinoml_module* m = nullptr;
  dinoml_session* s = nullptr;
  if (dinoml_module_load(out, &m) != DINOML_OK || dinoml_session_create(m, &s) != DINOML_OK) {
    std::fprintf(stderr, "load failed: %s\n", dinoml_last_error());
    return 1;
  }
  std::vector<float> x(3 * 8, 1.0f);
  dinoml_tensor in{};
  in.name = "x";
  in.data = x.data();
  in.nbytes = x.size() * sizeof(float);
  in.dtype = DINOML_FLOAT32;
  in.ndim = 2;
  in.shape[0] = 3;
  in.shape[1] = 8;
  dinoml_tensor outt{};
  outt.name = "y";
  int rc = 0;
  if (dinoml_session_run(s, &in, 1, &outt, 1) != DINOML_OK) {
    std::fprintf(stderr, "run failed: %s\n", dinoml_last_error());
    rc = 1;
  } else {
    const float* yv = static_cast<const float*>(outt.data);
    std::printf("y [%lld, %lld]:", static_cast<long long>(outt.shape[0]), static_cast<long long>(outt.shape[1]));
    for (int i = 0; i < 6; ++i) std::printf(" %.4f", yv[i]);
    std::printf(" ...\n");
  }
  dinoml_session_free(s);
  dinoml_module_free(m);
  return rc;
}
