// graph.dinoir.json: versioned, canonical JSON (sorted keys, no timestamps). Constants are never
// inlined: constant tensors carry {offset, nbytes, sha256} into a separate constants file.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace dinoml::ir {

inline constexpr int kIrSchemaVersion = 1;
inline constexpr size_t kConstantAlignment = 64;

struct ConstantSlot {
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  std::string sha256;
};

// SHA-256 (hex) of a constant's bytes, computed once per buffer.
std::string constant_sha256(const ConstantBytes& b);
// Deterministic layout of all constants: sorted by tensor name, 64-byte aligned.
std::map<std::string, ConstantSlot> layout_constants(const Graph& g);
// The constants file content for that layout (zero padding between slots).
std::vector<uint8_t> pack_constants(const Graph& g, const std::map<std::string, ConstantSlot>& layout);

nlohmann::json attr_to_json(const AttrValue& v);
AttrValue attr_from_json(const nlohmann::json& j);

nlohmann::json graph_to_json(const Graph& g, const std::string& constants_file = "constants.bin");
// `constants` is the content of the constants file (may be empty when the graph has none).
Graph graph_from_json(const nlohmann::json& j, const std::vector<uint8_t>& constants);

// Writes `path` (graph JSON) and the constants file next to it.
void write_graph(const Graph& g, const std::string& path, const std::string& constants_file = "constants.bin");
// Reads a graph JSON and its constants file; every problem is an IrError naming the file.
Graph read_graph(const std::string& path);

// Canonical text form (what the hash covers).
std::string canonical_dump(const Graph& g);
// SHA-256 (hex) of the canonical dump; covers structure and constant contents.
std::string graph_hash(const Graph& g);

std::string sha256_hex(const void* data, size_t n);
std::string sha256_file(const std::string& path);

}  // namespace dinoml::ir
