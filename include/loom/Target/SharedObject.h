//===- SharedObject.h - Host kernels to a shared object ---------*- C++ -*-===//

#ifndef LOOM_TARGET_SHAREDOBJECT_H
#define LOOM_TARGET_SHAREDOBJECT_H

#include "loom/Codegen/Kernels.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace loom {

/// Compiles an LLVM-dialect kernel module to a shared object at `path` for
/// the host CPU (LLVM -O3, then ld.lld). Each kernel is exported with the
/// plan's ABI `void name(void **buffers)`; so is each emulated launch, and
/// then the object links `emulatorLibrary` (test/lib/GpuEmulator).
mlir::LogicalResult
emitSharedObject(mlir::ModuleOp kernels, const std::string &path,
                 std::string &error,
                 llvm::ArrayRef<EmulatedLaunch> emulated = {},
                 const std::string &emulatorLibrary = "");

} // namespace loom

#endif // LOOM_TARGET_SHAREDOBJECT_H
