//===- Compiler.cpp - loomc, from Python ----------------------------------===//
//
// loom.compile and loom.ir call loomc's driver (loom::loomcRunEmbedded)
// with a command line the Python side builds, in a forked child process
// (runIsolated, FdCapture.h): a compiler that crashes, aborts or calls
// exit() (llvm::report_fatal_error) ends the child, and the caller gets
// the output so far (LLVM's stack dump included) and how it ended instead
// of losing the Python process. The driver writes its diagnostics to
// stderr and reports to stdout; the child's are captured at the
// file-descriptor level (so output from LLVM, MLIR and the linker it runs
// is caught too) and handed back with the exit code. The GIL is released
// while the compiler runs. With isolated=False (LOOM_NO_FORK=1 on the
// Python side) the driver runs in this process, as it did before.
//
//===----------------------------------------------------------------------===//

#include "FdCapture.h"
#include "Module.h"

#include "loom/Driver/Loomc.h"

#include "llvm/Support/PrettyStackTrace.h"

#include <pybind11/stl.h>

#include <csignal>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace py = pybind11;

bool loom::python::pythonSignalRaised() {
  py::gil_scoped_acquire gil;
  return PyErr_CheckSignals() != 0;
}

void loom::python::raisePendingInterrupt(int signal) {
  if (signal != SIGINT && signal != SIGTERM)
    return;
  // Ctrl-C reaches the child too (same process group): its end is the
  // KeyboardInterrupt Python has pending, not a compiler crash.
  if (PyErr_CheckSignals() != 0)
    throw py::error_already_set();
}

namespace {

/// Runs loomc with `args` (argv[1..]); returns (exit code, stdout, stderr,
/// failure, signal, ran): `failure` is None when the driver returned (its
/// exit code then), else a sentence on how the compiler ended (a crash:
/// signal is its number and the exit code minus it; exit() inside the
/// compiler: its status; not known: None); `ran` is false when no child
/// process could be started.
py::tuple runLoomc(const std::vector<std::string> &args, bool isolated) {
  std::vector<std::string> argvStrings;
  argvStrings.reserve(args.size() + 1);
  argvStrings.push_back("loomc");
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char *> argv;
  for (std::string &s : argvStrings)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(argv.size() - 1);

  loom::python::IsolatedRun run;
  {
    py::gil_scoped_release release;
    // One compilation at a time: LLVM's command-line parser is global (and
    // so are the file descriptors captured in this process).
    std::lock_guard<std::mutex> lock(loom::python::captureMutex());
    std::fflush(stdout);
    std::fflush(stderr);
    if (isolated) {
      run = loom::python::runIsolated(
          [&](std::string &) {
            // "Program arguments: loomc ..." heads the stack dump.
            llvm::PrettyStackTraceProgram stackTrace(argc, argv.data());
            return loom::loomcRunEmbedded(argc, argv.data());
          },
          "loomc", loom::python::pythonSignalRaised);
    } else {
      loom::python::FdCapture captureOut(1), captureErr(2);
      run.code = loom::loomcRunEmbedded(argc, argv.data());
      run.finished = true;
      std::fflush(stdout);
      std::fflush(stderr);
      run.err = captureErr.finish();
      run.out = captureOut.finish();
    }
  }
  if (run.interrupted)
    throw py::error_already_set(); // what pythonSignalRaised raised
  loom::python::raisePendingInterrupt(run.signal);
  py::object failure = py::none();
  py::object code = py::int_(run.signal ? -run.signal : run.code);
  if (!run.finished)
    failure = py::str(run.failure("the compiler"));
  if (!run.startError.empty() || !run.statusLost.empty())
    code = py::none(); // not known
  return py::make_tuple(code, py::bytes(run.out), py::bytes(run.err), failure,
                        run.signal, run.startError.empty());
}

} // namespace

void loom::python::registerCompiler(py::module_ &m) {
  m.def("run_loomc", &runLoomc, py::arg("args"), py::arg("isolated") = true,
        "Runs loomc with the command line `args` (without the program "
        "name), in a child process (isolated=True) or in this one. Returns "
        "(exit_code, stdout_bytes, stderr_bytes, failure, signal, ran): "
        "failure is None when loomc returned, else how it ended (a crash: "
        "signal is its number and exit_code its negative; exit() inside "
        "the compiler: exit_code its status; not known: None); ran is "
        "False when no child process could be started.");
}
