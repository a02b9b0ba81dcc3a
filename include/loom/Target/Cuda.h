//===- Cuda.h - PTX and cubin of the GPU kernels ----------------*- C++ -*-===//

#ifndef LOOM_TARGET_CUDA_H
#define LOOM_TARGET_CUDA_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace loom {

/// Translates the kernel module in the NVVM dialect to PTX for `sm` (e.g.
/// 90) with LLVM's NVPTX backend.
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

#endif // LOOM_TARGET_CUDA_H
