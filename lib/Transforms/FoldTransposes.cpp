//===- FoldTransposes.cpp - Transposes into the GEMMs that read them ------===//
//
// `loom-fold-transposes`: a transpose of the two innermost dimensions that
// feeds a `loom.matmul` becomes the matmul's transpose flag, and a matmul
// whose only reader transposes its result computes the transposed product
// directly, (A B)^T = B^T A^T. A library GEMM reads either layout at the same
// speed, where the transpose is a kernel that writes the whole matrix: a
// tied language-model head (ONNX `MatMul(h, Transpose(wte))`) otherwise
// transposes the 50304 x 256 embedding forward and its gradient backward at
// every step. Runs after autodiff (so both directions benefit) and before
// loom-fuse. Repeats until nothing changes: a folded product may feed
// another transpose.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_FOLDTRANSPOSESPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// Whether `perm` swaps the last two dimensions and keeps the others.
bool swapsInnermost(ArrayRef<int64_t> perm) {
  int64_t rank = perm.size();
  if (rank < 2 || perm[rank - 1] != rank - 2 || perm[rank - 2] != rank - 1)
    return false;
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (perm[i] != i)
      return false;
  return true;
}

/// The input of a transpose that swaps the innermost dimensions, if `v` is
/// one.
Value innermostTransposeInput(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return t && swapsInnermost(t.getPerm()) ? t.getX() : Value();
}

/// matmul(transpose(x), ...) -> matmul(x, ...) {transpose_a}, and so for
/// the rhs.
bool foldOperands(MatmulOp mm) {
  bool changed = false;
  if (Value x = innermostTransposeInput(mm.getLhs())) {
    mm.getLhsMutable().assign(x);
    mm.setTransposeA(!mm.getTransposeA());
    changed = true;
  }
  if (Value x = innermostTransposeInput(mm.getRhs())) {
    mm.getRhsMutable().assign(x);
    mm.setTransposeB(!mm.getTransposeB());
    changed = true;
  }
  return changed;
}

/// transpose(matmul(a, b)) -> matmul(b, a) with both flags flipped, when the
/// transpose is the product's only reader and both operands have the same
/// rank (a shared rank-2 rhs can only be the rhs), and no bias is added to
/// the product's rows.
bool foldResult(TransposeOp t) {
  auto mm = t.getX().getDefiningOp<MatmulOp>();
  if (!mm || !swapsInnermost(t.getPerm()) || !mm->hasOneUse() ||
      mm.getBias())
    return false;
  auto lt = cast<RankedTensorType>(mm.getLhs().getType());
  auto rt = cast<RankedTensorType>(mm.getRhs().getType());
  if (lt.getRank() != rt.getRank())
    return false;
  OpBuilder b(t);
  auto swapped = MatmulOp::create(b, t.getLoc(), t.getResult().getType(),
                                  mm.getRhs(), mm.getLhs(), Value(),
                                  !mm.getTransposeB(), !mm.getTransposeA());
  t.getResult().replaceAllUsesWith(swapped.getResult());
  t.erase();
  mm.erase();
  return true;
}

struct FoldTransposesPass
    : public loom::impl::FoldTransposesPassBase<FoldTransposesPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      bool changed = true;
      while (changed) {
        changed = false;
        SmallVector<TransposeOp> transposes;
        func.walk([&](TransposeOp t) { transposes.push_back(t); });
        for (TransposeOp t : transposes)
          if (foldResult(t)) {
            ++numResults;
            changed = true;
          }
        func.walk([&](MatmulOp mm) {
          if (foldOperands(mm)) {
            ++numOperands;
            changed = true;
          }
        });
        // Transposes nothing reads any more.
        SmallVector<TransposeOp> dead;
        func.walk([&](TransposeOp t) {
          if (t->use_empty())
            dead.push_back(t);
        });
        for (TransposeOp t : dead)
          t.erase();
      }
    });
  }
};
} // namespace
