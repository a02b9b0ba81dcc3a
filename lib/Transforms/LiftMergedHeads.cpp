//===- LiftMergedHeads.cpp - Attention on [B*H, T, S] seen as [B, H, T, S]
//-===//
//
// Part of loom-fuse-attention. Some models compute attention with batch and
// heads merged into one dimension, reshaping only around the softmax
// (transformers' BLOOM: `alibi.baddbmm(q, k)` on [B*H, T, d], the scores
// viewed as [B, H, T, S] for the mask and the softmax, the probabilities
// viewed back for `bmm(p, v)`):
//
//   s3 = reshape(q4) x transpose(reshape(k4)) * c + broadcast(alibi3)
//   p4 = softmax(reshape(s3) + mask4)        ; [B, H, T, S]
//   o3 = reshape(p4) x reshape(v4)
//
// The rewrite gives the chain the 4-D form the matcher knows: the scores'
// elementwise ops, product and broadcasts are rebuilt on [B, H, ...]
// (reshaping what they read, which folds into the reshapes the 3-D
// operands came from), and the product with the values is computed on
// [B, H, T, S] x [B, H, S, dv], reshaped to [B*H, T, dv] for its readers.
// Reshapes that merge or split the two leading dimensions only regroup
// elements, so every value computed is unchanged. Chains that do not have
// this form on both sides of the softmax are left alone.
//
//===----------------------------------------------------------------------===//

#include "LiftMergedHeads.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Rebuilds rank-3 values whose first dimension is B*H on [B, H, ...].
struct Lifter {
  OpBuilder &b;
  int64_t B, H;

  bool merged(Value v) {
    auto t = typeOf(v);
    return t.getRank() == 3 && t.getDimSize(0) == B * H;
  }

  RankedTensorType split(RankedTensorType t) {
    int64_t lead = t.getDimSize(0);
    SmallVector<int64_t> shape = {lead == 1 ? 1 : B, lead == 1 ? 1 : H};
    shape.append(t.getShape().begin() + 1, t.getShape().end());
    return t.clone(shape);
  }

  /// `v` (merged) as [B, H, ...].
  Value lift(Value v) {
    auto t = typeOf(v);
    RankedTensorType type = split(t);
    Operation *op = v.getDefiningOp();
    auto mergedAll = [&](Operation *o) {
      return llvm::all_of(o->getOperands(), [&](Value x) {
        return merged(x) && typeOf(x).getShape() == t.getShape();
      });
    };
    if (op && isa<AddOp, SubOp, MulOp, DivOp, SelectOp>(op) && mergedAll(op)) {
      SmallVector<Value> operands;
      for (Value x : op->getOperands())
        operands.push_back(lift(x));
      b.setInsertionPoint(op);
      OperationState state(op->getLoc(), op->getName());
      state.addOperands(operands);
      state.addTypes(type);
      state.addAttributes(op->getAttrs());
      return b.create(state)->getResult(0);
    }
    if (auto m = dyn_cast_or_null<MatmulOp>(op)) {
      if (!m.getBias() && merged(m.getLhs()) && merged(m.getRhs())) {
        Value lhs = lift(m.getLhs()), rhs = lift(m.getRhs());
        b.setInsertionPoint(m);
        return MatmulOp::create(b, m.getLoc(), type, lhs, rhs, Value(),
                                m.getTransposeA(), m.getTransposeB());
      }
    }
    if (auto tr = dyn_cast_or_null<TransposeOp>(op)) {
      if (merged(tr.getX()) && tr.getPerm() == ArrayRef<int64_t>{0, 2, 1}) {
        Value x = lift(tr.getX());
        b.setInsertionPoint(tr);
        return TransposeOp::create(b, tr.getLoc(), type, x,
                                   ArrayRef<int64_t>{0, 1, 3, 2});
      }
    }
    if (auto bc = dyn_cast_or_null<BroadcastInDimOp>(op)) {
      auto xt = typeOf(bc.getX());
      b.setInsertionPoint(bc);
      if (xt.getRank() == 0)
        return BroadcastInDimOp::create(b, bc.getLoc(), type, bc.getX(),
                                        ArrayRef<int64_t>{});
      if (xt.getRank() == 3 && bc.getDims() == ArrayRef<int64_t>{0, 1, 2} &&
          (xt.getDimSize(0) == 1 || xt.getDimSize(0) == B * H)) {
        Value x = ReshapeOp::create(b, bc.getLoc(), split(xt), bc.getX());
        return BroadcastInDimOp::create(b, bc.getLoc(), type, x,
                                        ArrayRef<int64_t>{0, 1, 2, 3});
      }
    }
    // The merge of a [B, H, ...] value: that value.
    if (auto r = dyn_cast_or_null<ReshapeOp>(op))
      if (typeOf(r.getX()) == type)
        return r.getX();
    b.setInsertionPointAfterValue(v);
    return ReshapeOp::create(b, v.getLoc(), type, v);
  }
};

