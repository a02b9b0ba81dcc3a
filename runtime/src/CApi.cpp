//===- CApi.cpp - C entry points over the C++ runtime ---------------------===//
//
// Each function converts C++ results to a loomrt_status and never lets an
// exception cross the C boundary.
//
//===----------------------------------------------------------------------===//

#include "loomrt/loomrt.h"

#include "loomrt/ErrorCode.h"
#include "loomrt/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#ifndef LOOMRT_VERSION_STRING
#error "LOOMRT_VERSION_STRING must be defined by the build"
#endif

using loomrt::ErrorCode;

// The C enum mirrors the C++ one; keep them from drifting apart.
static_assert(static_cast<int>(ErrorCode::InvalidArgument) ==
                  LOOMRT_ERROR_INVALID_ARGUMENT,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::IO) == LOOMRT_ERROR_IO,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::Format) == LOOMRT_ERROR_FORMAT,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::Unsupported) ==
                  LOOMRT_ERROR_UNSUPPORTED,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::NoDevice) == LOOMRT_ERROR_NO_DEVICE,
              "ErrorCode and loomrt_status differ");
static_assert(static_cast<int>(ErrorCode::OutOfMemory) ==
                  LOOMRT_ERROR_OUT_OF_MEMORY,
              "ErrorCode and loomrt_status differ");

namespace {

thread_local std::string lastError;

/// Records `message` as this thread's last error and returns `status`. If the
/// copy fails for lack of memory, a fixed message stands in for it.
loomrt_status setError(loomrt_status status, const char *message) noexcept {
  try {
    lastError = message;
  } catch (...) {
    lastError.clear();
    return LOOMRT_ERROR_OUT_OF_MEMORY;
  }
  return status;
}

loomrt_status setError(loomrt_status status,
                       const std::string &message) noexcept {
  return setError(status, message.c_str());
}

loomrt_status clearError() noexcept {
  lastError.clear();
  return LOOMRT_OK;
}

} // namespace

extern "C" {

const char *loomrt_version(void) { return LOOMRT_VERSION_STRING; }

const char *loomrt_status_string(loomrt_status status) {
  switch (status) {
  case LOOMRT_OK:
    return "LOOMRT_OK";
  case LOOMRT_ERROR_INVALID_ARGUMENT:
    return "LOOMRT_ERROR_INVALID_ARGUMENT";
  case LOOMRT_ERROR_IO:
    return "LOOMRT_ERROR_IO";
  case LOOMRT_ERROR_FORMAT:
    return "LOOMRT_ERROR_FORMAT";
  case LOOMRT_ERROR_UNSUPPORTED:
    return "LOOMRT_ERROR_UNSUPPORTED";
  case LOOMRT_ERROR_NO_DEVICE:
    return "LOOMRT_ERROR_NO_DEVICE";
  case LOOMRT_ERROR_OUT_OF_MEMORY:
    return "LOOMRT_ERROR_OUT_OF_MEMORY";
  }
  return "LOOMRT_UNKNOWN_STATUS";
}

const char *loomrt_last_error(void) { return lastError.c_str(); }

loomrt_status loomrt_safetensors_inspect(const char *path, char *buf,
                                         size_t buflen) {
  if (!path || !buf || buflen == 0)
    return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                    "loomrt_safetensors_inspect: path and buf must be non-null "
                    "and buflen positive");
  buf[0] = '\0';
  try {
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    std::unique_ptr<loomrt::SafetensorsFile> file =
        loomrt::SafetensorsFile::open(path, &error, &code);
    if (!file)
      return setError(static_cast<loomrt_status>(code), error);
    std::string summary = loomrt::formatSafetensorsSummary(*file);
    size_t copied = std::min(summary.size(), buflen - 1);
    std::memcpy(buf, summary.data(), copied);
    buf[copied] = '\0';
    if (copied < summary.size())
      return setError(LOOMRT_ERROR_INVALID_ARGUMENT,
                      std::string(path) + ": summary needs " +
                          std::to_string(summary.size() + 1) +
                          " bytes, buffer has " + std::to_string(buflen));
    return clearError();
  } catch (...) {
    // Only allocation can throw above.
    return setError(LOOMRT_ERROR_OUT_OF_MEMORY,
                    "loomrt_safetensors_inspect: out of memory");
  }
}

} // extern "C"
