// GGUF files (llama.cpp's model format): reader with memory-mapped tensor data, and writer.
//
// Format (little-endian), versions 2 and 3 (identical layouts; v3 only allowed big-endian files,
// which are rejected here, as ggml does):
//   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
//   n_kv × (string key, u32 value_type, value),
//   n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset),
//   zero padding to `general.alignment` (u32, default 32, a power of two),
//   data section: each tensor at data_start + offset (a multiple of the alignment).
// Strings are u64 length + bytes (no terminator); arrays are u32 element type + u64 count +
// elements (arrays of arrays are allowed by the format). Shapes are ggml's order: ne[0] is the
// contiguous (innermost) extent.
//
// Every count, size and offset read from a file is checked against the file before use: a
// malformed file gives GgufError naming the key/tensor and what is wrong, never a crash.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace dinoml::gguf {

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Integers are held widened (u64 / i64), floats as double; `type` keeps the
// exact GGUF type, so a value round-trips byte for byte.
struct Value {
  using Array = std::vector<Value>;
  ValueType type = ValueType::uint8;
  ValueType elem_type = ValueType::uint8;  // arrays only
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data = uint64_t{0};

  static Value u8(uint8_t v) { return make(ValueType::uint8, uint64_t{v}); }
  static Value i8(int8_t v) { return make(ValueType::int8, int64_t{v}); }
  static Value u16(uint16_t v) { return make(ValueType::uint16, uint64_t{v}); }
  static Value i16(int16_t v) { return make(ValueType::int16, int64_t{v}); }
  static Value u32(uint32_t v) { return make(ValueType::uint32, uint64_t{v}); }
  static Value i32(int32_t v) { return make(ValueType::int32, int64_t{v}); }
  static Value u64(uint64_t v) { return make(ValueType::uint64, v); }
  static Value i64(int64_t v) { return make(ValueType::int64, v); }
  static Value f32(float v) { return make(ValueType::float32, double{v}); }
  static Value f64(double v) { return make(ValueType::float64, v); }
  static Value boolean(bool v) { return make(ValueType::boolean, v); }
  static Value str(std::string v) { return make(ValueType::string, std::move(v)); }
  // All elements must have type `elem`.
  static Value array(ValueType elem, Array items);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::float32 || type == ValueType::float64; }
  // Typed access; throw GgufError naming the expected and actual type.
  uint64_t as_u64() const;  // any non-negative integer
  int64_t as_i64() const;   // any integer that fits
  double as_f64() const;    // any integer or float
  bool as_bool() const;
  const std::string& as_str() const;
  const Array& as_array() const;
  // Human-readable form (arrays abbreviated after `max_items`).
  std::string to_string(size_t max_items = 8) const;
  bool operator==(const Value& o) const { return type == o.type && elem_type == o.elem_type && data == o.data; }

 private:
  template <class T>
  static Value make(ValueType t, T v) {
    Value r;
    r.type = t;
    r.data = std::move(v);
    return r;
  }
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] innermost
  int type = 0;             // ggml_type number (dinoml/quant_blocks.h)
  uint64_t offset = 0;      // relative to the data section
  uint64_t nbytes = 0;      // derived from ne and the type's block size
  int64_t numel() const;
  // Logical row-major shape (ne reversed), as the IR writes shapes.
  std::vector<int64_t> shape() const;
};

// A parsed file. Tensor bytes point into a read-only memory map (or the buffer given to
// parse()) that lives as long as any copy of the File.
class File {
 public:
  static File open(const std::string& path);
  // Parses bytes already in memory (tests, fuzzing); `name` appears in error messages.
  static File parse(std::shared_ptr<const std::vector<uint8_t>> bytes, const std::string& name = "<memory>");

  uint32_t version = 3;
  uint32_t alignment = 32;
  uint64_t data_offset = 0;  // file offset of the data section
  std::vector<std::pair<std::string, Value>> metadata;  // file order
  std::vector<TensorInfo> tensors;                      // file order

  const Value* find(const std::string& key) const;
  const Value& at(const std::string& key) const;  // GgufError when missing
  const TensorInfo* find_tensor(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // GgufError when missing
  const uint8_t* data(const TensorInfo& t) const;
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return size_; }

 private:
  std::shared_ptr<const void> keep_;  // the mapping or buffer
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  std::map<std::string, size_t> key_index_, tensor_index_;
  void parse_from(const uint8_t* p, uint64_t n);
};

// Builds a GGUF file. Tensors are laid out in insertion order, each padded to the alignment,
// which is the layout ggml itself writes and requires.
class Writer {
 public:
  // Sets (or replaces) a metadata key; `general.alignment` also sets the alignment (u32, power of 2).
  void set(const std::string& key, Value v);
  // `bytes` must hold exactly the type's size for `ne` (ggml order).
  void add_tensor(const std::string& name, std::vector<int64_t> ne, int type, std::vector<uint8_t> bytes);
  std::vector<uint8_t> to_bytes(uint32_t version = 3) const;
  void write(const std::string& path, uint32_t version = 3) const;
  uint32_t alignment() const { return alignment_; }

 private:
  struct PendingTensor {
    TensorInfo info;
    std::vector<uint8_t> bytes;
  };
  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<PendingTensor> tensors_;
  uint32_t alignment_ = 32;
};

// Bytes of a tensor of `type` with extents `ne`; throws GgufError (naming `what`) when the type
// is unknown, ne[0] is not a multiple of the block size, or the size overflows.
uint64_t tensor_nbytes(int type, const std::vector<int64_t>& ne, const std::string& what);

// Dequantizes a tensor to float32 (row-major, numel() values); GgufError for types DinoML
// cannot dequantize.
std::vector<float> dequantize(const File& f, const TensorInfo& t);

// Text listing for `dinoml gguf-info` (metadata then tensors).
std::string describe(const File& f, size_t max_array_items = 8);

}  // namespace dinoml::gguf
