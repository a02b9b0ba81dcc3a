//===- LoomOps.h - Operations of the loom dialect ---------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_H
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomInterfaces.h"

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.h.inc"

namespace loom {

/// On a convolution (`loom.conv2d` and its two gradients): the plan runs
/// it as a library call (a `conv` step: oneDNN on the CPU) rather than as
/// a generated kernel. Set by `loom-conv-to-gemm` with `library-convs`.
constexpr llvm::StringLiteral kLibraryCallAttr = "loom.library_call";

/// Ops the plan runs itself as library calls (BLAS/cuBLASLt GEMMs, oneDNN
/// convolutions), which loom-fuse leaves outside the kernels.
inline bool isLibraryCall(mlir::Operation *op) {
  if (mlir::isa<MatmulOp>(op))
    return true;
  return mlir::isa<Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp>(op) &&
         op->hasAttr(kLibraryCallAttr);
}

/// The name of the model node `loc` comes from (the ONNX node's or the JSON
/// node's id: a NameLoc, or the first one in a FusedLoc or call site), or
/// "" when it has none.
std::string nodeName(mlir::Location loc);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_H
