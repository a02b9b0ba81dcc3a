// RUN: loom-opt %s --loom-fuse | FileCheck %s

// Tests that a softmax of other logits, or over another axis, does not
// join a cross-entropy's kernel: each keeps one reduction.
// CHECK-LABEL: func.func @other(
// CHECK:         loom.fusion
// CHECK:           loom.cross_entropy
// CHECK:           loom.yield
// CHECK:         loom.fusion
// CHECK:           loom.softmax
// CHECK:           loom.yield
// CHECK:         loom.fusion
// CHECK:           loom.softmax
// CHECK:           loom.yield
func.func @other(%a: tensor<16x10xf32>, %b: tensor<16x10xf32>, %labels: tensor<16xi64>) -> (tensor<f32>, tensor<16x10xf32>, tensor<16x10xf32>) {
  %l = loom.cross_entropy %a, %labels reduction = mean : (tensor<16x10xf32>, tensor<16xi64>) -> tensor<f32>
  %s = loom.softmax %b axis = 1 : tensor<16x10xf32>
  %t = loom.softmax %a axis = 0 : tensor<16x10xf32>
  return %l, %s, %t : tensor<f32>, tensor<16x10xf32>, tensor<16x10xf32>
}
