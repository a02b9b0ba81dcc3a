//===- CApiSupport.h - What the C API's source files share -----*- C++ -*-===//
//
// The handle types behind the C API's opaque pointers, and the thread's
// last error that every loomrt_* call sets or clears.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_CAPISUPPORT_H
#define LOOMRT_SRC_CAPISUPPORT_H

#include "loomrt/loomrt.h"

#include "loomrt/Artifact.h"

#include <memory>
#include <string>

struct loomrt_artifact {
  std::unique_ptr<loomrt::Artifact> artifact;
};

namespace loomrt::capi {

/// Records `message` as this thread's last error and returns `status`. If
/// the copy fails for lack of memory, LOOMRT_ERROR_OUT_OF_MEMORY instead.
loomrt_status setError(loomrt_status status, const char *message) noexcept;
loomrt_status setError(loomrt_status status,
                       const std::string &message) noexcept;
/// Clears this thread's last error; returns LOOMRT_OK.
loomrt_status clearError() noexcept;
/// This thread's last error ("" after a success).
const char *lastErrorText() noexcept;

/// `out` describes `tensor` (named `name`), borrowing its name, shape and
/// bytes: valid while both live and are unchanged.
inline void describeTensor(const std::string &name, const NpyArray &tensor,
                           loomrt_tensor *out) noexcept {
  out->name = name.c_str();
  out->dtype = static_cast<loomrt_dtype>(tensor.dtype);
  out->rank = tensor.shape.size();
  out->shape = tensor.shape.data();
  out->data = const_cast<uint8_t *>(tensor.data.data());
  out->nbytes = tensor.data.size();
}

} // namespace loomrt::capi

#endif // LOOMRT_SRC_CAPISUPPORT_H
