//===- LoomToLinalg.cpp - Lower loom ops to linalg on tensors -------------===//
//
// One rewrite per op, applied by a walk over the function (tensor types do not
// change, so the dialect-conversion framework would add nothing). Each rule
// mirrors the interpreter's rule for the op: same iteration order for sums
// where the order is observable (scatter_add), same NaN behaviour (maximumf
// and minimumf propagate NaN like the interpreter's nanMax/nanMin), same
// dropout hash. Values the interpreter rejects (an out-of-range gather index
// or label) are clamped here so that a kernel cannot touch memory outside
// its buffers.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

namespace loom {
#define GEN_PASS_DEF_CONVERTLOOMTOLINALGPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using utils::IteratorType;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// Builds the ops of one rewrite at one place.
struct Lowerer {
  OpBuilder &b;
  Location loc;

  //===--- scalars -------------------------------------------------------===//

  Value constant(Type type, double v) {
    if (auto ft = dyn_cast<FloatType>(type))
      return arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, v));
    if (type.isIndex())
      return arith::ConstantIndexOp::create(b, loc, static_cast<int64_t>(v));
    auto it = cast<IntegerType>(type);
    if (it.getWidth() == 1)
      return arith::ConstantOp::create(b, loc, b.getIntegerAttr(it, v != 0));
    return arith::ConstantOp::create(
        b, loc, b.getIntegerAttr(it, static_cast<int64_t>(v)));
  }
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  Value add(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::AddFOp::create(b, loc, x, y);
    return arith::AddIOp::create(b, loc, x, y);
  }
  Value sub(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::SubFOp::create(b, loc, x, y);
    return arith::SubIOp::create(b, loc, x, y);
  }
  Value mul(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MulFOp::create(b, loc, x, y);
    return arith::MulIOp::create(b, loc, x, y);
  }
  Value div(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::DivFOp::create(b, loc, x, y);
    return arith::DivSIOp::create(b, loc, x, y);
  }
  Value max(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MaximumFOp::create(b, loc, x, y);
    return arith::MaxSIOp::create(b, loc, x, y);
  }
  Value min(Value x, Value y) {
    if (isa<FloatType>(x.getType()))
      return arith::MinimumFOp::create(b, loc, x, y);
    return arith::MinSIOp::create(b, loc, x, y);
  }
  Value exp(Value x) { return math::ExpOp::create(b, loc, x); }
  Value log(Value x) { return math::LogOp::create(b, loc, x); }
  Value sqrt(Value x) { return math::SqrtOp::create(b, loc, x); }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value cmpi(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value andi(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }
  Value toIndex(Value v) {
    if (v.getType().isIndex())
      return v;
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  }
  /// Converts a scalar between element types the way the interpreter rounds
  /// (float to integer truncates, anything to i1 is `!= 0`).
  Value convert(Value v, Type to) {
    Type from = v.getType();
    if (from == to)
      return v;
    auto toInt = dyn_cast<IntegerType>(to);
    auto fromInt = dyn_cast<IntegerType>(from);
    if (toInt && toInt.getWidth() == 1) {
      if (fromInt)
        return cmpi(arith::CmpIPredicate::ne, v, constant(from, 0));
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                   constant(from, 0));
    }
    if (isa<FloatType>(from) && isa<FloatType>(to)) {
      if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
        return arith::ExtFOp::create(b, loc, to, v);
      return arith::TruncFOp::create(b, loc, to, v);
    }
    if (fromInt && isa<FloatType>(to)) {
      if (fromInt.getWidth() == 1)
        return arith::UIToFPOp::create(b, loc, to, v);
      return arith::SIToFPOp::create(b, loc, to, v);
    }
    if (isa<FloatType>(from) && toInt)
      return arith::FPToSIOp::create(b, loc, to, v);
    if (fromInt.getWidth() < toInt.getWidth())
      return fromInt.getWidth() == 1
                 ? Value(arith::ExtUIOp::create(b, loc, to, v))
                 : Value(arith::ExtSIOp::create(b, loc, to, v));
    return arith::TruncIOp::create(b, loc, to, v);
  }
  /// The most negative (or positive) value of a type: -inf (+inf) for
  /// floats, the exact signed extreme for integers (a double cannot hold
  /// 2^63 - 1).
  Value extreme(Type t, bool positive) {
    if (auto ft = dyn_cast<FloatType>(t))
      return arith::ConstantOp::create(
          b, loc,
          b.getFloatAttr(ft, positive ? std::numeric_limits<double>::infinity()
                                      : -std::numeric_limits<double>::infinity()));
    unsigned width = t.getIntOrFloatBitWidth();
    APInt v = positive ? APInt::getSignedMaxValue(width)
                       : APInt::getSignedMinValue(width);
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(t, v));
  }

  //===--- tensors -------------------------------------------------------===//

  Value empty(RankedTensorType t) {
    return tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
  }
  Value filled(RankedTensorType t, double v) {
    return filledWith(t, constant(t.getElementType(), v));
  }
  Value filledWith(RankedTensorType t, Value scalar) {
    return linalg::FillOp::create(b, loc, ValueRange{scalar},
                                  ValueRange{empty(t)})
        .getResult(0);
  }
  AffineMap identity(int64_t rank) {
    return AffineMap::getMultiDimIdentityMap(rank, b.getContext());
  }
  AffineMap map(int64_t numDims, ArrayRef<AffineExpr> results) {
    return AffineMap::get(numDims, 0, results, b.getContext());
  }
  AffineExpr dim(int64_t d) { return b.getAffineDimExpr(d); }

  using BodyFn = function_ref<SmallVector<Value>(ValueRange)>;
  /// A linalg.generic; `body` gets the block arguments (inputs, then the
  /// outputs' current values) and returns the values to yield.
  SmallVector<Value> generic(ValueRange inputs, ValueRange inits,
                             ArrayRef<AffineMap> maps,
                             ArrayRef<IteratorType> iterators, BodyFn body) {
    SmallVector<Type> types;
    for (Value v : inits)
      types.push_back(v.getType());
    auto op = linalg::GenericOp::create(
        b, loc, types, inputs, inits, maps, iterators,
        [&](OpBuilder &nested, Location, ValueRange args) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nested.getInsertionBlock(),
                              nested.getInsertionPoint());
          linalg::YieldOp::create(b, loc, body(args));
        });
    return SmallVector<Value>(op.getResults());
  }
  /// An elementwise generic over `inputs` (all of `type`'s shape).
  Value elementwise(ValueRange inputs, RankedTensorType type,
                    function_ref<Value(ValueRange)> f) {
    int64_t rank = type.getRank();
    SmallVector<AffineMap> maps(inputs.size() + 1, identity(rank));
    SmallVector<IteratorType> its(rank, IteratorType::parallel);
    return generic(inputs, empty(type), maps, its, [&](ValueRange args) {
      return SmallVector<Value>{f(args.drop_back())};
    })[0];
  }
  Value linalgIndex(int64_t d) { return linalg::IndexOp::create(b, loc, d); }

  /// Reshapes a static tensor to `type` (same element count, row-major):
  /// collapse to 1-D, then expand.
  Value reshape(Value v, RankedTensorType type) {
    RankedTensorType from = tensorType(v);
    if (from == type)
      return v;
    auto allDims = [](int64_t rank) {
      SmallVector<ReassociationIndices> r;
      if (rank > 0) {
        r.emplace_back();
        for (int64_t i = 0; i < rank; ++i)
          r.back().push_back(i);
      }
      return r;
    };
    auto flatType = RankedTensorType::get({from.getNumElements()},
                                          from.getElementType());
    Value flat = v;
    if (from.getRank() == 0)
      flat = tensor::ExpandShapeOp::create(b, loc, flatType, v, allDims(0));
    else if (from.getRank() > 1)
      flat = tensor::CollapseShapeOp::create(b, loc, flatType, v,
                                             allDims(from.getRank()));
    if (type.getRank() == 1)
      return flat;
    if (type.getRank() == 0)
      return tensor::CollapseShapeOp::create(b, loc, type, flat, allDims(0));
    return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                         allDims(type.getRank()));
  }

  /// Sums (or max/min) `x` over `dims` into the tensor of the kept dims.
  enum class Combine { Sum, Max, Min };
  Value reduce(Value x, ArrayRef<int64_t> dims, Combine how) {
    RankedTensorType xt = tensorType(x);
    int64_t rank = xt.getRank();
    SmallVector<int64_t> keptShape;
    SmallVector<AffineExpr> kept;
    SmallVector<IteratorType> its;
    for (int64_t d = 0; d < rank; ++d) {
      bool reduced = llvm::is_contained(dims, d);
      its.push_back(reduced ? IteratorType::reduction : IteratorType::parallel);
      if (!reduced) {
        keptShape.push_back(xt.getDimSize(d));
        kept.push_back(dim(d));
      }
    }
    Type et = xt.getElementType();
    auto outType = RankedTensorType::get(keptShape, et);
    Value init = how == Combine::Sum ? constant(et, 0)
                                     : extreme(et, how == Combine::Min);
    return generic(x, filledWith(outType, init), {identity(rank), map(rank, kept)},
                   its, [&](ValueRange a) {
                     Value r = how == Combine::Sum   ? add(a[1], a[0])
                               : how == Combine::Max ? max(a[1], a[0])
                                                     : min(a[1], a[0]);
                     return SmallVector<Value>{r};
                   })[0];
  }

  /// Reads `t` at `indices` (index values) with every index clamped into
  /// its dimension, so a bad index reads a valid element.
  Value extractClamped(Value t, SmallVector<Value> indices) {
    RankedTensorType tt = tensorType(t);
    for (auto [i, idx] : llvm::enumerate(indices)) {
      Value lo = index(0), hi = index(tt.getDimSize(i) - 1);
      idx = arith::MaxSIOp::create(b, loc, idx, lo);
      idx = arith::MinSIOp::create(b, loc, idx, hi);
      indices[i] = idx;
    }
    return tensor::ExtractOp::create(b, loc, t, indices);
  }

  /// Pads the two spatial dims of an NCHW tensor with zeros.
  Value padSpatial(Value x, ArrayRef<int64_t> pad) {
    if (pad[0] == 0 && pad[1] == 0 && pad[2] == 0 && pad[3] == 0)
      return x;
    RankedTensorType xt = tensorType(x);
    ArrayRef<int64_t> s = xt.getShape();
    auto padded = RankedTensorType::get(
        {s[0], s[1], s[2] + pad[0] + pad[2], s[3] + pad[1] + pad[3]},
        xt.getElementType());
    return insertSlice(x, filled(padded, 0), {0, 0, pad[0], pad[1]},
                       {1, 1, 1, 1});
  }
  Value insertSlice(Value src, Value dest, ArrayRef<int64_t> offsets,
                    ArrayRef<int64_t> strides) {
    // Nothing to insert (its offset may be the end of a dimension, which
    // tensor.insert_slice does not accept).
    if (tensorType(src).getNumElements() == 0)
      return dest;
    SmallVector<OpFoldResult> o, sz, st;
    for (int64_t v : offsets)
      o.push_back(b.getIndexAttr(v));
    for (int64_t v : tensorType(src).getShape())
      sz.push_back(b.getIndexAttr(v));
    for (int64_t v : strides)
      st.push_back(b.getIndexAttr(v));
    return tensor::InsertSliceOp::create(b, loc, src, dest, o, sz, st);
  }
};

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

