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
  LOOMRT_ERROR_OUT_OF_MEMORY
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOMRT_LOOMRT_H */
