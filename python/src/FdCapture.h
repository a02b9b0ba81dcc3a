//===- FdCapture.h - Capture what a file descriptor receives ----*- C++ -*-===//
//
// MLIR, LLVM and Loom's driver print diagnostics to stderr (llvm::errs(),
// fd 2) and reports to stdout; the Python bindings hand them back as
// strings by pointing the descriptor at a temporary file for the length of
// a call.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PYTHON_FDCAPTURE_H
#define LOOM_PYTHON_FDCAPTURE_H

#include <cstdio>
#include <mutex>
#include <string>

namespace loom::python {

/// Sends file descriptor `fd` to an anonymous temporary file until
/// finish() (or destruction), which restores it and returns what was
/// written.
class FdCapture {
public:
  explicit FdCapture(int fd);
  FdCapture(const FdCapture &) = delete;
  FdCapture &operator=(const FdCapture &) = delete;
  ~FdCapture() { finish(); }

  std::string finish();

private:
  int fd;
  int saved = -1;
  std::FILE *file = nullptr;
};

/// Held while a descriptor is captured: one capture (and one compilation)
/// at a time in the process.
std::mutex &captureMutex();

} // namespace loom::python

#endif // LOOM_PYTHON_FDCAPTURE_H
