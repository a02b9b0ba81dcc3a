// RUN: loom-opt %s --loom-fuse --loom-widen-keep-f32 --loom-plan-memory --loom-outline-kernels --loom-bufferize-kernels | FileCheck %s

// Tests that a cross-entropy of bf16 logits, which loom-widen-keep-f32
// computes in f32, never materializes the widened logits: every loop that
// reads them (the row maxima, the sums of exponentials, the label's logit,
// gathered) loads the bf16 element and extends it. Only per-row f32
// temporaries are allocated, no 4x8xf32 copy of the logits.
// CHECK-LABEL: module @loom_kernels
// CHECK:         func.func @loom_forward_k{{[0-9]+}}(%[[Z:[^:]+]]: memref<4x8xbf16>
// CHECK-NOT:       memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK:           linalg.generic
// CHECK-SAME:      ins(%[[Z]] : memref<4x8xbf16>)
// CHECK:           arith.extf
// CHECK:           arith.maximumf
// CHECK-NOT:       memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK:           memref.load %[[Z]]
// CHECK-NEXT:      arith.extf
// CHECK-NOT:       memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK:           return
func.func @forward(%z: tensor<4x8xbf16> {loom.input = "z"},
                   %y: tensor<4xi64> {loom.input = "labels"})
    -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.cross_entropy %z, %y reduction = mean : (tensor<4x8xbf16>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
