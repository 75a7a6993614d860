// cpp_app: runs a float32 DinoML artifact from C++ with <dinoml/runtime.hpp> (RAII over the C ABI),
// and swaps its weights without recompiling.
//
//   cpp_app ARTIFACT_DIR [WEIGHTS.safetensors]
//
// Every input gets its dims' minimum sizes and a deterministic pattern; the outputs are printed.
// With a weights file the constants it names are swapped in (Module::set_weights_file) and the
// same inputs run again, so the two printouts show the effect of the new weights. An artifact
// compiled with --weights external is loaded with the file instead.
#include <dinoml/runtime.hpp>

#include <cstdio>
#include <string>
#include <vector>

namespace rt = dinoml::rt;

static void print_outputs(const char* title, const std::vector<rt::OwnedTensor>& outs) {
  std::printf("%s\n", title);
  for (const auto& o : outs) {
    std::printf("  %s [", o.name.c_str());
    for (size_t a = 0; a < o.shape.size(); ++a) std::printf("%s%lld", a ? ", " : "", static_cast<long long>(o.shape[a]));
    std::printf("]:");
    if (o.dtype == DINOML_FLOAT32)
      for (float v : o.to_vector<float>()) std::printf(" %.6g", static_cast<double>(v));
    std::printf("\n");
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ARTIFACT_DIR [WEIGHTS.safetensors]\n", argv[0]);
    return 2;
  }
  try {
    const std::string weights = argc > 2 ? argv[2] : "";
    // An external-weights artifact needs its file at load; probing with a plain load says so.
    rt::Module module = [&] {
      try {
        return rt::Module::load(argv[1]);
      } catch (const rt::Error&) {
        if (weights.empty()) throw;
        return rt::Module::load(argv[1], weights);
      }
    }();
    std::printf("model %s, weights policy %s, constants:", module.name().c_str(), module.weights_policy().c_str());
    for (const auto& c : module.constants()) std::printf(" %s%s", c.name.c_str(), c.swappable ? "" : "(fixed)");
    std::printf("\n");

    std::vector<std::vector<float>> data;
    std::vector<rt::Input> inputs;
    for (const auto& info : module.inputs()) {
      if (info.dtype != DINOML_FLOAT32) throw rt::Error(DINOML_ERR_INVALID_ARGUMENT, "cpp_app runs float32 inputs only");
      std::vector<int64_t> shape;
      for (const auto& a : info.axes) shape.push_back(a.min);
      data.emplace_back(static_cast<size_t>(rt::numel(shape)));
      for (size_t i = 0; i < data.back().size(); ++i) data.back()[i] = static_cast<float>(static_cast<int>(i % 17) - 8) * 0.25f;
      inputs.push_back(rt::Input::of(info.name, data.back(), shape));
    }
    rt::Session session = module.session();
    print_outputs("outputs:", session.run(inputs));
    if (!weights.empty() && module.weights_policy() != "external") {
      module.set_weights_file(weights);
      print_outputs("outputs with the weights of the file:", session.run(inputs));
    }
    return 0;
  } catch (const rt::Error& e) {
    std::fprintf(stderr, "cpp_app: %s\n", e.what());
    return 1;
  }
}
