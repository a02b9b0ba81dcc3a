//===- Loomc.h - The loomc compiler driver ----------------------*- C++ -*-===//

#ifndef LOOM_DRIVER_LOOMC_H
#define LOOM_DRIVER_LOOMC_H

#include "loom/Target/Artifact.h"

#include <string>

namespace loom {

/// What a tool built on loomc adds (the tests' loomc-emu: GPU kernels run
/// by the host GPU emulator instead of PTX and a cubin).
struct LoomcExtensions {
  /// With --target=cuda: writes the kernels (see GpuKernelWriter).
  GpuKernelWriter gpuKernelWriter;
  /// The flag that set it, for messages.
  std::string gpuKernelWriterFlag;
};

/// Runs `loomc` with the given command line; returns the process exit code.
int loomcMain(int argc, char **argv, const LoomcExtensions &extensions = {});

} // namespace loom

#endif // LOOM_DRIVER_LOOMC_H
