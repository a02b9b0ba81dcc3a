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

#include "FdCapture.h"
#include "Module.h"

#include "loom/Driver/Loomc.h"

#include <pybind11/stl.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

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
    // One compilation at a time: LLVM's command-line parser is global (and
    // so are the file descriptors captured).
    std::lock_guard<std::mutex> lock(loom::python::captureMutex());
    std::fflush(stdout);
    std::fflush(stderr);
    loom::python::FdCapture captureOut(1), captureErr(2);
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
