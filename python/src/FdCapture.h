//===- FdCapture.h - Capture output; run work in a child -------*- C++ -*-===//
//
// MLIR, LLVM and Loom's driver print diagnostics to stderr (llvm::errs(),
// fd 2) and reports to stdout; the Python bindings hand them back as
// strings by pointing the descriptor at a temporary file for the length of
// a call (FdCapture), or by running the call in a forked child process
// whose descriptors point there (runIsolated), so that a compiler that
// crashes, aborts or calls exit() ends the child and not the Python
// process.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PYTHON_FDCAPTURE_H
#define LOOM_PYTHON_FDCAPTURE_H

#include <cstdio>
#include <functional>
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

/// Held while a descriptor is captured or a child process runs the
/// compiler: one capture (and one compilation) at a time in the process.
/// It also keeps a fork from happening while another thread of this
/// module is inside LLVM (and may hold one of its locks).
std::mutex &captureMutex();

/// What runIsolated's child process did.
struct IsolatedRun {
  /// What the child wrote to its stdout and stderr.
  std::string out, err;
  /// What `work` put in its argument (when it returned).
  std::string result;
  /// Whether `work` returned; then `code` is what it returned.
  bool finished = false;
  int code = 0;
  /// The signal that ended the child (0: none): a crash.
  int signal = 0;
  /// Whether the child called exit() itself, before `work` returned
  /// (llvm::report_fatal_error and reportFatalUsageError do); then
  /// `code` is the exit status.
  bool exited = false;
  /// Whether `interrupted` asked to stop: the child was killed.
  bool interrupted = false;
  /// Why no child could be started (fork, pipe or temporary file).
  std::string startError;
  /// Why how the child ended is not known (SIGCHLD ignored: the kernel
  /// reaped it).
  std::string statusLost;

  /// A sentence saying how `who` ("the compiler") failed when `work` did
  /// not return, e.g. "the compiler crashed (signal 11, Segmentation
  /// fault)", with LLVM's "LLVM ERROR: ..." or "UNREACHABLE executed ..."
  /// line from `err` when there is one; empty when it returned.
  std::string failure(const std::string &who) const;
};

/// Runs `work` in a forked child process and waits for it: the child's
/// stdout and stderr go to temporary files, LLVM's crash handlers print a
/// stack dump there on a crash (`programName` heads it), and the child
/// ends with _exit() so nothing of the parent (Python's state, buffered
/// files, static destructors) runs in it. `work` gets a string for what
/// it hands back and returns an exit code. `interrupted` is called about
/// ten times a second while the child runs; when it returns true the
/// child is killed and the result says so.
///
/// The caller holds captureMutex() and not the GIL, and `work` must not
/// touch Python: the child has only the forking thread.
IsolatedRun runIsolated(const std::function<int(std::string &result)> &work,
                        const char *programName,
                        const std::function<bool()> &interrupted);

} // namespace loom::python

#endif // LOOM_PYTHON_FDCAPTURE_H