using Rewrite = FailureOr<SmallVector<Value>>;

SmallVector<Value> one(Value v) { return {v}; }

Value unaryScalar(Lowerer &l, Operation *op, Value x) {
  Type t = x.getType();
  bool isFloat = isa<FloatType>(t);
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) {
        return isFloat ? Value(arith::NegFOp::create(l.b, l.loc, x))
                       : l.sub(l.constant(t, 0), x);
      })
      .Case([&](AbsOp) {
        return isFloat ? Value(math::AbsFOp::create(l.b, l.loc, x))
                       : Value(math::AbsIOp::create(l.b, l.loc, x));
      })
      .Case([&](ExpOp) { return l.exp(x); })
      .Case([&](LogOp) { return l.log(x); })
      .Case([&](TanhOp) { return math::TanhOp::create(l.b, l.loc, x); })
      .Case([&](SigmoidOp) {
        Value one = l.constant(t, 1);
        Value e = l.exp(arith::NegFOp::create(l.b, l.loc, x));
        return l.div(one, l.add(one, e));
      })
      .Case([&](ReluOp) { return l.max(x, l.constant(t, 0)); })
      .Case([&](ErfOp) { return math::ErfOp::create(l.b, l.loc, x); })
      .Case([&](SqrtOp) { return l.sqrt(x); })
      .Case([&](RsqrtOp) { return l.div(l.constant(t, 1), l.sqrt(x)); })
      .Case([&](FloorOp) { return math::FloorOp::create(l.b, l.loc, x); })
      .Case([&](CosOp) { return math::CosOp::create(l.b, l.loc, x); })
      .Case([&](SinOp) { return math::SinOp::create(l.b, l.loc, x); })
      .Case([&](GeluOp g) -> Value {
        Value half = l.constant(t, 0.5), one = l.constant(t, 1);
        Value inner;
        if (g.getApproximate() == GeluApproximation::Tanh) {
          Value x3 = l.mul(l.mul(x, x), x);
          Value u = l.mul(l.constant(t, std::sqrt(2.0 / M_PI)),
                          l.add(x, l.mul(l.constant(t, 0.044715), x3)));
          inner = math::TanhOp::create(l.b, l.loc, u);
        } else {
          inner = math::ErfOp::create(
              l.b, l.loc, l.mul(x, l.constant(t, 1.0 / std::sqrt(2.0))));
        }
        return l.mul(l.mul(half, x), l.add(one, inner));
      })
      .Default([](Operation *) { return Value(); });
}

Value binaryScalar(Lowerer &l, Operation *op, Value x, Value y) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](AddOp) { return l.add(x, y); })
      .Case([&](SubOp) { return l.sub(x, y); })
      .Case([&](MulOp) { return l.mul(x, y); })
      .Case([&](DivOp) { return l.div(x, y); })
      .Case([&](PowOp) { return math::PowFOp::create(l.b, l.loc, x, y); })
      .Case([&](MaxOp) { return l.max(x, y); })
      .Case([&](MinOp) { return l.min(x, y); })
      .Default([](Operation *) { return Value(); });
}

Value compareScalar(Lowerer &l, ComparePredicate p, Value x, Value y) {
  if (isa<FloatType>(x.getType())) {
    arith::CmpFPredicate fp = arith::CmpFPredicate::OEQ;
    switch (p) {
    case ComparePredicate::EQ: fp = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::NE: fp = arith::CmpFPredicate::UNE; break;
    case ComparePredicate::LT: fp = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::LE: fp = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::GT: fp = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::GE: fp = arith::CmpFPredicate::OGE; break;
    }
    return arith::CmpFOp::create(l.b, l.loc, fp, x, y);
  }
  // i1 holds 0 and 1: compare unsigned so that true > false.
  bool u = x.getType().isInteger(1);
  arith::CmpIPredicate ip = arith::CmpIPredicate::eq;
  switch (p) {
  case ComparePredicate::EQ: ip = arith::CmpIPredicate::eq; break;
  case ComparePredicate::NE: ip = arith::CmpIPredicate::ne; break;
  case ComparePredicate::LT: ip = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::LE: ip = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::GT: ip = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::GE: ip = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  }
  return l.cmpi(ip, x, y);
}

