//===- Reductions.cpp - Reducing loom ops to linalg -----------------------===//
//
// Reductions, softmax and log-softmax, the norms (layer, RMS, batch and its
// statistics) and the losses: reductions plus elementwise generics, in the
// order the interpreter computes them.
//
//===----------------------------------------------------------------------===//

#include "Lowerer.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {
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

/// The maxima of `x` along `axis` and the sums of exp(x - max): the first
/// two passes of softmax and of cross-entropy, built by this one function
/// so that, where a cross-entropy and its gradient's softmax share a
/// kernel, CSE merges them (two passes over the logits, not four).
struct RowExpSums {
  Value max, sum;
  AffineMap keptMap; // x's indices to the reduced ones
};
RowExpSums rowExpSums(Lowerer &l, Value x, int64_t axis) {
  int64_t rank = tensorType(x).getRank();
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
  return {mx, sum, keptMap};
}

/// Softmax and log-softmax over `axis`: max, sum of exponentials, then the
/// elementwise result, as the interpreter computes them.
Value lowerSoftmax(Lowerer &l, Value x, int64_t axis, bool logSoftmax) {
  RankedTensorType xt = tensorType(x);
  int64_t rank = xt.getRank();
  RowExpSums rows = rowExpSums(l, x, axis);
  Value mx = rows.max, sum = rows.sum;
  AffineMap keptMap = rows.keptMap;
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

/// Cross-entropy with classes on dim 1: per position, max + log(sum exp)
/// minus the label's logit; ignored labels add nothing and are not counted.
Rewrite lowerCrossEntropy(Lowerer &l, CrossEntropyOp op, Value logits,
                          Value labels) {
  RankedTensorType xt = tensorType(logits), lt = tensorType(labels);
  RankedTensorType rt = tensorType(op.getResult());
  Type et = xt.getElementType();
  std::optional<int64_t> ignore;
  if (IntegerAttr attr = op.getIgnoreIndexAttr())
    ignore = attr.getInt();
  // Per-position max and sum of exponentials over dim 1.
  RowExpSums rows = rowExpSums(l, logits, 1);
  Value mx = rows.max, sum = rows.sum;
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
} // namespace

void loom::lowering::populateReductionRules(RewritePatternSet &patterns) {
  addRules<ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp>(
      patterns, [](Lowerer &l, auto op) {
        return lowerReduce(l, op, op->getOperand(0), op.getDims());
      });
  addRule<SoftmaxOp>(patterns, [](Lowerer &l, SoftmaxOp s) {
    return Rewrite(one(lowerSoftmax(l, s->getOperand(0), s.getAxis(), false)));
  });
  addRule<LogSoftmaxOp>(patterns, [](Lowerer &l, LogSoftmaxOp s) {
    return Rewrite(one(lowerSoftmax(l, s->getOperand(0), s.getAxis(), true)));
  });
  addRule<LayerNormOp>(patterns, [](Lowerer &l, LayerNormOp n) {
    return Rewrite(one(lowerNorm(l, n->getOperand(0), n->getOperand(1),
                                 n->getOperand(2), n.getAxis(),
                                 n.getEpsilon().convertToFloat(), false)));
  });
  addRule<RmsNormOp>(patterns, [](Lowerer &l, RmsNormOp n) {
    return Rewrite(one(lowerNorm(l, n->getOperand(0), n->getOperand(1),
                                 Value(), n.getAxis(),
                                 n.getEpsilon().convertToFloat(), true)));
  });
  addRule<BatchNormOp>(patterns, [](Lowerer &l, BatchNormOp n) {
    ValueRange in = n->getOperands();
    RankedTensorType xt = tensorType(in[0]);
    int64_t rank = xt.getRank();
    Type et = xt.getElementType();
    double eps = n.getEpsilon().convertToFloat();
    AffineMap ch = l.map(rank, {l.dim(1)});
    return Rewrite(one(l.generic(
        in, l.empty(xt), {l.identity(rank), ch, ch, ch, ch, l.identity(rank)},
        SmallVector<IteratorType>(rank, IteratorType::parallel),
        [&](ValueRange a) {
          Value den = l.sqrt(l.add(a[4], l.constant(et, eps)));
          return one(l.add(l.mul(l.div(l.sub(a[0], a[3]), den), a[1]), a[2]));
        })[0]));
  });
  addRule<BatchNormStatsOp>(patterns, [](Lowerer &l, BatchNormStatsOp n) {
    Value x = n->getOperand(0);
    RankedTensorType xt = tensorType(x);
    int64_t rank = xt.getRank();
    Type et = xt.getElementType();
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < rank; ++d)
      if (d != 1)
        dims.push_back(d);
    double count = static_cast<double>(xt.getNumElements() / xt.getDimSize(1));
    Value sum = l.reduce(x, dims, Lowerer::Combine::Sum);
    RankedTensorType ct = tensorType(sum);
    Value mean = l.elementwise(sum, ct, [&](ValueRange a) {
      return l.div(a[0], l.constant(et, count));
    });
    SmallVector<IteratorType> its;
    for (int64_t d = 0; d < rank; ++d)
      its.push_back(d == 1 ? IteratorType::parallel : IteratorType::reduction);
    AffineMap ch = l.map(rank, {l.dim(1)});
    Value sq = l.generic({x, mean}, l.filled(ct, 0), {l.identity(rank), ch, ch},
                         its, [&](ValueRange a) {
                           Value d = l.sub(a[0], a[1]);
                           return one(l.add(a[2], l.mul(d, d)));
                         })[0];
    Value var = l.elementwise(sq, ct, [&](ValueRange a) {
      return l.div(a[0], l.constant(et, count));
    });
    return Rewrite(SmallVector<Value>{mean, var});
  });
  addRule<CrossEntropyOp>(patterns, [](Lowerer &l, CrossEntropyOp c) {
    return lowerCrossEntropy(l, c, c->getOperand(0), c->getOperand(1));
  });
  addRule<MseOp>(patterns, [](Lowerer &l, MseOp m) {
    return lowerMse(l, m, m->getOperand(0), m->getOperand(1));
  });
}
