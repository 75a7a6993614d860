// Loading: manifest checks, integrity (SHA-256 before dlopen), ABI/ISA checks, metadata errors.
#include <gtest/gtest.h>

#include <fstream>

#include "runtime/fixture.h"

using namespace dinoml_test;

namespace {

void expect_load_error(const Artifact& a, dinoml_status expected, const std::vector<std::string>& fragments) {
  ModulePtr m;
  dinoml_status st = try_load(a.dir, m);
  EXPECT_EQ(st, expected) << dinoml_status_name(st) << ": " << last_error();
  EXPECT_EQ(m, nullptr);
  for (const std::string& f : fragments) EXPECT_CONTAINS(last_error(), f);
}

}  // namespace

TEST(RuntimeLoad, LoadsValidArtifactAndDescribesIt) {
  Artifact a = make_artifact();
  ModulePtr m = load_ok(a.dir);
  ASSERT_NE(m, nullptr);
  EXPECT_STREQ(dinoml_module_name(m.get()), "fixture");
  EXPECT_STREQ(dinoml_module_graph_hash(m.get()), "fixture-graph-hash-v1");
  ASSERT_EQ(dinoml_module_num_inputs(m.get()), 2u);
  ASSERT_EQ(dinoml_module_num_outputs(m.get()), 2u);
  ASSERT_EQ(dinoml_module_num_states(m.get()), 1u);

  dinoml_tensor_info info{};
  ASSERT_EQ(dinoml_module_input_info(m.get(), 1, &info), DINOML_OK);
  EXPECT_STREQ(info.name, "tok");
  EXPECT_EQ(info.dtype, DINOML_INT32);
  ASSERT_EQ(info.ndim, 2);
  EXPECT_STREQ(info.axes[0].dim_name, "batch");
  EXPECT_EQ(info.axes[0].min, 1);
  EXPECT_EQ(info.axes[0].max, 4);
  EXPECT_STREQ(info.axes[1].dim_name, "seq");

  ASSERT_EQ(dinoml_module_input_info(m.get(), 0, &info), DINOML_OK);
  EXPECT_EQ(info.axes[1].dim_name, nullptr);
  EXPECT_EQ(info.axes[1].min, 4);
  EXPECT_EQ(info.axes[1].max, 4);

  ASSERT_EQ(dinoml_module_output_info(m.get(), 1, &info), DINOML_OK);
  EXPECT_STREQ(info.name, "s");
  EXPECT_EQ(info.dtype, DINOML_INT64);
  EXPECT_STREQ(info.axes[1].dim_name, "seq / 2");
  EXPECT_EQ(info.axes[1].min, 1);
  EXPECT_EQ(info.axes[1].max, 4);

  ASSERT_EQ(dinoml_module_state_info(m.get(), 0, &info), DINOML_OK);
  EXPECT_STREQ(info.name, "counter");
  EXPECT_EQ(info.ndim, 1);
  EXPECT_EQ(info.axes[0].min, 1);

  EXPECT_EQ(dinoml_module_output_info(m.get(), 2, &info), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_CONTAINS(last_error(), "out of range");
}

TEST(RuntimeLoad, MissingDirectoryIsNotFound) {
  ModulePtr m;
  EXPECT_EQ(try_load("/nonexistent/dinoml/artifact", m), DINOML_ERR_NOT_FOUND);
  EXPECT_CONTAINS(last_error(), "/nonexistent/dinoml/artifact");
}

TEST(RuntimeLoad, NullArgumentsAreRejected) {
  dinoml_module* m = reinterpret_cast<dinoml_module*>(0x1);
  EXPECT_EQ(dinoml_module_load(nullptr, &m), DINOML_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(dinoml_module_load("/tmp", nullptr), DINOML_ERR_INVALID_ARGUMENT);
}

TEST(RuntimeLoad, MissingManifestIsNotFound) {
  Artifact a = make_artifact();
  fs::remove(a.path("manifest.json"));
  expect_load_error(a, DINOML_ERR_NOT_FOUND, {"manifest.json"});
}

TEST(RuntimeLoad, AlteredConstantsAreRejected) {
  Artifact a = make_artifact();
  a.corrupt("constants.bin", 3);
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"constants.bin", "modified or corrupted", "recompile"});
}

TEST(RuntimeLoad, AlteredModuleIsRejectedBeforeDlopen) {
  Artifact a = make_artifact();
  // Clobbering the ELF header would crash dlopen if the hash were checked too late.
  a.corrupt("module.so", 0);
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"module.so", "modified or corrupted"});
}

TEST(RuntimeLoad, AlteredLibraryIsRejected) {
  Artifact a = make_artifact();
  a.corrupt("lib/libfixture_scale.so", 100);
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"lib/libfixture_scale.so", "modified or corrupted"});
}

