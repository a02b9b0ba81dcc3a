//===- GpuFusedLaunches.cpp - A kernel of several linalg ops, one launch ---===//
//
// Part of loom-map-kernels-to-gpu (option fuse-rows, on by default): two
// ways a kernel of several linalg ops becomes one GPU launch instead of one
// launch per op.
//
// ## Rows (`block-row`)
//
// Softmax, layer norm, cross-entropy and their gradients are kernels of a
// few linalg ops that each work row by row: a row maximum, a row sum of
// exponentials, a normalization. One launch per op reads and writes the
// whole tensor from memory each time. Here the kernel becomes one launch
// (strategy `block-row`): a block of threads per row, which runs every op
// of the kernel on its row in turn, with a barrier between ops, so that what
// an op writes for the row is in cache when the next one reads it.
//
// A kernel is mapped so when:
//  1. every computing op is a linalg.generic with static, non-empty loops,
//     and there are at least two;
//  2. one of them reduces over its trailing loops with a known combiner
//     (findCombiner): its parallel loops are the rows (but trailing loops
//     of extent 1, as in a reduction to a [rows, 1] view);
//  3. every op's leading loops are those rows, parallel, same extents;
//  4. every buffer the kernel writes (outputs and temporaries) is accessed,
//     by every op, through one value and with the row loops as its leading
//     indices: each element of it belongs to one row, hence one block.
//     Buffers read otherwise (a layer norm's scale, broadcast over rows)
//     are written by no op of the kernel. (An argument the planner lets
//     share its bytes with an output, state updated in place, is read only
//     by pointwise ops over its own shape, unviewed: loom-plan-memory's
//     invariant. Their identity maps lead with the rows, so its elements
//     are read by the block that later writes them.)
//  5. an op that reduces in another way (over short windows, several
//     outputs) has at least a warp's worth of points per row, or short
//     reductions: one thread per point then loops over the reduction.
//
// Within a row, an op's points (the loops after the rows) are spread over
// the block's threads; a row reduction folds every blockDim-th element per
// thread, combines within warps by shuffles and across warps through shared
// memory, as the `block-reduce` strategy does for a whole tensor.
//
// ## Element by element (`pointwise-group`)
//
// The optimizer update of many parameters is one kernel (loom-fuse groups
// them): pointwise ops of different shapes, each reading and writing its
// parameter and moments. As one launch, every thread runs its share of each
// op's grid-stride loop in turn (the `pointwise` mapping, vectors where it
// allows). No barrier is needed when whatever an op writes is touched
// element by element: every access to it, in every op, is the identity over
// the whole buffer, from ops of one element count and vector width, so an
// element is read and written by one thread, in program order. Buffers of
// one type count as one here: the memory planner lets a parameter's new
// value share its bytes with the old (updated in place), which the kernel
// cannot see.
//
//===----------------------------------------------------------------------===//

#include "GpuKernelMapper.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace loom::gpumap;

namespace {

/// How one op of a fused kernel runs on its row.
enum class RowWork {
  Pointwise, // no reduction: the row's points spread over the threads
  Reduce,    // a reduction of the whole row: threads, warps, then the block
  PerPoint,  // another reduction: a thread per point, reduction loops inside
};

struct RowOp {
  GenericShape shape;
  RowWork work;
  int64_t points = 1;              // per row: the loops after the rows
  SmallVector<int64_t> pointRanges; // their extents
};

/// The buffer (kernel argument or temporary) `v` is a view of.
Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `map` indexes with the `rows` leading loops first, in order.
bool isRowAligned(AffineMap map, unsigned rows) {
  if (map.getNumResults() < rows)
    return false;
  for (unsigned d = 0; d < rows; ++d)
    if (map.getResult(d) != getAffineDimExpr(d, map.getContext()))
      return false;
  return true;
}

} // namespace

std::optional<std::vector<GenericShape>>
loom::gpumap::genericShapes(ArrayRef<Operation *> ops) {
  if (ops.size() < 2)
    return std::nullopt;
  std::vector<GenericShape> shapes;
  for (Operation *op : ops) {
    auto g = dyn_cast<linalg::GenericOp>(op);
    std::optional<GenericShape> s =
        g ? analyzeGeneric(g) : std::optional<GenericShape>();
    if (!s || s->numPar * s->numRed == 0)
      return std::nullopt;
    shapes.push_back(std::move(*s));
  }
  return shapes;
}

