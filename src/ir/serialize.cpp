#include "ir/serialize.h"

#include <openssl/evp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"
#include "ir/validate.h"

namespace dinoml::ir {
namespace fs = std::filesystem;
using nlohmann::json;

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

std::string sha256_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IrError("cannot open '" + path + "' for hashing");
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return sha256_hex(buf.data(), buf.size());
}

// SHA-256 of a constant's bytes, memoised per buffer. The bytes behind a ConstantBytes are
// immutable, and one compile hashes every constant many times (the graph hash after each pass, the
// constant layout that lowering steps and the artifact writer read); hashing ~0.5 GB of weights
// each time was most of a cached compile of a transformer. An entry is reused only while its
// buffer is alive (a weak reference to the very buffer), so a new buffer at a freed address is
// hashed afresh.
std::string constant_sha256(const ConstantBytes& b) {
  using Memo = std::unordered_map<const std::vector<uint8_t>*, std::pair<std::weak_ptr<const std::vector<uint8_t>>, std::string>>;
  static std::mutex mu;
  static Memo* memo = new Memo;  // never destroyed: no teardown order with static graphs
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = memo->find(b.get());
    if (it != memo->end() && it->second.first.lock() == b) return it->second.second;
  }
  std::string h = sha256_hex(b->data(), b->size());
  std::lock_guard<std::mutex> lock(mu);
  if (memo->size() >= 4096)
    for (auto it = memo->begin(); it != memo->end();) it = it->second.first.expired() ? memo->erase(it) : std::next(it);
  (*memo)[b.get()] = {b, h};
  return h;
}

