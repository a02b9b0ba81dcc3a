//===- MixedPrecision.cpp - GEMMs and convolutions in bf16 or fp16 --------===//
//
// `loom-mixed-precision` (Passes.td): each low-precision op reads 16-bit
// (bf16 or f16) copies of its f32 operands, computes in 16 bits and gives
// f32 to its users.
// The copies are made once per value, right after its definition (at the
// top of the function for an argument), so a weight read by several GEMMs
// is cast once per step.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

namespace loom {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// `type` with element type `element` (ranked tensors only).
Type withElement(Type type, Type element) {
  auto t = cast<RankedTensorType>(type);
  return RankedTensorType::get(t.getShape(), element, t.getEncoding());
}

bool isF32Tensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.getElementType().isF32();
}

struct MixedPrecisionPass
    : public loom::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnFunction(func::FuncOp func, Type low) {
    // value -> its low-precision copy
    llvm::DenseMap<Value, Value> copies;
    auto copyOf = [&](Value v) -> Value {
      auto it = copies.find(v);
      if (it != copies.end())
        return it->second;
      OpBuilder b(func.getContext());
      if (auto arg = dyn_cast<BlockArgument>(v))
        b.setInsertionPointToStart(arg.getOwner());
      else
        b.setInsertionPointAfter(v.getDefiningOp());
      Value c = CastOp::create(b, v.getLoc(), withElement(v.getType(), low), v);
      copies[v] = c;
      return c;
    };
    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      auto cls = dyn_cast<PrecisionClassOpInterface>(op);
      // Grouped and depthwise convolutions stay f32: their direct loops
      // would sum in 16 bits. One group: im2col and a 16-bit GEMM with f32
      // sums.
      auto conv = dyn_cast<Conv2DOp>(op);
      if (cls && cls.getPrecisionClass() == PrecisionClass::LowPrecision &&
          (isa<MatmulOp>(op) || (conv && conv.getGroups() == 1)) &&
          llvm::any_of(op->getOperandTypes(), isF32Tensor) &&
          llvm::all_of(op->getResultTypes(), isF32Tensor))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      IRMapping map;
      for (Value v : op->getOperands())
        if (isF32Tensor(v.getType()))
          map.map(v, copyOf(v));
      OpBuilder b(op);
      Operation *lowered = b.clone(*op, map);
      for (OpResult r : lowered->getResults())
        r.setType(withElement(r.getType(), low));
      b.setInsertionPointAfter(lowered);
      for (auto [old, now] : llvm::zip(op->getResults(), lowered->getResults()))
        old.replaceAllUsesWith(
            CastOp::create(b, op->getLoc(), old.getType(), now).getResult());
      op->erase();
      ++numLowered;
    }
  }

  void runOnOperation() override {
    if (precision == "fp32")
      return;
    Type low;
    if (precision == "bf16")
      low = BFloat16Type::get(&getContext());
    else if (precision == "fp16")
      low = Float16Type::get(&getContext());
    else {
      getOperation().emitError("loom-mixed-precision: unknown precision '")
          << precision << "' (expected fp32, bf16 or fp16)";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        runOnFunction(func, low);
  }
};

} // namespace
