//===- AttentionOps.cpp - loom.attention and loom.attention_grad ----------===//
//
// The verifiers, costs and gradient rule of the fused attention ops. The
// comments `(Cn)` refer to the numbered constraints in LoomOps.td. The
// gradient of loom.attention is one loom.attention_grad that recomputes the
// probabilities from q, k and the row log-sum-exp, so no T x S tensor is
// kept for the backward.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType ranked(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The checks loom.attention and loom.attention_grad share: (C1) to (C7) of
/// loom.attention over its operands and its two results' types.
LogicalResult verifyAttention(Operation *op, Value q, Value k, Value v,
                              Type outType, Type lseType, Value mask,
                              Value bias, Value segments, bool causal,
                              int64_t window, double scale) {
  auto qt = ranked(q), kt = ranked(k), vt = ranked(v);
  auto ot = cast<RankedTensorType>(outType);
  auto lt = cast<RankedTensorType>(lseType);
  // (C1)
  for (auto [name, t] : {std::pair<StringRef, RankedTensorType>{"q", qt},
                         {"k", kt},
                         {"v", vt},
                         {"out", ot}})
    if (t.getRank() != 4)
      return op->emitOpError() << name << " has rank " << t.getRank()
                               << "; attention takes [batch, heads, "
                               << "sequence, head dim] tensors (C1)";
  Type et = qt.getElementType();
  if (kt.getElementType() != et || vt.getElementType() != et ||
      ot.getElementType() != et)
    return op->emitOpError("q, k, v and out have different element types (C1)");
  if (!lt.getElementType().isF32())
    return op->emitOpError("lse is f32, not ") << lt.getElementType() << " (C1)";
  // (C2)
  int64_t B = qt.getDimSize(0), Hq = qt.getDimSize(1), T = qt.getDimSize(2),
          D = qt.getDimSize(3);
  int64_t Hkv = kt.getDimSize(1), S = kt.getDimSize(2);
  if (kt.getDimSize(0) != B || kt.getDimSize(3) != D)
    return op->emitOpError("k ")
           << shapeStr(kt.getShape()) << " does not match q "
           << shapeStr(qt.getShape()) << " in batch and head dim (C2)";
  if (Hkv < 1 || Hq % Hkv != 0)
    return op->emitOpError("the ")
           << Hkv << " key/value heads do not divide the " << Hq
           << " query heads (C2)";
  if (vt.getDimSize(0) != B || vt.getDimSize(1) != Hkv ||
      vt.getDimSize(2) != S)
    return op->emitOpError("v ")
           << shapeStr(vt.getShape()) << " does not match k "
           << shapeStr(kt.getShape()) << " (C2)";
  // (C3)
  SmallVector<int64_t> outShape{B, Hq, T, vt.getDimSize(3)};
  if (ot.getShape() != ArrayRef<int64_t>(outShape))
    return op->emitOpError("out is ")
           << shapeStr(ot.getShape()) << ", expected " << shapeStr(outShape)
           << " (C3)";
  SmallVector<int64_t> lseShape{B, Hq, T};
  if (lt.getShape() != ArrayRef<int64_t>(lseShape))
    return op->emitOpError("lse is ")
           << shapeStr(lt.getShape()) << ", expected " << shapeStr(lseShape)
           << " (C3)";
  // (C4)
  int64_t full[4] = {B, Hq, T, S};
  for (auto [name, x] : {std::pair<StringRef, Value>{"mask", mask},
                         {"bias", bias}}) {
    if (!x)
      continue;
    auto xt = ranked(x);
    bool ok = xt.getRank() == 4;
    for (int64_t d = 0; ok && d < 4; ++d)
      ok = xt.getDimSize(d) == 1 || xt.getDimSize(d) == full[d];
    if (!ok)
      return op->emitOpError()
             << name << " " << shapeStr(xt.getShape())
             << " does not broadcast to the scores "
             << shapeStr(ArrayRef<int64_t>(full)) << " (C4)";
    if (name == "bias" && xt.getElementType() != et)
      return op->emitOpError("bias has element type ")
             << xt.getElementType() << ", q has " << et << " (C4)";
  }
  // (C5)
  if (causal && T != S)
    return op->emitOpError("causal attention needs as many queries as "
                           "keys, not ")
           << T << " and " << S << " (C5)";
  if (window < 0 || (window > 0 && !causal))
    return op->emitOpError("window ")
           << window << " needs causal attention and must be >= 0 (C5)";
  // (C6)
  if (!std::isfinite(scale))
    return op->emitOpError("scale is not finite (C6)");
  // (C7)
  if (segments) {
    auto st = ranked(segments);
    SmallVector<int64_t> want{B, T};
    if (st.getShape() != ArrayRef<int64_t>(want))
      return op->emitOpError("segments is ")
             << shapeStr(st.getShape()) << ", expected " << shapeStr(want)
             << " ([batch, queries]) (C7)";
    if (T != S)
      return op->emitOpError("segments need as many queries as keys, not ")
             << T << " and " << S << " (C7)";
  }
  return success();
}