Rewrite lowerReduce(Lowerer &l, Operation *op, Value x,
                    ArrayRef<int64_t> dims) {
  RankedTensorType rt = tensorType(op->getResult(0));
  Value r;
  if (isa<ReduceSumOp, ReduceMeanOp>(op))
    r = l.reduce(x, dims, Lowerer::Combine::Sum);
  else if (isa<ReduceMaxOp>(op))
    r = l.reduce(x, dims, Lowerer::Combine::Max);
  else
    r = l.reduce(x, dims, Lowerer::Combine::Min);
  if (isa<ReduceMeanOp>(op)) {
    int64_t count = 1;
    for (int64_t d : dims)
      count *= tensorType(x).getDimSize(d);
    Type et = rt.getElementType();
    r = l.elementwise(r, tensorType(r), [&](ValueRange a) {
      return l.div(a[0], l.constant(et, static_cast<double>(count)));
    });
  }
  return one(l.reshape(r, rt));
}

/// Softmax and log-softmax over `axis`: max, sum of exponentials, then the
/// elementwise result, as the interpreter computes them.
Value lowerSoftmax(Lowerer &l, Value x, int64_t axis, bool logSoftmax) {
  RankedTensorType xt = tensorType(x);
  int64_t rank = xt.getRank();
  Value mx = l.reduce(x, {axis}, Lowerer::Combine::Max);
  SmallVector<AffineExpr> kept;
  SmallVector<IteratorType> its;
  for (int64_t d = 0; d < rank; ++d) {
    its.push_back(d == axis ? IteratorType::reduction : IteratorType::parallel);
    if (d != axis)
      kept.push_back(l.dim(d));
  }
  AffineMap keptMap = l.map(rank, kept);
  Value sum = l.generic({x, mx}, l.filled(tensorType(mx), 0),
                        {l.identity(rank), keptMap, keptMap}, its,
                        [&](ValueRange a) {
                          return one(l.add(a[2], l.exp(l.sub(a[0], a[1]))));
                        })[0];
  SmallVector<IteratorType> par(rank, IteratorType::parallel);
  return l.generic({x, mx, sum}, l.empty(xt),
                   {l.identity(rank), keptMap, keptMap, l.identity(rank)}, par,
                   [&](ValueRange a) {
                     Value v = l.sub(a[0], a[1]);
                     if (logSoftmax)
                       return one(l.sub(v, l.log(a[2])));
                     return one(l.div(l.exp(v), a[2]));
                   })[0];
}

/// Layer norm and RMS norm over the dims from `axis` on.
Value lowerNorm(Lowerer &l, Value x, Value scale, Value bias, int64_t axis,
                double eps, bool rms) {
  RankedTensorType xt = tensorType(x);
  int64_t rank = xt.getRank();
  Type et = xt.getElementType();
  SmallVector<int64_t> dims;
  for (int64_t d = axis; d < rank; ++d)
    dims.push_back(d);
  double n = static_cast<double>(product(xt.getShape().drop_front(axis)));
  SmallVector<AffineExpr> outer, inner;
  SmallVector<IteratorType> its, par(rank, IteratorType::parallel);
  for (int64_t d = 0; d < rank; ++d) {
    (d < axis ? outer : inner).push_back(l.dim(d));
    its.push_back(d < axis ? IteratorType::parallel : IteratorType::reduction);
  }
  AffineMap outerMap = l.map(rank, outer), innerMap = l.map(rank, inner);
  Value mean;
  if (!rms) {
    Value sum = l.reduce(x, dims, Lowerer::Combine::Sum);
    mean = l.elementwise(sum, tensorType(sum), [&](ValueRange a) {
      return l.div(a[0], l.constant(et, n));
    });
  }
  RankedTensorType statType =
      RankedTensorType::get(xt.getShape().take_front(axis), et);
  SmallVector<Value> ins{x};
  SmallVector<AffineMap> maps{l.identity(rank)};
  if (!rms) {
    ins.push_back(mean);
    maps.push_back(outerMap);
  }
  maps.push_back(outerMap);
  Value sq = l.generic(ins, l.filled(statType, 0), maps, its,
                       [&](ValueRange a) {
                         Value d = rms ? a[0] : l.sub(a[0], a[1]);
                         return one(l.add(a.back(), l.mul(d, d)));
                       })[0];
  Value inv = l.elementwise(sq, statType, [&](ValueRange a) {
    Value var = l.div(a[0], l.constant(et, n));
    return l.div(l.constant(et, 1), l.sqrt(l.add(var, l.constant(et, eps))));
  });
  SmallVector<Value> fin{x, inv, scale};
  SmallVector<AffineMap> fmaps{l.identity(rank), outerMap, innerMap};
  if (!rms) {
    fin.push_back(bias);
    fin.push_back(mean);
    fmaps.push_back(innerMap);
    fmaps.push_back(outerMap);
  }
  fmaps.push_back(l.identity(rank));
  return l.generic(fin, l.empty(xt), fmaps, par, [&](ValueRange a) {
    if (rms)
      return one(l.mul(l.mul(a[0], a[1]), a[2]));
    Value centered = l.sub(a[0], a[4]);
    return one(l.add(l.mul(l.mul(centered, a[1]), a[2]), a[3]));
  })[0];
}

/// conv2d and its filter gradient are one contraction over a padded input;
/// `ChannelExpr` gives the input channel read for an output channel `o` and
/// an in-group channel `c` (groups make it `(o floordiv OG) * CG + c`).
AffineExpr groupChannel(Lowerer &l, AffineExpr o, AffineExpr c, int64_t OG,
                        int64_t CG, int64_t groups) {
  if (groups == 1)
    return c;
  return o.floorDiv(OG) * CG + c;
}

/// conv2d and its filter gradient are one contraction over the loops (n, o,
/// oy, ox, c, ky, kx) of padded-x[n, ch(o, c), oy*s + ky*d, ox*s + kx*d]
/// times a second operand: the filter F[o, c, ky, kx] into y[n, o, oy, ox]
/// (reducing c, ky, kx), or dy[n, o, oy, ox] into dF[o, c, ky, kx]
/// (reducing n, oy, ox, in that order, as the interpreter sums).
Value convContraction(Lowerer &l, Value x, Value other,
                      RankedTensorType outType, bool filterGrad,
                      ArrayRef<int64_t> s, ArrayRef<int64_t> d,
                      ArrayRef<int64_t> p, int64_t groups, int64_t O,
                      int64_t CG) {
  Value xp = l.padSpatial(x, p);
  AffineExpr n = l.dim(0), o = l.dim(1), oy = l.dim(2), ox = l.dim(3),
             c = l.dim(4), ky = l.dim(5), kx = l.dim(6);
  AffineMap xMap = l.map(7, {n, groupChannel(l, o, c, O / groups, CG, groups),
                             oy * s[0] + ky * d[0], ox * s[1] + kx * d[1]});
  AffineMap fMap = l.map(7, {o, c, ky, kx});
  AffineMap yMap = l.map(7, {n, o, oy, ox});
  IteratorType par = IteratorType::parallel, red = IteratorType::reduction;
  SmallVector<IteratorType> its =
      filterGrad ? SmallVector<IteratorType>{red, par, red, red, par, par, par}
                 : SmallVector<IteratorType>{par, par, par, par, red, red, red};
  SmallVector<AffineMap> maps = filterGrad
                                    ? SmallVector<AffineMap>{xMap, yMap, fMap}
                                    : SmallVector<AffineMap>{xMap, fMap, yMap};
  return l.generic({xp, other}, l.filled(outType, 0), maps, its,
                   [&](ValueRange a) {
                     return one(l.add(a[2], l.mul(a[0], a[1])));
                   })[0];
}

