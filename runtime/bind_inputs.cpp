#include "bind_inputs.h"

#include "dtype.h"
#include "errors.h"

#include <span>

namespace dinoml::runtime {
namespace {

constexpr dinoml_status kInvalid = DINOML_ERR_INVALID_ARGUMENT;

// Orders the caller's tensors like metadata "inputs": by name when every name is set, by
// position when none is (a mix is ambiguous, so it is rejected).
std::vector<const dinoml_tensor*> match_inputs(const Metadata& md, const dinoml_tensor* inputs, size_t n) {
  if (n > 0 && !inputs) fail(kInvalid, "inputs is NULL but num_inputs is ", n);
  std::vector<const dinoml_tensor*> order(md.inputs.size(), nullptr);
  size_t named = 0;
  for (size_t i = 0; i < n; ++i) named += inputs[i].name != nullptr;
  if (named != 0 && named != n) {
    fail(kInvalid, "inputs mix named and positional tensors (", named, " of ", n,
         " have a name); set the name of every input or of none");
  }
  if (named == 0) {
    if (n != md.inputs.size()) {
      fail(kInvalid, "the model takes ", md.inputs.size(), " inputs (", md.input_names(), ") but ", n,
           " were passed by position");
    }
    for (size_t i = 0; i < n; ++i) order[i] = &inputs[i];
    return order;
  }
  for (size_t i = 0; i < n; ++i) {
    const char* name = inputs[i].name;
    size_t k = 0;
    while (k < md.inputs.size() && md.inputs[k].name != name) ++k;
    if (k == md.inputs.size()) {
      fail(kInvalid, "'", name, "' is not an input of the model; its inputs are ", md.input_names());
    }
    if (order[k]) fail(kInvalid, "input '", name, "' is passed more than once");
    order[k] = &inputs[i];
  }
  std::string missing;
  for (size_t k = 0; k < order.size(); ++k) {
    if (!order[k]) missing += cat(missing.empty() ? "" : ", ", "'", md.inputs[k].name, "'");
  }
  if (!missing.empty()) fail(kInvalid, "missing input(s) ", missing, "; the model's inputs are ", md.input_names());
  return order;
}

struct DimBinding {
  int64_t value = -1;
  const InputDesc* input = nullptr;
  size_t axis = 0;
};

}  // namespace

BoundInputs bind_inputs(const Metadata& md, const dinoml_tensor* inputs, size_t num_inputs) {
  std::vector<const dinoml_tensor*> order = match_inputs(md, inputs, num_inputs);
  std::vector<DimBinding> bindings(md.dims.size());
  BoundInputs bound;
  bound.data.resize(md.inputs.size());

  for (size_t k = 0; k < md.inputs.size(); ++k) {
    const InputDesc& in = md.inputs[k];
    const dinoml_tensor& t = *order[k];
    const std::string expected_shape = md.input_shape_string(in);
    const int dtype = raw_dtype(t.dtype);
    if (dtype != in.dtype) {
      fail(kInvalid, "input '", in.name, "' has dtype ",
           dtype_valid(dtype) ? dtype_name(static_cast<dinoml_dtype>(dtype)) : cat("unknown (", dtype, ")"),
           " but the model expects ", dtype_name(in.dtype));
    }
    if (t.ndim < 0 || t.ndim > DINOML_MAX_RANK || static_cast<size_t>(t.ndim) != in.axes.size()) {
      fail(kInvalid, "input '", in.name, "' has rank ", t.ndim, " but the model expects rank ", in.axes.size(),
           " (shape ", expected_shape, ")");
    }
    std::span<const int64_t> shape(t.shape, static_cast<size_t>(t.ndim));
    for (size_t a = 0; a < in.axes.size(); ++a) {
      const InputAxis& axis = in.axes[a];
      const int64_t size = shape[a];
      if (axis.dim < 0) {
        if (size != axis.size) {
          fail(kInvalid, "input '", in.name, "' axis ", a, " has size ", size, " but the model expects ", axis.size,
               " (shape ", expected_shape, ", got ", shape_string(shape), ")");
        }
        continue;
      }
      const DimDesc& dim = md.dims[axis.dim];
      DimBinding& b = bindings[axis.dim];
      if (b.input && size != b.value) {
        fail(kInvalid, "input '", in.name, "' axis ", a, " has size ", size, " but input '", b.input->name, "' axis ",
             b.axis, " gives dim '", dim.name, "' = ", b.value, "; every axis that uses dim '", dim.name,
             "' must have the same size");
      }
      if (size < dim.min || size > dim.max) {
        fail(kInvalid, "input '", in.name, "' axis ", a, " (dim '", dim.name, "') has size ", size,
             ", outside the compiled range [", dim.min, ", ", dim.max, "] of dim '", dim.name,
             "'; pass a size in range or recompile with wider bounds for '", dim.name, "'");
      }
      if (size % dim.divisible_by != 0) {
        fail(kInvalid, "input '", in.name, "' axis ", a, " (dim '", dim.name, "') has size ", size,
             ", which is not a multiple of ", dim.divisible_by, " as dim '", dim.name, "' requires (range [",
             dim.min, ", ", dim.max, "])");
      }
      b = {size, &in, a};
    }
    auto needed = tensor_bytes(in.dtype, shape);
    if (!needed) fail(kInvalid, "input '", in.name, "' has an invalid shape ", shape_string(shape));
    if (t.nbytes < *needed) {
      fail(kInvalid, "input '", in.name, "' provides ", t.nbytes, " bytes but shape ", shape_string(shape), " of ",
           dtype_name(in.dtype), " needs ", *needed);
    }
    if (!t.data && *needed != 0) fail(kInvalid, "input '", in.name, "' has NULL data");
    bound.data[k] = t.data;
  }

  bound.dims.resize(md.dims.size());
  for (size_t d = 0; d < md.dims.size(); ++d) bound.dims[d] = bindings[d].value;
  return bound;
}

}  // namespace dinoml::runtime
