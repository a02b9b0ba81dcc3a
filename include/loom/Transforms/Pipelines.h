//===- Pipelines.h - Loom's pass pipelines ----------------------*- C++ -*-===//
//
// Pipelines are built here only; loomc, loom-opt (`--loom-training`) and the
// Python bindings all call buildTrainingPipeline, so there is one way to run
// them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PIPELINES_H
#define LOOM_TRANSFORMS_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace loom {

struct TrainingOptions : public mlir::PassPipelineOptions<TrainingOptions> {
  Option<std::string> loss{*this, "loss",
                           llvm::cl::desc("cross_entropy, mse or auto"),
                           llvm::cl::init("auto")};
  Option<std::string> labels{*this, "labels",
                             llvm::cl::desc("Name of the labels input"),
                             llvm::cl::init("labels")};
  Option<std::string> output{*this, "output",
                             llvm::cl::desc("Model output the loss reads"),
                             llvm::cl::init("")};
  Option<std::string> reduction{*this, "reduction",
                                llvm::cl::desc("Loss reduction: mean or sum"),
                                llvm::cl::init("mean")};
  Option<int64_t> classAxis{*this, "class-axis",
                            llvm::cl::desc("Cross-entropy class dimension: -1 or 1"),
                            llvm::cl::init(-1)};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Cross-entropy label to ignore (-100: PyTorch's)"),
      llvm::cl::init(-100)};
  Option<std::string> labelsDtype{
      *this, "labels-dtype",
      llvm::cl::desc("Element type of cross-entropy labels: i64 or i32"),
      llvm::cl::init("i64")};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("sgd, momentum, nesterov, adam, adamw, adafactor"),
      llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Peak learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.9)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(0.0)};
  Option<double> clipNorm{*this, "clip-norm",
                          llvm::cl::desc("Global-norm clipping (0: off)"),
                          llvm::cl::init(0.0)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("constant, warmup, cosine or warmup-cosine"),
      llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("Warmup steps"),
                              llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps",
                             llvm::cl::desc("Steps of the cosine decay"),
                             llvm::cl::init(0)};
  Option<double> minLrRatio{
      *this, "min-lr-ratio",
      llvm::cl::desc("Final learning rate of the cosine decay, relative to lr"),
      llvm::cl::init(0.0)};
  Option<bool> keepPredict{*this, "keep-predict",
                           llvm::cl::desc("Keep the model as @predict"),
                           llvm::cl::init(false)};
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last phase to run: loss, autodiff or optimizer"),
      llvm::cl::init("optimizer")};
};

/// Phases of the training pipeline, in order.
llvm::ArrayRef<llvm::StringRef> trainingPhases();

/// Adds loss attachment, autodiff and the optimizer (up to `stopAfter`).
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingOptions &options);

/// Phases of code-generation preparation, in order.
llvm::ArrayRef<llvm::StringRef> codegenPhases();

/// Adds what turns a training (or inference) module into kernels and steps
/// over one arena per entry: inline calls, CSE, loom-fuse, then (unless
/// `stopAfter` is "fuse") loom-plan-memory.
void buildCodegenPreparationPipeline(mlir::OpPassManager &pm,
                                     llvm::StringRef stopAfter = "");

/// Registers `loom-training` with loom-opt's pipeline registry.
void registerTrainingPipeline();

} // namespace loom

#endif // LOOM_TRANSFORMS_PIPELINES_H
