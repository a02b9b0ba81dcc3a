//===- GpuKernelMapper.h - loom-map-kernels-to-gpu's mapper ---------------===//
//
// Private to lib/Codegen: the class that maps one bufferized kernel onto GPU
// launches (MapKernelsToGpu.cpp: one launch per linalg op, a strategy per
// shape; GpuFusedLaunches.cpp: a whole kernel of row operations as one launch,
// a block per row). docs/codegen.md, "CUDA".
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_CODEGEN_GPUKERNELMAPPER_H
#define LOOM_LIB_CODEGEN_GPUKERNELMAPPER_H

#include "loom/Codegen/KernelInfo.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace loom::gpumap {

using namespace mlir;

constexpr int64_t kBlock = 256;       // threads per block, most launches
constexpr int64_t kReduceBlock = 1024; // block-reduce
constexpr int64_t kMaxGrid = 8192;     // grid-stride loops cover the rest
constexpr int64_t kWarp = 32;
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t gridFor(int64_t work, int64_t perBlock) {
  return std::clamp<int64_t>(ceilDiv(work, perBlock), 1, kMaxGrid);
}

/// The reduction a generic's body performs, when it has the shape
/// `yield combine(out, f(inputs))` for an associative, commutative `combine`
/// with a neutral element: then partial results can be combined in any
/// grouping (floating-point sums round differently from a sequential loop,
/// within the usual tolerance).
struct Combiner {
  Operation *op = nullptr;
  TypedAttr neutral;
};
std::optional<Combiner> findCombiner(linalg::GenericOp g);

/// Whether nothing in the kernel writes `buffer` (or a view of it): a load
/// from it can be repeated in every launch that needs the value (the dropout
/// seed, a step count).
bool isReadOnly(Value buffer);

/// What mapGeneric reads off a generic before it picks a strategy.
struct GenericShape {
  linalg::GenericOp g;
  SmallVector<utils::IteratorType> iters;
  SmallVector<AffineMap> maps;
  SmallVector<unsigned> par, red; // loop dimensions of each kind
  SmallVector<int64_t> parRanges, redRanges;
  int64_t numPar = 1, numRed = 1;
  unsigned numIns = 0;
  SmallVector<Value> operands;
  std::optional<Combiner> combiner; // for trailing reductions
  /// Puts parallel and reduction indices back in loop-dimension order.
  SmallVector<Value> merge(ArrayRef<Value> p, ArrayRef<Value> r) const {
    SmallVector<Value> ivs(iters.size());
    for (auto [d, v] : llvm::zip(par, p))
      ivs[d] = v;
    for (auto [d, v] : llvm::zip(red, r))
      ivs[d] = v;
    return ivs;
  }
};

/// Reads `g`'s loops off it. std::nullopt where no strategy but `serial`
/// applies (a dynamic loop range, an output indexed by a reduction
/// dimension); a shape with `numPar * numRed == 0` has nothing to compute.
std::optional<GenericShape> analyzeGeneric(linalg::GenericOp g);

/// The shapes of a kernel's computing ops when there are at least two and
/// every one is a linalg.generic with static, non-empty loops: what the
/// strategies that map a whole kernel as one launch start from.
std::optional<std::vector<GenericShape>>
genericShapes(ArrayRef<Operation *> ops);

/// Whether operand `i` of a pointwise generic is a contiguous 16/32/64-bit
/// buffer indexed by the identity: it moves in 128-bit vectors.
bool isContiguousOperand(const GenericShape &s, unsigned i);
/// Elements per thread and iteration of a pointwise generic: 128 bits of
/// its widest contiguous operand where every output is contiguous and the
/// element count allows, else 1.
int64_t pointwiseWidth(const GenericShape &s);

/// Builds the GPU launches of one bufferized kernel: one launch for the
/// whole kernel where its ops work row by row (`fuseRows`, GpuFusedLaunches.cpp),
/// otherwise one gpu.func per computing op.
class KernelMapper {
public:
  KernelMapper(func::FuncOp kernel, gpu::GPUModuleOp gpuModule,
               KernelInfo &info, bool fuseRows)
      : kernel(kernel), gpuModule(gpuModule), info(info), fuseRows(fuseRows),
        b(kernel.getContext()) {}

  LogicalResult run();

private:
  func::FuncOp kernel;
  gpu::GPUModuleOp gpuModule;
  KernelInfo &info;
  bool fuseRows;
  OpBuilder b;
  /// The kernel's buffers in parameter order: its arguments, then its
  /// temporaries.
  SmallVector<Value> buffers;
  SmallVector<Type> bufferTypes;
  unsigned numLaunches = 0;
  /// Reductions whose output was only filled with a scalar just before: the
  /// scalar is their initial value and the fill needs no launch.
  DenseMap<Operation *, Value> foldedInit;
  llvm::SmallPtrSet<Operation *, 8> foldedFills;

  void foldFillsIntoReductions();

