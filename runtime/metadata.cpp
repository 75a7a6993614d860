#include "metadata.h"

#include <algorithm>

#include "dtype.h"
#include "errors.h"
#include "json_util.h"

#include <set>

namespace dinoml::runtime {
namespace {

const char* const kFile = "metadata.json";

dinoml_dtype parse_dtype(const JsonReader& r, const json& obj, const std::string& where) {
  std::string name = r.string_field(obj, "dtype", where);
  auto dtype = dtype_from_name(name);
  if (!dtype) r.bad(where + ".dtype", cat("unknown dtype '", name, "'"));
  return *dtype;
}

const json& parse_shape(const JsonReader& r, const json& obj, const std::string& where) {
  const json& shape = r.array(r.field(obj, "shape", where), where + ".shape");
  if (shape.size() > DINOML_MAX_RANK) {
    r.bad(where + ".shape", cat("rank ", shape.size(), " exceeds DINOML_MAX_RANK (", DINOML_MAX_RANK, ")"));
  }
  return shape;
}

template <class T>
std::string join_names(const std::vector<T>& items) {
  std::string s;
  for (const T& item : items) s += cat(s.empty() ? "" : ", ", "'", item.name, "'");
  return s.empty() ? "(none)" : s;
}

template <class T>
void check_unique(const JsonReader& r, const std::vector<T>& items, const char* section) {
  std::set<std::string> seen;
  for (const T& item : items) {
    if (item.name.empty()) r.bad(section, "empty name");
    if (!seen.insert(item.name).second) r.bad(section, cat("duplicate name '", item.name, "'"));
  }
}

// Each entry of the array `arr` (the metadata's `section`) becomes a T named by its "name" field and
// filled by fill(entry, "section[i]", item); names must be unique within the section.
template <class T, class F>
void parse_section(const JsonReader& r, const json& arr, const char* section, std::vector<T>& out, F&& fill) {
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string where = cat(section, "[", i, "]");
    T item;
    item.name = r.string_field(arr[i], "name", where);
    fill(arr[i], where, item);
    out.push_back(std::move(item));
  }
  check_unique(r, out, section);
}

void parse_dims(const JsonReader& r, const json& doc, Metadata& m) {
  parse_section(r, r.array(r.field(doc, "dims", "metadata"), "dims"), "dims", m.dims,
                [&](const json& e, const std::string& where, DimDesc& d) {
    d.min = r.int_field(e, "min", where);
    d.max = r.int_field(e, "max", where);
    if (const json* div = r.optional_field(e, "divisible_by", where)) d.divisible_by = r.integer(*div, where + ".divisible_by");
    if (const json* buckets = r.optional_field(e, "buckets", where)) {
      r.array(*buckets, where + ".buckets");
      for (size_t k = 0; k < buckets->size(); ++k) d.buckets.push_back(r.integer((*buckets)[k], cat(where, ".buckets[", k, "]")));
    }
    if (d.min < 1 || d.min > d.max) r.bad(where, cat("dim '", d.name, "' needs 1 <= min <= max, got [", d.min, ", ", d.max, "]"));
    if (d.divisible_by < 1) r.bad(where, cat("dim '", d.name, "' has divisible_by ", d.divisible_by));
  });
}

void parse_inputs(const JsonReader& r, const json& doc, Metadata& m) {
  parse_section(r, r.array(r.field(doc, "inputs", "metadata"), "inputs"), "inputs", m.inputs,
                [&](const json& e, const std::string& where, InputDesc& in) {
    in.dtype = parse_dtype(r, e, where);
    const json& shape = parse_shape(r, e, where);
    for (size_t a = 0; a < shape.size(); ++a) {
      const std::string axis_where = cat(where, ".shape[", a, "]");
      InputAxis axis;
      if (shape[a].is_string()) {
        std::string dim = shape[a].get<std::string>();
        axis.dim = m.dim_index(dim);
        if (axis.dim < 0) r.bad(axis_where, cat("dim '", dim, "' of input '", in.name, "' is not declared in \"dims\""));
      } else if (shape[a].is_number_integer()) {
        axis.size = r.integer(shape[a], axis_where);
        if (axis.size < 0) r.bad(axis_where, "negative size");
      } else {
        // The runtime derives dim values from input shapes, which needs plain names.
        r.bad(axis_where, "input shapes may contain only integers and dim names");
      }
      in.axes.push_back(axis);
    }
  });
}

void parse_outputs(const JsonReader& r, const json& doc, Metadata& m) {
  auto dim_index = [&](const std::string& name) { return m.dim_index(name); };
  parse_section(r, r.array(r.field(doc, "outputs", "metadata"), "outputs"), "outputs", m.outputs,
                [&](const json& e, const std::string& where, OutputDesc& out) {
    out.dtype = parse_dtype(r, e, where);
    const json& shape = parse_shape(r, e, where);
    for (size_t a = 0; a < shape.size(); ++a) out.axes.push_back(ShapeExpr::parse(shape[a], dim_index, r, cat(where, ".shape[", a, "]")));
  });
}

void parse_states(const JsonReader& r, const json& doc, Metadata& m) {
  const json* states = r.optional_field(doc, "states", "metadata");
  if (!states) return;
  parse_section(r, r.array(*states, "states"), "states", m.states, [&](const json& st, const std::string& where, StateDesc& s) {
    s.dtype = parse_dtype(r, st, where);
    const json& shape = parse_shape(r, st, where);
    for (size_t a = 0; a < shape.size(); ++a) {
      if (!shape[a].is_number_integer()) r.bad(cat(where, ".shape[", a, "]"), "state shapes must be static integers");
      s.shape.push_back(r.integer(shape[a], cat(where, ".shape[", a, "]")));
    }
    auto bytes = tensor_bytes(s.dtype, s.shape);
    if (!bytes) r.bad(where + ".shape", "invalid or overflowing shape");
    if (const json* nbytes = r.optional_field(st, "nbytes", where)) {
      int64_t declared = r.integer(*nbytes, where + ".nbytes");
      if (declared < 0 || static_cast<size_t>(declared) != *bytes) {
        r.bad(where + ".nbytes", cat("declares ", declared, " bytes but shape ", shape_string(s.shape), " of ", dtype_name(s.dtype), " needs ", *bytes));
      }
    }
    s.nbytes = *bytes;
  });
}

}  // namespace

