// RUN: loom-opt %s --split-input-file --loom-attach-loss="loss=cross_entropy" | FileCheck %s --check-prefix=CE
// RUN: loom-opt %s --split-input-file --loom-attach-loss="loss=mse reduction=sum labels=target" | FileCheck %s --check-prefix=MSE

// Tests that the labels become an input after the existing inputs and the
// only result becomes the scalar loss.
// CE-LABEL: func.func @forward(
// CE-SAME: %{{.+}}: tensor<4x8xf32> {loom.input = "x"}, %[[LABELS:.+]]: tensor<4xi64> {loom.input = "labels"}, %{{.+}}: tensor<8x3xf32> {loom.param = "w"}
// CE-SAME: -> (tensor<f32> {loom.output = "loss"})
// CE: %[[LOGITS:.+]] = loom.matmul
// CE: %[[LOSS:.+]] = loom.cross_entropy %[[LOGITS]], %[[LABELS]] reduction = mean {ignore_index = -100 : i64}
// CE: return %[[LOSS]] : tensor<f32>
// MSE-LABEL: func.func @forward(
// MSE-SAME: %[[T:[^:]+]]: tensor<4x3xf32> {loom.input = "target"}
// MSE: loom.mse %{{.+}}, %[[T]] reduction = sum
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x3xf32> {loom.param = "w"}) -> (tensor<4x3xf32> {loom.output = "logits"}) {
  %y = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}