  LogicalResult collectScratch();
  /// The computing ops of the kernel body, in order (not the fills folded
  /// into reductions, not views or constants).
  SmallVector<Operation *> computingOps();
  /// The ops of the kernel body that `ops` need cloned into their launch
  /// (views, constants, index arithmetic), in body order.
  FailureOr<SmallVector<Operation *>> dependencies(ArrayRef<Operation *> ops);
  FailureOr<gpu::GPUFuncOp> beginLaunch(ArrayRef<Operation *> ops,
                                        IRMapping &map, StringRef strategy,
                                        std::array<int64_t, 3> grid,
                                        std::array<int64_t, 3> block,
                                        TypeRange workgroup = {});
  /// GpuFusedLaunches.cpp: maps the whole kernel as one `block-row` launch when
  /// every op works within rows of a common leading shape; false when it
  /// does not (nothing built then).
  FailureOr<bool> mapFusedRows(ArrayRef<Operation *> ops,
                               std::vector<GenericShape> shapes);
  /// GpuFusedLaunches.cpp: maps a kernel of pointwise ops that touch what
  /// they write element by element (a multi-tensor optimizer update) as one
  /// `pointwise-group` launch; false when it is not such a kernel.
  FailureOr<bool> mapPointwiseGroup(ArrayRef<Operation *> ops,
                                    std::vector<GenericShape> shapes);
  /// The grid-stride loop of a pointwise generic, `width` elements per
  /// iteration; `b` continues after it.
  void emitPointwise(const GenericShape &s, IRMapping &map, int64_t width);
  /// The generic's body at one point `ivs` of its (parallel) loops: inputs
  /// loaded, outputs stored.
  void computePoint(const GenericShape &s, IRMapping &map,
                    ArrayRef<Value> ivs);
  /// The outputs at the parallel point `pIvs`, the reduction loops run in
  /// order by this thread from the outputs' initial values.
  void reducePointSerially(const GenericShape &s, IRMapping &map,
                           ArrayRef<Value> pIvs);
  /// Output `i`'s old value at `ivs`, or poison where the body does not
  /// read it.
  Value outputArg(const GenericShape &s, IRMapping &map, unsigned i,
                  ArrayRef<Value> ivs);
  LogicalResult mapGeneric(linalg::GenericOp g);
  // One function per strategy (docs/codegen.md, "CUDA").
  LogicalResult mapPointwise(const GenericShape &s);
  LogicalResult mapBlockReduce(const GenericShape &s);
  LogicalResult mapWarpRow(const GenericShape &s);
  LogicalResult mapThreadRow(const GenericShape &s);
  /// This thread's fold of the row at `pIvs`: the reduction elements from
  /// `first` on, every `step`-th, starting from the neutral element.
  Value foldRow(const GenericShape &s, IRMapping &map, ArrayRef<Value> pIvs,
                Value first, Value step);
  /// Where `isLeader`: output[pIvs] = combine(initial value, total); `b`
  /// continues after that store.
  void storeFromLeader(const GenericShape &s, IRMapping &map, Value isLeader,
                       ArrayRef<Value> pIvs, Value total);
  SmallVector<Value> zeros(Location loc, size_t n) {
    return SmallVector<Value>(n, index(loc, 0));
  }
  LogicalResult mapSerial(Operation *op);
  LogicalResult mapForall(scf::ForallOp f);

  // IR helpers, building at `b`'s insertion point.
  Value index(Location loc, int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }
  SmallVector<Value> delinearize(Location loc, Value linear,
                                 ArrayRef<int64_t> ranges);
  SmallVector<Value> operandIndices(Location loc, AffineMap map,
                                    ArrayRef<Value> ivs);
  Value load(Location loc, Value memref, AffineMap map, ArrayRef<Value> ivs);
  SmallVector<Value> evalBody(Location loc, linalg::GenericOp g,
                              ArrayRef<Value> args, ArrayRef<Value> ivs,
                              IRMapping &outer);
  Value combine(Location loc, const Combiner &c, Value x, Value y) {
    IRMapping m;
    m.map(c.op->getOperand(0), x);
    m.map(c.op->getOperand(1), y);
    return b.clone(*c.op, m)->getResult(0);
  }
  Value warpReduce(Location loc, const Combiner &c, Value v);
  /// `for (i = blockIdx.x * blockDim.x + threadIdx.x; i < count;
  ///      i += gridDim.x * blockDim.x)`, with `b` inside the loop.
  scf::ForOp gridStrideLoop(Location loc, int64_t count) {
    Value bid = gpu::BlockIdOp::create(b, loc, gpu::Dimension::x);
    Value bdim = gpu::BlockDimOp::create(b, loc, gpu::Dimension::x);
    Value tid = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
    Value gdim = gpu::GridDimOp::create(b, loc, gpu::Dimension::x);
    Value start = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, bid, bdim), tid);
    Value stride = arith::MulIOp::create(b, loc, gdim, bdim);
    auto loop = scf::ForOp::create(b, loc, start, index(loc, count), stride);
    b.setInsertionPointToStart(loop.getBody());
    return loop;
  }
};


} // namespace loom::gpumap

#endif // LOOM_LIB_CODEGEN_GPUKERNELMAPPER_H