int Metadata::dim_index(const std::string& name) const {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Metadata::input_names() const { return join_names(inputs); }
std::string Metadata::output_names() const { return join_names(outputs); }
std::string Metadata::state_names() const { return join_names(states); }

std::string Metadata::input_shape_string(const InputDesc& input) const {
  std::string s = "[";
  for (size_t a = 0; a < input.axes.size(); ++a) {
    if (a) s += ", ";
    s += input.axes[a].dim >= 0 ? dims[input.axes[a].dim].name : std::to_string(input.axes[a].size);
  }
  return s + "]";
}

Metadata read_metadata(const std::filesystem::path& file) { return parse_metadata(read_json_file(file, kFile)); }

Metadata parse_metadata(const json& doc) {
  JsonReader r(kFile);
  r.object(doc, "metadata");
  Metadata m;
  parse_dims(r, doc, m);
  parse_inputs(r, doc, m);
  parse_outputs(r, doc, m);
  parse_states(r, doc, m);
  if (const json* w = r.optional_field(doc, "weights", "metadata")) {
    r.object(*w, "weights");
    m.weights.present = true;
    m.weights.policy = r.string_field(*w, "policy", "weights");
    if (m.weights.policy != "embedded" && m.weights.policy != "swappable" && m.weights.policy != "external")
      r.bad("weights.policy", cat("'", m.weights.policy, "' is not embedded, swappable or external"));
    for (const char* key : {"swappable", "folded"}) {
      auto& list = std::string(key) == "swappable" ? m.weights.swappable : m.weights.folded;
      if (const json* a = r.optional_field(*w, key, "weights")) {
        r.array(*a, cat("weights.", key));
        for (size_t i = 0; i < a->size(); ++i) list.push_back(r.string((*a)[i], cat("weights.", key, "[", i, "]")));
        std::sort(list.begin(), list.end());
      }
    }
  }

  // Dim values come only from input shapes; a dim no input carries could never be bound.
  std::vector<bool> bound(m.dims.size(), false);
  for (const InputDesc& in : m.inputs) {
    for (const InputAxis& axis : in.axes) {
      if (axis.dim >= 0) bound[axis.dim] = true;
    }
  }
  for (size_t i = 0; i < m.dims.size(); ++i) {
    if (!bound[i]) {
      r.bad("dims", cat("dim '", m.dims[i].name, "' appears in no input shape, so the runtime cannot derive its value"));
    }
  }
  return m;
}

}  // namespace dinoml::runtime
