//===- GenericBody.h - A linalg.generic's body, inlined -------*- C++ -*-===//
//
// The loop lowerings of Loom's own (CPU reductions, GPU thread mappings)
// evaluate a linalg.generic's body at loop indices they build themselves.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_UTILS_GENERICBODY_H
#define LOOM_CONVERSION_UTILS_GENERICBODY_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace loom {

/// Clones the body of `op` (all but its yield) at `b`'s insertion point:
/// `map` must map the body's block arguments (and may map outer values);
/// each `linalg.index d` becomes `ivs[d]`. Returns the values the body
/// yields, mapped. `map` keeps what the clone added.
llvm::SmallVector<mlir::Value> inlineGenericBody(mlir::OpBuilder &b,
                                                 mlir::linalg::GenericOp op,
                                                 mlir::IRMapping &map,
                                                 mlir::ValueRange ivs);

} // namespace loom

#endif // LOOM_CONVERSION_UTILS_GENERICBODY_H
