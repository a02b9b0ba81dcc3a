//===- CpuReductionLoops.cpp - Reductions with register accumulators ------===//
//
// loom-cpu-reduction-loops (Passes.td): a linalg.generic on buffers whose
// innermost dimension is a reduction one becomes an scf.parallel over the
// parallel dimensions around an scf.for nest that carries the accumulators
// in iter_args, so that LLVM keeps them in (vector) registers; a short
// innermost row is summed in vector lanes.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/CpuReductionLoops/CpuReductionLoops.h"
#include "loom/Conversion/Utils/GenericBody.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCPUREDUCTIONLOOPSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace {
/// Whether `op` is one this pass lowers: on buffers, static loop bounds, at
/// least one reduction dimension, the innermost dimension a reduction one
/// (the reduced elements contiguous), outputs indexed by the parallel
/// dimensions only.
bool isInnerReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0)
    return false;
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  if (its.back() != utils::IteratorType::reduction)
    return false;
  for (int64_t size : op.getStaticLoopRanges())
    if (ShapedType::isDynamic(size))
      return false;
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    for (AffineExpr e : map.getResults())
      for (unsigned d = 0; d < its.size(); ++d)
        if (its[d] == utils::IteratorType::reduction && e.isFunctionOfDim(d))
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

/// The longest innermost reduction summed in lanes (see `lower`).
constexpr int64_t kMaxLanes = 64;

/// For each output of `op`, the op that combines its accumulator with the
/// next value, when every output's is an `arith.addf`, `maximumf` or
/// `minimumf` of the accumulator (its only use) whose result is yielded and
/// read by nothing else; empty otherwise.
SmallVector<Operation *> laneCombiners(linalg::GenericOp op) {
  SmallVector<Operation *> combiners;
  Operation *yield = op.getBody()->getTerminator();
  for (auto [i, acc] : llvm::enumerate(op.getRegionOutputArgs())) {
    if (!acc.hasOneUse() || !isa<FloatType>(acc.getType()))
      return {};
    Operation *user = *acc.getUsers().begin();
    if (!isa<arith::AddFOp, arith::MaximumFOp, arith::MinimumFOp>(user) ||
        !user->getResult(0).hasOneUse() ||
        yield->getOperand(i) != user->getResult(0))
      return {};
    combiners.push_back(user);
  }
  return combiners;
}

/// The value `combiner` leaves unchanged: -0 for a sum, -inf for a
/// maximum, +inf for a minimum.
Value identityOf(OpBuilder &b, Location loc, Operation *combiner) {
  auto type = cast<FloatType>(combiner->getResult(0).getType());
  const llvm::fltSemantics &sem = type.getFloatSemantics();
  APFloat v = isa<arith::AddFOp>(combiner)
                  ? APFloat::getZero(sem, /*Negative=*/true)
                  : APFloat::getInf(sem, isa<arith::MaximumFOp>(combiner));
  return arith::ConstantFloatOp::create(b, loc, type, v);
}

vector::CombiningKind combiningKind(Operation *combiner) {
  if (isa<arith::MaximumFOp>(combiner))
    return vector::CombiningKind::MAXIMUMF;
  if (isa<arith::MinimumFOp>(combiner))
    return vector::CombiningKind::MINIMUMF;
  return vector::CombiningKind::ADD;
}

/// The coefficient of dimension `dim` in `e` where `e` is that dimension
/// times a constant plus what does not depend on it; -1 otherwise.
int64_t coefficientOf(AffineExpr e, unsigned dim) {
  if (!e.isFunctionOfDim(dim))
    return 0;
  if (auto d = dyn_cast<AffineDimExpr>(e))
    return 1;
  auto bin = dyn_cast<AffineBinaryOpExpr>(e);
  if (!bin)
    return -1;
  if (bin.getKind() == AffineExprKind::Add) {
    int64_t l = coefficientOf(bin.getLHS(), dim),
            r = coefficientOf(bin.getRHS(), dim);
    return l < 0 || r < 0 || (l && r) ? -1 : l + r;
  }
  if (bin.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(bin.getRHS());
        c && c.getValue() > 0) {
      int64_t l = coefficientOf(bin.getLHS(), dim);
      return l < 0 ? -1 : l * c.getValue();
    }
  return -1;
}

