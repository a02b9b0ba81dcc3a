//===- Artifact.cpp - The artifact directory loom-run runs ----------------===//

#include "loom/Target/Artifact.h"

#include "loom/Target/Cuda.h"
#include "loom/Target/Plan.h"
#include "loom/Target/SharedObject.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
using namespace loom;

namespace {
struct ArtifactWriter {
  const ArtifactOptions &options;
  std::string &error;

  std::string inDir(StringRef name) const {
    SmallString<256> path(options.dir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  }

  LogicalResult writeFile(StringRef name,
                          llvm::function_ref<void(llvm::raw_ostream &)> write) {
    auto out = openOutputFile(inDir(name), &error);
    if (!out)
      return failure();
    write(out->os());
    out->keep();
    return success();
  }

  /// kernels.ptx and, where ptxas is found, kernels.cubin.
  LogicalResult writeCuda(ModuleOp nvvm, PlanTarget &target,
                          llvm::raw_ostream &warnings) {
    FailureOr<std::string> ptx = translateToPtx(nvvm, options.sm, error);
    if (failed(ptx) || failed(writeFile("kernels.ptx", [&](auto &os) {
          os << *ptx;
        })))
      return failure();
    target.ptx = "kernels.ptx";
    std::string ptxas = findPtxas();
    if (ptxas.empty()) {
      warnings << "loomc: warning: no ptxas (the CUDA toolkit's; set "
                  "LOOM_PTXAS or CUDA_HOME): the artifact has PTX only, "
                  "which the driver compiles when it loads\n";
      return success();
    }
    if (failed(assembleCubin(*ptx, options.sm, ptxas, inDir("kernels.cubin"),
                             error)))
      return failure();
    target.kernels = "kernels.cubin";
    return success();
  }
};
} // namespace

LogicalResult loom::writeArtifact(ModuleOp module,
                                  const ArtifactOptions &options,
                                  KernelInfoMap &info, std::string &error,
                                  llvm::raw_ostream &warnings) {
  ArtifactWriter w{options, error};
  OwningOpRef<ModuleOp> kernels = takeKernelModule(module);
  if (!kernels) {
    error = "the module has no kernel module (the pipeline did not run "
            "loom-outline-kernels)";
    return failure();
  }
  info = readKernelInfo(*kernels);
  // Every kernel has an entry (the lowering records its scratch).
  bool hasKernels = !info.empty();
  PlanTarget target;
  target.kernelInfo = &info;
  if (!options.cuda) {
    if (hasKernels && failed(emitSharedObject(*kernels, w.inDir("kernels.so"),
                                              error)))
      return failure();
    if (hasKernels)
      target.kernels = "kernels.so";
  } else {
    target.target = "cuda";
    target.sm = options.sm;
    if (hasKernels && options.gpuKernelWriter) {
      FailureOr<std::string> file = options.gpuKernelWriter(
          *kernels, info, options.dir, options.sm, error);
      if (failed(file))
        return failure();
      target.kernels = *file;
    } else if (hasKernels && failed(w.writeCuda(*kernels, target, warnings))) {
      return failure();
    }
  }
  if (failed(writePlan(module, w.inDir("plan.json"), target,
                       options.sourceModel, error)))
    return failure();
  return w.writeFile("final.mlir",
                     [&](llvm::raw_ostream &os) { module.print(os); });
}
