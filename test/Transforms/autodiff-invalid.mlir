// RUN: loom-opt %s --split-input-file --loom-autodiff --verify-diagnostics

// Tests that a module without @forward is rejected.
// expected-error @+1 {{loom-autodiff: the module has no @forward function with a body}}
module {
  func.func @model(%w: tensor<f32> {loom.param = "w"}) -> tensor<f32> {
    return %w : tensor<f32>
  }
}

// -----

// Tests that a model without a loom.param argument is rejected.
// expected-error @+1 {{model has no parameter to differentiate}}
func.func @forward(%x: tensor<4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.reduce_sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a loss that is not a 0-D tensor is rejected.
// expected-error @+1 {{loss must be a scalar (a 0-D float tensor), got 'tensor<4xf32>'}}
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}) -> tensor<4xf32> {
  %y = loom.exp %w : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that an integer loss is rejected.
// expected-error @+1 {{loss must be a scalar (a 0-D float tensor), got 'tensor<i64>'}}
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}) -> (tensor<i64> {loom.output = "loss"}) {
  %y = loom.cast %w : tensor<4xf32> -> tensor<4xi64>
  %l = loom.reduce_sum %y dims = [0] : tensor<4xi64> -> tensor<i64>
  return %l : tensor<i64>
}

// -----

// Tests that with several results, one must be named "loss".
// expected-error @+1 {{cannot tell which of the 2 results of @forward is the loss: mark it loom.output = "loss"}}
func.func @forward(%w: tensor<f32> {loom.param = "w"}) -> (tensor<f32>, tensor<f32>) {
  return %w, %w : tensor<f32>, tensor<f32>
}

// -----

// Tests that an op without a gradient rule on the path from a parameter to
// the loss is reported at the op, by name.
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  // expected-error @+1 {{'arith.addf' has no gradient rule (it does not implement DifferentiableOpInterface)}}
  %y = arith.addf %w, %w : tensor<4xf32>
  %l = loom.reduce_sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that an existing @forward_backward is not overwritten.
// expected-error @+1 {{loom-autodiff: the module already has @forward_backward}}
module {
  func.func @forward(%w: tensor<f32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
    return %w : tensor<f32>
  }
  func.func @forward_backward(%w: tensor<f32>) -> tensor<f32> {
    return %w : tensor<f32>
  }
}

// -----

// Tests that a channels-last convolution (which loom-channels-last makes
// after autodiff) is refused rather than differentiated as NCHW.
func.func @forward(%x: tensor<1x5x5x4xf32> {loom.input = "x"}, %w: tensor<4x4x3x3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  // expected-error @+2 {{'loom.conv2d' op has no gradient in channels-last form (loom-channels-last runs after autodiff)}}
  // expected-error @+1 {{failed to build the gradient of 'loom.conv2d'}}
  %y = loom.conv2d %x, %w {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x5x5x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x5x5x4xf32>
  %l = loom.reduce_sum %y dims = [0, 1, 2, 3] : tensor<1x5x5x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
