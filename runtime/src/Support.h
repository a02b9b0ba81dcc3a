//===- Support.h - Internal helpers shared by the runtime's file formats --===//
//
// Error reporting, message formatting, whole-file reads and atomic writes used
// by Safetensors.cpp and Npy.cpp. Not installed and not part of the API.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_SUPPORT_H
#define LOOMRT_SRC_SUPPORT_H

#include "loomrt/ErrorCode.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

namespace loomrt::detail {

/// Copies a failure to the caller's out-params, if any. Never throws (the
/// bodies live in Support.cpp, which is built with exceptions, so that this
/// header stays usable from -fno-exceptions code such as the unit tests).
struct ErrorSink {
  std::string *error;
  ErrorCode *code;

  void set(ErrorCode c, std::string message) const noexcept;
  /// Reports OutOfMemory with the message "<path>: out of memory".
  void outOfMemory(const std::string &path) const noexcept;
  void ok() const noexcept {
    if (code)
      *code = ErrorCode::Ok;
  }
};

/// Closes a file descriptor on scope exit.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0)
      ::close(fd);
  }
};

/// Makes a name or value printable on one line: control bytes and backslashes
/// are escaped, everything else (UTF-8 included) passes through.
std::string escape(std::string_view text);

/// `text` escaped and in single quotes: 'fc1.weight'.
std::string quoteName(std::string_view text);

/// "[2, 3]"; "[]" for a scalar.
std::string formatShape(const std::vector<int64_t> &shape);

/// True if `text` is well-formed UTF-8 (no overlong forms or surrogates).
bool isValidUtf8(std::string_view text);

/// `dir` + "/" + `name` ("name" alone when `dir` is empty).
std::string joinPath(const std::string &dir, const std::string &name);

/// strerror(err) as a string.
std::string errnoText(int err);

/// Reads the regular file at `path` into `out`. On failure reports IO through
/// `sink` with a message starting "<path>: " and returns false. May throw
/// std::bad_alloc.
bool readWholeFile(const std::string &path, std::vector<uint8_t> &out,
                   const ErrorSink &sink);

/// A borrowed run of bytes.
/// `size` bytes at `data`; a null `data` with a positive size is that many
/// zero bytes (written as a hole: a sparse file where the file system
/// allows it, read back as zeros).
struct ByteSpan {
  const uint8_t *data;
  size_t size;
};

/// Writes the concatenation of `pieces` to `path` atomically: to
/// "<path>.tmp.<pid>" (never through a symlink), fsync, rename over `path`,
/// fsync the directory. On failure reports IO through `sink` with a message
/// starting "<path>: " and returns false; no temporary file is left behind,
/// also when std::bad_alloc escapes.
bool writeFileAtomically(const std::string &path,
                         const std::vector<ByteSpan> &pieces,
                         const ErrorSink &sink);

} // namespace loomrt::detail

#endif // LOOMRT_SRC_SUPPORT_H
