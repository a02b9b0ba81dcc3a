//===- LoomInterfaces.td - What passes ask of loom ops ------*- tablegen -*-===//
//
// Every property a pass needs from an op is declared here as an interface, so
// no pass keeps a list of op names and a user's new op plugs in the same way.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD
#define LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD

include "mlir/IR/OpBase.td"

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    An op that `loom-autodiff` can differentiate. `buildVJP` receives one
    cotangent per result (null where a result has none) and appends one
    cotangent per operand (null where the operand gets none: integer,
    boolean and index operands, or operands that do not depend on the
    result). The builder's insertion point is where the backward ops go; the
    op's own operands and results may be used by the rule (the remat pass
    decides later whether they are saved or recomputed).
  }];
  let methods = [
    InterfaceMethod<
      "Builds the vector-Jacobian product of this op.",
      "::llvm::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandCotangents)>,
    InterfaceMethod<
      "Whether operand `index` can receive a cotangent.",
      "bool", "isDifferentiableOperand", (ins "unsigned":$index), "",
      [{
        return ::mlir::isa<::mlir::FloatType>(::mlir::getElementTypeOrSelf(
            $_op->getOperand(index).getType()));
      }]>,
  ];
}

def FusionKindOpInterface : OpInterface<"FusionKindOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    How `loom-fuse` may group the op: `pointwise` (elementwise, fuses with
    anything of the same iteration space), `injective` (each output element
    reads one input element: broadcasts, transposes, slices; fuses as a
    prologue), `reduction` (a row reduction with its pointwise neighbours),
    `contraction` (a GEMM or convolution: a library call with an epilogue),
    `opaque` (a kernel of its own).
  }];
  let methods = [
    StaticInterfaceMethod<"Returns the op's fusion kind.",
      "::loom::FusionKind", "getFusionKind", (ins)>,
  ];
}

def PrecisionClassOpInterface : OpInterface<"PrecisionClassOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    What `loom-mixed-precision` does with the op: `low_precision` (computes in
    bf16/fp16 with f32 accumulation: matmul, conv), `follow` (computes in the
    precision of its inputs: pointwise and data movement), `keep_f32`
    (numerically sensitive: norms, softmax, losses, reductions, optimizer
    updates).
  }];
  let methods = [
    StaticInterfaceMethod<"Returns the op's mixed-precision class.",
      "::loom::PrecisionClass", "getPrecisionClass", (ins)>,
  ];
}

def CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::loom";
  let description = [{
    Static cost estimates used by the remat, pipeline and fusion passes and by
    `loomc --report`. FLOPs count a fused multiply-add as two; bytes count
    every operand read once and every result written once.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations the op performs.",
      "int64_t", "getFlopCount", (ins), "",
      [{ return ::loom::detail::defaultFlopCount($_op); }]>,
    InterfaceMethod<"Bytes the op reads and writes.",
      "int64_t", "getByteCount", (ins), "",
      [{ return ::loom::detail::defaultByteCount($_op); }]>,
  ];
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_TD