TEST(RuntimeLoad, AlteredMetadataIsRejected) {
  Artifact a = make_artifact();
  a.metadata["dims"][0]["max"] = 64;
  a.write_metadata(/*rehash=*/false);
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"metadata.json", "modified or corrupted"});
}

TEST(RuntimeLoad, MissingListedFileIsRejected) {
  Artifact a = make_artifact();
  fs::remove(a.path("graph.dinoir.json"));
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"graph.dinoir.json", "missing"});
}

TEST(RuntimeLoad, UnlistedLibraryIsRejected) {
  Artifact a = make_artifact();
  fs::copy_file(a.path("lib/libfixture_scale.so"), a.path("lib/libextra.so"));
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"lib/libextra.so", "not listed"});
}

TEST(RuntimeLoad, UnlistedModuleIsRejected) {
  Artifact a = make_artifact();
  a.manifest["files"].erase("module.so");
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"module.so"});
}

TEST(RuntimeLoad, PathEscapesInFilesAreRejected) {
  for (const std::string bad : {"../outside.bin", "lib/../../x", "/etc/passwd", "./module.so", "lib//a.so"}) {
    Artifact a = make_artifact();
    a.manifest["files"][bad] = std::string(64, '0');
    a.write_manifest();
    expect_load_error(a, DINOML_ERR_ARTIFACT, {bad, "inside their own directory"});
  }
}

TEST(RuntimeLoad, SymlinkOutOfArtifactIsRejected) {
  Artifact a = make_artifact();
  std::ofstream(a.dir.parent_path() / "outside.json") << "{}";
  fs::create_symlink(a.dir.parent_path() / "outside.json", a.path("link.json"));
  a.rehash_and_write_manifest();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"link.json", "outside the artifact directory"});
}

TEST(RuntimeLoad, MalformedManifestJsonIsArtifactError) {
  Artifact a = make_artifact();
  std::ofstream(a.path("manifest.json"), std::ios::trunc) << "{\"artifact_schema_version\": 1, ";
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"manifest.json", "not valid JSON"});
}

TEST(RuntimeLoad, ManifestFieldOfWrongTypeIsNamed) {
  Artifact a = make_artifact();
  a.manifest["graph_hash"] = 42;
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"manifest.json", "graph_hash"});
}

TEST(RuntimeLoad, MalformedMetadataJsonIsArtifactError) {
  Artifact a = make_artifact();
  std::ofstream(a.path("metadata.json"), std::ios::trunc) << "[1, 2";
  a.rehash_and_write_manifest();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"metadata.json"});
}

TEST(RuntimeLoad, MetadataSemanticErrorsAreNamed) {
  {
    Artifact a = make_artifact();
    a.metadata["inputs"][0]["dtype"] = "float128";
    a.write_metadata();
    expect_load_error(a, DINOML_ERR_ARTIFACT, {"metadata.json", "inputs[0].dtype", "float128"});
  }
  {
    Artifact a = make_artifact();
    a.metadata["outputs"][1]["shape"][1]["op"] = "mod";
    a.write_metadata();
    expect_load_error(a, DINOML_ERR_ARTIFACT, {"metadata.json", "mod"});
  }
  {
    Artifact a = make_artifact();
    a.metadata["states"][0]["nbytes"] = 16;
    a.write_metadata();
    expect_load_error(a, DINOML_ERR_ARTIFACT, {"states[0].nbytes"});
  }
}

TEST(RuntimeLoad, DimUsedByNoInputIsRejected) {
  Artifact a = make_artifact();
  a.metadata["dims"].push_back({{"name", "heads"}, {"min", 1}, {"max", 8}, {"divisible_by", 1}});
  a.write_metadata();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"heads", "no input"});
}

TEST(RuntimeLoad, RuntimeAbiMismatch) {
  Artifact a = make_artifact();
  a.manifest["runtime_abi_version"] = DINOML_RUNTIME_ABI_VERSION + 1;
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ABI_MISMATCH,
                    {"runtime ABI version " + std::to_string(DINOML_RUNTIME_ABI_VERSION + 1),
                     "supports version " + std::to_string(DINOML_RUNTIME_ABI_VERSION), "recompile"});
}

TEST(RuntimeLoad, ManifestModuleAbiMismatch) {
  Artifact a = make_artifact();
  a.manifest["module_abi_version"] = 7;
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ABI_MISMATCH, {"module ABI version 7"});
}

TEST(RuntimeLoad, SchemaVersionMismatch) {
  Artifact a = make_artifact();
  a.manifest["artifact_schema_version"] = 2;
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ABI_MISMATCH, {"artifact schema version 2"});
}

