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

#include <functional>
#include <string>

namespace loom {

/// Writes the GPU kernels otherwise than as PTX and a cubin (the tests' GPU
/// emulator, test/lib/GpuEmulator): given the kernel module as
/// loom-map-kernels-to-gpu left it (Phase::Kernels) and what the kernels
/// recorded, writes its files into `dir` and returns the file plan.json
/// names as "kernels".
using GpuKernelWriter = std::function<mlir::FailureOr<std::string>(
    mlir::ModuleOp kernels, const KernelInfoMap &info, const std::string &dir,
    int sm, std::string &error)>;

struct ArtifactOptions {
  std::string dir;         // the artifact directory (it exists)
  std::string sourceModel; // recorded in plan.json (absolute path)
  bool cuda = false;
  int sm = 0;
  /// cuda: when set, the kernel module is at Phase::Kernels (gpu dialect)
  /// and this writes it.
  GpuKernelWriter gpuKernelWriter;
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
