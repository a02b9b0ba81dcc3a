//===- Compiler.cpp - loomc inside the Python process ---------------------===//
//
// loom.compile and loom.ir call loomc's driver in-process
// (loom::loomcRunEmbedded) with a command line the Python side builds. The
// driver writes its diagnostics to stderr and reports to stdout; both are
// captured at the file-descriptor level for the length of the call (so
// output from LLVM, MLIR and the linker it runs is caught too) and handed
// back with the exit code. The GIL is released while the compiler runs.
//
//===----------------------------------------------------------------------===//

#include "Module.h"

#include "loom/Driver/Loomc.h"

#include <pybind11/stl.h>

#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace py = pybind11;

namespace {

/// Sends file descriptor `fd` to an anonymous temporary file until
/// finish(), which restores it and returns what was written.
class FdCapture {
public:
  explicit FdCapture(int fd) : fd(fd) {
    file = std::tmpfile();
    saved = ::dup(fd);
    if (!file || saved < 0 || ::dup2(::fileno(file), fd) < 0)
      throw std::runtime_error("loom: cannot redirect file descriptor " +
                               std::to_string(fd) + " to capture output");
  }
  FdCapture(const FdCapture &) = delete;
  FdCapture &operator=(const FdCapture &) = delete;
  ~FdCapture() { finish(); }

  std::string finish() {
    std::string text;
    if (saved < 0)
      return text;
    ::dup2(saved, fd);
    ::close(saved);
    saved = -1;
    std::rewind(file);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;)
      text.append(buf, n);
    std::fclose(file);
    return text;
  }

private:
  int fd;
  int saved = -1;
  std::FILE *file = nullptr;
};

/// One compilation at a time: LLVM's command-line parser is global.
std::mutex compilerMutex;

/// Runs loomc with `args` (argv[1..]); returns (exit code, stdout, stderr).
py::tuple runLoomc(const std::vector<std::string> &args) {
  std::vector<std::string> argvStrings;
  argvStrings.reserve(args.size() + 1);
  argvStrings.push_back("loomc");
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &s : argvStrings)
    argv.push_back(s.data());
  argv.push_back(nullptr);

  int rc = 0;
  std::string out, err;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(compilerMutex);
    std::fflush(stdout);
    std::fflush(stderr);
    FdCapture captureOut(1), captureErr(2);
    rc = loom::loomcRunEmbedded(static_cast<int>(argv.size() - 1), argv.data());
    std::fflush(stdout);
    std::fflush(stderr);
    err = captureErr.finish();
    out = captureOut.finish();
  }
  return py::make_tuple(rc, py::bytes(out), py::bytes(err));
}

} // namespace

void loom::python::registerCompiler(py::module_ &m) {
  m.def("run_loomc", &runLoomc, py::arg("args"),
        "Runs loomc in this process with the command line `args` (without "
        "the program name). Returns (exit_code, stdout_bytes, stderr_bytes).");
}
