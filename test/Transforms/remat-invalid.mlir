// RUN: loom-opt %s --split-input-file --loom-remat="memory-budget=40000" --verify-diagnostics
// RUN: not loom-opt %s --loom-remat="memory-budget=12Q" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not loom-opt %s --loom-remat="memory-budget=0" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not loom-opt %s --loom-remat="mode=some" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not loom-opt %s --loom-remat="checkpoint=(" 2>&1 | FileCheck %s --check-prefix=REGEX

// BUDGET: loom-remat: memory-budget '{{.*}}' is not a positive byte count
// MODE: loom-remat: unknown mode 'some' (expected none, auto or full)
// REGEX: loom-remat: checkpoint '(' is not a regular expression

// A budget below every arena the recomputation reaches: the error names
// the smallest one reached (x, w and two GEMM results: 65536 bytes).
// expected-error @+1 {{loom-remat: @saved needs an arena of at least 65536 bytes (the smallest reached by recomputing forward values; it is 81920 bytes without), more than the budget of 40000 bytes}}
func.func @saved(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %a = loom.exp %x : tensor<64x64xf32>
  %m1 = loom.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = loom.matmul %m1, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m3 = loom.matmul %m2, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = loom.mul %m3, %a : tensor<64x64xf32>
  %h = loom.add %g, %x : tensor<64x64xf32>
  return %h : tensor<64x64xf32>
}

// -----

// Without `exhaustive`, the greedy search stops at 81920 bytes here (see
// remat-checkpoint.mlir, where the subset search fits it).
// expected-error @+1 {{loom-remat: @two needs an arena of at least 81920 bytes}}
func.func @two(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<f32>, tensor<64x64xf32> {loom.grad = "w"}) {
  %t = loom.tanh %x : tensor<64x64xf32>
  %s = loom.sigmoid %x : tensor<64x64xf32>
  %u = loom.add %t, %s : tensor<64x64xf32>
  %m = loom.matmul %u, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = loom.reduce_sum %m dims = [0] : tensor<64x64xf32> -> tensor<64xf32>
  %l = loom.reduce_sum %r dims = [0] : tensor<64xf32> -> tensor<f32>
  %e = loom.exp %x : tensor<64x64xf32>
  %g = loom.mul %e, %t : tensor<64x64xf32>
  %g2 = loom.mul %g, %s : tensor<64x64xf32>
  return %l, %g2 : tensor<f32>, tensor<64x64xf32>
}
