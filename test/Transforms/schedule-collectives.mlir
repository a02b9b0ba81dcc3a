// RUN: loom-opt %s --loom-schedule-collectives | FileCheck %s

// Tests that each collective moves up to just after its operand's producer,
// with the reshape that feeds it alone: the second gradient, computed
// first, is reduced first, while the other one is still being computed.
// The all-reduce of an argument goes first; the gather of a reduced
// gradient follows its reduction.

// CHECK-LABEL: func.func @step(
// CHECK-NEXT:    %[[L:.+]] = loom.all_reduce %arg2 over "dp"
// CHECK-NEXT:    %[[G2:.+]] = loom.matmul %arg0, %arg1
// CHECK-NEXT:    %[[F2:.+]] = loom.reshape %[[G2]]
// CHECK-NEXT:    %[[R2:.+]] = loom.reduce_scatter %[[F2]] over "dp"
// CHECK-NEXT:    %[[G1:.+]] = loom.matmul %[[G2]], %arg1
// CHECK-NEXT:    %[[F1:.+]] = loom.reshape %[[G1]]
// CHECK-NEXT:    %[[R1:.+]] = loom.reduce_scatter %[[F1]] over "dp"
// CHECK-NEXT:    %[[A:.+]] = loom.all_gather %[[R1]] over "dp"
// CHECK-NEXT:    return %[[R1]], %[[R2]], %[[L]], %[[A]]
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @step(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %loss: tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<16xf32>) {
    %g2 = loom.matmul %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %g1 = loom.matmul %g2, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %f1 = loom.reshape %g1 : tensor<4x4xf32> -> tensor<16xf32>
    %r1 = loom.reduce_scatter %f1 over "dp" reduce = mean : tensor<16xf32> -> tensor<8xf32>
    %f2 = loom.reshape %g2 : tensor<4x4xf32> -> tensor<16xf32>
    %r2 = loom.reduce_scatter %f2 over "dp" reduce = mean : tensor<16xf32> -> tensor<8xf32>
    %l = loom.all_reduce %loss over "dp" reduce = mean : tensor<f32>
    %all = loom.all_gather %r1 over "dp" : tensor<8xf32> -> tensor<16xf32>
    return %r1, %r2, %l, %all : tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<16xf32>
  }
}
