//===- Module.h - The parts of the loom._loom extension module -*- C++ -*-===//

#ifndef LOOM_PYTHON_MODULE_H
#define LOOM_PYTHON_MODULE_H

#include <pybind11/pybind11.h>

namespace loom::python {
/// loomc in-process (Compiler.cpp).
void registerCompiler(pybind11::module_ &m);
/// Pass pipelines on IR text and on parsed modules (Passes.cpp), and the
/// Module, Operation and Value classes of passes written in Python (Ir.cpp).
void registerPasses(pybind11::module_ &m);
/// Artifacts and training through the runtime's C API (Runtime.cpp).
void registerRuntime(pybind11::module_ &m);

/// Called without the GIL (it takes it): runs Python's pending signal
/// handlers and says whether one raised (Ctrl-C's KeyboardInterrupt); the
/// exception is then set for this thread. runIsolated's `interrupted`.
bool pythonSignalRaised();
/// With the GIL, after a child process ended with `signal`: for SIGINT and
/// SIGTERM, raises the exception a Python handler of it raises (Ctrl-C
/// reaches the child as well as Python), if any. (Compiler.cpp)
void raisePendingInterrupt(int signal);
} // namespace loom::python

#endif // LOOM_PYTHON_MODULE_H
