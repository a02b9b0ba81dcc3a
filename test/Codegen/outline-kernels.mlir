// RUN: loom-opt %s --split-input-file --loom-fuse --loom-plan-memory --loom-outline-kernels | FileCheck %s

// Tests that every fusion becomes a function of the nested kernel module and
// names it, and that a fusion equal to one outlined before calls that
// kernel: @train_step's kernels are outlined first, so @forward's first
// fusion (the same exp as @train_step's) calls loom_train_step_k0.
// CHECK-LABEL: func.func @forward(
// CHECK:         loom.fusion
// CHECK-SAME:    loom.kernel = "loom_train_step_k0"
// CHECK-LABEL: func.func @train_step(
// CHECK:         loom.fusion
// CHECK-SAME:    loom.kernel = "loom_train_step_k0"
// CHECK:         loom.matmul
// CHECK:         loom.fusion
// CHECK-SAME:    loom.kernel = "loom_train_step_k1"
// CHECK:       module @loom_kernels attributes {loom.kernels}
// CHECK:         func.func @loom_train_step_k0(%{{.*}}: tensor<4x8xf32> {bufferization.writable = false}) -> tensor<4x8xf32>
// CHECK:           loom.exp
// CHECK:         func.func @loom_train_step_k1(
// CHECK:           loom.tanh
// CHECK-NOT:     func.func @loom_forward
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}) -> tensor<4x8xf32> {
  %e = loom.exp %x : tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}
func.func @train_step(%x: tensor<4x8xf32> {loom.input = "x"},
                      %w: tensor<8x8xf32> {loom.param = "w"})
    -> tensor<4x8xf32> {
  %e = loom.exp %x : tensor<4x8xf32>
  %m = loom.matmul %e, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = loom.tanh %m : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// Tests that a state update loom-plan-memory placed on its argument's bytes
// is materialized in that argument, which becomes writable, and is recorded
// (loom.in_place: 2 arguments; result 0 on argument 0, the fusion's first
// operand) for loom-bufferize-kernels.
// CHECK-LABEL: func.func @sgd(
// CHECK:       module @loom_kernels
// CHECK:         func.func @loom_sgd_k0(%[[W:.*]]: tensor<8xf32> {bufferization.writable = true}, %{{.*}}: tensor<8xf32> {bufferization.writable = false}) -> tensor<8xf32> attributes {loom.in_place = array<i64: 2, 0, 0>}
// CHECK:           %[[NEW:.*]] = loom.sub
// CHECK:           %[[IN:.*]] = bufferization.materialize_in_destination %[[NEW]] in %[[W]]
// CHECK:           return %[[IN]]
func.func @sgd(%g: tensor<8xf32> {loom.input = "g"},
               %w: tensor<8xf32> {loom.param = "w"})
    -> (tensor<8xf32> {loom.output = "w"}) {
  %u = loom.sub %w, %g : tensor<8xf32>
  return %u : tensor<8xf32>
}
