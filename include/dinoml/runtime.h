/* DinoML runtime C ABI.
 *
 * A flat C interface to load a compiled artifact directory and run it. Every function returns a
 * dinoml_status; on failure dinoml_last_error() (thread-local) says what went wrong and what to
 * do. No C++ exception ever crosses this boundary.
 *
 * Threading: a module is immutable after load (except its weights, which the swap functions below
 * replace atomically) and may be shared by many threads. A session owns
 * its arena and states; one session must be used by one thread at a time (calls on the same
 * session are serialised by an internal mutex). Many sessions of one module run concurrently.
 */
#ifndef DINOML_RUNTIME_H
#define DINOML_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define DINOML_API __attribute__((visibility("default")))
#else
#define DINOML_API
#endif

/* Bumped on any incompatible change of this header or of the artifact layout the runtime reads.
 * 2: dinoml_tensor.device (host or CUDA device memory), CUDA artifacts, DINOML_ERR_DEVICE. */
#define DINOML_RUNTIME_ABI_VERSION 2u
#define DINOML_MAX_RANK 8

typedef enum dinoml_status {
  DINOML_OK = 0,
  DINOML_ERR_INVALID_ARGUMENT = 1, /* bad input name / dtype / rank / dim, null pointer, ... */
  DINOML_ERR_NOT_FOUND = 2,        /* artifact directory or file missing, unknown name */
  DINOML_ERR_ARTIFACT = 3,         /* malformed or tampered artifact (hash mismatch, bad json) */
  DINOML_ERR_ABI_MISMATCH = 4,     /* artifact built for another runtime / module ABI */
  DINOML_ERR_ISA_MISMATCH = 5,     /* this CPU lacks an instruction set the artifact needs */
  DINOML_ERR_RUNTIME = 6,          /* failure while running a kernel */
  DINOML_ERR_OUT_OF_MEMORY = 7,
  DINOML_ERR_BUFFER_TOO_SMALL = 8, /* caller-provided output buffer smaller than the output */
  DINOML_ERR_DEVICE = 9            /* no usable GPU: no driver, no device, or a GPU of another arch */
} dinoml_status;

/* Where a tensor's `data` lives. CPU artifacts accept host memory only. CUDA artifacts accept
 * both: host tensors are copied to/from the GPU by the session (the run then waits for its
 * results); CUDA tensors are device pointers of the current device, used in place. */
typedef enum dinoml_device {
  DINOML_DEVICE_HOST = 0,
  DINOML_DEVICE_CUDA = 1
} dinoml_device;

/* Numbering is part of the ABI and matches the IR's dtype order. */
typedef enum dinoml_dtype {
  DINOML_FLOAT32 = 0,
  DINOML_FLOAT16 = 1,
  DINOML_BFLOAT16 = 2,
  DINOML_INT8 = 3,
  DINOML_UINT8 = 4,
  DINOML_INT32 = 5,
  DINOML_INT64 = 6,
  DINOML_BOOL = 7
} dinoml_dtype;

/* A tensor crossing the ABI. Row-major, contiguous.
 * Inputs: every field is read.
 * Outputs: `name` selects the output (NULL = positional order). If `data` is NULL the runtime
 * allocates the output in session-owned memory that stays valid until the next run or until the
 * session is freed, and stores the pointer in `data`. If `data` is set, `nbytes` is its capacity
 * and DINOML_ERR_BUFFER_TOO_SMALL is returned when the output does not fit. On success `dtype`,
 * `ndim`, `shape` and `nbytes` describe the produced output.
 * `device` (last, so zero-initialised tensors are host tensors) says where `data` lives; for an
 * output with data == NULL it selects where the session allocates it. */
typedef struct dinoml_tensor {
  const char* name;
  void* data;
  size_t nbytes;
  dinoml_dtype dtype;
  int32_t ndim;
  int64_t shape[DINOML_MAX_RANK];
  int32_t device; /* dinoml_device */
} dinoml_tensor;

typedef struct dinoml_module dinoml_module;
typedef struct dinoml_session dinoml_session;

/* Description of one input/output/state axis: a fixed size (dim_name NULL, min == max) or a
 * symbolic Dim with its bounds. Output axes may be expressions: dim_name is then its text. */
