// RUN: loom-opt %s --split-input-file --loom-autodiff --loom-fuse | FileCheck %s

// Tests that the loss and its gradient are one kernel: the softmax of the
// gradient joins the loss (same logits, class axis: loom-fuse lets it, and
// the kernel computes the row maxima and sums once), with the one-hot
// labels and the product as its epilogue, so that no logits-sized one-hot
// tensor is written between kernels.
// CHECK-LABEL: func.func @forward_backward(
// CHECK:         loom.fusion
// CHECK:           loom.cross_entropy
// CHECK-NOT:       loom.yield
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

// -----

// Tests that with an ignored label, the count of the labels that count (a
// reduction over the labels alone) is a kernel ahead of the loss, so that
// the loss and its gradient still share one.
// CHECK-LABEL: func.func @forward_backward(
// CHECK:         loom.fusion
// CHECK:           loom.compare ne
// CHECK:           loom.reduce_sum
// CHECK:           loom.yield
// CHECK:         loom.fusion
// CHECK:           loom.cross_entropy
// CHECK-NOT:       loom.yield
// CHECK:           loom.softmax
// CHECK:           loom.yield
// CHECK-NOT:     loom.fusion
// CHECK:         return
func.func @forward(%logits: tensor<16x1000xf32> {loom.param = "logits"}, %labels: tensor<16xi64> {loom.input = "labels"}) -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.cross_entropy %logits, %labels reduction = mean {ignore_index = -100 : i64} : (tensor<16x1000xf32>, tensor<16xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
