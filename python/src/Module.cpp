//===- Module.cpp - The loom._loom extension module -----------------------===//
//
// The native half of the `loom` Python package (python/loom/): the
// compiler, pass pipelines and the runtime, each registered by its own file.
//
//===----------------------------------------------------------------------===//

#include "Module.h"

PYBIND11_MODULE(_loom, m) {
  m.doc() = "Native part of the loom package: use `import loom`.";
  loom::python::registerCompiler(m);
  loom::python::registerPasses(m);
  loom::python::registerRuntime(m);
}
