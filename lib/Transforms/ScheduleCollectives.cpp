//===- ScheduleCollectives.cpp - Issue collectives early ------------------===//
//
// After inlining, the data-parallel reductions that loom-optimizer put after
// the call to @forward_backward sit after the whole backward. Each is moved
// up to just after its operand's definition (hoisting the reshapes and pads
// between them). Their order may change; every rank runs the same plan, so
// every rank issues them in the same new order.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {
#define GEN_PASS_DEF_SCHEDULECOLLECTIVESPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The earliest point `op` may move to: after the last of its operands'
/// definitions in its block (null: the block's start).
Operation *lowestDefinition(Operation *op) {
  Operation *last = nullptr;
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != op->getBlock())
      continue;
    if (!last || last->isBeforeInBlock(def))
      last = def;
  }
  return last;
}

/// Moves `op` right after `after` (or to the block's start), if that is
/// earlier than where it is.
bool moveUp(Operation *op, Operation *after) {
  Block *block = op->getBlock();
  if (after) {
    if (after == op->getPrevNode() || !after->isBeforeInBlock(op))
      return false;
    op->moveAfter(after);
    return true;
  }
  if (&block->front() == op)
    return false;
  op->moveBefore(&block->front());
  return true;
}

/// Hoists the view ops (reshape, pad) that feed `op` and nothing else, so
/// that `op` can follow its real producer.
void hoistFeeders(Operation *op) {
  for (Value v : op->getOperands()) {
    Operation *def = v.getDefiningOp();
    if (!def || def->getBlock() != op->getBlock() ||
        !isa<ReshapeOp, PadOp>(def) || !def->hasOneUse())
      continue;
    hoistFeeders(def);
    moveUp(def, lowestDefinition(def));
  }
}

struct ScheduleCollectivesPass
    : loom::impl::ScheduleCollectivesPassBase<ScheduleCollectivesPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<Operation *> collectives;
      for (Operation &op : func.getBody().front())
        if (isCollective(&op))
          collectives.push_back(&op);
      for (Operation *op : collectives) {
        hoistFeeders(op);
        if (moveUp(op, lowestDefinition(op)))
          ++numMoved;
      }
    }
  }
};

} // namespace
