//===- FuseRecompute.h - Recompute cheap values instead of storing them ---===//
//
// Part of loom-fuse (Fuse.cpp): once the ops are grouped, a pointwise value
// that a later group reads would be written by its group and read back;
// FuseRecompute.cpp clones its pointwise producers into the reader instead,
// when that costs no more big tensors to read.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_FUSERECOMPUTE_H
#define LOOM_LIB_TRANSFORMS_FUSERECOMPUTE_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/SmallVector.h"

namespace loom {

/// For each value of at least `minElements` elements made by a pointwise
/// op of one group and read by later groups (the forward activation a
/// backward kernel reads), clones the pointwise ops that make it from
/// values the reading group reads anyway (plus at most one other big
/// tensor) into each reading group, when no host step or the return reads
/// it: its group then no longer writes it, and nothing keeps it alive.
/// With `cheapOnly`, only ops of an instruction or two per element are
/// recomputed (add, sub, mul, neg, abs, max, min, relu, select, compare,
/// broadcasts).
/// `groups` are fuse's groups in program order (each consecutive once
/// constants are ignored); clones go before a group's first op and join
/// it, originals left without users are erased. Returns the number of
/// values no longer written.
int64_t recomputeAcrossGroups(
    llvm::SmallVectorImpl<llvm::SmallVector<mlir::Operation *>> &groups,
    int64_t minElements, bool cheapOnly);

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_FUSERECOMPUTE_H
