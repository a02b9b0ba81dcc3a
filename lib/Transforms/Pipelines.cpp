//===- Pipelines.cpp - Loom's pass pipelines ------------------------------===//

#include "loom/Transforms/Pipelines.h"

#include "loom/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

llvm::ArrayRef<llvm::StringRef> loom::trainingPhases() {
  static const llvm::StringRef phases[] = {"loss", "autodiff", "optimizer"};
  return phases;
}

void loom::buildTrainingPipeline(OpPassManager &pm,
                                 const TrainingOptions &options) {
  AttachLossPassOptions loss;
  loss.loss = options.loss;
  loss.labels = options.labels;
  loss.output = options.output;
  loss.reduction = options.reduction;
  loss.classAxis = options.classAxis;
  loss.ignoreIndex = options.ignoreIndex;
  loss.labelsDtype = options.labelsDtype;
  loss.keepPredict = options.keepPredict;
  pm.addPass(createAttachLossPass(loss));
  pm.addPass(createBatchNormTrainPass());
  if (options.stopAfter == "loss")
    return;
  pm.addPass(createAutodiffPass());
  pm.addPass(createCSEPass());
  if (options.stopAfter == "autodiff")
    return;
  OptimizerPassOptions opt;
  opt.optimizer = options.optimizer;
  opt.lr = options.lr;
  opt.momentum = options.momentum;
  opt.beta1 = options.beta1;
  opt.beta2 = options.beta2;
  opt.eps = options.eps;
  opt.weightDecay = options.weightDecay;
  opt.clipNorm = options.clipNorm;
  opt.schedule = options.schedule;
  opt.warmupSteps = options.warmupSteps;
  opt.totalSteps = options.totalSteps;
  opt.minLrRatio = options.minLrRatio;
  pm.addPass(createOptimizerPass(opt));
}

llvm::ArrayRef<llvm::StringRef> loom::codegenPhases() {
  static const llvm::StringRef phases[] = {"fuse", "plan-memory"};
  return phases;
}

void loom::buildCodegenPreparationPipeline(OpPassManager &pm,
                                           llvm::StringRef stopAfter) {
  pm.addPass(createInlinerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createConvToGemmPass());
  pm.addPass(createFusePass());
  if (stopAfter == "fuse")
    return;
  pm.addPass(createPlanMemoryPass());
}

void loom::registerTrainingPipeline() {
  PassPipelineRegistration<>(
      "loom-prepare-codegen",
      "Inline, CSE, loom-conv-to-gemm, loom-fuse and loom-plan-memory "
      "(loomc --target)",
      [](OpPassManager &pm) { buildCodegenPreparationPipeline(pm); });
  PassPipelineRegistration<TrainingOptions>(
      "loom-training",
      "Attach a loss, differentiate, add the optimizer (loomc --train)",
      buildTrainingPipeline);
}
