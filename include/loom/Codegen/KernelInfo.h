//===- KernelInfo.h - What the plan needs to know of each kernel -*- C++ -*-===//
//
// After loom-outline-kernels the kernels live in a module nested in the
// training module (`module @loom_kernels attributes {loom.kernels}`); each
// loom.fusion names its kernel by `loom.kernel`. The code-generation passes
// record there, as one dictionary attribute, what the plan writer needs to
// know about each kernel: its temporaries placed in the entry's arena and,
// on the GPU, its launches. The IR carries it, so every phase can be run
// and printed alone (`loom-opt`), and the serializers (Target/) read it.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_KERNELINFO_H
#define LOOM_CODEGEN_KERNELINFO_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

namespace loom {

/// Symbol name and marker attribute of the nested kernel module.
constexpr llvm::StringLiteral kKernelModuleName = "loom_kernels";
constexpr llvm::StringLiteral kKernelModuleAttr = "loom.kernels";
/// The dictionary of KernelInfo, kernel name -> entry, on the kernel module.
constexpr llvm::StringLiteral kKernelInfoAttr = "loom.kernel_info";
/// The kernel a loom.fusion runs.
constexpr llvm::StringLiteral kKernelAttr = "loom.kernel";
/// On a kernel between outlining and bufferization: the number of its
/// arguments, then pairs (result index, argument index) of a result that
/// loom-plan-memory placed on the bytes of an argument (a param or
/// optimizer state updated in place).
constexpr llvm::StringLiteral kInPlaceAttr = "loom.in_place";

/// Tensors without elements take no bytes and need no code: kernels neither
/// receive nor produce them (the bare-pointer calling convention has no
/// pointer for them either), and the plan gives them no buffer.
inline bool isEmptyTensor(mlir::Type type) {
  return mlir::cast<mlir::RankedTensorType>(type).getNumElements() == 0;
}

/// One GPU launch of a kernel: a `kernel` step of a CUDA plan.
struct GpuLaunch {
  std::string name;     // the .entry in the PTX/cubin
  std::string strategy; // pointwise, pointwise-vec<N>, warp-row, ...
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  int64_t sharedBytes = 0;
};

/// A temporary of a kernel (CPU or GPU), placed in its entry's arena after
/// the planned values (all kernels of an entry run one after another, so they
/// share that space).
struct KernelScratch {
  mlir::Type type; // a static memref type
  int64_t offset;  // bytes from the start of the scratch space
};

/// How one outlined kernel (one loom.fusion) runs: its temporaries and, on
/// the GPU, its launches in order, each taking the fusion's inputs, outputs,
/// then its scratch buffers (on the CPU, the one kernel function takes them
/// in that order).
struct KernelInfo {
  std::vector<GpuLaunch> launches;
  std::vector<KernelScratch> scratch;
  int64_t scratchBytes = 0;

  /// Places a temporary of static `type` after the others, at an
  /// `align`-byte boundary.
  void addScratch(mlir::MemRefType type, int64_t align) {
    int64_t bytes =
        type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
    scratch.push_back(KernelScratch{type, scratchBytes});
    scratchBytes =
        llvm::alignTo(scratchBytes + std::max<int64_t>(bytes, 1), align);
  }
};
using KernelInfoMap = std::map<std::string, KernelInfo>;

/// The kernel module nested in `module`, or null before outlining.
mlir::ModuleOp getKernelModule(mlir::ModuleOp module);

/// Detaches the kernel module from `module` (for the serializers: the host
/// side and the kernels are written to different files); null if none.
mlir::OwningOpRef<mlir::ModuleOp> takeKernelModule(mlir::ModuleOp module);

/// The KernelInfo recorded on `kernels` (empty if none).
KernelInfoMap readKernelInfo(mlir::ModuleOp kernels);

/// Records `info` on `kernels`, replacing what was there.
void writeKernelInfo(mlir::ModuleOp kernels, const KernelInfoMap &info);

} // namespace loom

#endif // LOOM_CODEGEN_KERNELINFO_H
