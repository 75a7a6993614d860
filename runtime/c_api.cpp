// The exported C ABI. Every entry point that can fail runs inside guard(), which turns any
// exception into a status + dinoml_last_error(); handles wrap the C++ objects.
#include <dinoml/runtime.h>

#include <algorithm>

#include "dtype.h"
#include "errors.h"
#include "module.h"
#include "session.h"
#include "thread_budget.h"

using dinoml::runtime::fail;
using dinoml::runtime::guard;
using dinoml::runtime::Module;
using dinoml::runtime::Session;

// Sessions hold a reference to the module's implementation, so freeing the module handle while
// sessions are alive is safe: the code is unloaded when the last session goes.
struct dinoml_module {
  std::shared_ptr<const Module> impl;
};

struct dinoml_session {
  Session impl;
};

namespace {

dinoml_status tensor_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info,
                          const std::vector<dinoml_tensor_info>& (Module::*list)() const, const char* what) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!info) fail(DINOML_ERR_INVALID_ARGUMENT, "info is NULL");
    const auto& infos = ((*module->impl).*list)();
    if (index >= infos.size()) {
      fail(DINOML_ERR_INVALID_ARGUMENT, what, " index ", index, " is out of range: model '", module->impl->name(),
           "' has ", infos.size(), " ", what, "s");
    }
    *info = infos[index];
  });
}

}  // namespace

extern "C" {

uint32_t dinoml_runtime_abi_version(void) { return DINOML_RUNTIME_ABI_VERSION; }

const char* dinoml_last_error(void) { return dinoml::runtime::last_error(); }

void dinoml_set_thread_budget(int n) { dinoml::runtime::set_thread_budget(n); }
int dinoml_thread_budget(void) { return dinoml::runtime::thread_budget(); }

const char* dinoml_status_name(dinoml_status status) {
  switch (status) {
    case DINOML_OK: return "OK";
    case DINOML_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case DINOML_ERR_NOT_FOUND: return "NOT_FOUND";
    case DINOML_ERR_ARTIFACT: return "ARTIFACT";
    case DINOML_ERR_ABI_MISMATCH: return "ABI_MISMATCH";
    case DINOML_ERR_ISA_MISMATCH: return "ISA_MISMATCH";
    case DINOML_ERR_RUNTIME: return "RUNTIME";
    case DINOML_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case DINOML_ERR_BUFFER_TOO_SMALL: return "BUFFER_TOO_SMALL";
    case DINOML_ERR_DEVICE: return "DEVICE";
  }
  return "UNKNOWN_STATUS";
}

const char* dinoml_dtype_name(dinoml_dtype dtype) { return dinoml::runtime::dtype_name(dtype); }

size_t dinoml_dtype_size(dinoml_dtype dtype) { return dinoml::runtime::dtype_size(dtype); }

dinoml_status dinoml_module_load_with_weights(const char* artifact_dir, const char* weights_path, dinoml_module** out) {
  if (out) *out = nullptr;
  return guard([&] {
    if (!artifact_dir) fail(DINOML_ERR_INVALID_ARGUMENT, "artifact_dir is NULL");
    if (!weights_path) fail(DINOML_ERR_INVALID_ARGUMENT, "weights_path is NULL");
    if (!out) fail(DINOML_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = new dinoml_module{Module::load(artifact_dir, weights_path)};
  });
}

dinoml_status dinoml_module_load_rank(const char* artifact_dir, int rank, dinoml_module** out) {
  if (out) *out = nullptr;
  return guard([&] {
    if (!artifact_dir) fail(DINOML_ERR_INVALID_ARGUMENT, "artifact_dir is NULL");
    if (!out) fail(DINOML_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = new dinoml_module{Module::load(artifact_dir, "", rank)};
  });
}

int dinoml_module_world_size(const dinoml_module* module) { return module ? module->impl->world_size() : 0; }

const char* dinoml_module_weights_policy(const dinoml_module* module) {
  return module ? module->impl->weights_policy().c_str() : "";
}

size_t dinoml_module_num_constants(const dinoml_module* module) { return module ? module->impl->constants().size() : 0; }

dinoml_status dinoml_module_constant_info(const dinoml_module* module, size_t index, dinoml_constant_info* info) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!info) fail(DINOML_ERR_INVALID_ARGUMENT, "info is NULL");
    const auto& slots = module->impl->constants();
    if (index >= slots.size())
      fail(DINOML_ERR_INVALID_ARGUMENT, "constant index ", index, " is out of range: model '", module->impl->name(),
           "' has ", slots.size(), " constants");
    const auto& s = slots[index];
    *info = dinoml_constant_info{};
    info->name = s.name.c_str();
    info->dtype = s.value_dtype();
    const auto shape = s.value_shape();
    info->ndim = static_cast<int32_t>(std::min<size_t>(shape.size(), DINOML_MAX_RANK));
    for (int32_t a = 0; a < info->ndim; ++a) info->shape[a] = shape[a];
    info->nbytes = s.nbytes;
    info->swappable = s.swappable ? 1 : 0;
    info->quant = s.quant.empty() ? nullptr : s.quant.c_str();
  });
}

dinoml_status dinoml_module_set_constants(dinoml_module* module, const dinoml_tensor* constants, size_t n) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    module->impl->set_constants(constants, n);
  });
}

dinoml_status dinoml_module_set_weights_file(dinoml_module* module, const char* weights_path) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!weights_path) fail(DINOML_ERR_INVALID_ARGUMENT, "weights_path is NULL");
    module->impl->set_weights_file(weights_path);
  });
}

