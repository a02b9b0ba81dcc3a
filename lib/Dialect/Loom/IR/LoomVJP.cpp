//===- LoomVJP.cpp - Gradient rules of loom ops ---------------------------===//
//
// One `buildVJP` per op: given the cotangents of the op's results (null where
// a result has none) it appends one cotangent per operand (null where the
// operand gets none). Rules build loom ops at the builder's insertion point,
// at the op's location, and may read the op's own operands and results (the
// remat pass later decides whether those are kept or recomputed).
//
// Conventions every rule follows:
//  * Integer, boolean and index operands get null; so do operands whose
//    derivative is zero almost everywhere (floor) and operands that are not
//    values of the function (compare, casts to integers, gather indices,
//    cross-entropy labels, dropout seeds). `stop_gradient` gives null and
//    reports its operand as not differentiable, so nothing flows through it.
//  * Ties of max/min pick no winner: the cotangent is split equally between
//    the tied elements (half each for the binary max/min, 1/k each for k
//    elements tied for the extremum of a reduce_max/reduce_min), as JAX and
//    PyTorch do for the binary ops. relu and abs give 0 at 0.
//  * Max pooling routes each window's cotangent to the first maximum of the
//    window (`loom.max_pool2d_argmax` + `loom.scatter_add`), like PyTorch.
//  * Normalization rules (layer_norm, rms_norm, batch_norm_stats) recompute
//    their statistics from the input instead of asking for extra results.
//  * Every op that a rule creates has a rule itself, so gradients of
//    gradients can be taken (the conv2d and pooling gradients close over
//    conv2d, conv2d_input_grad, conv2d_filter_grad, scatter_add and gather).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/Emitter.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Matchers.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

SmallVector<int64_t> iota(int64_t begin, int64_t end) {
  SmallVector<int64_t> r;
  for (int64_t i = begin; i < end; ++i)
    r.push_back(i);
  return r;
}

/// Pushes a null cotangent for every operand of `op`.
LogicalResult noCotangents(Operation *op, SmallVectorImpl<Value> &out) {
  out.append(op->getNumOperands(), Value());
  return success();
}

/// All dimensions of `type` but dimension 1 (the batch-norm reduction dims).
SmallVector<int64_t> allButChannel(RankedTensorType type) {
  SmallVector<int64_t> dims = {0};
  llvm::append_range(dims, iota(2, type.getRank()));
  return dims;
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise binary ops
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getZ()))
    return noCotangents(*this, out);
  out.append({g, g});
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getZ()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  out.append({g, e.neg(g)});
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getZ()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  out.append({e.mul(g, getY()), e.mul(g, getX())});
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getZ()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  // d(x/y) = dx / y - dy * (x/y) / y.
  Value gx = e.div(g, getY());
  out.append({gx, e.neg(e.mul(gx, getZ()))});
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX(), y = getY();
  // d/dx = y * x^(y-1); d/dy = x^y * log(x), taken as 0 where x == 0 (the
  // limit for y > 0) instead of 0 * -inf.
  // A constant exponent (GELU's x^3) gives a constant y - 1, not a tensor
  // computed at every step, and the lowering then turns x^(y-1) into
  // multiplications.
  // (The importers broadcast a scalar exponent: look through that.)
  Value scalar = y;
  while (auto bc = scalar.getDefiningOp<BroadcastInDimOp>())
    scalar = bc.getX();
  DenseFPElementsAttr c;
  Value yMinus1 =
      matchPattern(scalar, m_Constant(&c)) && c.isSplat()
          ? e.splatLike(y, c.getSplatValue<APFloat>().convertToDouble() - 1.0)
          : e.addScalar(y, -1.0);
  Value gx = e.mul(g, e.mul(y, e.pow(x, yMinus1)));
  Value xIsZero = e.cmp(ComparePredicate::EQ, x, e.zerosLike(x));
  Value gy =
      e.select(xIsZero, e.zerosLike(g), e.mul(g, e.mul(getZ(), e.log(x))));
  out.append({gx, gy});
  return success();
}

