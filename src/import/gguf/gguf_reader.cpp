// GGUF reader: a bounds-checked cursor over the (memory-mapped) file; see gguf.h for the format.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dinoml/quant_blocks.h"
#include "import/gguf/gguf.h"

namespace dinoml::gguf {
namespace {

// Arrays nested deeper than this are rejected (the format allows nesting; no real file nests).
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t n, const std::string& file) : p_(p), n_(n), file_(file) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return n_ - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > left())
      throw GgufError(fmt::format("{}: truncated GGUF file: {} needs {} bytes at offset {}, only {} left", file_, what,
                                  bytes, pos_, left()));
  }
  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t len = get<uint64_t>(what + " (string length)");
    need(len, what + fmt::format(" (string of {} bytes)", len));
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  const std::string& file() const { return file_; }

 private:
  const uint8_t* p_;
  uint64_t n_;
  uint64_t pos_ = 0;
  const std::string& file_;
};

uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::uint8: case ValueType::int8: case ValueType::boolean: return 1;
    case ValueType::uint16: case ValueType::int16: return 2;
    case ValueType::uint32: case ValueType::int32: case ValueType::float32: return 4;
    case ValueType::uint64: case ValueType::int64: case ValueType::float64: return 8;
    case ValueType::string: return 8;
    case ValueType::array: return 12;
  }
  return 1;
}

bool known_value_type(uint32_t t) { return t <= 12; }

Value read_value(Cursor& c, ValueType t, const std::string& what, int depth) {
  switch (t) {
    case ValueType::uint8: return Value::u8(c.get<uint8_t>(what));
    case ValueType::int8: return Value::i8(c.get<int8_t>(what));
    case ValueType::uint16: return Value::u16(c.get<uint16_t>(what));
    case ValueType::int16: return Value::i16(c.get<int16_t>(what));
    case ValueType::uint32: return Value::u32(c.get<uint32_t>(what));
    case ValueType::int32: return Value::i32(c.get<int32_t>(what));
    case ValueType::float32: return Value::f32(c.get<float>(what));
    case ValueType::uint64: return Value::u64(c.get<uint64_t>(what));
    case ValueType::int64: return Value::i64(c.get<int64_t>(what));
    case ValueType::float64: return Value::f64(c.get<double>(what));
    case ValueType::boolean: {
      const uint8_t b = c.get<uint8_t>(what);
      if (b > 1) throw GgufError(fmt::format("{}: {} is a bool with byte value {} (must be 0 or 1)", c.file(), what, b));
      return Value::boolean(b != 0);
    }
    case ValueType::string: return Value::str(c.str(what));
    case ValueType::array: {
      if (depth >= kMaxArrayDepth)
        throw GgufError(fmt::format("{}: {} nests arrays deeper than {}", c.file(), what, kMaxArrayDepth));
      const uint32_t et = c.get<uint32_t>(what + " (array element type)");
      if (!known_value_type(et))
        throw GgufError(fmt::format("{}: {} is an array of unknown value type {}", c.file(), what, et));
      const uint64_t n = c.get<uint64_t>(what + " (array length)");
      const auto elem = static_cast<ValueType>(et);
      if (n > c.left() / min_value_bytes(elem))
        throw GgufError(fmt::format("{}: truncated GGUF file: {} claims {} elements of type {} but only {} bytes are left",
                                    c.file(), what, n, value_type_name(elem), c.left()));
      Value::Array items;
      items.reserve(n);
      for (uint64_t i = 0; i < n; ++i) items.push_back(read_value(c, elem, what, depth + 1));
      Value v;
      v.type = ValueType::array;
      v.elem_type = elem;
      v.data = std::move(items);
      return v;
    }
  }
  throw GgufError(fmt::format("{}: {} has unknown value type {}", c.file(), what, static_cast<uint32_t>(t)));
}

struct Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr) munmap(addr, len);
  }
};

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> TensorInfo::shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

