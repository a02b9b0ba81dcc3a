//===- WidenKeepF32.cpp - keep_f32 ops compute in f32 ---------------------===//
//
// `loom-widen-keep-f32` (Passes.td): an op whose mixed-precision class is
// `keep_f32` (reductions, softmax, norms, losses) but whose float operands
// or results are 16-bit (mixed precision stores a softmax's output in 16
// bits; the backward sums 16-bit cotangents) is computed in f32: its 16-bit
// operands are widened, it runs on f32, and its 16-bit results are rounded
// once. Loom's kernels otherwise accumulate in the element type.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_WIDENKEEPF32PASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

bool isHalfTensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && (t.getElementType().isBF16() || t.getElementType().isF16());
}

Type widened(Type type) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(t.getShape(), Float32Type::get(t.getContext()),
                               t.getEncoding());
}

struct WidenKeepF32Pass
    : public loom::impl::WidenKeepF32PassBase<WidenKeepF32Pass> {
  using WidenKeepF32PassBase::WidenKeepF32PassBase;

  void runOnOperation() override {
    SmallVector<Operation *> ops;
    getOperation().walk([&](PrecisionClassOpInterface op) {
      if (op.getPrecisionClass() == PrecisionClass::KeepF32 &&
          (llvm::any_of(op->getOperandTypes(), isHalfTensor) ||
           llvm::any_of(op->getResultTypes(), isHalfTensor)))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      OpBuilder b(op);
      IRMapping map;
      for (Value v : op->getOperands())
        if (isHalfTensor(v.getType()))
          map.map(v, CastOp::create(b, op->getLoc(), widened(v.getType()), v));
      Operation *wide = b.clone(*op, map);
      for (OpResult r : wide->getResults())
        if (isHalfTensor(r.getType()))
          r.setType(widened(r.getType()));
      for (auto [old, next] : llvm::zip(op->getResults(), wide->getResults()))
        old.replaceAllUsesWith(
            old.getType() == next.getType()
                ? Value(next)
                : Value(CastOp::create(b, op->getLoc(), old.getType(), next)));
      op->erase();
      ++numWidened;
    }
  }
};

} // namespace
