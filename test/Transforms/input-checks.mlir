// RUN: loom-opt %s --loom-input-checks | FileCheck %s

// Tests that each integer loom.input read as indices or labels gets the
// values its readers accept (loom.input_checks): a gather's and a
// scatter_add's [-n, n) (through a reshape), cross-entropy labels' [0, C)
// with the ignore_index, one range per distinct range (named by the first
// op of the block that reads it), several when the readers differ; and that
// inputs read otherwise, float inputs and parameters get none.

// CHECK-LABEL: func.func @embed(
// CHECK-SAME:  {loom.input = "ids", loom.input_checks = [{max = 50 : i64, min = -50 : i64, op = "gather 'wte'"}]}
// CHECK-SAME:  {loom.input = "labels", loom.input_checks = [{ignore = -100 : i64, max = 10 : i64, min = 0 : i64, op = "cross_entropy 'loss'"}]}
// CHECK-SAME:  %{{.*}}: tensor<6x4xf32> {loom.input = "x"}
// CHECK-SAME:  %{{.*}}: tensor<6xi64> {loom.input = "other"}
// CHECK-SAME:  %{{.*}}: tensor<50x4xf32> {loom.param = "wte"}
func.func @embed(%ids: tensor<2x3xi64> {loom.input = "ids"}, %labels: tensor<6xi64> {loom.input = "labels"}, %x: tensor<6x4xf32> {loom.input = "x"}, %other: tensor<6xi64> {loom.input = "other"}, %wte: tensor<50x4xf32> {loom.param = "wte"}, %w: tensor<4x10xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}, tensor<50x4xf32> {loom.grad = "wte"}, tensor<6xi64> {loom.output = "o"}) {
  %flat = loom.reshape %ids : tensor<2x3xi64> -> tensor<6xi64> loc("flat")
  %e = loom.gather %wte[%flat] axis = 0 : (tensor<50x4xf32>, tensor<6xi64>) -> tensor<6x4xf32> loc("wte")
  %h = loom.add %e, %x : tensor<6x4xf32>
  %logits = loom.matmul %h, %w : (tensor<6x4xf32>, tensor<4x10xf32>) -> tensor<6x10xf32>
  %l = loom.cross_entropy %logits, %labels reduction = mean {ignore_index = -100 : i64} : (tensor<6x10xf32>, tensor<6xi64>) -> tensor<f32> loc("loss")
  %g = loom.scatter_add %x[%flat] axis = 0 : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<50x4xf32> loc("wte_grad")
  %o = loom.add %other, %other : tensor<6xi64>
  return %l, %g, %o : tensor<f32>, tensor<50x4xf32>, tensor<6xi64>
}

// Two tables of other sizes read the same input: both ranges are kept.
// CHECK-LABEL: func.func @two(
// CHECK-SAME:  loom.input_checks = [{max = 8 : i64, min = -8 : i64, op = "gather 'a'"}, {max = 5 : i64, min = -5 : i64, op = "gather 'b'"}]
func.func @two(%ids: tensor<3xi32> {loom.input = "ids"}, %a: tensor<8x2xf32> {loom.param = "a"}, %b: tensor<5x2xf32> {loom.param = "b"}) -> (tensor<3x2xf32> {loom.output = "y"}) {
  %x = loom.gather %a[%ids] axis = 0 : (tensor<8x2xf32>, tensor<3xi32>) -> tensor<3x2xf32> loc("a")
  %y = loom.gather %b[%ids] axis = 0 : (tensor<5x2xf32>, tensor<3xi32>) -> tensor<3x2xf32> loc("b")
  %z = loom.add %x, %y : tensor<3x2xf32>
  return %z : tensor<3x2xf32>
}