/// max (pred = GT) and min (pred = LT): the winner takes the cotangent, ties
/// split it in half.
static LogicalResult extremumVJP(Operation *op, ComparePredicate pred,
                                 OpBuilder &b, Value g,
                                 SmallVectorImpl<Value> &out) {
  Value x = op->getOperand(0), y = op->getOperand(1);
  if (!g || !isFloatTensor(x))
    return noCotangents(op, out);
  Emitter e{b, op->getLoc()};
  Value xWins = e.cmp(pred, x, y);
  Value tie = e.cmp(ComparePredicate::EQ, x, y);
  Value zero = e.zerosLike(g), half = e.scale(g, 0.5);
  out.push_back(e.select(xWins, g, e.select(tie, half, zero)));
  out.push_back(e.select(xWins, zero, e.select(tie, half, g)));
  return success();
}

LogicalResult MaxOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  return extremumVJP(*this, ComparePredicate::GT, b, cts[0], out);
}

LogicalResult MinOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  return extremumVJP(*this, ComparePredicate::LT, b, cts[0], out);
}

//===----------------------------------------------------------------------===//
// Elementwise unary ops
//===----------------------------------------------------------------------===//

/// Defines the rule of a unary op whose cotangent is `g * <expr>`, with `x`
/// the operand, `z` the result and `e` an Emitter.
#define LOOM_UNARY_VJP(OP, EXPR)                                               \
  LogicalResult OP::buildVJP(OpBuilder &b, ValueRange cts,                     \
                             SmallVectorImpl<Value> &out) {                    \
    Value g = cts[0];                                                          \
    if (!g || !isFloatTensor(getX()))                                          \
      return noCotangents(*this, out);                                         \
    Emitter e{b, getLoc()};                                                    \
    Value x = getX(), z = getY();                                              \
    (void)x;                                                                   \
    (void)z;                                                                   \
    out.push_back(EXPR);                                                       \
    return success();                                                          \
  }

LOOM_UNARY_VJP(NegOp, e.neg(g))
LOOM_UNARY_VJP(ExpOp, e.mul(g, z))
LOOM_UNARY_VJP(LogOp, e.div(g, x))
// 1 - tanh(x)^2
LOOM_UNARY_VJP(TanhOp, e.mul(g, e.sub(e.splatLike(z, 1.0), e.mul(z, z))))
// s * (1 - s)
LOOM_UNARY_VJP(SigmoidOp, e.mul(g, e.mul(z, e.sub(e.splatLike(z, 1.0), z))))
// 2 / sqrt(pi) * exp(-x^2)
LOOM_UNARY_VJP(ErfOp, e.mul(g, e.scale(e.exp(e.neg(e.mul(x, x))),
                                       2.0 / std::sqrt(M_PI))))
// 1 / (2 sqrt(x))
LOOM_UNARY_VJP(SqrtOp, e.div(e.scale(g, 0.5), z))
// -1/2 x^(-3/2) = -1/2 rsqrt(x)^3
LOOM_UNARY_VJP(RsqrtOp, e.mul(g, e.scale(e.mul(z, e.mul(z, z)), -0.5)))
LOOM_UNARY_VJP(CosOp, e.neg(e.mul(g, e.sin(x))))
LOOM_UNARY_VJP(SinOp, e.mul(g, e.cos(x)))
// 1 where x > 0, 0 elsewhere (0 at the kink).
LOOM_UNARY_VJP(ReluOp, e.select(e.cmp(ComparePredicate::GT, x, e.zerosLike(x)),
                                g, e.zerosLike(g)))
// sign(x), 0 at 0.
LOOM_UNARY_VJP(AbsOp,
               e.select(e.cmp(ComparePredicate::GT, x, e.zerosLike(x)), g,
                        e.select(e.cmp(ComparePredicate::LT, x, e.zerosLike(x)),
                                 e.neg(g), e.zerosLike(g))))
#undef LOOM_UNARY_VJP

LogicalResult FloorOp::buildVJP(OpBuilder &, ValueRange,
                                SmallVectorImpl<Value> &out) {
  // Piecewise constant: the derivative is 0 wherever it exists.
  return noCotangents(*this, out);
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange cts,
                               SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX();
  Value one = e.splatLike(x, 1.0);
  Value d;
  if (getApproximate() == GeluApproximation::Tanh) {
    // y = x/2 (1 + t), t = tanh(u), u = c (x + k x^3):
    // dy/dx = (1 + t)/2 + x/2 (1 - t^2) c (1 + 3k x^2).
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    Value x2 = e.mul(x, x);
    Value u = e.scale(e.add(x, e.scale(e.mul(x2, x), k)), c);
    Value t = e.tanh(u);
    Value du = e.scale(e.add(one, e.scale(x2, 3.0 * k)), c);
    Value left = e.scale(e.add(one, t), 0.5);
    Value right = e.mul(e.scale(x, 0.5), e.mul(e.sub(one, e.mul(t, t)), du));
    d = e.add(left, right);
  } else {
    // y = x Phi(x): dy/dx = Phi(x) + x phi(x).
    Value cdf =
        e.scale(e.add(one, e.erf(e.scale(x, 1.0 / std::sqrt(2.0)))), 0.5);
    Value pdf =
        e.scale(e.exp(e.scale(e.mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * M_PI));
    d = e.add(cdf, e.mul(x, pdf));
  }
  out.push_back(e.mul(g, d));
  return success();
}

LogicalResult SelectOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getResult()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value zero = e.zerosLike(g);
  out.append(
      {Value(), e.select(getCond(), g, zero), e.select(getCond(), zero, g)});
  return success();
}

