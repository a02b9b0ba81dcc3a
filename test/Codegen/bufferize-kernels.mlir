// RUN: loom-opt %s --split-input-file --loom-fuse --loom-plan-memory --loom-outline-kernels --loom-bufferize-kernels | FileCheck %s

// Tests that a kernel takes its inputs, then its outputs, as buffers, and
// that an in-place state update reads and writes its argument's buffer
// alone: its out-param (the fourth buffer) is left unused.
// CHECK-LABEL: module @loom_kernels
// CHECK:         func.func @loom_sgd_k0(%[[W:.*]]: memref<8xf32>, %[[G:.*]]: memref<8xf32>, %[[X:.*]]: memref<4x8xf32>, %{{.*}}: memref<8xf32>, %[[S:.*]]: memref<4xf32>)
// CHECK:           linalg.generic
// CHECK-SAME:      ins(%[[W]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[W]] : memref<8xf32>)
// CHECK:           arith.subf
// CHECK:           linalg.generic
// CHECK-SAME:      ins(%[[X]] : memref<4x8xf32>) outs(%[[S]] : memref<4xf32>)
// CHECK-NOT:     memref.alloc
func.func @sgd(%g: tensor<8xf32> {loom.input = "g"},
               %w: tensor<8xf32> {loom.param = "w"},
               %x: tensor<4x8xf32> {loom.input = "x"})
    -> (tensor<8xf32> {loom.output = "w"}, tensor<4xf32> {loom.output = "s"}) {
  %u = loom.sub %w, %g : tensor<8xf32>
  %e = loom.exp %x : tensor<4x8xf32>
  %s = loom.reduce_sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %u, %s : tensor<8xf32>, tensor<4xf32>
}

// -----

// Tests that a softmax's row maxima and sums stay temporaries
// (memref.alloc) for the next pass to place, and the result is written
// straight into the out-param.
// CHECK-LABEL: module @loom_kernels
// CHECK:         func.func @loom_forward_k0(%[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<4x8xf32>)
// CHECK-COUNT-2:   memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK:           outs(%[[Y]] : memref<4x8xf32>)
// CHECK-NOT:       memref.copy
func.func @forward(%x: tensor<4x8xf32> {loom.input = "x"})
    -> (tensor<4x8xf32> {loom.output = "y"}) {
  %y = loom.softmax %x axis = 1 : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that a broadcast read by several ops (after CSE, AdamW's bias
// corrections are one broadcast per parameter shape, shared by every
// parameter of that shape) is fused into each reader instead of being
// written out as a temporary the size of a parameter; the two products,
// loops over one domain, then become one loop with two outputs.
// CHECK-LABEL: module @loom_kernels
// CHECK:         func.func @loom_scale_k0(
// CHECK-NOT:       memref.alloc
// CHECK:           linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : memref<64x64xf32>, memref<64x64xf32>)
// CHECK-NOT:       linalg.generic
// CHECK:           return
func.func @scale(%a: tensor<64x64xf32> {loom.input = "a"},
                 %b: tensor<64x64xf32> {loom.input = "b"},
                 %s: tensor<f32> {loom.input = "s"})
    -> (tensor<64x64xf32> {loom.output = "x"}, tensor<64x64xf32> {loom.output = "y"}) {
  %bs = loom.broadcast_in_dim %s dims = [] : tensor<f32> -> tensor<64x64xf32>
  %x = loom.mul %a, %bs : tensor<64x64xf32>
  %y = loom.mul %b, %bs : tensor<64x64xf32>
  return %x, %y : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// Tests that an update whose outputs read each other (AdamW: the new
// moments are outputs, and the parameter update reads them) is one loop
// that reads each input once and writes every output, its arithmetic not
// repeated.
// CHECK-LABEL: module @loom_kernels
// CHECK:         func.func @loom_update_k0(
// CHECK-NOT:       memref.alloc
// CHECK:           linalg.generic {{.*}} ins(%{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} : {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : memref<256xf32>, memref<256xf32>, memref<256xf32>)
// CHECK-COUNT-1:     math.sqrt
// CHECK-NOT:         math.sqrt
// CHECK:             linalg.yield
// CHECK-NOT:       linalg.generic
// CHECK:           return
func.func @update(%p: tensor<256xf32> {loom.input = "p"}, %m: tensor<256xf32> {loom.input = "m"},
                  %v: tensor<256xf32> {loom.input = "v"}, %g: tensor<256xf32> {loom.input = "g"})
    -> (tensor<256xf32> {loom.output = "p2"}, tensor<256xf32> {loom.output = "m2"},
        tensor<256xf32> {loom.output = "v2"}) {
  %b1 = loom.constant dense<0.9> : tensor<256xf32>
  %b2 = loom.constant dense<0.999> : tensor<256xf32>
  %eps = loom.constant dense<1.0e-8> : tensor<256xf32>
  %m1 = loom.mul %m, %b1 : tensor<256xf32>
  %mn = loom.add %m1, %g : tensor<256xf32>
  %gg = loom.mul %g, %g : tensor<256xf32>
  %v1 = loom.mul %v, %b2 : tensor<256xf32>
  %vn = loom.add %v1, %gg : tensor<256xf32>
  %s = loom.sqrt %vn : tensor<256xf32>
  %d = loom.add %s, %eps : tensor<256xf32>
  %q = loom.div %mn, %d : tensor<256xf32>
  %pn = loom.sub %p, %q : tensor<256xf32>
  return %pn, %mn, %vn : tensor<256xf32>, tensor<256xf32>, tensor<256xf32>
}
