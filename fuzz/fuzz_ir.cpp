// Fuzz target (a): IR JSON reader + structural validator + shape inference.
// Input: graph.dinoir.json text, optionally followed by a NUL byte and the constants blob
// (the seeds are real graph.dinoir.json + "\0" + constants.bin pairs). Thrown errors are the
// expected outcome for bad input; only crashes, hangs and sanitizer reports are findings.
#include <nlohmann/json.hpp>

#include <cstring>
#include <exception>
#include <vector>

#include "ir/serialize.h"
#include "ir/validate.h"
#include "passes/pass.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const uint8_t* json_end = nul ? nul : data + size;
  std::vector<uint8_t> constants = nul ? std::vector<uint8_t>(nul + 1, data + size) : std::vector<uint8_t>(256, 0);
  auto j = nlohmann::json::parse(data, json_end, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  try {
    auto g = dinoml::ir::graph_from_json(j, constants);
    dinoml::ir::validate_structure(g);
    dinoml::passes::infer_shapes(g);
  } catch (const std::exception&) {
  }
  return 0;
}
