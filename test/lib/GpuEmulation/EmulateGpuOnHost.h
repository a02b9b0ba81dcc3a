//===- EmulateGpuOnHost.h - GPU kernels as host code (tests) ----*- C++ -*-===//
//
// The compiler side of the GPU emulator: loomc-emu (a loomc whose CUDA
// kernels run on the host) writes the kernels of a CUDA artifact as
// kernels.emu.so, run by libloom_gpu_emu.so (test/lib/GpuEmulator), and a
// kernels.cubin in the format of the runtime's fake CUDA driver
// (runtime/tests/fakecuda) that names it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_GPUEMULATION_EMULATEGPUONHOST_H
#define LOOM_TEST_GPUEMULATION_EMULATEGPUONHOST_H

#include "loom/Codegen/KernelInfo.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace loom {

/// A GPU launch run on the host by the GPU emulator (tests only): `name`
/// runs `threadFunction` (a kernel of the module, one GPU thread) over
/// `grid` blocks of `block` threads (as coroutines when the kernel
/// `synchronizes`: shuffles or barriers).
struct EmulatedLaunch {
  std::string name, threadFunction;
  int64_t grid, block;
  bool synchronizes;
  unsigned numParams; // buffers the launch takes
};

/// Tests only: turns the gpu.funcs of `gpuKernels` (the kernel module after
/// loom-map-kernels-to-gpu, before NVVM) into host functions of a new
/// module, one GPU thread each (`<launch>_thread`), whose thread ids,
/// shuffles and barriers call the GPU emulator (test/lib/GpuEmulator);
/// `launches` tells the shared object how to run each launch's grid.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
emulateGpuOnHost(mlir::ModuleOp gpuKernels, const KernelInfoMap &kernels,
                 std::vector<EmulatedLaunch> &launches);

/// Writes kernels.emu.so and kernels.cubin for the kernel module after
/// loom-map-kernels-to-gpu into `dir`, linking `emulatorLibrary`; returns
/// "kernels.cubin" (a GpuKernelWriter).
mlir::FailureOr<std::string>
writeEmulatedKernels(mlir::ModuleOp kernels, const KernelInfoMap &info,
                     const std::string &dir, int sm,
                     const std::string &emulatorLibrary, std::string &error);

} // namespace loom

#endif // LOOM_TEST_GPUEMULATION_EMULATEGPUONHOST_H
