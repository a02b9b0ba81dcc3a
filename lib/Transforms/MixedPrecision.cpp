//===- MixedPrecision.cpp - GEMMs, convolutions and what follows in 16 bits -===//
//
// `loom-mixed-precision` (Passes.td): each low-precision op (GEMM, one-group
// convolution) reads 16-bit (bf16 or f16) copies of its f32 operands and
// computes in 16 bits; `follow` ops whose inputs are 16-bit compute in 16
// bits too; every other op reads f32 copies of 16-bit values, but
// cross-entropy, which reads 16-bit logits as they are, and the fused LM
// head (loom.linear_cross_entropy), which reads 16-bit copies of its x and
// w as the GEMM it stands for would and keeps its f32 loss.
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

bool isFloatTensor(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && isa<FloatType>(t.getElementType());
}

PrecisionClass classOf(Operation *op) {
  auto cls = dyn_cast<PrecisionClassOpInterface>(op);
  return cls ? cls.getPrecisionClass() : PrecisionClass::KeepF32;
}

/// GEMMs, and convolutions with one group: grouped and depthwise ones stay
/// f32 (their direct loops would sum in 16 bits; one group becomes im2col
/// and a 16-bit GEMM with f32 sums). A GEMM with a bias epilogue stays f32
/// too (16-bit GEMM steps take no epilogue).
bool isLowPrecisionOp(Operation *op) {
  auto conv = dyn_cast<Conv2DOp>(op);
  auto mm = dyn_cast<MatmulOp>(op);
  return classOf(op) == PrecisionClass::LowPrecision &&
         ((mm && !mm.getBias()) || (conv && conv.getGroups() == 1));
}

/// `follow` ops that still stay f32 when their inputs are 16-bit: those
/// whose gradient sums (broadcast, col2im, pooling windows, gather's
/// scatter_add; Loom's reductions accumulate in their element type), and
/// exp, log, pow and rsqrt, which PyTorch autocast also keeps in f32.
/// Casts are explicit already.
bool staysF32(Operation *op) {
  return isa<CastOp, BroadcastInDimOp, Col2ImOp, Im2ColOp, GatherOp,
             MaxPool2DOp, AvgPool2DOp, MaxPool2DArgmaxOp, ExpOp, LogOp, PowOp,
             RsqrtOp>(op);
}

/// Whether `op` takes the precision of its inputs: the `follow` class but
/// the ops above, and softmax, whose output is a probability that 16 bits
/// store well (loom-widen-keep-f32 computes it, and its gradient's row
/// sums, in f32).
bool followsInputs(Operation *op) {
  if (isa<SoftmaxOp>(op))
    return true;
  return classOf(op) == PrecisionClass::Follow && !staysF32(op);
}

/// Whether `use` reads a 16-bit value as it is, though its op stays f32:
/// cross-entropy's logits (its C3: the loss is f32; loom-widen-keep-f32
/// widens each logit as the kernel loads it), so that the logits, the
/// largest activation of a language model, are saved for the backward in
/// 16 bits.
bool readsLowAsIs(OpOperand &use) {
  auto loss = dyn_cast<CrossEntropyOp>(use.getOwner());
  return loss && use.get() == loss.getLogits();
}

/// An f32 value whose 16-bit copy is as good as free to make where a
/// `follow` op needs one: an argument (a bias), a constant, or a broadcast
/// or reshape of one.
bool isCastable(Value v) {
  if (isa<BlockArgument>(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (isa<ConstantOp>(def))
    return true;
  if (isa<BroadcastInDimOp, ReshapeOp>(def))
    return isCastable(def->getOperand(0));
  return false;
}

struct MixedPrecisionPass
    : public loom::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnFunction(func::FuncOp func, Type low) {
    // Made once per value, right after its definition (at the top of the
    // function for an argument): f32 value -> its 16-bit copy, and a
    // 16-bit value -> its f32 copy.
    llvm::DenseMap<Value, Value> lowCopies, f32Copies;
    auto castAfter = [&](Value v, Type element,
                         llvm::DenseMap<Value, Value> &cache) -> Value {
      auto it = cache.find(v);
      if (it != cache.end())
        return it->second;
      OpBuilder b(func.getContext());
      if (auto arg = dyn_cast<BlockArgument>(v))
        b.setInsertionPointToStart(arg.getOwner());
      else
        b.setInsertionPointAfter(v.getDefiningOp());
      Value c =
          CastOp::create(b, v.getLoc(), withElement(v.getType(), element), v);
      cache[v] = c;
      return c;
    };
    Type f32 = Float32Type::get(func.getContext());
    auto isLow = [&](Value v) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      return t && t.getElementType() == low;
    };

    // Old value -> the value that replaces it (16-bit where its op was
    // rewritten to compute in 16 bits).
    llvm::DenseMap<Value, Value> now;
    auto current = [&](Value v) { return now.lookup(v) ? now.lookup(v) : v; };
    // Whether `op` computes in 16 bits: a GEMM or a one-group convolution
    // with f32 operands; or a `follow` op with a 16-bit operand whose other
    // float operands are 16-bit or castable, and whose results are f32.
    auto computesLow = [&](Operation *op) {
      if (!llvm::all_of(op->getResultTypes(), [](Type t) {
            return isF32Tensor(t) || !isFloatTensor(t);
          }))
        return false;
      if (isLowPrecisionOp(op))
        return llvm::any_of(op->getOperands(), [&](Value v) {
          return isF32Tensor(current(v).getType()) || isLow(current(v));
        });
      if (!followsInputs(op))
        return false;
      bool anyLow = false;
      for (Value v : op->getOperands()) {
        Value c = current(v);
        if (isLow(c))
          anyLow = true;
        else if (isFloatTensor(c.getType()) &&
                 !(isF32Tensor(c.getType()) && isCastable(c)))
          return false;
      }
      return anyLow;
    };

    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      ops.push_back(&op);
    SmallVector<Operation *> replaced;
    for (Operation *op : ops) {
      if (isa<LinearCrossEntropyOp>(op)) {
        // Its x and w in 16 bits (C1), its loss and lse f32 (C3).
        for (OpOperand &use : op->getOpOperands()) {
          Value c = current(use.get());
          use.set(use.getOperandNumber() < 2 && isF32Tensor(c.getType())
                      ? castAfter(c, low, lowCopies)
                      : c);
        }
        ++numLowered;
        continue;
      }
      if (!computesLow(op)) {
        // Stays as it is; a 16-bit operand is read through its f32 copy.
        for (OpOperand &use : op->getOpOperands()) {
          Value c = current(use.get());
          if (c == use.get())
            continue;
          use.set(c.getType() == use.get().getType() || readsLowAsIs(use)
                      ? c
                      : castAfter(c, f32, f32Copies));
        }
        continue;
      }
      IRMapping map;
      for (Value v : op->getOperands()) {
        Value c = current(v);
        map.map(v, isF32Tensor(c.getType()) ? castAfter(c, low, lowCopies) : c);
      }
      OpBuilder b(op);
      Operation *lowered = b.clone(*op, map);
      for (OpResult r : lowered->getResults())
        if (isF32Tensor(r.getType()))
          r.setType(withElement(r.getType(), low));
      for (auto [old, next] : llvm::zip(op->getResults(), lowered->getResults()))
        now[old] = next;
      replaced.push_back(op);
      ++numLowered;
    }
    // Every use of a replaced op was rewired above (its users come after
    // it, the return last): erase them, users first.
    for (Operation *op : llvm::reverse(replaced))
      op->erase();
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
