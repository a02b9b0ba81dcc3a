// RUN: loom-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(loom-cpu-reduction-loops))' | FileCheck %s
// The structure of the rewritten loops; their numbers are checked end to
// end (test/e2e/compiled-vs-interp.test and cpu-threads.test run softmax,
// cross-entropy and layer-norm kernels against the interpreter).

// A row sum of exponentials (softmax's denominator): a parallel loop over
// the rows around a sequential loop over the columns that carries the sum
// in a register, loaded once before and stored once after; the add that
// accumulates may be reassociated (vector lanes), the exp may not.
// CHECK-LABEL: func.func @row_sum_exp
// CHECK-NOT: linalg.generic
// CHECK: scf.parallel (%[[I:.*]]) = (%{{.*}}) to (%{{.*}}) step
// CHECK: %[[INIT:.*]] = memref.load %[[OUT:.*]][%[[I]]]
// CHECK: %[[SUM:.*]] = scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]]) -> (f32)
// CHECK: %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK: %[[M:.*]] = memref.load %{{.*}}[%[[I]]]
// CHECK: %[[D:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK: %[[E:.*]] = math.exp %[[D]] : f32
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[E]] fastmath<reassoc> : f32
// CHECK: scf.yield %[[NEXT]] : f32
// CHECK: memref.store %[[SUM]], %[[OUT]][%[[I]]]
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_sum_exp(%x: memref<4x8xf32>, %m: memref<4xf32>, %s: memref<4xf32>) {
  linalg.generic {indexing_maps = [#rows, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %m : memref<4x8xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %e = math.exp %d : f32
    %r = arith.addf %acc, %e : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Two accumulators (a max and a count) in one loop, and a linalg.index
// read as the loop index; the maximum keeps its NaN semantics (maximumf)
// and only gains reassoc.
// CHECK-LABEL: func.func @two_outputs
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[A:.*]] = %{{.*}}, %[[B:.*]] = %{{.*}}) -> (f32, i64)
// CHECK: arith.maximumf %[[A]], %{{.*}} fastmath<reassoc> : f32
// CHECK: arith.index_cast %[[J]] : index to i64
// CHECK: arith.addi %[[B]], %{{.*}} : i64
// CHECK: scf.yield
// CHECK: memref.store
// CHECK: memref.store
#map3 = affine_map<(d0, d1) -> (d0, d1)>
#map4 = affine_map<(d0, d1) -> (d0)>
func.func @two_outputs(%x: memref<4x8xf32>, %mx: memref<4xf32>, %n: memref<4xi64>) {
  linalg.generic {indexing_maps = [#map3, #map4, #map4], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%mx, %n : memref<4xf32>, memref<4xi64>) {
  ^bb0(%a: f32, %acc: f32, %cnt: i64):
    %r = arith.maximumf %acc, %a : f32
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %c = arith.addi %cnt, %ji : i64
    linalg.yield %r, %c : f32, i64
  }
  return
}

// -----

// A full reduction (no parallel dimension) is one loop nest, no
// scf.parallel. Its innermost dimension is short (8), so it is summed in
// lanes: a vector of 8 accumulators, one per column, carried over the rows
// (each row one vector load), combined with the output's element once at
// the end.
// CHECK-LABEL: func.func @total
// CHECK-NOT: scf.parallel
// CHECK: %[[ZERO:.*]] = arith.constant -0.000000e+00 : f32
// CHECK: %[[LANES0:.*]] = vector.broadcast %[[ZERO]] : f32 to vector<8xf32>
// CHECK: %[[LANES:.*]] = scf.for %[[I:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[LANES0]]) -> (vector<8xf32>)
// CHECK: %[[ROW:.*]] = vector.load %{{.*}}[%[[I]], %{{.*}}] : memref<4x8xf32>, vector<8xf32>
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[ROW]] fastmath<reassoc> : vector<8xf32>
// CHECK: scf.yield %[[NEXT]]
// CHECK: %[[INIT:.*]] = memref.load %[[OUT:.*]][]
// CHECK: %[[SUM:.*]] = vector.reduction <add>, %[[LANES]], %[[INIT]] fastmath<reassoc> : vector<8xf32> into f32
// CHECK: memref.store %[[SUM]], %[[OUT]][]
#all = affine_map<(d0, d1) -> (d0, d1)>
#none = affine_map<(d0, d1) -> ()>
func.func @total(%x: memref<4x8xf32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A 0-d input (a layer norm's mean over the whole tensor) is read once per
// row and broadcast.
// CHECK-LABEL: func.func @total_squares
// CHECK: scf.for {{.*}} -> (vector<8xf32>)
// CHECK: %[[M:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK: vector.broadcast %[[M]] : f32 to vector<8xf32>
#ts_x = affine_map<(d0, d1) -> (d0, d1)>
#ts_0 = affine_map<(d0, d1) -> ()>
func.func @total_squares(%x: memref<4x8xf32>, %m: memref<f32>, %s: memref<f32>) {
  linalg.generic {indexing_maps = [#ts_x, #ts_0, #ts_0], iterator_types = ["reduction", "reduction"]}
      ins(%x, %m : memref<4x8xf32>, memref<f32>) outs(%s : memref<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %q = arith.mulf %d, %d : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A depthwise filter gradient's shape of loops: for each (channel, ky,
// kx), a sum over (n, oy, ox) of a shifted row of the padded input times
// a row of the output gradient, plus a per-channel value read uniformly
// along the row (broadcast). Lanes over ox; the scalar body becomes a
// vector body.
// CHECK-LABEL: func.func @depthwise_rows
// CHECK: scf.parallel (%[[C:[a-z0-9_]+]], %[[KY:[a-z0-9_]+]], %[[KX:[a-z0-9_]+]]) =
// CHECK: scf.for %[[N:[a-z0-9_]+]] = {{.*}} iter_args({{.*}}) -> (vector<4xf32>)
// CHECK: scf.for %[[OY:[a-z0-9_]+]] = {{.*}} iter_args(%[[ACC:[a-z0-9_]+]] = %{{.*}}) -> (vector<4xf32>)
// CHECK: %[[X:.*]] = vector.load %{{.*}} : memref<2x3x6x6xf32>, vector<4xf32>
// CHECK: %[[DY:.*]] = vector.load %{{.*}}[%[[N]], %[[C]], %[[OY]], %{{.*}}] : memref<2x3x4x4xf32>, vector<4xf32>
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%[[C]]] : memref<3xf32>
// CHECK: %[[P:.*]] = arith.mulf %[[X]], %[[DY]] : vector<4xf32>
// CHECK: %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<4xf32>
// CHECK: %[[Q:.*]] = arith.mulf %[[P]], %[[SV]] : vector<4xf32>
// CHECK: arith.addf %[[ACC]], %[[Q]] fastmath<reassoc> : vector<4xf32>
// CHECK: vector.reduction <add>
#dw_x = affine_map<(c, ky, kx, n, oy, ox) -> (n, c, oy + ky, ox + kx)>
#dw_dy = affine_map<(c, ky, kx, n, oy, ox) -> (n, c, oy, ox)>
#dw_s = affine_map<(c, ky, kx, n, oy, ox) -> (c)>
#dw_f = affine_map<(c, ky, kx, n, oy, ox) -> (c, ky, kx)>
func.func @depthwise_rows(%x: memref<2x3x6x6xf32>, %dy: memref<2x3x4x4xf32>, %s: memref<3xf32>, %f: memref<3x3x3xf32>) {
  linalg.generic {indexing_maps = [#dw_x, #dw_dy, #dw_s, #dw_f], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %dy, %s : memref<2x3x6x6xf32>, memref<2x3x4x4xf32>, memref<3xf32>) outs(%f : memref<3x3x3xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.mulf %p, %c : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A stride-2 convolution reads every other element of its row: the span
// of the row (2 * 4 - 1 elements) in one load, then a shuffle of the even
// ones.
// CHECK-LABEL: func.func @strided_rows
// CHECK: scf.for {{.*}} -> (vector<4xf32>)
// CHECK: %[[SPAN:.*]] = vector.load %{{.*}} : memref<2x3x8xf32>, vector<7xf32>
// CHECK: vector.shuffle %[[SPAN]], %[[SPAN]] [0, 2, 4, 6] : vector<7xf32>, vector<7xf32>
#st_x = affine_map<(c, n, ox) -> (n, c, ox * 2)>
#st_dy = affine_map<(c, n, ox) -> (n, c, ox)>
#st_f = affine_map<(c, n, ox) -> (c)>
func.func @strided_rows(%x: memref<2x3x8xf32>, %dy: memref<2x3x4xf32>, %f: memref<3xf32>) {
  linalg.generic {indexing_maps = [#st_x, #st_dy, #st_f], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x, %dy : memref<2x3x8xf32>, memref<2x3x4xf32>) outs(%f : memref<3xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// No lanes where an input's row is not along its last dimension, or the
// combination is not an add, maximum or minimum of the accumulator: one
// register accumulator, as above.
// CHECK-LABEL: func.func @across_rows
// CHECK-NOT: vector
// CHECK: scf.for {{.*}} -> (f32)
// CHECK-LABEL: func.func @product
// CHECK-NOT: vector
// CHECK: scf.for {{.*}} -> (f32)
#ar_x = affine_map<(c, n, ox) -> (n, ox, c)>
#ar_f = affine_map<(c, n, ox) -> (c)>
func.func @across_rows(%x: memref<2x4x3xf32>, %f: memref<3xf32>) {
  linalg.generic {indexing_maps = [#ar_x, #ar_f], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<2x4x3xf32>) outs(%f : memref<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}
#pr_x = affine_map<(c, n, ox) -> (n, c, ox)>
func.func @product(%x: memref<2x3x4xf32>, %f: memref<3xf32>) {
  linalg.generic {indexing_maps = [#pr_x, #ar_f], iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<2x3x4xf32>) outs(%f : memref<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.mulf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A batch norm's per-channel sum over (n, h, w) of an NCHW tensor: the
// parallel channel loop moves outside, the reductions keep their order
// (n, h, w) inside, and the short innermost row (w) is summed in lanes.
// CHECK-LABEL: func.func @channel_sums
// CHECK: scf.parallel (%[[C:[a-z0-9_]+]]) =
// CHECK: scf.for %[[N:[a-z0-9_]+]] = {{.*}} -> (vector<5xf32>)
// CHECK: scf.for %[[H:[a-z0-9_]+]] = {{.*}} -> (vector<5xf32>)
// CHECK: vector.load %{{.*}}[%[[N]], %[[C]], %[[H]], %{{.*}}] : memref<2x3x4x5xf32>, vector<5xf32>
// CHECK: memref.load %{{.*}}[%[[C]]] : memref<3xf32>
// CHECK: vector.reduction <add>
#cs4_x = affine_map<(n, c, h, w) -> (n, c, h, w)>
#cs4_c = affine_map<(n, c, h, w) -> (c)>
func.func @channel_sums(%x: memref<2x3x4x5xf32>, %s: memref<3xf32>) {
  linalg.generic {indexing_maps = [#cs4_x, #cs4_c], iterator_types = ["reduction", "parallel", "reduction", "reduction"]}
      ins(%x : memref<2x3x4x5xf32>) outs(%s : memref<3xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A reduction over the outer dimension (a bias gradient's column sums)
// keeps the upstream lowering: its inner loop is then parallel and
// contiguous. So do ops on tensors and elementwise ops.
// CHECK-LABEL: func.func @column_sum
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["reduction", "parallel"]
// CHECK-NOT: fastmath
#cs_in = affine_map<(d0, d1) -> (d0, d1)>
#cs_out = affine_map<(d0, d1) -> (d1)>
func.func @column_sum(%x: memref<4x8xf32>, %s: memref<8xf32>) {
  linalg.generic {indexing_maps = [#cs_in, #cs_out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%s : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

#t_row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @on_tensors
// CHECK: linalg.generic
func.func @on_tensors(%x: tensor<4x8xf32>, %s: tensor<4xf32>) -> tensor<4xf32> {
  %r = linalg.generic {indexing_maps = [#cs_in, #t_row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%s : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %y = arith.addf %acc, %a : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// A large column reduction (a batch norm's variance over the rows of an
// NHWC tensor seen as [N*H*W, C], the mean read per column) has its rows
// split into 8 blocks reduced in parallel into partial sums that start
// from -0, which are then added to the output in block order.
// CHECK-LABEL: func.func @column_blocks
// CHECK-SAME:    (%[[X:.*]]: memref<1024x64xf32>, %[[M:.*]]: memref<64xf32>, %[[S:.*]]: memref<64xf32>)
// CHECK:         %[[P:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x64xf32>
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%[[P]] : memref<8x64xf32>)
// CHECK:         scf.parallel (%[[B:.*]]) =
// CHECK:           %[[FIRST:.*]] = arith.muli %[[B]], %{{.*}} : index
// CHECK:           %[[XS:.*]] = memref.subview %[[X]][%[[FIRST]], 0] [128, 64] [1, 1]
// CHECK:           %[[PS:.*]] = memref.subview %[[P]][%[[B]], 0] [1, 64] [1, 1] : memref<8x64xf32> to memref<64xf32, strided<[1], offset: ?>>
// CHECK:           linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK-SAME:        ins(%[[XS]], %[[M]] : memref<128x64xf32, strided<[64, 1], offset: ?>>, memref<64xf32>)
// CHECK-SAME:        outs(%[[PS]] : memref<64xf32, strided<[1], offset: ?>>)
// CHECK:         linalg.generic {{.*}}iterator_types = ["reduction", "parallel"]
// CHECK-SAME:      ins(%[[P]] : memref<8x64xf32>) outs(%[[S]] : memref<64xf32>)
// CHECK:           arith.addf
#cb_in = affine_map<(d0, d1) -> (d0, d1)>
#cb_col = affine_map<(d0, d1) -> (d1)>
func.func @column_blocks(%x: memref<1024x64xf32>, %m: memref<64xf32>, %s: memref<64xf32>) {
  linalg.generic {indexing_maps = [#cb_in, #cb_col, #cb_col], iterator_types = ["reduction", "parallel"]}
      ins(%x, %m : memref<1024x64xf32>, memref<64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: f32, %mean: f32, %acc: f32):
    %d = arith.subf %a, %mean : f32
    %q = arith.mulf %d, %d : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  }
  return
}
