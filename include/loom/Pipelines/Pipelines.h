//===- Pipelines.h - Loom's pass pipeline -----------------------*- C++ -*-===//
//
// The pipeline is built here only: loomc (`--emit=PHASE` stops after a
// phase), loom-opt (`--loom-training`, `--loom-codegen-cpu`,
// `--loom-codegen-cuda`, `--loom-prepare-codegen`) and the Python bindings
// all call buildPipeline, so there is one way to run it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_PIPELINES_PIPELINES_H
#define LOOM_PIPELINES_PIPELINES_H

#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>

namespace loom {

/// The phases of the pipeline, in order. Each ends with IR that can be
/// printed (`loomc --emit=NAME`) except Ptx (text) and Artifact (files).
enum class Phase {
  Import,     // the model in the loom dialect (alias: mlir)
  Loss,       // loom-attach-loss, loom-batch-norm-train
  MixedPrecision, // loom-mixed-precision
  Autodiff,   // loom-autodiff
  Optimizer,  // loom-optimizer: @train_step and the other entries
  Remat,      // inline, cse, loom-conv-to-gemm, loom-fold-transposes,
              // loom-remat
  Fuse,       // loom-fuse
  PlanMemory, // loom-plan-memory
  Outline,    // loom-outline-kernels: the kernel module
  Bufferize,  // loom-bufferize-kernels
  Kernels,    // cpu: loom-lower-kernels-to-llvm; cuda: loom-map-kernels-to-gpu
  Nvvm,       // cuda: loom-lower-gpu-to-nvvm
  Ptx,        // cuda: PTX text (Target/Cuda.h)
  Artifact,   // the artifact directory (Target/Artifact.h)
};

/// The phase named `name` (as --emit spells it), if any.
std::optional<Phase> parsePhase(llvm::StringRef name);
/// The name --emit uses for `phase`.
llvm::StringRef phaseName(Phase phase);
/// The phases --emit accepts, in order, comma-separated (for messages).
std::string phaseList();
/// Whether `phase` belongs to training (needs --train), to code generation
/// (needs a target), or to the CUDA target only.
inline bool isTrainingPhase(Phase p) {
  return p >= Phase::Loss && p <= Phase::Optimizer;
}
inline bool isCodegenPhase(Phase p) { return p >= Phase::Remat; }
inline bool isCudaOnlyPhase(Phase p) {
  return p == Phase::Nvvm || p == Phase::Ptx;
}

/// A code-generation target: the host CPU or an NVIDIA GPU of sm_`sm`.
struct CodegenTarget {
  bool cuda = false;
  int sm = 0;
};
/// `cpu`, `cuda` (sm_90) or `cuda:sm_NN` (NN from 75 to 121).
std::optional<CodegenTarget> parseTarget(llvm::StringRef target);

struct TrainingOptions : public mlir::PassPipelineOptions<TrainingOptions> {
#define LOOM_TRAINING_OPTION(PASS, TYPE, FIELD, FLAG, DEFAULT, DESC)          \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::init(DEFAULT)};
#include "loom/Pipelines/TrainingOptions.def"
  Option<bool> keepPredict{*this, "keep-predict",
                           llvm::cl::desc("Keep the model as @predict"),
                           llvm::cl::init(false)};
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last phase to run: loss, mixed-precision, autodiff or "
                     "optimizer"),
      llvm::cl::init("optimizer")};
};

struct CodegenOptions : public mlir::PassPipelineOptions<CodegenOptions> {
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("cpu, or cuda:sm_NN (e.g. cuda:sm_90, cuda:sm_80)"),
      llvm::cl::init("cpu")};
  Option<int64_t> minParallelWork{
      *this, "min-parallel-work",
      llvm::cl::desc("cpu: a kernel loop runs on all cores (OpenMP) when its "
                     "work (iterations times inner trip counts) is at least "
                     "this; 0: every loop sequential, no OpenMP"),
      llvm::cl::init(kDefaultMinParallelWork)};
  Option<bool> cudaFuseRows{
      *this, "cuda-fuse-rows",
      llvm::cl::desc("cuda: a kernel of row operations (softmax, layer norm, "
                     "cross-entropy) is one launch with a block per row; "
                     "false: one launch per linalg op"),
      llvm::cl::init(true)};
  Option<int64_t> recomputeMinElements{
      *this, "recompute-min-elements",
      llvm::cl::desc("loom-fuse: recompute pointwise values of at least this "
                     "many elements in the later kernels that read them "
                     "instead of storing them (less memory, more "
                     "arithmetic; the ops recompute-ops names); 0: never"),
      llvm::cl::init(1)};
  Option<std::string> recomputeOps{
      *this, "recompute-ops",
      llvm::cl::desc("loom-fuse: which ops recompute-min-elements "
                     "recomputes: cheap (add, sub, mul, neg, abs, max, min, "
                     "relu, select, compare, broadcasts) or pointwise (every "
                     "pointwise op but dropout)"),
      llvm::cl::init("cheap")};
  Option<std::string> convLayout{
      *this, "conv-layout",
      llvm::cl::desc("cpu: the layout of the activations the library "
                     "convolutions read and write: auto (NHWC where "
                     "loom-channels-last finds it saves memory traffic), "
                     "nhwc (wherever it can) or nchw"),
      llvm::cl::init("auto")};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("loom-remat: largest arena of an entry point in bytes "
                     "(K, M, G suffixes); empty: none"),
      llvm::cl::init("")};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("loom-remat: none, auto (least recomputation within "
                     "the budget) or full (smallest arena reachable)"),
      llvm::cl::init("auto")};
  Option<std::string> checkpoint{
      *this, "checkpoint",
      llvm::cl::desc("loom-remat: regular expression; forward ops whose "
                     "location (ONNX node) name matches are recomputed in "
                     "the backward instead of stored"),
      llvm::cl::init("")};
  Option<int64_t> rematExhaustive{
      *this, "remat-exhaustive",
      llvm::cl::desc("loom-remat: also search every subset of at most this "
                     "many stored forward values, to compare (0: off)"),
      llvm::cl::init(0)};
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last phase to run: remat, fuse, plan-memory, outline, "
                     "bufferize, kernels or (cuda) nvvm"),
      llvm::cl::init("")};
};

/// Adds the passes of the phases from the first `training` or `codegen`
/// implies up to `stopAfter` (inclusive): the training phases when
/// `training` is given, the code-generation phases for `codegen`'s target
/// when it is given. Phases past the last pass (Ptx, Artifact) add every
/// pass; writing them is Target/'s.
void buildPipeline(mlir::OpPassManager &pm, const TrainingOptions *training,
                   const CodegenOptions *codegen, Phase stopAfter);

/// Registers `loom-training`, `loom-prepare-codegen`, `loom-codegen-cpu`
/// and `loom-codegen-cuda` with loom-opt's pipeline registry.
void registerPipelines();

} // namespace loom

#endif // LOOM_PIPELINES_PIPELINES_H
