// Every check the loader makes before it loads any code of an artifact, in one place: the loader
// (Module::load) and `dinoml verify` / dinoml_artifact_verify() both run exactly this, so what
// verify accepts is what load accepts up to the dlopen.
//
// Order (each step trusts only what the previous steps proved):
//   directory → manifest (schema/ABI versions, target, arch, required ISA, shape of the file list)
//   → file paths (inside the directory, regular files, nothing unlisted that the loader would use)
//   → SHA-256 of every listed file (constants.bin through the read-only mapping the module reads;
//     metadata.json and graph.dinoir.json from the very bytes that are then parsed)
//   → metadata.json (signature) → constants bounds (metadata "constants_bytes" and every constant
//     slot of graph.dinoir.json against the real size of constants.bin) → memory plan bounds.
#pragma once

#include <filesystem>
#include <string>

#include "manifest.h"
#include "mapped_file.h"
#include "metadata.h"
#include "weights.h"

namespace dinoml::runtime {

struct VerifiedArtifact {
  Manifest manifest;
  Metadata metadata;
  MappedFile constants;  // empty when the artifact has no constants.bin
  size_t constants_bytes = 0;        // what the module reads (constants.bin, or an external weights file)
  std::vector<ConstantSlot> slots;   // graph.dinoir.json's constants (swappable not yet set)
};

// Watches the checks as they run: begin() names the check about to run, passed() gives a
// one-line detail once it succeeded. A failing check is the Error that verify_artifact throws.
class VerifyObserver {
 public:
  virtual ~VerifyObserver() = default;
  virtual void begin(const std::string& check) = 0;
  virtual void passed(const std::string& detail) = 0;
};

// Throws Error (status + message naming the file and what to do) at the first failing check.
VerifiedArtifact verify_artifact(const std::filesystem::path& dir, VerifyObserver* observer = nullptr);

}  // namespace dinoml::runtime
