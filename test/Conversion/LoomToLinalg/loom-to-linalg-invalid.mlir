// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(convert-loom-to-linalg))' --verify-diagnostics

// Tests that matmul, a library GEMM, has no kernel lowering.
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{cannot lower 'loom.matmul' to a CPU kernel}}
  %c = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}

// Tests that a channels-last convolution, a plan conv step only, has no
// kernel lowering either: a kernel holding one is reported, not lowered
// as NCHW.
func.func @conv_channels_last(%x: tensor<1x5x5x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x5x5x4xf32> {
  // expected-error @below {{cannot lower 'loom.conv2d' to a CPU kernel}}
  %y = loom.conv2d %x, %w {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x5x5x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x5x5x4xf32>
  return %y : tensor<1x5x5x4xf32>
}
