//===- loomc-emu.cpp - loomc whose CUDA kernels run on the host (tests) ---===//
//
// `loomc-emu MODEL --target=cuda:sm_NN --cuda-emulator-lib=libloom_gpu_emu.so
// -o OUT.loom` is loomc, but the artifact's kernels are host code run by the
// GPU emulator (EmulateGpuOnHost.h), for the runtime's fake CUDA driver:
// CUDA artifacts run end to end on machines without a GPU.
//
//===----------------------------------------------------------------------===//

#include "EmulateGpuOnHost.h"

#include "loom/Driver/Loomc.h"

#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

int main(int argc, char **argv) {
  constexpr llvm::StringLiteral flag = "--cuda-emulator-lib=";
  std::string library;
  std::vector<char *> args;
  for (int i = 0; i < argc; ++i) {
    llvm::StringRef arg(argv[i]);
    if (i > 0 && arg.consume_front(flag))
      library = arg.str();
    else
      args.push_back(argv[i]);
  }
  loom::LoomcExtensions extensions;
  if (!library.empty()) {
    extensions.gpuKernelWriterFlag = flag.drop_back().str();
    extensions.gpuKernelWriter =
        [library](mlir::ModuleOp kernels, const loom::KernelInfoMap &info,
                  const std::string &dir, int sm, std::string &error) {
          return loom::writeEmulatedKernels(kernels, info, dir, sm, library,
                                            error);
        };
  }
  return loom::loomcMain(static_cast<int>(args.size()), args.data(),
                         extensions);
}