/// How input `in` of `op` varies along the innermost loop: the distance
/// between the elements it reads at consecutive indices of that loop, all
/// in its last, unit-stride dimension (its last index is that loop's index
/// times the distance plus what does not depend on it): 0 where it reads
/// one element all along (a scalar too), 1 for a contiguous row, 2 for
/// every other element (a stride-2 convolution); -1 otherwise.
int64_t rowStep(linalg::GenericOp op, OpOperand *in) {
  auto type = dyn_cast<MemRefType>(in->get().getType());
  if (!type)
    return 0;
  AffineMap map = op.getMatchingIndexingMap(in);
  unsigned last = map.getNumDims() - 1;
  ArrayRef<AffineExpr> results = map.getResults();
  if (results.empty())
    return 0; // a 0-d buffer
  for (AffineExpr e : results.drop_back())
    if (e.isFunctionOfDim(last))
      return -1;
  int64_t step = coefficientOf(results.back(), last);
  if (step > 0 && !type.isLastDimUnitStride())
    return -1;
  return step;
}

/// Whether the body of `op` can run on a whole row of its innermost loop
/// at once: every input read as a row (of consecutive elements or every
/// second, third or fourth) or uniformly, and every op of the body
/// elementwise on scalars (no linalg.index, no regions).
bool rowVectorizable(linalg::GenericOp op) {
  for (OpOperand *in : op.getDpsInputOperands()) {
    if (int64_t step = rowStep(op, in); step < 0 || step > 4)
      return false;
    // A row of booleans would be one vector<N x i1> load, which LLVM reads
    // as N packed bits; the arena holds one byte per boolean.
    if (getElementTypeOrSelf(in->get().getType()).isInteger(1))
      return false;
  }
  for (Operation &inner : op.getBody()->without_terminator()) {
    if (isa<arith::ConstantOp>(inner))
      continue;
    if (!inner.hasTrait<OpTrait::Elementwise>() ||
        inner.getNumRegions() != 0 || inner.getNumResults() != 1 ||
        !llvm::all_of(inner.getOperandTypes(),
                      [](Type t) { return t.isIntOrIndexOrFloat(); }))
      return false;
  }
  return true;
}

/// The body of `op` on the row of `lanes` elements starting at the loop
/// indices `ivs` (the innermost one 0), with the vector accumulators
/// `accs`: the vectors it yields. A row input is one vector load; a
/// uniform one a scalar load, broadcast.
scf::ValueVector buildRowBody(OpBuilder &b, Location loc,
                              linalg::GenericOp op, ValueRange ivs,
                              int64_t lanes, ValueRange accs) {
  IRMapping map;
  Block *body = op.getBody();
  auto vectorOf = [&](Type t) { return VectorType::get({lanes}, t); };
  // A value of the body as a vector (outside values and constants
  // broadcast).
  auto vec = [&](Value v) -> Value {
    Value m = map.lookupOrDefault(v);
    if (isa<VectorType>(m.getType()))
      return m;
    return vector::BroadcastOp::create(b, loc, vectorOf(m.getType()), m);
  };
  for (OpOperand *in : op.getDpsInputOperands()) {
    BlockArgument arg = body->getArgument(in->getOperandNumber());
    if (!isa<MemRefType>(in->get().getType())) {
      map.map(arg, in->get());
      continue;
    }
    SmallVector<Value> indices =
        indicesOf(b, loc, op.getMatchingIndexingMap(in), ivs);
    int64_t step = rowStep(op, in);
    if (step == 0) {
      map.map(arg, memref::LoadOp::create(b, loc, in->get(), indices));
      continue;
    }
    if (step == 1) {
      map.map(arg, vector::LoadOp::create(b, loc, vectorOf(arg.getType()),
                                          in->get(), indices));
      continue;
    }
    // Every step-th element: the span they lie in, then those of it.
    Value span = vector::LoadOp::create(
        b, loc, VectorType::get({(lanes - 1) * step + 1}, arg.getType()),
        in->get(), indices);
    SmallVector<int64_t> picked;
    for (int64_t t = 0; t < lanes; ++t)
      picked.push_back(t * step);
    map.map(arg, vector::ShuffleOp::create(b, loc, span, span, picked));
  }
  for (auto [arg, acc] : llvm::zip(op.getRegionOutputArgs(), accs))
    map.map(arg, acc);
  for (Operation &inner : body->without_terminator()) {
    if (isa<arith::ConstantOp>(inner)) {
      b.clone(inner, map);
      continue;
    }
    OperationState state(loc, inner.getName());
    for (Value operand : inner.getOperands())
      state.addOperands(vec(operand));
    state.addAttributes(inner.getAttrs());
    for (Type t : inner.getResultTypes())
      state.addTypes(vectorOf(t));
    map.map(inner.getResult(0), b.create(state)->getResult(0));
  }
  scf::ValueVector yields;
  for (Value v : body->getTerminator()->getOperands())
    yields.push_back(vec(v));
  return yields;
}

