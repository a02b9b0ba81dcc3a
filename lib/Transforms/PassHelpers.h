//===- PassHelpers.h - Small helpers the transforms share -------*- C++ -*-===//
//
// Questions the pattern-matching passes (loom-fuse-attention,
// loom-recognize-dropout) ask of a value, and clean-ups they share.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PASSHELPERS_H
#define LOOM_LIB_TRANSFORMS_PASSHELPERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"

#include <optional>

namespace loom {

/// The value of `v` if it is a scalar constant: a splat or one-element
/// `loom.constant`, possibly broadcast (`loom.broadcast_in_dim`) or
/// reshaped. Booleans give 0 or 1, integers their signed value.
std::optional<double> scalarConstant(mlir::Value v);

/// Replaces every `loom.dropout` under `root` by its input (the identity);
/// returns how many.
int64_t removeDropouts(mlir::Operation *root);

/// What removing dropouts leaves in `func`, cleaned up: multiplications by
/// a scalar constant 1 (a drop-path mask of ones) become their other
/// operand, ops nothing reads any more go, then the `loom.rng_seed`
/// argument if nothing reads it.
mlir::LogicalResult cleanUpAfterDropout(mlir::func::FuncOp func);

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_PASSHELPERS_H
