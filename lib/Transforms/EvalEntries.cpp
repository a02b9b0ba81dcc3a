//===- EvalEntries.cpp - Evaluation entries in eval mode ------------------===//
//
// `loom-eval-entries`: in the functions the runtime evaluates with
// (@predict, @forward), dropout is the identity, as in PyTorch's eval mode;
// a seed argument nothing reads any more goes.
//
//===----------------------------------------------------------------------===//

#include "PassHelpers.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace loom {
#define GEN_PASS_DEF_EVALENTRIESPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct EvalEntriesPass : loom::impl::EvalEntriesPassBase<EvalEntriesPass> {
  using EvalEntriesPassBase::EvalEntriesPassBase;

  void runOnOperation() override {
    SmallVector<std::string> names(entries.begin(), entries.end());
    if (names.empty())
      names = {"predict", "forward"};
    for (const std::string &name : names)
      if (auto func = getOperation().lookupSymbol<func::FuncOp>(name))
        if (!func.isExternal())
          evalMode(func);
  }

  void evalMode(func::FuncOp func) {
    int64_t dropouts = removeDropouts(func);
    numRemoved += dropouts;
    // Fused attention draws its probabilities' dropout itself.
    SmallVector<AttentionOp> attentions;
    func.walk([&](AttentionOp a) {
      if (a.getSeed())
        attentions.push_back(a);
    });
    for (AttentionOp a : attentions) {
      a.getSeedMutable().clear();
      a.setDropout(APFloat(0.0f));
      a.setStream(0);
      ++numRemoved;
    }
    if (dropouts == 0 && attentions.empty())
      return;
    // The ops only the dropouts read (the ones of a drop-path mask).
    if (failed(cleanUpAfterDropout(func))) {
      func.emitError() << "loom-eval-entries: cannot remove the unused seed "
                          "argument";
      return signalPassFailure();
    }
  }
};

} // namespace
