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
  LOOMRT_ERROR_NON_FINITE,
  LOOMRT_ERROR_CANCELLED /* the caller's callback asked to stop */
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

/* What an entry's input or output is; values equal loomrt::BindingKind
 * (loomrt/Plan.h). Append only. */
typedef enum loomrt_binding_kind {
  LOOMRT_BINDING_PARAM = 0, /* a model parameter */
  LOOMRT_BINDING_STATE,     /* optimizer state */
  LOOMRT_BINDING_INPUT,     /* data (and the scalars step and seed) */
  LOOMRT_BINDING_OUTPUT,
  LOOMRT_BINDING_GRAD,  /* the gradient of the param of that name */
  LOOMRT_BINDING_BUFFER /* a model buffer (BatchNorm statistics) */
} loomrt_binding_kind;

/* The kind of input or output `index` of `entry`. */
loomrt_status loomrt_artifact_input_kind(const loomrt_artifact *artifact,
                                         const char *entry, size_t index,
                                         loomrt_binding_kind *kind);
loomrt_status loomrt_artifact_output_kind(const loomrt_artifact *artifact,
                                          const char *entry, size_t index,
                                          loomrt_binding_kind *kind);

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

/*===----------------------------------------------------------------------===
 * Training: loom-run --train as a library (docs/loom-run.md).
 *
 * A trainer holds the training state of one artifact: every param, buffer
 * and optimizer-state tensor, the step counter and the position in the data.
 * It starts at the artifact's initial values and step 0; each
 * loomrt_train_run goes on from where the last one stopped (as a resumed
 * run would: the same batches, dropout seeds and updates), until `steps`
 * optimizer steps are done in all. The trainer borrows the artifact, which
 * must outlive it; one call at a time per artifact.
 *===----------------------------------------------------------------------===*/

typedef struct loomrt_trainer loomrt_trainer;

/* Creates a trainer for `artifact` (which needs the entry train_step, or
 * forward_backward and apply_optimizer for accumulation; checked by
 * loomrt_train_run). Free with loomrt_train_free. */
loomrt_status loomrt_train_create(loomrt_artifact *artifact,
                                  loomrt_trainer **out);

/* Frees a trainer; NULL is allowed. */
void loomrt_train_free(loomrt_trainer *trainer);

/* Sets an option of the next runs, as text (loom-run's flag of the same name
 * with '-' for '_'):
 *   steps             optimizer steps to reach in all (the counter goes on)
 *   batch_size        must equal the compiled batch size (0: that size)
 *   accumulate        micro-batches per step (forward_backward x N)
 *   seed              data order and dropout seeds (taken at step 0 only)
 *   data, eval_data   .npz files (or arrays: loomrt_train_add_array), or
 *                     token streams with `tokens`
 *   tokens            uint16, uint32, megatron, or empty: data and eval_data
 *                     are token streams (docs/loom-run.md, "Token streams")
 *   labels_input, doc_separator (-1 or empty: none), documents_input,
 *   positions_input   the token stream's roles, as loom-run's flags
 *   data_trace        a JSON-lines file of each micro-batch's sample indices
 *   eval_every        evaluate every K steps and at the end
 *   checkpoint_dir, save_every, keep_checkpoints
 *   metrics           a JSON-lines file (appended to after step 0)
 *   save_params       the final params, as safetensors
 *   progress          auto, bar, lines or none (on stderr; default none)
 *   prefetch          1 or 0: assemble batches on a second thread
 *   warnings          1 or 0: a non-finite loss is reported on stderr
 * An unknown key or a malformed value is LOOMRT_ERROR_INVALID_ARGUMENT. */
loomrt_status loomrt_train_set_option(loomrt_trainer *trainer, const char *key,
                                      const char *value);

/* Adds an array to the training data (eval = 0) or the evaluation data
 * (eval = 1), named like the entry's input (the labels' name for accuracy):
 * [N, <the input's shape without its batch dimension>], the same N for all.
 * The data is borrowed, not copied: it must stay valid and unchanged until
 * loomrt_train_clear_data or loomrt_train_free. In-memory data replaces
 * the option `data` (or `eval_data`). */
loomrt_status loomrt_train_add_array(loomrt_trainer *trainer, int eval,
                                     const loomrt_tensor *array);

/* Forgets the arrays added so far (both sets). */
loomrt_status loomrt_train_clear_data(loomrt_trainer *trainer);

/* Called on the thread of loomrt_train_run after every step and every
 * evaluation with the metrics line, a JSON object (the fields loom-run
 * writes to --metrics). Returning nonzero stops training after that step:
 * loomrt_train_run then returns LOOMRT_ERROR_CANCELLED, with the state at
 * the step reached. NULL removes the callback. */
typedef int (*loomrt_metrics_callback)(void *user_data, const char *json);
loomrt_status loomrt_train_set_callback(loomrt_trainer *trainer,
                                        loomrt_metrics_callback callback,
                                        void *user_data);

/* Trains until `steps` steps are done. On failure the state is that of the
 * start of the call (checkpoints and metrics already written stay). */
loomrt_status loomrt_train_run(loomrt_trainer *trainer);

/* The last loomrt_train_run (zeros before the first). */
typedef struct loomrt_train_summary {
  int64_t start_step; /* the step counter when it began */
  int64_t step;       /* the step counter now */
  double last_loss;   /* NaN if the step has no loss output */
  double samples_per_second;
  double seconds;
  int64_t skipped_steps; /* updates dynamic loss scaling skipped, in all */
} loomrt_train_summary;
loomrt_status loomrt_train_summary_get(const loomrt_trainer *trainer,
                                       loomrt_train_summary *out);

/* The training state: its tensors (params, buffers and optimizer state, by
 * name in sorted order). `out->data` points into the trainer: read only,
 * valid until the next loomrt_train_* call that changes the state. `kind`
 * may be NULL. */
loomrt_status loomrt_train_num_tensors(const loomrt_trainer *trainer,
                                       size_t *count);
loomrt_status loomrt_train_tensor(const loomrt_trainer *trainer, size_t index,
                                  loomrt_tensor *out,
                                  loomrt_binding_kind *kind);

/* Replaces the value of state tensor `value->name` (dtype and shape must
 * equal the plan's). */
loomrt_status loomrt_train_set_tensor(loomrt_trainer *trainer,
                                      const loomrt_tensor *value);

/* Evaluates the state on the evaluation data (arrays, or the option
 * eval_data) with the entries predict (accuracy) and forward (loss), as
 * loom-run's --eval-every does. `loss` and `accuracy` are NaN where the
 * artifact cannot compute them; `samples` counts the full batches' samples.
 * Any of the three may be NULL. */
loomrt_status loomrt_train_evaluate(loomrt_trainer *trainer, double *loss,
                                    double *accuracy, int64_t *samples);

/* Writes the state as a checkpoint file (what loom-run --checkpoint-dir
 * writes; loom-run --resume reads it). */
loomrt_status loomrt_train_save_checkpoint(const loomrt_trainer *trainer,
                                           const char *path);

/* Replaces the state with a checkpoint: a file, or a directory (its newest
 * checkpoint). */
loomrt_status loomrt_train_load_checkpoint(loomrt_trainer *trainer,
                                           const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOMRT_LOOMRT_H */
