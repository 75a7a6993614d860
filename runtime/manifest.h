// manifest.json: the artifact's identity and integrity record. Everything here is checked
// before any code from the artifact is loaded.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dinoml::runtime {

inline constexpr int kArtifactSchemaVersion = 1;
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kModuleFile = "module.so";
inline constexpr const char* kMetadataFile = "metadata.json";
inline constexpr const char* kConstantsFile = "constants.bin";

struct Manifest {
  std::string name;
  std::string target;
  std::string arch;  // cpu: "x86-64" (empty when the manifest predates the field); cuda: "sm_90a", ...
  int cuda_runtime_major = 0;  // cuda: the CUDA major version module.so was built with
  std::string hip_runtime_version;  // rocm: the HIP runtime module.so was built against ("5.2.21153")
  std::string graph_hash;
  std::vector<std::string> required_isa;
  // Vendor libraries (sonames, no paths) the chosen provider kernels need from the system.
  std::vector<std::string> system_libraries;
  std::map<std::string, std::string> files;  // artifact-relative path -> lowercase sha256 hex
  // "tensor_parallel": the group's size and each rank's constants file (rank 0: constants.bin).
  int world_size = 1;
  std::vector<std::string> rank_constants;

  bool lists(const std::string& path) const { return files.count(path) != 0; }
};

// The machine architecture this runtime was built for ("x86-64"), and whether a manifest's
// "arch" names it (the compiler writes "x86-64"; "x86_64" is the same machine).
const char* host_arch() noexcept;
bool arch_supported(const std::string& arch) noexcept;

// Parses manifest.json and checks schema + ABI versions, target, required ISA and the shape of
// the files list (relative paths without "..", well-formed digests). Does not hash anything.
Manifest read_manifest(const std::filesystem::path& dir);

// Throws DINOML_ERR_ARTIFACT if a listed path escapes the artifact directory (also through
// symlinks), is not a regular file, or if a file the runtime loads (module.so, metadata.json,
// constants.bin, anything under lib/) is present but unlisted.
void check_artifact_files(const std::filesystem::path& dir, const Manifest& manifest);

// Throws DINOML_ERR_ARTIFACT naming `path` when `actual` differs from the manifest's digest.
void check_digest(const std::filesystem::path& dir, const Manifest& manifest, const std::string& path,
                  const std::string& actual);

}  // namespace dinoml::runtime
