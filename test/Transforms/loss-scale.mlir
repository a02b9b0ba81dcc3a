// RUN: loom-opt %s --split-input-file --loom-autodiff | FileCheck %s --check-prefix=AUTO
// RUN: loom-opt %s --split-input-file --loom-autodiff="loss-scale=none" | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --split-input-file --loom-autodiff="loss-scale=dynamic" --loom-optimizer="optimizer=adam loss-scale-init=1024 loss-scale-growth-interval=7 loss-scale-growth=4 loss-scale-backoff=0.25" | FileCheck %s --check-prefix=OPT
// RUN: not loom-opt %s --split-input-file --loom-autodiff="loss-scale=static" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not loom-opt %s --split-input-file --loom-autodiff="loss-scale=dynamic" --loom-optimizer="loss-scale-backoff=1.5" 2>&1 | FileCheck %s --check-prefix=RANGE
// BAD: loom-autodiff: unknown loss-scale 'static' (expected auto, dynamic or none)
// RANGE: loss scaling options out of range (loss-scale-init > 0, loss-scale-growth >= 1, loss-scale-backoff in (0, 1), loss-scale-growth-interval >= 1)

// A forward with an f16 GEMM gets loss scaling by default (loss-scale=auto):
// @forward_backward takes `loss_scale` last and seeds the loss's cotangent
// with it (no constant 1); the loss is returned as it is.
// AUTO-LABEL: func.func @forward_backward(
// AUTO-SAME:    %[[SCALE:[^:]+]]: tensor<f32> {loom.opt_state = "loss_scale"})
// AUTO-NOT:     loom.constant dense<1.000000e+00> : tensor<f32>
// AUTO:         %[[SEED:.+]] = loom.broadcast_in_dim %[[SCALE]] dims = [] : tensor<f32> -> tensor<4xf32>
// AUTO:         %[[SEED2:.+]] = loom.reshape %[[SEED]]
// AUTO:         loom.cast %[[SEED2]] : tensor<1x4xf32> -> tensor<1x4xf16>
// NONE-LABEL: func.func @forward_backward(
// NONE-NOT:     loss_scale
// NONE:         loom.constant dense<1.000000e+00> : tensor<f32>
func.func @forward(%w: tensor<4x4xf32> {loom.param = "w"}, %x: tensor<1x4xf32> {loom.input = "x"}) -> (tensor<f32> {loom.output = "loss"}) {
  %w16 = loom.cast %w : tensor<4x4xf32> -> tensor<4x4xf16>
  %x16 = loom.cast %x : tensor<1x4xf32> -> tensor<1x4xf16>
  %m = loom.matmul %x16, %w16 : (tensor<1x4xf16>, tensor<4x4xf16>) -> tensor<1x4xf16>
  %f = loom.cast %m : tensor<1x4xf16> -> tensor<1x4xf32>
  %r = loom.reshape %f : tensor<1x4xf32> -> tensor<4xf32>
  %l = loom.reduce_sum %r dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An f32 forward is not scaled by default; with loss-scale=dynamic it is,
// and loom-optimizer adds GradScaler's state and rules.
// AUTO-LABEL: func.func @forward_backward(
// AUTO-NOT:     loss_scale
// OPT-LABEL: func.func @apply_optimizer(%arg0: tensor<3xf32> {loom.param = "w"}
// OPT-SAME:    %[[M:[^:]+]]: tensor<3xf32> {loom.opt_state = "w.adam_m"}
// OPT-SAME:    %[[V:[^:]+]]: tensor<3xf32> {loom.opt_state = "w.adam_v"}
// OPT-SAME:    %[[S:[^:]+]]: tensor<f32> {loom.init = dense<1.024000e+03> : tensor<f32>, loom.opt_state = "loss_scale"}
// OPT-SAME:    %[[GOOD:[^:]+]]: tensor<i64> {loom.opt_state = "loss_scale.good_steps"}
// OPT-SAME:    %[[SKIP:[^:]+]]: tensor<i64> {loom.opt_state = "loss_scale.skipped"}
// OPT-SAME:    %[[STEP:[^:]+]]: tensor<i64> {loom.input = "step"}
// OPT-SAME:    %[[G:[^:]+]]: tensor<3xf32> {loom.input = "w.grad"}
// OPT-SAME:    -> (tensor<3xf32> {loom.output = "w"}, tensor<3xf32> {loom.output = "w.adam_m"}, tensor<3xf32> {loom.output = "w.adam_v"}, tensor<f32> {loom.output = "loss_scale"}, tensor<i64> {loom.output = "loss_scale.good_steps"}, tensor<i64> {loom.output = "loss_scale.skipped"}, tensor<i64> {loom.output = "step"}, tensor<f32> {loom.output = "loss_scale_used"}, tensor<i64> {loom.output = "skipped_steps"})
// Finite when sum(g * 0) is 0; then g is multiplied by 1 / scale.
// OPT:         %[[ZERO:.+]] = loom.mul %[[G]], %{{.+}} : tensor<3xf32>
// OPT:         %[[PROBE:.+]] = loom.reduce_sum %[[ZERO]]
// OPT:         %[[FINITE:.+]] = loom.compare eq, %{{.+}}, %{{.+}} : tensor<f32> -> tensor<i1>
// OPT:         %[[INV:.+]] = loom.div %{{.+}}, %[[S]] : tensor<f32>
// OPT:         %[[INVB:.+]] = loom.broadcast_in_dim %[[INV]]
// OPT:         %[[UNSCALED:.+]] = loom.mul %[[G]], %[[INVB]]
// Adam's t counts the applied updates: step - skipped + 1.
// OPT:         loom.sub %[[STEP]], %[[SKIP]] : tensor<i64>
// A skipped step keeps the parameter and both moments.
// OPT:         %[[KEEP:.+]] = loom.broadcast_in_dim %[[FINITE]] dims = [] : tensor<i1> -> tensor<3xi1>
// OPT:         %[[NEWW:.+]] = loom.select %[[KEEP]], %{{.+}}, %arg0 :
// OPT:         %[[NEWM:.+]] = loom.select %{{.+}}, %{{.+}}, %[[M]]
// OPT:         %[[NEWV:.+]] = loom.select %{{.+}}, %{{.+}}, %[[V]]
// The scale: x4 after 7 good steps, x0.25 on a skip.
// OPT:         loom.constant dense<7> : tensor<i64>
// OPT:         %[[GROW:.+]] = loom.compare ge
// OPT:         loom.constant dense<4.000000e+00> : tensor<f32>
// OPT:         loom.constant dense<2.500000e-01> : tensor<f32>
// OPT:         %[[NEWS:.+]] = loom.select %[[FINITE]]
// OPT:         %[[NEWGOOD:.+]] = loom.select %[[FINITE]]
// OPT:         %[[NEWSKIP:.+]] = loom.select %[[FINITE]], %[[SKIP]], %{{.+}} : tensor<i1>, tensor<i64>
// OPT:         return %[[NEWW]], %[[NEWM]], %[[NEWV]], %[[NEWS]], %[[NEWGOOD]], %[[NEWSKIP]], %{{.+}}, %[[S]], %[[NEWSKIP]]
// @train_step reads the scale once, as @forward_backward's argument, and
// hands it to @apply_optimizer next to the other loss-scaling state.
// OPT-LABEL: func.func @train_step(%arg0: tensor<3xf32> {loom.param = "w"}
// OPT-SAME:    %[[TS:[^:]+]]: tensor<f32> {loom.opt_state = "loss_scale"}
// OPT-SAME:    %[[TM:[^:]+]]: tensor<3xf32> {loom.opt_state = "w.adam_m"}
// OPT-SAME:    %[[TV:[^:]+]]: tensor<3xf32> {loom.opt_state = "w.adam_v"}
// OPT-SAME:    %[[TGOOD:[^:]+]]: tensor<i64> {{{.*}}loom.opt_state = "loss_scale.good_steps"}
// OPT:         %[[FB:.+]]:2 = call @forward_backward(%arg0, %[[TS]])
// OPT:         call @apply_optimizer(%arg0, %[[TM]], %[[TV]], %[[TS]], %[[TGOOD]], %{{.+}}, %{{.+}}, %[[FB]]#1)
func.func @forward(%w: tensor<3xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  %e = loom.exp %w : tensor<3xf32>
  %l = loom.reduce_sum %e dims = [0] : tensor<3xf32> -> tensor<f32>
  return %l : tensor<f32>
}
