// RUN: rm -rf %t && mkdir -p %t
// RUN: sed 's/MESH/loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 4>/' %s > %t/four.mlir
// RUN: not loom-opt %t/four.mlir --loom-optimizer="dp=2" 2>&1 | FileCheck %s --check-prefix=SIZE
// RUN: sed 's/MESH/loom.mesh_axes = ["dp"]/' %s > %t/half.mlir
// RUN: not loom-opt %t/half.mlir --loom-optimizer="dp=2" 2>&1 | FileCheck %s --check-prefix=HALF
// RUN: sed 's/MESH/loom.mesh_axes = ["dp", "dp"], loom.mesh_shape = array<i64: 2, 2>/' %s > %t/twice.mlir
// RUN: not loom-opt %t/twice.mlir --loom-optimizer="dp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: sed 's/MESH/loom.mesh_axes = ["tp"], loom.mesh_shape = array<i64: 2>/' %s > %t/tp.mlir
// RUN: loom-opt %t/tp.mlir --loom-optimizer="dp=2" | FileCheck %s --check-prefix=ADDED

// Tests how loom-optimizer's dp meets a mesh the module has already: an
// axis dp of another size, a malformed mesh and an axis named twice are
// refused; another axis stays, after dp.
// SIZE: the module's mesh has axis 'dp' of size 4, not dp=2
// HALF: loom.mesh_axes (an array of strings) and loom.mesh_shape (array<i64>) must both be given, one entry per axis
// TWICE: mesh axis 'dp' twice
// ADDED: module attributes {loom.mesh_axes = ["dp", "tp"], loom.mesh_shape = array<i64: 2, 2>}
module attributes {MESH} {
  func.func @forward_backward(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}, tensor<3xf32> {loom.grad = "w"}) {
    %l = loom.constant dense<1.0> : tensor<f32>
    return %l, %w : tensor<f32>, tensor<3xf32>
  }
}