void lower(linalg::GenericOp op) {
  allowReassociation(op);
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  unsigned parallel = op.getNumParallelLoops();
  // The loop nest: the parallel dimensions outside, the reduction ones
  // inside, each in the op's order. Every output element is then reduced
  // over the reduction indices in the order of the op's own nest (moving a
  // parallel loop does not reorder any element's sum): a batch norm's
  // statistics (n, c, h, w reducing n, h, w) become, per channel, a sum
  // over (n, h, w).
  SmallVector<unsigned> order;
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::parallel)
      order.push_back(d);
  for (auto [d, it] : llvm::enumerate(op.getIteratorTypesArray()))
    if (it == utils::IteratorType::reduction)
      order.push_back(d);
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v).getResult();
  };
  auto bounds = [&](unsigned from, unsigned to, SmallVector<Value> &lbs,
                    SmallVector<Value> &ubs, SmallVector<Value> &steps) {
    for (unsigned i = from; i < to; ++i) {
      lbs.push_back(index(0));
      ubs.push_back(index(ranges[order[i]]));
      steps.push_back(index(1));
    }
  };
  SmallVector<Value> plb, pub, pstep, rlb, rub, rstep;
  bounds(0, parallel, plb, pub, pstep);
  bounds(parallel, ranges.size(), rlb, rub, rstep);
  Block *body = op.getBody();
  Value zero = index(0);
  // The op's loop indices from the nest's: `outer` (parallel) then
  // `inner` (reduction; zero for those not given).
  auto dimsOf = [&](ValueRange outer, ValueRange inner) {
    SmallVector<Value> ivs(ranges.size(), zero);
    for (auto [i, iv] : llvm::enumerate(outer))
      ivs[order[i]] = iv;
    for (auto [i, iv] : llvm::enumerate(inner))
      ivs[order[parallel + i]] = iv;
    return ivs;
  };

  // The body at the loop indices `ivs` with the accumulators `accs`: the
  // values it yields.
  auto buildBody = [&](OpBuilder &nb, Location nl, ValueRange ivs,
                       ValueRange accs) {
    IRMapping map;
    for (OpOperand *in : op.getDpsInputOperands()) {
      BlockArgument arg = body->getArgument(in->getOperandNumber());
      if (!isa<MemRefType>(in->get().getType())) {
        map.map(arg, in->get()); // a scalar operand
        continue;
      }
      map.map(arg, memref::LoadOp::create(
                       nb, nl, in->get(),
                       indicesOf(nb, nl, op.getMatchingIndexingMap(in), ivs)));
    }
    for (auto [arg, acc] : llvm::zip(op.getRegionOutputArgs(), accs))
      map.map(arg, acc);
    SmallVector<Value> yields = loom::inlineGenericBody(nb, op, map, ivs);
    return scf::ValueVector(yields.begin(), yields.end());
  };

  // The output elements of the parallel indices `outer`: their indices.
  auto outputIndices = [&](OpBuilder &pb, Location l, ValueRange outer) {
    SmallVector<SmallVector<Value>> outIndices;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      // The output maps name parallel dimensions only: any value stands
      // for the reduction ones.
      outIndices.push_back(indicesOf(pb, l, op.getMatchingIndexingMap(&init),
                                     dimsOf(outer, {})));
    }
    return outIndices;
  };

  // Lanes: where the innermost reduction is short (a row of a 7x7 or
  // 14x14 image under a sum over the batch and the rows, as in a depthwise
  // filter gradient or a spatial mean), each output keeps a vector of T
  // accumulators, one per position of that row, combined with the whole
  // row at once (the body on vectors) over all the outer reduction
  // indices; the lanes are combined once at the end. Summing each row into
  // one register instead costs a horizontal sum every T values, and LLVM's
  // vectorizer, given the row unrolled, vectorizes the loop around it with
  // gathers.
  SmallVector<Operation *> combiners = laneCombiners(op);
  int64_t lanes = ranges.back();
  bool useLanes = ranges.size() - parallel >= 2 && lanes >= 2 &&
                  lanes <= kMaxLanes && !combiners.empty() &&
                  rowVectorizable(op);
  auto buildLaneReduction = [&](OpBuilder &pb, Location l, ValueRange outer) {
    SmallVector<Value> inits;
    for (Operation *combiner : combiners)
      inits.push_back(vector::BroadcastOp::create(
          pb, l, VectorType::get({lanes}, combiner->getResult(0).getType()),
          identityOf(pb, l, combiner)));
    SmallVector<Value> olb(rlb.begin(), rlb.end() - 1),
        oub(rub.begin(), rub.end() - 1), ostep(rstep.begin(), rstep.end() - 1);
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, olb, oub, ostep, inits,
        [&](OpBuilder &nb, Location nl, ValueRange inner,
            ValueRange accs) -> scf::ValueVector {
          // The innermost index is 0: the row starts there.
          return buildRowBody(nb, nl, op, dimsOf(outer, inner), lanes, accs);
        });
    // Output element, then the lanes.
    SmallVector<SmallVector<Value>> outIndices = outputIndices(pb, l, outer);
    for (auto [k, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      Value start = memref::LoadOp::create(pb, l, init.get(), outIndices[k]);
      Value sum = vector::ReductionOp::create(
          pb, l, combiningKind(combiners[k]), nest.results[k], start,
          arith::FastMathFlags::reassoc);
      memref::StoreOp::create(pb, l, sum, init.get(), outIndices[k]);
    }
  };

  auto buildReduction = [&](OpBuilder &pb, Location l, ValueRange outer) {
    if (useLanes)
      return buildLaneReduction(pb, l, outer);
    // The accumulators' starting values: the outputs' current elements.
    SmallVector<SmallVector<Value>> outIndices = outputIndices(pb, l, outer);
    SmallVector<Value> inits;
    for (auto [i, init] : llvm::enumerate(op.getDpsInitsMutable()))
      inits.push_back(
          memref::LoadOp::create(pb, l, init.get(), outIndices[i]));
    scf::LoopNest nest = scf::buildLoopNest(
        pb, l, rlb, rub, rstep, inits,
        [&](OpBuilder &nb, Location nl, ValueRange inner,
            ValueRange accs) -> scf::ValueVector {
          return buildBody(nb, nl, dimsOf(outer, inner), accs);
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

/// Row blocks of a split column reduction, and the least work (elements
/// read) worth splitting.
constexpr int64_t kRowBlocks = 8;
constexpr int64_t kMinSplitWork = int64_t(1) << 16;

/// Whether `op` is a column reduction whose rows split into kRowBlocks
/// blocks (the pass description): its reduction dimensions first, then
/// its parallel ones, the first dimension's range a multiple of kRowBlocks,
/// every output combined by an addf, maximumf or minimumf (laneCombiners),
/// no index read, operands in the row-major layout, the first dimension
/// indexed plainly where it is indexed.
bool isSplittableColumnReduction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumReductionLoops() == 0 ||
      op.getNumParallelLoops() == 0 || op.hasIndexSemantics())
    return false;
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  bool parallelSeen = false;
  for (utils::IteratorType it : its) {
    if (it == utils::IteratorType::parallel)
      parallelSeen = true;
    else if (parallelSeen)
      return false;
  }
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic) ||
      ranges[0] % kRowBlocks != 0 || ranges[0] < 2 * kRowBlocks)
    return false;
  int64_t work = 1;
  for (int64_t r : ranges)
    work *= r;
  if (work < kMinSplitWork || laneCombiners(op).empty())
    return false;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.getLayout().isIdentity())
      return false;
    for (AffineExpr e : op.getMatchingIndexingMap(&operand).getResults())
      if (e.isFunctionOfDim(0) && !isa<AffineDimExpr>(e))
        return false;
  }
  return true;
}