TEST(RuntimeLoad, ModuleReportingAnotherAbiIsRejected) {
  ModuleVariant v;
  v.module_abi_version = 99;
  Artifact a = make_artifact(v);
  expect_load_error(a, DINOML_ERR_ABI_MISMATCH, {"module.so", "module ABI version 99"});
}

TEST(RuntimeLoad, GraphHashMismatchIsRejected) {
  Artifact a = make_artifact();
  a.manifest["graph_hash"] = "another-graph";
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ARTIFACT, {"fixture-graph-hash-v1", "another-graph"});
}

TEST(RuntimeLoad, OtherTargetIsRejected) {
  Artifact a = make_artifact();
  a.manifest["target"] = "tpu";  // cuda and rocm are known targets since issues 4 and 7
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ABI_MISMATCH, {"tpu", "cpu"});
}

TEST(RuntimeLoad, SupportedIsaLoads) {
  Artifact a = make_artifact();
  json isa = json::array();
  if (__builtin_cpu_supports("avx2")) isa.push_back("avx2");
  if (__builtin_cpu_supports("fma")) isa.push_back("fma");
  if (__builtin_cpu_supports("f16c")) isa.push_back("f16c");
  a.manifest["required_isa"] = isa;
  a.write_manifest();
  load_ok(a.dir);
}

TEST(RuntimeLoad, MissingIsaIsRejected) {
  // Pick an ISA this CPU lacks (the list goes from common to rare).
  std::string missing;
  for (const char* name : {"avx512f", "avx512bf16", "avx512fp16", "amx-tile"}) {
    bool has = std::string(name) == "avx512f"      ? __builtin_cpu_supports("avx512f")
               : std::string(name) == "avx512bf16" ? __builtin_cpu_supports("avx512bf16")
               : std::string(name) == "avx512fp16" ? __builtin_cpu_supports("avx512fp16")
                                                   : __builtin_cpu_supports("amx-tile");
    if (!has) {
      missing = name;
      break;
    }
  }
  if (missing.empty()) GTEST_SKIP() << "this CPU supports every ISA the test knows";
  Artifact a = make_artifact();
  a.manifest["required_isa"] = {"avx2", missing};
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ISA_MISMATCH, {missing, "recompile", "--isa"});
}

TEST(RuntimeLoad, UnknownIsaIsRejected) {
  Artifact a = make_artifact();
  a.manifest["required_isa"] = {"avx9000"};
  a.write_manifest();
  expect_load_error(a, DINOML_ERR_ISA_MISMATCH, {"avx9000", "does not know"});
}

TEST(RuntimeLoad, EmptyConstantsArePassedAsNull) {
  // The fixture module refuses to init without its 16 bytes: the module's message must surface.
  Artifact a = make_artifact();
  std::ofstream(a.path("constants.bin"), std::ios::trunc | std::ios::binary);
  a.rehash_and_write_manifest();
  expect_load_error(a, DINOML_ERR_RUNTIME, {"failed to initialise", "constants.bin holds 0 bytes"});
}

TEST(RuntimeLoad, ArtifactIsRelocatable) {
  Artifact a = make_artifact();
  fs::path moved = a.dir.parent_path() / (a.dir.filename().string() + "_moved");
  fs::rename(a.dir, moved);
  ModulePtr m = load_ok(moved);
  EXPECT_NE(m, nullptr);
}

TEST(RuntimeLoad, SameArtifactLoadsTwice) {
  Artifact a = make_artifact();
  ModulePtr m1 = load_ok(a.dir);
  ModulePtr m2 = load_ok(a.dir);
  EXPECT_NE(m1.get(), m2.get());
}

TEST(RuntimeLoad, SameNamedLibraryFromAnotherArtifactIsDetected) {
  ModuleVariant other;
  other.scale = 3;  // same lib/libfixture_scale.so name, different bytes
  Artifact a = make_artifact();
  Artifact b = make_artifact(other);
  {
    ModulePtr ma = load_ok(a.dir);
    ModulePtr mb;
    EXPECT_EQ(try_load(b.dir, mb), DINOML_ERR_ARTIFACT);
    EXPECT_CONTAINS(last_error(), "lib/libfixture_scale.so");
    EXPECT_CONTAINS(last_error(), "already loaded a different");
    // Identical libraries from two artifacts are fine.
    Artifact a2 = make_artifact();
    ModulePtr ma2 = load_ok(a2.dir);
  }
  // module.so is opened with RTLD_NODELETE (OpenMP worker threads must never see their code
  // unmapped), so a's library stays mapped for the life of the process and b stays refused.
  ModulePtr mb;
  EXPECT_EQ(try_load(b.dir, mb), DINOML_ERR_ARTIFACT);
  EXPECT_CONTAINS(last_error(), "lib/libfixture_scale.so");
}
