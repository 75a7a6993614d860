/* c_app: runs a DinoML artifact from plain C99, using only <dinoml/runtime.h>.
 *
 *   c_app ARTIFACT_DIR [dim=value ...]
 *
 * Every symbolic dim takes its minimum unless given on the command line (e.g. batch=3). Inputs
 * are filled with a deterministic pattern so two runs (or two machines) can be compared. */
#include <dinoml/runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIMS 64

typedef struct {
  const char* name;
  int64_t min, max, value;
  int given;
} dim_value;

static int fail(const char* what) {
  fprintf(stderr, "c_app: %s failed: %s\n", what, dinoml_last_error());
  return 1;
}

/* fp16/bf16 bit patterns <-> float, so the app needs nothing beyond the C library. */
static float f16_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  float f;
  if (exp == 0) {
    f = (float)man / 16777216.0f; /* subnormal: man * 2^-24 */
    return sign ? -f : f;
  }
  bits = exp == 31 ? (sign | 0x7f800000u | (man << 13)) : (sign | ((exp + 112u) << 23) | (man << 13));
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_f16(float f) { /* exact for the small pattern values used here */
  uint32_t bits, sign, exp, man;
  memcpy(&bits, &f, sizeof bits);
  sign = (bits >> 16) & 0x8000u;
  exp = (bits >> 23) & 0xffu;
  man = bits & 0x7fffffu;
  if (exp == 0) return (uint16_t)sign;
  return (uint16_t)(sign | ((exp - 112u) << 10) | (man >> 13));
}

static float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

/* Small values, exactly representable in every float type, varying along the buffer. */
static void fill_pattern(void* data, dinoml_dtype dtype, size_t count) {
  size_t i;
  for (i = 0; i < count; ++i) {
    float f = (float)((int)(i % 17) - 8) * 0.25f;
    int64_t v = (int64_t)(i % 7) - 3;
    switch (dtype) {
      case DINOML_FLOAT32: ((float*)data)[i] = f; break;
      case DINOML_FLOAT16: ((uint16_t*)data)[i] = float_to_f16(f); break;
      case DINOML_BFLOAT16: ((uint16_t*)data)[i] = float_to_bf16(f); break;
      case DINOML_INT8: ((int8_t*)data)[i] = (int8_t)v; break;
      case DINOML_UINT8: ((uint8_t*)data)[i] = (uint8_t)(i % 7); break;
      case DINOML_INT32: ((int32_t*)data)[i] = (int32_t)v; break;
      case DINOML_INT64: ((int64_t*)data)[i] = v; break;
      case DINOML_BOOL: ((uint8_t*)data)[i] = (uint8_t)(i % 2); break;
    }
  }
}

static void print_value(const void* data, dinoml_dtype dtype, size_t i) {
  switch (dtype) {
    case DINOML_FLOAT32: printf("%g", (double)((const float*)data)[i]); break;
    case DINOML_FLOAT16: printf("%g", (double)f16_to_float(((const uint16_t*)data)[i])); break;
    case DINOML_BFLOAT16: printf("%g", (double)bf16_to_float(((const uint16_t*)data)[i])); break;
    case DINOML_INT8: printf("%d", (int)((const int8_t*)data)[i]); break;
    case DINOML_UINT8: printf("%u", (unsigned)((const uint8_t*)data)[i]); break;
    case DINOML_INT32: printf("%ld", (long)((const int32_t*)data)[i]); break;
    case DINOML_INT64: printf("%lld", (long long)((const int64_t*)data)[i]); break;
    case DINOML_BOOL: printf("%s", ((const uint8_t*)data)[i] ? "true" : "false"); break;
  }
}

static void print_info(const char* kind, const dinoml_tensor_info* info) {
  int a;
  printf("%s %s: %s [", kind, info->name, dinoml_dtype_name(info->dtype));
  for (a = 0; a < info->ndim; ++a) {
    const dinoml_axis_info* ax = &info->axes[a];
    if (a) printf(", ");
    if (ax->dim_name)
      printf("%s in [%lld, %lld]", ax->dim_name, (long long)ax->min, (long long)ax->max);
    else
      printf("%lld", (long long)ax->min);
  }
  printf("]\n");
}

static void print_shape(int32_t ndim, const int64_t* shape) {
  int a;
  printf("[");
  for (a = 0; a < ndim; ++a) printf("%s%lld", a ? ", " : "", (long long)shape[a]);
  printf("]");
}

static dim_value* find_dim(dim_value* dims, size_t n, const char* name) {
  size_t i;
  for (i = 0; i < n; ++i)
    if (strcmp(dims[i].name, name) == 0) return &dims[i];
  return NULL;
}