Rewrite lowerConv2D(Lowerer &l, Conv2DOp op, Value x, Value f) {
  RankedTensorType ft = tensorType(f);
  return one(convContraction(l, x, f, tensorType(op.getResult()), false,
                             op.getStrides(), op.getDilations(),
                             op.getPadding(), op.getGroups(),
                             ft.getDimSize(0), ft.getDimSize(1)));
}

Rewrite lowerConv2DFilterGrad(Lowerer &l, Conv2DFilterGradOp op, Value x,
                              Value dy) {
  RankedTensorType ft = tensorType(op.getResult());
  return one(convContraction(l, x, dy, ft, true, op.getStrides(),
                             op.getDilations(), op.getPadding(),
                             op.getGroups(), ft.getDimSize(0),
                             ft.getDimSize(1)));
}

/// im2col: one parallel loop per (c, i, j, n, y, x) of the columns (as a
/// 6-D tensor, reshaped to 2-D), reading the padded image at an affine
/// position.
Rewrite lowerIm2Col(Lowerer &l, Im2ColOp op, Value x) {
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(),
                    d = op.getDilations();
  RankedTensorType xt = tensorType(x), rt = tensorType(op.getResult());
  int64_t N = xt.getDimSize(0), C = xt.getDimSize(1);
  int64_t P = rt.getDimSize(1) / N;
  Value xp = l.padSpatial(x, op.getPadding());
  int64_t OW = (tensorType(xp).getDimSize(3) - (k[1] - 1) * d[1] - 1) / s[1] + 1;
  auto six = RankedTensorType::get({C, k[0], k[1], N, P / OW, OW},
                                   xt.getElementType());
  AffineExpr c = l.dim(0), i = l.dim(1), j = l.dim(2), n = l.dim(3),
             y = l.dim(4), xx = l.dim(5);
  AffineMap xMap = l.map(6, {n, c, y * s[0] + i * d[0], xx * s[1] + j * d[1]});
  SmallVector<IteratorType> par(6, IteratorType::parallel);
  Value cols = l.generic(xp, l.empty(six), {xMap, l.identity(6)}, par,
                         [&](ValueRange a) { return one(a[0]); })[0];
  return one(l.reshape(cols, rt));
}

/// col2im as a gather: each image position sums, over the kernel offsets
/// (i, j) in order, the column entry that read it, if any. No atomics, so
/// the same code and sum order on the CPU and the GPU.
Rewrite lowerCol2Im(Lowerer &l, Col2ImOp op, Value cols) {
  ArrayRef<int64_t> k = op.getKernel(), s = op.getStrides(),
                    p = op.getPadding(), d = op.getDilations();
  RankedTensorType rt = tensorType(op.getResult());
  int64_t N = rt.getDimSize(0), C = rt.getDimSize(1);
  int64_t OH = (rt.getDimSize(2) + p[0] + p[2] - (k[0] - 1) * d[0] - 1) / s[0] + 1;
  int64_t OW = (rt.getDimSize(3) + p[1] + p[3] - (k[1] - 1) * d[1] - 1) / s[1] + 1;
  Value six = l.reshape(cols, RankedTensorType::get({C, k[0], k[1], N, OH, OW},
                                                    rt.getElementType()));
  using P = arith::CmpIPredicate;
  // The output row or column a window at kernel offset `kk` reads position
  // `pos` from, and whether there is one.
  auto source = [&](Value pos, Value kk, int64_t dim, Value &valid) {
    Value at = l.sub(l.add(pos, l.index(p[dim])), l.mul(kk, l.index(d[dim])));
    Value ok = l.cmpi(P::sge, at, l.index(0));
    if (s[dim] > 1) {
      Value rem = arith::RemSIOp::create(l.b, l.loc, at, l.index(s[dim]));
      ok = l.andi(ok, l.cmpi(P::eq, rem, l.index(0)));
      at = l.div(at, l.index(s[dim]));
    }
    int64_t out = dim == 0 ? OH : OW;
    ok = l.andi(ok, l.cmpi(P::slt, at, l.index(out)));
    valid = valid ? l.andi(valid, ok) : ok;
    return at;
  };
  SmallVector<IteratorType> its(4, IteratorType::parallel);
  its.append(2, IteratorType::reduction);
  AffineMap outMap = l.map(6, {l.dim(0), l.dim(1), l.dim(2), l.dim(3)});
  // The window only gives the (i, j) loops their sizes, as in pooling.
  Value window =
      l.empty(RankedTensorType::get({k[0], k[1]}, rt.getElementType()));
  return one(l.generic(window, l.filled(rt, 0),
                       {l.map(6, {l.dim(4), l.dim(5)}), outMap}, its,
                       [&](ValueRange a) {
                         Value n = l.linalgIndex(0), c = l.linalgIndex(1);
                         Value i = l.linalgIndex(4), j = l.linalgIndex(5);
                         Value valid;
                         Value y = source(l.linalgIndex(2), i, 0, valid);
                         Value x = source(l.linalgIndex(3), j, 1, valid);
                         Value v = l.extractClamped(six, {c, i, j, n, y, x});
                         v = l.select(valid, v, l.constant(rt.getElementType(), 0));
                         return one(l.add(a[1], v));
                       })[0]);
}