/// Splits a column reduction's rows (its first dimension) into kRowBlocks
/// blocks reduced in parallel, each into a partial result of its own
/// (starting from the combiner's identity), then combines the output with
/// the partials in block order. The blocks are fixed, not the threads:
/// every run gives the same bits, whatever the thread count.
void splitRows(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<Operation *> combiners = laneCombiners(op);
  int64_t rows = op.getStaticLoopRanges()[0], block = rows / kRowBlocks;
  // The partials: [kRowBlocks, output shape...], filled with identities.
  SmallVector<Value> partials;
  for (auto [init, combiner] : llvm::zip(op.getDpsInits(), combiners)) {
    auto type = cast<MemRefType>(init.getType());
    SmallVector<int64_t> shape{kRowBlocks};
    llvm::append_range(shape, type.getShape());
    Value partial = memref::AllocOp::create(
        b, loc, MemRefType::get(shape, type.getElementType()),
        b.getI64IntegerAttr(64));
    linalg::FillOp::create(b, loc, identityOf(b, loc, combiner), partial);
    partials.push_back(partial);
  }
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value count = arith::ConstantIndexOp::create(b, loc, kRowBlocks);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  scf::ParallelOp::create(
      b, loc, ValueRange{zero}, ValueRange{count}, ValueRange{one},
      [&](OpBuilder &pb, Location l, ValueRange ivs) {
        Value first = arith::MulIOp::create(
            pb, l, ivs[0], arith::ConstantIndexOp::create(pb, l, block));
        SmallVector<Value> operands;
        for (OpOperand *in : op.getDpsInputOperands()) {
          auto type = cast<MemRefType>(in->get().getType());
          AffineMap map = op.getMatchingIndexingMap(in);
          SmallVector<OpFoldResult> offsets, sizes, strides;
          bool narrowed = false;
          for (auto [i, e] : llvm::enumerate(map.getResults())) {
            bool rowDim = e.isFunctionOfDim(0);
            narrowed |= rowDim;
            offsets.push_back(rowDim ? OpFoldResult(first)
                                     : OpFoldResult(pb.getIndexAttr(0)));
            sizes.push_back(
                pb.getIndexAttr(rowDim ? block : type.getDimSize(i)));
            strides.push_back(pb.getIndexAttr(1));
          }
          operands.push_back(narrowed ? memref::SubViewOp::create(
                                            pb, l, in->get(), offsets, sizes,
                                            strides)
                                            .getResult()
                                      : in->get());
        }
        for (Value partial : partials) {
          auto type = cast<MemRefType>(partial.getType());
          SmallVector<OpFoldResult> offsets{ivs[0]}, sizes{pb.getIndexAttr(1)},
              strides(type.getRank(), pb.getIndexAttr(1));
          for (int64_t d : type.getShape().drop_front()) {
            offsets.push_back(pb.getIndexAttr(0));
            sizes.push_back(pb.getIndexAttr(d));
          }
          auto resultType = memref::SubViewOp::inferRankReducedResultType(
              type.getShape().drop_front(), type, offsets, sizes, strides);
          operands.push_back(memref::SubViewOp::create(
              pb, l, cast<MemRefType>(resultType), partial, offsets, sizes,
              strides));
        }
        Operation *part = pb.clone(*op);
        part->setOperands(operands);
      });
  // output = output (+) partial[0] (+) ... (+) partial[kRowBlocks - 1].
  for (auto [init, partial, combiner] :
       llvm::zip(op.getDpsInits(), partials, combiners)) {
    int64_t rank = cast<MemRefType>(init.getType()).getRank();
    SmallVector<utils::IteratorType> its{utils::IteratorType::reduction};
    its.append(rank, utils::IteratorType::parallel);
    AffineMap all = b.getMultiDimIdentityMap(rank + 1);
    AffineMap out = all.dropResult(0);
    Operation *combine = combiner; // (a structured binding: not capturable)
    linalg::GenericOp::create(
        b, loc, ValueRange{partial}, ValueRange{init},
        ArrayRef<AffineMap>{all, out}, its,
        [&](OpBuilder &gb, Location gl, ValueRange args) {
          Operation *c = gb.clone(*combine);
          c->setOperands({args[1], args[0]});
          linalg::YieldOp::create(gb, gl, c->getResult(0));
        });
  }
  op.erase();
}

struct CpuReductionLoops
    : loom::impl::LoomCpuReductionLoopsPassBase<CpuReductionLoops> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops, columnOps;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isInnerReduction(op))
        ops.push_back(op);
      else if (isSplittableColumnReduction(op))
        columnOps.push_back(op);
    });
    for (linalg::GenericOp op : ops)
      lower(op);
    for (linalg::GenericOp op : columnOps)
      splitRows(op);
  }
};
} // namespace
