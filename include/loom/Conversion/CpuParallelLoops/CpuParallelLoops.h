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

namespace loom {

#define GEN_PASS_DECL_LOOMCPUPARALLELLOOPSPASS
#define GEN_PASS_REGISTRATION_LOOMCPUPARALLELLOOPSPASS
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_CPUPARALLELLOOPS_CPUPARALLELLOOPS_H
