// RUN: loom-opt %s --loom-fuse --loom-plan-memory | FileCheck %s

// Tests the in-place state update: %w's new value is made pointwise from it
// by its last reader (an SGD-like step), so the two share bytes; the
// momentum %m is read again after its update kernel (by the second matmul),
// and %b's update kernel also reduces it, so neither of those is updated in
// place.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME:    %{{.*}}: tensor<8x8xf32> {loom.offset = [[W:[0-9]+]] : i64, loom.param = "w"}
// CHECK-SAME:    %{{.*}}: tensor<8x8xf32> {loom.offset = [[M:[0-9]+]] : i64, loom.opt_state = "m"}
// CHECK-SAME:    %{{.*}}: tensor<8xf32> {loom.offset = [[B:[0-9]+]] : i64, loom.param = "b"}
// CHECK:         loom.matmul
// CHECK-NOT:     array<i64: [[M]], [[W]]>
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: {{[0-9]+}}, [[W]]>}
// CHECK:         loom.matmul
// CHECK-NOT:     array<i64: [[B]],
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}>}
func.func @in_place(%x: tensor<8x8xf32> {loom.input = "x"},
                    %w: tensor<8x8xf32> {loom.param = "w"},
                    %m: tensor<8x8xf32> {loom.opt_state = "m"},
                    %b: tensor<8xf32> {loom.param = "b"})
    -> (tensor<8x8xf32> {loom.output = "w"}, tensor<8x8xf32> {loom.output = "m"},
        tensor<8xf32> {loom.output = "b"}, tensor<f32> {loom.output = "bsum"},
        tensor<8x8xf32> {loom.output = "y"}) {
  %g = loom.matmul %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %m2 = loom.add %m, %g : tensor<8x8xf32>
  %u = loom.sub %w, %m2 : tensor<8x8xf32>
  %y = loom.matmul %x, %m : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %b2 = loom.neg %b : tensor<8xf32>
  %s = loom.reduce_sum %b dims = [0] : tensor<8xf32> -> tensor<f32>
  return %u, %m2, %b2, %s, %y : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8xf32>, tensor<f32>, tensor<8x8xf32>
}

// Tests an AdamW-like kernel: the new momentum %m2 is also read by the
// parameter's update, which reads the new value, so %m is updated in place
// as well as %w; %v's partial value %t is read after %v's new value is made
// (by %late), so %v is not.
// CHECK-LABEL: func.func @momentum(
// CHECK-SAME:    {loom.offset = [[W2:[0-9]+]] : i64, loom.param = "w"}
// CHECK-SAME:    {loom.offset = [[M2:[0-9]+]] : i64, loom.opt_state = "m"}
// CHECK-SAME:    {loom.offset = [[V2:[0-9]+]] : i64, loom.opt_state = "v"}
// CHECK-NOT:     array<i64: [[M2]], [[W2]], [[V2]],
// CHECK:         loom.fusion
// CHECK-SAME:    {loom.offsets = array<i64: [[M2]], [[W2]], {{[0-9]+}}, {{[0-9]+}}>}
func.func @momentum(%g: tensor<8x8xf32> {loom.input = "g"},
                    %w: tensor<8x8xf32> {loom.param = "w"},
                    %m: tensor<8x8xf32> {loom.opt_state = "m"},
                    %v: tensor<8x8xf32> {loom.opt_state = "v"})
    -> (tensor<8x8xf32> {loom.output = "w"}, tensor<8x8xf32> {loom.output = "m"},
        tensor<8x8xf32> {loom.output = "v"}, tensor<8x8xf32> {loom.output = "late"}) {
  %m2 = loom.add %m, %g : tensor<8x8xf32>
  %w2 = loom.sub %w, %m2 : tensor<8x8xf32>
  %t = loom.exp %v : tensor<8x8xf32>
  %v2 = loom.mul %v, %g : tensor<8x8xf32>
  %late = loom.add %v2, %t : tensor<8x8xf32>
  return %w2, %m2, %v2, %late : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
