// RUN: loom-opt %s --loom-attach-loss | FileCheck %s

// Tests that a model that computes its own loss keeps it and drops its other
// outputs.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: -> (tensor<f32> {loom.output = "loss"})
// CHECK: %[[L:.+]] = loom.cross_entropy
// CHECK: return %[[L]] : tensor<f32>
func.func @forward(%x: tensor<4x3xf32> {loom.input = "x"}, %l: tensor<4xi64> {loom.input = "labels"}, %w: tensor<3x3xf32> {loom.param = "w"}) -> (tensor<4x3xf32> {loom.output = "logits"}, tensor<f32> {loom.output = "loss"}) {
  %y = loom.matmul %x, %w : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
  %loss = loom.cross_entropy %y, %l reduction = mean : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %y, %loss : tensor<4x3xf32>, tensor<f32>
}
