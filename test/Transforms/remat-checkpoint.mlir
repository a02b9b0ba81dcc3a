// RUN: loom-opt %s --split-input-file --loom-remat | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-remat="checkpoint=^block/" | FileCheck %s --check-prefix=REGEX
// RUN: loom-opt %s --split-input-file --loom-remat="mode=none" | FileCheck %s --check-prefix=NONE

// A hand-marked op (loom.checkpoint, as the JSON format's "checkpoint"
// node attribute sets it) in a function that computes gradients is not
// stored for the backward: its first backward reader recomputes it, with
// no budget asked. The forward is what the loss (the first result) is
// computed from; the tanh's first reader outside it is the backward's.
// CHECK-LABEL: func.func @marked(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<64x64xf32>
// CHECK-SAME:    recomputed = {tanh = 1 : i64}
// CHECK:         %[[T:.+]] = loom.tanh %[[X]] {loom.checkpoint}
// CHECK:         loom.matmul %[[T]]
// CHECK:         loom.reduce_sum
// CHECK:         loom.exp
// CHECK-NEXT:    %[[T2:.+]] = loom.tanh %[[X]] {loom.checkpoint}
// CHECK-NEXT:    loom.mul %{{.+}}, %[[T2]]
// NONE-LABEL:  func.func @marked(
// NONE-COUNT-1:  loom.tanh
// NONE-NOT:      loom.tanh
// NONE-LABEL:  func.func @by_name(
func.func @marked(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<f32>, tensor<64x64xf32> {loom.grad = "w"}) {
  %t = loom.tanh %x {loom.checkpoint} : tensor<64x64xf32>
  %m = loom.matmul %t, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = loom.reduce_sum %m dims = [0] : tensor<64x64xf32> -> tensor<64xf32>
  %l = loom.reduce_sum %r dims = [0] : tensor<64xf32> -> tensor<f32>
  %e = loom.exp %x : tensor<64x64xf32>
  %g = loom.mul %e, %t : tensor<64x64xf32>
  return %l, %g : tensor<f32>, tensor<64x64xf32>
}

// -----

// The same marks by location name (loomc --checkpoint): the ops of the
// ONNX nodes under block/ are recomputed, others stored. In a function
// without gradients nothing is marked.
// REGEX-LABEL: func.func @by_name(
// REGEX-SAME:    recomputed = {tanh = 1 : i64}
// REGEX:         loom.tanh %arg0
// REGEX:         loom.sigmoid %arg0
// REGEX:         loom.exp
// REGEX-NEXT:    loom.tanh %arg0
// REGEX-NOT:     loom.sigmoid
// REGEX-LABEL: func.func @inference(
// REGEX-SAME:    recomputed = {}
// REGEX-COUNT-1: loom.tanh
// REGEX-NOT:     loom.tanh
func.func @by_name(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<f32>, tensor<64x64xf32> {loom.grad = "w"}) {
  %t = loom.tanh %x : tensor<64x64xf32> loc("block/Tanh")
  %s = loom.sigmoid %x : tensor<64x64xf32> loc("head/Sigmoid")
  %u = loom.add %t, %s : tensor<64x64xf32>
  %m = loom.matmul %u, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = loom.reduce_sum %m dims = [0] : tensor<64x64xf32> -> tensor<64xf32>
  %l = loom.reduce_sum %r dims = [0] : tensor<64xf32> -> tensor<f32>
  %e = loom.exp %x : tensor<64x64xf32>
  %g = loom.mul %e, %t : tensor<64x64xf32>
  %g2 = loom.mul %g, %s : tensor<64x64xf32>
  return %l, %g2 : tensor<f32>, tensor<64x64xf32>
}

func.func @inference(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %t = loom.tanh %x : tensor<64x64xf32> loc("block/Tanh")
  %m = loom.matmul %t, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = loom.mul %m, %t : tensor<64x64xf32>
  return %g : tensor<64x64xf32>
}