/// The input gradient as a stride-1 convolution of the stride-dilated,
/// padded output gradient with the flipped filter: dy[oy] lands at row
/// q = oy*s - pad + d*(KH-1) of P, and dx[iy] = sum_k P[iy + k*d] *
/// F[KH-1-k]. Rows of dy that land outside P reach no input row.
Rewrite lowerConv2DInputGrad(Lowerer &l, Conv2DInputGradOp op, Value dy,
                             Value f) {
  ArrayRef<int64_t> s = op.getStrides(), d = op.getDilations(),
                    p = op.getPadding();
  RankedTensorType xt = tensorType(op.getResult());
  RankedTensorType dyt = tensorType(dy), ft = tensorType(f);
  int64_t groups = op.getGroups();
  int64_t N = dyt.getDimSize(0), O = dyt.getDimSize(1);
  int64_t CG = ft.getDimSize(1), KH = ft.getDimSize(2), KW = ft.getDimSize(3);
  int64_t OG = O / groups;
  int64_t H = xt.getDimSize(2), W = xt.getDimSize(3);
  int64_t K[2] = {KH, KW}, In[2] = {H, W};
  int64_t Out[2] = {dyt.getDimSize(2), dyt.getDimSize(3)};
  int64_t lo[2], hi[2], first[2], P[2];
  bool empty = false;
  for (int i = 0; i < 2; ++i) {
    int64_t shift = d[i] * (K[i] - 1) - p[i];
    P[i] = In[i] + d[i] * (K[i] - 1);
    // Smallest oy with oy*s + shift >= 0, largest with it <= P - 1.
    lo[i] = shift >= 0 ? 0 : (-shift + s[i] - 1) / s[i];
    hi[i] = std::min(Out[i] - 1, (P[i] - 1 - shift) >= 0
                                     ? (P[i] - 1 - shift) / s[i]
                                     : -1);
    first[i] = lo[i] * s[i] + shift;
    if (lo[i] > hi[i])
      empty = true;
  }
  Type et = xt.getElementType();
  auto pType = RankedTensorType::get({N, O, P[0], P[1]}, et);
  Value padded = l.filled(pType, 0);
  if (!empty) {
    SmallVector<OpFoldResult> off{l.b.getIndexAttr(0), l.b.getIndexAttr(0),
                                  l.b.getIndexAttr(lo[0]),
                                  l.b.getIndexAttr(lo[1])};
    SmallVector<OpFoldResult> size{
        l.b.getIndexAttr(N), l.b.getIndexAttr(O),
        l.b.getIndexAttr(hi[0] - lo[0] + 1), l.b.getIndexAttr(hi[1] - lo[1] + 1)};
    SmallVector<OpFoldResult> ones(4, l.b.getIndexAttr(1));
    Value part = tensor::ExtractSliceOp::create(l.b, l.loc, dy, off, size, ones);
    padded = l.insertSlice(part, padded, {0, 0, first[0], first[1]},
                           {1, 1, s[0], s[1]});
  }
  // Loops: n, c, iy, ix, og, ky, kx (c is the input channel).
  AffineExpr n = l.dim(0), c = l.dim(1), iy = l.dim(2), ix = l.dim(3),
             og = l.dim(4), ky = l.dim(5), kx = l.dim(6);
  AffineExpr oc = groups == 1 ? og : c.floorDiv(CG) * OG + og;
  AffineExpr fc = groups == 1 ? c : c % CG;
  AffineMap pMap = l.map(7, {n, oc, iy + ky * d[0], ix + kx * d[1]});
  AffineMap fMap = l.map(7, {oc, fc, ky * -1 + (KH - 1), kx * -1 + (KW - 1)});
  AffineMap xMap = l.map(7, {n, c, iy, ix});
  SmallVector<IteratorType> its(4, IteratorType::parallel);
  its.append(3, IteratorType::reduction);
  // The og loop's range comes from a shape-only operand.
  Value ogShape =
      l.empty(RankedTensorType::get({OG, KH, KW}, et));
  AffineMap ogMap = l.map(7, {og, ky, kx});
  return one(l.generic({padded, f, ogShape}, l.filled(xt, 0),
                       {pMap, fMap, ogMap, xMap}, its, [&](ValueRange a) {
                         return one(l.add(a[3], l.mul(a[0], a[1])));
                       })[0]);
}

/// Max/average pooling and the argmax of max pooling, window by window in
/// row-major order like the interpreter; out-of-bounds window positions are
/// skipped.
Rewrite lowerPool(Lowerer &l, Operation *op, Value x, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> s, ArrayRef<int64_t> p, bool countPad) {
  bool argmax = isa<MaxPool2DArgmaxOp>(op), isMax = !isa<AvgPool2DOp>(op);
  RankedTensorType xt = tensorType(x), yt = tensorType(op->getResult(0));
  Type et = xt.getElementType();
  int64_t H = xt.getDimSize(2), W = xt.getDimSize(3);
  auto valType = RankedTensorType::get(yt.getShape(), et);
  auto idxType = RankedTensorType::get(yt.getShape(), l.b.getI64Type());
  Value window = l.empty(RankedTensorType::get({kernel[0], kernel[1]}, et));
  SmallVector<IteratorType> its(4, IteratorType::parallel);
  its.append(2, IteratorType::reduction);
  AffineMap wMap = l.map(6, {l.dim(4), l.dim(5)});
  AffineMap yMap = l.map(6, {l.dim(0), l.dim(1), l.dim(2), l.dim(3)});
  SmallVector<Value> inits{l.filledWith(
      valType, isMax ? l.extreme(et, false) : l.constant(et, 0))};
  SmallVector<AffineMap> maps{wMap, yMap};
  if (argmax) {
    inits.push_back(l.filled(idxType, -1));
    maps.push_back(yMap);
  }
  SmallVector<Value> res = l.generic(window, inits, maps, its, [&](ValueRange a) {
    Value nI = l.linalgIndex(0), cI = l.linalgIndex(1);
    Value iy = l.sub(l.add(l.mul(l.linalgIndex(2), l.index(s[0])),
                           l.linalgIndex(4)),
                     l.index(p[0]));
    Value ix = l.sub(l.add(l.mul(l.linalgIndex(3), l.index(s[1])),
                           l.linalgIndex(5)),
                     l.index(p[1]));
    auto inRange = [&](Value v, int64_t size) {
      return l.andi(l.cmpi(arith::CmpIPredicate::sge, v, l.index(0)),
                    l.cmpi(arith::CmpIPredicate::slt, v, l.index(size)));
    };
    Value valid = l.andi(inRange(iy, H), inRange(ix, W));
    Value v = l.extractClamped(x, {nI, cI, iy, ix});
    Value acc = a[1];
    if (!isMax)
      return one(l.select(valid, l.add(acc, v), acc));
    Value newAcc = l.select(valid, l.max(acc, v), acc);
    if (!argmax)
      return one(newAcc);
    // The first NaN wins; otherwise only a strictly greater value.
    Value curIdx = a[2];
    Value none = l.cmpi(arith::CmpIPredicate::slt, curIdx,
                        l.constant(l.b.getI64Type(), 0));
    Value accNotNan = arith::CmpFOp::create(l.b, l.loc,
                                            arith::CmpFPredicate::ORD, acc, acc);
    Value vNan = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::UNO,
                                       v, v);
    Value greater =
        arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OGT, v, acc);
    Value better = arith::OrIOp::create(
        l.b, l.loc, none,
        l.andi(accNotNan, arith::OrIOp::create(l.b, l.loc, vNan, greater)));
    better = l.andi(valid, better);
    Value c = l.add(l.mul(nI, l.index(xt.getDimSize(1))), cI);
    Value at = l.add(l.mul(l.add(l.mul(c, l.index(H)), iy), l.index(W)), ix);
    Value atI64 = arith::IndexCastOp::create(l.b, l.loc, l.b.getI64Type(), at);
    return SmallVector<Value>{newAcc, l.select(better, atI64, curIdx)};
  });
  if (argmax)
    return one(res[1]);
  if (isMax)
    return one(res[0]);
  // Average: divide by the window size or by the in-bounds count.
  return one(l.generic({res[0]}, l.empty(valType),
                       {l.identity(4), l.identity(4)},
                       SmallVector<IteratorType>(4, IteratorType::parallel),
                       [&](ValueRange a) {
                         if (countPad)
                           return one(l.div(
                               a[0], l.constant(et, kernel[0] * kernel[1])));
                         auto count = [&](int64_t outDim, int64_t st,
                                          int64_t pd, int64_t k, int64_t sz) {
                           Value start = l.sub(
                               l.mul(l.linalgIndex(outDim), l.index(st)),
                               l.index(pd));
                           Value lo = arith::MaxSIOp::create(
                               l.b, l.loc, start, l.index(0));
                           Value hi = arith::MinSIOp::create(
                               l.b, l.loc, l.add(start, l.index(k)),
                               l.index(sz));
                           return l.sub(hi, lo);
                         };
                         Value n = l.mul(count(2, s[0], p[0], kernel[0], H),
                                         count(3, s[1], p[1], kernel[1], W));
                         Value nf = l.convert(
                             arith::IndexCastOp::create(l.b, l.loc,
                                                        l.b.getI64Type(), n),
                             et);
                         return one(l.div(a[0], nf));
                       })[0]);
}

