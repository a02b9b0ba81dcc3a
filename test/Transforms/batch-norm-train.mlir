// RUN: loom-opt %s --loom-batch-norm-train | FileCheck %s

// Tests that a batch norm with a momentum normalizes with the batch's
// statistics in @forward and returns its running statistics' update
// (momentum 0.9: 0.9 * running + 0.1 * batch; the variance unbiased with 2 * 2
// = 4 values per channel: 0.1 * 4 / 3), while @predict keeps the running
// statistics.

// CHECK-LABEL: func.func @predict(
// CHECK:         loom.batch_norm %arg0, %arg1, %arg2, %arg3, %arg4 epsilon = {{.*}} momentum = 0.899999976
func.func @predict(%x: tensor<2x3x2xf32> {loom.input = "x"},
                   %s: tensor<3xf32> {loom.param = "bn.weight"},
                   %b: tensor<3xf32> {loom.param = "bn.bias"},
                   %rm: tensor<3xf32> {loom.buffer = "bn.running_mean"},
                   %rv: tensor<3xf32> {loom.buffer = "bn.running_var"})
    -> (tensor<2x3x2xf32> {loom.output = "y"}) {
  %y = loom.batch_norm %x, %s, %b, %rm, %rv epsilon = 1.0e-05 momentum = 0.9 : (tensor<2x3x2xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
  return %y : tensor<2x3x2xf32>
}

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<3xf32> {loom.buffer = "bn.running_mean"}, tensor<3xf32> {loom.buffer = "bn.running_var"})
// CHECK:         %[[MEAN:[^,]+]], %[[VAR:[^ ]+]] = loom.batch_norm_stats %arg0
// CHECK:         %[[Y:.+]] = loom.batch_norm %arg0, %arg1, %arg2, %[[MEAN]], %[[VAR]] epsilon = {{[^m]*}} :
// CHECK:         %[[KEEP:.+]] = loom.constant dense<0.899999976>
// CHECK:         %[[OLDM:.+]] = loom.mul %arg3, %[[KEEP]]
// CHECK:         %[[TAKE:.+]] = loom.constant dense<0.100000024>
// CHECK:         %[[NEWM0:.+]] = loom.mul %[[MEAN]], %[[TAKE]]
// CHECK:         %[[NEWM:.+]] = loom.add %[[OLDM]], %[[NEWM0]]
// CHECK:         %[[OLDV:.+]] = loom.mul %arg4,
// CHECK:         loom.constant dense<0.13333337>
// CHECK:         %[[NEWV0:.+]] = loom.mul %[[VAR]],
// CHECK:         %[[NEWV:.+]] = loom.add %[[OLDV]], %[[NEWV0]]
// CHECK:         %[[L:.+]] = loom.reduce_sum %[[Y]]
// CHECK:         return %[[L]], %[[NEWM]], %[[NEWV]]
func.func @forward(%x: tensor<2x3x2xf32> {loom.input = "x"},
                   %s: tensor<3xf32> {loom.param = "bn.weight"},
                   %b: tensor<3xf32> {loom.param = "bn.bias"},
                   %rm: tensor<3xf32> {loom.buffer = "bn.running_mean"},
                   %rv: tensor<3xf32> {loom.buffer = "bn.running_var"})
    -> (tensor<f32> {loom.output = "loss"}) {
  %y = loom.batch_norm %x, %s, %b, %rm, %rv epsilon = 1.0e-05 momentum = 0.9 : (tensor<2x3x2xf32>, tensor<3xf32>) -> tensor<2x3x2xf32>
  %l = loom.reduce_sum %y dims = [0, 1, 2] : tensor<2x3x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
