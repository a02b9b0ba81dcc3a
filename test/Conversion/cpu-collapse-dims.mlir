// RUN: loom-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(loom-cpu-collapse-dims))' | FileCheck %s
// Which loop dimensions of an elementwise op are iterated as one. The
// numbers of collapsed kernels are checked end to end (the optimizer and
// batch-norm kernels of test/e2e/compiled-vs-interp.test and the ONNX node
// tests run compiled against the interpreter and the reference outputs).

// An AdamW-like update of two same-shaped 4-d parameters in one loop (the
// multi-tensor optimizer kernel), in place, with a scalar read from a 0-d
// buffer: one loop over all 2 * 3 * 3 * 3 = 54 elements, each buffer a
// collapsed view.
// CHECK-LABEL: func.func @update_4d
// CHECK-DAG: %[[P:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1, 2, 3]] : memref<2x3x3x3xf32> into memref<54xf32>
// CHECK-DAG: %[[G:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0, 1, 2, 3]] : memref<2x3x3x3xf32> into memref<54xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID:.*]], #[[ID]], #[[S:.*]], #[[ID]]], iterator_types = ["parallel"]}
// CHECK-SAME: ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<54xf32>, memref<54xf32>, memref<f32>) outs(%{{.*}} : memref<54xf32>)
// CHECK: arith.mulf
// CHECK: arith.subf
// CHECK-NOT: linalg.generic
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#s4 = affine_map<(d0, d1, d2, d3) -> ()>
func.func @update_4d(%p: memref<2x3x3x3xf32>, %g: memref<2x3x3x3xf32>, %lr: memref<f32>) {
  linalg.generic {indexing_maps = [#id4, #id4, #s4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%p, %g, %lr : memref<2x3x3x3xf32>, memref<2x3x3x3xf32>, memref<f32>) outs(%p : memref<2x3x3x3xf32>) {
  ^bb0(%a: f32, %b: f32, %l: f32, %o: f32):
    %m = arith.mulf %b, %l : f32
    %r = arith.subf %a, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A per-channel scale of an NCHW tensor (a batch norm's normalization):
// the channel vector indexes c alone, so (n, c) stay two loops and (h, w)
// become one of 4 * 5 = 20.
// CHECK-LABEL: func.func @per_channel
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : memref<2x3x4x5xf32> into memref<2x3x20xf32>
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: memref<2x3x20xf32>, memref<3xf32>
#nchw = affine_map<(n, c, h, w) -> (n, c, h, w)>
#c = affine_map<(n, c, h, w) -> (c)>
func.func @per_channel(%x: memref<2x3x4x5xf32>, %s: memref<3xf32>, %y: memref<2x3x4x5xf32>) {
  linalg.generic {indexing_maps = [#nchw, #c, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%x, %s : memref<2x3x4x5xf32>, memref<3xf32>) outs(%y : memref<2x3x4x5xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left as they are: a transpose (the output holds (d1, d0), not a run in
// order), a reduction, a body that reads an index, and a strided view.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: collapse_shape
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: collapse_shape
#ij = affine_map<(d0, d1) -> (d0, d1)>
#ji = affine_map<(d0, d1) -> (d1, d0)>
#i = affine_map<(d0, d1) -> (d0)>
func.func @left_alone(%x: memref<4x6xf32>, %t: memref<6x4xf32>, %r: memref<4xf32>, %y: memref<4x6xf32>, %v: memref<4x6xf32, strided<[12, 1]>>) {
  linalg.generic {indexing_maps = [#ij, #ji], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x6xf32>) outs(%t : memref<6x4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#ij, #i], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x6xf32>) outs(%r : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#ij, #ij], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x6xf32>) outs(%y : memref<4x6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %j = linalg.index 1 : index
    %f = arith.index_cast %j : index to i32
    %g = arith.sitofp %f : i32 to f32
    %s = arith.addf %a, %g : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#ij, #ij], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x6xf32>) outs(%v : memref<4x6xf32, strided<[12, 1]>>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}