LogicalResult CompareOp::buildVJP(OpBuilder &, ValueRange,
                                  SmallVectorImpl<Value> &out) {
  return noCotangents(*this, out);
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ValueRange cts,
                               SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  // Only a float-to-float cast carries a gradient: back to the operand's
  // precision.
  if (!g || !isFloatTensor(getX()) || !isFloatTensor(getY()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  out.push_back(e.castTo(g, tensorType(getX()).getElementType()));
  return success();
}

LogicalResult StopGradientOp::buildVJP(OpBuilder &, ValueRange,
                                       SmallVectorImpl<Value> &out) {
  return noCotangents(*this, out);
}

bool StopGradientOp::isDifferentiableOperand(unsigned) { return false; }

LogicalResult ConstantOp::buildVJP(OpBuilder &, ValueRange,
                                   SmallVectorImpl<Value> &out) {
  return noCotangents(*this, out);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value a = getLhs(), w = getRhs();
  bool ta = getTransposeA(), tb = getTransposeB();
  int64_t rank = tensorType(a).getRank();
  bool sharedRhs = tensorType(w).getRank() != rank;
  // With A' = op(A), B' = op(B) and C = A' B': dA' = G B'^T, dB' = A'^T G.

  // dA (per batch; a shared 2-D rhs broadcasts over the batch).
  Value da;
  if (!ta)
    da = e.matmul(g, w, false, !tb); // G B'^T
  else if (!sharedRhs)
    da = e.matmul(w, g, tb, true); // B' G^T
  else
    da = e.swapLast2(e.matmul(g, w, false, !tb)); // (G B'^T)^T

  // dB.
  Value db;
  if (!sharedRhs) {
    db = tb ? e.matmul(g, a, true, ta)    // G^T A'
            : e.matmul(a, g, !ta, false); // A'^T G
  } else if (!ta) {
    // Shared rhs: sum over the batch, done as one GEMM over the flattened
    // batch rows.
    auto at = tensorType(a), gt = tensorType(g);
    int64_t rows = at.getNumElements() / at.getDimSize(rank - 1);
    Value a2 = e.reshape(a, {rows, at.getDimSize(rank - 1)});
    Value g2 = e.reshape(g, {rows, gt.getDimSize(rank - 1)});
    db = tb ? e.matmul(g2, a2, true, false) : e.matmul(a2, g2, true, false);
  } else {
    // A is [batch, K, M]: per-batch products, then a sum over the batch.
    Value perBatch =
        tb ? e.matmul(g, a, true, true) : e.matmul(a, g, false, false);
    db = e.sum(perBatch, iota(0, rank - 2));
  }
  out.append({da, db});
  // The bias is added to every row: its gradient sums G's rows.
  if (getBias())
    out.push_back(e.sum(g, iota(0, rank - 1)));
  return success();
}

LogicalResult Conv2DOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  if (getChannelsLast())
    return emitOpError("has no gradient in channels-last form "
                       "(loom-channels-last runs after autodiff)");
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Location loc = getLoc();
  Value dx = Conv2DInputGradOp::create(b, loc, getInput().getType(), g,
                                       getFilter(), getStrides(), getPadding(),
                                       getDilations(), getGroups());
  Value dw = Conv2DFilterGradOp::create(
      b, loc, getFilter().getType(), getInput(), g, getStrides(), getPadding(),
      getDilations(), getGroups());
  out.append({dx, dw});
  return success();
}

LogicalResult Conv2DInputGradOp::buildVJP(OpBuilder &b, ValueRange cts,
                                          SmallVectorImpl<Value> &out) {
  if (getChannelsLast())
    return emitOpError("has no gradient in channels-last form "
                       "(loom-channels-last runs after autodiff)");
  // result = A_w^T dy is linear in dy and in w: d(dy) = A_w G and
  // d(w) = filter_grad(G, dy).
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Location loc = getLoc();
  Value ddy =
      Conv2DOp::create(b, loc, getDy().getType(), g, getFilter(), getStrides(),
                       getPadding(), getDilations(), getGroups());
  Value dw = Conv2DFilterGradOp::create(b, loc, getFilter().getType(), g,
                                        getDy(), getStrides(), getPadding(),
                                        getDilations(), getGroups());
  out.append({ddy, dw});
  return success();
}

LogicalResult Conv2DFilterGradOp::buildVJP(OpBuilder &b, ValueRange cts,
                                           SmallVectorImpl<Value> &out) {
  if (getChannelsLast())
    return emitOpError("has no gradient in channels-last form "
                       "(loom-channels-last runs after autodiff)");
  // <G, result> = <dy, conv2d(x, G)>: d(x) = input_grad(dy, G) and
  // d(dy) = conv2d(x, G).
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Location loc = getLoc();
  Value dx = Conv2DInputGradOp::create(b, loc, getX().getType(), getDy(), g,
                                       getStrides(), getPadding(),
                                       getDilations(), getGroups());
  Value ddy =
      Conv2DOp::create(b, loc, getDy().getType(), getX(), g, getStrides(),
                       getPadding(), getDilations(), getGroups());
  out.append({dx, ddy});
  return success();
}

LogicalResult Im2ColOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  // im2col is linear; its adjoint is col2im.
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  out.push_back(Col2ImOp::create(b, getLoc(), getX().getType(), g, getKernel(),
                                 getStrides(), getPadding(), getDilations()));
  return success();
}

