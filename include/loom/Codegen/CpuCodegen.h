//===- CpuCodegen.h - Kernels, plan and artifact for the CPU ----*- C++ -*-===//
//
// The last phases of `loomc --target=cpu`: every loom.fusion region of a
// fused, memory-planned module becomes one kernel function (lowered through
// linalg, bufferization and loops to LLVM, then to native code in one shared
// object linked with lld), and every entry point becomes a list of steps
// over its arena (docs/plan-format.md: kernel, gemm, copy), written as
// plan.json.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_CPUCODEGEN_H
#define LOOM_CODEGEN_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace loom {

/// Outlines each loom.fusion of `module` into a kernel function (tensor
/// semantics, still loom ops) of a new module. The kernel of the fusion op
/// `op` is named by its `loom.kernel` attribute, set here.
mlir::OwningOpRef<mlir::ModuleOp> outlineKernels(mlir::ModuleOp module);

/// Lowers a module of outlined kernels to the LLVM dialect: loom to linalg,
/// elementwise fusion, one-shot bufferization with results as out-params,
/// loops, LLVM. Kernels take bare pointers (inputs, then outputs).
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels);

/// Compiles an LLVM-dialect kernel module to a shared object at `path` for
/// the host CPU (LLVM -O3, then ld.lld). Each kernel is exported with the
/// plan's ABI `void name(void **buffers)`.
mlir::LogicalResult emitSharedObject(mlir::ModuleOp kernels,
                                     const std::string &path,
                                     std::string &error);

/// Writes plan.json for the fused, planned `module` (docs/plan-format.md).
mlir::LogicalResult writePlan(mlir::ModuleOp module, const std::string &path,
                              bool hasKernels, const std::string &sourceModel,
                              std::string &error);

} // namespace loom

#endif // LOOM_CODEGEN_CPUCODEGEN_H
