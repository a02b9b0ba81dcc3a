//===- Pipelines.cpp - Loom's pass pipeline -------------------------------===//

#include "loom/Pipelines/Pipelines.h"

#include "loom/Codegen/Passes.h"
#include "loom/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace loom;

namespace {
struct PhaseName {
  Phase phase;
  llvm::StringLiteral name;
};
constexpr PhaseName kPhases[] = {
    {Phase::Import, "import"},        {Phase::Loss, "loss"},
    {Phase::MixedPrecision, "mixed-precision"},
    {Phase::Autodiff, "autodiff"},    {Phase::Optimizer, "optimizer"},
    {Phase::Remat, "remat"},          {Phase::Fuse, "fuse"},            {Phase::PlanMemory, "plan-memory"},
    {Phase::Outline, "outline"},      {Phase::Bufferize, "bufferize"},
    {Phase::Kernels, "kernels"},      {Phase::Nvvm, "nvvm"},
    {Phase::Ptx, "ptx"},
};
} // namespace

std::optional<Phase> loom::parsePhase(StringRef name) {
  if (name == "mlir")
    return Phase::Import;
  for (const PhaseName &p : kPhases)
    if (p.name == name)
      return p.phase;
  return std::nullopt;
}

StringRef loom::phaseName(Phase phase) {
  for (const PhaseName &p : kPhases)
    if (p.phase == phase)
      return p.name;
  return "artifact";
}

std::string loom::phaseList() {
  std::string s;
  for (const PhaseName &p : kPhases)
    s += (s.empty() ? "" : ", ") + p.name.str();
  return s;
}

std::optional<CodegenTarget> loom::parseTarget(StringRef target) {
  if (target == "cpu")
    return CodegenTarget{};
  if (target == "cuda")
    return CodegenTarget{true, 90};
  if (!target.consume_front("cuda:sm_"))
    return std::nullopt;
  int sm = 0;
  if (target.getAsInteger(10, sm) || sm < 75 || sm > 121)
    return std::nullopt;
  return CodegenTarget{true, sm};
}

namespace {
void addTrainingPasses(OpPassManager &pm, const TrainingOptions &options,
                       Phase stopAfter) {
  // Each option goes to its pass (the defaults of TrainingOptions.def and
  // of the passes agree: test/Driver/loomc-vs-loom-opt.test).
  RecognizeDropoutPassOptions RecognizeDropout;
  FuseAttentionPassOptions FuseAttention;
  AttachLossPassOptions AttachLoss;
  FuseLinearCrossEntropyPassOptions FuseLinearCrossEntropy;
  MixedPrecisionPassOptions MixedPrecision;
  AutodiffPassOptions Autodiff;
  TensorParallelPassOptions TensorParallel;
  OptimizerPassOptions Optimizer;
  PipelineStagesPassOptions PipelineStages;
#define LOOM_TRAINING_OPTION(PASS, TYPE, FIELD, FLAG, DEFAULT, DESC)          \
  PASS.FIELD = options.FIELD;
#include "loom/Pipelines/TrainingOptions.def"
  AttachLoss.keepPredict = options.keepPredict;
  // The fused attention runs in f32 on both targets (the CPU runtime's
  // kernel, generated kernels on CUDA), at every precision: it is
  // loom.KeepF32, so under --precision=bf16/fp16 loom-mixed-precision gives
  // it f32 copies of the 16-bit projections (no T x T tensor in any
  // precision). The fused LM head at every precision too (in 16 bits it
  // reads 16-bit x and w, as the GEMM it replaces): the CPU runtime's
  // tiled step in f32, else loom-linear-cross-entropy-chunks's chunks of
  // rows (library GEMMs and generated kernels). Attention splits by heads under --tp; the LM
  // head has no tensor-parallel rule (with --tp the vocabulary-parallel
  // cross-entropy of loom-tensor-parallel applies instead).
  bool fusedAttention = true;
  bool fusedHead = true;
  pm.addPass(createRecognizeDropoutPass(RecognizeDropout));
  if (fusedAttention)
    pm.addPass(createFuseAttentionPass(FuseAttention));
  pm.addPass(createAttachLossPass(AttachLoss));
  if (fusedHead && options.tp == 1)
    pm.addPass(createFuseLinearCrossEntropyPass(FuseLinearCrossEntropy));
  pm.addPass(createBatchNormTrainPass());
  pm.addPass(createTensorParallelPass(TensorParallel));
  if (stopAfter == Phase::Loss)
    return;
  pm.addPass(createMixedPrecisionPass(MixedPrecision));
  if (stopAfter == Phase::MixedPrecision)
    return;
  pm.addPass(createAutodiffPass(Autodiff));
  pm.addPass(createCSEPass());
  if (stopAfter == Phase::Autodiff)
    return;
  pm.addPass(createOptimizerPass(Optimizer));
  pm.addPass(createPipelineStagesPass(PipelineStages));
  pm.addPass(createEvalEntriesPass());
}

void addCodegenPasses(OpPassManager &pm, const CodegenOptions &options,
                      Phase stopAfter) {
  std::optional<CodegenTarget> target = parseTarget(options.target);
  bool cuda = target && target->cuda;
  pm.addPass(createInlinerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createInputChecksPass());
  pm.addPass(createScheduleCollectivesPass());
  if (cuda) // no runtime attention kernel there
    pm.addPass(createAttentionKernelsPass());
  // The fused LM heads the runtime has no step for: all on CUDA, 16-bit
  // ones on the CPU.
  LinearCrossEntropyChunksPassOptions chunks;
  chunks.rows = options.lmHeadRows;
  chunks.runtimeF32 = !cuda;
  pm.addPass(createLinearCrossEntropyChunksPass(chunks));
  ConvToGemmPassOptions convs;
  convs.libraryConvs = !cuda; // oneDNN's primitives on the CPU
  pm.addPass(createConvToGemmPass(convs));
  pm.addPass(createFoldTransposesPass());
  if (!cuda && options.convLayout != "nchw") {
    ChannelsLastPassOptions channelsLast;
    channelsLast.always = options.convLayout == "nhwc";
    pm.addPass(createChannelsLastPass(channelsLast));
    pm.addPass(createCSEPass()); // one transpose per value
  }
  RematPassOptions remat;
  remat.memoryBudget = options.memoryBudget;
  remat.mode = options.remat;
  remat.checkpoint = options.checkpoint;
  remat.exhaustive = options.rematExhaustive;
  remat.fuseRecomputeMinElements = options.recomputeMinElements;
  remat.fuseRecomputeOps = options.recomputeOps;
  pm.addPass(createRematPass(remat));
  if (stopAfter == Phase::Remat)
    return;
  if (cuda)
    pm.addPass(createGemmEpiloguesPass());
  FusePassOptions fuse;
  fuse.recomputeMinElements = options.recomputeMinElements;
  fuse.recomputeOps = options.recomputeOps;
  pm.addPass(createFusePass(fuse));
  // After fusion: the casts it adds stay inside each op's kernel rather
  // than becoming f32 buffers of their own.
  pm.addPass(createWidenKeepF32Pass());
  if (stopAfter == Phase::Fuse)
    return;
  pm.addPass(createPlanMemoryPass());
  if (stopAfter == Phase::PlanMemory)
    return;
  pm.addPass(createOutlineKernelsPass());
  if (stopAfter == Phase::Outline)
    return;
  pm.addPass(createBufferizeKernelsPass());
  if (stopAfter == Phase::Bufferize)
    return;
  if (!cuda) {
    LowerKernelsToLLVMPassOptions lower;
    lower.minParallelWork = options.minParallelWork;
    pm.addPass(createLowerKernelsToLLVMPass(lower));
    return;
  }
  MapKernelsToGpuPassOptions map;
  map.fuseRows = options.cudaFuseRows;
  pm.addPass(createMapKernelsToGpuPass(map));
  if (stopAfter == Phase::Kernels)
    return;
  pm.addPass(createLowerGpuToNVVMPass());
}
} // namespace

