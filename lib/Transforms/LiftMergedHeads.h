//===- LiftMergedHeads.h - Attention on [B*H, T, S] as [B, H, T, S] -*- C++
//-*-===//
//
// Part of loom-fuse-attention (LiftMergedHeads.cpp has the rewrite).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_LIFTMERGEDHEADS_H
#define LOOM_LIB_TRANSFORMS_LIFTMERGEDHEADS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {

/// Rebuilds on [B, H, T, S] each attention chain of `func` whose scores and
/// product with the values are computed on [B*H, ...] around a 4-D softmax
/// (BLOOM's), so that loom-fuse-attention's matcher sees its usual form;
/// every value the function computes is unchanged. The 3-D ops it replaced
/// are left for the caller to erase. Returns how many chains it rebuilt.
int64_t liftMergedHeads(mlir::func::FuncOp func);

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_LIFTMERGEDHEADS_H
