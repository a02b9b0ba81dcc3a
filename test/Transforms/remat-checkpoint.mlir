// RUN: loom-opt %s --split-input-file --loom-remat | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-remat="checkpoint=^block/" | FileCheck %s --check-prefix=REGEX
// RUN: loom-opt %s --split-input-file --loom-remat="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --split-input-file --loom-remat="exhaustive=4 memory-budget=70000" | FileCheck %s --check-prefix=EXH
// RUN: loom-opt %s --split-input-file --loom-remat="exhaustive=4 memory-budget=70000" --loom-fuse --loom-plan-memory | FileCheck %s --check-prefix=EXH-PLANNED

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
// With `exhaustive`, every subset of the stored forward values (t and s,
// each of 16 KiB) is also tried. The greedy search cannot fit @by_name in
// 70000 bytes: once t is recomputed, recomputing s too would keep x alive
// across the new peak, which its estimate counts as no saving, and it
// stops at 81920 (remat-invalid.mlir has the error). Recomputing both
// before their backward readers does fit, so that is what is done.
// EXH-LABEL: func.func @by_name(
// EXH-SAME:    arena = 65536 : i64, arena_before = 98304 : i64, budget = 70000 : i64, exhaustive_arena = 65536 : i64, exhaustive_candidates = 2 : i64, exhaustive_recompute_flops = 8192 : i64, recompute_flops = 8192 : i64, recomputed = {sigmoid = 1 : i64, tanh = 1 : i64}
// EXH-PLANNED-LABEL: func.func @by_name(
// EXH-PLANNED-SAME:    loom.arena_bytes = 65536
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
