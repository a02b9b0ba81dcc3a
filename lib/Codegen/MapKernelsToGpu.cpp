//===- MapKernelsToGpu.cpp - loom-map-kernels-to-gpu ----------------------===//
//
// The input is the kernel module on buffers: each kernel a func.func whose
// body is a sequence of linalg ops (named ops generalized), views,
// constants and temporaries (memref.alloc). Each computing op becomes one
// gpu.func of `gpu.module @loom_kernels`; every gpu.func of a kernel has
// the same parameters (the kernel's buffers, then its scratch buffers), so
// that the plan passes the same buffer list to each launch. The mapping
// onto threads is chosen from the op's shape (docs/codegen.md, "CUDA"):
//
//  - pointwise: a grid-stride loop, 128-bit vector loads and stores where
//    every operand is contiguous;
//  - warp-row: reductions over trailing dimensions with a recognized
//    combiner, one warp per row, lanes striding the row, a butterfly of
//    shuffles at the end;
//  - block-reduce: a reduction of everything to one value, one block of
//    1024 threads, warp shuffles and shared memory;
//  - thread-row: any other generic, one thread per point of its parallel
//    dimensions, reduction loops inside;
//  - serial: anything else (loops over slices), one thread.
//
//  - forall: the lines of a scatter_add, one thread per line, grid-stride.
//
// Temporaries become scratch buffers in the entry's arena.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Kernels.h"
#include "loom/Codegen/Passes.h"
#include "loom/Conversion/Utils/GenericBody.h"

#include "GpuKernelMapper.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {
#define GEN_PASS_DEF_MAPKERNELSTOGPUPASS
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace loom::gpumap {

std::optional<Combiner> findCombiner(linalg::GenericOp g) {
  if (g.getNumDpsInits() != 1)
    return std::nullopt;
  Block *body = g.getBody();
  BlockArgument acc = body->getArgument(g.getNumDpsInputs());
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  Operation *op = yield.getOperand(0).getDefiningOp();
  if (!op || op->getBlock() != body || op->getNumOperands() != 2 ||
      !acc.hasOneUse() || acc.getUses().begin()->getOwner() != op)
    return std::nullopt;
  if (!isa<arith::AddFOp, arith::MulFOp, arith::MaximumFOp, arith::MinimumFOp,
           arith::MaxNumFOp, arith::MinNumFOp, arith::AddIOp, arith::MulIOp,
           arith::MaxSIOp, arith::MinSIOp, arith::MaxUIOp, arith::MinUIOp,
           arith::OrIOp, arith::AndIOp, arith::XOrIOp>(op))
    return std::nullopt;
  // The other operand must not depend on the accumulator.
  if (op->getOperand(0) == acc && op->getOperand(1) == acc)
    return std::nullopt;
  std::optional<TypedAttr> neutral = arith::getNeutralElement(op);
  if (!neutral)
    return std::nullopt;
  // Shuffles move 32-bit values.
  Type t = acc.getType();
  if (!t.isF32() && !t.isInteger(32))
    return std::nullopt;
  return Combiner{op, *neutral};
}

/// Whether nothing in the kernel writes `buffer` (or a view of it): a load
/// from it can be repeated in every launch that needs the value (the dropout
/// seed, a step count).
bool isReadOnly(Value buffer) {
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (auto view = dyn_cast<ViewLikeOpInterface>(user)) {
      if (!isReadOnly(view->getResult(0)))
        return false;
      continue;
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(user);
    if (!effects || effects.getEffectOnValue<MemoryEffects::Write>(buffer))
      return false;
  }
  return true;
}

} // namespace loom::gpumap

using namespace loom::gpumap;

/// Named linalg ops as generics: the mapping reads one form.
static constexpr const char *kGeneralize =
    "func.func(linalg-generalize-named-ops),canonicalize";

LogicalResult KernelMapper::collectScratch() {
  for (BlockArgument arg : kernel.getArguments()) {
    buffers.push_back(arg);
    bufferTypes.push_back(arg.getType());
  }
  for (Operation &op : kernel.getBody().front()) {
    if (!isa<memref::AllocOp, memref::AllocaOp>(op))
      continue;
    auto type = cast<MemRefType>(op.getResult(0).getType());
    if (!type.hasStaticShape() || !type.getLayout().isIdentity())
      return op.emitError("cuda codegen: a kernel temporary must have a "
                          "static shape and the identity layout, not ")
             << type;
    info.addScratch(type, 256);
    buffers.push_back(op.getResult(0));
    bufferTypes.push_back(type);
  }
  return success();
}

