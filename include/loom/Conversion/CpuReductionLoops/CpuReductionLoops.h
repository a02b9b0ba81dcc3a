//===- CpuReductionLoops.h - Reductions with register accumulators -*- C++ -*-===//
//
// loom-cpu-reduction-loops (include/loom/Conversion/Passes.td), run by the
// CPU kernel pipeline (loom-lower-kernels-to-llvm, lib/Codegen/LowerKernelsToLLVM.cpp) before
// convert-linalg-to-parallel-loops.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_CPUREDUCTIONLOOPS_CPUREDUCTIONLOOPS_H
#define LOOM_CONVERSION_CPUREDUCTIONLOOPS_CPUREDUCTIONLOOPS_H

#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL_LOOMCPUREDUCTIONLOOPSPASS
#define GEN_PASS_REGISTRATION_LOOMCPUREDUCTIONLOOPSPASS
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_CPUREDUCTIONLOOPS_CPUREDUCTIONLOOPS_H
