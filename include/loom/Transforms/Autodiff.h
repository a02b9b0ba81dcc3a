//===- Autodiff.h - Reverse-mode differentiation of a function --*- C++ -*-===//
//
// The core of loom-autodiff, for passes that differentiate functions of
// their own (loom-pipeline-stages differentiates each stage).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_AUTODIFF_H
#define LOOM_TRANSFORMS_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace loom {

/// An argument to differentiate with respect to, and the name its gradient
/// is returned under (`loom.grad = name`).
struct AutodiffTarget {
  mlir::BlockArgument arg;
  std::string name;
};

/// Turns `fb` (a single-block function; result `lossIndex` a 0-D float
/// loss) into its backward pass, in place: its results become the loss,
/// then one gradient per target in order (a zero constant when the loss
/// does not depend on it; marked `loom.grad`), then the results marked
/// `loom.buffer` as they were. The loss's cotangent is `seed` (a 0-D f32
/// value, cast to the loss's type) or 1. Ops nothing uses are erased.
/// `rulesApplied`, when given, counts the VJP rules built. On failure an
/// error is reported at the op without a rule and `fb` is left half built
/// (erase it).
mlir::LogicalResult buildBackward(mlir::func::FuncOp fb, unsigned lossIndex,
                                  llvm::ArrayRef<AutodiffTarget> targets,
                                  mlir::Value seed,
                                  unsigned *rulesApplied = nullptr);

} // namespace loom

#endif // LOOM_TRANSFORMS_AUTODIFF_H