FailureOr<SmallVector<Operation *>>
KernelMapper::dependencies(ArrayRef<Operation *> ops) {
  llvm::SetVector<Value> worklist;
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      worklist.insert(v);
    if (Value init = foldedInit.lookup(op))
      worklist.insert(init);
    for (Region &r : op->getRegions()) {
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(r, above);
      worklist.insert(above.begin(), above.end());
    }
  }
  Operation *op = ops.front();
  llvm::SmallPtrSet<Operation *, 16> needed;
  for (unsigned i = 0; i < worklist.size(); ++i) {
    Value v = worklist[i];
    if (llvm::is_contained(buffers, v))
      continue;
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != &kernel.getBody().front())
      return op->emitError("cuda codegen: cannot pass ")
             << v << " to a GPU launch";
    bool readsInput = false;
    if (auto load = dyn_cast<memref::LoadOp>(def))
      readsInput = isa<BlockArgument>(load.getMemRef()) &&
                   isReadOnly(load.getMemRef());
    if ((!isMemoryEffectFree(def) && !readsInput) ||
        def->getNumRegions() != 0)
      return op->emitError("cuda codegen: this op uses a value computed by '")
             << def->getName() << "', which a separate GPU launch cannot see";
    if (needed.insert(def).second)
      for (Value operand : def->getOperands())
        worklist.insert(operand);
  }
  SmallVector<Operation *> ordered;
  for (Operation &o : kernel.getBody().front())
    if (needed.contains(&o))
      ordered.push_back(&o);
  return ordered;
}

FailureOr<gpu::GPUFuncOp>
KernelMapper::beginLaunch(ArrayRef<Operation *> ops, IRMapping &map,
                          StringRef strategy, std::array<int64_t, 3> grid,
                          std::array<int64_t, 3> block, TypeRange workgroup) {
  FailureOr<SmallVector<Operation *>> deps = dependencies(ops);
  if (failed(deps))
    return failure();
  std::string name =
      (kernel.getName() + "_" + Twine(numLaunches++)).str();
  b.setInsertionPointToEnd(gpuModule.getBody());
  auto func = gpu::GPUFuncOp::create(b, ops.front()->getLoc(), name,
                                     b.getFunctionType(bufferTypes, {}),
                                     workgroup);
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr(
      {int32_t(block[0]), int32_t(block[1]), int32_t(block[2])}));
  func->setAttr("loom.strategy", b.getStringAttr(strategy));
  Block &entry = func.getBody().front();
  for (auto [value, arg] : llvm::zip(buffers, entry.getArguments()))
    map.map(value, arg);
  b.setInsertionPointToEnd(&entry);
  for (Operation *dep : *deps)
    b.clone(*dep, map);
  info.launches.push_back(GpuLaunch{name, strategy.str(), grid, block, 0});
  return func;
}

SmallVector<Value> KernelMapper::delinearize(Location loc, Value linear,
                                             ArrayRef<int64_t> ranges) {
  SmallVector<Value> ivs(ranges.size());
  for (int64_t i = ranges.size() - 1; i >= 0; --i) {
    if (ranges[i] == 1) {
      ivs[i] = index(loc, 0);
      continue;
    }
    if (i == 0) {
      ivs[i] = linear;
      break;
    }
    Value r = index(loc, ranges[i]);
    ivs[i] = arith::RemUIOp::create(b, loc, linear, r);
    linear = arith::DivUIOp::create(b, loc, linear, r);
  }
  return ivs;
}

SmallVector<Value> KernelMapper::operandIndices(Location loc, AffineMap map,
                                                ArrayRef<Value> ivs) {
  SmallVector<Value> indices;
  for (AffineExpr e : map.getResults()) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      indices.push_back(ivs[d.getPosition()]);
    else if (auto c = dyn_cast<AffineConstantExpr>(e))
      indices.push_back(index(loc, c.getValue()));
    else
      indices.push_back(affine::AffineApplyOp::create(
          b, loc, AffineMap::get(map.getNumDims(), 0, e), ivs));
  }
  return indices;
}

Value KernelMapper::load(Location loc, Value memref, AffineMap map,
                         ArrayRef<Value> ivs) {
  if (!isa<MemRefType>(memref.getType()))
    return memref; // a scalar operand (linalg.fill's value)
  return memref::LoadOp::create(b, loc, memref,
                                operandIndices(loc, map, ivs));
}

