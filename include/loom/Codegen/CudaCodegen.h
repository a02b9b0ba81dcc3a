//===- CudaCodegen.h - Kernels for NVIDIA GPUs ------------------*- C++ -*-===//
//
// The kernel half of `loomc --target=cuda:sm_NN`. Outlined kernels are
// bufferized as for the CPU, then every computing op of a kernel becomes one
// GPU launch whose mapping onto threads Loom chooses from the op's shape
// (docs/codegen.md, "CUDA"):
//
//  - pointwise: a grid-stride loop, 128-bit vector loads and stores where
//    every operand is contiguous;
//  - warp-row: reductions over trailing dimensions with a recognized
//    combiner, one warp per row, lanes striding the row, a butterfly of
//    shuffles at the end;
//  - block-reduce: a reduction of everything to one value, one block of
//    1024 threads, warp shuffles and shared memory;
//  - thread-row: any other generic, one thread per point of its parallel
//    dimensions, reduction loops inside;
//  - serial: anything else (loops over slices), one thread.
//
// Temporaries become scratch buffers in the entry's arena. The gpu module is
// lowered through NVVM to PTX by LLVM's NVPTX backend and assembled by ptxas.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_CUDACODEGEN_H
#define LOOM_CODEGEN_CUDACODEGEN_H

#include "loom/Codegen/CpuCodegen.h"

namespace loom {

/// Maps a module of bufferized kernels (bufferizeKernels without
/// deallocation) onto a module holding one gpu.module of gpu.func kernels,
/// and fills `kernels` with the launches and scratch of each.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
mapKernelsToGpu(mlir::ModuleOp bufferized, KernelInfoMap &kernels);

/// Tests only: turns the gpu.funcs of `gpuKernels` (mapKernelsToGpu's
/// result, before NVVM) into host functions of a new module, one GPU thread
/// each (`<launch>_thread`), whose thread ids, shuffles and barriers call the
/// GPU emulator (test/lib/GpuEmulator); `launches` tells emitSharedObject how
/// to run each launch's grid.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
emulateGpuOnHost(mlir::ModuleOp gpuKernels, const KernelInfoMap &kernels,
                 std::vector<EmulatedLaunch> &launches);

/// Lowers the gpu.module of `gpuKernels` to the NVVM and LLVM dialects.
mlir::LogicalResult lowerGpuToNVVM(mlir::ModuleOp gpuKernels);

/// Translates the NVVM-dialect module to PTX for `sm` (e.g. 90) with LLVM's
/// NVPTX backend.
mlir::FailureOr<std::string> translateToPtx(mlir::ModuleOp gpuKernels, int sm,
                                            std::string &error);

/// The CUDA toolkit's libdevice.10.bc ($CUDA_HOME, /usr/local/cuda,
/// /usr/lib/cuda), linked when kernels call its math; empty if none.
std::string findLibdevice();

/// The ptxas that assembles cubins: $LOOM_PTXAS, $CUDA_HOME/bin/ptxas,
/// /usr/local/cuda/bin/ptxas, then PATH; empty if none.
std::string findPtxas();

/// Assembles PTX text into a cubin for sm_`sm` at `cubinPath`.
mlir::LogicalResult assembleCubin(const std::string &ptx, int sm,
                                  const std::string &ptxas,
                                  const std::string &cubinPath,
                                  std::string &error);

} // namespace loom

#endif // LOOM_CODEGEN_CUDACODEGEN_H