typedef struct dinoml_axis_info {
  const char* dim_name;
  int64_t min;
  int64_t max;
} dinoml_axis_info;

typedef struct dinoml_tensor_info {
  const char* name;
  dinoml_dtype dtype;
  int32_t ndim;
  dinoml_axis_info axes[DINOML_MAX_RANK];
} dinoml_tensor_info;

DINOML_API uint32_t dinoml_runtime_abi_version(void);
DINOML_API const char* dinoml_last_error(void);
DINOML_API const char* dinoml_status_name(dinoml_status status);
DINOML_API const char* dinoml_dtype_name(dinoml_dtype dtype);
DINOML_API size_t dinoml_dtype_size(dinoml_dtype dtype);

/* CPU threads shared by all session runs of this process. A run alone uses the whole budget;
 * overlapping runs get what the others leave (at least the calling thread), so many concurrent
 * sessions do not oversubscribe the cores. Default: DINOML_NUM_THREADS, else OMP_NUM_THREADS,
 * else the CPUs this process may run on. n <= 0 restores the default. */
DINOML_API void dinoml_set_thread_budget(int n);
DINOML_API int dinoml_thread_budget(void);

/* Verifies manifest (schema + ABI versions), SHA-256 of every listed file, and the CPU's ISA
 * before loading any code; then loads module.so and maps constants.bin read-only. */
DINOML_API dinoml_status dinoml_module_load(const char* artifact_dir, dinoml_module** out);
DINOML_API void dinoml_module_free(dinoml_module* module);

/* Integrity check without loading code: runs every check dinoml_module_load makes before it
 * loads module.so (manifest schema/ABI versions, target, arch, required ISA on this CPU, file
 * paths inside the directory, SHA-256 of every listed file, metadata.json, every constant slot
 * and memory-plan buffer against the real file and arena sizes) and stops there: module.so is
 * never opened for execution. `callback` (may be NULL) is called once per passing check with
 * status DINOML_OK and a one-line detail, and once for the first failing check with its status and
 * message; the function then returns that status (dinoml_last_error() holds the message).
 * A passing verify says the artifact is the one its manifest describes and fits this machine; it
 * says nothing about whether its code is benign (see docs/security.md). */
typedef void (*dinoml_verify_callback)(const char* check, dinoml_status status, const char* detail, void* user);
DINOML_API dinoml_status dinoml_artifact_verify(const char* artifact_dir, dinoml_verify_callback callback,
                                                void* user);

DINOML_API const char* dinoml_module_name(const dinoml_module* module);
DINOML_API const char* dinoml_module_graph_hash(const dinoml_module* module);
DINOML_API size_t dinoml_module_num_inputs(const dinoml_module* module);
DINOML_API size_t dinoml_module_num_outputs(const dinoml_module* module);
DINOML_API size_t dinoml_module_num_states(const dinoml_module* module);
/* Graph nodes of an artifact that supports per-node timing (dinoml_session_run_timed); 0 for
 * artifacts compiled before per-node timing existed (CPU) or before it existed for CUDA. */
DINOML_API size_t dinoml_module_num_nodes(const dinoml_module* module);
DINOML_API dinoml_status dinoml_module_input_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info);
DINOML_API dinoml_status dinoml_module_output_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info);
DINOML_API dinoml_status dinoml_module_state_info(const dinoml_module* module, size_t index, dinoml_tensor_info* info);

DINOML_API dinoml_status dinoml_session_create(dinoml_module* module, dinoml_session** out);
DINOML_API void dinoml_session_free(dinoml_session* session);

/* Runs the model. Inputs are matched by name (all names set) or by position (all NULL).
 * Validation: every input present exactly once, dtype, rank, static sizes, and every symbolic
 * dim consistent across inputs, within [min, max] and a multiple of divisible_by. */
DINOML_API dinoml_status dinoml_session_run(dinoml_session* session, const dinoml_tensor* inputs,
                                            size_t num_inputs, dinoml_tensor* outputs,
                                            size_t num_outputs);

