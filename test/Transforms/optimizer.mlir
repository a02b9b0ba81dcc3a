// RUN: loom-opt %s --split-input-file --loom-optimizer="optimizer=sgd lr=0.5" | FileCheck %s --check-prefix=SGD
// RUN: loom-opt %s --split-input-file --loom-optimizer="optimizer=adamw lr=0.01 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: loom-opt %s --split-input-file --loom-optimizer="optimizer=momentum clip-norm=1.0 schedule=warmup warmup-steps=10" | FileCheck %s --check-prefix=MOM
// RUN: loom-opt %s --split-input-file --loom-optimizer="optimizer=adafactor schedule=cosine total-steps=100" | FileCheck %s --check-prefix=ADAFACTOR

// Tests the entry points and each optimizer's update.

// SGD-LABEL: func.func @apply_optimizer(
// SGD-SAME: %[[W:[^:]+]]: tensor<3x2xf32> {loom.param = "w"}
// SGD-SAME: %[[STEP:[^:]+]]: tensor<i64> {loom.input = "step"}
// SGD-SAME: %[[G:[^:]+]]: tensor<3x2xf32> {loom.input = "w.grad"}
// SGD-SAME: -> (tensor<3x2xf32> {loom.output = "w"}, tensor<i64> {loom.output = "step"})
// SGD: %[[LR:.+]] = loom.constant dense<5.000000e-01> : tensor<f32>
// SGD: %[[LRB:.+]] = loom.broadcast_in_dim %[[LR]] dims = []
// SGD: %[[DELTA:.+]] = loom.mul %[[LRB]], %[[G]]
// SGD: %[[NEW:.+]] = loom.sub %[[W]], %[[DELTA]]
// SGD: %[[ONE:.+]] = loom.constant dense<1> : tensor<i64>
// SGD: %[[NEXT:.+]] = loom.add %[[STEP]], %[[ONE]]
// SGD: return %[[NEW]], %[[NEXT]]
// SGD-LABEL: func.func @train_step(
// SGD: %[[FB:.+]]:2 = call @forward_backward
// SGD: %[[AP:.+]]:2 = call @apply_optimizer
// SGD: return %[[FB]]#0, %[[AP]]#0, %[[AP]]#1

// ADAMW-LABEL: func.func @apply_optimizer(
// ADAMW-SAME: {loom.opt_state = "w.adam_m"}
// ADAMW-SAME: {loom.opt_state = "w.adam_v"}
// ADAMW-SAME: -> (tensor<3x2xf32> {loom.output = "w"}, tensor<3x2xf32> {loom.output = "w.adam_m"}, tensor<3x2xf32> {loom.output = "w.adam_v"}, tensor<i64> {loom.output = "step"})
// ADAMW: loom.pow
// ADAMW: loom.sqrt
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME: {loom.opt_state = "w.adam_m"}

// Clipping reduces every gradient to one global norm; warmup reads the step.
// MOM-LABEL: func.func @apply_optimizer(
// MOM-SAME: {loom.opt_state = "w.momentum"}
// MOM: loom.reduce_sum
// MOM: loom.sqrt
// MOM: loom.cast %{{.+}} : tensor<i64> -> tensor<f32>
// MOM: loom.min

// ADAFACTOR-LABEL: func.func @apply_optimizer(
// ADAFACTOR-SAME: tensor<3xf32> {loom.opt_state = "w.adafactor_row"}, %{{.+}}: tensor<2xf32> {loom.opt_state = "w.adafactor_col"}
// ADAFACTOR: loom.cos
func.func @forward_backward(%x: tensor<4x3xf32> {loom.input = "x"}, %w: tensor<3x2xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}, tensor<3x2xf32> {loom.grad = "w"}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<3x2xf32>
}