/// (C8): dropout in [0, 1), with a seed exactly when it is positive.
LogicalResult verifyDropout(Operation *op, Value seed, double dropout) {
  if (!(dropout >= 0.0 && dropout < 1.0))
    return op->emitOpError("dropout must be in [0, 1), got ")
           << dropout << " (C8)";
  if (bool(seed) != (dropout > 0.0))
    return op->emitOpError(seed ? "has a seed but no dropout (C8)"
                                : "dropout needs a seed operand (C8)");
  return success();
}

/// Multiply-adds of the two products of one attention pass, halved when
/// causal (the blocks above the diagonal are skipped).
int64_t attentionFlops(Value q, Value v, int64_t S, bool causal) {
  auto qt = ranked(q);
  int64_t rows = qt.getDimSize(0) * qt.getDimSize(1) * qt.getDimSize(2);
  int64_t perPair = qt.getDimSize(3) + ranked(v).getDimSize(3);
  int64_t flops = 2 * rows * S * perPair;
  return causal ? flops / 2 : flops;
}

} // namespace

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this, getQ(), getK(), getV(),
                             getOut().getType(), getLse().getType(),
                             getMask(), getBias(), getSegments(), getCausal(),
                             static_cast<int64_t>(getWindow()),
                             getScale().convertToDouble())))
    return failure();
  return verifyDropout(*this, getSeed(), getDropout().convertToDouble());
}

int64_t AttentionOp::getFlopCount() {
  return attentionFlops(getQ(), getV(), ranked(getK()).getDimSize(2),
                        getCausal());
}

LogicalResult AttentionGradOp::verify() {
  // (C1)
  if (failed(verifyAttention(*this, getQ(), getK(), getV(),
                             getOut().getType(), getLse().getType(),
                             getMask(), getBias(), getSegments(), getCausal(),
                             static_cast<int64_t>(getWindow()),
                             getScale().convertToDouble())) ||
      failed(verifyDropout(*this, getSeed(), getDropout().convertToDouble())))
    return failure();
  // (C2)
  if (getDout().getType() != getOut().getType())
    return emitOpError("dout has type ")
           << getDout().getType() << ", out has " << getOut().getType()
           << " (C2)";
  for (auto [name, g, x] :
       {std::tuple<StringRef, Value, Value>{"dq", getDq(), getQ()},
        {"dk", getDk(), getK()},
        {"dv", getDv(), getV()}})
    if (g.getType() != x.getType())
      return emitOpError() << name << " has type " << g.getType()
                           << ", expected " << x.getType() << " (C2)";
  // (C3)
  if (bool(getDbias()) != bool(getBias()))
    return emitOpError("dbias is present exactly when bias is (C3)");
  if (getBias() && getDbias().getType() != getBias().getType())
    return emitOpError("dbias has type ")
           << getDbias().getType() << ", bias has " << getBias().getType()
           << " (C3)";
  return success();
}

int64_t AttentionGradOp::getFlopCount() {
  // Recomputing the scores, then dv, dp, dq and dk: five products.
  return 5 * attentionFlops(getQ(), getV(), ranked(getK()).getDimSize(2),
                            getCausal()) /
         2;
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value dout = cts[0];
  if (cts[1])
    return emitOpError("the gradient through lse (the row log-sum-exp) is "
                       "not supported; only out may be differentiated");
  if (!dout) {
    out.append(getNumOperands(), Value());
    return success();
  }
  Value bias = getBias();
  Type dbiasType = bias ? bias.getType() : Type();
  auto grad = AttentionGradOp::create(
      b, getLoc(), getQ().getType(), getK().getType(), getV().getType(),
      dbiasType, getQ(), getK(), getV(), getOut(), getLse(), dout, getMask(),
      bias, getSegments(), getSeed(), getScaleAttr(), getCausalAttr(),
      getWindowAttr(), getDropoutAttr(), getStreamAttr());
  out.push_back(grad.getDq());
  out.push_back(grad.getDk());
  out.push_back(grad.getDv());
  if (getMask())
    out.push_back(Value()); // boolean: no gradient
  if (bias)
    out.push_back(grad.getDbias());
  if (getSegments())
    out.push_back(Value()); // integer: no gradient
  if (getSeed())
    out.push_back(Value());
  return success();
}

LogicalResult AttentionGradOp::buildVJP(OpBuilder &, ValueRange cts,
                                        SmallVectorImpl<Value> &out) {
  if (llvm::any_of(cts, [](Value v) { return bool(v); }))
    return emitOpError("second derivatives of attention are not supported");
  out.append(getNumOperands(), Value());
  return success();
}
