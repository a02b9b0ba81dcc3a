//===- TensorParallel.h - Megatron-style tensor parallelism -----*- C++ -*-===//
//
// What loom-tensor-parallel decides and what loom-optimizer needs from it.
// The forward is split over the ranks of mesh axis "tp" as Megatron-LM
// splits a transformer (Shoeybi et al. 2019): a linear layer whose input is
// whole on every rank keeps a block of its output columns (column-parallel),
// the layer that reads that split activation keeps the matching block of
// its input rows (row-parallel) and the ranks' partial products are summed
// by a loom.all_reduce. Parameters split this way are marked kShardAttr with
// the split dimension: {axis = "tp", shape = whole, dim = d, groups = G},
// where a fused projection (GPT-2's c_attn, [C, 3C] for query, key and
// value) is cut into G groups and each rank keeps its block of every group.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TENSORPARALLEL_H
#define LOOM_LIB_TRANSFORMS_TENSORPARALLEL_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace loom {

/// The mesh axis tensor parallelism splits over.
inline constexpr llvm::StringLiteral kTensorParallelAxis = "tp";

/// Whether parameter argument `i` of `func` is split over the "tp" axis.
bool isTensorParallelShard(mlir::func::FuncOp func, unsigned i);

/// Makes @forward_backward return the gradients of the one-process loss.
/// Autodiff differentiates the sum over the ranks of each rank's loss
/// (the collectives' gradient rules), and with tensor parallelism every
/// rank computes the same loss: a split parameter's gradient is n times
/// its share, and a whole parameter's gradient on each rank is n times the
/// part of the true gradient that flows through that rank's blocks. So a
/// split parameter's gradient is divided by n, and a whole parameter's is
/// averaged over the "tp" ranks. Grad results of split parameters get the
/// parameter's kShardAttr. No-op without a "tp" axis larger than 1.
llvm::LogicalResult fixTensorParallelGradients(mlir::func::FuncOp fb);

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_TENSORPARALLEL_H
