//===- Passes.td - Loom's conversion passes -----------------*- tablegen -*-===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertLoomToLinalgPass : Pass<"convert-loom-to-linalg", "mlir::func::FuncOp"> {
  let summary = "Lowers loom ops (all but matmul) to linalg on tensors.";
  let description = [{
    Elementwise ops become `linalg.generic` with identity maps; reductions,
    softmax, norms and losses become reductions plus elementwise generics;
    broadcasts, transposes and slices become generics with the matching
    indexing maps; pad and concat become `tensor.insert_slice`; gather,
    pooling and the convolution gradients read their inputs with
    `tensor.extract` at computed indices; scatter_add is an `scf.for` nest.
    Used on the bodies of `loom.fusion` regions after they are outlined
    into kernel functions. Index operands (gather, scatter_add, labels) are
    clamped into range: a compiled kernel never reads or writes outside its
    buffers, where the interpreter reports the bad index.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::scf::SCFDialect"];
}

#endif // LOOM_CONVERSION_PASSES_TD
