// RUN: not loom-opt %s --loom-optimizer="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --loom-optimizer="schedule=cosine" 2>&1 | FileCheck %s --check-prefix=COSINE
// RUN: not loom-opt %s --loom-optimizer="lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not loom-opt %s --loom-optimizer="lr" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not loom-opt %S/attach-loss-auto.mlir --loom-optimizer 2>&1 | FileCheck %s --check-prefix=NOFB

// Tests what loom-optimizer refuses.
// UNKNOWN: unknown optimizer 'lamb' (expected sgd, momentum, nesterov, adam, adamw or adafactor)
// COSINE: schedule 'cosine' needs total-steps > warmup-steps
// LR: lr must be positive
// OPTION: error
// NOFB: loom-optimizer needs @forward_backward: run loom-autodiff first
func.func @forward_backward(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}, tensor<3xf32> {loom.grad = "w"}) {
  %l = loom.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<3xf32>
}
