//===- CountLoomOps.cpp - An example pass plugin for loom-opt -------------===//
//
// A user's own pass, built outside Loom's libraries and loaded with
// `loom-opt --load-pass-plugin=LoomExamplePlugin.so`. It asks ops through
// Loom's interfaces (never by name) and reports what it found as a remark.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

using namespace mlir;

namespace {
struct CountLoomOpsPass
    : public PassWrapper<CountLoomOpsPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CountLoomOpsPass)

  StringRef getArgument() const final { return "example-count-loom-ops"; }
  StringRef getDescription() const final {
    return "Reports how many loom ops, contractions and FLOPs a module has";
  }

  void runOnOperation() override {
    int64_t ops = 0, contractions = 0, flops = 0;
    getOperation().walk([&](Operation *op) {
      if (auto kind = dyn_cast<loom::FusionKindOpInterface>(op)) {
        ++ops;
        if (kind.getFusionKind() == loom::FusionKind::Contraction)
          ++contractions;
      }
      if (auto cost = dyn_cast<loom::CostOpInterface>(op))
        flops += cost.getFlopCount();
    });
    getOperation().emitRemark() << ops << " loom ops, " << contractions
                                << " contractions, " << flops << " FLOPs";
  }
};
} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "LoomExamplePlugin", LLVM_VERSION_STRING,
          []() { PassRegistration<CountLoomOpsPass>(); }};
}
