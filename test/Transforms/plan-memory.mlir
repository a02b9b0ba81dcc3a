// RUN: loom-opt %s --split-input-file --loom-fuse --loom-plan-memory | FileCheck %s

// Tests that values whose live ranges do not overlap share bytes, that a
// step's output never shares bytes with its inputs, and that the arena is
// the peak. Each tensor<8x8xf32> is 256 bytes. %a is read by step 0 only,
// so the GEMM (step 1) may write over it but not over its input t1; t3 =
// fusion(t2) may reuse t1's bytes: two tensors live at a time, 512 bytes.
// CHECK-LABEL: func.func @reuse(
// CHECK-SAME:    {loom.offset = [[A:[0-9]+]] : i64}
// CHECK-SAME:    loom.arena_bytes = 512 : i64
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: [[T1:[0-9]+]]>}
// CHECK:         loom.matmul
// CHECK-SAME:    {loom.offsets = array<i64: [[A]]>}
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: [[T1]]>}
func.func @reuse(%a: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %t1 = loom.exp %a : tensor<8x8xf32>
  %t2 = loom.matmul %t1, %t1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %t3 = loom.neg %t2 : tensor<8x8xf32>
  return %t3 : tensor<8x8xf32>
}

// -----

// Tests that a reshape is a view: its result has its operand's offset.
// CHECK-LABEL: func.func @view(
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: [[E:[0-9]+]]>}
// CHECK:         loom.reshape
// CHECK-SAME:    {loom.offsets = array<i64: [[E]]>}
func.func @view(%a: tensor<2x3xf32>) -> tensor<6xf32> {
  %e = loom.exp %a : tensor<2x3xf32>
  %r = loom.reshape %e : tensor<2x3xf32> -> tensor<6xf32>
  return %r : tensor<6xf32>
}