/* dinoml_session_run that also adds each graph node's time (seconds) to node_seconds[i], in the
 * order of the artifact's graph.dinoir.json / kernel_manifest.json nodes; num_nodes must be
 * dinoml_module_num_nodes(). CPU artifacts: wall time, one clock read per node. CUDA artifacts:
 * device time between events recorded before each node on the session's stream, from a direct run
 * (never a replayed CUDA graph, so launch gaps count) that is synchronised before the call returns.
 * Views and other nodes that emit no code read as ~0. DINOML_ERR_INVALID_ARGUMENT, with a message,
 * for artifacts without the timed entry (compiled by an older DinoML). */
DINOML_API dinoml_status dinoml_session_run_timed(dinoml_session* session, const dinoml_tensor* inputs,
                                                  size_t num_inputs, dinoml_tensor* outputs, size_t num_outputs,
                                                  double* node_seconds, size_t num_nodes);

/* What a run with these inputs would produce, without running: validates `inputs` exactly as
 * dinoml_session_run does and sets dtype, ndim, shape and nbytes of every requested output
 * (matched as in dinoml_session_run; `data` and `device` are not touched). Lets a caller allocate
 * the outputs itself (e.g. as framework tensors on the GPU) and pass them to dinoml_session_run:
 * inputs and outputs then never pass through session memory. */
DINOML_API dinoml_status dinoml_session_plan_outputs(dinoml_session* session, const dinoml_tensor* inputs,
                                                     size_t num_inputs, dinoml_tensor* outputs,
                                                     size_t num_outputs);

/* Session states (e.g. a KV cache): zero-initialised at creation; updated at the end of each run
 * by the graph's state_assign nodes. */
DINOML_API dinoml_status dinoml_session_get_state(dinoml_session* session, const char* name, void* dst, size_t nbytes);
DINOML_API dinoml_status dinoml_session_set_state(dinoml_session* session, const char* name, const void* src, size_t nbytes);
DINOML_API dinoml_status dinoml_session_reset_states(dinoml_session* session);

/* Bytes of the arena the session holds now (grows to the largest bucket used so far). */
DINOML_API size_t dinoml_session_arena_bytes(const dinoml_session* session);

/* The memory a session holds. A session owns exactly: its arena (the memory plan of the largest
 * bucket it has run, from metadata.json), its states, the outputs it allocated for callers that
 * passed no buffer, and a fixed overhead (bookkeeping and allocator headers) that depends only
 * on the number of states and outputs — dinoml_session_overhead_bytes(). Constants are mapped
 * read-only once per loaded module and shared by all its sessions, so they are reported but not
 * counted in total_bytes. Every buffer is rounded up to 64 bytes. */
typedef struct dinoml_session_memory {
  size_t arena_bytes;
  size_t state_bytes;
  size_t output_bytes;
  size_t overhead_bytes;
  size_t total_bytes;     /* arena + states + outputs + overhead */
  size_t constants_bytes; /* shared by the module's sessions; not in total_bytes */
  size_t device_bytes;    /* CUDA artifacts: device arena + states + outputs + input staging (the
                             fields above are then the host side only); 0 for CPU artifacts */
} dinoml_session_memory;
DINOML_API dinoml_status dinoml_session_memory_info(const dinoml_session* session, dinoml_session_memory* out);

/* Upper bound of a session's fixed overhead for a model with these counts: the session object,
 * buffer handles, and per-buffer allocator headers and page rounding. The same number
 * dinoml_session_memory_info reports and `dinoml inspect` prints. */
DINOML_API size_t dinoml_session_overhead_bytes(size_t num_states, size_t num_outputs);

/* ---- Weights (constants) without recompiling ------------------------------------------------
 * An artifact's constants are the graph's constant tensors (graph.dinoir.json), stored in
 * constants.bin or, for artifacts compiled with --weights external, read from a safetensors file at
 * load. Swaps are atomic for running sessions: a swap builds the new weights completely (copy,
 * replace, re-prepack through the module's init) and then publishes them; runs in flight finish on
 * the old weights, runs that start afterwards use the new ones, and the old weights are freed when
 * the last run using them ends. Swaps of one module are serialised.
 * Swappable: every constant of artifacts compiled with --weights swappable or external; with the
 * default (embedded) policy, the model's own constants that survived compilation. A constant that
 * constant folding consumed at compile time is not in the artifact and cannot be swapped (the
 * error says so and names the swappable ones). Quantized (GGUF block) constants are passed as
 * uint8 tensors of their exact byte size. */
