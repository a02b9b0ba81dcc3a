//===- LowerKernelsToLLVM.cpp - loom-lower-kernels-to-llvm ---------------===//
//
// The bufferized kernels become LLVM-dialect functions for the host CPU.
// Static temporaries at a kernel's top level become trailing arguments (the
// plan places them in the entry's arena: a malloc and its page faults per
// call cost more than many kernels); row reductions keep their accumulators
// in registers; parallel loops with enough work fork an OpenMP team; the
// rest is upstream's lowering to loops and LLVM with the bare-pointer
// calling convention.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Kernels.h"
#include "loom/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cstdint>

namespace loom {
#define GEN_PASS_DEF_LOWERKERNELSTOLLVMPASS
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
/// From loops on buffers (and OpenMP) to the LLVM dialect: the end of both
/// host pipelines.
constexpr const char *kLoopsToLLVM =
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-vector-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
    "finalize-memref-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
    "convert-ub-to-llvm,convert-cf-to-llvm,"
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv},"
    // After func: this pass converts function signatures too, without the
    // bare-pointer convention the kernel ABI needs.
    "convert-openmp-to-llvm,reconcile-unrealized-casts";

/// The static temporaries at the top level of each kernel become trailing
/// arguments (scratch the plan places in the arena), recorded in `info`:
/// a malloc and its page faults per call cost more than the kernel itself
/// for large buffers. Temporaries inside loops or of dynamic shape stay
/// allocations (freed by the deallocation pipeline).
void hoistScratch(ModuleOp kernels, KernelInfoMap &info) {
  for (auto func : kernels.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    KernelInfo &kernel = info[func.getName().str()];
    Block &entry = func.getBody().front();
    SmallVector<memref::AllocOp> allocs;
    for (auto alloc : entry.getOps<memref::AllocOp>()) {
      MemRefType type = alloc.getType();
      if (type.hasStaticShape() && type.getLayout().isIdentity() &&
          type.getMemorySpace() == nullptr)
        allocs.push_back(alloc);
    }
    for (memref::AllocOp alloc : allocs) {
      if (failed(func.insertArgument(func.getNumArguments(), alloc.getType(),
                                     {}, alloc.getLoc())))
        continue; // stays an allocation
      kernel.addScratch(alloc.getType(), 64);
      alloc.replaceAllUsesWith(entry.getArguments().back());
      alloc.erase();
    }
  }
}
} // namespace

std::string loom::hostLoweringPipeline(int64_t minParallelWork) {
  // The parallel dimensions of every linalg op (and every scf.forall) become
  // scf.parallel; loom-cpu-parallel-loops keeps those worth a thread team,
  // which convert-scf-to-openmp hands to OpenMP (libomp, all cores unless
  // OMP_NUM_THREADS or loom-run --threads says otherwise). cse after
  // loom-cpu-collapse-dims: an in-place operand is collapsed once as an
  // input and once as the output; one view keeps LLVM seeing one pointer.
  std::string pipeline =
      "buffer-deallocation-pipeline,"
      "scf-forall-to-parallel,"
      "func.func(loom-cpu-collapse-dims,cse,loom-cpu-reduction-loops),"
      "convert-linalg-to-parallel-loops,"
      "loom-cpu-parallel-loops{min-work=" +
      std::to_string(minParallelWork > 0 ? minParallelWork : INT64_MAX) +
      "},";
  // canonicalize inlines the memref.alloca_scope convert-scf-to-openmp
  // wraps each loop body in, which convert-scf-to-cf could not lower (a
  // scope holds one block).
  if (minParallelWork > 0)
    pipeline += "convert-scf-to-openmp,canonicalize,";
  return pipeline + kLoopsToLLVM;
}

/// The f32 transcendental functions of the kernels (exp, log, tanh, erf and
/// their kin) become MLIR's polynomial approximations: arithmetic, the same
/// instructions for a vector of elements as for one. Left to the C library,
/// a vectorized loop calls libmvec in its body and scalar libm in its
/// remainder, whose last bits differ: the same value computed by two
/// kernels of different shapes (a GELU in the forward and recomputed in the
/// backward, loom-remat) would differ, and training with remat would not
/// give the parameters of training without it, bit for bit.
static LogicalResult approximateMath(ModuleOp kernels) {
  static constexpr llvm::StringLiteral kApproximated[] = {
      "math.exp",   "math.exp2", "math.expm1", "math.log", "math.log2",
      "math.log1p", "math.tanh", "math.erf",   "math.erfc"};
  RewritePatternSet patterns(kernels.getContext());
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    return llvm::is_contained(kApproximated, name);
  });
  return applyPatternsGreedily(kernels, std::move(patterns));
}

LogicalResult loom::lowerKernelsToLLVM(ModuleOp kernels, KernelInfoMap &info,
                                       int64_t minParallelWork,
                                       PipelineRunner run) {
  hoistScratch(kernels, info);
  if (failed(approximateMath(kernels)))
    return kernels.emitError("approximating the kernels' math functions");
  return runKernelPipeline(kernels, hostLoweringPipeline(minParallelWork),
                           run);
}

LogicalResult loom::lowerHostKernelsToLLVM(ModuleOp kernels) {
  return runKernelPipeline(kernels,
                           std::string("scf-forall-to-for,"
                                       "convert-linalg-to-loops,") +
                               kLoopsToLLVM);
}


namespace {
struct LowerKernelsToLLVMPass
    : public KernelModulePass<LowerKernelsToLLVMPass,
                              loom::impl::LowerKernelsToLLVMPassBase> {
  using KernelModulePass::KernelModulePass;
  void getDependentDialects(DialectRegistry &registry) const override {
    LowerKernelsToLLVMPassBase::getDependentDialects(registry);
    addKernelPipelineDialects(hostLoweringPipeline(minParallelWork), registry);
  }
  LogicalResult runOnKernels(ModuleOp kernels, PipelineRunner run) {
    KernelInfoMap info = readKernelInfo(kernels);
    if (failed(lowerKernelsToLLVM(kernels, info, minParallelWork, run)))
      return failure();
    writeKernelInfo(kernels, info);
    return success();
  }
};
} // namespace
