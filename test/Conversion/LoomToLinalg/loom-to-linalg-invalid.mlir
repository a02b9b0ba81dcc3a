// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(convert-loom-to-linalg))' --verify-diagnostics

// Tests that matmul, a library GEMM, has no kernel lowering.
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{cannot lower 'loom.matmul' to a CPU kernel}}
  %c = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}
