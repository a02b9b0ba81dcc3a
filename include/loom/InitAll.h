//===- InitAll.h - Registers everything Loom's tools know -------*- C++ -*-===//
//
// The one place that lists the dialects and passes Loom's tools load, so
// loom-opt, loomc and the Python bindings agree on what they accept.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_INITALL_H
#define LOOM_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace loom {
/// Adds the loom dialect and the upstream dialects Loom's IR uses.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Adds, on top of registerAllDialects, the dialects and interface models
/// code generation uses (linalg, bufferization, LLVM, ...).
void registerCodegenDialects(mlir::DialectRegistry &registry);
/// Registers Loom's passes and pipelines with the global registry.
void registerAllPasses();
} // namespace loom

#endif // LOOM_INITALL_H
