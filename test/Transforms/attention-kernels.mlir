// RUN: loom-opt %s --split-input-file --loom-attention-kernels | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-attention-kernels --loom-fuse | FileCheck %s --check-prefix=FUSE

// Tests that the fused attention and its gradient are marked generated
// kernels, and that loom-fuse then puts each in a kernel of its own (a
// library attention stays outside the kernels: fuse-attention.mlir).
// CHECK-LABEL: func.func @marked(
// CHECK:         loom.attention {{.*}}loom.generated_kernel
// CHECK:         loom.attention_grad {{.*}}loom.generated_kernel
// FUSE-LABEL:  func.func @marked(
// FUSE:          loom.fusion
// FUSE-NEXT:       ^bb0
// FUSE-NEXT:       loom.attention
// FUSE-NEXT:       loom.yield
// FUSE:          loom.fusion
// FUSE-NEXT:       ^bb0
// FUSE-NEXT:       loom.attention_grad
// FUSE-NEXT:       loom.yield
func.func @marked(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %do: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) {
  %o, %lse = loom.attention %q, %k, %v {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %do {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return %dq, %dk, %dv : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>
}
