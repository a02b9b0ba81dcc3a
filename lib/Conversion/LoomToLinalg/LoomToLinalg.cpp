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

#include "Lowerer.h"

#include "llvm/ADT/TypeSwitch.h"

namespace loom {
#define GEN_PASS_DEF_CONVERTLOOMTOLINALGPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {
//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

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

namespace {
/// Whether `attr` is the 1-D integer tensor 0, 1, ..., n-1.
bool isIota(DenseIntElementsAttr attr) {
  if (attr.getType().getRank() != 1)
    return false;
  int64_t i = 0;
  for (const APInt &v : attr.getValues<APInt>())
    if (v.getSExtValue() != i++)
      return false;
  return true;
}

/// A generic that reads a constant 0, 1, ..., n-1 along one of its
/// dimensions (the class ids of a one-hot, say) reads the loop index
/// instead: no table of n integers streamed through the cache beside the
/// data.
void indexIotaConstants(func::FuncOp func) {
  func.walk([](linalg::GenericOp g) {
    for (OpOperand *in : g.getDpsInputOperands()) {
      auto c = in->get().getDefiningOp<arith::ConstantOp>();
      auto attr = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
      AffineMap map = g.getMatchingIndexingMap(in);
      if (!attr || !isIota(attr) || map.getNumResults() != 1)
        continue;
      auto d = dyn_cast<AffineDimExpr>(map.getResult(0));
      BlockArgument arg = g.getMatchingBlockArgument(in);
      if (!d || arg.use_empty())
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(g.getBody());
      Value index = linalg::IndexOp::create(b, g.getLoc(), d.getPosition());
      arg.replaceAllUsesWith(
          arith::IndexCastOp::create(b, g.getLoc(), arg.getType(), index));
    }
  });
}
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
  indexIotaConstants(func);
  return success();
}

void loom::registerLoomToLinalgDependentDialects(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, tensor::TensorDialect,
                  arith::ArithDialect, math::MathDialect, scf::SCFDialect>();
}
