//===- InitAll.cpp - Registers everything Loom's tools know ---------------===//

#include "loom/InitAll.h"

#include "loom/Codegen/Passes.h"
#include "loom/Conversion/CpuCollapseDims/CpuCollapseDims.h"
#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"
#include "loom/Conversion/CpuReductionLoops/CpuReductionLoops.h"
#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"
#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Transforms/Passes.h"
#include "loom/Pipelines/Pipelines.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Transforms/Passes.h"

void loom::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<loom::LoomDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  mlir::func::registerInlinerExtension(registry);
}

void loom::registerCodegenDialects(mlir::DialectRegistry &registry) {
  registerAllDialects(registry);
  registry.insert<mlir::linalg::LinalgDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
                  mlir::bufferization::BufferizationDialect,
                  mlir::cf::ControlFlowDialect, mlir::LLVM::LLVMDialect,
                  mlir::affine::AffineDialect, mlir::gpu::GPUDialect,
                  mlir::NVVM::NVVMDialect, mlir::vector::VectorDialect,
                  mlir::omp::OpenMPDialect, mlir::ub::UBDialect>();
  // One-shot bufferization of the kernels needs every dialect's model.
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(
      registry);
  // memref.alloc as an allocation: buffer-results-to-out-params then writes
  // a kernel's results straight into their out-params (without it, into a
  // temporary copied out at the end: a second pass over every output).
  mlir::memref::registerAllocationOpInterfaceExternalModels(registry);
}

void loom::registerAllPasses() {
  // Upstream generic passes users combine with Loom's (canonicalize, cse,
  // inline, symbol-dce, ...), and those of the code-generation pipeline.
  mlir::registerTransformsPasses();
  mlir::bufferization::registerBufferizationPasses();
  mlir::bufferization::registerBufferizationPipelines();
  mlir::registerLinalgPasses();
  mlir::memref::registerMemRefPasses();
  mlir::registerSCFPasses();
  mlir::registerConversionPasses();
  loom::registerLoomPasses();
  loom::registerConvertLoomToLinalgPass();
  loom::registerLoomCpuCollapseDimsPass();
  loom::registerLoomCpuParallelLoopsPass();
  loom::registerLoomCpuReductionLoopsPass();
  loom::registerLoomCodegenPasses();
  loom::registerPipelines();
}
