// RUN: loom-opt %s --split-input-file --loom-gemm-epilogues | FileCheck %s

// Tests that a linear layer's bias add (the bias broadcast over the rows of
// a [B, T, N] product) moves into the GEMM, in either operand order, and
// that the add and the broadcast's use are gone.
// CHECK-LABEL: func.func @linear(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8x16xf32>, %[[W:[^:]+]]: tensor<16x32xf32>, %[[C:[^:]+]]: tensor<32xf32>)
// CHECK:         %[[Y:.+]] = loom.matmul %[[X]], %[[W]] bias(%[[C]] : tensor<32xf32>) : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK:         %[[Z:.+]] = loom.matmul %[[X]], %[[W]] bias(%[[C]] : tensor<32xf32>) : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
// CHECK-NOT:     loom.add
// CHECK-NOT:     loom.broadcast_in_dim
// CHECK:         return %[[Y]], %[[Z]]
func.func @linear(%x: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %c: tensor<32xf32>) -> (tensor<2x8x32xf32>, tensor<2x8x32xf32>) {
  %p = loom.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %b = loom.broadcast_in_dim %c dims = [2] : tensor<32xf32> -> tensor<2x8x32xf32>
  %y = loom.add %p, %b : tensor<2x8x32xf32>
  %q = loom.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  %z = loom.add %b, %q : tensor<2x8x32xf32>
  return %y, %z : tensor<2x8x32xf32>, tensor<2x8x32xf32>
}

// -----

// Tests what stays an add: a product read elsewhere too, a vector broadcast
// along another dimension (a bias per row), a bias that is computed rather
// than a parameter, and f64.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT:     bias(
// CHECK-COUNT-4: loom.add
// CHECK-NOT:     bias(
func.func @kept(%x: tensor<8x16xf32>, %w: tensor<16x8xf32>, %c: tensor<8xf32>,
                %x64: tensor<8x16xf64>, %w64: tensor<16x8xf64>, %c64: tensor<8xf64>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf64>) {
  %p = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %b = loom.broadcast_in_dim %c dims = [1] : tensor<8xf32> -> tensor<8x8xf32>
  %y = loom.add %p, %b : tensor<8x8xf32>
  %q = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %rows = loom.broadcast_in_dim %c dims = [0] : tensor<8xf32> -> tensor<8x8xf32>
  %z = loom.add %q, %rows : tensor<8x8xf32>
  %r = loom.matmul %x, %w : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %c2 = loom.exp %c : tensor<8xf32>
  %b2 = loom.broadcast_in_dim %c2 dims = [1] : tensor<8xf32> -> tensor<8x8xf32>
  %u = loom.add %r, %b2 : tensor<8x8xf32>
  %p64 = loom.matmul %x64, %w64 : (tensor<8x16xf64>, tensor<16x8xf64>) -> tensor<8x8xf64>
  %b64 = loom.broadcast_in_dim %c64 dims = [1] : tensor<8xf64> -> tensor<8x8xf64>
  %v = loom.add %p64, %b64 : tensor<8x8xf64>
  return %y, %p, %z, %u, %v : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf64>
}
