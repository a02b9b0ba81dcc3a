// RUN: loom-opt %s --split-input-file --canonicalize | FileCheck %s

// A position embedding's gradient: scatter_add over indices 0..n-1 of an
// axis of size n puts every row where it already is, so it folds away.
// CHECK-LABEL: func.func @scatter_add_arange
// CHECK-NOT: loom.scatter_add
// CHECK: return %arg0
func.func @scatter_add_arange(%dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ids = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %g = loom.scatter_add %dy[%ids] axis = 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Any other order is a real permutation (or accumulates): no fold.
// CHECK-LABEL: func.func @scatter_add_permuted
// CHECK: loom.scatter_add
func.func @scatter_add_permuted(%dy: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ids = loom.constant dense<[1, 0, 2, 3]> : tensor<4xi64>
  %g = loom.scatter_add %dy[%ids] axis = 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// A table larger than the indices (an embedding): no fold.
// CHECK-LABEL: func.func @scatter_add_embedding
// CHECK: loom.scatter_add
func.func @scatter_add_embedding(%dy: tensor<4x8xf32>) -> tensor<6x8xf32> {
  %ids = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %g = loom.scatter_add %dy[%ids] axis = 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<6x8xf32>
  return %g : tensor<6x8xf32>
}