LogicalResult Col2ImOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  out.push_back(Im2ColOp::create(b, getLoc(), g, getKernel(), getStrides(),
                                 getPadding(), getDilations()));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  out.push_back(e.unreduce(g, tensorType(getX()), getDims(), getKeepDims()));
  return success();
}

LogicalResult ReduceMeanOp::buildVJP(OpBuilder &b, ValueRange cts,
                                     SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto x = tensorType(getX());
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= x.getDimSize(d);
  Value scaled = e.scale(g, 1.0 / static_cast<double>(count));
  out.push_back(e.unreduce(scaled, x, getDims(), getKeepDims()));
  return success();
}

/// reduce_max / reduce_min: the cotangent goes to the elements equal to the
/// extremum, split equally between ties.
static LogicalResult reduceExtremumVJP(Operation *op, ArrayRef<int64_t> dims,
                                       bool keepDims, OpBuilder &b, Value g,
                                       SmallVectorImpl<Value> &out) {
  Value x = op->getOperand(0), y = op->getResult(0);
  if (!g || !isFloatTensor(x))
    return noCotangents(op, out);
  Emitter e{b, op->getLoc()};
  auto xt = tensorType(x);
  Value hit = e.cmp(ComparePredicate::EQ, x, e.unreduce(y, xt, dims, keepDims));
  Value mask = e.castTo(hit, xt.getElementType());
  Value count = e.sum(mask, dims, keepDims);
  Value share = e.unreduce(e.div(g, count), xt, dims, keepDims);
  out.push_back(e.mul(mask, share));
  return success();
}

LogicalResult ReduceMaxOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  return reduceExtremumVJP(*this, getDims(), getKeepDims(), b, cts[0], out);
}

