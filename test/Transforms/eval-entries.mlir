// RUN: loom-opt %s --loom-eval-entries | FileCheck %s
// RUN: loom-opt %s --loom-eval-entries=entries=predict | FileCheck %s --check-prefix=PREDICT

// Tests that the evaluation entries (@predict, @forward) lose their dropout
// (a drop-path mask's ops with it: the multiplication by its ones folds
// away; a fused attention's dropout too; and the seed argument nothing
// reads any more goes) while @forward_backward keeps both, as PyTorch's eval and train
// modes do; `entries` names the functions.
// CHECK-LABEL: func.func @predict
// CHECK-SAME:    (%{{.+}}: tensor<4x8xf32> {loom.input = "x"}) -> tensor<4x8xf32>
// CHECK-NOT:     loom.dropout
// CHECK-NOT:     loom.mul
// CHECK:         return %arg0
// CHECK-LABEL: func.func @forward
// CHECK-SAME:    (%{{.+}}: tensor<4x8xf32> {loom.input = "x"}, %{{.+}}: tensor<1x1x4x2xf32> {loom.input = "q"}) -> (tensor<4x8xf32>, tensor<1x1x4x2xf32>)
// CHECK-NOT:     loom.dropout
// CHECK:         loom.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.000000e+00 : f64}
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME:    {loom.rng_seed}
// CHECK:         loom.dropout
// CHECK:         loom.dropout
// PREDICT-LABEL: func.func @predict
// PREDICT-NOT:     loom.dropout
// PREDICT-LABEL: func.func @forward
// PREDICT:         loom.dropout
func.func @predict(%x: tensor<4x8xf32> {loom.input = "x"}, %seed: tensor<i64> {loom.rng_seed}) -> tensor<4x8xf32> {
  %ones = loom.constant dense<1.0> : tensor<4x1xf32>
  %m = loom.dropout %ones, %seed ratio = 0.2 stream = 1 : tensor<4x1xf32>, tensor<i64>
  %b = loom.broadcast_in_dim %m dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %y = loom.mul %x, %b : tensor<4x8xf32>
  %z = loom.dropout %y, %seed ratio = 0.1 stream = 0 : tensor<4x8xf32>, tensor<i64>
  return %z : tensor<4x8xf32>
}
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %seed: tensor<i64> {loom.rng_seed}, %q: tensor<1x1x4x2xf32> {loom.input = "q"}) -> (tensor<4x8xf32>, tensor<1x1x4x2xf32>) {
  %z = loom.dropout %x, %seed ratio = 0.1 stream = 0 : tensor<4x8xf32>, tensor<i64>
  %o, %l = loom.attention %q, %q, %q seed %seed {scale = 1.0 : f64, causal, dropout = 0.2 : f32, stream = 1 : i64} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<i64>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4xf32>)
  return %z, %o : tensor<4x8xf32>, tensor<1x1x4x2xf32>
}
func.func @forward_backward(%x: tensor<4x8xf32> {loom.input = "x"}, %seed: tensor<i64> {loom.rng_seed}) -> tensor<4x8xf32> {
  %y = loom.dropout %x, %seed ratio = 0.1 stream = 0 : tensor<4x8xf32>, tensor<i64>
  %z = loom.dropout %y, %seed ratio = 0.1 stream = 0 : tensor<4x8xf32>, tensor<i64>
  return %z : tensor<4x8xf32>
}
