//===- LinearCrossEntropyOps.cpp - The fused language-model head ----------===//
//
// The verifiers, costs and gradient rule of loom.linear_cross_entropy and
// loom.linear_cross_entropy_grad. The comments `(Cn)` refer to the numbered
// constraints in LoomOps.td. The gradient is one fused op that recomputes
// the logits tile by tile from x, w and the row log-sum-exp, so no
// [N, V] tensor is kept for the backward.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType ranked(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// (C1) to (C3) of loom.linear_cross_entropy, over its operands and its
/// two results' types.
LogicalResult verifyHead(Operation *op, Value x, Value w, Value labels,
                         Type lossType, Type lseType, Reduction reduction,
                         bool transposeW) {
  auto xt = ranked(x), wt = ranked(w), yt = ranked(labels);
  auto lt = cast<RankedTensorType>(lossType);
  auto st = cast<RankedTensorType>(lseType);
  // (C1)
  if (xt.getRank() != 2 || wt.getRank() != 2)
    return op->emitOpError("x and w are matrices, not ")
           << xt << " and " << wt << " (C1)";
  Type et = xt.getElementType();
  if (!(et.isF32() || et.isF64() || et.isBF16() || et.isF16()) ||
      wt.getElementType() != et)
    return op->emitOpError("x and w are both f32, f64, bf16 or f16, not ")
           << et << " and " << wt.getElementType() << " (C1)";
  // The loss's element type: x's, f32 for 16-bit x (as a cross-entropy's
  // of 16-bit logits).
  Type lossElt =
      et.isBF16() || et.isF16() ? Float32Type::get(op->getContext()) : et;
  int64_t N = xt.getDimSize(0), C = xt.getDimSize(1);
  int64_t wC = wt.getDimSize(transposeW ? 1 : 0);
  if (wC != C)
    return op->emitOpError("w ")
           << wt << " does not contract with x " << xt << " ("
           << (transposeW ? "[V, C] with transpose_w" : "[C, V]") << ") (C1)";
  // (C2)
  if (yt.getRank() != 1 || yt.getDimSize(0) != N)
    return op->emitOpError("labels ")
           << yt << " do not give one label to each of the " << N
           << " rows of x (C2)";
  // (C3)
  SmallVector<int64_t> lossShape;
  if (reduction == Reduction::None)
    lossShape.push_back(N);
  if (lt.getElementType() != lossElt ||
      lt.getShape() != ArrayRef<int64_t>(lossShape))
    return op->emitOpError("loss is ")
           << lt << "; for reduction " << stringifyReduction(reduction)
           << " it is " << lossElt << " of shape ["
           << (lossShape.empty() ? "" : "N") << "] (C3)";
  if (!st.getElementType().isF32() || st.getShape() != ArrayRef<int64_t>{N})
    return op->emitOpError("lse is ") << st << ", expected f32 [" << N
                                      << "] (C3)";
  return success();
}

/// Multiply-adds of one [N, C] x [C, V] product, as flops.
int64_t headFlops(Value x, Value w) {
  auto xt = ranked(x), wt = ranked(w);
  return 2 * xt.getDimSize(0) * xt.getDimSize(1) *
         (wt.getNumElements() / xt.getDimSize(1));
}

} // namespace

LogicalResult LinearCrossEntropyOp::verify() {
  return verifyHead(*this, getX(), getW(), getLabels(), getLoss().getType(),
                    getLse().getType(), getReduction(), getTransposeW());
}

int64_t LinearCrossEntropyOp::getFlopCount() {
  return headFlops(getX(), getW());
}

LogicalResult LinearCrossEntropyGradOp::verify() {
  // (C1)
  if (failed(verifyHead(*this, getX(), getW(), getLabels(),
                        getDloss().getType(), getLse().getType(),
                        getReduction(), getTransposeW())))
    return failure();
  // (C2)
  if (getDx().getType() != getX().getType() ||
      getDw().getType() != getW().getType())
    return emitOpError("dx and dw have the types of x and w, not ")
           << getDx().getType() << " and " << getDw().getType() << " (C2)";
  return success();
}

int64_t LinearCrossEntropyGradOp::getFlopCount() {
  // The logits recomputed, then dx and dw: three products.
  return 3 * headFlops(getX(), getW());
}

LogicalResult LinearCrossEntropyOp::buildVJP(OpBuilder &b, ValueRange cts,
                                             SmallVectorImpl<Value> &out) {
  if (cts[1])
    return emitOpError("the gradient through lse (the row log-sum-exp) is "
                       "not supported; only the loss may be differentiated");
  Value dloss = cts[0];
  if (!dloss) {
    out.append(getNumOperands(), Value());
    return success();
  }
  auto grad = LinearCrossEntropyGradOp::create(
      b, getLoc(), getX().getType(), getW().getType(), getX(), getW(),
      getLabels(), getLse(), dloss, getReductionAttr(), getIgnoreIndexAttr(),
      getTransposeWAttr());
  out.push_back(grad.getDx());
  out.push_back(grad.getDw());
  out.push_back(Value()); // labels: integers, no gradient
  return success();
}

LogicalResult LinearCrossEntropyGradOp::buildVJP(OpBuilder &, ValueRange cts,
                                                 SmallVectorImpl<Value> &out) {
  if (llvm::any_of(cts, [](Value v) { return bool(v); }))
    return emitOpError("second derivatives of the fused language-model "
                       "head are not supported");
  out.append(getNumOperands(), Value());
  return success();
}