LogicalResult ReduceMinOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  return reduceExtremumVJP(*this, getDims(), getKeepDims(), b, cts[0], out);
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::buildVJP(OpBuilder &b, ValueRange cts,
                                         SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto x = tensorType(getX()), r = tensorType(getResult());
  ArrayRef<int64_t> dims = getDims();
  // Sum over the new dimensions and over the size-1 dimensions that were
  // repeated, then restore the size-1 dimensions with a reshape.
  SmallVector<int64_t> reduced;
  for (int64_t d = 0; d < r.getRank(); ++d) {
    const int64_t *it = llvm::find(dims, d);
    if (it == dims.end() ||
        (x.getDimSize(it - dims.begin()) == 1 && r.getDimSize(d) != 1))
      reduced.push_back(d);
  }
  out.push_back(e.reshape(e.sum(g, reduced), x));
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ValueRange cts,
                                  SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  out.push_back(e.reshape(g, tensorType(getX())));
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  out.push_back(e.transpose(g, inverse));
  return success();
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ValueRange cts,
                                SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  auto x = tensorType(getX()), r = tensorType(getResult());
  ArrayRef<int64_t> start = getStart(), stride = getStride();
  // The cotangent goes back to the sliced positions: pad it with zeros
  // before, between (stride - 1) and after.
  SmallVector<int64_t> low, high, interior;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t n = x.getDimSize(d), m = r.getDimSize(d);
    if (m == 0) {
      low.push_back(start[d]);
      high.push_back(n - start[d]);
      interior.push_back(0);
      continue;
    }
    int64_t last = start[d] + (m - 1) * stride[d];
    low.push_back(start[d]);
    interior.push_back(stride[d] - 1);
    high.push_back(n - 1 - last);
  }
  out.push_back(PadOp::create(b, getLoc(), x, g, low, high, interior));
  return success();
}

LogicalResult PadOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getX()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto x = tensorType(getX());
  SmallVector<int64_t> start, limit, stride;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    int64_t n = x.getDimSize(d), step = getInterior()[d] + 1;
    start.push_back(getLow()[d]);
    limit.push_back(n == 0 ? getLow()[d] : getLow()[d] + (n - 1) * step + 1);
    stride.push_back(step);
  }
  out.push_back(e.slice(g, start, limit, stride));
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getResult()))
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto r = tensorType(getResult());
  int64_t dim = getDim(), offset = 0;
  for (Value input : getInputs()) {
    int64_t size = tensorType(input).getDimSize(dim);
    SmallVector<int64_t> start(r.getRank(), 0), limit(r.getShape()),
        stride(r.getRank(), 1);
    start[dim] = offset;
    limit[dim] = offset + size;
    out.push_back(e.slice(g, start, limit, stride));
    offset += size;
  }
  return success();
}

LogicalResult GatherOp::buildVJP(OpBuilder &b, ValueRange cts,
                                 SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getTable()))
    return noCotangents(*this, out);
  // Folded where the indices are an arange over the whole table (a position
  // embedding): the gradient is the cotangent itself.
  Value dt = b.createOrFold<ScatterAddOp>(getLoc(), getTable().getType(), g,
                                          getIndices(), getAxis());
  out.append({dt, Value()});
  return success();
}

LogicalResult ScatterAddOp::buildVJP(OpBuilder &b, ValueRange cts,
                                     SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(getUpdates()))
    return noCotangents(*this, out);
  Value du = GatherOp::create(b, getLoc(), getUpdates().getType(), g,
                              getIndices(), getAxis());
  out.append({du, Value()});
  return success();
}

//===----------------------------------------------------------------------===//
// Composite neural-network ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ValueRange cts,
                                  SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto type = tensorType(getX());
  int64_t axis = getAxis();
  // dx = y * (g - sum(g * y)).
  Value y = getY();
  Value dot = e.unreduce(e.sum(e.mul(g, y), {axis}, true), type, {axis}, true);
  out.push_back(e.mul(y, e.sub(g, dot)));
  return success();
}

