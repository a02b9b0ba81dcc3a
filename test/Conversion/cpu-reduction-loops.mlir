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
// scf.parallel; both reduction dimensions stay in their order.
// CHECK-LABEL: func.func @total
// CHECK-NOT: scf.parallel
// CHECK: %[[INIT:.*]] = memref.load %[[OUT:.*]][]
// CHECK: scf.for %[[I:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[INIT]])
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[ACC2:.*]] = %[[ACC]])
// CHECK: memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK: memref.store %{{.*}}, %[[OUT]][]
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
