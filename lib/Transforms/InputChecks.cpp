//===- InputChecks.cpp - The ranges of integer inputs that index tensors --===//
//
// `loom-input-checks` (Passes.td): each integer `loom.input` argument read
// as indices (gather, scatter_add) or as class labels (cross-entropy, the
// fused LM head) gets `loom.input_checks`, the values those ops accept;
// the plan passes them to the runtime, which checks the input on the host
// before the step (the kernels clamp out-of-range indices, so nothing
// else would notice). Invariant: the IR's computation is unchanged; only
// argument attributes are added.
//
//===----------------------------------------------------------------------===//

#include "loom/Transforms/InputChecks.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <optional>
#include <string>

namespace loom {
#define GEN_PASS_DEF_INPUTCHECKSPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct Range {
  int64_t min, max; ///< [min, max)
  std::optional<int64_t> ignore;
  std::string op;         ///< e.g. "gather '/wte/Gather'"
  Operation *at = nullptr; ///< the op reading the input
};

int64_t dimOf(Value v, int64_t d) {
  return cast<RankedTensorType>(v.getType()).getDimSize(d);
}

std::string describe(Operation *op) {
  std::string name = nodeName(op->getLoc());
  std::string kind = op->getName().stripDialect().str();
  return name.empty() ? kind : kind + " '" + name + "'";
}

Range labelsRange(Operation *op, int64_t classes,
                  std::optional<int64_t> ignore) {
  return Range{0, classes, ignore, describe(op), op};
}

/// The values `op` accepts in its operand `use`, when it reads it as
/// indices or labels.
std::optional<Range> rangeOf(OpOperand &use) {
  Operation *op = use.getOwner();
  Value v = use.get();
  if (auto g = dyn_cast<GatherOp>(op)) {
    if (v != g.getIndices())
      return std::nullopt;
    int64_t n = dimOf(g.getTable(), g.getAxis());
    return Range{-n, n, std::nullopt, describe(op), op};
  }
  if (auto s = dyn_cast<ScatterAddOp>(op)) {
    if (v != s.getIndices())
      return std::nullopt;
    int64_t n = dimOf(s.getResult(), s.getAxis());
    return Range{-n, n, std::nullopt, describe(op), op};
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    if (v == ce.getLabels())
      return labelsRange(op, dimOf(ce.getLogits(), 1), ce.getIgnoreIndex());
  // The fused LM head and its gradient: the classes are w's output rows or
  // columns.
  auto head = [&](auto h) -> std::optional<Range> {
    if (v != h.getLabels())
      return std::nullopt;
    return labelsRange(op, dimOf(h.getW(), h.getTransposeW() ? 0 : 1),
                       h.getIgnoreIndex());
  };
  if (auto h = dyn_cast<LinearCrossEntropyOp>(op))
    return head(h);
  if (auto h = dyn_cast<LinearCrossEntropyGradOp>(op))
    return head(h);
  return std::nullopt;
}

/// Every range an op reading `arg` (directly or through reshapes) puts on
/// its values; one per distinct range.
SmallVector<Range> rangesOf(BlockArgument arg) {
  SmallVector<Range> ranges;
  SmallVector<Value> values{arg};
  while (!values.empty()) {
    Value v = values.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      if (auto r = dyn_cast<ReshapeOp>(use.getOwner())) {
        values.push_back(r.getResult());
        continue;
      }
      std::optional<Range> range = rangeOf(use);
      if (!range)
        continue;
      // One per distinct range, named by the first op of the block that
      // reads it (the forward's gather rather than its gradient's scatter).
      auto *same = llvm::find_if(ranges, [&](const Range &o) {
        return o.min == range->min && o.max == range->max &&
               o.ignore == range->ignore;
      });
      if (same == ranges.end())
        ranges.push_back(*range);
      else if (range->at->getBlock() == same->at->getBlock() &&
               range->at->isBeforeInBlock(same->at))
        *same = *range;
    }
  }
  // In the order of their ops (use lists run backwards).
  llvm::stable_sort(ranges, [](const Range &a, const Range &b) {
    return a.at->getBlock() == b.at->getBlock() && a.at->isBeforeInBlock(b.at);
  });
  return ranges;
}

struct InputChecksPass
    : loom::impl::InputChecksPassBase<InputChecksPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      Builder b(func.getContext());
      for (BlockArgument arg : func.getArguments()) {
        unsigned i = arg.getArgNumber();
        auto type = dyn_cast<RankedTensorType>(arg.getType());
        if (!type || !type.getElementType().isInteger() ||
            !func.getArgAttr(i, kInputAttr))
          continue;
        SmallVector<Attribute> checks;
        for (const Range &r : rangesOf(arg)) {
          SmallVector<NamedAttribute> fields{
              b.getNamedAttr("min", b.getI64IntegerAttr(r.min)),
              b.getNamedAttr("max", b.getI64IntegerAttr(r.max)),
              b.getNamedAttr("op", b.getStringAttr(r.op))};
          if (r.ignore)
            fields.push_back(
                b.getNamedAttr("ignore", b.getI64IntegerAttr(*r.ignore)));
          checks.push_back(b.getDictionaryAttr(fields));
        }
        if (checks.empty())
          continue;
        func.setArgAttr(i, kInputChecksAttr, b.getArrayAttr(checks));
        numChecks += checks.size();
      }
    });
  }
};

} // namespace
