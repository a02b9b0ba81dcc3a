// RUN: loom-opt %s --loom-autodiff --loom-fuse | FileCheck %s

// Tests that the gradient of cross_entropy is one kernel after the loss:
// the softmax with the one-hot labels and the product as its epilogue, so
// that no logits-sized one-hot tensor is written between kernels.
// CHECK-LABEL: func.func @forward_backward(
// CHECK:         loom.fusion
// CHECK:           loom.cross_entropy
// CHECK:           loom.yield
// CHECK:         loom.fusion
// CHECK:           loom.softmax
// CHECK-NOT:       loom.yield
// CHECK:           loom.compare eq
// CHECK-NOT:       loom.yield
// CHECK:           loom.sub
// CHECK-NOT:       loom.yield
// CHECK:           loom.mul
// CHECK:           loom.yield
// CHECK-NOT:     loom.fusion
// CHECK:         return
func.func @forward(%logits: tensor<16x1000xf32> {loom.param = "logits"}, %labels: tensor<16xi64> {loom.input = "labels"}) -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.cross_entropy %logits, %labels reduction = mean : (tensor<16x1000xf32>, tensor<16xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
