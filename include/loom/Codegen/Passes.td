//===- Passes.td - Loom's code-generation passes ------------*- tablegen -*-===//
//
// The phases between a fused, memory-planned training module and the
// serializers (include/loom/Target): kernels outlined into a nested module,
// bufferized, then lowered for the host CPU or mapped onto the GPU and
// lowered to NVVM. buildPipeline (loom/Pipelines/Pipelines.h) chains them
// for loomc, and loom-opt runs them by name (`--loom-codegen-cpu`,
// `--loom-codegen-cuda`) or one at a time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_PASSES_TD
#define LOOM_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

def OutlineKernelsPass : Pass<"loom-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Moves every loom.fusion body into a kernel function.";
  let description = [{
    Creates the kernel module `module @loom_kernels attributes
    {loom.kernels}` inside the planned module and, for every `loom.fusion`
    with a non-empty result, a `func.func` there holding its body (tensor
    semantics, loom ops; inputs marked non-writable). The fusion gets a
    `loom.kernel` attribute naming it. A region whose outlined text equals
    one already outlined names that kernel instead: `@train_step`'s
    kernels are outlined first, and the other entries reuse them. A
    result that `loom-plan-memory` placed on an argument's bytes (state
    updated in place) is materialized in that argument's buffer, and
    recorded for `loom-bufferize-kernels`.
  }];
  let statistics = [
    Statistic<"numKernels", "num-kernels", "Kernel functions outlined">,
    Statistic<"numReused", "num-reused",
              "Fusions that call a kernel outlined before">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::bufferization::BufferizationDialect"];
}

def BufferizeKernelsPass : Pass<"loom-bufferize-kernels", "mlir::ModuleOp"> {
  let summary = "Lowers the outlined kernels to linalg on buffers.";
  let description = [{
    On the kernel module: `convert-loom-to-linalg` on every kernel,
    elementwise fusion, one-shot bufferization across function boundaries
    with results as caller-provided out-params (inputs first, then
    outputs), and `memref.copy` as `linalg.copy`. An in-place result reads
    and writes its argument's buffer through one pointer. Temporaries stay
    `memref.alloc`s for the next pass to place (arena scratch) or free.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::bufferization::BufferizationDialect"];
}

def LowerKernelsToLLVMPass : Pass<"loom-lower-kernels-to-llvm", "mlir::ModuleOp"> {
  let summary = "Lowers bufferized kernels to the LLVM dialect for the host CPU.";
  let description = [{
    On the kernel module: static temporaries at a kernel's top level become
    trailing arguments (scratch in the entry's arena, recorded in
    `loom.kernel_info`); the others are freed by the deallocation
    pipeline. Row reductions keep their accumulators in registers
    (`loom-cpu-reduction-loops`); parallel loops with enough work run on
    an OpenMP team (`loom-cpu-parallel-loops`, `convert-scf-to-openmp`);
    then loops, and the LLVM dialect with the bare-pointer calling
    convention the runtime's kernel ABI needs.
  }];
  let options = [
    Option<"minParallelWork", "min-parallel-work", "int64_t",
           "::loom::kDefaultMinParallelWork",
           "A kernel loop runs on all cores (OpenMP) when its work "
           "(iterations times inner trip counts) is at least this; 0: every "
           "loop sequential, no OpenMP">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect",
                           "mlir::omp::OpenMPDialect"];
}

def MapKernelsToGpuPass : Pass<"loom-map-kernels-to-gpu", "mlir::ModuleOp"> {
  let summary = "Maps every computing op of the bufferized kernels onto a GPU launch.";
  let description = [{
    On the kernel module: each linalg op of a kernel becomes a `gpu.func`
    in `gpu.module @loom_kernels`, with the thread mapping Loom chooses
    from its shape (pointwise grid-stride loops with vector loads, warp-
    and block-wide shuffle reductions, thread per row, forall, serial:
    docs/codegen.md, "CUDA"); every launch of a kernel takes the kernel's
    buffers, then its scratch buffers (temporaries placed in the arena).
    The launches (grid, block, shared memory, strategy) and the scratch are
    recorded in `loom.kernel_info`. With `fuse-rows` (the default), a kernel
    whose ops all work within the rows of one leading shape (softmax, layer
    norm, cross-entropy and their gradients) is one `block-row` launch
    instead: a block per row runs every op on that row in turn, with a
    barrier between them.
  }];
  let options = [
    Option<"fuseRows", "fuse-rows", "bool", "true",
           "Map a kernel of row operations (softmax, layer norm, ...) as one "
           "launch with a block per row; false: one launch per linalg op">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect",
                           "mlir::vector::VectorDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::ub::UBDialect"];
}

def LowerGpuToNVVMPass : Pass<"loom-lower-gpu-to-nvvm", "mlir::ModuleOp"> {
  let summary = "Lowers the GPU kernels to the NVVM and LLVM dialects.";
  let description = [{
    On the kernel module's `gpu.module`: loops, then `convert-gpu-to-nvvm`
    with the bare-pointer calling convention, 32-bit index arithmetic when
    every buffer stays far below 2^31 elements. PTX and the cubin are
    written by the CUDA serializer (Target/Cuda.h).
  }];
  let dependentDialects = ["mlir::NVVM::NVVMDialect",
                           "mlir::LLVM::LLVMDialect"];
}

#endif // LOOM_CODEGEN_PASSES_TD
