// RUN: loom-opt %s --loom-tensor-parallel="tp=2" | FileCheck %s

// A SwiGLU MLP as PyTorch's exporter writes Llama's: each Linear's [out,
// in] weight read through a transpose, and the gate and up projections
// reading the same input. Neither projection splits alone (silu(gate) * up
// would multiply a split value by a whole one); tried together, both split
// column-parallel (their [out, in] weights along dimension 0, the
// transposes along 1) and the down projection row-parallel (its weight
// along dimension 1), followed by one all-reduce.
// CHECK: loom.tp_report = [{detail = "column-parallel", node = "gate", outcome = "split"}, {detail = "column-parallel", node = "up", outcome = "split"}, {detail = "row-parallel", node = "down", outcome = "split"}]
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %[[G:arg[0-9]+]]: tensor<8x8xf32> {loom.param = "gate.weight", loom.shard = {axis = "tp", dim = 0 : i64, shape = array<i64: 16, 8>}}
// CHECK-SAME: %[[U:arg[0-9]+]]: tensor<8x8xf32> {loom.param = "up.weight", loom.shard = {axis = "tp", dim = 0 : i64, shape = array<i64: 16, 8>}}
// CHECK-SAME: %[[D:arg[0-9]+]]: tensor<8x8xf32> {loom.param = "down.weight", loom.shard = {axis = "tp", dim = 1 : i64, shape = array<i64: 8, 16>}}
// CHECK: loom.transpose %[[G]] perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: loom.transpose %[[U]] perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: %[[DT:.*]] = loom.transpose %[[D]] perm = [1, 0] : tensor<8x8xf32> -> tensor<8x8xf32>
// CHECK: %[[P:.*]] = loom.matmul %{{.*}}, %[[DT]] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: loom.all_reduce %[[P]] over "tp" reduce = sum : tensor<4x8xf32>

module {
  func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %y: tensor<4x8xf32> {loom.input = "y"}, %wg: tensor<16x8xf32> {loom.param = "gate.weight"}, %wu: tensor<16x8xf32> {loom.param = "up.weight"}, %wd: tensor<8x16xf32> {loom.param = "down.weight"}) -> (tensor<f32> {loom.output = "loss"}) {
    %tg = loom.transpose %wg perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32> loc("gate")
    %g = loom.matmul %x, %tg : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("gate")
    %tu = loom.transpose %wu perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32> loc("up")
    %u = loom.matmul %x, %tu : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("up")
    %s = loom.sigmoid %g : tensor<4x16xf32>
    %a = loom.mul %g, %s : tensor<4x16xf32>
    %h = loom.mul %a, %u : tensor<4x16xf32>
    %td = loom.transpose %wd perm = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32> loc("down")
    %d = loom.matmul %h, %td : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32> loc("down")
    %r = loom.add %d, %x : tensor<4x8xf32> loc("res")
    %l = loom.mse %r, %y reduction = mean : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