void loom::buildPipeline(OpPassManager &pm, const TrainingOptions *training,
                         const CodegenOptions *codegen, Phase stopAfter) {
  if (stopAfter == Phase::Import)
    return;
  if (training)
    addTrainingPasses(pm, *training, std::min(stopAfter, Phase::Optimizer));
  if (codegen && isCodegenPhase(stopAfter))
    addCodegenPasses(pm, *codegen, stopAfter);
}

void loom::registerPipelines() {
  PassPipelineRegistration<TrainingOptions>(
      "loom-training",
      "Attach a loss, differentiate, add the optimizer (loomc --train)",
      [](OpPassManager &pm, const TrainingOptions &options) {
        std::optional<Phase> stop = parsePhase(options.stopAfter);
        buildPipeline(pm, &options, nullptr,
                      stop && isTrainingPhase(*stop) ? *stop
                                                     : Phase::Optimizer);
      });
  PassPipelineRegistration<>(
      "loom-prepare-codegen",
      "Inline, CSE, loom-conv-to-gemm, loom-fold-transposes, loom-fuse and "
      "loom-plan-memory "
      "(loomc --target --emit=plan-memory)",
      [](OpPassManager &pm) {
        CodegenOptions options;
        buildPipeline(pm, nullptr, &options, Phase::PlanMemory);
      });
  // loom-codegen-cpu and loom-codegen-cuda differ in the default target.
  auto registerCodegen = [](StringRef arg, StringRef description,
                            StringRef defaultTarget) {
    registerPassPipeline(
        arg, description,
        [defaultTarget](OpPassManager &pm, StringRef text,
                        function_ref<LogicalResult(const Twine &)> error) {
          CodegenOptions options;
          if (failed(options.parseFromString(text)))
            return failure();
          if (!options.target.hasValue())
            options.target = defaultTarget.str();
          std::optional<CodegenTarget> target = parseTarget(options.target);
          if (!target)
            return error("unknown target '" + options.target +
                         "' (expected cpu or cuda:sm_NN)");
          Phase last = target->cuda ? Phase::Nvvm : Phase::Kernels;
          std::optional<Phase> stop = last;
          if (!options.stopAfter.empty())
            stop = parsePhase(options.stopAfter);
          if (!stop || !isCodegenPhase(*stop) || *stop > last)
            return error("stop-after=" + options.stopAfter +
                         " is not a code-generation phase of this target");
          buildPipeline(pm, nullptr, &options, *stop);
          return success();
        },
        [](function_ref<void(const detail::PassOptions &)> help) {
          help(CodegenOptions());
        });
  };
  registerCodegen("loom-codegen-cpu",
                  "Everything loomc --target=cpu runs on a training or "
                  "inference module: fusion, memory plan, kernels in the LLVM "
                  "dialect",
                  "cpu");
  registerCodegen("loom-codegen-cuda",
                  "Everything loomc --target=cuda runs on a training or "
                  "inference module: fusion, memory plan, GPU kernels in the "
                  "NVVM dialect (target=cuda:sm_90 unless given)",
                  "cuda:sm_90");
}
