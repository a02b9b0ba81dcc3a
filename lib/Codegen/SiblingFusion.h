//===- SiblingFusion.h - One loop for a kernel's same-shaped outputs ------===//
//
// Part of loom-bufferize-kernels: a kernel whose outputs are computed by
// several elementwise loops over the same domain (the AdamW update writes
// a parameter, its first and its second moment) becomes one loop with
// several outputs, so that each input is read once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_CODEGEN_SIBLINGFUSION_H
#define LOOM_LIB_CODEGEN_SIBLINGFUSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/OpDefinition.h"

namespace loom {

/// For elementwise fusion's control function: whether the all-parallel
/// producer of `fused`, which other ops read too, may be fused into its
/// reader anyway because the copy of its computation will merge back with
/// it (mergeSiblingGenerics): its other readers are the kernel's return
/// only, the reader is all-parallel over the same loop ranges, and the
/// reader's other operands exist before the producer.
bool fusesBackIntoSibling(mlir::OpOperand *fused);

/// Merges each all-parallel linalg.generic of `func`'s body into an earlier
/// one over the same static loop ranges whose position its operands
/// already dominate (empty tensors move up): one generic, the union of
/// their inputs, all their outputs. Identical computations in the merged
/// body are left for CSE. Returns the number of merges.
int64_t mergeSiblingGenerics(mlir::func::FuncOp func);

} // namespace loom

#endif // LOOM_LIB_CODEGEN_SIBLINGFUSION_H
