//===- LowerGpuToNVVM.cpp - loom-lower-gpu-to-nvvm ------------------------===//
//
// The gpu.module Loom's mapping wrote becomes NVVM and LLVM dialect: loops,
// then convert-gpu-to-nvvm, which lowers every dialect through its
// ConvertToLLVMPatternInterface (registered here as dependent interfaces),
// with the bare-pointer calling convention the plan's launches use. Index
// arithmetic is 32-bit (cheaper on the GPU) when every buffer stays far
// below 2^31 elements.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Kernels.h"
#include "loom/Codegen/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"

namespace loom {
#define GEN_PASS_DEF_LOWERGPUTONVVMPASS
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

void loom::addNVVMLoweringInterfaces(DialectRegistry &registry) {
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  vector::registerConvertVectorToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  NVVM::registerConvertGpuToNVVMInterface(registry);
}

std::string loom::nvvmLoweringPipeline(ModuleOp kernels) {
  int64_t largest = 0;
  if (kernels)
    kernels.walk([&](Operation *op) {
      for (Type t : op->getOperandTypes())
        if (auto m = dyn_cast<MemRefType>(t); m && m.hasStaticShape())
          largest = std::max(largest, m.getNumElements());
    });
  std::string indexBits = largest < (int64_t(1) << 30) ? "32" : "64";
  return "gpu.module(convert-linalg-to-loops,canonicalize,cse,"
         "expand-strided-metadata,lower-affine,convert-scf-to-cf,"
         "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1 index-bitwidth=" +
         indexBits + "}),reconcile-unrealized-casts";
}

LogicalResult loom::lowerGpuToNVVM(ModuleOp kernels, PipelineRunner run) {
  if (!run) {
    // Outside a pass: the interfaces are not yet in the context.
    DialectRegistry registry;
    addNVVMLoweringInterfaces(registry);
    kernels.getContext()->appendDialectRegistry(registry);
  }
  return runKernelPipeline(kernels, nvvmLoweringPipeline(kernels), run);
}

namespace {
struct LowerGpuToNVVMPass
    : public KernelModulePass<LowerGpuToNVVMPass,
                              loom::impl::LowerGpuToNVVMPassBase> {
  void getDependentDialects(DialectRegistry &registry) const override {
    LowerGpuToNVVMPassBase::getDependentDialects(registry);
    addNVVMLoweringInterfaces(registry);
    addKernelPipelineDialects(nvvmLoweringPipeline(nullptr), registry);
  }
  LogicalResult runOnKernels(ModuleOp kernels, PipelineRunner run) {
    if (kernels.getOps<gpu::GPUModuleOp>().empty())
      return getOperation().emitError(
          "loom-lower-gpu-to-nvvm: no gpu.module in the kernel module (run "
          "loom-map-kernels-to-gpu first)");
    return lowerGpuToNVVM(kernels, run);
  }
};
} // namespace
