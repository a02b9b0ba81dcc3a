//===- Kernels.h - The work of the code-generation passes -------*- C++ -*-===//
//
// The functions behind the passes of Codegen/Passes.td, for the passes and
// for the code that needs one step outside a pass pipeline (the GPU
// emulator of the tests). Each works on the kernel module (KernelInfo.h).
// Where a step runs upstream passes, `run` runs them: a pass hands its
// dynamic-pipeline runner (Pass::runPipeline); without one, a PassManager
// of its own runs them.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_KERNELS_H
#define LOOM_CODEGEN_KERNELS_H

#include "loom/Codegen/KernelInfo.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace loom {

/// Runs a pipeline on an op: Pass::runPipeline inside a pass.
using PipelineRunner =
    llvm::function_ref<mlir::LogicalResult(mlir::OpPassManager &,
                                           mlir::Operation *)>;

/// The kernel module of `module`; null, with an error naming `pass` and
/// `prerequisite` (the pass to run first), if there is none.
mlir::ModuleOp kernelModuleOrError(mlir::ModuleOp module, llvm::StringRef pass,
                                   llvm::StringRef prerequisite =
                                       "loom-outline-kernels");

/// The passes of Codegen/Passes.td that work on the kernel module:
/// `Derived::runOnKernels(kernels, run)` does the work, `run` being the
/// pass's dynamic-pipeline runner; a module without kernels is an error.
template <typename Derived, template <typename> class Base>
struct KernelModulePass : public Base<Derived> {
  using Base<Derived>::Base;
  void runOnOperation() final {
    auto run = [&](mlir::OpPassManager &pm, mlir::Operation *op) {
      return this->runPipeline(pm, op);
    };
    mlir::ModuleOp kernels =
        kernelModuleOrError(this->getOperation(), this->getArgument());
    if (!kernels ||
        mlir::failed(static_cast<Derived *>(this)->runOnKernels(kernels, run)))
      this->signalPassFailure();
  }
};

/// Parses `pipeline` (as `loom-opt` spells it inside `builtin.module(...)`)
/// and runs it on `module`; the upstream passes codegen uses are registered
/// on first use.
mlir::LogicalResult runKernelPipeline(mlir::ModuleOp module,
                                      llvm::StringRef pipeline,
                                      PipelineRunner run = nullptr);

/// Adds the dialects the passes of `pipeline` load to `registry` (a pass's
/// getDependentDialects, for the pipelines it runs).
void addKernelPipelineDialects(llvm::StringRef pipeline,
                               mlir::DialectRegistry &registry);

/// loom-outline-kernels: creates the kernel module inside `module` and
/// outlines every loom.fusion into it. Returns (kernels, reused fusions).
std::pair<unsigned, unsigned> outlineKernels(mlir::ModuleOp module);

/// loom-bufferize-kernels on the kernel module. The pipeline it runs (for
/// dependent dialects).
llvm::StringRef bufferizationPipeline();
mlir::LogicalResult bufferizeKernels(mlir::ModuleOp kernels,
                                     PipelineRunner run = nullptr);

/// loom-lower-kernels-to-llvm on the kernel module: scratch into `info`.
std::string hostLoweringPipeline(int64_t minParallelWork);
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels,
                                       KernelInfoMap &info,
                                       int64_t minParallelWork,
                                       PipelineRunner run = nullptr);

/// Lowers host kernels on buffers (linalg, vector, scf, memref, func; no
/// OpenMP) to the LLVM dialect (the GPU emulator's host code).
mlir::LogicalResult lowerHostKernelsToLLVM(mlir::ModuleOp kernels);

/// loom-map-kernels-to-gpu on the bufferized kernel module: its functions
/// are replaced by one gpu.module of gpu.func launches, recorded in `info`.
/// `fuseRows`: a kernel whose ops all work within rows of one leading shape
/// (softmax, layer norm, cross-entropy) is one launch, a block per row.
mlir::LogicalResult mapKernelsToGpu(mlir::ModuleOp kernels,
                                    KernelInfoMap &info, bool fuseRows = true,
                                    PipelineRunner run = nullptr);

/// loom-lower-gpu-to-nvvm on the kernel module holding the gpu.module.
std::string nvvmLoweringPipeline(mlir::ModuleOp kernels);
void addNVVMLoweringInterfaces(mlir::DialectRegistry &registry);
mlir::LogicalResult lowerGpuToNVVM(mlir::ModuleOp kernels,
                                   PipelineRunner run = nullptr);

} // namespace loom

#endif // LOOM_CODEGEN_KERNELS_H