SmallVector<Value> KernelMapper::evalBody(Location loc, linalg::GenericOp g,
                                          ArrayRef<Value> args,
                                          ArrayRef<Value> ivs,
                                          IRMapping &outer) {
  IRMapping m = outer;
  for (auto [arg, value] : llvm::zip(g.getBody()->getArguments(), args))
    m.map(arg, value);
  return inlineGenericBody(b, g, m, ivs);
}

Value KernelMapper::warpReduce(Location loc, const Combiner &c, Value v) {
  for (int32_t offset = kWarp / 2; offset >= 1; offset /= 2) {
    auto shuffle = gpu::ShuffleOp::create(b, loc, v, offset, int32_t(kWarp),
                                          gpu::ShuffleMode::XOR);
    v = combine(loc, c, v, shuffle.getShuffleResult());
  }
  return v;
}

std::optional<GenericShape> loom::gpumap::analyzeGeneric(linalg::GenericOp g) {
  GenericShape s;
  s.g = g;
  SmallVector<int64_t> ranges = g.getStaticLoopRanges();
  s.iters = g.getIteratorTypesArray();
  s.maps = g.getIndexingMapsArray();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  for (unsigned d = 0; d < s.iters.size(); ++d)
    (s.iters[d] == utils::IteratorType::parallel ? s.par : s.red).push_back(d);
  for (unsigned d : s.par)
    s.parRanges.push_back(ranges[d]), s.numPar *= ranges[d];
  for (unsigned d : s.red)
    s.redRanges.push_back(ranges[d]), s.numRed *= ranges[d];
  s.numIns = g.getNumDpsInputs();
  // Outputs indexed by a reduction dimension are not reductions we know.
  for (unsigned o = s.numIns; o < s.maps.size(); ++o)
    for (unsigned d : s.red)
      if (s.maps[o].isFunctionOfDim(d))
        return std::nullopt;
  s.operands.assign(g->getOperands().begin(), g->getOperands().end());
  return s;
}

/// Picks the strategy from the generic's shape: no reduction is
/// pointwise; a trailing reduction with a known combiner is block-reduce
/// (everything to one value) or warp-row (rows long enough for a warp);
/// anything else is thread-row, or serial when the shape is not static.
LogicalResult KernelMapper::mapGeneric(linalg::GenericOp g) {
  std::optional<GenericShape> shape = analyzeGeneric(g);
  if (!shape)
    return mapSerial(g);
  GenericShape &s = *shape;
  if (s.numPar == 0 || s.numRed == 0)
    return success(); // no iterations: nothing to do
  if (s.red.empty())
    return mapPointwise(s);
  bool trailingReduction =
      s.par.empty() || s.par.back() < s.red.front();
  // A warp per row pays when the row is long enough to keep most lanes
  // busy; short rows (a 3x3 convolution window) go one thread per row.
  constexpr int64_t kMinWarpRow = 64;
  if (trailingReduction && (s.numRed >= kMinWarpRow || s.numPar == 1))
    s.combiner = findCombiner(g);
  if (s.combiner && s.numPar == 1)
    return mapBlockReduce(s);
  if (s.combiner)
    return mapWarpRow(s);
  return mapThreadRow(s);
}

/// No reduction: a grid-stride loop over the points. Operands whose map is
/// the identity over a contiguous buffer move in 128-bit vectors when the
/// element count allows.
bool loom::gpumap::isContiguousOperand(const GenericShape &s, unsigned i) {
  auto t = dyn_cast<MemRefType>(s.operands[i].getType());
  return t && t.getLayout().isIdentity() && s.maps[i].isIdentity() &&
         t.getRank() == int64_t(s.iters.size()) &&
         llvm::is_contained({16u, 32u, 64u}, t.getElementTypeBitWidth());
}

int64_t loom::gpumap::pointwiseWidth(const GenericShape &s) {
  unsigned maxBits = 0;
  bool vectorizable = true;
  for (unsigned i = 0; i < s.operands.size(); ++i) {
    if (isContiguousOperand(s, i))
      maxBits = std::max(
          maxBits, cast<MemRefType>(s.operands[i].getType())
                       .getElementTypeBitWidth());
    else if (i >= s.numIns)
      vectorizable = false; // outputs are stored as vectors
  }
  int64_t width = vectorizable && maxBits ? 128 / maxBits : 1;
  if (width > 1 && s.numPar % width != 0)
    width = 1;
  return width;
}

