// Shared helpers of the libFuzzer targets in fuzz/ (see docs/reliability.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dinoml_fuzz {

// Directory of a small but real compiled artifact (3 inputs, 2 symbolic dims with buckets and
// divisible_by, a state, a GEMM and fused elementwise code). Compiled with dinoml::compile on
// first use into $DINOML_FUZZ_ARTIFACT or <build dir>/fuzz_template_artifact and reused afterwards.
const std::string& template_artifact();

// Writes `size` bytes to `path` (truncating); aborts on I/O failure (a harness bug, not a find).
void write_file(const std::string& path, const uint8_t* data, size_t size);

// SHA-256 hex of a file, as manifest.json lists it.
std::string sha256_file(const std::string& path);

// A private scratch directory for this process (under $TMPDIR), created once.
const std::string& scratch_dir();

}  // namespace dinoml_fuzz
