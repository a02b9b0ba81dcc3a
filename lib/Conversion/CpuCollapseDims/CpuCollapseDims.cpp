//===- CpuCollapseDims.cpp - Elementwise loops over contiguous runs -------===//
//
// loom-cpu-collapse-dims (Passes.td): an all-parallel linalg.generic on
// buffers iterates each run of dimensions that every operand holds
// contiguously (or not at all) as one dimension, so that the innermost loop
// is long enough to vectorize.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/CpuCollapseDims/CpuCollapseDims.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCPUCOLLAPSEDIMSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace {
/// Whether `op` may be collapsed at all: every loop parallel, no index
/// read in its body (its value would have to be recomputed from the
/// collapsed one), every operand a static buffer in the plain row-major
/// layout (a run of its dimensions is then one contiguous run of
/// elements), every indexing map a projected permutation.
bool collapsible(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumLoops() < 2 ||
      op.getNumParallelLoops() != op.getNumLoops())
    return false;
  if (!op.getBody()->getOps<linalg::IndexOp>().empty())
    return false;
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<MemRefType>(v.getType());
    if (!t || !t.hasStaticShape() || !t.getLayout().isIdentity())
      return false;
  }
  return llvm::all_of(op.getIndexingMapsArray(), [](AffineMap m) {
    return m.isProjectedPermutation(/*allowZeroInResults=*/false);
  });
}

/// The loop dimensions of `op` in maximal runs of consecutive dimensions
/// that each indexing map holds as a consecutive run in the same order, or
/// does not hold at all; one entry per run, in order.
SmallVector<ReassociationIndices> runs(linalg::GenericOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0, n = op.getNumLoops(); d < n; ++d) {
    if (!groups.empty()) {
      ReassociationIndices grown = groups.back();
      grown.push_back(d);
      if (linalg::areDimSequencesPreserved(maps, {grown})) {
        groups.back() = std::move(grown);
        continue;
      }
    }
    groups.push_back({d});
  }
  return groups;
}

struct CpuCollapseDims
    : loom::impl::LoomCpuCollapseDimsPassBase<CpuCollapseDims> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) {
      if (collapsible(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : ops) {
      SmallVector<ReassociationIndices> groups = runs(op);
      if (groups.size() == op.getNumLoops())
        continue; // nothing to collapse
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::CollapseResult> collapsed =
          linalg::collapseOpIterationDims(op, groups, rewriter);
      if (failed(collapsed))
        continue; // left as it is: only slower
      rewriter.replaceOp(op, collapsed->results);
    }
  }
};
} // namespace
