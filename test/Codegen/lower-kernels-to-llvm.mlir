// RUN: loom-opt %s --loom-fuse --loom-plan-memory --loom-outline-kernels --loom-bufferize-kernels --loom-lower-kernels-to-llvm | FileCheck %s
// RUN: loom-opt %s --loom-codegen-cpu | FileCheck %s
// RUN: loom-opt %s --loom-codegen-cpu | FileCheck %s --check-prefix=MATH
// RUN: sed 's/4x8/256x64/g; s/4xf32/256xf32/g' %s | loom-opt --loom-codegen-cpu | FileCheck %s --check-prefix=BIG
// RUN: sed 's/4x8/256x64/g; s/4xf32/256xf32/g' %s | loom-opt --loom-codegen-cpu=min-parallel-work=0 | FileCheck %s --check-prefix=SERIAL

// Tests that a softmax kernel's two temporaries become scratch arguments
// after its buffers (4 pointers: x, y, then the row maxima and sums),
// recorded in loom.kernel_info at 64-byte offsets for the plan, and that
// no allocation is left; loops this small get no OpenMP team, 256 rows
// of 64 do (BIG), unless min-parallel-work=0 turns OpenMP off (SERIAL).
// CHECK-LABEL: module @loom_kernels
// CHECK-SAME:    loom.kernel_info = {loom_forward_k0 = {scratch = [memref<4xf32>, memref<4xf32>], scratch_bytes = 128 : i64, scratch_offsets = array<i64: 0, 64>}}
// CHECK:         llvm.func @loom_forward_k0(%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK-NOT:     malloc
// CHECK-NOT:     omp.parallel
// BIG:           llvm.func @loom_forward_k0(
// BIG:           omp.parallel
// SERIAL:        llvm.func @loom_forward_k0(
// SERIAL-NOT:    omp.parallel
// The softmax's exp is MLIR's polynomial (fused multiply-adds), not a call
// of libm's expf (nor LLVM's exp intrinsic, which becomes one): the same
// instructions for every element, vectorized or not, so that a value
// recomputed in another kernel has the same bits.
// MATH:          llvm.func @loom_forward_k0(
// MATH-NOT:      {{@expf|llvm.intr.exp}}
// MATH:          llvm.intr.fma
// MATH-NOT:      {{@expf|llvm.intr.exp}}
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"})
    -> (tensor<4x8xf32> {loom.output = "y"}) {
  %y = loom.softmax %x axis = 1 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
