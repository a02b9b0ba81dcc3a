//===- PlanMemory.cpp - Pack an entry point's tensors into one arena ------===//
//
// `loom-plan-memory` runs on the output of `loom-fuse`: a function whose body
// is a sequence of steps (loom.fusion kernels, loom.matmul GEMMs, loom.reshape
// views) ending in func.return. Each tensor value gets a live range [def,
// last use] in step order: arguments are defined before step 0, returned
// values live past the last step, and a reshape is a view that shares its
// operand's bytes (the two ranges are merged). Values are then placed largest
// first, each at the lowest 64-byte-aligned offset where it overlaps no value
// whose range intersects its own (first fit over the placed intervals).
//
// Invariant the runtime relies on: a step's inputs are live at that step and
// its outputs are defined there, so a kernel's or GEMM's outputs never share
// bytes with its inputs, with one exception, the in-place state update: a
// param, optimizer state or buffer argument and its new value (the result of
// the same name) share their bytes when the new value is made by the
// argument's last reader, a kernel that reads the argument only on the way
// to the new value (pointwise ops over its shape, one reader per result; see
// pointwiseFrom). Every element is then read before it is overwritten, by
// the same loop iteration (or GPU thread), and the runtime keeps the state
// in the entry's arena between steps instead of copying it in and out.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/EquivalenceClasses.h"

#include <algorithm>

#define DEBUG_TYPE "loom-plan-memory"

namespace loom {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr int64_t kAlignment = 64;

int64_t alignUp(int64_t v) { return (v + kAlignment - 1) / kAlignment * kAlignment; }

/// Bytes of a dense row-major tensor (i1 takes a byte per element).
int64_t byteSize(Type type) {
  auto t = cast<RankedTensorType>(type);
  int64_t bits = t.getElementTypeBitWidth();
  return t.getNumElements() * std::max<int64_t>(1, (bits + 7) / 8);
}

struct Interval {
  Value root;
  int64_t begin = 0, end = 0, size = 0, offset = -1;
};

/// The name of a param, optimizer state or buffer argument, or "".
StringRef stateName(func::FuncOp func, unsigned arg) {
  for (StringRef attr : {kParamAttr, kOptStateAttr, kBufferAttr})
    if (auto n = func.getArgAttrOfType<StringAttr>(arg, attr))
      return n.getValue();
  return "";
}

/// Whether `fusion` may write its result `result` over its input `arg`:
/// inside the region, every op that reads `arg`, and every op that reads
/// what those compute, up to the op that makes `result`, is pointwise with
/// one result of `arg`'s shape, and each value on the way has one user (so
/// nothing else reads it and it fuses into the next op). Then `arg` is read
/// only on the way to `result`: each element before the same element of
/// `result` is written, by the loop iteration (GPU thread) that writes it.
/// What is computed from `result` afterwards reads the new value.
bool pointwiseFrom(FusionOp fusion, Value arg, Value result) {
  Block &body = fusion.getBody().front();
  auto shape = cast<RankedTensorType>(arg.getType()).getShape();
  Value made = body.getTerminator()->getOperand(
      cast<OpResult>(result).getResultNumber());
  SmallVector<Value> work;
  for (auto [in, blockArg] :
       llvm::zip_equal(fusion.getInputs(), body.getArguments()))
    if (in == arg)
      work.push_back(blockArg);
  bool reaches = false;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      auto kind = dyn_cast<FusionKindOpInterface>(user);
      if (!kind || kind.getFusionKind() != FusionKind::Pointwise ||
          user->getNumResults() != 1 ||
          cast<RankedTensorType>(user->getResult(0).getType()).getShape() !=
              shape)
        return false; // also a yield of the argument or of a partial value
      Value out = user->getResult(0);
      if (out == made) {
        reaches = true;
        continue;
      }
      if (!out.hasOneUse())
        return false;
      work.push_back(out);
    }
  }
  return reaches;
}

