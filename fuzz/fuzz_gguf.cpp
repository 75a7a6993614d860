// Fuzz target (e): the GGUF reader (src/import/gguf) on arbitrary bytes. Every parsed file is then
// walked the way the compiler uses it: metadata values printed, each tensor's bytes located and
// (for small supported tensors) dequantized, so an accepted header that lied about sizes or
// offsets would be read out of bounds here and reported by ASan.
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <dinoml/quant_ref.h>

#include "fuzz_common.h"
#include "import/gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto bytes = std::make_shared<std::vector<uint8_t>>(data, data + size);
  try {
    dinoml::gguf::File f = dinoml::gguf::File::parse(bytes, "fuzz.gguf");
    size_t text = 0;
    for (const auto& [key, value] : f.metadata) text += key.size() + value.to_string(4).size();
    std::vector<float> out;
    for (const auto& t : f.tensors) {
      const uint8_t* p = f.data(t);
      if (t.nbytes) {
        volatile uint8_t first = p[0], last = p[t.nbytes - 1];  // the whole range must be mapped
        (void)first;
        (void)last;
      }
      const int64_t n = t.numel();
      if (n > 0 && n <= (1 << 16)) {
        out.resize(static_cast<size_t>(n));
        dinoml::quant::dequantize_row(t.type, p, out.data(), n);
      }
    }
    (void)text;
  } catch (const std::exception&) {
  }
  return 0;
}
