//===- LoomDialect.td - The loom dialect definition ---------*- tablegen -*-===//
//
// The `loom` dialect: tensor-level, value-semantics, static-shape IR for
// training graphs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD

include "mlir/IR/OpBase.td"

def Loom_Dialect : Dialect {
  let name = "loom";
  let cppNamespace = "::loom";
  let summary = "Tensor-level IR for neural-network training graphs.";
  let description = [{
    The `loom` dialect holds a model's forward graph and, after Loom's training
    passes, its loss, backward pass and optimizer update. Values are ranked
    tensors with static shapes and value semantics; element types are `f64`,
    `f32`, `f16`, `bf16`, `i64`, `i32`, `i8` and `i1`.

    Conventions shared by every op:

    * Elementwise ops take operands of exactly the same type; implicit
      (numpy-style) broadcasting is made explicit by the importers with
      `loom.broadcast_in_dim`. This keeps every gradient rule shape-exact.
    * Parameters are not constants: they are arguments of the enclosing
      function marked `loom.param = "<name>"`, whose values live in a
      safetensors file beside the IR.
    * Locations carry the source: an op imported from ONNX node
      `"/fc1/MatMul"` has that name as its location.
    * Composite ops (`softmax`, `layer_norm`, `cross_entropy`, `gelu`) stay
      whole until code generation.
  }];
  let hasConstantMaterializer = 1;
  let useDefaultAttributePrinterParser = 0;
  let useDefaultTypePrinterParser = 0;
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_TD
