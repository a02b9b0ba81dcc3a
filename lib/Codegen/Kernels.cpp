//===- Kernels.cpp - Upstream pipelines run by the codegen passes ---------===//

#include "loom/Codegen/Kernels.h"

#include "loom/Conversion/CpuCollapseDims/CpuCollapseDims.h"
#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"
#include "loom/Conversion/CpuReductionLoops/CpuReductionLoops.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

using namespace mlir;
using namespace loom;

namespace {
/// The upstream passes of the kernel pipelines, registered once so that a
/// pipeline can be spelled as text (the same text `loom-opt` accepts, inside
/// `builtin.module(...)`).
void registerKernelPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerTransformsPasses();
    bufferization::registerBufferizationPasses();
    bufferization::registerBufferizationPipelines();
    registerLinalgPasses();
    memref::registerMemRefPasses();
    registerSCFPasses();
    registerConversionPasses();
    registerLoomCpuCollapseDimsPass();
    registerLoomCpuParallelLoopsPass();
    registerLoomCpuReductionLoopsPass();
    registerGPUPasses();
  });
}

LogicalResult parseKernelPipeline(StringRef pipeline, OpPassManager &pm,
                                  std::string &errors) {
  registerKernelPasses();
  llvm::raw_string_ostream os(errors);
  return parsePassPipeline(pipeline, pm, os);
}
} // namespace

LogicalResult loom::runKernelPipeline(ModuleOp module, StringRef pipeline,
                                      PipelineRunner run) {
  std::string errors;
  PassManager top(module.getContext());
  OpPassManager nested(ModuleOp::getOperationName());
  OpPassManager &pm = run ? nested : top;
  if (failed(parseKernelPipeline(pipeline, pm, errors)))
    return module.emitError("loom codegen: bad pipeline: ") << errors;
  return run ? run(pm, module) : top.run(module);
}

void loom::addKernelPipelineDialects(StringRef pipeline,
                                     DialectRegistry &registry) {
  std::string errors;
  OpPassManager pm(ModuleOp::getOperationName());
  if (succeeded(parseKernelPipeline(pipeline, pm, errors)))
    pm.getDependentDialects(registry);
}

ModuleOp loom::kernelModuleOrError(ModuleOp module, StringRef pass,
                                   StringRef prerequisite) {
  ModuleOp kernels = getKernelModule(module);
  if (!kernels)
    module.emitError() << pass << ": no kernel module (run " << prerequisite
                       << " first)";
  return kernels;
}
