// Concrete host tensors used by the reference interpreter and constant folding.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace dinoml::ops {

struct HostTensor {
  ir::DType dtype = ir::DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // row-major, contiguous

  HostTensor() = default;
  HostTensor(ir::DType dt, std::vector<int64_t> shp);  // zero-filled
  static HostTensor from_bytes(ir::DType dt, std::vector<int64_t> shp, const uint8_t* bytes, size_t nbytes);

  int64_t numel() const;
  size_t nbytes() const { return data.size(); }
  int rank() const { return static_cast<int>(shape.size()); }
  // Element access converting through double / int64 (fp16/bf16 round to nearest even on store).
  double get_f64(int64_t i) const;
  void set_f64(int64_t i, double v);
  int64_t get_i64(int64_t i) const;
  void set_i64(int64_t i, int64_t v);
  // Sets from a double respecting the dtype: floats round, ints truncate toward zero, bool != 0.
  void set_as(int64_t i, double v) { is_float(dtype) ? set_f64(i, v) : set_i64(i, is_bool(dtype) ? (v != 0) : static_cast<int64_t>(v)); }
  // Reads as double for any dtype.
  double get_as(int64_t i) const { return is_float(dtype) ? get_f64(i) : static_cast<double>(get_i64(i)); }
  HostTensor cast(ir::DType to) const;
  std::string shape_string() const;
};

// Row-major strides in elements.
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// NumPy broadcasting of two shapes; throws OpError with `what` on mismatch.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& what);
// Index into a tensor of `src_shape` (right-aligned, size-1 axes broadcast) for the output
// multi-index `out_idx`.
int64_t broadcast_offset(const std::vector<int64_t>& out_idx, const std::vector<int64_t>& src_shape);

}  // namespace dinoml::ops
