//===- Fuse.cpp - Group ops into loom.fusion regions ----------------------===//
//
// `loom-fuse` walks each function's ops in program order and keeps one open
// group. An op joins the open group when the group has room and the kinds
// allow it (pointwise and injective ops join anything; a group holds at most
// one reduction-kind op, but for the softmax of a cross-entropy's gradient,
// which joins its loss); it need not read the group's values (independent
// chains, such as the updates of several parameters, share one kernel).
// Otherwise the group is closed and the op opens a new one. Contraction and opaque ops are
// groups of their own; `loom.matmul` and `loom.reshape` are host steps (a
// library GEMM, a view) and close the open group.
//
// Invariant that makes the rewrite valid: the ops of a group are consecutive
// in program order once constants are ignored (anything else closes the
// group), so every value a group reads from outside is defined before its
// first op, and every outside user of its results comes after its last op.
// The region is therefore placed where the group's last op was.
//
// Pointwise values read by later regions only are recomputed there instead
// of stored (FuseRecompute.h).
//
// Constants are not grouped: each region that reads one gets its own copy
// (kernels embed them); a constant still read outside any region (by a host
// step or the return) becomes a one-op region of its own.
//
//===----------------------------------------------------------------------===//

#include "FuseRecompute.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "loom-fuse"

namespace loom {
#define GEN_PASS_DEF_FUSEPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// Whether reduction-kind `op` may join a group whose reduction-kind op is
/// `reduction`: the softmax of a cross-entropy's gradient, over the class
/// axis of the same logits, shares the loss's row maxima and sums, which
/// the kernel then computes once (two passes over the logits instead of
/// four; the lowering's identical reductions are merged by CSE).
/// With 16-bit logits the softmax reads their f32 cast, which
/// loom-widen-keep-f32 also puts before the loss.
bool sharesRowStatistics(Operation *op, Operation *reduction) {
  auto softmax = dyn_cast<SoftmaxOp>(op);
  auto loss = dyn_cast_or_null<CrossEntropyOp>(reduction);
  if (!softmax || !loss || softmax.getAxis() != 1)
    return false;
  Value x = softmax.getX();
  if (auto cast = x.getDefiningOp<CastOp>())
    x = cast.getX();
  return x == loss.getLogits();
}

/// Ops the plan runs itself rather than as a generated kernel.
bool isHostOp(Operation *op) {
  return isa<ReshapeOp>(op) || isLibraryCall(op);
}

FusionKind kindOf(Operation *op) {
  if (auto k = dyn_cast<FusionKindOpInterface>(op))
    return k.getFusionKind();
  return FusionKind::Opaque;
}

/// Replaces the ops of `group` (consecutive, in order) by one loom.fusion.
void outlineGroup(ArrayRef<Operation *> group) {
  llvm::SmallPtrSet<Operation *, 16> members(group.begin(), group.end());
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Operation *> constants;
  for (Operation *op : group)
    for (Value v : op->getOperands()) {
      Operation *def = v.getDefiningOp();
      if (def && members.contains(def))
        continue;
      if (def && isa<ConstantOp>(def))
        constants.insert(def);
      else
        inputs.insert(v);
    }
  SmallVector<Value> outputs;
  for (Operation *op : group)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(),
                       [&](Operation *u) { return !members.contains(u); }))
        outputs.push_back(r);

  Operation *last = group.back();
  OpBuilder b(last->getContext());
  b.setInsertionPointAfter(last);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto fusion = FusionOp::create(b, last->getLoc(), resultTypes,
                                 inputs.getArrayRef());
  Block *body = b.createBlock(&fusion.getBody());
  IRMapping map;
  for (Value v : inputs)
    map.map(v, body->addArgument(v.getType(), v.getLoc()));
  b.setInsertionPointToStart(body);
  for (Operation *c : constants)
    b.clone(*c, map);
  for (Operation *op : group)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value v : outputs)
    yielded.push_back(map.lookup(v));
  YieldOp::create(b, last->getLoc(), yielded);

  for (auto [old, now] : llvm::zip(outputs, fusion.getResults()))
    old.replaceUsesWithIf(now, [&](OpOperand &use) {
      return !members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(group))
    op->erase();
}

struct FusePass : loom::impl::FusePassBase<FusePass> {
  using FusePassBase::FusePassBase;

  void runOnOperation() override {
    if (recomputeOps != "cheap" && recomputeOps != "pointwise") {
      getOperation().emitError("loom-fuse: recompute-ops must be cheap or "
                               "pointwise, not '")
          << recomputeOps << "'";
      return signalPassFailure();
    }
    WalkResult walk = getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return WalkResult::advance();
      if (failed(fuseFunction(func)))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult fuseFunction(func::FuncOp func) {
    if (!func.getBody().hasOneBlock())
      return func.emitError("loom-fuse: @")
             << func.getName() << " has more than one block";
    Block &block = func.getBody().front();
    SmallVector<SmallVector<Operation *>> groups;
    SmallVector<Operation *> open;
    Operation *openReduction = nullptr;
    auto close = [&]() {
      if (!open.empty())
        groups.push_back(open);
      open.clear();
      openReduction = nullptr;
    };
    for (Operation &op : block) {
      if (isa<ConstantOp>(op))
        continue;
      if (op.hasTrait<mlir::OpTrait::IsTerminator>() || isHostOp(&op)) {
        close();
        continue;
      }
      if (op.getDialect() != func->getContext()->getLoadedDialect<LoomDialect>())
        return op.emitError("loom-fuse: cannot make a kernel of '")
               << op.getName()
               << "' (inline calls first; only loom ops become kernels)";
      if (isa<FusionOp>(op))
        return op.emitError("loom-fuse: the function is already fused");
      FusionKind kind = kindOf(&op);
      if (kind == FusionKind::Contraction || kind == FusionKind::Opaque) {
        close();
        open.push_back(&op);
        close();
        continue;
      }
      bool isReduction = kind == FusionKind::Reduction;
      bool fits = static_cast<int64_t>(open.size()) < maxOps &&
                  (!isReduction || !openReduction ||
                   sharesRowStatistics(&op, openReduction));
      if (!fits)
        close();
      open.push_back(&op);
      if (isReduction && !openReduction)
        openReduction = &op;
    }
    close();
    if (recomputeMinElements > 0)
      numRecomputed += recomputeAcrossGroups(groups, recomputeMinElements,
                                             recomputeOps == "cheap");

    for (ArrayRef<Operation *> group : groups) {
      numFusedOps += group.size();
      outlineGroup(group);
    }
    numKernels += groups.size();

    // Constants read outside any region: a region of their own; the rest
    // were copied into the regions that read them.
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (!isa<ConstantOp>(op))
        continue;
      if (op.use_empty()) {
        op.erase();
        continue;
      }
      outlineGroup({&op});
      ++numKernels;
    }
    return success();
  }
};

} // namespace
