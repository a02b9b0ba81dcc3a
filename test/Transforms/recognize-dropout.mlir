// RUN: loom-opt %s --split-input-file --loom-recognize-dropout | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-recognize-dropout=dropout=off 2>/dev/null | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --split-input-file --loom-recognize-dropout=dropout=off 2>&1 >/dev/null | FileCheck %s --check-prefix=WARN

// Tests torchvision's drop path as PyTorch's exporter writes it (one uniform
// draw per sample, kept where u < 0.8, divided by 0.8, broadcast over the
// sample): it becomes loom.dropout of ones with ratio 1 - 0.8 (in f32, as
// the f32 comparison keeps: 0.199999988) and the draw's
// stream. With dropout=off it is gone: the branch is x (a multiplication
// by ones folds away) and the seed argument, read by nothing, goes.
// CHECK-LABEL: func.func @drop_path
// CHECK-SAME:    (%[[X:.+]]: tensor<2x3x4x4xf32>, %[[SEED:.+]]: tensor<i64> {loom.rng_seed})
// CHECK:         %[[ONES:.+]] = loom.constant dense<1.000000e+00> : tensor<2x1x1x1xf32>
// CHECK:         %[[D:.+]] = loom.dropout %[[ONES]], %[[SEED]] ratio = 0.199999988 stream = 4 : tensor<2x1x1x1xf32>, tensor<i64>
// CHECK:         %[[B:.+]] = loom.broadcast_in_dim %[[D]]
// CHECK:         loom.mul %[[X]], %[[B]]
// OFF-LABEL: func.func @drop_path
// OFF-SAME:    (%[[X:.+]]: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
// OFF-NOT:     loom.random
// OFF-NOT:     loom.dropout
// OFF-NOT:     loom.mul
// OFF:         return %[[X]]
func.func @drop_path(%x: tensor<2x3x4x4xf32>, %seed: tensor<i64> {loom.rng_seed}) -> tensor<2x3x4x4xf32> {
  %u = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 4 : tensor<i64>, tensor<2x1x1x1xf32>
  %c = loom.constant dense<0.8> : tensor<f32>
  %k = loom.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<2x1x1x1xf32>
  %m = loom.compare lt, %u, %k : tensor<2x1x1x1xf32> -> tensor<2x1x1x1xi1>
  %f = loom.cast %m : tensor<2x1x1x1xi1> -> tensor<2x1x1x1xf32>
  %n = loom.div %f, %k : tensor<2x1x1x1xf32>
  %b = loom.broadcast_in_dim %n dims = [0, 1, 2, 3] : tensor<2x1x1x1xf32> -> tensor<2x3x4x4xf32>
  %y = loom.mul %x, %b : tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Tests the multiplied form (mask times 1 / keep, the mask on the right)
// and an importer's loom.dropout: both go with dropout=off.
// CHECK-LABEL: func.func @scaled_mask
// CHECK:         loom.dropout %{{.+}}, %{{.+}} ratio = 5.000000e-01 stream = 1
// CHECK:         loom.dropout %{{.+}}, %{{.+}} ratio = 1.000000e-01 stream = 0
// OFF-LABEL: func.func @scaled_mask
// OFF-NOT:     loom.dropout
// OFF:         return
func.func @scaled_mask(%x: tensor<4x8xf32>, %seed: tensor<i64> {loom.rng_seed}) -> tensor<4x8xf32> {
  %u = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 1 : tensor<i64>, tensor<4x8xf32>
  %k = loom.constant dense<0.5> : tensor<4x8xf32>
  %m = loom.compare lt, %u, %k : tensor<4x8xf32> -> tensor<4x8xi1>
  %f = loom.cast %m : tensor<4x8xi1> -> tensor<4x8xf32>
  %two = loom.constant dense<2.0> : tensor<4x8xf32>
  %n = loom.mul %two, %f : tensor<4x8xf32>
  %y = loom.mul %x, %n : tensor<4x8xf32>
  %z = loom.dropout %y, %seed ratio = 0.1 stream = 0 : tensor<4x8xf32>, tensor<i64>
  return %z : tensor<4x8xf32>
}

// -----

// Tests draws that are not a recognized mask: a scale that is not 1 / keep,
// a draw that is not uniform on [0, 1), and a normal draw. They stay; with
// dropout=off each remaining draw is reported.
// CHECK-LABEL: func.func @not_masks
// CHECK-NOT:     loom.dropout
// WARN: :[[@LINE+6]]:8: warning: this random draw is not a dropout or drop-path mask Loom recognizes: --dropout=off leaves it random
// WARN: :[[@LINE+11]]:8: warning: this random draw is not a dropout or drop-path mask Loom recognizes: --dropout=off leaves it random
// WARN: :[[@LINE+14]]:8: warning: this random draw is not a dropout or drop-path mask Loom recognizes: --dropout=off leaves it random
// OFF-LABEL: func.func @not_masks
// OFF-SAME:    %{{.+}}: tensor<i64> {loom.rng_seed}
func.func @not_masks(%seed: tensor<i64> {loom.rng_seed}) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %u = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 0 : tensor<i64>, tensor<4xf32>
  %k = loom.constant dense<0.5> : tensor<4xf32>
  %m = loom.compare lt, %u, %k : tensor<4xf32> -> tensor<4xi1>
  %f = loom.cast %m : tensor<4xi1> -> tensor<4xf32>
  %q = loom.constant dense<0.25> : tensor<4xf32>
  %y = loom.div %f, %q : tensor<4xf32>
  %w = loom.random %seed "uniform" a = 0.0 b = 2.0 stream = 1 : tensor<i64>, tensor<4xf32>
  %wm = loom.compare lt, %w, %k : tensor<4xf32> -> tensor<4xi1>
  %wf = loom.cast %wm : tensor<4xi1> -> tensor<4xf32>
  %wy = loom.div %wf, %k : tensor<4xf32>
  %n = loom.random %seed "normal" a = 0.0 b = 1.0 stream = 2 : tensor<i64>, tensor<4xf32>
  return %y, %wy, %n : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
