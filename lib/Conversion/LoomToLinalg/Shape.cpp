//===- Shape.cpp - Data-movement loom ops to linalg -----------------------===//
//
// Broadcasts, transposes, reshapes, slices, pads and concats (generics with
// the matching indexing maps, or tensor slices), and the indexed ops gather
// and scatter_add.
//
//===----------------------------------------------------------------------===//

#include "Lowerer.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {
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
      return l.forLoop(it.getDimSize(d), a, [&](Value iv, Value acc) {
        ts.push_back(iv);
        Value next = loop(d + 1, acc);
        ts.pop_back();
        return next;
      });
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
} // namespace

void loom::lowering::populateShapeRules(RewritePatternSet &patterns) {
  addRule<BroadcastInDimOp>(patterns, [](Lowerer &l, BroadcastInDimOp bc) {
    Value x = bc->getOperand(0);
    RankedTensorType xt = tensorType(x), yt = tensorType(bc.getResult());
    ArrayRef<int64_t> dims = bc.getDims();
    int64_t rank = yt.getRank();
    SmallVector<AffineExpr> exprs;
    for (int64_t i = 0; i < xt.getRank(); ++i)
      exprs.push_back(xt.getDimSize(i) == 1 ? l.b.getAffineConstantExpr(0)
                                            : l.dim(dims[i]));
    return Rewrite(one(
        l.generic(x, l.empty(yt), {l.map(rank, exprs), l.identity(rank)},
                  SmallVector<IteratorType>(rank, IteratorType::parallel),
                  [&](ValueRange a) { return one(a[0]); })[0]));
  });
  addRule<ReshapeOp>(patterns, [](Lowerer &l, ReshapeOp r) {
    return Rewrite(one(l.reshape(r->getOperand(0), tensorType(r.getResult()))));
  });
  addRule<TransposeOp>(patterns, [](Lowerer &l, TransposeOp t) {
    ArrayRef<int64_t> perm = t.getPerm();
    RankedTensorType yt = tensorType(t.getResult());
    int64_t rank = yt.getRank();
    SmallVector<AffineExpr> exprs(rank);
    for (int64_t k = 0; k < rank; ++k)
      exprs[perm[k]] = l.dim(k);
    return Rewrite(one(
        l.generic(t->getOperand(0), l.empty(yt),
                  {l.map(rank, exprs), l.identity(rank)},
                  SmallVector<IteratorType>(rank, IteratorType::parallel),
                  [&](ValueRange a) { return one(a[0]); })[0]));
  });
  addRule<SliceOp>(patterns, [](Lowerer &l, SliceOp s) -> Rewrite {
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
    return one(tensor::ExtractSliceOp::create(l.b, l.loc, yt, s->getOperand(0),
                                              off, size, stride)
                   .getResult());
  });
  addRule<PadOp>(patterns, [](Lowerer &l, PadOp p) -> Rewrite {
    for (int64_t v : p.getLow())
      if (v < 0)
        return failure();
    SmallVector<int64_t> strides;
    for (int64_t v : p.getInterior())
      strides.push_back(v + 1);
    return one(l.insertSlice(p->getOperand(0),
                             l.filled(tensorType(p.getResult()), 0),
                             p.getLow(), strides));
  });
  addRule<ConcatOp>(patterns, [](Lowerer &l, ConcatOp c) {
    RankedTensorType yt = tensorType(c.getResult());
    Value acc = l.empty(yt);
    int64_t at = 0, dimIdx = c.getDim();
    for (Value v : c->getOperands()) {
      SmallVector<int64_t> off(yt.getRank(), 0);
      off[dimIdx] = at;
      acc = l.insertSlice(v, acc, off, SmallVector<int64_t>(yt.getRank(), 1));
      at += tensorType(v).getDimSize(dimIdx);
    }
    return Rewrite(one(acc));
  });
  addRule<GatherOp>(patterns, [](Lowerer &l, GatherOp g) {
    return lowerGather(l, g, g->getOperand(0), g->getOperand(1));
  });
  addRule<ScatterAddOp>(patterns, [](Lowerer &l, ScatterAddOp s) {
    return lowerScatterAdd(l, s, s->getOperand(0), s->getOperand(1));
  });
}