FailureOr<bool> KernelMapper::mapFusedRows(ArrayRef<Operation *> ops,
                                           std::vector<GenericShape> shapes) {
  // (2): the rows, from the first whole-row reduction.
  SmallVector<int64_t> rowRanges;
  bool haveRows = false;
  for (GenericShape &s : shapes) {
    // Parallel loops [0, r), reductions [r, n): a reduction of trailing
    // loops. Its rows are the parallel loops but trailing ones of extent 1
    // (a reduction kept as a dimension of size 1, through a view).
    unsigned r = s.par.size();
    if (!haveRows && !s.red.empty() && r > 0 && s.par.back() + 1 == r &&
        s.red.front() == r && findCombiner(s.g)) {
      rowRanges = s.parRanges;
      while (!rowRanges.empty() && rowRanges.back() == 1)
        rowRanges.pop_back();
      haveRows = !rowRanges.empty();
    }
  }
  if (!haveRows)
    return false;
  unsigned rows = rowRanges.size();
  int64_t numRows = 1;
  for (int64_t r : rowRanges)
    numRows *= r;

  // (3), (5): each op's work on a row.
  std::vector<RowOp> plan;
  int64_t widest = 1;
  for (GenericShape &s : shapes) {
    if (s.par.size() < rows)
      return false;
    for (unsigned d = 0; d < rows; ++d)
      if (s.par[d] != d || s.parRanges[d] != rowRanges[d])
        return false;
    RowOp r{s, RowWork::Pointwise, 1, {}};
    for (unsigned i = rows; i < s.par.size(); ++i) {
      r.pointRanges.push_back(s.parRanges[i]);
      r.points *= s.parRanges[i];
    }
    if (!s.red.empty()) {
      // A reduction of the row (and loops of extent 1 after it).
      r.shape.combiner = r.points == 1 && s.red.front() == s.par.size()
                             ? findCombiner(s.g)
                             : std::nullopt;
      r.work = r.shape.combiner ? RowWork::Reduce : RowWork::PerPoint;
      constexpr int64_t kShortReduction = 64;
      if (r.work == RowWork::PerPoint && r.points < kWarp &&
          s.numRed > kShortReduction)
        return false;
    }
    widest = std::max(widest, r.work == RowWork::Reduce ? s.numRed : r.points);
    plan.push_back(std::move(r));
  }

  // (4): what the kernel writes is touched row by row, through one value.
  DenseMap<Value, Value> written; // root buffer -> the value that touches it
  for (RowOp &r : plan)
    for (Value out : r.shape.g.getDpsInits())
      written.try_emplace(rootBuffer(out), out);
  for (RowOp &r : plan)
    for (auto [value, map] : llvm::zip(r.shape.operands, r.shape.maps)) {
      if (!isa<MemRefType>(value.getType()))
        continue;
      auto it = written.find(rootBuffer(value));
      if (it != written.end() &&
          (it->second != value || !isRowAligned(map, rows)))
        return false;
    }

  // The launch: a block per row, grid-stride over the rows.
  int64_t threads = std::clamp<int64_t>(
      int64_t(llvm::PowerOf2Ceil(uint64_t(widest))), kWarp, kBlock);
  int64_t warps = threads / kWarp;
  SmallVector<Type> shared;
  for (RowOp &r : plan)
    if (r.work == RowWork::Reduce && warps > 1)
      shared.push_back(MemRefType::get(
          {warps}, r.shape.combiner->neutral.getType(), AffineMap(),
          gpu::AddressSpaceAttr::get(b.getContext(),
                                     gpu::AddressSpace::Workgroup)));
  Location loc = ops.front()->getLoc();
  IRMapping map;
  FailureOr<gpu::GPUFuncOp> func =
      beginLaunch(ops, map, "block-row", {gridFor(numRows, 1), 1, 1},
                  {threads, 1, 1}, shared);
  if (failed(func))
    return failure();
  Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value gdim = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value zero = index(loc, 0);
  Value step = index(loc, threads);
  Value lane = arith::RemUIOp::create(b, loc, tid, index(loc, kWarp));
  Value warp = arith::DivUIOp::create(b, loc, tid, index(loc, kWarp));
  Value isLane0 =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, zero);
  auto rowLoop = scf::ForOp::create(b, loc, bid, index(loc, numRows), gdim);
  b.setInsertionPointToStart(rowLoop.getBody());
  SmallVector<Value> rowIvs =
      delinearize(loc, rowLoop.getInductionVar(), rowRanges);
  unsigned nextShared = 0;
  for (RowOp &r : plan) {
    const GenericShape &s = r.shape;
    if (r.work == RowWork::Reduce) {
      SmallVector<Value> pIvs = rowIvs;
      pIvs.resize(s.par.size(), zero); // the loops of extent 1
      Value total =
          warpReduce(loc, *s.combiner, foldRow(s, map, pIvs, tid, step));
      if (warps == 1) {
        storeFromLeader(s, map, isLane0, pIvs, total);
      } else {
        // Warp leaders meet in shared memory; the first warp combines.
        Value smem = func->getWorkgroupAttributions()[nextShared++];
        auto put = scf::IfOp::create(b, loc, isLane0, false);
        b.setInsertionPointToStart(put.thenBlock());
        memref::StoreOp::create(b, loc, total, smem, ValueRange{warp});
        b.setInsertionPointAfter(put);
        gpu::BarrierOp::create(b, loc);
        Value isWarp0 =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, warp, zero);
        auto last = scf::IfOp::create(b, loc, isWarp0, false);
        b.setInsertionPointToStart(last.thenBlock());
        Value inRange = arith::CmpIOp::create(
            b, loc, arith::CmpIPredicate::ult, lane, index(loc, warps));
        Value slot = arith::SelectOp::create(b, loc, inRange, lane, zero);
        Value mine = memref::LoadOp::create(b, loc, smem, ValueRange{slot});
        Value neutral =
            arith::ConstantOp::create(b, loc, s.combiner->neutral);
        mine = arith::SelectOp::create(b, loc, inRange, mine, neutral);
        storeFromLeader(s, map, isLane0, pIvs,
                        warpReduce(loc, *s.combiner, mine));
        b.setInsertionPointAfter(last);
      }
    } else {
      auto points = scf::ForOp::create(b, loc, tid, index(loc, r.points), step);
      b.setInsertionPointToStart(points.getBody());
      SmallVector<Value> pIvs = rowIvs;
      llvm::append_range(
          pIvs, delinearize(loc, points.getInductionVar(), r.pointRanges));
      if (r.work == RowWork::Pointwise)
        computePoint(s, map, s.merge(pIvs, {}));
      else
        reducePointSerially(s, map, pIvs);
      b.setInsertionPointAfter(points);
    }
    // What this op wrote for the row is what the next one reads; and the
    // next row's reduction reuses the shared memory.
    gpu::BarrierOp::create(b, loc);
  }
  b.setInsertionPointAfter(rowLoop);
  gpu::ReturnOp::create(b, loc);
  return true;
}

