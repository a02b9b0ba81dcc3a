//===- Loomc.h - The loomc compiler driver ----------------------*- C++ -*-===//

#ifndef LOOM_DRIVER_LOOMC_H
#define LOOM_DRIVER_LOOMC_H

#include "loom/Target/Artifact.h"
#include "llvm/ADT/StringRef.h"

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

/// Runs `loomc` inside a process that goes on afterwards and may call it
/// again (the Python bindings): no process-wide LLVM set-up or shutdown, a
/// bad command line returns 2 instead of exiting, and the command-line
/// options are unregistered again on return. Messages go to llvm::errs()
/// and llvm::outs(), as loomcMain's do. Not thread-safe: LLVM's command-line
/// parser is global, so one call at a time per process.
int loomcRunEmbedded(int argc, char **argv);

/// Crashes this process the way `kind` names, for tests of how a caller
/// survives a crashing compiler (loomc --debug-crash; the Python bindings):
/// abort (std::abort), segv (a store through a null pointer), fatal
/// (llvm::reportFatalUsageError, which calls exit(1)), internal
/// (llvm::reportFatalInternalError, which aborts) or unreachable
/// (llvm_unreachable's report, then abort). Returns false, and does
/// nothing, for any other `kind`.
bool crashForTesting(llvm::StringRef kind);

} // namespace loom

#endif // LOOM_DRIVER_LOOMC_H
