//===- Artifact.h - The artifact directory loom-run runs --------*- C++ -*-===//
//
// After the pipeline (buildPipeline up to Phase::Artifact): the host entries
// fused and planned, the kernel module lowered for the target. Writes the
// kernels (kernels.so; or kernels.ptx and kernels.cubin), plan.json and
// final.mlir (the host side) into the artifact directory; params.safetensors
// is the driver's.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TARGET_ARTIFACT_H
#define LOOM_TARGET_ARTIFACT_H

#include "loom/Codegen/KernelInfo.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace loom {

struct ArtifactOptions {
  std::string dir;         // the artifact directory (it exists)
  std::string sourceModel; // recorded in plan.json (absolute path)
  bool cuda = false;
  int sm = 0;
  /// Tests only, cuda: the kernel module is at Phase::Kernels (gpu
  /// dialect) and runs on the host through this GPU emulator library
  /// (kernels.emu.so, and a kernels.cubin for the runtime's fake driver).
  std::string cudaEmulatorLib;
};

/// Writes the artifact of `module`; warnings (no ptxas: PTX only) go to
/// `warnings`. On return the kernel module has been lowered further and
/// detached: `module` is the host side, `info` what the kernels recorded.
mlir::LogicalResult writeArtifact(mlir::ModuleOp module,
                                  const ArtifactOptions &options,
                                  KernelInfoMap &info, std::string &error,
                                  llvm::raw_ostream &warnings);

} // namespace loom

#endif // LOOM_TARGET_ARTIFACT_H