LogicalResult KernelMapper::mapPointwise(const GenericShape &s) {
  int64_t width = pointwiseWidth(s);
  int64_t units = s.numPar / width;
  std::string strategy =
      width > 1 ? "pointwise-vec" + std::to_string(width) : "pointwise";
  IRMapping map;
  Operation *op = s.g;
  if (failed(beginLaunch(op, map, strategy,
                         {gridFor(units, kBlock), 1, 1}, {kBlock, 1, 1})))
    return failure();
  emitPointwise(s, map, width);
  gpu::ReturnOp::create(b, s.g->getLoc());
  return success();
}

void KernelMapper::emitPointwise(const GenericShape &s, IRMapping &map,
                                 int64_t width) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  const SmallVector<Value> &operands = s.operands;
  unsigned numIns = s.numIns;
  auto isContiguous = [&](unsigned i) { return isContiguousOperand(s, i); };
  bool usesIndex = !g.getBody()->getOps<linalg::IndexOp>().empty();
  int64_t units = s.numPar / width;
  scf::ForOp loop = gridStrideLoop(loc, units);
  Value unit = loop.getInductionVar();
  if (width == 1) {
    computePoint(s, map, delinearize(loc, unit, s.parRanges));
  } else {
    Value first = arith::MulIOp::create(b, loc, unit, index(loc, width));
    // Contiguous operands: one vector each, read through a flat view.
    DenseMap<unsigned, Value> flat, vectors;
    for (unsigned i = 0; i < operands.size(); ++i) {
      if (!isContiguous(i))
        continue;
      auto t = cast<MemRefType>(operands[i].getType());
      SmallVector<ReassociationIndices> all(1);
      for (int64_t d = 0; d < t.getRank(); ++d)
        all[0].push_back(d);
      Value buf = map.lookup(operands[i]);
      flat[i] = t.getRank() == 1
                    ? buf
                    : Value(memref::CollapseShapeOp::create(b, loc, buf,
                                                            all));
      int64_t align = width * t.getElementTypeBitWidth() / 8;
      auto vt = VectorType::get({width}, t.getElementType());
      // Outputs the body reads are loaded too (they are also inputs then).
      if (i < numIns || g.payloadUsesValueFromOperand(
                            &g->getOpOperand(i)))
        vectors[i] = vector::LoadOp::create(b, loc, vt, flat[i],
                                            ValueRange{first}, false,
                                            llvm::MaybeAlign(align));
    }
    // Loop indices are needed for linalg.index and for the operands read
    // one element at a time.
    bool needIvs = usesIndex;
    for (unsigned i = 0; i < operands.size(); ++i)
      needIvs |= !isContiguous(i) && isa<MemRefType>(operands[i].getType());
    SmallVector<SmallVector<Value>> lanes(g.getNumDpsInits());
    for (int64_t k = 0; k < width; ++k) {
      Value linear =
          k == 0 ? first
                 : Value(arith::AddIOp::create(b, loc, first,
                                               index(loc, k)));
      SmallVector<Value> ivs;
      if (needIvs)
        ivs = delinearize(loc, linear, s.parRanges);
      SmallVector<Value> args;
      for (unsigned i = 0; i < operands.size(); ++i) {
        if (vectors.count(i))
          args.push_back(vector::ExtractOp::create(b, loc, vectors[i], k));
        else if (i >= numIns)
          args.push_back(outputArg(s, map, i, ivs));
        else
          args.push_back(load(loc, map.lookup(operands[i]), s.maps[i], ivs));
      }
      SmallVector<Value> results = evalBody(loc, g, args, ivs, map);
      for (auto [o, v] : llvm::enumerate(results))
        lanes[o].push_back(v);
    }
    for (unsigned o = 0; o < lanes.size(); ++o) {
      unsigned i = numIns + o;
      auto t = cast<MemRefType>(operands[i].getType());
      auto vt = VectorType::get({width}, t.getElementType());
      Value v = vector::FromElementsOp::create(b, loc, vt, lanes[o]);
      vector::StoreOp::create(
          b, loc, v, flat[i], ValueRange{first}, false,
          llvm::MaybeAlign(width * t.getElementTypeBitWidth() / 8));
    }
  }
  b.setInsertionPointAfter(loop);
}

Value KernelMapper::foldRow(const GenericShape &s, IRMapping &map,
                            ArrayRef<Value> pIvs, Value first, Value step) {
  Location loc = s.g->getLoc();
  Value neutral = arith::ConstantOp::create(b, loc, s.combiner->neutral);
  auto loop = scf::ForOp::create(b, loc, first, index(loc, s.numRed), step,
                                 ValueRange{neutral});
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs =
      s.merge(pIvs, delinearize(loc, loop.getInductionVar(), s.redRanges));
  SmallVector<Value> args;
  for (unsigned i = 0; i < s.numIns; ++i)
    args.push_back(load(loc, map.lookup(s.operands[i]), s.maps[i], ivs));
  args.push_back(loop.getRegionIterArg(0));
  Value next = evalBody(loc, s.g, args, ivs, map)[0];
  scf::YieldOp::create(b, loc, next);
  b.setInsertionPointAfter(loop);
  return loop.getResult(0);
}