int main(int argc, char** argv) {
  dinoml_module* module = NULL;
  dinoml_session* session = NULL;
  dinoml_tensor* inputs = NULL;
  dinoml_tensor* outputs = NULL;
  void** buffers = NULL;
  dim_value dims[MAX_DIMS];
  size_t n_dims = 0, n_in, n_out, i, k;
  int a, rc = 1;

  if (argc < 2) {
    fprintf(stderr, "usage: %s ARTIFACT_DIR [dim=value ...]\n", argv[0]);
    return 2;
  }
  if (dinoml_module_load(argv[1], &module) != DINOML_OK) return fail("loading the artifact");
  n_in = dinoml_module_num_inputs(module);
  n_out = dinoml_module_num_outputs(module);
  printf("model %s (graph %s)\n", dinoml_module_name(module), dinoml_module_graph_hash(module));

  inputs = (dinoml_tensor*)calloc(n_in ? n_in : 1, sizeof *inputs);
  outputs = (dinoml_tensor*)calloc(n_out ? n_out : 1, sizeof *outputs);
  buffers = (void**)calloc(n_in ? n_in : 1, sizeof *buffers);
  if (!inputs || !outputs || !buffers) {
    fprintf(stderr, "c_app: out of memory\n");
    goto done;
  }

  /* The dims are whatever symbolic axes the inputs carry. */
  for (i = 0; i < n_in; ++i) {
    dinoml_tensor_info info;
    if (dinoml_module_input_info(module, i, &info) != DINOML_OK) { rc = fail("reading input info"); goto done; }
    print_info("input", &info);
    for (a = 0; a < info.ndim; ++a) {
      const dinoml_axis_info* ax = &info.axes[a];
      if (ax->dim_name && !find_dim(dims, n_dims, ax->dim_name) && n_dims < MAX_DIMS) {
        dim_value d = {ax->dim_name, ax->min, ax->max, ax->min, 0};
        dims[n_dims++] = d;
      }
    }
  }
  for (i = 0; i < n_out; ++i) {
    dinoml_tensor_info info;
    if (dinoml_module_output_info(module, i, &info) != DINOML_OK) { rc = fail("reading output info"); goto done; }
    print_info("output", &info);
  }
  for (i = 0; i < dinoml_module_num_states(module); ++i) {
    dinoml_tensor_info info;
    if (dinoml_module_state_info(module, i, &info) != DINOML_OK) { rc = fail("reading state info"); goto done; }
    print_info("state", &info);
  }

  for (a = 2; a < argc; ++a) {
    char* eq = strchr(argv[a], '=');
    dim_value* d;
    char* end;
    if (!eq) { fprintf(stderr, "c_app: expected dim=value, got '%s'\n", argv[a]); rc = 2; goto done; }
    *eq = '\0';
    d = find_dim(dims, n_dims, argv[a]);
    if (!d) { fprintf(stderr, "c_app: the model has no dim named '%s'\n", argv[a]); rc = 2; goto done; }
    d->value = strtoll(eq + 1, &end, 10);
    if (*end != '\0' || end == eq + 1) { fprintf(stderr, "c_app: '%s' is not an integer\n", eq + 1); rc = 2; goto done; }
    d->given = 1;
  }
  for (k = 0; k < n_dims; ++k)
    printf("dim %s = %lld%s\n", dims[k].name, (long long)dims[k].value, dims[k].given ? "" : " (min)");

  for (i = 0; i < n_in; ++i) {
    dinoml_tensor_info info;
    size_t count = 1;
    dinoml_module_input_info(module, i, &info);
    inputs[i].name = info.name;
    inputs[i].dtype = info.dtype;
    inputs[i].ndim = info.ndim;
    for (a = 0; a < info.ndim; ++a) {
      const dinoml_axis_info* ax = &info.axes[a];
      const dim_value* d = ax->dim_name ? find_dim(dims, n_dims, ax->dim_name) : NULL;
      inputs[i].shape[a] = d ? d->value : ax->min;
      count *= (size_t)(inputs[i].shape[a] > 0 ? inputs[i].shape[a] : 0);
    }
    inputs[i].nbytes = count * dinoml_dtype_size(info.dtype);
    buffers[i] = malloc(inputs[i].nbytes ? inputs[i].nbytes : 1);
    if (!buffers[i]) { fprintf(stderr, "c_app: out of memory\n"); goto done; }
    fill_pattern(buffers[i], info.dtype, count);
    inputs[i].data = buffers[i];
  }

  if (dinoml_session_create(module, &session) != DINOML_OK) { rc = fail("creating a session"); goto done; }
  /* Outputs: data = NULL, positional, so the session allocates them. */
  if (dinoml_session_run(session, inputs, n_in, outputs, n_out) != DINOML_OK) { rc = fail("running"); goto done; }

  for (i = 0; i < n_out; ++i) {
    size_t count = outputs[i].nbytes / (dinoml_dtype_size(outputs[i].dtype) ? dinoml_dtype_size(outputs[i].dtype) : 1);
    dinoml_tensor_info info;
    dinoml_module_output_info(module, i, &info);
    printf("output %s %s ", info.name, dinoml_dtype_name(outputs[i].dtype));
    print_shape(outputs[i].ndim, outputs[i].shape);
    printf(":");
    for (k = 0; k < count && k < 16; ++k) {
      printf(" ");
      print_value(outputs[i].data, outputs[i].dtype, k);
    }
    printf("%s\n", count > 16 ? " ..." : "");
  }
  printf("arena bytes %lu\n", (unsigned long)dinoml_session_arena_bytes(session));
  rc = 0;

done:
  if (buffers)
    for (i = 0; i < n_in; ++i) free(buffers[i]);
  free(buffers);
  free(inputs);
  free(outputs);
  dinoml_session_free(session);
  dinoml_module_free(module);
  return rc;
}
