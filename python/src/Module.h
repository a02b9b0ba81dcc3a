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
} // namespace loom::python

#endif // LOOM_PYTHON_MODULE_H