void KernelMapper::storeFromLeader(const GenericShape &s, IRMapping &map,
                                   Value isLeader, ArrayRef<Value> pIvs,
                                   Value total) {
  Location loc = s.g->getLoc();
  auto write = scf::IfOp::create(b, loc, isLeader, false);
  b.setInsertionPointToStart(write.thenBlock());
  SmallVector<Value> outIvs = s.merge(pIvs, zeros(loc, s.red.size()));
  Value outBuf = map.lookup(s.operands[s.numIns]);
  Value init = foldedInit.lookup(s.g);
  Value old = init ? map.lookup(init)
                   : load(loc, outBuf, s.maps[s.numIns], outIvs);
  memref::StoreOp::create(b, loc, combine(loc, *s.combiner, old, total),
                          outBuf, operandIndices(loc, s.maps[s.numIns], outIvs));
  b.setInsertionPointAfter(write);
}

/// Everything to one value: one block; threads stride, warps shuffle, warp
/// leaders meet in shared memory.
LogicalResult KernelMapper::mapBlockReduce(const GenericShape &s) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  IRMapping map;
  Type et = g.getDpsInits()[0].getType();
  et = cast<MemRefType>(et).getElementType();
  auto smemType = MemRefType::get(
      {kReduceBlock / kWarp}, et, AffineMap(),
      gpu::AddressSpaceAttr::get(b.getContext(),
                                 gpu::AddressSpace::Workgroup));
  FailureOr<gpu::GPUFuncOp> func =
      beginLaunch(g.getOperation(), map, "block-reduce", {1, 1, 1}, {kReduceBlock, 1, 1},
                  TypeRange{smemType});
  if (failed(func))
    return failure();
  Value smem = func->getWorkgroupAttributions()[0];
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  SmallVector<Value> pIvs = zeros(loc, s.par.size());
  Value partial = warpReduce(
      loc, *s.combiner, foldRow(s, map, pIvs, tid, index(loc, kReduceBlock)));
  Value lane = arith::RemUIOp::create(b, loc, tid, index(loc, kWarp));
  Value warp = arith::DivUIOp::create(b, loc, tid, index(loc, kWarp));
  Value zero = index(loc, 0);
  Value isLeader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         lane, zero);
  auto store = scf::IfOp::create(b, loc, isLeader, false);
  b.setInsertionPointToStart(store.thenBlock());
  memref::StoreOp::create(b, loc, partial, smem, ValueRange{warp});
  b.setInsertionPointAfter(store);
  gpu::BarrierOp::create(b, loc);
  Value isFirstWarp = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq, warp, zero);
  auto last = scf::IfOp::create(b, loc, isFirstWarp, false);
  b.setInsertionPointToStart(last.thenBlock());
  Value mine = memref::LoadOp::create(b, loc, smem, ValueRange{lane});
  Value total = warpReduce(loc, *s.combiner, mine);
  storeFromLeader(s, map, isLeader, pIvs, total);
  b.setInsertionPointAfter(last);
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// One warp per row: lanes stride the row, then a butterfly of shuffles.
LogicalResult KernelMapper::mapWarpRow(const GenericShape &s) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  IRMapping map;
  int64_t warpsPerBlock = kBlock / kWarp;
  if (failed(beginLaunch(g.getOperation(), map, "warp-row",
                         {gridFor(s.numPar, warpsPerBlock), 1, 1},
                         {kBlock, 1, 1})))
    return failure();
  Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
  Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  Value gdim = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
  Value lane = arith::RemUIOp::create(b, loc, tid, index(loc, kWarp));
  Value warp = arith::DivUIOp::create(b, loc, tid, index(loc, kWarp));
  Value wpb = index(loc, warpsPerBlock);
  Value start = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, bid, wpb), warp);
  Value stride = arith::MulIOp::create(b, loc, gdim, wpb);
  auto rows = scf::ForOp::create(b, loc, start, index(loc, s.numPar), stride);
  b.setInsertionPointToStart(rows.getBody());
  SmallVector<Value> pIvs =
      delinearize(loc, rows.getInductionVar(), s.parRanges);
  Value total = warpReduce(
      loc, *s.combiner, foldRow(s, map, pIvs, lane, index(loc, kWarp)));
  Value isLeader = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                         lane, index(loc, 0));
  storeFromLeader(s, map, isLeader, pIvs, total);
  b.setInsertionPointAfter(rows);
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// Any other generic: one thread per point of the parallel dimensions, the
/// reduction dimensions looped over in order (as the CPU does).
LogicalResult KernelMapper::mapThreadRow(const GenericShape &s) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  IRMapping map;
  if (failed(beginLaunch(g.getOperation(), map, "thread-row", {gridFor(s.numPar, kBlock), 1, 1},
                         {kBlock, 1, 1})))
    return failure();
  scf::ForOp points = gridStrideLoop(loc, s.numPar);
  reducePointSerially(
      s, map, delinearize(loc, points.getInductionVar(), s.parRanges));
  b.setInsertionPointAfter(points);
  gpu::ReturnOp::create(b, loc);
  return success();
}

