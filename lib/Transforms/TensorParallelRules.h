//===- TensorParallelRules.h - How splits propagate through ops -*- C++ -*-===//
//
// loom-tensor-parallel's propagation: how a value lies on the "tp" ranks
// (Split) and one rule per op kind for the split of its results given its
// operands' (Propagation::visit and the methods it calls). Used by
// TensorParallel.cpp, which chooses the layers and rewrites the program.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TENSORPARALLELRULES_H
#define LOOM_LIB_TRANSFORMS_TENSORPARALLELRULES_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <map>
#include <set>
#include <string>

namespace loom::tensor_parallel {

using namespace mlir;

/// How a value lies on the ranks: whole (dim < 0), or split along `dim`:
/// the dimension cut into `groups` equal groups and each group into n
/// blocks, rank r holding block r of every group.
struct Split {
  int64_t dim = -1;
  int64_t groups = 1;
  bool isSplit() const { return dim >= 0; }
  bool operator==(const Split &o) const {
    return dim == o.dim && groups == o.groups;
  }
};

/// The outcome of propagating parameter splits through one function.
struct Propagation {
  Propagation(func::FuncOp func, int64_t ranks,
              std::map<unsigned, Split> params)
      : func(func), ranks(ranks), params(std::move(params)) {}

  mutable func::FuncOp func;
  int64_t ranks;
  /// Split parameters, by argument number (given, or decided on the way).
  std::map<unsigned, Split> params;
  /// Split values (everything else is whole).
  llvm::DenseMap<Value, Split> values;
  /// Matmuls whose results are partial sums: an all-reduce follows each.
  SmallVector<Operation *> partials;
  /// Cross-entropies whose logits are split along the classes (a
  /// vocabulary-parallel loss), rewritten with all-reduces.
  SmallVector<CrossEntropyOp> crossEntropies;
  /// Embedding lookups in a table split by rows (a vocabulary-parallel
  /// embedding): each rank looks up the ids in its block, and the ranks'
  /// rows are summed.
  SmallVector<GatherOp> embeddings;
  /// Results returned split (@predict's logits under a vocabulary-parallel
  /// head): all-gathered before the return.
  SmallVector<std::pair<Operation *, unsigned>> gathers;
  /// Whole operands (broadcasts or splat constants) a split op reads: each
  /// is rebuilt at the op in its local shape.
  SmallVector<std::pair<Operation *, unsigned>> localOperands;
  /// Where and why it failed.
  Operation *failedAt = nullptr;
  std::string why;

  Split of(Value v) const {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto it = params.find(arg.getArgNumber());
      return it == params.end() ? Split{} : it->second;
    }
    auto it = values.find(v);
    return it == values.end() ? Split{} : it->second;
  }

  bool fail(Operation *op, const Twine &msg) {
    failedAt = op;
    why = msg.str();
    return false;
  }

  /// An undecided parameter argument, or null.
  BlockArgument freeParam(Value v) const {
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg || !func.getArgAttr(arg.getArgNumber(), kParamAttr) ||
        params.count(arg.getArgNumber()) || pinned.count(arg.getArgNumber()))
      return {};
    return arg;
  }

  /// Parameters of layers the model marks whole (loom.tp = "whole").
  std::set<unsigned> pinned;

  /// Records `v` as split by `s`, if its dimension divides.
  bool set(Operation *op, Value v, Split s) {
    auto type = cast<RankedTensorType>(v.getType());
    int64_t size = type.getDimSize(s.dim);
    if (size % (ranks * s.groups) != 0)
      return fail(op, "dimension " + Twine(s.dim) + " (" + Twine(size) +
                          ") does not split into " + Twine(s.groups) +
                          " group(s) of " + Twine(ranks) + " ranks");
    if (auto arg = dyn_cast<BlockArgument>(v))
      params[arg.getArgNumber()] = s;
    else
      values[v] = s;
    return true;
  }

  bool run() {
    for (Operation &op : func.getBody().front())
      if (!visit(&op))
        return false;
    return true;
  }

  bool visit(Operation *op);
  bool matmul(MatmulOp op);
  bool pointwise(Operation *op);
  bool slice(SliceOp op, Split in);
  bool reshape(ReshapeOp op, Split in);
  bool attention(AttentionOp op);
  bool concat(ConcatOp op, ArrayRef<Split> in);
};


/// The number of groups a column-parallel layer's output falls into: G when
/// (after elementwise ops with one reader each, and reshapes of its leading
/// dimensions) every reader slices one of G equal consecutive blocks of the
/// last dimension (GPT-2's fused query, key and value), else 1.
int64_t outputGroups(MatmulOp op);

/// The function argument `v` is the 2-D transpose of, or null.
Value transposedParameter(Value v);

/// The local type of `type` split by `s` over `ranks`.
RankedTensorType localType(Type type, Split s, int64_t ranks);

} // namespace loom::tensor_parallel

#endif // LOOM_LIB_TRANSFORMS_TENSORPARALLELRULES_H
