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

} // namespace loomrt::capi

#endif // LOOMRT_SRC_CAPISUPPORT_H