LogicalResult LogSoftmaxOp::buildVJP(OpBuilder &b, ValueRange cts,
                                     SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto type = tensorType(getX());
  int64_t axis = getAxis();
  // dx = g - softmax(x) * sum(g), softmax(x) = exp(y).
  Value total = e.unreduce(e.sum(g, {axis}, true), type, {axis}, true);
  out.push_back(e.sub(g, e.mul(e.exp(getY()), total)));
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX();
  auto type = tensorType(x);
  int64_t axis = getAxis(), rank = type.getRank();
  SmallVector<int64_t> norm = iota(axis, rank), lead = iota(0, axis);
  double eps = getEpsilon().convertToDouble();
  auto bcast = [&](Value v) { return e.unreduce(v, type, norm, true); };
  // Recompute the statistics: xhat = (x - mean) * rstd.
  Value xc = e.sub(x, bcast(e.mean(x, norm, true)));
  Value var = e.mean(e.mul(xc, xc), norm, true);
  Value rstd = bcast(e.rsqrt(e.addScalar(var, eps)));
  Value xhat = e.mul(xc, rstd);
  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
  Value dxhat = e.mul(g, e.broadcast(getScale(), type, norm));
  Value m1 = bcast(e.mean(dxhat, norm, true));
  Value m2 = bcast(e.mean(e.mul(dxhat, xhat), norm, true));
  Value dx = e.mul(rstd, e.sub(e.sub(dxhat, m1), e.mul(xhat, m2)));
  Value dscale = e.sum(e.mul(g, xhat), lead);
  Value dbias = e.sum(g, lead);
  out.append({dx, dscale, dbias});
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ValueRange cts,
                                  SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX();
  auto type = tensorType(x);
  int64_t axis = getAxis(), rank = type.getRank();
  SmallVector<int64_t> norm = iota(axis, rank), lead = iota(0, axis);
  double eps = getEpsilon().convertToDouble();
  auto bcast = [&](Value v) { return e.unreduce(v, type, norm, true); };
  // r = rsqrt(mean(x^2) + eps); y = x * r * scale.
  Value r = bcast(e.rsqrt(e.addScalar(e.mean(e.mul(x, x), norm, true), eps)));
  // dx = r * (dxhat - x * r^2 * mean(dxhat * x)).
  Value dxhat = e.mul(g, e.broadcast(getScale(), type, norm));
  Value m = bcast(e.mean(e.mul(dxhat, x), norm, true));
  Value dx = e.mul(r, e.sub(dxhat, e.mul(e.mul(x, e.mul(r, r)), m)));
  Value dscale = e.sum(e.mul(g, e.mul(x, r)), lead);
  out.append({dx, dscale});
  return success();
}

LogicalResult BatchNormOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX(), scale = getScale(), mean = getMean();
  auto type = tensorType(x);
  SmallVector<int64_t> reduced = allButChannel(type);
  double eps = getEpsilon().convertToDouble();
  // y = (x - m) * rs * s + b with rs = rsqrt(v + eps); the statistics are
  // operands (batch statistics reach x through batch_norm_stats' rule).
  Value rs = e.rsqrt(e.addScalar(getVariance(), eps));
  Value dx = e.mul(g, e.channel(e.mul(scale, rs), type));
  Value xc = e.sub(x, e.channel(mean, type));
  Value sg = e.sum(g, reduced);
  Value sgx = e.sum(e.mul(g, xc), reduced);
  Value dscale = e.mul(sgx, rs);
  Value dmean = e.neg(e.mul(sg, e.mul(scale, rs)));
  // d/dv rs = -1/2 rs^3.
  Value rs3 = e.mul(rs, e.mul(rs, rs));
  Value dvar = e.mul(e.mul(sgx, scale), e.scale(rs3, -0.5));
  out.append({dx, dscale, sg, dmean, dvar});
  return success();
}

LogicalResult BatchNormStatsOp::buildVJP(OpBuilder &b, ValueRange cts,
                                         SmallVectorImpl<Value> &out) {
  Value gm = cts[0], gv = cts[1];
  if (!gm && !gv)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value x = getX();
  auto type = tensorType(x);
  double count =
      static_cast<double>(type.getNumElements() / type.getDimSize(1));
  // mean = sum(x) / M; var = sum((x - mean)^2) / M (the mean's own
  // dependence cancels since sum(x - mean) = 0).
  Value dx;
  if (gm)
    dx = e.channel(e.scale(gm, 1.0 / count), type);
  if (gv) {
    Value xc = e.sub(x, e.channel(getMean(), type));
    Value dv = e.mul(e.channel(e.scale(gv, 2.0 / count), type), xc);
    dx = dx ? e.add(dx, dv) : dv;
  }
  out.push_back(dx);
  return success();
}

LogicalResult MaxPool2DOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  auto x = tensorType(getX()), gt = tensorType(g);
  // Each window's cotangent goes to the first maximum of the window.
  auto indexType = gt.clone(b.getI64Type());
  Value idx = MaxPool2DArgmaxOp::create(
      b, getLoc(), indexType, getX(), getKernel(), getStrides(), getPadding());
  out.push_back(MaxPool2DGradOp::create(b, getLoc(), x, g, idx, getKernel(),
                                        getStrides(), getPadding()));
  return success();
}

LogicalResult MaxPool2DGradOp::buildVJP(OpBuilder &b, ValueRange cts,
                                        SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  // Linear in dy: each window reads the cotangent at its maximum.
  Emitter e{b, getLoc()};
  auto gt = tensorType(g);
  Value flatG = e.reshape(g, {gt.getNumElements()});
  out.push_back(GatherOp::create(b, getLoc(), getDy().getType(), flatG,
                                 getArgmax(), 0));
  out.push_back(Value()); // argmax: integer, no gradient
  return success();
}

