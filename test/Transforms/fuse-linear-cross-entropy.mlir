// RUN: loom-opt %s --split-input-file --loom-fuse-linear-cross-entropy | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse-linear-cross-entropy=mode=unfused | FileCheck %s --check-prefix=UNFUSED

// Tests a language model's head as loom-attach-loss leaves it: the tied
// embedding [V, C] read with transpose_b over [B, T, C] hidden states, the
// [B, T, V] logits reshaped to [B * T, V] for the loss. It becomes one
// loom.linear_cross_entropy over the hidden states reshaped to [B * T, C];
// the matmul, the logits and the loss are gone.
// CHECK: loom.lm_head_report = [{detail = "logits [6, 10] not stored: 240 bytes", node = "loss", outcome = "fused"}]
// CHECK-LABEL: func.func @tied
// CHECK-SAME:    (%[[H:.+]]: tensor<2x3x4xf32>, %[[W:.+]]: tensor<10x4xf32>, %[[Y:.+]]: tensor<6xi64>)
// CHECK:         %[[X:.+]] = loom.reshape %[[H]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK:         %[[L:.+]], %{{.+}} = loom.linear_cross_entropy %[[X]], %[[W]], %[[Y]] reduction = mean {ignore_index = -100 : i64, transpose_w}
// CHECK-NOT:     loom.matmul
// CHECK-NOT:     loom.cross_entropy
// CHECK:         return %[[L]]
// UNFUSED: loom.lm_head_report = [{detail = "--lm-head=unfused", node = "loss", outcome = "kept"}]
// UNFUSED-LABEL: func.func @tied
// UNFUSED:         loom.matmul
// UNFUSED:         loom.cross_entropy
func.func @tied(%h: tensor<2x3x4xf32>, %w: tensor<10x4xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  %z = loom.matmul %h, %w {transpose_b} : (tensor<2x3x4xf32>, tensor<10x4xf32>) -> tensor<2x3x10xf32>
  %r = loom.reshape %z : tensor<2x3x10xf32> -> tensor<6x10xf32>
  %l = loom.cross_entropy %r, %y reduction = mean {ignore_index = -100 : i64} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}

// -----

// Tests an untied head stored [C, V] on [N, C] inputs, with a sum: no
// reshape is needed, and transpose_w is not set.
// CHECK-LABEL: func.func @untied
// CHECK-SAME:    (%[[X:.+]]: tensor<6x4xf32>, %[[W:.+]]: tensor<4x10xf32>, %[[Y:.+]]: tensor<6xi32>)
// CHECK:         loom.linear_cross_entropy %[[X]], %[[W]], %[[Y]] reduction = sum :
func.func @untied(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %y: tensor<6xi32>) -> tensor<f32> {
  %z = loom.matmul %x, %w : (tensor<6x4xf32>, tensor<4x10xf32>) -> tensor<6x10xf32>
  %l = loom.cross_entropy %z, %y reduction = sum : (tensor<6x10xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests the heads that stay: logits also returned (an evaluation output
// needs them) and a matmul with a bias, each reported with the reason; and
// logits that are not a product, which are no head and not reported.
// CHECK: loom.lm_head_report = [{detail = "the logits are read by other ops too", node = "shared", outcome = "kept"}, {detail = "the matmul has a bias or a transposed lhs", node = "biased", outcome = "kept"}]
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     loom.linear_cross_entropy
// CHECK-COUNT-3: loom.cross_entropy
func.func @kept(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %b: tensor<10xf32>, %y: tensor<6xi64>, %z0: tensor<6x10xf32>) -> (tensor<f32>, tensor<6x10xf32>, tensor<f32>, tensor<f32>) {
  %z = loom.matmul %x, %w : (tensor<6x4xf32>, tensor<4x10xf32>) -> tensor<6x10xf32>
  %l = loom.cross_entropy %z, %y reduction = mean : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32> loc("shared")
  %zb = loom.matmul %x, %w bias(%b : tensor<10xf32>) : (tensor<6x4xf32>, tensor<4x10xf32>) -> tensor<6x10xf32>
  %lb = loom.cross_entropy %zb, %y reduction = mean : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32> loc("biased")
  %lp = loom.cross_entropy %z0, %y reduction = mean : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32> loc("plain")
  return %l, %z, %lb, %lp : tensor<f32>, tensor<6x10xf32>, tensor<f32>, tensor<f32>
}

// -----

// Tests a classifier: its last layer's bias is added after the matmul, so
// its cross-entropy is not a head; nothing changes and nothing is reported.
// CHECK-NOT: loom.lm_head_report
// CHECK-LABEL: func.func @classifier
// CHECK: loom.cross_entropy
func.func @classifier(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %b: tensor<6x10xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  %z = loom.matmul %x, %w : (tensor<6x4xf32>, tensor<4x10xf32>) -> tensor<6x10xf32>
  %zb = loom.add %z, %b : tensor<6x10xf32>
  %l = loom.cross_entropy %zb, %y reduction = mean : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