Value KernelMapper::outputArg(const GenericShape &s, IRMapping &map,
                              unsigned i, ArrayRef<Value> ivs) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  if (g.payloadUsesValueFromOperand(&g->getOpOperand(i)))
    return load(loc, map.lookup(s.operands[i]), s.maps[i], ivs);
  return ub::PoisonOp::create(
      b, loc, cast<MemRefType>(s.operands[i].getType()).getElementType());
}

void KernelMapper::computePoint(const GenericShape &s, IRMapping &map,
                                ArrayRef<Value> ivs) {
  Location loc = s.g->getLoc();
  SmallVector<Value> args;
  for (unsigned i = 0; i < s.numIns; ++i)
    args.push_back(load(loc, map.lookup(s.operands[i]), s.maps[i], ivs));
  for (unsigned i = s.numIns; i < s.operands.size(); ++i)
    args.push_back(outputArg(s, map, i, ivs));
  SmallVector<Value> results = evalBody(loc, s.g, args, ivs, map);
  for (auto [o, v] : llvm::enumerate(results)) {
    unsigned i = s.numIns + o;
    memref::StoreOp::create(b, loc, v, map.lookup(s.operands[i]),
                            operandIndices(loc, s.maps[i], ivs));
  }
}

void KernelMapper::reducePointSerially(const GenericShape &s, IRMapping &map,
                                       ArrayRef<Value> pIvs) {
  linalg::GenericOp g = s.g;
  Location loc = g.getLoc();
  const SmallVector<AffineMap> &maps = s.maps;
  const SmallVector<Value> &operands = s.operands;
  unsigned numIns = s.numIns;
  SmallVector<Value> outIvs = s.merge(pIvs, zeros(loc, s.red.size()));
  SmallVector<Value> inits;
  for (unsigned i = numIns; i < operands.size(); ++i)
    inits.push_back(foldedInit.count(g)
                        ? map.lookup(foldedInit.lookup(g))
                        : load(loc, map.lookup(operands[i]), maps[i], outIvs));
  auto loop = scf::ForOp::create(b, loc, index(loc, 0), index(loc, s.numRed),
                                 index(loc, 1), inits);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> ivs =
      s.merge(pIvs, delinearize(loc, loop.getInductionVar(), s.redRanges));
  SmallVector<Value> args;
  for (unsigned i = 0; i < numIns; ++i)
    args.push_back(load(loc, map.lookup(operands[i]), maps[i], ivs));
  llvm::append_range(args, loop.getRegionIterArgs());
  scf::YieldOp::create(b, loc, evalBody(loc, g, args, ivs, map));
  b.setInsertionPointAfter(loop);
  for (auto [o, v] : llvm::enumerate(loop.getResults())) {
    unsigned i = numIns + o;
    memref::StoreOp::create(b, loc, v, map.lookup(operands[i]),
                            operandIndices(loc, maps[i], outIvs));
  }
}

LogicalResult KernelMapper::mapSerial(Operation *op) {
  IRMapping map;
  if (failed(beginLaunch(op, map, "serial", {1, 1, 1}, {1, 1, 1})))
    return failure();
  b.clone(*op, map);
  gpu::ReturnOp::create(b, op->getLoc());
  return success();
}