/// Gather along `axis`: out[pre, k..., post] = table[pre, idx[k...], post].
Rewrite lowerGather(Lowerer &l, GatherOp op, Value table, Value indices) {
  int64_t axis = op.getAxis();
  RankedTensorType tt = tensorType(table), it = tensorType(indices);
  RankedTensorType rt = tensorType(op.getResult());
  int64_t rank = rt.getRank(), ir = it.getRank();
  SmallVector<AffineExpr> idxExprs;
  for (int64_t i = 0; i < ir; ++i)
    idxExprs.push_back(l.dim(axis + i));
  SmallVector<IteratorType> par(rank, IteratorType::parallel);
  return one(l.generic(indices, l.empty(rt),
                       {l.map(rank, idxExprs), l.identity(rank)}, par,
                       [&](ValueRange a) {
                         Value idx = l.toIndex(a[0]);
                         Value size = l.index(tt.getDimSize(axis));
                         Value neg = l.cmpi(arith::CmpIPredicate::slt, idx,
                                            l.index(0));
                         idx = l.select(neg, l.add(idx, size), idx);
                         SmallVector<Value> at;
                         for (int64_t d = 0; d < axis; ++d)
                           at.push_back(l.linalgIndex(d));
                         at.push_back(idx);
                         for (int64_t d = axis + ir; d < rank; ++d)
                           at.push_back(l.linalgIndex(d));
                         return one(l.extractClamped(table, at));
                       })[0]);
}

/// scatter_add. Every result element sums its updates in the order of the
/// index positions (row-major), as the interpreter does; elements that differ
/// outside `axis` are independent. So the result's other dimensions become an
/// `scf.forall` (threads on a GPU, a thread pool on the CPU), each iteration
/// owning one line of the result along `axis` and looping over the index
/// positions: deterministic, without atomics. A rank-1 result (nothing
/// independent) is one sequential loop nest.
Rewrite lowerScatterAdd(Lowerer &l, ScatterAddOp op, Value updates,
                        Value indices) {
  int64_t axis = op.getAxis();
  RankedTensorType rt = tensorType(op.getResult());
  RankedTensorType it = tensorType(indices);
  int64_t ir = it.getRank(), rank = rt.getRank();
  int64_t size = rt.getDimSize(axis);
  Value result = l.filled(rt, 0);
  // Adds updates[outer[:axis], t..., outer[axis:]] into line[index[t]] (the
  // index clamped into range), over all index positions t in order.
  auto accumulate = [&](Value line, ArrayRef<Value> outer) {
    SmallVector<Value> ts;
    std::function<Value(int64_t, Value)> loop = [&](int64_t d,
                                                     Value a) -> Value {
      if (d == ir) {
        Value idx = l.toIndex(l.extractClamped(indices, ts));
        Value neg = l.cmpi(arith::CmpIPredicate::slt, idx, l.index(0));
        idx = l.select(neg, l.add(idx, l.index(size)), idx);
        idx = arith::MaxSIOp::create(l.b, l.loc, idx, l.index(0));
        idx = arith::MinSIOp::create(l.b, l.loc, idx, l.index(size - 1));
        SmallVector<Value> uAt(outer.begin(), outer.begin() + axis);
        uAt.append(ts.begin(), ts.end());
        uAt.append(outer.begin() + axis, outer.end());
        Value u = tensor::ExtractOp::create(l.b, l.loc, updates, uAt);
        Value cur = tensor::ExtractOp::create(l.b, l.loc, a, idx);
        return tensor::InsertOp::create(l.b, l.loc, l.add(cur, u), a, idx);
      }
      auto forOp = scf::ForOp::create(
          l.b, l.loc, l.index(0), l.index(it.getDimSize(d)), l.index(1),
          ValueRange{a},
          [&](OpBuilder &nested, Location, Value iv, ValueRange args) {
            OpBuilder::InsertionGuard guard(l.b);
            l.b.setInsertionPoint(nested.getInsertionBlock(),
                                  nested.getInsertionPoint());
            ts.push_back(iv);
            Value next = loop(d + 1, args[0]);
            ts.pop_back();
            scf::YieldOp::create(l.b, l.loc, next);
          });
      return forOp.getResult(0);
    };
    return loop(0, line);
  };
  if (rank == 1)
    return one(accumulate(result, {}));

  // One forall iteration per line along `axis`.
  SmallVector<OpFoldResult> ubs;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      ubs.push_back(l.b.getIndexAttr(rt.getDimSize(d)));
  auto forall = scf::ForallOp::create(l.b, l.loc, ubs, ValueRange{result},
                                      std::nullopt);
  OpBuilder::InsertionGuard guard(l.b);
  Block *body = forall.getBody();
  l.b.setInsertionPoint(forall.getTerminator());
  SmallVector<Value> outer(forall.getInductionVars());
  SmallVector<OpFoldResult> offsets, sizes, strides;
  for (int64_t d = 0, k = 0; d < rank; ++d) {
    offsets.push_back(d == axis ? OpFoldResult(l.b.getIndexAttr(0))
                                : OpFoldResult(outer[k++]));
    sizes.push_back(l.b.getIndexAttr(d == axis ? size : 1));
    strides.push_back(l.b.getIndexAttr(1));
  }
  Value shared = body->getArguments().back();
  auto lineType = RankedTensorType::get({size}, rt.getElementType());
  Value line = tensor::ExtractSliceOp::create(l.b, l.loc, lineType, shared,
                                              offsets, sizes, strides);
  line = accumulate(line, outer);
  l.b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(l.b, l.loc, line, shared, offsets,
                                        sizes, strides);
  return one(forall.getResult(0));
}

/// splitmix64 finalizer on i64 (wrapping arithmetic, logical shifts).
Value splitmix(Lowerer &l, Value x) {
  Type i64 = l.b.getI64Type();
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(
        l.b, l.loc, l.b.getIntegerAttr(i64, static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value z, int64_t k) {
    return arith::XOrIOp::create(
        l.b, l.loc, z, arith::ShRUIOp::create(l.b, l.loc, z, c(k)));
  };
  Value z = l.add(x, c(0x9E3779B97F4A7C15ull));
  z = l.mul(xorShift(z, 30), c(0xBF58476D1CE4E5B9ull));
  z = l.mul(xorShift(z, 27), c(0x94D049BB133111EBull));
  return xorShift(z, 31);
}

Rewrite lowerDropout(Lowerer &l, DropoutOp op, Value x, Value seed) {
  RankedTensorType xt = tensorType(x);
  int64_t rank = xt.getRank();
  Type et = xt.getElementType(), i64 = l.b.getI64Type();
  double ratio = op.getRatio().convertToFloat();
  int64_t stream = static_cast<int64_t>(op.getStream());
  Value seedV = tensor::ExtractOp::create(l.b, l.loc, seed, ValueRange{});
  return one(l.elementwise(x, xt, [&](ValueRange a) {
    Value linear = l.index(0);
    for (int64_t d = 0; d < rank; ++d)
      linear = l.add(l.mul(linear, l.index(xt.getDimSize(d))), l.linalgIndex(d));
    Value i = arith::IndexCastOp::create(l.b, l.loc, i64, linear);
    // splitmix64(splitmix64(seed ^ stream * golden) + index), the
    // interpreter's dropoutUniform; the stream mix folds at compile time.
    uint64_t streamMix = static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull;
    Value mixed = arith::XOrIOp::create(
        l.b, l.loc, seedV,
        arith::ConstantOp::create(
            l.b, l.loc,
            l.b.getIntegerAttr(i64, static_cast<int64_t>(streamMix))));
    Value h2 = splitmix(l, l.add(splitmix(l, mixed), i));
    Value top = arith::ShRUIOp::create(l.b, l.loc, h2, l.constant(i64, 40));
    Value u = l.mul(arith::SIToFPOp::create(l.b, l.loc, l.b.getF64Type(), top),
                    l.constant(l.b.getF64Type(), std::ldexp(1.0, -24)));
    Value drop = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OLT,
                                       u, l.constant(l.b.getF64Type(), ratio));
    Value kept = l.mul(a[0], l.constant(et, 1.0 / (1.0 - ratio)));
    return l.select(drop, l.constant(et, 0), kept);
  }));
}

