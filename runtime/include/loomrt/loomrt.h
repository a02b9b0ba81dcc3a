/*===- loomrt.h - C API of the Loom runtime --------------------------------===
 *
 * The stable entry points for C, Python (ctypes/cffi) and other languages.
 * Every function returns a loomrt_status; the text of the last failure on the
 * calling thread is available from loomrt_last_error().
 *
 *===----------------------------------------------------------------------===*/

#ifndef LOOMRT_LOOMRT_H
#define LOOMRT_LOOMRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values equal loomrt::ErrorCode (loomrt/ErrorCode.h). Append only. */
typedef enum loomrt_status {
  LOOMRT_OK = 0,
  LOOMRT_ERROR_INVALID_ARGUMENT,
  LOOMRT_ERROR_IO,
  LOOMRT_ERROR_FORMAT,
  LOOMRT_ERROR_UNSUPPORTED,
  LOOMRT_ERROR_NO_DEVICE,
  LOOMRT_ERROR_OUT_OF_MEMORY,
  LOOMRT_ERROR_NON_FINITE
} loomrt_status;

/* The library version, "MAJOR.MINOR.PATCH". Static storage. */
const char *loomrt_version(void);

/* A constant name for `status` ("LOOMRT_ERROR_IO"); "LOOMRT_UNKNOWN_STATUS" for
 * a value outside the enum. Static storage. */
const char *loomrt_status_string(loomrt_status status);

/* The message of the last failed loomrt_* call on this thread, or "" if the
 * last call succeeded. Valid until the next loomrt_* call on this thread. */
const char *loomrt_last_error(void);

/* Validates the safetensors file at `path` and writes a summary into `buf`:
 * one line per tensor, "name dtype [d0, d1] nbytes", then one line per
 * metadata entry, "__metadata__ key=value". The text is always NUL-terminated
 * when buflen > 0. Returns LOOMRT_ERROR_IO if the file cannot be read,
 * LOOMRT_ERROR_FORMAT if it is malformed, LOOMRT_ERROR_UNSUPPORTED for a dtype
 * Loom does not handle, and LOOMRT_ERROR_INVALID_ARGUMENT for a null argument
 * or a buffer too small for the summary (which is then truncated; the error
 * message gives the size needed). */
loomrt_status loomrt_safetensors_inspect(const char *path, char *buf,
                                         size_t buflen);

/* Element types; values equal loomrt::DType (loomrt/DType.h). Append only. */
typedef enum loomrt_dtype {
  LOOMRT_DTYPE_F64 = 0,
  LOOMRT_DTYPE_F32,
  LOOMRT_DTYPE_F16,
  LOOMRT_DTYPE_BF16,
  LOOMRT_DTYPE_I64,
  LOOMRT_DTYPE_I32,
  LOOMRT_DTYPE_I16,
  LOOMRT_DTYPE_I8,
  LOOMRT_DTYPE_U8,
  LOOMRT_DTYPE_BOOL
} loomrt_dtype;

/* A dense, row-major, little-endian tensor: `nbytes` bytes at `data`. */
typedef struct loomrt_tensor {
  const char *name;
  loomrt_dtype dtype;
  size_t rank;
  const int64_t *shape; /* `rank` dimensions; may be NULL when rank is 0 */
  void *data;
  size_t nbytes;
} loomrt_tensor;

/* A loaded, validated artifact directory (plan.json, kernels.so,
 * params.safetensors; docs/plan-format.md). One run at a time per artifact. */
typedef struct loomrt_artifact loomrt_artifact;

/* Loads and validates the artifact in `dir`; on success `*out` owns it (free
 * with loomrt_artifact_free). LOOMRT_ERROR_FORMAT for a malformed plan or
 * params file (the message names the file, entry, step and field),
 * LOOMRT_ERROR_IO for a missing file or unloadable kernels,
 * LOOMRT_ERROR_UNSUPPORTED for a newer plan version or another target. */
loomrt_status loomrt_artifact_load(const char *dir, loomrt_artifact **out);

/* Frees an artifact; NULL is allowed. */
void loomrt_artifact_free(loomrt_artifact *artifact);

/* The entry points: their number, and the name of entry `index` (valid while
 * the artifact lives). */
loomrt_status loomrt_artifact_num_entries(const loomrt_artifact *artifact,
                                          size_t *count);
loomrt_status loomrt_artifact_entry_name(const loomrt_artifact *artifact,
                                         size_t index, const char **name);

/* The inputs and outputs of `entry`, in plan order. *_info sets name, dtype,
 * rank, shape (pointers valid while the artifact lives) and nbytes; data is
 * set to NULL. */
loomrt_status loomrt_artifact_num_inputs(const loomrt_artifact *artifact,
                                         const char *entry, size_t *count);
loomrt_status loomrt_artifact_num_outputs(const loomrt_artifact *artifact,
                                          const char *entry, size_t *count);
loomrt_status loomrt_artifact_input_info(const loomrt_artifact *artifact,
                                         const char *entry, size_t index,
                                         loomrt_tensor *info);
loomrt_status loomrt_artifact_output_info(const loomrt_artifact *artifact,
                                          const char *entry, size_t index,
                                          loomrt_tensor *info);

/* The initial value of tensor `name` of params.safetensors (a parameter or
 * optimizer state). `out->data` points into the artifact: read only, valid
 * while the artifact lives. LOOMRT_ERROR_INVALID_ARGUMENT if there is none. */
loomrt_status loomrt_artifact_initial_value(const loomrt_artifact *artifact,
                                            const char *name,
                                            loomrt_tensor *out);

/* Runs `entry`. `inputs` holds every input of the entry once, by name, in any
 * order, with the plan's dtype and shape (a mismatch is
 * LOOMRT_ERROR_INVALID_ARGUMENT naming the input and both types).
 * `num_outputs` must equal the entry's output count; for each i the caller
 * sets outputs[i].data and outputs[i].nbytes (capacity), and the call writes
 * output i there and sets name, dtype, rank, shape and nbytes (the size
 * written). */
loomrt_status loomrt_artifact_run(loomrt_artifact *artifact, const char *entry,
                                  const loomrt_tensor *inputs,
                                  size_t num_inputs, loomrt_tensor *outputs,
                                  size_t num_outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOMRT_LOOMRT_H */