/// An scf.forall whose iterations are independent by construction (the
/// scatter_add lowering's lines): one thread per iteration, grid-stride.
LogicalResult KernelMapper::mapForall(scf::ForallOp f) {
  ArrayRef<int64_t> lbs = f.getStaticLowerBound();
  ArrayRef<int64_t> ubs = f.getStaticUpperBound();
  ArrayRef<int64_t> steps = f.getStaticStep();
  if (f.getNumResults() != 0 || llvm::any_of(ubs, ShapedType::isDynamic) ||
      llvm::any_of(lbs, [](int64_t v) { return v != 0; }) ||
      llvm::any_of(steps, [](int64_t v) { return v != 1; }))
    return mapSerial(f);
  int64_t units = 1;
  for (int64_t u : ubs)
    units *= u;
  if (units <= 0)
    return success();
  Location loc = f.getLoc();
  IRMapping map;
  if (failed(beginLaunch(f.getOperation(), map, "forall", {gridFor(units, kBlock), 1, 1},
                         {kBlock, 1, 1})))
    return failure();
  scf::ForOp loop = gridStrideLoop(loc, units);
  SmallVector<Value> ivs = delinearize(loc, loop.getInductionVar(), ubs);
  for (auto [iv, v] : llvm::zip(f.getInductionVars(), ivs))
    map.map(iv, v);
  for (Operation &op : f.getBody()->without_terminator())
    b.clone(op, map);
  b.setInsertionPointAfter(loop);
  gpu::ReturnOp::create(b, loc);
  return success();
}

/// The scalar a generic fills its one output with, if that is all it does.
static Value fillScalar(linalg::GenericOp g) {
  if (g.getNumDpsInits() != 1 || g.getNumDpsInputs() != 1)
    return {};
  Value in = g.getDpsInputs()[0];
  if (isa<ShapedType>(in.getType()) ||
      !g.getIndexingMapsArray()[1].isIdentity())
    return {};
  auto yield = cast<linalg::YieldOp>(g.getBody()->getTerminator());
  return yield.getOperand(0) == g.getBody()->getArgument(0) ? in : Value();
}

void KernelMapper::foldFillsIntoReductions() {
  Block &body = kernel.getBody().front();
  for (auto fill : body.getOps<linalg::GenericOp>()) {
    Value scalar = fillScalar(fill);
    if (!scalar)
      continue;
    Value buffer = fill.getDpsInits()[0];
    // The next op touching the buffer must be a reduction that overwrites
    // all of it, and nothing may see the buffer through a view.
    Operation *next = nullptr;
    bool viewed = false;
    for (Operation *user : buffer.getUsers()) {
      viewed |= isa<ViewLikeOpInterface>(user);
      Operation *top = body.findAncestorOpInBlock(*user);
      if (top && top != fill && fill->isBeforeInBlock(top) &&
          (!next || top->isBeforeInBlock(next)))
        next = top;
    }
    auto reduction = dyn_cast_or_null<linalg::GenericOp>(next);
    if (viewed || !reduction || reduction.getNumDpsInits() != 1 ||
        reduction.getDpsInits()[0] != buffer ||
        reduction.getNumReductionLoops() == 0 ||
        llvm::is_contained(reduction.getDpsInputs(), buffer))
      continue;
    // ... and one mapGeneric maps itself (no empty or dynamic loop, no
    // output indexed by a reduction dimension: those run serially, or not
    // at all, and would not see the folded value).
    AffineMap out = reduction.getIndexingMapsArray().back();
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<utils::IteratorType> iters =
        reduction.getIteratorTypesArray();
    bool outReadsReduction = false;
    for (unsigned d = 0; d < iters.size(); ++d)
      outReadsReduction |= iters[d] == utils::IteratorType::reduction &&
                           out.isFunctionOfDim(d);
    if (!out.isProjectedPermutation() || outReadsReduction ||
        out.getNumResults() != unsigned(type.getRank()) ||
        llvm::any_of(reduction.getStaticLoopRanges(),
                     [](int64_t r) { return r <= 0; }))
      continue;
    foldedInit[reduction] = scalar;
    foldedFills.insert(fill);
  }
}

SmallVector<Operation *> KernelMapper::computingOps() {
  SmallVector<Operation *> ops;
  for (Operation &op : kernel.getBody().front()) {
    if (isa<func::ReturnOp, memref::AllocOp, memref::AllocaOp,
            memref::DeallocOp>(op) ||
        foldedFills.contains(&op))
      continue;
    if (isMemoryEffectFree(&op) && op.getNumRegions() == 0)
      continue; // cloned into the launches that use it
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && isa<BlockArgument>(load.getMemRef()) &&
        isReadOnly(load.getMemRef()))
      continue; // likewise (a step count)
    ops.push_back(&op);
  }
  return ops;
}