/// Cross-entropy with classes on dim 1: per position, max + log(sum exp)
/// minus the label's logit; ignored labels add nothing and are not counted.
Rewrite lowerCrossEntropy(Lowerer &l, CrossEntropyOp op, Value logits,
                          Value labels) {
  RankedTensorType xt = tensorType(logits), lt = tensorType(labels);
  RankedTensorType rt = tensorType(op.getResult());
  Type et = xt.getElementType();
  int64_t rank = xt.getRank();
  std::optional<int64_t> ignore;
  if (IntegerAttr attr = op.getIgnoreIndexAttr())
    ignore = attr.getInt();
  // Per-position max and sum of exponentials over dim 1.
  Value mx = l.reduce(logits, {1}, Lowerer::Combine::Max);
  SmallVector<AffineExpr> kept;
  SmallVector<IteratorType> its;
  for (int64_t d = 0; d < rank; ++d) {
    its.push_back(d == 1 ? IteratorType::reduction : IteratorType::parallel);
    if (d != 1)
      kept.push_back(l.dim(d));
  }
  AffineMap keptMap = l.map(rank, kept);
  Value sum = l.generic({logits, mx}, l.filled(tensorType(mx), 0),
                        {l.identity(rank), keptMap, keptMap}, its,
                        [&](ValueRange a) {
                          return one(l.add(a[2], l.exp(l.sub(a[0], a[1]))));
                        })[0];
  int64_t lr = lt.getRank();
  auto lossType = RankedTensorType::get(lt.getShape(), et);
  SmallVector<IteratorType> par(lr, IteratorType::parallel);
  auto isCounted = [&](Value label) -> Value {
    if (!ignore)
      return l.constant(l.b.getI1Type(), 1);
    return l.cmpi(arith::CmpIPredicate::ne, label,
                  l.constant(label.getType(), *ignore));
  };
  Value losses = l.generic(
      {labels, mx, sum}, l.empty(lossType),
      {l.identity(lr), l.identity(lr), l.identity(lr), l.identity(lr)}, par,
      [&](ValueRange a) {
        SmallVector<Value> at{l.linalgIndex(0), l.toIndex(a[0])};
        for (int64_t d = 1; d < lr; ++d)
          at.push_back(l.linalgIndex(d));
        Value picked = l.extractClamped(logits, at);
        Value loss = l.sub(l.add(a[1], l.log(a[2])), picked);
        return one(l.select(isCounted(a[0]), loss, l.constant(et, 0)));
      })[0];
  if (op.getReduction() == Reduction::None)
    return one(losses);
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < lr; ++d)
    all.push_back(d);
  Value total = l.reduce(losses, all, Lowerer::Combine::Sum);
  if (op.getReduction() == Reduction::Sum)
    return one(l.reshape(total, rt));
  // Mean over the counted labels (0 when none is counted).
  auto countType = RankedTensorType::get({}, et);
  SmallVector<AffineMap> cmaps{l.identity(lr), l.map(lr, {})};
  SmallVector<IteratorType> red(lr, IteratorType::reduction);
  Value count = l.generic(labels, l.filled(countType, 0), cmaps, red,
                          [&](ValueRange a) {
                            Value one_ = l.select(isCounted(a[0]),
                                                 l.constant(et, 1),
                                                 l.constant(et, 0));
                            return one(l.add(a[1], one_));
                          })[0];
  return one(l.elementwise({total, count}, countType, [&](ValueRange a) {
    Value zero = l.constant(et, 0);
    Value none = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OEQ,
                                       a[1], zero);
    return l.select(none, zero, l.div(a[0], a[1]));
  }));
}

Rewrite lowerMse(Lowerer &l, MseOp op, Value p, Value t) {
  RankedTensorType pt = tensorType(p);
  Value sq = l.elementwise({p, t}, pt, [&](ValueRange a) {
    Value d = l.sub(a[0], a[1]);
    return l.mul(d, d);
  });
  if (op.getReduction() == Reduction::None)
    return one(sq);
  SmallVector<int64_t> all;
  for (int64_t d = 0; d < pt.getRank(); ++d)
    all.push_back(d);
  Value total = l.reduce(sq, all, Lowerer::Combine::Sum);
  if (op.getReduction() == Reduction::Mean)
    total = l.elementwise(total, tensorType(total), [&](ValueRange a) {
      return l.div(a[0], l.constant(pt.getElementType(),
                                    static_cast<double>(pt.getNumElements())));
    });
  return one(total);
}

