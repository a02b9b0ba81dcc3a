//===- DataParallel.h - Data parallelism and ZeRO in the training step ----===//
//
// What loom-optimizer adds to @train_step when it runs on n ranks
// (`dp` > 1): the ranks of mesh axis "dp" each run the step on their own
// batch, and the gradients and the loss are averaged over them. With `zero`
// (ZeRO, Rajbhandari et al. 2020) each rank keeps one shard of every
// optimizer state tensor (1), also receives only its shard of every
// gradient (2), and keeps only its shard of every parameter, gathering the
// whole before the forward (3). A shard is a block of the tensor flattened
// and zero-padded to n equal blocks (kShardAttr); the zeros stay zero
// through every elementwise update rule.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_DATAPARALLEL_H
#define LOOM_LIB_TRANSFORMS_DATAPARALLEL_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace loom {

struct DataParallel {
  int64_t ranks = 1;
  int64_t zero = 0;
  std::string axis = "dp";

  bool enabled() const { return ranks > 1; }
  /// ZeRO 1 and up: optimizer state (and the update) in shards.
  bool shardsUpdate() const { return enabled() && zero >= 1; }
  /// ZeRO 3: parameters in shards between steps.
  bool shardsParams() const { return enabled() && zero >= 3; }

  /// Checks the options and sets the module's mesh.
  llvm::LogicalResult setUp(mlir::ModuleOp module, llvm::StringRef optimizer);

  /// The type of one rank's shard of a `full` tensor: [ceil(numel / n)].
  mlir::RankedTensorType shardType(mlir::RankedTensorType full) const;
  /// The kShardAttr of a shard of `full`.
  mlir::DictionaryAttr shardAttr(mlir::Builder &b,
                                 mlir::RankedTensorType full) const;

  /// `x` averaged over the ranks (the loss, plain DP gradients, buffers).
  mlir::Value mean(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x) const;
  /// A sum over the ranks of each rank's partial sums (0-D).
  mlir::Value sum(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x) const;
  /// The gradient `g` of parameter `param` averaged over the ranks, the
  /// collective marked kGradientOfAttr = `param` (the plan's "grad", which
  /// the runtime's gradient compression keys its state by).
  mlir::Value gradientMean(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Value g, llvm::StringRef param) const;
  /// This rank's shard of the averaged gradient `g` of `param`: all-reduce
  /// then slice (ZeRO 1), reduce-scatter (2 and 3), marked as above.
  mlir::Value gradientShard(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value g, llvm::StringRef param) const;
  /// This rank's shard of the whole `x`.
  mlir::Value localShard(mlir::OpBuilder &b, mlir::Location loc,
                         mlir::Value x) const;
  /// The whole tensor of type `full` from every rank's `shard`.
  mlir::Value gather(mlir::OpBuilder &b, mlir::Location loc, mlir::Value shard,
                     mlir::RankedTensorType full) const;

  /// ZeRO 3: makes every entry point that takes whole parameters (all but
  /// @train_step, @apply_gradients and @apply_optimizer, which take
  /// shards) take this rank's shards of them
  /// (as @train_step does) and all-gather them first. The original body is
  /// kept as a private function the new entry calls (and @train_step too,
  /// where it called it), which inlining removes.
  llvm::LogicalResult shardEntryParams(mlir::ModuleOp module) const;

private:
  /// `x` flattened and zero-padded to n blocks.
  mlir::Value flatten(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value x) const;
};

} // namespace loom

#endif // LOOM_LIB_TRANSFORMS_DATAPARALLEL_H
