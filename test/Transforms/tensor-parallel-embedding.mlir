// RUN: loom-opt %s --loom-tensor-parallel="tp=2" | FileCheck %s

// A token embedding whose table is split by rows (the vocabulary-parallel
// embedding): negative ids count from the end, the ids in this rank's
// block (from the first of its block of 0..5) are looked up in its 3 rows,
// the others give zero rows, and the ranks' rows are summed. The
// positions' table, looked up by constants, stays whole.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<4xi64> {loom.input = "ids"}
// CHECK-SAME: %[[E:[a-z0-9]+]]: tensor<3x8xf32> {loom.param = "wte", loom.shard = {axis = "tp", dim = 0 : i64, shape = array<i64: 6, 8>}}
// CHECK-SAME: %[[P:[a-z0-9]+]]: tensor<4x8xf32> {loom.param = "wpe"}
// CHECK: loom.compare lt, %[[IDS]]
// CHECK: %[[IOTA:.*]] = loom.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
// CHECK: %[[BLOCK:.*]] = loom.rank_slice %[[IOTA]] over "tp" : tensor<6xi64> -> tensor<3xi64>
// CHECK: loom.slice %[[BLOCK]] start = [0] limit = [1]
// CHECK: %[[ROWS:.*]] = loom.gather %[[E]][%{{.*}}] axis = 0 : (tensor<3x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
// CHECK: %[[PART:.*]] = loom.select %{{.*}}, %[[ROWS]], %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK: %[[SUM:.*]] = loom.all_reduce %[[PART]] over "tp" reduce = sum : tensor<4x8xf32>
// CHECK: loom.gather %[[P]]
// CHECK-NOT: loom.all_reduce
// CHECK: return

module {
  func.func @forward(%ids: tensor<4xi64> {loom.input = "ids"}, %wte: tensor<6x8xf32> {loom.param = "wte"}, %wpe: tensor<4x8xf32> {loom.param = "wpe"}) -> (tensor<f32> {loom.output = "loss"}) {
    %0 = loom.gather %wte[%ids] axis = 0 : (tensor<6x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %pos = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
    %1 = loom.gather %wpe[%pos] axis = 0 : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
    %2 = loom.add %0, %1 : tensor<4x8xf32>
    %3 = loom.reduce_sum %2 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
    return %3 : tensor<f32>
  }
}
