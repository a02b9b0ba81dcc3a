//===- Lowerer.h - What the loom-to-linalg rules share ----------*- C++ -*-===//
//
// The builder every rule of convert-loom-to-linalg uses (scalars, generics,
// reshapes, reductions, slices), the pattern that applies a rule, and the
// families of rules, one file each. Private to lib/Conversion/LoomToLinalg.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_CONVERSION_LOOMTOLINALG_LOWERER_H
#define LOOM_LIB_CONVERSION_LOOMTOLINALG_LOWERER_H

#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"
#include "loom/Conversion/Utils/GenericBody.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>

#include <cmath>
#include <limits>

namespace loom::lowering {
using namespace mlir;
using mlir::utils::IteratorType;

inline RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

inline int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The producer of `v` that a reader at computed indices (pooling, a
/// gather) recomputes per element instead of reading it from a
/// materialized tensor, or null: an elementwise linalg.generic (identity
/// maps, one result) whose body is a few cheap arithmetic ops that read
/// neither its output nor a loop index, and whose inputs are the kernel's
/// arguments or recomputable in turn. A ReLU before a max pool: each
/// input element read by 2.25 windows on average costs one more `maximumf`
/// there, where materializing it wrote and read the whole tensor once more
/// (ResNet-18's stem: 25.7 MB).
linalg::GenericOp recomputableProducer(Value v);

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

  /// An scf.for over [0, trips) that carries one value from `init`:
  /// `body` gets the index and the carried value and returns the next.
  Value forLoop(int64_t trips, Value init,
                function_ref<Value(Value, Value)> body) {
    return scf::ForOp::create(
               b, loc, index(0), index(trips), index(1), ValueRange{init},
               [&](OpBuilder &nested, Location, Value iv, ValueRange args) {
                 OpBuilder::InsertionGuard guard(b);
                 b.setInsertionPoint(nested.getInsertionBlock(),
                                     nested.getInsertionPoint());
                 scf::YieldOp::create(b, loc, body(iv, args[0]));
               })
        .getResult(0);
  }

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
  /// Reads through a widening (see widenedSource): the 16-bit element,
  /// extended; and through a recomputable producer (recomputableProducer):
  /// its body on the elements of its inputs.
  Value extractClamped(Value t, SmallVector<Value> indices) {
    if (Value narrow = widenedSource(t))
      return convert(extractClamped(narrow, std::move(indices)),
                     tensorType(t).getElementType());
    if (linalg::GenericOp producer = recomputableProducer(t)) {
      IRMapping map;
      for (OpOperand *in : producer.getDpsInputOperands())
        map.map(producer.getMatchingBlockArgument(in),
                extractClamped(in->get(), indices));
      return inlineGenericBody(b, producer, map, {})[0];
    }
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


/// What a rule returns: the op's replacement values, or failure.
using Rewrite = FailureOr<SmallVector<Value>>;

inline SmallVector<Value> one(Value v) { return {v}; }

/// The pattern of one op's rule: the rule builds the replacement at the op
/// with a Lowerer over the rewriter; a rule that fails (before building
/// anything) leaves the op, which lowerLoomToLinalg then reports.
template <typename OpT>
class RulePattern : public OpRewritePattern<OpT> {
public:
  using Rule = std::function<Rewrite(Lowerer &, OpT)>;
  RulePattern(MLIRContext *context, Rule rule)
      : OpRewritePattern<OpT>(context), rule(std::move(rule)) {}
  LogicalResult matchAndRewrite(OpT op,
                                PatternRewriter &rewriter) const override {
    Lowerer l{rewriter, op->getLoc()};
    Rewrite values = rule(l, op);
    if (failed(values))
      return rewriter.notifyMatchFailure(op, "no lowering for this form");
    rewriter.replaceOp(op, *values);
    return success();
  }

private:
  Rule rule;
};

/// Adds the rule of OpT.
template <typename OpT, typename Fn>
void addRule(RewritePatternSet &patterns, Fn rule) {
  patterns.add(std::make_unique<RulePattern<OpT>>(
      patterns.getContext(), [rule](Lowerer &l, OpT op) -> Rewrite {
        return rule(l, op);
      }));
}

/// Adds one rule for several ops (called with each op's own class).
template <typename... OpTs, typename Fn>
void addRules(RewritePatternSet &patterns, Fn rule) {
  (addRule<OpTs>(patterns, rule), ...);
}

/// The rules, one file per family of ops.
void populateElementwiseRules(RewritePatternSet &patterns);  // Elementwise.cpp
void populateShapeRules(RewritePatternSet &patterns);        // Shape.cpp
void populateReductionRules(RewritePatternSet &patterns);    // Reductions.cpp
void populateConvolutionRules(RewritePatternSet &patterns);  // Convolutions.cpp
void populateAttentionRules(RewritePatternSet &patterns);    // Attention.cpp

//===--- Elementwise.cpp -------------------------------------------------===//

/// The interpreter's dropoutUniform(seed, stream, i) as an f64 in [0, 1),
/// for the i64 element index `i` (loom.dropout, loom.random, the fused
/// attention's dropout).
Value uniformAt(Lowerer &l, Value seed, int64_t stream, Value i);

//===--- Convolutions.cpp ------------------------------------------------===//

Rewrite lowerConv2D(Lowerer &l, Conv2DOp op, Value x, Value f);
Rewrite lowerConv2DFilterGrad(Lowerer &l, Conv2DFilterGradOp op, Value x,
                              Value dy);
Rewrite lowerConv2DInputGrad(Lowerer &l, Conv2DInputGradOp op, Value dy,
                             Value f);
Rewrite lowerIm2Col(Lowerer &l, Im2ColOp op, Value x);
Rewrite lowerCol2Im(Lowerer &l, Col2ImOp op, Value cols);
Rewrite lowerPool(Lowerer &l, Operation *op, Value x, ArrayRef<int64_t> kernel,
                  ArrayRef<int64_t> s, ArrayRef<int64_t> p, bool countPad);

} // namespace loom::lowering

#endif // LOOM_LIB_CONVERSION_LOOMTOLINALG_LOWERER_H
