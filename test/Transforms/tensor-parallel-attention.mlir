// RUN: loom-opt %s --split-input-file --loom-tensor-parallel="tp=2" --verify-diagnostics | FileCheck %s

// Tests head-parallel attention: a fused QKV projection split
// column-parallel in 3 groups makes q, k and v split along their heads;
// loom.attention keeps its attributes and runs on the rank's 1 of 2 heads
// (out and lse local), and the output projection is row-parallel, summed
// over the ranks.
// CHECK-LABEL: func.func @forward
// CHECK:         loom.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 5.000000e-01 : f64} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> (tensor<2x1x4x4xf32>, tensor<2x1x4xf32>)
// CHECK:         loom.matmul %{{.+}}, %{{.+}} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    loom.all_reduce %{{.+}} over "tp" reduce = sum
func.func @forward(%x: tensor<2x4x8xf32> {loom.input = "x"}, %w: tensor<8x24xf32> {loom.param = "qkv.weight", loom.tp_groups = 3 : i64}, %wo: tensor<8x8xf32> {loom.param = "o.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
  %qkv = loom.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %q0 = loom.slice %qkv start = [0, 0, 0] limit = [2, 4, 8] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %k0 = loom.slice %qkv start = [0, 0, 8] limit = [2, 4, 16] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %v0 = loom.slice %qkv start = [0, 0, 16] limit = [2, 4, 24] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %q1 = loom.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k1 = loom.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v1 = loom.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = loom.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k = loom.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v = loom.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64, causal} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
  %o1 = loom.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %o2 = loom.reshape %o1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %y = loom.matmul %o2, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = loom.reduce_sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a bias over every head that is not split like the heads stops
// the split at the attention, with the reason.
// expected-error @+1 {{tp=2: no linear layer of @forward can be split over the ranks}}
func.func @forward(%x: tensor<2x4x8xf32> {loom.input = "x"}, %w: tensor<8x24xf32> {loom.param = "qkv.weight", loom.tp_groups = 3 : i64}, %b: tensor<1x2x4x4xf32> {loom.input = "bias"}, %wo: tensor<8x8xf32> {loom.param = "o.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
  %qkv = loom.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32>
  %q0 = loom.slice %qkv start = [0, 0, 0] limit = [2, 4, 8] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %k0 = loom.slice %qkv start = [0, 0, 8] limit = [2, 4, 16] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %v0 = loom.slice %qkv start = [0, 0, 16] limit = [2, 4, 24] stride = [1, 1, 1] : tensor<2x4x24xf32> -> tensor<2x4x8xf32>
  %q1 = loom.reshape %q0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %k1 = loom.reshape %k0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %v1 = loom.reshape %v0 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  %q = loom.transpose %q1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %k = loom.transpose %k1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  %v = loom.transpose %v1 perm = [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
  // expected-note @+1 {{the first layer tried stops at 'loom.attention': its mask or bias is neither split like its heads nor broadcast over them}}
  %o, %lse = loom.attention %q, %k, %v bias %b {scale = 0.5 : f64} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4xf32>)
  %o1 = loom.transpose %o perm = [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
  %o2 = loom.reshape %o1 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
  %y = loom.matmul %o2, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = loom.reduce_sum %y dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}