uint64_t tensor_nbytes(int type, const std::vector<int64_t>& ne, const std::string& what) {
  const dml_qtype_traits* tr = dml_qtype_get(type);
  if (!tr) throw GgufError(fmt::format("{} has unknown ggml type {}", what, type));
  if (ne.size() > kMaxDims) throw GgufError(fmt::format("{} has {} dimensions (at most {})", what, ne.size(), kMaxDims));
  uint64_t numel = 1;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 0) throw GgufError(fmt::format("{} has negative extent ne[{}] = {}", what, i, ne[i]));
    if (ne[i] != 0 && numel > (uint64_t)INT64_MAX / (uint64_t)ne[i])
      throw GgufError(fmt::format("{}: element count overflows (ne = [{}])", what, fmt::join(ne, ", ")));
    numel *= (uint64_t)ne[i];
  }
  const int64_t ne0 = ne.empty() ? 1 : ne[0];
  if (ne0 % tr->block_size != 0)
    throw GgufError(fmt::format("{}: ne[0] = {} is not a multiple of the {} block size {}", what, ne0, tr->name,
                                tr->block_size));
  const uint64_t blocks = numel / (uint64_t)tr->block_size;
  if (blocks > UINT64_MAX / 2 / (uint64_t)tr->type_size)
    throw GgufError(fmt::format("{}: byte size overflows", what));
  return blocks * (uint64_t)tr->type_size;
}

File File::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw GgufError(fmt::format("cannot open GGUF file {}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError(fmt::format("{} is not a regular file", path));
  }
  auto m = std::make_shared<Mapping>();
  m->len = (size_t)st.st_size;
  if (m->len > 0) {
    m->addr = mmap(nullptr, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->addr == MAP_FAILED) {
      m->addr = nullptr;
      ::close(fd);
      throw GgufError(fmt::format("cannot map {}: {}", path, std::strerror(errno)));
    }
  }
  ::close(fd);
  File f;
  f.path_ = path;
  f.keep_ = m;
  f.base_ = static_cast<const uint8_t*>(m->addr);
  f.size_ = m->len;
  f.parse_from(f.base_, f.size_);
  return f;
}

File File::parse(std::shared_ptr<const std::vector<uint8_t>> bytes, const std::string& name) {
  File f;
  f.path_ = name;
  f.base_ = bytes->data();
  f.size_ = bytes->size();
  f.keep_ = std::move(bytes);
  f.parse_from(f.base_, f.size_);
  return f;
}

