// RUN: loom-opt %s --split-input-file --loom-attach-loss --verify-diagnostics
// RUN: not loom-opt %S/attach-loss.mlir --split-input-file --loom-attach-loss="loss=hinge" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown loss 'hinge'

// Tests that loss=auto refuses a model without a loss.
// expected-error @+1 {{the model does not compute a loss}}
func.func @forward(%x: tensor<4x3xf32> {loom.input = "x"}) -> (tensor<4x3xf32> {loom.output = "logits"}) {
  return %x : tensor<4x3xf32>
}

// -----

// Tests that a module without @forward is refused.
// expected-error @+1 {{the module has no @forward}}
module {
  func.func @other() {
    return
  }
}