FailureOr<bool>
KernelMapper::mapPointwiseGroup(ArrayRef<Operation *> ops,
                                std::vector<GenericShape> shapes) {
  SmallVector<int64_t> widths;
  for (GenericShape &s : shapes) {
    if (!s.red.empty())
      return false;
    widths.push_back(pointwiseWidth(s));
  }
  // What may alias a written buffer: a kernel argument stands for every
  // argument of its type; a temporary only for itself.
  auto aliasClass = [](Value root) -> const void * {
    return isa<BlockArgument>(root) ? root.getType().getAsOpaquePointer()
                                    : root.getAsOpaquePointer();
  };
  DenseSet<const void *> written;
  for (GenericShape &s : shapes)
    for (Value out : s.g.getDpsInits())
      written.insert(aliasClass(rootBuffer(out)));
  DenseMap<const void *, std::pair<int64_t, int64_t>> mapping;
  for (auto [s, width] : llvm::zip(shapes, widths))
    for (auto [i, value] : llvm::enumerate(s.operands)) {
      if (!isa<MemRefType>(value.getType()))
        continue;
      const void *c = aliasClass(rootBuffer(value));
      if (!written.contains(c))
        continue;
      auto [it, inserted] =
          mapping.try_emplace(c, std::make_pair(s.numPar, width));
      if (value != rootBuffer(value) || !s.maps[i].isIdentity() ||
          it->second != std::make_pair(s.numPar, width))
        return false;
    }
  int64_t grid = 1;
  for (auto [s, width] : llvm::zip(shapes, widths))
    grid = std::max(grid, gridFor(s.numPar / width, kBlock));
  IRMapping map;
  if (failed(beginLaunch(ops, map, "pointwise-group", {grid, 1, 1},
                         {kBlock, 1, 1})))
    return failure();
  for (auto [s, width] : llvm::zip(shapes, widths))
    emitPointwise(s, map, width);
  gpu::ReturnOp::create(b, ops.front()->getLoc());
  return true;
}