typedef struct dinoml_constant_info {
  const char* name;
  dinoml_dtype dtype; /* the value's dtype (uint8 for GGUF-block constants) */
  int32_t ndim;
  int64_t shape[DINOML_MAX_RANK];
  size_t nbytes;
  int32_t swappable;  /* 1: dinoml_module_set_constants accepts it */
  const char* quant;  /* GGUF block type ("q8_0") or NULL for dense constants */
} dinoml_constant_info;

/* "embedded" (constants.bin, folding allowed), "swappable" (constants.bin, no folding) or
 * "external" (no constants.bin: weights from a file at load). */
DINOML_API const char* dinoml_module_weights_policy(const dinoml_module* module);
DINOML_API size_t dinoml_module_num_constants(const dinoml_module* module);
DINOML_API dinoml_status dinoml_module_constant_info(const dinoml_module* module, size_t index, dinoml_constant_info* info);

/* dinoml_module_load whose constants come from a safetensors file (8-byte little-endian header
 * length, JSON header {name: {dtype, shape, data_offsets}}, raw bytes). Required for artifacts
 * compiled with --weights external (the file must hold every constant and nothing else); for other
 * artifacts the file's tensors replace those constants. The file is checked completely (header,
 * names, dtypes, shapes, offsets inside the file) before module.so is loaded. */
DINOML_API dinoml_status dinoml_module_load_with_weights(const char* artifact_dir, const char* weights_path,
                                                         dinoml_module** out);

/* Tensor-parallel artifacts (compiled with --tensor-parallel N): one module, each rank's constants.
 * dinoml_module_load_rank loads rank `rank` (0..N-1) with that rank's constants (rank 0 is what
 * dinoml_module_load gives); dinoml_module_world_size is N (1 for other artifacts). A rank's session
 * runs its collectives with the group's other ranks: the ranks must run together (Python:
 * dinoml.runtime.load_group), a rank run alone fails at its first collective. */
DINOML_API dinoml_status dinoml_module_load_rank(const char* artifact_dir, int rank, dinoml_module** out);
DINOML_API int dinoml_module_world_size(const dinoml_module* module);

/* Replaces constants by name: `constants[i]` names a swappable constant and holds its new value in
 * host memory (dtype, ndim, shape and nbytes must match the compiled graph exactly). All or nothing:
 * on any error nothing changes. */
DINOML_API dinoml_status dinoml_module_set_constants(dinoml_module* module, const dinoml_tensor* constants, size_t n);
/* The same with every tensor of a safetensors file (each must be a swappable constant). */
DINOML_API dinoml_status dinoml_module_set_weights_file(dinoml_module* module, const char* weights_path);
/* Copies a constant's current value into dst (nbytes = its size). */
DINOML_API dinoml_status dinoml_module_get_constant(const dinoml_module* module, const char* name, void* dst, size_t nbytes);
/* Writes every constant's current value (after swaps) to a safetensors file. */
DINOML_API dinoml_status dinoml_module_export_weights(const dinoml_module* module, const char* path);
/* Writes an artifact's constants.bin as a safetensors file without loading its code (the artifact is
 * verified first); `dinoml export-weights DIR FILE`. */
DINOML_API dinoml_status dinoml_artifact_export_weights(const char* artifact_dir, const char* path);

/* "cpu" or "cuda": the manifest's target. */
DINOML_API const char* dinoml_module_target(const dinoml_module* module);

/* CUDA artifacts. Every session owns a stream (created with the session, non-blocking) and its
 * device arena/states, and runs on that stream until set_stream makes later runs enqueue on
 * `stream` (a cudaStream_t of the current device; NULL is CUDA's default stream, e.g.
 * PyTorch's default). Work queued on the previous stream is finished first. A run whose inputs and outputs are all
 * DINOML_DEVICE_CUDA returns once its work is enqueued (synchronise the stream, or call
 * dinoml_session_synchronize, before reading outputs); a run with any host tensor returns with
 * its results in place. Both return DINOML_ERR_INVALID_ARGUMENT for CPU artifacts. */
DINOML_API dinoml_status dinoml_session_set_stream(dinoml_session* session, void* stream);
DINOML_API dinoml_status dinoml_session_synchronize(dinoml_session* session);

#ifdef __cplusplus
}
#endif
#endif /* DINOML_RUNTIME_H */