dinoml_status dinoml_module_get_constant(const dinoml_module* module, const char* name, void* dst, size_t nbytes) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!name) fail(DINOML_ERR_INVALID_ARGUMENT, "name is NULL");
    module->impl->get_constant(name, dst, nbytes);
  });
}

dinoml_status dinoml_module_export_weights(const dinoml_module* module, const char* path) {
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!path) fail(DINOML_ERR_INVALID_ARGUMENT, "path is NULL");
    module->impl->export_current_weights(path);
  });
}

dinoml_status dinoml_artifact_export_weights(const char* artifact_dir, const char* path) {
  return guard([&] {
    if (!artifact_dir) fail(DINOML_ERR_INVALID_ARGUMENT, "artifact_dir is NULL");
    if (!path) fail(DINOML_ERR_INVALID_ARGUMENT, "path is NULL");
    dinoml::runtime::export_artifact_weights(artifact_dir, path);
  });
}

dinoml_status dinoml_module_load(const char* artifact_dir, dinoml_module** out) {
  if (out) *out = nullptr;
  return guard([&] {
    if (!artifact_dir) fail(DINOML_ERR_INVALID_ARGUMENT, "artifact_dir is NULL");
    if (!out) fail(DINOML_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = new dinoml_module{Module::load(artifact_dir)};
  });
}

void dinoml_module_free(dinoml_module* module) { delete module; }

const char* dinoml_module_name(const dinoml_module* module) { return module ? module->impl->name().c_str() : ""; }

const char* dinoml_module_graph_hash(const dinoml_module* module) {
  return module ? module->impl->graph_hash().c_str() : "";
}

size_t dinoml_module_num_inputs(const dinoml_module* module) {
  return module ? module->impl->metadata().inputs.size() : 0;
}

size_t dinoml_module_num_outputs(const dinoml_module* module) {
  return module ? module->impl->metadata().outputs.size() : 0;
}

size_t dinoml_module_num_states(const dinoml_module* module) {
  return module ? module->impl->metadata().states.size() : 0;
}

size_t dinoml_module_num_nodes(const dinoml_module* module) {
  if (!module || !module->impl->entry().node_count) return 0;
  return module->impl->entry().node_count();
}

dinoml_status dinoml_module_input_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info) {
  return tensor_info(module, index, info, &Module::input_infos, "input");
}

dinoml_status dinoml_module_output_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info) {
  return tensor_info(module, index, info, &Module::output_infos, "output");
}

dinoml_status dinoml_module_state_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info) {
  return tensor_info(module, index, info, &Module::state_infos, "state");
}

dinoml_status dinoml_session_create(dinoml_module* module, dinoml_session** out) {
  if (out) *out = nullptr;
  return guard([&] {
    if (!module) fail(DINOML_ERR_INVALID_ARGUMENT, "module is NULL");
    if (!out) fail(DINOML_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = new dinoml_session{Session(module->impl)};
  });
}

void dinoml_session_free(dinoml_session* session) { delete session; }

dinoml_status dinoml_session_run(dinoml_session* session, const dinoml_tensor* inputs, size_t num_inputs,
                                 dinoml_tensor* outputs, size_t num_outputs) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.run(inputs, num_inputs, outputs, num_outputs);
  });
}

dinoml_status dinoml_session_run_timed(dinoml_session* session, const dinoml_tensor* inputs, size_t num_inputs,
                                       dinoml_tensor* outputs, size_t num_outputs, double* node_seconds,
                                       size_t num_nodes) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!node_seconds) fail(DINOML_ERR_INVALID_ARGUMENT, "node_seconds is NULL (use dinoml_session_run to run untimed)");
    session->impl.run(inputs, num_inputs, outputs, num_outputs, node_seconds, num_nodes);
  });
}

dinoml_status dinoml_session_plan_outputs(dinoml_session* session, const dinoml_tensor* inputs, size_t num_inputs,
                                          dinoml_tensor* outputs, size_t num_outputs) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.plan_outputs(inputs, num_inputs, outputs, num_outputs);
  });
}

dinoml_status dinoml_session_get_state(dinoml_session* session, const char* name, void* dst, size_t nbytes) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.get_state(name, dst, nbytes);
  });
}

dinoml_status dinoml_session_set_state(dinoml_session* session, const char* name, const void* src, size_t nbytes) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.set_state(name, src, nbytes);
  });
}

dinoml_status dinoml_session_reset_states(dinoml_session* session) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.reset_states();
  });
}

size_t dinoml_session_arena_bytes(const dinoml_session* session) { return session ? session->impl.arena_bytes() : 0; }

dinoml_status dinoml_session_memory_info(const dinoml_session* session, dinoml_session_memory* out) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!out) fail(DINOML_ERR_INVALID_ARGUMENT, "out is NULL");
    // memory() locks the session's mutex: it is logically const.
    *out = const_cast<dinoml_session*>(session)->impl.memory(sizeof(dinoml_session));
  });
}

size_t dinoml_session_overhead_bytes(size_t num_states, size_t num_outputs) {
  return Session::overhead_bytes(sizeof(dinoml_session), num_states, num_outputs);
}

const char* dinoml_module_target(const dinoml_module* module) { return module ? module->impl->target().c_str() : nullptr; }

dinoml_status dinoml_session_set_stream(dinoml_session* session, void* stream) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.set_stream(stream);
  });
}

dinoml_status dinoml_session_synchronize(dinoml_session* session) {
  return guard([&] {
    if (!session) fail(DINOML_ERR_INVALID_ARGUMENT, "session is NULL");
    session->impl.synchronize();
  });
}

}  // extern "C"
