// RUN: loom-opt %s --split-input-file --loom-tensor-parallel="tp=2" --verify-diagnostics
// RUN: not loom-opt %s --loom-tensor-parallel="tp=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: tp must be at least 1, got 0

// Another entry point cannot take the split @forward takes: @hidden sums
// fc1's split output.
module {
  func.func @hidden(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}) -> (tensor<f32> {loom.output = "h"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    // expected-error @+1 {{tp=2: @hidden cannot take the split that @forward takes: 'loom.reduce_sum': it has no tensor-parallel rule for an operand split along dimension 1}}
    %1 = loom.reduce_sum %0 dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}, %w2: tensor<16x8xf32> {loom.param = "fc2.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.matmul %0, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %2 = loom.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %2 : tensor<f32>
  }
}

// -----

// A split that reaches an op with no rule: the error names the first layer
// tried and the op where the split stops.
module {
  // expected-error @+1 {{tp=2: no linear layer of @forward can be split over the ranks}}
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    // expected-note @+1 {{the first layer tried stops at 'loom.reduce_sum': it has no tensor-parallel rule for an operand split along dimension 1}}
    %1 = loom.reduce_sum %0 dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// expected-error @+1 {{the module's mesh already has a 'tp' axis}}
module attributes {loom.mesh_axes = ["tp"], loom.mesh_shape = array<i64: 2>} {
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.reduce_sum %0 dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// @other would make w3 row-parallel (it reads fc1's split output there),
// where @forward keeps w3 whole.
module {
  // expected-error @+1 {{tp=2: @other splits a parameter @forward keeps whole}}
  func.func @other(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}, %w3: tensor<16x8xf32> {loom.param = "w3"}) -> (tensor<4x8xf32> {loom.output = "y"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.matmul %0, %w3 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}, %w2: tensor<16x8xf32> {loom.param = "fc2.weight"}, %w3: tensor<16x8xf32> {loom.param = "w3"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.matmul %0, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %2 = loom.reduce_sum %1 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    %3 = loom.reduce_sum %w3 dims = [0, 1] : tensor<16x8xf32> -> tensor<f32>
    %4 = loom.add %2, %3 : tensor<f32>
    return %4 : tensor<f32>
  }
}