LogicalResult MaxPool2DArgmaxOp::buildVJP(OpBuilder &, ValueRange,
                                          SmallVectorImpl<Value> &out) {
  // Integer result: no gradient.
  return noCotangents(*this, out);
}

LogicalResult AvgPool2DOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  auto x = tensorType(getX()), gt = tensorType(g);
  ArrayRef<int64_t> kernel = getKernel(), strides = getStrides(),
                    pads = getPadding();
  int64_t channels = x.getDimSize(1);
  // Average pooling is a depthwise convolution with a constant filter: its
  // gradient is that convolution's input gradient. Without
  // count_include_pad the divisor depends on the window (how many of its
  // elements are inside the input), so it scales the cotangent instead.
  auto filterType = RankedTensorType::get({channels, 1, kernel[0], kernel[1]},
                                          x.getElementType());
  Value filter;
  Value scaled = g;
  if (getCountIncludePad()) {
    filter =
        e.splat(filterType, 1.0 / static_cast<double>(kernel[0] * kernel[1]));
  } else {
    filter = e.splat(filterType, 1.0);
    int64_t ho = gt.getDimSize(2), wo = gt.getDimSize(3);
    auto inside = [](int64_t start, int64_t k, int64_t n) {
      return std::min(start + k, n) - std::max<int64_t>(start, 0);
    };
    SmallVector<double> inv;
    for (int64_t i = 0; i < ho; ++i)
      for (int64_t j = 0; j < wo; ++j) {
        int64_t rows =
            inside(i * strides[0] - pads[0], kernel[0], x.getDimSize(2));
        int64_t cols =
            inside(j * strides[1] - pads[1], kernel[1], x.getDimSize(3));
        inv.push_back(1.0 / static_cast<double>(rows * cols));
      }
    auto invType = RankedTensorType::get({ho, wo}, x.getElementType());
    SmallVector<Attribute> attrs;
    for (double v : inv)
      attrs.push_back(b.getFloatAttr(x.getElementType(), v));
    Value invCount =
        ConstantOp::create(b, getLoc(), DenseElementsAttr::get(invType, attrs));
    scaled = e.mul(g, e.broadcast(invCount, gt, {2, 3}));
  }
  SmallVector<int64_t> dilations = {1, 1};
  out.push_back(Conv2DInputGradOp::create(b, getLoc(), x, scaled, filter,
                                          strides, pads, dilations, channels));
  return success();
}

LogicalResult DropoutOp::buildVJP(OpBuilder &b, ValueRange cts,
                                  SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  // Given its mask, dropout is linear in x: the same op (same seed, stream
  // and ratio, so the same mask) applied to the cotangent.
  Value dx = DropoutOp::create(b, getLoc(), g.getType(), g, getSeed(),
                               getRatioAttr().getValue(), getStream());
  out.append({dx, Value()});
  return success();
}

