//===- CpuCollapseDims.h - Elementwise loops over contiguous runs -*- C++ -*-===//
//
// loom-cpu-collapse-dims (include/loom/Conversion/Passes.td), run by the
// CPU kernel pipeline (loom-lower-kernels-to-llvm,
// lib/Codegen/LowerKernelsToLLVM.cpp) before the loops are made.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_CPUCOLLAPSEDIMS_CPUCOLLAPSEDIMS_H
#define LOOM_CONVERSION_CPUCOLLAPSEDIMS_CPUCOLLAPSEDIMS_H

#include "mlir/Pass/Pass.h"

namespace loom {

#define GEN_PASS_DECL_LOOMCPUCOLLAPSEDIMSPASS
#define GEN_PASS_REGISTRATION_LOOMCPUCOLLAPSEDIMSPASS
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_CPUCOLLAPSEDIMS_CPUCOLLAPSEDIMS_H