struct PlanMemoryPass : loom::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      if (failed(planFunction(func)))
        return signalPassFailure();
    }
  }

  /// Gives each state argument and its new value one storage where the
  /// update can be made in place (see the file comment).
  void unionStateUpdates(func::FuncOp func,
                         llvm::DenseMap<Operation *, int64_t> &stepOf,
                         llvm::EquivalenceClasses<Value> &storage) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    llvm::StringMap<BlockArgument> args;
    for (BlockArgument a : func.getArguments())
      if (StringRef name = stateName(func, a.getArgNumber()); !name.empty())
        args[name] = a;
    for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
      StringAttr name = func.getResultAttrOfType<StringAttr>(i, kOutputAttr);
      if (!name)
        name = func.getResultAttrOfType<StringAttr>(i, kBufferAttr);
      auto it = name ? args.find(name.getValue()) : args.end();
      auto fusion = result.getDefiningOp<FusionOp>();
      if (it == args.end() || !fusion || !result.hasOneUse())
        continue;
      BlockArgument arg = it->second;
      // The new value alone in its storage; the argument's storage (it and
      // its views) read last by the fusion, and by nothing else there.
      if (arg.getType() != result.getType() ||
          std::next(storage.findLeader(result)) != storage.member_end())
        continue;
      int64_t at = stepOf.lookup(fusion);
      bool readBefore = true;
      for (auto m = storage.findLeader(arg); m != storage.member_end(); ++m)
        for (Operation *user : (*m).getUsers())
          if (stepOf.lookup(user) > at ||
              (user == fusion.getOperation() && *m != arg))
            readBefore = false;
      if (!readBefore || !pointwiseFrom(fusion, arg, result))
        continue;
      storage.unionSets(arg, result);
      ++numInPlace;
    }
  }

  LogicalResult planFunction(func::FuncOp func) {
    Block &block = func.getBody().front();
    // Step index of every op; arguments are defined at -1.
    llvm::DenseMap<Operation *, int64_t> stepOf;
    int64_t numSteps = 0;
    for (Operation &op : block) {
      if (!isa<FusionOp, ReshapeOp, func::ReturnOp>(op) && !isLibraryCall(&op))
        return op.emitError("loom-plan-memory: '")
               << op.getName()
               << "' is not a step of a fused function (run loom-fuse "
                  "first)";
      stepOf[&op] = numSteps++;
    }

    // Views share their operand's storage: one class per storage.
    llvm::EquivalenceClasses<Value> storage;
    SmallVector<Value> values(func.getArguments().begin(),
                              func.getArguments().end());
    for (Operation &op : block)
      for (Value r : op.getResults())
        values.push_back(r);
    for (Value v : values)
      storage.insert(v);
    for (auto reshape : block.getOps<ReshapeOp>())
      storage.unionSets(reshape.getX(), reshape.getResult());
    unionStateUpdates(func, stepOf, storage);

    llvm::DenseMap<Value, Interval> byRoot;
    for (Value v : values) {
      Value root = storage.getLeaderValue(v);
      Interval &iv = byRoot[root];
      if (!iv.root) {
        iv.root = root;
        iv.begin = numSteps;
        iv.end = -1;
        iv.size = byteSize(root.getType());
      }
      int64_t def = isa<BlockArgument>(v) ? -1 : stepOf[v.getDefiningOp()];
      iv.begin = std::min(iv.begin, def);
      iv.end = std::max(iv.end, def);
      for (Operation *user : v.getUsers()) {
        int64_t at = isa<func::ReturnOp>(user) ? numSteps : stepOf[user];
        iv.end = std::max(iv.end, at);
      }
    }

    // In program order, then by size: values of the same size and start
    // keep their program order, so that the plan does not depend on where
    // the values happen to live in memory (byRoot is keyed by pointer).
    SmallVector<Interval *> order;
    llvm::SmallPtrSet<Interval *, 32> seen;
    for (Value v : values) {
      Interval *iv = &byRoot[storage.getLeaderValue(v)];
      if (seen.insert(iv).second)
        order.push_back(iv);
    }
    llvm::stable_sort(order, [](const Interval *a, const Interval *b) {
      if (a->size != b->size)
        return a->size > b->size;
      return a->begin < b->begin;
    });
    SmallVector<Interval *> placed;
    int64_t arena = 0;
    for (Interval *iv : order) {
      // Byte ranges taken by placed values live at the same time.
      SmallVector<std::pair<int64_t, int64_t>> taken;
      for (Interval *p : placed)
        if (!(p->end < iv->begin || iv->end < p->begin))
          taken.push_back({p->offset, p->offset + p->size});
      llvm::sort(taken);
      int64_t offset = 0;
      for (auto [lo, hi] : taken) {
        if (offset + iv->size <= lo)
          break;
        offset = std::max(offset, alignUp(hi));
      }
      iv->offset = offset;
      arena = std::max(arena, alignUp(offset + iv->size));
      placed.push_back(iv);
    }

    auto offsetOf = [&](Value v) {
      return byRoot[storage.getLeaderValue(v)].offset;
    };
    OpBuilder b(func.getContext());
    for (BlockArgument arg : func.getArguments())
      func.setArgAttr(arg.getArgNumber(), "loom.offset",
                      b.getI64IntegerAttr(offsetOf(arg)));
    for (Operation &op : block) {
      if (op.getNumResults() == 0)
        continue;
      SmallVector<int64_t> offsets;
      for (Value r : op.getResults())
        offsets.push_back(offsetOf(r));
      op.setAttr("loom.offsets", b.getDenseI64ArrayAttr(offsets));
    }
    func->setAttr("loom.arena_bytes", b.getI64IntegerAttr(arena));
    arenaBytes += arena;
    return success();
  }
};

} // namespace