/// The [B*H, T, S] -> [B, H, T, S] reshape the softmax's input is computed
/// from through 4-D elementwise ops (the mask's additions and selects),
/// or null.
ReshapeOp findSplit(Value x) {
  for (int depth = 0; depth < 8; ++depth) {
    Operation *op = x.getDefiningOp();
    if (auto r = dyn_cast_or_null<ReshapeOp>(op)) {
      auto in = typeOf(r.getX()), out = typeOf(r.getResult());
      if (in.getRank() == 3 && out.getRank() == 4 &&
          in.getDimSize(0) == out.getDimSize(0) * out.getDimSize(1) &&
          in.getShape().drop_front() == out.getShape().drop_front(2))
        return r;
      return {};
    }
    if (!op || !isa<AddOp, SubOp, MulOp, SelectOp>(op))
      return {};
    // The side that is not a broadcast mask or scalar.
    Value next;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && isa<ReshapeOp, AddOp, SubOp, MulOp, SelectOp>(def) &&
          typeOf(operand).getElementType() == typeOf(x).getElementType()) {
        if (next)
          return {};
        next = operand;
      }
    }
    if (!next)
      return {};
    x = next;
  }
  return {};
}

/// Erases `op` and the producers only it read, as far as they are dead.
void eraseDead(Operation *op) {
  SmallVector<Operation *> work{op};
  while (!work.empty()) {
    Operation *o = work.pop_back_val();
    if (!o->use_empty() || !isMemoryEffectFree(o))
      continue;
    SmallVector<Value> operands(o->getOperands());
    o->erase();
    for (Value x : operands)
      if (Operation *def = x.getDefiningOp())
        work.push_back(def);
  }
}

} // namespace

int64_t loom::liftMergedHeads(func::FuncOp func) {
  SmallVector<SoftmaxOp> softmaxes;
  func.walk([&](SoftmaxOp sm) { softmaxes.push_back(sm); });
  int64_t lifted = 0;
  for (SoftmaxOp sm : softmaxes) {
    auto st = typeOf(sm.getX());
    if (st.getRank() != 4 || sm.getAxis() != 3)
      continue;
    ReshapeOp split = findSplit(sm.getX());
    if (!split)
      continue;
    // The output side: p (after dropout, if any) merged again and
    // multiplied by the merged values.
    Value p = sm.getResult();
    if (p.hasOneUse())
      if (auto drop = dyn_cast<DropoutOp>(*p.getUsers().begin()))
        p = drop.getY();
    if (!p.hasOneUse())
      continue;
    auto merge = dyn_cast<ReshapeOp>(*p.getUsers().begin());
    if (!merge || !merge->hasOneUse() ||
        typeOf(merge.getResult()) != typeOf(split.getX()))
      continue;
    auto pv = dyn_cast<MatmulOp>(*merge->getUsers().begin());
    if (!pv || pv.getLhs() != merge.getResult() || pv.getBias() ||
        pv.getTransposeA() || pv.getTransposeB() ||
        typeOf(pv.getRhs()).getRank() != 3)
      continue;
    OpBuilder b(func.getContext());
    Lifter lifter{b, st.getDimSize(0), st.getDimSize(1)};
    split.getResult().replaceAllUsesWith(lifter.lift(split.getX()));
    Value v = lifter.lift(pv.getRhs());
    b.setInsertionPoint(pv);
    auto outType = lifter.split(typeOf(pv.getResult()));
    Value out =
        MatmulOp::create(b, pv.getLoc(), outType, p, v, Value(), false, false);
    pv.getResult().replaceAllUsesWith(
        ReshapeOp::create(b, pv.getLoc(), typeOf(pv.getResult()), out));
    // The 3-D ops are dead now: the probabilities' only reader is the new
    // product (as the matcher wants).
    pv.erase();
    merge.erase();
    eraseDead(split);
    ++lifted;
  }
  return lifted;
}
