#include "ops/host_tensor.h"

#include <cmath>
#include <cstring>

#include <dinoml/half.h>

#include "ir/error.h"

namespace dinoml::ops {
using ir::DType;

HostTensor::HostTensor(DType dt, std::vector<int64_t> shp) : dtype(dt), shape(std::move(shp)) {
  data.assign(static_cast<size_t>(numel()) * ir::dtype_size(dt), 0);
}

HostTensor HostTensor::from_bytes(DType dt, std::vector<int64_t> shp, const uint8_t* bytes, size_t nbytes) {
  HostTensor t(dt, std::move(shp));
  if (nbytes != t.data.size())
    throw IrError("tensor data has " + std::to_string(nbytes) + " bytes, shape " + t.shape_string() + " of " +
                  std::string(ir::dtype_name(dt)) + " needs " + std::to_string(t.data.size()));
  if (nbytes) std::memcpy(t.data.data(), bytes, nbytes);
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

template <typename T>
static T load(const std::vector<uint8_t>& d, int64_t i) {
  T v;
  std::memcpy(&v, d.data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
static void store(std::vector<uint8_t>& d, int64_t i, T v) {
  std::memcpy(d.data() + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

double HostTensor::get_f64(int64_t i) const {
  switch (dtype) {
    case DType::f32: return load<float>(data, i);
    case DType::f16: return dml_half_to_float(load<uint16_t>(data, i));
    case DType::bf16: return dml_bf16_to_float(load<uint16_t>(data, i));
    default: return static_cast<double>(get_i64(i));
  }
}

void HostTensor::set_f64(int64_t i, double v) {
  switch (dtype) {
    case DType::f32: store<float>(data, i, static_cast<float>(v)); break;
    case DType::f16: store<uint16_t>(data, i, dml_float_to_half(static_cast<float>(v))); break;
    case DType::bf16: store<uint16_t>(data, i, dml_float_to_bf16(static_cast<float>(v))); break;
    case DType::boolean: store<uint8_t>(data, i, v != 0.0); break;
    default: set_i64(i, static_cast<int64_t>(v)); break;
  }
}

int64_t HostTensor::get_i64(int64_t i) const {
  switch (dtype) {
    case DType::i8: return load<int8_t>(data, i);
    case DType::u8: return load<uint8_t>(data, i);
    case DType::i32: return load<int32_t>(data, i);
    case DType::i64: return load<int64_t>(data, i);
    case DType::boolean: return load<uint8_t>(data, i) != 0;
    default: return static_cast<int64_t>(get_f64(i));
  }
}

void HostTensor::set_i64(int64_t i, int64_t v) {
  switch (dtype) {
    case DType::i8: store<int8_t>(data, i, static_cast<int8_t>(v)); break;
    case DType::u8: store<uint8_t>(data, i, static_cast<uint8_t>(v)); break;
    case DType::i32: store<int32_t>(data, i, static_cast<int32_t>(v)); break;
    case DType::i64: store<int64_t>(data, i, v); break;
    case DType::boolean: store<uint8_t>(data, i, v != 0); break;
    default: set_f64(i, static_cast<double>(v)); break;
  }
}

HostTensor HostTensor::cast(DType to) const {
  HostTensor out(to, shape);
  int64_t n = numel();
  for (int64_t i = 0; i < n; ++i) {
    if (is_float(to)) out.set_f64(i, get_as(i));
    else if (ir::is_bool(to)) out.set_i64(i, get_as(i) != 0.0);
    else if (is_float(dtype)) {
      double v = get_f64(i);
      out.set_i64(i, std::isfinite(v) ? static_cast<int64_t>(std::trunc(v)) : 0);
    } else out.set_i64(i, get_i64(i));
  }
  return out;
}

std::string HostTensor::shape_string() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const std::string& what) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      throw OpError(what + ": shapes cannot be broadcast (axis " + std::to_string(i) + ": " + std::to_string(x) +
                    " vs " + std::to_string(y) + ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

int64_t broadcast_offset(const std::vector<int64_t>& out_idx, const std::vector<int64_t>& src_shape) {
  size_t r = out_idx.size(), sr = src_shape.size();
  int64_t off = 0, stride = 1;
  for (size_t k = 0; k < sr; ++k) {
    size_t si = sr - 1 - k;
    size_t oi = r - 1 - k;
    int64_t idx = src_shape[si] == 1 ? 0 : out_idx[oi];
    off += idx * stride;
    stride *= src_shape[si];
  }
  return off;
}

}  // namespace dinoml::ops
