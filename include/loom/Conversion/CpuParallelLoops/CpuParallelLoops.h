//===- CpuParallelLoops.h - Which parallel loops get threads ----*- C++ -*-===//
//
// loom-cpu-parallel-loops (include/loom/Conversion/Passes.td), run by the
// CPU kernel pipeline (loom-lower-kernels-to-llvm, lib/Codegen/LowerKernelsToLLVM.cpp) between
// convert-linalg-to-parallel-loops and convert-scf-to-openmp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_CPUPARALLELLOOPS_CPUPARALLELLOOPS_H
#define LOOM_CONVERSION_CPUPARALLELLOOPS_CPUPARALLELLOOPS_H

#include "mlir/Pass/Pass.h"

#include <cstdint>

namespace loom {

/// The work (iterations times the trip counts of the loops inside) below
/// which a kernel loop runs on one thread: the default of
/// loom-cpu-parallel-loops, loom-lower-kernels-to-llvm, loom-codegen-cpu and
/// `loomc --cpu-parallel-min-work`. Starting a loop on a team whose
/// threads spin between loops (the runtime's default with oneDNN, docs/
/// loom-run.md) costs a few microseconds: 16384 was measured best of 4096,
/// 16384, 65536 and 262144 on MobileNetV3, ResNet-18 and GPT-2 (when the
/// threads slept after every loop, 262144 was; docs/performance.md).
constexpr int64_t kDefaultMinParallelWork = 16384;

#define GEN_PASS_DECL_LOOMCPUPARALLELLOOPSPASS
#define GEN_PASS_REGISTRATION_LOOMCPUPARALLELLOOPSPASS
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_CPUPARALLELLOOPS_CPUPARALLELLOOPS_H
