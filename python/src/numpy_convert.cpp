// numpy <-> DinoML tensors: dtype mapping and the single documented conversion (bfloat16 tensors
// take float32 arrays, rounded to nearest even, or uint16 bit arrays; bfloat16 results come back
// as float32 because numpy has no bfloat16). Every other dtype passes through unchanged so the
// runtime / interpreter can reject a mismatch with its own message.
#include <cstring>

#include "../../kernels/common/dinoml/half.h"
#include "bindings.h"

namespace dinoml::py_ext {

std::optional<ir::DType> dtype_of_numpy(const py::dtype& dt) {
  using ir::DType;
  if (dt.kind() == 'b' && dt.itemsize() == 1) return DType::boolean;
  if (dt.kind() == 'f') {
    if (dt.itemsize() == 4) return DType::f32;
    if (dt.itemsize() == 2) return DType::f16;
    return std::nullopt;
  }
  if (dt.kind() == 'i') {
    switch (dt.itemsize()) {
      case 1: return DType::i8;
      case 4: return DType::i32;
      case 8: return DType::i64;
      default: return std::nullopt;
    }
  }
  if (dt.kind() == 'u' && dt.itemsize() == 1) return DType::u8;
  return std::nullopt;
}

py::dtype numpy_dtype_of(ir::DType t) {
  using ir::DType;
  switch (t) {
    case DType::f32: return py::dtype("float32");
    case DType::f16: return py::dtype("float16");
    case DType::bf16: return py::dtype("float32");
    case DType::i8: return py::dtype("int8");
    case DType::u8: return py::dtype("uint8");
    case DType::i32: return py::dtype("int32");
    case DType::i64: return py::dtype("int64");
    case DType::boolean: return py::dtype("bool");
  }
  return py::dtype("float32");
}

Prepared prepare_array(const py::handle& obj, ir::DType want, const std::string& what) {
  // Non-contiguous (or non-array) inputs are copied into a C-contiguous array of the same dtype;
  // ensure() never changes the dtype, so mismatches stay visible.
  py::array arr = py::array::ensure(obj, py::array::c_style);
  if (!arr) {
    PyErr_Clear();
    throw py::value_error(what + ": expected a numpy array, got " +
                          std::string(py::str(py::type::of(obj).attr("__name__"))));
  }
  Prepared p;
  p.shape.assign(arr.shape(), arr.shape() + arr.ndim());
  py::dtype dt = arr.dtype();
  if (want == ir::DType::bf16 && dt.kind() == 'f' && dt.itemsize() == 4) {
    size_t n = static_cast<size_t>(arr.size());
    p.owned.resize(n * 2);
    const float* src = static_cast<const float*>(arr.data());
    auto* dst = reinterpret_cast<uint16_t*>(p.owned.data());
    for (size_t i = 0; i < n; ++i) dst[i] = dml_float_to_bf16(src[i]);
    p.dtype = ir::DType::bf16;
    p.data = p.owned.data();
    p.nbytes = p.owned.size();
    return p;
  }
  if (want == ir::DType::bf16 && dt.kind() == 'u' && dt.itemsize() == 2) {
    p.dtype = ir::DType::bf16;  // raw bf16 bit patterns
  } else {
    auto d = dtype_of_numpy(dt);
    if (!d)
      throw py::value_error(what + ": numpy dtype " + std::string(py::str(dt)) + " has no DinoML equivalent (expected " +
                            std::string(ir::dtype_name(want)) + ")");
    p.dtype = *d;
  }
  p.keep = arr;
  p.data = arr.data();
  p.nbytes = static_cast<size_t>(arr.nbytes());
  return p;
}

static std::vector<py::ssize_t> py_shape(const std::vector<int64_t>& shape) {
  return std::vector<py::ssize_t>(shape.begin(), shape.end());
}

py::array to_numpy(ir::DType t, const std::vector<int64_t>& shape, const void* src, size_t nbytes) {
  py::array out(numpy_dtype_of(t), py_shape(shape));
  if (t == ir::DType::bf16) {
    auto* in = static_cast<const uint16_t*>(src);
    auto* dst = static_cast<float*>(out.mutable_data());
    size_t n = nbytes / 2;
    for (size_t i = 0; i < n; ++i) dst[i] = dml_bf16_to_float(in[i]);
  } else if (nbytes) {
    std::memcpy(out.mutable_data(), src, std::min(nbytes, static_cast<size_t>(out.nbytes())));
  }
  return out;
}

py::array to_numpy_owned(ir::DType t, const std::vector<int64_t>& shape, std::vector<uint8_t>&& bytes) {
  if (t == ir::DType::bf16) return to_numpy(t, shape, bytes.data(), bytes.size());
  auto* holder = new std::vector<uint8_t>(std::move(bytes));
  py::capsule free_when_done(holder, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
  return py::array(numpy_dtype_of(t), py_shape(shape), holder->data(), free_when_done);
}

}  // namespace dinoml::py_ext
