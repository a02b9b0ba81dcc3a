// RUN: loom-opt %s --loom-tensor-parallel="tp=2" | FileCheck %s

// A head whose split logits reach the loss: the vocabulary-parallel
// cross-entropy. Each rank keeps 3 of the 6 classes; the row maximum
// (behind stop_gradient), the sum of exponentials and the label's logit are
// combined over tp; the rank's class ids are its block of 0..5; ignored
// labels count for nothing in the mean. @predict gathers its logits.
// CHECK-LABEL: func.func @predict
// CHECK: %[[L:.*]] = loom.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[T:.*]] = loom.transpose %[[L]] perm = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
// CHECK: %[[G:.*]] = loom.all_gather %[[T]] over "tp" : tensor<3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[W:.*]] = loom.transpose %[[G]] perm = [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK: return %[[W]]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: tensor<8x3xf32> {loom.param = "head.weight", loom.shard = {axis = "tp", dim = 1 : i64, shape = array<i64: 8, 6>}}
// CHECK: %[[X:.*]] = loom.matmul %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[M:.*]] = loom.reduce_max %[[X]] dims = [1]
// CHECK: %[[MA:.*]] = loom.all_reduce %[[M]] over "tp" reduce = max : tensor<4xf32>
// CHECK: loom.stop_gradient %[[MA]]
// CHECK: loom.exp
// CHECK: loom.all_reduce %{{.*}} over "tp" reduce = sum : tensor<4xf32>
// CHECK: loom.log
// CHECK: %[[IOTA:.*]] = loom.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
// CHECK: loom.rank_slice %[[IOTA]] over "tp" : tensor<6xi64> -> tensor<3xi64>
// CHECK: loom.compare eq
// CHECK: loom.all_reduce %{{.*}} over "tp" reduce = sum : tensor<4xf32>
// CHECK: loom.compare ne
// CHECK: loom.div
// CHECK-NOT: loom.cross_entropy
// CHECK: return

module {
  func.func @predict(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x6xf32> {loom.param = "head.weight"}) -> (tensor<4x6xf32> {loom.output = "logits"}) {
    %0 = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
    return %0 : tensor<4x6xf32>
  }
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %l: tensor<4xi64> {loom.input = "labels"}, %w: tensor<8x6xf32> {loom.param = "head.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
    %1 = loom.cross_entropy %0, %l reduction = mean {ignore_index = -100 : i64} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}
