// RUN: loom-opt %s --split-input-file --loom-fold-transposes | FileCheck %s

// Tests that a transposed matmul operand (a tied language-model head's
// Transpose(wte)) becomes the transpose_b flag, and that the transpose,
// now unread, is gone.
// CHECK-LABEL: func.func @tied_head(
// CHECK-SAME:    %[[H:.*]]: tensor<16x8xf32>, %[[E:.*]]: tensor<32x8xf32>
// CHECK-NOT:     loom.transpose
// CHECK:         loom.matmul %[[H]], %[[E]] {transpose_b}
func.func @tied_head(%h: tensor<16x8xf32>, %wte: tensor<32x8xf32>) -> tensor<16x32xf32> {
  %t = loom.transpose %wte perm = [1, 0] : tensor<32x8xf32> -> tensor<8x32xf32>
  %y = loom.matmul %h, %t : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

// Tests that the only reader transposing a product gets it computed
// transposed, (A B)^T = B^T A^T: the gradient of that head's weight,
// transposed back to the table's layout.
// CHECK-LABEL: func.func @transposed_product(
// CHECK-SAME:    %[[H:.*]]: tensor<16x8xf32>, %[[DY:.*]]: tensor<16x32xf32>
// CHECK-NOT:     loom.transpose
// CHECK:         %[[G:.*]] = loom.matmul %[[DY]], %[[H]] {transpose_a} : (tensor<16x32xf32>, tensor<16x8xf32>) -> tensor<32x8xf32>
// CHECK:         return %[[G]]
func.func @transposed_product(%h: tensor<16x8xf32>, %dy: tensor<16x32xf32>) -> tensor<32x8xf32> {
  %g = loom.matmul %h, %dy {transpose_a} : (tensor<16x8xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %t = loom.transpose %g perm = [1, 0] : tensor<8x32xf32> -> tensor<32x8xf32>
  return %t : tensor<32x8xf32>
}

// -----

// Tests what stays: a transpose read by something else too keeps existing
// (the matmul still reads it in place), a permutation of other dimensions
// is not a GEMM flag, and a product with a second reader is not swapped.
// CHECK-LABEL: func.func @kept(
// CHECK:         %[[T:.*]] = loom.transpose %{{.*}} perm = [1, 0]
// CHECK:         loom.matmul %{{.*}}, %{{.*}} {transpose_b}
// CHECK:         loom.transpose %{{.*}} perm = [1, 0, 2]
// CHECK:         loom.matmul
// CHECK:         %[[P:.*]] = loom.matmul
// CHECK:         loom.transpose %[[P]] perm = [1, 0]
func.func @kept(%h: tensor<16x8xf32>, %w: tensor<32x8xf32>, %x: tensor<4x2x8xf32>,
                %y: tensor<2x8x8xf32>)
    -> (tensor<16x32xf32>, tensor<8x32xf32>, tensor<2x4x8xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
  %t = loom.transpose %w perm = [1, 0] : tensor<32x8xf32> -> tensor<8x32xf32>
  %a = loom.matmul %h, %t : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  %xt = loom.transpose %x perm = [1, 0, 2] : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %b = loom.matmul %xt, %y : (tensor<2x4x8xf32>, tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
  %p = loom.matmul %h, %h {transpose_b} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
  %pt = loom.transpose %p perm = [1, 0] : tensor<16x16xf32> -> tensor<16x16xf32>
  return %a, %t, %b, %p, %pt : tensor<16x32xf32>, tensor<8x32xf32>, tensor<2x4x8xf32>, tensor<16x16xf32>, tensor<16x16xf32>
}
