//===- CpuCodegen.h - Kernels, plan and artifact for the CPU ----*- C++ -*-===//
//
// The last phases of `loomc --target=cpu`: every loom.fusion region of a
// fused, memory-planned module becomes one kernel function (lowered through
// linalg, bufferization and loops to LLVM, then to native code in one shared
// object linked with lld), and every entry point becomes a list of steps
// over its arena (docs/plan-format.md: kernel, gemm, copy), written as
// plan.json.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_CPUCODEGEN_H
#define LOOM_CODEGEN_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OwningOpRef.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

namespace loom {

/// One GPU launch of a kernel: a `kernel` step of a CUDA plan.
struct GpuLaunch {
  std::string name;               // the .entry in the PTX/cubin
  std::string strategy;           // pointwise, pointwise-vec<N>, warp-row, ...
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
    scratchBytes = llvm::alignTo(scratchBytes + std::max<int64_t>(bytes, 1),
                                 align);
  }
};
using KernelInfoMap = std::map<std::string, KernelInfo>;

/// Outlines each loom.fusion of `module` into a kernel function (tensor
/// semantics, still loom ops) of a new module. The kernel of the fusion op
/// `op` is named by its `loom.kernel` attribute, set here.
mlir::OwningOpRef<mlir::ModuleOp> outlineKernels(mlir::ModuleOp module);

/// Runs a textual pass pipeline (as `loom-opt` spells it inside
/// `builtin.module(...)`) on `module`; the upstream passes codegen uses are
/// registered on first use.
mlir::LogicalResult runCodegenPipeline(mlir::ModuleOp module,
                                       llvm::StringRef pipeline);

/// Lowers outlined kernels to linalg on buffers: loom to linalg, elementwise
/// fusion, one-shot bufferization with results as out-params (inputs, then
/// outputs), memref.copy as linalg.copy. Temporaries stay memref.allocs; with
/// `deallocate` they are freed (the CPU), without it they are left for the
/// caller to place (the GPU gives them arena space).
mlir::LogicalResult bufferizeKernels(mlir::ModuleOp kernels, bool deallocate);

/// Lowers a module of outlined kernels to the LLVM dialect: loom to linalg,
/// elementwise fusion, one-shot bufferization with results as out-params,
/// loops, LLVM. Kernels take bare pointers (inputs, outputs, then scratch:
/// their static temporaries, recorded in `info` for the plan to place in the
/// arena instead of a malloc per call; others are malloc'd and freed). Parallel
/// loops with at least `minParallelWork` work (loom-cpu-parallel-loops) run
/// on an OpenMP team; 0: every loop sequential, no OpenMP.
mlir::LogicalResult lowerKernelsToLLVM(mlir::ModuleOp kernels,
                                       KernelInfoMap &info,
                                       int64_t minParallelWork = 32768);

/// Lowers kernels on buffers (linalg, vector, scf, memref, func) to the LLVM
/// dialect for the host: the second half of lowerKernelsToLLVM.
mlir::LogicalResult lowerHostKernelsToLLVM(mlir::ModuleOp kernels);

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

/// Compiles an LLVM-dialect kernel module to a shared object at `path` for
/// the host CPU (LLVM -O3, then ld.lld). Each kernel is exported with the
/// plan's ABI `void name(void **buffers)`; so is each emulated launch, and
/// then the object links `emulatorLibrary` (test/lib/GpuEmulator).
mlir::LogicalResult
emitSharedObject(mlir::ModuleOp kernels, const std::string &path,
                 std::string &error,
                 llvm::ArrayRef<EmulatedLaunch> emulated = {},
                 const std::string &emulatorLibrary = "");


/// What plan.json says about the target and its code.
struct PlanTarget {
  std::string target = "cpu";  // cpu or cuda
  std::string kernels;         // file in the artifact, empty: null
  std::string ptx;             // cuda: PTX file, empty: null
  int sm = 0;                  // cuda: the cubin's architecture (e.g. 90)
  const KernelInfoMap *kernelInfo = nullptr; // scratch (and launches) per kernel
};

/// Writes plan.json for the fused, planned `module` (docs/plan-format.md).
mlir::LogicalResult writePlan(mlir::ModuleOp module, const std::string &path,
                              const PlanTarget &target,
                              const std::string &sourceModel,
                              std::string &error);

} // namespace loom

#endif // LOOM_CODEGEN_CPUCODEGEN_H
