//===- CpuReductionLoops.cpp - Reductions with register accumulators ------===//
//
// loom-cpu-reduction-loops (Passes.td): a linalg.generic on buffers whose
// reduction dimensions are its innermost becomes an scf.parallel over the
// parallel dimensions around an scf.for nest that carries the accumulators
// in iter_args, so that LLVM keeps them in (vector) registers.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/CpuReductionLoops/CpuReductionLoops.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCPUREDUCTIONLOOPSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace {
/// Whether `op` is one this pass lowers: on buffers, static loop bounds, at
/// least one reduction dimension and all of them after the parallel ones,
/// outputs indexed by the parallel dimensions only.
bool isInnerReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0)
    return false;
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  unsigned parallel = op.getNumParallelLoops();
  for (unsigned d = 0; d < its.size(); ++d)
    if ((d < parallel) != (its[d] == utils::IteratorType::parallel))
      return false;
  for (int64_t size : op.getStaticLoopRanges())
    if (ShapedType::isDynamic(size))
      return false;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    for (AffineExpr e : map.getResults())
      for (unsigned d = parallel; d < its.size(); ++d)
        if (e.isFunctionOfDim(d))
          return false;
  }
  return true;
}

/// Indices of `map` applied to the loop indices `ivs`.
SmallVector<Value> indicesOf(OpBuilder &b, Location loc, AffineMap map,
                             ValueRange ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      indices.push_back(ivs[d.getPosition()]);
      continue;
    }
    indices.push_back(affine::AffineApplyOp::create(
        b, loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
  }
  return indices;
}

/// Adds `reassoc` to the fast-math flags of the arith ops of `body` that
/// combine an accumulator (an output block argument) with a value.
void allowReassociation(linalg::GenericOp op) {
  for (BlockArgument acc : op.getRegionOutputArgs())
    for (Operation *user : acc.getUsers()) {
      auto fm = dyn_cast<arith::ArithFastMathInterface>(user);
      if (!fm)
        continue;
      arith::FastMathFlags flags = fm.getFastMathFlagsAttr()
                                       ? fm.getFastMathFlagsAttr().getValue()
                                       : arith::FastMathFlags::none;
      user->setAttr(fm.getFastMathAttrName(),
                    arith::FastMathFlagsAttr::get(
                        user->getContext(),
                        flags | arith::FastMathFlags::reassoc));
    }
}

void lower(linalg::GenericOp op) {
  allowReassociation(op);
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned parallel = op.getNumParallelLoops();
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  auto bounds = [&](unsigned from, unsigned to, SmallVector<Value> &lbs,
                    SmallVector<Value> &ubs, SmallVector<Value> &steps) {
    for (unsigned d = from; d < to; ++d) {
      lbs.push_back(index(0));
      ubs.push_back(index(ranges[d]));
      steps.push_back(index(1));
    }
  };
  SmallVector<Value> plb, pub, pstep, rlb, rub, rstep;
  bounds(0, parallel, plb, pub, pstep);
  bounds(parallel, ranges.size(), rlb, rub, rstep);
  Block *body = op.getBody();
  Value zero = index(0);

  auto buildReduction = [&](OpBuilder &pb, Location l, ValueRange outer) {
    // The accumulators' starting values: the outputs' current elements.
    SmallVector<Value> inits;
    SmallVector<SmallVector<Value>> outIndices;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      // The output maps name parallel dimensions only: any value stands
      // for the reduction ones.
      SmallVector<Value> ivs(outer);
      ivs.append(ranges.size() - parallel, zero);
      outIndices.push_back(
          indicesOf(pb, l, op.getMatchingIndexingMap(&init), ivs));
      inits.push_back(memref::LoadOp::create(pb, l, init.get(),
                                             outIndices.back()));
    }
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, rlb, rub, rstep, inits,
        [&](OpBuilder &nb, Location nl, ValueRange inner,
            ValueRange accs) -> scf::ValueVector {
          SmallVector<Value> ivs(outer);
          ivs.append(inner.begin(), inner.end());
          IRMapping map;
          for (OpOperand *in : op.getDpsInputOperands()) {
            BlockArgument arg = body->getArgument(in->getOperandNumber());
            if (!isa<MemRefType>(in->get().getType())) {
              map.map(arg, in->get()); // a scalar operand
              continue;
            }
            map.map(arg, memref::LoadOp::create(
                             nb, nl, in->get(),
                             indicesOf(nb, nl, op.getMatchingIndexingMap(in),
                                       ivs)));
          }
          for (auto [arg, acc] : llvm::zip(op.getRegionOutputArgs(), accs))
            map.map(arg, acc);
          for (Operation &inner : body->without_terminator()) {
            if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
              map.map(idx.getResult(), ivs[idx.getDim()]);
              continue;
            }
            nb.clone(inner, map);
          }
          scf::ValueVector yields;
          for (Value v : body->getTerminator()->getOperands())
            yields.push_back(map.lookupOrDefault(v));
          return yields;
        });
    for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable()))
      memref::StoreOp::create(pb, l, nest.results[i], init.get(),
                              outIndices[i]);
  };

  if (parallel == 0) {
    buildReduction(b, loc, {});
  } else {
    scf::ParallelOp::create(b, loc, plb, pub, pstep,
                            [&](OpBuilder &pb, Location l, ValueRange ivs) {
                              buildReduction(pb, l, ivs);
                            });
  }
  op.erase();
}

struct CpuReductionLoops
    : loom::impl::LoomCpuReductionLoopsPassBase<CpuReductionLoops> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isInnerReduction(op))
        ops.push_back(op);
    });
    for (linalg::GenericOp op : ops)
      lower(op);
  }
};
} // namespace