Rewrite lowerOp(Lowerer &l, Operation *op) {
  ValueRange in = op->getOperands();
  if (isa<NegOp, AbsOp, ExpOp, LogOp, TanhOp, SigmoidOp, ReluOp, ErfOp, SqrtOp,
          RsqrtOp, FloorOp, CosOp, SinOp, GeluOp>(op))
    return one(l.elementwise(in, tensorType(op->getResult(0)),
                             [&](ValueRange a) {
                               return unaryScalar(l, op, a[0]);
                             }));
  if (isa<AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp>(op))
    return one(l.elementwise(in, tensorType(op->getResult(0)),
                             [&](ValueRange a) {
                               return binaryScalar(l, op, a[0], a[1]);
                             }));
  return llvm::TypeSwitch<Operation *, Rewrite>(op)
      .Case([&](StopGradientOp) { return one(in[0]); })
      .Case([&](SelectOp) {
        return one(l.elementwise(in, tensorType(op->getResult(0)),
                                 [&](ValueRange a) {
                                   return l.select(a[0], a[1], a[2]);
                                 }));
      })
      .Case([&](CompareOp c) {
        return one(l.elementwise(in, tensorType(c.getResult()),
                                 [&](ValueRange a) {
                                   return compareScalar(l, c.getPredicate(),
                                                        a[0], a[1]);
                                 }));
      })
      .Case([&](CastOp c) {
        RankedTensorType t = tensorType(c.getResult());
        return one(l.elementwise(in, t, [&](ValueRange a) {
          return l.convert(a[0], t.getElementType());
        }));
      })
      .Case([&](ConstantOp c) -> Rewrite {
        auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
        if (!attr)
          return failure();
        return one(arith::ConstantOp::create(l.b, l.loc, attr));
      })
      .Case([&](ReduceSumOp r) { return lowerReduce(l, op, in[0], r.getDims()); })
      .Case([&](ReduceMeanOp r) { return lowerReduce(l, op, in[0], r.getDims()); })
      .Case([&](ReduceMaxOp r) { return lowerReduce(l, op, in[0], r.getDims()); })
      .Case([&](ReduceMinOp r) { return lowerReduce(l, op, in[0], r.getDims()); })
      .Case([&](BroadcastInDimOp bc) {
        RankedTensorType xt = tensorType(in[0]), yt = tensorType(bc.getResult());
        ArrayRef<int64_t> dims = bc.getDims();
        int64_t rank = yt.getRank();
        SmallVector<AffineExpr> exprs;
        for (int64_t i = 0; i < xt.getRank(); ++i)
          exprs.push_back(xt.getDimSize(i) == 1 ? l.b.getAffineConstantExpr(0)
                                                : l.dim(dims[i]));
        return one(l.generic(in[0], l.empty(yt),
                             {l.map(rank, exprs), l.identity(rank)},
                             SmallVector<IteratorType>(rank, IteratorType::parallel),
                             [&](ValueRange a) { return one(a[0]); })[0]);
      })
      .Case([&](ReshapeOp r) { return one(l.reshape(in[0], tensorType(r.getResult()))); })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPerm();
        RankedTensorType yt = tensorType(t.getResult());
        int64_t rank = yt.getRank();
        SmallVector<AffineExpr> exprs(rank);
        for (int64_t k = 0; k < rank; ++k)
          exprs[perm[k]] = l.dim(k);
        return one(l.generic(in[0], l.empty(yt),
                             {l.map(rank, exprs), l.identity(rank)},
                             SmallVector<IteratorType>(rank, IteratorType::parallel),
                             [&](ValueRange a) { return one(a[0]); })[0]);
      })
      .Case([&](SliceOp s) {
        // A strided view; bufferization makes it a subview, not a copy.
        RankedTensorType yt = tensorType(s.getResult());
        // An empty slice may start at the end of a dimension, which
        // tensor.extract_slice does not accept.
        if (yt.getNumElements() == 0)
          return one(l.empty(yt));
        SmallVector<OpFoldResult> off, size, stride;
        for (int64_t d = 0; d < yt.getRank(); ++d) {
          off.push_back(l.b.getIndexAttr(s.getStart()[d]));
          size.push_back(l.b.getIndexAttr(yt.getDimSize(d)));
          stride.push_back(l.b.getIndexAttr(s.getStride()[d]));
        }
        return one(tensor::ExtractSliceOp::create(l.b, l.loc, yt, in[0], off,
                                                  size, stride)
                       .getResult());
      })
      .Case([&](PadOp p) -> Rewrite {
        for (int64_t v : p.getLow())
          if (v < 0)
            return failure();
        SmallVector<int64_t> strides;
        for (int64_t v : p.getInterior())
          strides.push_back(v + 1);
        return one(l.insertSlice(in[0], l.filled(tensorType(p.getResult()), 0),
                                 p.getLow(), strides));
      })
      .Case([&](ConcatOp c) {
        RankedTensorType yt = tensorType(c.getResult());
        Value acc = l.empty(yt);
        int64_t at = 0, dimIdx = c.getDim();
        for (Value v : in) {
          SmallVector<int64_t> off(yt.getRank(), 0);
          off[dimIdx] = at;
          acc = l.insertSlice(v, acc, off, SmallVector<int64_t>(yt.getRank(), 1));
          at += tensorType(v).getDimSize(dimIdx);
        }
        return one(acc);
      })
      .Case([&](GatherOp g) { return lowerGather(l, g, in[0], in[1]); })
      .Case([&](ScatterAddOp s) { return lowerScatterAdd(l, s, in[0], in[1]); })
      .Case([&](SoftmaxOp s) { return one(lowerSoftmax(l, in[0], s.getAxis(), false)); })
      .Case([&](LogSoftmaxOp s) { return one(lowerSoftmax(l, in[0], s.getAxis(), true)); })
      .Case([&](LayerNormOp n) {
        return one(lowerNorm(l, in[0], in[1], in[2], n.getAxis(),
                             n.getEpsilon().convertToFloat(), false));
      })
      .Case([&](RmsNormOp n) {
        return one(lowerNorm(l, in[0], in[1], Value(), n.getAxis(),
                             n.getEpsilon().convertToFloat(), true));
      })
      .Case([&](BatchNormOp n) {
        RankedTensorType xt = tensorType(in[0]);
        int64_t rank = xt.getRank();
        Type et = xt.getElementType();
        double eps = n.getEpsilon().convertToFloat();
        AffineMap ch = l.map(rank, {l.dim(1)});
        return one(l.generic(
            in, l.empty(xt), {l.identity(rank), ch, ch, ch, ch, l.identity(rank)},
            SmallVector<IteratorType>(rank, IteratorType::parallel),
            [&](ValueRange a) {
              Value den = l.sqrt(l.add(a[4], l.constant(et, eps)));
              return one(l.add(l.mul(l.div(l.sub(a[0], a[3]), den), a[1]), a[2]));
            })[0]);
      })
      .Case([&](BatchNormStatsOp) {
        RankedTensorType xt = tensorType(in[0]);
        int64_t rank = xt.getRank();
        Type et = xt.getElementType();
        SmallVector<int64_t> dims;
        for (int64_t d = 0; d < rank; ++d)
          if (d != 1)
            dims.push_back(d);
        double count = static_cast<double>(xt.getNumElements() / xt.getDimSize(1));
        Value sum = l.reduce(in[0], dims, Lowerer::Combine::Sum);
        RankedTensorType ct = tensorType(sum);
        Value mean = l.elementwise(sum, ct, [&](ValueRange a) {
          return l.div(a[0], l.constant(et, count));
        });
        SmallVector<IteratorType> its;
        for (int64_t d = 0; d < rank; ++d)
          its.push_back(d == 1 ? IteratorType::parallel : IteratorType::reduction);
        AffineMap ch = l.map(rank, {l.dim(1)});
        Value sq = l.generic({in[0], mean}, l.filled(ct, 0),
                             {l.identity(rank), ch, ch}, its, [&](ValueRange a) {
                               Value d = l.sub(a[0], a[1]);
                               return one(l.add(a[2], l.mul(d, d)));
                             })[0];
        Value var = l.elementwise(sq, ct, [&](ValueRange a) {
          return l.div(a[0], l.constant(et, count));
        });
        return SmallVector<Value>{mean, var};
      })
      .Case([&](Conv2DOp c) { return lowerConv2D(l, c, in[0], in[1]); })
      .Case([&](Conv2DFilterGradOp c) {
        return lowerConv2DFilterGrad(l, c, in[0], in[1]);
      })
      .Case([&](Conv2DInputGradOp c) {
        return lowerConv2DInputGrad(l, c, in[0], in[1]);
      })
      .Case([&](Im2ColOp c) { return lowerIm2Col(l, c, in[0]); })
      .Case([&](Col2ImOp c) { return lowerCol2Im(l, c, in[0]); })
      .Case([&](MaxPool2DOp p) {
        return lowerPool(l, op, in[0], p.getKernel(), p.getStrides(),
                         p.getPadding(), false);
      })
      .Case([&](AvgPool2DOp p) {
        return lowerPool(l, op, in[0], p.getKernel(), p.getStrides(),
                         p.getPadding(), p.getCountIncludePad());
      })
      .Case([&](MaxPool2DArgmaxOp p) {
        return lowerPool(l, op, in[0], p.getKernel(), p.getStrides(),
                         p.getPadding(), false);
      })
      .Case([&](DropoutOp d) { return lowerDropout(l, d, in[0], in[1]); })
      .Case([&](CrossEntropyOp c) { return lowerCrossEntropy(l, c, in[0], in[1]); })
      .Case([&](MseOp m) { return lowerMse(l, m, in[0], in[1]); })
      .Default([](Operation *) -> Rewrite { return failure(); });
}

struct ConvertLoomToLinalgPass
    : loom::impl::ConvertLoomToLinalgPassBase<ConvertLoomToLinalgPass> {
  void runOnOperation() override {
    if (failed(lowerLoomToLinalg(getOperation())))
      signalPassFailure();
  }
};

} // namespace

LogicalResult loom::lowerLoomToLinalg(func::FuncOp func) {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().getOps())
    if (isa<LoomDialect>(op.getDialect()))
      ops.push_back(&op);
  for (Operation *op : ops) {
    OpBuilder b(op);
    Lowerer l{b, op->getLoc()};
    Rewrite r = lowerOp(l, op);
    if (failed(r))
      return op->emitError("cannot lower '")
             << op->getName() << "' to a CPU kernel";
    op->replaceAllUsesWith(*r);
    op->erase();
  }
  return success();
}

void loom::registerLoomToLinalgDependentDialects(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, tensor::TensorDialect,
                  arith::ArithDialect, math::MathDialect, scf::SCFDialect>();
}