LogicalResult RandomOp::buildVJP(OpBuilder &, ValueRange,
                                 SmallVectorImpl<Value> &out) {
  return noCotangents(*this, out);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange cts,
                                       SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value logits = getLogits(), labels = getLabels();
  auto lt = tensorType(logits), yt = tensorType(labels);
  Type floatType = lt.getElementType(), intType = yt.getElementType();
  // The loss's element type: f32 for 16-bit logits (C3). The label count,
  // the per-label weights and (softmax - onehot) * weight are computed in it
  // (a count of thousands of labels is not exact in bf16, and in f16 the
  // product of a scaled loss's weight can overflow where the f32 product
  // rounds to a finite value); dlogits is rounded to the logits' type once.
  Type lossType = tensorType(g).getElementType();
  int64_t classes = lt.getDimSize(1);
  // All dimensions of the logits but the class dimension.
  SmallVector<int64_t> labelDims = allButChannel(lt);

  // Per-label weight of (softmax - onehot): the cotangent of its loss term,
  // 0 for ignored labels. What depends on the labels alone (which count,
  // and how many) is emitted before the loss: loom-fuse makes it a kernel
  // ahead of the loss's, and the softmax below can then join the loss's
  // kernel and share its row maxima and sums.
  Value valid, count;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(getOperation());
    if (auto ignore = getIgnoreIndex())
      valid = e.castTo(
          e.cmp(ComparePredicate::NE, labels,
                e.splat(yt, static_cast<double>(
                                static_cast<int64_t>(*ignore)))),
          lossType);
    if (getReduction() == Reduction::Mean)
      count = valid ? e.sum(valid, iota(0, yt.getRank()))
                    : e.splat(tensorType(g),
                              static_cast<double>(yt.getNumElements()));
  }
  auto perLabel = yt.clone(lossType);
  Value weight;
  switch (getReduction()) {
  case Reduction::None:
    weight = g;
    break;
  case Reduction::Sum:
    weight = e.broadcast(g, perLabel, {});
    break;
  case Reduction::Mean:
    weight = e.broadcast(e.div(g, count), perLabel, {});
    break;
  }
  if (valid)
    weight = e.mul(weight, valid);

  // The softmax, then the one-hot labels and the product: loom-fuse groups
  // ops in order, so everything after the softmax is its epilogue, in its
  // kernel (the loss's, see above), and the logits-sized one-hot is never
  // materialized.
  // From 16-bit logits, in f32: the probabilities are not rounded before
  // the subtraction (loom-widen-keep-f32 would round a 16-bit softmax's).
  Value probs = SoftmaxOp::create(
      b, getLoc(), lossType == floatType ? logits : e.castTo(logits, lossType),
      1);
  // onehot[n, c, ...] = (labels[n, ...] == c).
  SmallVector<Attribute> classAttrs;
  for (int64_t c = 0; c < classes; ++c)
    classAttrs.push_back(b.getIntegerAttr(intType, c));
  Value classIds = ConstantOp::create(
      b, getLoc(),
      DenseElementsAttr::get(RankedTensorType::get({classes}, intType),
                             classAttrs));
  auto intLogits = lt.clone(intType);
  Value onehot = e.castTo(e.cmp(ComparePredicate::EQ,
                                e.broadcast(labels, intLogits, labelDims),
                                e.channel(classIds, intLogits)),
                          lossType);
  Value dlogits = e.mul(e.sub(probs, onehot),
                        e.broadcast(weight, lt.clone(lossType), labelDims));
  if (lossType != floatType)
    dlogits = e.castTo(dlogits, floatType);
  out.append({dlogits, Value()});
  return success();
}

LogicalResult MseOp::buildVJP(OpBuilder &b, ValueRange cts,
                              SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value p = getPrediction();
  auto pt = tensorType(p);
  Value weight;
  switch (getReduction()) {
  case Reduction::None:
    weight = g;
    break;
  case Reduction::Sum:
    weight = e.broadcast(g, pt, {});
    break;
  case Reduction::Mean:
    weight = e.broadcast(
        e.scale(g, 1.0 / static_cast<double>(pt.getNumElements())), pt, {});
    break;
  }
  // d/dp (p - t)^2 = 2 (p - t).
  Value dp = e.mul(e.scale(e.sub(p, getTarget()), 2.0), weight);
  out.append({dp, e.neg(dp)});
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives (the sum convention of LoomOps.td: the objective is the sum of
// every rank's own)
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  if (getReduce() == CollectiveReduce::Max)
    return emitOpError("has no gradient rule for reduce = max");
  out.push_back(AllReduceOp::create(b, getLoc(), g.getType(), g, getAxis(),
                                    getReduce()));
  return success();
}

LogicalResult ReduceScatterOp::buildVJP(OpBuilder &b, ValueRange cts,
                                        SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g)
    return noCotangents(*this, out);
  Emitter e{b, getLoc()};
  Value gathered =
      AllGatherOp::create(b, getLoc(), getX().getType(), g, getAxis());
  if (getReduce() == CollectiveReduce::Mean)
    gathered = e.scale(gathered, 1.0 / static_cast<double>(getAxisSize()));
  out.push_back(gathered);
  return success();
}

LogicalResult AllGatherOp::buildVJP(OpBuilder &b, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  Value g = cts[0];
  if (!g || !isFloatTensor(g))
    return noCotangents(*this, out);
  out.push_back(ReduceScatterOp::create(b, getLoc(), getX().getType(), g,
                                        getAxis(), CollectiveReduce::Sum));
  return success();
}

LogicalResult RankSliceOp::buildVJP(OpBuilder &, ValueRange cts,
                                    SmallVectorImpl<Value> &out) {
  if (!cts[0])
    return noCotangents(*this, out);
  return emitOpError("has no gradient rule (its cotangent would sit at a "
                     "rank-dependent offset)");
}
