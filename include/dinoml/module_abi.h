/* The contract between libdinoml_runtime and a generated module.so.
 *
 * The runtime verifies the artifact, dlopens module.so, checks dinoml_module_abi_version() and
 * then only calls these entry points. Ordering conventions (all fixed by metadata.json):
 *   dims    : metadata.json "dims" order     (int64 values, already validated by the runtime)
 *   inputs  : metadata.json "inputs" order
 *   outputs : metadata.json "outputs" order
 *   states  : metadata.json "states" order
 * Every function returns 0 on success; on failure it writes a NUL-terminated message to `err`
 * (capacity `errlen`) and returns non-zero. Modules never throw across this boundary.
 */
#ifndef DINOML_MODULE_ABI_H
#define DINOML_MODULE_ABI_H

#include <stddef.h>
#include <stdint.h>

#define DINOML_MODULE_ABI_VERSION 1u

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t (*dinoml_module_abi_version_fn)(void);
typedef const char* (*dinoml_module_graph_hash_fn)(void);
/* Called once per loaded module. `constants` is constants.bin mapped read-only (64-byte aligned
 * offsets). A module may build derived data (prepacked weights) into *module_state. */
typedef int (*dinoml_module_init_fn)(const uint8_t* constants, size_t constants_size,
                                     void** module_state, char* err, size_t errlen);
typedef void (*dinoml_module_release_fn)(void* module_state);
/* Selects the bucket for `dims` and reports the arena size it needs and the output shapes
 * (out_shapes[i * 8 + axis] for output i). */
typedef int (*dinoml_module_plan_fn)(const int64_t* dims, size_t* arena_bytes, int64_t* out_shapes,
                                     char* err, size_t errlen);
/* Runs the graph. `arena` has at least the planned bytes and is 64-byte aligned. Outputs have
 * room for the planned shapes. States point at session-owned buffers updated in place. */
typedef int (*dinoml_module_run_fn)(void* module_state, const int64_t* dims,
                                    const void* const* inputs, void* const* outputs,
                                    void* const* states, void* arena, char* err, size_t errlen);

/* Optional (CPU modules of this release and later; the runtime looks them up with dlsym and
 * says "recompile" when they are missing): the number of graph nodes, and run() that also adds
 * node i's wall time in seconds to node_seconds[i] (graph order, node_count() entries). */
typedef size_t (*dinoml_module_node_count_fn)(void);
typedef int (*dinoml_module_run_timed_fn)(void* module_state, const int64_t* dims, const void* const* inputs,
                                          void* const* outputs, void* const* states, void* arena,
                                          double* node_seconds, char* err, size_t errlen);

/* ---- CUDA modules (manifest "target": "cuda") ---------------------------------------------
 * The module owns every CUDA call: the runtime never links or includes CUDA. It checks for a
 * driver and a GPU of the artifact's arch before dlopen (runtime/cuda_driver.cpp), then uses
 * these entry points for device memory, copies and streams. `dinoml_module_run` of a CUDA module
 * takes device pointers and runs on the legacy default stream, synchronously;
 * `dinoml_module_run_cuda` enqueues the whole graph on `stream` (a cudaStream_t) and returns
 * without synchronising. init() copies constants.bin to device memory. */
#define DINOML_MODULE_CUDA_H2D 1
#define DINOML_MODULE_CUDA_D2H 2
#define DINOML_MODULE_CUDA_D2D 3
typedef int (*dinoml_module_cuda_device_check_fn)(char* err, size_t errlen);
typedef int (*dinoml_module_run_cuda_fn)(void* module_state, const int64_t* dims, const void* const* inputs,
                                         void* const* outputs, void* const* states, void* arena, void* stream,
                                         char* err, size_t errlen);
/* Optional (CUDA modules of this release and later, with dinoml_module_node_count): a direct run
 * (no CUDA graph) on `stream` with an event between consecutive nodes, synchronised before it
 * returns; node i's device time in seconds is added to node_seconds[i]. */
typedef int (*dinoml_module_run_cuda_timed_fn)(void* module_state, const int64_t* dims, const void* const* inputs,
                                               void* const* outputs, void* const* states, void* arena, void* stream,
                                               double* node_seconds, char* err, size_t errlen);
typedef int (*dinoml_module_cuda_malloc_fn)(size_t bytes, void** ptr, char* err, size_t errlen);
typedef void (*dinoml_module_cuda_free_fn)(void* ptr);
typedef int (*dinoml_module_cuda_memcpy_fn)(void* dst, const void* src, size_t bytes, int kind, void* stream,
                                            char* err, size_t errlen);
typedef int (*dinoml_module_cuda_memset_fn)(void* dst, int value, size_t bytes, void* stream, char* err,
                                            size_t errlen);
typedef int (*dinoml_module_cuda_stream_create_fn)(void** stream, char* err, size_t errlen);
typedef void (*dinoml_module_cuda_stream_destroy_fn)(void* stream);
typedef int (*dinoml_module_cuda_stream_sync_fn)(void* stream, char* err, size_t errlen);
/* 1: device (or managed) memory usable by kernels, 0: host memory / unknown to CUDA. */
typedef int (*dinoml_module_cuda_pointer_is_device_fn)(const void* ptr);

#ifdef __cplusplus
}
#endif

/* Exported symbol names. */
#define DINOML_MODULE_SYM_ABI_VERSION "dinoml_module_abi_version"
#define DINOML_MODULE_SYM_GRAPH_HASH "dinoml_module_graph_hash"
#define DINOML_MODULE_SYM_INIT "dinoml_module_init"
#define DINOML_MODULE_SYM_RELEASE "dinoml_module_release"
#define DINOML_MODULE_SYM_PLAN "dinoml_module_plan"
#define DINOML_MODULE_SYM_RUN "dinoml_module_run"
#define DINOML_MODULE_SYM_NODE_COUNT "dinoml_module_node_count"
#define DINOML_MODULE_SYM_RUN_TIMED "dinoml_module_run_timed"
#define DINOML_MODULE_SYM_CUDA_DEVICE_CHECK "dinoml_module_cuda_device_check"
#define DINOML_MODULE_SYM_RUN_CUDA "dinoml_module_run_cuda"
#define DINOML_MODULE_SYM_RUN_CUDA_TIMED "dinoml_module_run_cuda_timed"
#define DINOML_MODULE_SYM_CUDA_MALLOC "dinoml_module_cuda_malloc"
#define DINOML_MODULE_SYM_CUDA_FREE "dinoml_module_cuda_free"
#define DINOML_MODULE_SYM_CUDA_MEMCPY "dinoml_module_cuda_memcpy"
#define DINOML_MODULE_SYM_CUDA_MEMSET "dinoml_module_cuda_memset"
#define DINOML_MODULE_SYM_CUDA_STREAM_CREATE "dinoml_module_cuda_stream_create"
#define DINOML_MODULE_SYM_CUDA_STREAM_DESTROY "dinoml_module_cuda_stream_destroy"
#define DINOML_MODULE_SYM_CUDA_STREAM_SYNC "dinoml_module_cuda_stream_sync"
#define DINOML_MODULE_SYM_CUDA_POINTER_IS_DEVICE "dinoml_module_cuda_pointer_is_device"

#endif /* DINOML_MODULE_ABI_H */
