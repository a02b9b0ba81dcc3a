//===- SharedObject.h - Host kernels to a shared object ---------*- C++ -*-===//

#ifndef LOOM_TARGET_SHAREDOBJECT_H
#define LOOM_TARGET_SHAREDOBJECT_H

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace loom {

/// What a caller adds to a shared object (the tests' GPU emulator: the
/// launches that run its per-thread functions, and its library).
struct SharedObjectExtras {
  /// Called on the LLVM module after the ABI wrappers, before -O3.
  std::function<void(llvm::Module &)> addToModule;
  /// Shared libraries to link, each with its directory as an rpath.
  std::vector<std::string> libraries;
};

/// Compiles an LLVM-dialect kernel module to a shared object at `path` for
/// the host CPU (LLVM -O3, then ld.lld). Each kernel is exported with the
/// plan's ABI `void name(void **buffers)`.
mlir::LogicalResult emitSharedObject(mlir::ModuleOp kernels,
                                     const std::string &path,
                                     std::string &error,
                                     const SharedObjectExtras &extras = {});

} // namespace loom

#endif // LOOM_TARGET_SHAREDOBJECT_H
