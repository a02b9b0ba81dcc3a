// RUN: loom-opt %s --split-input-file --loom-batch-norm-train --verify-diagnostics

// Tests that a batch norm that trains needs buffer arguments as its
// running statistics.
func.func @forward(%x: tensor<2x3xf32> {loom.input = "x"},
                   %s: tensor<3xf32> {loom.param = "s"},
                   %m: tensor<3xf32> {loom.param = "m"})
    -> (tensor<2x3xf32> {loom.output = "y"}) {
  // expected-error @+1 {{a batch norm that trains (it has a momentum) needs running statistics that are arguments marked loom.buffer}}
  %y = loom.batch_norm %x, %s, %s, %m, %m epsilon = 1.0e-05 momentum = 0.9 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// Tests that one buffer cannot be the running statistics of two batch
// norms that train (it would have two updates).
func.func @forward(%x: tensor<2x3xf32> {loom.input = "x"},
                   %s: tensor<3xf32> {loom.param = "s"},
                   %rm: tensor<3xf32> {loom.buffer = "rm"},
                   %rv: tensor<3xf32> {loom.buffer = "rv"},
                   %rv2: tensor<3xf32> {loom.buffer = "rv2"})
    -> (tensor<2x3xf32> {loom.output = "y"}) {
  // expected-note @+1 {{the other batch norm}}
  %a = loom.batch_norm %x, %s, %s, %rm, %rv epsilon = 1.0e-05 momentum = 0.9 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // expected-error @+1 {{buffer 'rm' is the running statistics of two batch norms that train; it can have one update only}}
  %b = loom.batch_norm %a, %s, %s, %rm, %rv2 epsilon = 1.0e-05 momentum = 0.9 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %b : tensor<2x3xf32>
}

// -----

// Tests that the pass needs the training forward.
// expected-error @+1 {{loom-batch-norm-train: the module has no @forward function with a body}}
module {
  func.func @predict(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    return %x : tensor<2x3xf32>
  }
}
