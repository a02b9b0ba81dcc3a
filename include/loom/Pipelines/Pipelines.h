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
#define LOOM_CODEGEN_OPTION(TYPE, FIELD, FLAG, LOOMC_FLAG, DEFAULT, VALUE,     \
                            DESC)                                              \
  Option<TYPE> FIELD{*this, FLAG, llvm::cl::desc(DESC),                        \
                     llvm::cl::value_desc(VALUE), llvm::cl::init(DEFAULT)};
#include "loom/Pipelines/CodegenOptions.def"
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
