//===- Cuda.cpp - PTX and cubin of the GPU kernels ------------------------===//
//
// The kernel module in the NVVM dialect becomes PTX through LLVM's NVPTX
// backend (libdevice linked where the kernels call its math), and a cubin
// assembled by the CUDA toolkit's ptxas.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Cuda.h"

#include "loom/Codegen/Kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace loom;

FailureOr<std::string> loom::translateToPtx(ModuleOp gpuKernels, int sm,
                                            std::string &error) {
  DialectRegistry registry;
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  gpuKernels.getContext()->appendDialectRegistry(registry);
  // Math the NVVM lowering leaves to libdevice (__nv_expf, __nv_logf, ...)
  // is linked from the CUDA toolkit's libdevice.
  bool needsLibdevice = false;
  gpuKernels.walk([&](LLVM::LLVMFuncOp f) {
    needsLibdevice |= f.isExternal() && f.getName().starts_with("__nv_");
  });
  std::string link;
  if (needsLibdevice) {
    std::string libdevice = findLibdevice();
    if (libdevice.empty()) {
      error = "the kernels call CUDA's libdevice (e.g. __nv_expf), and no "
              "libdevice.10.bc was found (set CUDA_HOME to the CUDA "
              "toolkit)";
      return failure();
    }
    link = " l=" + libdevice;
  }
  if (failed(runKernelPipeline(
          gpuKernels, "nvvm-attach-target{chip=sm_" + std::to_string(sm) +
                          " O=3" + link +
                          "},gpu-module-to-binary{format=isa}"))) {
    error = "translating the kernels to PTX failed";
    return failure();
  }
  for (auto binary : gpuKernels.getOps<gpu::BinaryOp>())
    for (Attribute a : binary.getObjects())
      if (auto object = dyn_cast<gpu::ObjectAttr>(a))
        return object.getObject().str();
  error = "the NVPTX backend produced no PTX";
  return failure();
}

std::string loom::findLibdevice() {
  SmallVector<std::string> roots;
  if (auto home = llvm::sys::Process::GetEnv("CUDA_HOME"))
    roots.push_back(*home);
  roots.push_back("/usr/local/cuda");
  roots.push_back("/usr/lib/cuda"); // Debian's nvidia-cuda-toolkit
  for (const std::string &root : roots) {
    std::string path = root + "/nvvm/libdevice/libdevice.10.bc";
    if (llvm::sys::fs::exists(path))
      return path;
  }
  return "";
}

std::string loom::findPtxas() {
  if (auto p = llvm::sys::Process::GetEnv("LOOM_PTXAS"))
    return *p;
  SmallVector<std::string> candidates;
  if (auto home = llvm::sys::Process::GetEnv("CUDA_HOME"))
    candidates.push_back(*home + "/bin/ptxas");
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  for (const std::string &c : candidates)
    if (llvm::sys::fs::can_execute(c))
      return c;
  if (auto p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  return "";
}

LogicalResult loom::assembleCubin(const std::string &ptx, int sm,
                                  const std::string &ptxas,
                                  const std::string &cubinPath,
                                  std::string &error) {
  std::string ptxPath = cubinPath + ".ptx.tmp";
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec, llvm::sys::fs::OF_Text);
    if (ec) {
      error = "cannot write " + ptxPath + ": " + ec.message();
      return failure();
    }
    os << ptx;
  }
  std::string arch = "-arch=sm_" + std::to_string(sm);
  std::string log = cubinPath + ".ptxas.log";
  SmallVector<StringRef> args{ptxas, arch, "-O3", "-o", cubinPath, ptxPath};
  std::optional<StringRef> redirects[] = {std::nullopt, StringRef(log),
                                          StringRef(log)};
  std::string message;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0,
                                     0, &message);
  llvm::sys::fs::remove(ptxPath);
  if (rc != 0) {
    auto buffer = llvm::MemoryBuffer::getFile(log);
    error = "ptxas (" + ptxas + ") failed" +
            (message.empty() ? " with exit status " + std::to_string(rc)
                             : ": " + message) +
            (buffer ? "\n" + (*buffer)->getBuffer().str() : "");
    llvm::sys::fs::remove(log);
    return failure();
  }
  llvm::sys::fs::remove(log);
  return success();
}