std::map<std::string, ConstantSlot> layout_constants(const Graph& g) {
  std::map<std::string, ConstantSlot> out;
  uint64_t off = 0;
  for (const auto& [name, t] : g.tensors) {
    if (t.kind != TensorKind::constant) continue;
    auto it = g.constant_data.find(name);
    if (it == g.constant_data.end() || !it->second)
      throw IrError("constant tensor '" + name + "' has no data");
    const auto& bytes = *it->second;
    off = (off + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment;
    out[name] = {off, bytes.size(), constant_sha256(it->second)};
    off += bytes.size();
  }
  return out;
}

std::vector<uint8_t> pack_constants(const Graph& g, const std::map<std::string, ConstantSlot>& layout) {
  uint64_t end = 0;
  for (const auto& [n, s] : layout) end = std::max(end, s.offset + s.nbytes);
  std::vector<uint8_t> buf(end, 0);
  for (const auto& [n, s] : layout) {
    const auto& bytes = *g.constant_data.at(n);
    std::copy(bytes.begin(), bytes.end(), buf.begin() + static_cast<ptrdiff_t>(s.offset));
  }
  return buf;
}

json attr_to_json(const AttrValue& v) {
  struct V {
    json operator()(bool b) const { return {{"bool", b}}; }
    json operator()(int64_t i) const { return {{"int", i}}; }
    json operator()(double d) const { return {{"float", d}}; }
    json operator()(const std::string& s) const { return {{"str", s}}; }
    json operator()(const std::vector<int64_t>& v) const { return {{"ints", v}}; }
    json operator()(const std::vector<double>& v) const { return {{"floats", v}}; }
    json operator()(const std::vector<std::string>& v) const { return {{"strs", v}}; }
    json operator()(const Shape& s) const { return {{"shape", shape_to_json(s)}}; }
  };
  return std::visit(V{}, v);
}

AttrValue attr_from_json(const json& j) {
  if (!j.is_object() || j.size() != 1)
    throw IrError("attribute: expected {\"<type>\": value}, got " + j.dump());
  // Not `const auto& [type, val] = *j.items().begin()`: that binds to a temporary iterator
  // that dies at the end of the statement (ASan stack-use-after-scope, found by fuzz_ir).
  const auto first = j.begin();
  const std::string& type = first.key();
  const json& val = first.value();
  try {
    if (type == "bool") return val.get<bool>();
    if (type == "int") return val.get<int64_t>();
    if (type == "float") return val.get<double>();
    if (type == "str") return val.get<std::string>();
    if (type == "ints") return val.get<std::vector<int64_t>>();
    if (type == "floats") return val.get<std::vector<double>>();
    if (type == "strs") return val.get<std::vector<std::string>>();
    if (type == "shape") return shape_from_json(val);
  } catch (const json::exception& e) {
    throw IrError("attribute of type '" + type + "': bad value " + val.dump() + " (" + e.what() + ")");
  }
  throw IrError("attribute: unknown type '" + type +
                "' (expected bool, int, float, str, ints, floats, strs, shape)");
}

json graph_to_json(const Graph& g, const std::string& constants_file) {
  auto layout = layout_constants(g);
  json j;
  j["schema_version"] = kIrSchemaVersion;
  j["name"] = g.name;
  j["dims"] = json::array();
  for (const auto& d : g.dims) j["dims"].push_back(dim_to_json(d));
  j["inputs"] = g.inputs;
  j["outputs"] = g.outputs;
  j["states"] = g.states;
  j["constants_file"] = constants_file;
  j["tensors"] = json::array();
  for (const auto& [name, t] : g.tensors) {
    json jt = {{"name", t.name},
               {"dtype", dtype_name(t.dtype)},
               {"shape", shape_to_json(t.shape)},
               {"layout", t.layout},
               {"kind", tensor_kind_name(t.kind)}};
    if (t.view_of) jt["view_of"] = *t.view_of;
    if (t.quant)
      jt["quant"] = {{"type", t.quant->type}, {"block_size", t.quant->block_size}, {"block_bytes", t.quant->block_bytes}};
    if (t.source)
      jt["source"] = {{"format", t.source->format}, {"tensor", t.source->tensor}, {"type", t.source->type},
                      {"policy", t.source->policy}};
    if (auto it = layout.find(name); it != layout.end())
      jt["constant"] = {{"offset", it->second.offset}, {"nbytes", it->second.nbytes}, {"sha256", it->second.sha256}};
    j["tensors"].push_back(std::move(jt));
  }
  j["nodes"] = json::array();
  for (const auto& n : g.nodes) {
    json attrs = json::object();
    for (const auto& [k, v] : n.attrs) attrs[k] = attr_to_json(v);
    j["nodes"].push_back({{"name", n.name}, {"op", n.op}, {"inputs", n.inputs}, {"outputs", n.outputs}, {"attrs", attrs}});
  }
  return j;
}

namespace {
template <typename T>
T field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw IrError(where + ": missing field '" + key + "'");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw IrError(where + ": field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}
}  // namespace

Graph graph_from_json(const json& j, const std::vector<uint8_t>& constants) {
  if (!j.is_object()) throw IrError("graph JSON: top level must be an object");
  int version = field<int>(j, "schema_version", "graph JSON");
  if (version != kIrSchemaVersion)
    throw IrError("graph JSON: schema_version " + std::to_string(version) + " is not supported (this DinoML reads " +
                  std::to_string(kIrSchemaVersion) + "); re-export the graph with this version");
  Graph g;
  g.name = field<std::string>(j, "name", "graph JSON");
  if (j.contains("dims"))
    for (const auto& d : j["dims"]) g.dims.push_back(dim_from_json(d));
  g.inputs = field<std::vector<std::string>>(j, "inputs", "graph JSON");
  g.outputs = field<std::vector<std::string>>(j, "outputs", "graph JSON");
  g.states = j.contains("states") ? field<std::vector<std::string>>(j, "states", "graph JSON")
                                  : std::vector<std::string>{};
  if (!j.contains("tensors") || !j["tensors"].is_array()) throw IrError("graph JSON: 'tensors' must be an array");
  for (const auto& jt : j["tensors"]) {
    Tensor t;
    t.name = field<std::string>(jt, "name", "tensor");
    std::string where = "tensor '" + t.name + "'";
    t.dtype = dtype_from_name_or_throw(field<std::string>(jt, "dtype", where));
    try {
      t.shape = shape_from_json(jt.at("shape"));
    } catch (const json::exception&) {
      throw IrError(where + ": missing field 'shape'");
    } catch (const IrError& e) {
      throw IrError(where + ": " + e.what());
    }
    t.layout = jt.value("layout", std::string("row_major"));
    t.kind = tensor_kind_from_name(field<std::string>(jt, "kind", where));
    if (jt.contains("view_of")) t.view_of = field<std::string>(jt, "view_of", where);
    if (jt.contains("quant")) {
      const auto& q = jt["quant"];
      t.quant = QuantInfo{field<std::string>(q, "type", where + " quant"), field<int64_t>(q, "block_size", where + " quant"),
                          field<int64_t>(q, "block_bytes", where + " quant")};
    }
    if (jt.contains("source")) {
      const auto& s = jt["source"];
      t.source = ConstantSource{field<std::string>(s, "format", where + " source"), field<std::string>(s, "tensor", where + " source"),
                                field<std::string>(s, "type", where + " source"), field<std::string>(s, "policy", where + " source")};
    }
    if (t.kind == TensorKind::constant) {
      if (!jt.contains("constant")) throw IrError(where + ": constant tensor without a 'constant' slot");
      const auto& c = jt["constant"];
      auto off = field<uint64_t>(c, "offset", where + " constant");
      auto nb = field<uint64_t>(c, "nbytes", where + " constant");
      if (off > constants.size() || nb > constants.size() - off)
        throw IrError(where + ": constant slot [" + std::to_string(off) + ", +" + std::to_string(nb) +
                      ") lies outside the constants file (" + std::to_string(constants.size()) + " bytes)");
      auto bytes = std::make_shared<std::vector<uint8_t>>(constants.begin() + static_cast<ptrdiff_t>(off),
                                                          constants.begin() + static_cast<ptrdiff_t>(off + nb));
      if (c.contains("sha256") && sha256_hex(bytes->data(), bytes->size()) != c["sha256"].get<std::string>())
        throw IrError(where + ": constant data does not match its sha256 (constants file altered?)");
      g.constant_data[t.name] = std::move(bytes);
    }
    if (g.tensors.count(t.name)) throw IrError(where + ": defined twice");
    g.tensors.emplace(t.name, std::move(t));
  }
  if (!j.contains("nodes") || !j["nodes"].is_array()) throw IrError("graph JSON: 'nodes' must be an array");
  for (const auto& jn : j["nodes"]) {
    Node n;
    n.name = field<std::string>(jn, "name", "node");
    std::string where = "node '" + n.name + "'";
    n.op = field<std::string>(jn, "op", where);
    n.inputs = field<std::vector<std::string>>(jn, "inputs", where);
    n.outputs = field<std::vector<std::string>>(jn, "outputs", where);
    if (jn.contains("attrs")) {
      if (!jn["attrs"].is_object()) throw IrError(where + ": 'attrs' must be an object");
      for (const auto& [k, v] : jn["attrs"].items()) {
        try {
          n.attrs[k] = attr_from_json(v);
        } catch (const IrError& e) {
          throw IrError(where + ": attribute '" + k + "': " + e.what());
        }
      }
    }
    g.nodes.push_back(std::move(n));
  }
  validate_structure(g);
  return g;
}

void write_graph(const Graph& g, const std::string& path, const std::string& constants_file) {
  auto layout = layout_constants(g);
  auto blob = pack_constants(g, layout);
  std::ofstream f(path, std::ios::binary);
  if (!f) throw IrError("cannot write '" + path + "'");
  f << graph_to_json(g, constants_file).dump(1) << "\n";
  fs::path cpath = fs::path(path).parent_path() / constants_file;
  std::ofstream c(cpath, std::ios::binary);
  if (!c) throw IrError("cannot write '" + cpath.string() + "'");
  c.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
}

Graph read_graph(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IrError("cannot open graph file '" + path + "'");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::exception& e) {
    throw IrError("graph file '" + path + "' is not valid JSON: " + e.what());
  }
  std::vector<uint8_t> constants;
  if (j.is_object() && j.contains("constants_file") && j["constants_file"].is_string()) {
    std::string cf = j["constants_file"].get<std::string>();
    if (cf.find("..") != std::string::npos || (!cf.empty() && cf[0] == '/'))
      throw IrError("graph file '" + path + "': constants_file must be a plain name next to it");
    fs::path cpath = fs::path(path).parent_path() / cf;
    if (fs::exists(cpath)) {
      std::ifstream c(cpath, std::ios::binary);
      constants.assign(std::istreambuf_iterator<char>(c), std::istreambuf_iterator<char>());
    }
  }
  try {
    return graph_from_json(j, constants);
  } catch (const IrError& e) {
    throw IrError("graph file '" + path + "': " + e.what());
  }
}

std::string canonical_dump(const Graph& g) { return graph_to_json(g).dump(); }

std::string graph_hash(const Graph& g) {
  std::string s = canonical_dump(g);
  return sha256_hex(s.data(), s.size());
}

}  // namespace dinoml::ir