LogicalResult KernelMapper::run() {
  if (failed(collectScratch()))
    return failure();
  foldFillsIntoReductions();
  SmallVector<Operation *> ops = computingOps();
  // (1) of GpuFusedLaunches.cpp: several generics with static loops.
  std::optional<std::vector<GenericShape>> shapes =
      fuseRows ? genericShapes(ops) : std::nullopt;
  if (shapes) {
    FailureOr<bool> fused = mapFusedRows(ops, *shapes);
    if (succeeded(fused) && !*fused)
      fused = mapPointwiseGroup(ops, std::move(*shapes));
    if (failed(fused))
      return failure();
    if (*fused)
      return success();
  }
  for (Operation *op : ops) {
    if (auto g = dyn_cast<linalg::GenericOp>(op)) {
      if (failed(mapGeneric(g)))
        return failure();
      continue;
    }
    if (auto f = dyn_cast<scf::ForallOp>(op)) {
      if (failed(mapForall(f)))
        return failure();
      continue;
    }
    if (failed(mapSerial(op)))
      return failure();
  }
  return success();
}

/// Bufferization leaves results computed into a temporary and then copied
/// to the out-param. On the GPU that copy is a launch and the temporary
/// scratch memory: when the out-param is used by nothing else and the copy
/// is the temporary's last use, the temporary becomes the out-param.
static void forwardResultCopies(func::FuncOp kernel) {
  SmallVector<linalg::CopyOp> copies;
  for (auto copy : kernel.getBody().front().getOps<linalg::CopyOp>())
    copies.push_back(copy);
  for (linalg::CopyOp copy : copies) {
    Value src = copy.getInputs()[0], dst = copy.getOutputs()[0];
    auto alloc = src.getDefiningOp<memref::AllocOp>();
    auto arg = dyn_cast<BlockArgument>(dst);
    if (!alloc || !arg || !arg.hasOneUse() || src.getType() != dst.getType())
      continue;
    if (llvm::any_of(src.getUsers(), [&](Operation *user) {
          Operation *top = kernel.getBody().front().findAncestorOpInBlock(
              *user);
          return top && top != copy && copy->isBeforeInBlock(top);
        }))
      continue;
    copy.erase();
    src.replaceAllUsesWith(dst);
    alloc.erase();
  }
}

LogicalResult loom::mapKernelsToGpu(ModuleOp kernels, KernelInfoMap &info,
                                    bool fuseRows, PipelineRunner run) {
  MLIRContext *ctx = kernels.getContext();
  for (auto kernel : kernels.getOps<func::FuncOp>())
    forwardResultCopies(kernel);
  if (failed(runKernelPipeline(kernels, kGeneralize, run)))
    return failure();
  SmallVector<Operation *> hostOps;
  for (Operation &op : *kernels.getBody())
    hostOps.push_back(&op);
  OpBuilder b(ctx);
  kernels->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                   b.getUnitAttr());
  b.setInsertionPointToEnd(kernels.getBody());
  auto gpuModule =
      gpu::GPUModuleOp::create(b, kernels.getLoc(), kKernelModuleName);
  // Constant tensors the kernels read (memref.global) go to device memory.
  b.setInsertionPointToStart(gpuModule.getBody());
  // 64-byte aligned, as the arena's buffers are, for vector loads.
  for (auto global : kernels.getOps<memref::GlobalOp>())
    cast<memref::GlobalOp>(b.clone(*global))
        .setAlignmentAttr(b.getI64IntegerAttr(64));
  for (auto kernel : kernels.getOps<func::FuncOp>()) {
    KernelMapper mapper(kernel, gpuModule, info[kernel.getName().str()],
                        fuseRows);
    if (failed(mapper.run()))
      return failure();
  }
  // The host-side kernels are now launches of the gpu.module.
  for (Operation *op : hostOps)
    op->erase();
  return success();
}

namespace {
struct MapKernelsToGpuPass
    : public KernelModulePass<MapKernelsToGpuPass,
                              loom::impl::MapKernelsToGpuPassBase> {
  using KernelModulePass::KernelModulePass;
  void getDependentDialects(DialectRegistry &registry) const override {
    MapKernelsToGpuPassBase::getDependentDialects(registry);
    addKernelPipelineDialects(kGeneralize, registry);
  }
  LogicalResult runOnKernels(ModuleOp kernels, PipelineRunner run) {
    KernelInfoMap launches = readKernelInfo(kernels);
    if (failed(mapKernelsToGpu(kernels, launches, fuseRows, run)))
      return failure();
    writeKernelInfo(kernels, launches);
    return success();
  }
};
} // namespace
