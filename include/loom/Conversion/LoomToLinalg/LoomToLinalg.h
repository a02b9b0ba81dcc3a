//===- LoomToLinalg.h - Lower loom ops to linalg on tensors -----*- C++ -*-===//
//
// Every loom op that can sit in a kernel (all but matmul, which is a library
// GEMM) becomes linalg.generic ops on tensors, with tensor, arith, math and
// scf ops for data movement and the few ops linalg does not express
// (scatter_add). The semantics are those of the reference interpreter
// (lib/Interp/Interpreter.cpp), which is what compiled kernels are tested
// against.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H
#define LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/Pass.h"

namespace loom {

/// Rewrites every loom op in `func` (not inside nested regions) into linalg,
/// tensor, arith, math and scf ops. Fails, with a diagnostic at the op, on an
/// op that has no lowering (matmul, fusion).
mlir::LogicalResult lowerLoomToLinalg(mlir::func::FuncOp func);

/// The 16-bit tensor that `v` widens, where `v` is the result of a
/// linalg.generic that only extends each element of one same-shaped float
/// input to a wider float type (a lowered `loom.cast` from bf16 or f16 to
/// f32, which loom-widen-keep-f32 puts before the f32 math of a keep_f32
/// op); null otherwise. Its readers widen each element they load instead:
/// the kernel fusion fuses it into every reader, and a gather reads through
/// it, so no f32 copy of the tensor is materialized.
mlir::Value widenedSource(mlir::Value v);

/// The dialects the lowering creates.
void registerLoomToLinalgDependentDialects(mlir::DialectRegistry &registry);

#define GEN_PASS_DECL_CONVERTLOOMTOLINALGPASS
#define GEN_PASS_REGISTRATION_CONVERTLOOMTOLINALGPASS
#include "loom/Conversion/Passes.h.inc"

} // namespace loom

#endif // LOOM_CONVERSION_LOOMTOLINALG_LOOMTOLINALG_H