void File::parse_from(const uint8_t* p, uint64_t n) {
  Cursor c(p, n, path_);
  if (n < 4 || std::memcmp(p, "GGUF", 4) != 0) {
    if (n >= 4 && std::memcmp(p, "FUGG", 4) == 0)
      throw GgufError(fmt::format("{}: big-endian GGUF files are not supported", path_));
    throw GgufError(fmt::format("{}: not a GGUF file (bad magic)", path_));
  }
  c.get<uint32_t>("magic");
  version = c.get<uint32_t>("version");
  if (version == 1) throw GgufError(fmt::format("{}: GGUF version 1 is not supported (versions 2 and 3 are)", path_));
  if ((version & 0xffff) == 0 && version != 0)
    throw GgufError(fmt::format("{}: GGUF version field {:#x} looks byte-swapped (big-endian file); not supported", path_,
                                version));
  if (version < 2 || version > 3)
    throw GgufError(fmt::format("{}: unsupported GGUF version {} (versions 2 and 3 are)", path_, version));
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // Each key/value needs >= 13 bytes and each tensor info >= 24: reject impossible counts before
  // reserving anything.
  if (n_kv > c.left() / 13)
    throw GgufError(fmt::format("{}: metadata count {} cannot fit in the {} bytes of the file", path_, n_kv, n));
  if (n_tensors > c.left() / 24)
    throw GgufError(fmt::format("{}: tensor count {} cannot fit in the {} bytes of the file", path_, n_tensors, n));

  metadata.clear();
  tensors.clear();
  key_index_.clear();
  tensor_index_.clear();
  alignment = 32;
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.str(fmt::format("metadata key #{}", i));
    const std::string what = fmt::format("metadata '{}'", key);
    const uint32_t t = c.get<uint32_t>(what + " (value type)");
    if (!known_value_type(t)) throw GgufError(fmt::format("{}: {} has unknown value type {}", path_, what, t));
    Value v = read_value(c, static_cast<ValueType>(t), what, 0);
    if (key_index_.count(key)) throw GgufError(fmt::format("{}: duplicate metadata key '{}'", path_, key));
    if (key == "general.alignment") {
      if (v.type != ValueType::uint32)
        throw GgufError(fmt::format("{}: general.alignment must be a uint32, found {}", path_, value_type_name(v.type)));
      const uint64_t a = v.as_u64();
      if (a == 0 || (a & (a - 1)) != 0)
        throw GgufError(fmt::format("{}: general.alignment = {} is not a power of two", path_, a));
      alignment = (uint32_t)a;
    }
    key_index_[key] = metadata.size();
    metadata.emplace_back(std::move(key), std::move(v));
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo ti;
    ti.name = c.str(fmt::format("tensor info #{} name", i));
    const std::string what = fmt::format("{}: tensor '{}'", path_, ti.name);
    const uint32_t nd = c.get<uint32_t>(what + " (dimension count)");
    if (nd > kMaxDims) throw GgufError(fmt::format("{} has {} dimensions (at most {})", what, nd, kMaxDims));
    for (uint32_t d = 0; d < nd; ++d) ti.ne.push_back(c.get<int64_t>(fmt::format("{} ne[{}]", what, d)));
    const uint32_t t = c.get<uint32_t>(what + " (type)");
    ti.type = (int)t;
    ti.offset = c.get<uint64_t>(what + " (offset)");
    if (t >= (uint32_t)DML_QT_COUNT || !dml_qtype_get(t))
      throw GgufError(fmt::format("{} has unknown ggml type {}", what, t));
    ti.nbytes = tensor_nbytes(ti.type, ti.ne, what);
    if (tensor_index_.count(ti.name)) throw GgufError(fmt::format("{}: duplicate tensor name '{}'", path_, ti.name));
    tensor_index_[ti.name] = tensors.size();
    tensors.push_back(std::move(ti));
  }
  const uint64_t pos = c.pos();
  data_offset = (pos + alignment - 1) / alignment * alignment;
  if (!tensors.empty() && data_offset > n)
    throw GgufError(fmt::format("{}: truncated GGUF file: the data section would start at {} but the file has {} bytes",
                                path_, data_offset, n));
  for (const auto& t : tensors) {
    if (t.offset % alignment != 0)
      throw GgufError(fmt::format("{}: tensor '{}' is misaligned: offset {} is not a multiple of the alignment {}", path_,
                                  t.name, t.offset, alignment));
    if (t.offset > n - data_offset || t.nbytes > n - data_offset - t.offset)
      throw GgufError(fmt::format("{}: truncated GGUF file: tensor '{}' ({}, {} bytes at data offset {}) extends past "
                                  "the end of the file ({} bytes, data section at {})",
                                  path_, t.name, dml_qtype_get(t.type)->name, t.nbytes, t.offset, n, data_offset));
  }
}

const Value* File::find(const std::string& key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata[it->second].second;
}

const Value& File::at(const std::string& key) const {
  const Value* v = find(key);
  if (!v) throw GgufError(fmt::format("{}: metadata key '{}' not found", path_, key));
  return *v;
}

const TensorInfo* File::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

const TensorInfo& File::tensor(const std::string& name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw GgufError(fmt::format("{}: tensor '{}' not found ({} tensors in the file)", path_, name, tensors.size()));
  return *t;
}

const uint8_t* File::data(const TensorInfo& t) const { return base_ + data_offset + t.offset; }

}  // namespace dinoml::gguf
