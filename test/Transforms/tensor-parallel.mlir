// RUN: loom-opt %s --loom-tensor-parallel="tp=2" | FileCheck %s
// RUN: loom-opt %s --loom-tensor-parallel="tp=1" | FileCheck %s --check-prefix=ONE
// RUN: not loom-opt %s --loom-tensor-parallel="tp=3" 2>&1 | FileCheck %s --check-prefix=THREE

// Megatron's MLP: fc1 column-parallel (its weight's columns and its bias
// split), the pointwise ops between keep the split (the broadcast constant
// rebuilt in the local shape), fc2 row-parallel (its weight's rows split)
// with an all-reduce of the partial products before its whole bias; the
// head, whose split output would reach the loss, stays whole. @predict
// takes the same split.
// The report (loomc --report prints it) names each layer tried: fc1 split
// column-parallel, the head kept whole with the reason, fc2 row-parallel.
// CHECK: module attributes {loom.mesh_axes = ["tp"], loom.mesh_shape = array<i64: 2>, loom.tp_report = [{detail = "column-parallel", node = "", outcome = "split"}, {detail = "'loom.matmul': dimension 1 (5) does not split into 1 group(s) of 2 ranks", node = "", outcome = "whole"}, {detail = "row-parallel", node = "", outcome = "split"}]}
// CHECK-LABEL: func.func @predict
// CHECK-SAME: tensor<8x8xf32> {loom.param = "fc1.weight", loom.shard = {axis = "tp", dim = 1 : i64, shape = array<i64: 8, 16>}}
// CHECK: loom.all_reduce
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[W1:arg[0-9]+]]: tensor<8x8xf32> {loom.param = "fc1.weight", loom.shard = {axis = "tp", dim = 1 : i64, shape = array<i64: 8, 16>}}
// CHECK-SAME: %[[B1:arg[0-9]+]]: tensor<8xf32> {loom.param = "fc1.bias", loom.shard = {axis = "tp", dim = 0 : i64, shape = array<i64: 16>}}
// CHECK-SAME: %[[W2:arg[0-9]+]]: tensor<8x8xf32> {loom.param = "fc2.weight", loom.shard = {axis = "tp", dim = 0 : i64, shape = array<i64: 16, 8>}}
// CHECK-SAME: %{{.*}}: tensor<8xf32> {loom.param = "fc2.bias"}
// CHECK-SAME: %{{.*}}: tensor<8x5xf32> {loom.param = "head.weight"}
// CHECK: loom.matmul %{{.*}}, %[[W1]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: loom.broadcast_in_dim %[[B1]] dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK: loom.broadcast_in_dim %{{.*}} dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK: %[[T:.*]] = loom.tanh %{{.*}} : tensor<4x8xf32>
// CHECK: %[[P:.*]] = loom.matmul %[[T]], %[[W2]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = loom.all_reduce %[[P]] over "tp" reduce = sum : tensor<4x8xf32>
// CHECK: loom.add %[[S]], %{{.*}} : tensor<4x8xf32>
// CHECK: loom.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
// CHECK-NOT: loom.all_reduce
// CHECK: return

// ONE-NOT: loom.shard
// ONE-NOT: loom.mesh_axes

// THREE: error: tp=3: no linear layer of @forward can be split over the ranks

module {
  func.func @predict(%x: tensor<4x8xf32> {loom.input = "x"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}, %b1: tensor<16xf32> {loom.param = "fc1.bias"}, %w2: tensor<16x8xf32> {loom.param = "fc2.weight"}, %b2: tensor<8xf32> {loom.param = "fc2.bias"}, %w3: tensor<8x5xf32> {loom.param = "head.weight"}) -> (tensor<4x5xf32> {loom.output = "logits"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.broadcast_in_dim %b1 dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
    %2 = loom.add %0, %1 : tensor<4x16xf32>
    %c = loom.constant dense<0.5> : tensor<f32>
    %cb = loom.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<4x16xf32>
    %3 = loom.mul %2, %cb : tensor<4x16xf32>
    %4 = loom.tanh %3 : tensor<4x16xf32>
    %5 = loom.matmul %4, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %6 = loom.broadcast_in_dim %b2 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %7 = loom.add %5, %6 : tensor<4x8xf32>
    %8 = loom.matmul %7, %w3 : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    return %8 : tensor<4x5xf32>
  }
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %l: tensor<4xi64> {loom.input = "labels"}, %w1: tensor<8x16xf32> {loom.param = "fc1.weight"}, %b1: tensor<16xf32> {loom.param = "fc1.bias"}, %w2: tensor<16x8xf32> {loom.param = "fc2.weight"}, %b2: tensor<8xf32> {loom.param = "fc2.bias"}, %w3: tensor<8x5xf32> {loom.param = "head.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = loom.broadcast_in_dim %b1 dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
    %2 = loom.add %0, %1 : tensor<4x16xf32>
    %c = loom.constant dense<0.5> : tensor<f32>
    %cb = loom.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<4x16xf32>
    %3 = loom.mul %2, %cb : tensor<4x16xf32>
    %4 = loom.tanh %3 : tensor<4x16xf32>
    %5 = loom.matmul %4, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %6 = loom.broadcast_in_dim %b2 dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    %7 = loom.add %5, %6 : tensor<4x8xf32>
    %8 = loom.matmul %7, %w3 : (tensor<4x8xf32>, tensor<8x5xf32>) -> tensor<4x5xf32>
    %9 = loom.cross_entropy %8, %l reduction = mean : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
    return %9 : tensor<f32>
  }
}
