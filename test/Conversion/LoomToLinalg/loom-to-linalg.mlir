// RUN: loom-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(convert-loom-to-linalg))' | FileCheck %s

// Tests that an elementwise op becomes a linalg.generic with identity maps.
// CHECK-LABEL: func.func @add(
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "parallel"]
// CHECK:           arith.addf
// CHECK-NOT:     loom.add
func.func @add(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %z = loom.add %x, %y : tensor<2x3xf32>
  return %z : tensor<2x3xf32>
}

// -----

// Tests that a reduction over the last axis fills its accumulator with the
// identity and reduces the second loop.
// CHECK-LABEL: func.func @reduce_max(
// CHECK:         %[[NEG_INF:.+]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[INIT:.+]] = linalg.fill ins(%[[NEG_INF]] : f32)
// CHECK:         linalg.generic
// CHECK-SAME:      iterator_types = ["parallel", "reduction"]
// CHECK-SAME:      outs(%[[INIT]] : tensor<2xf32>)
// CHECK:           arith.maximumf
func.func @reduce_max(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %r = loom.reduce_max %x dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// Tests that a slice is a strided view, and that an empty slice starting at
// the end of a dimension is an empty tensor (extract_slice would reject the
// offset).
// CHECK-LABEL: func.func @slices(
// CHECK:         tensor.extract_slice %{{.+}}[0, 1] [4, 3] [1, 3]
// CHECK:         tensor.empty() : tensor<4x0xf32>
func.func @slices(%x: tensor<4x10xf32>) -> (tensor<4x3xf32>, tensor<4x0xf32>) {
  %a = loom.slice %x start = [0, 1] limit = [4, 10] stride = [1, 3] : tensor<4x10xf32> -> tensor<4x3xf32>
  %b = loom.slice %x start = [0, 10] limit = [4, 10] stride = [1, 1] : tensor<4x10xf32> -> tensor<4x0xf32>
  return %a, %b : tensor<4x3xf32>, tensor<4x0xf32>
}

// -----

// Tests that scatter_add becomes a loop nest over the updates that reads,
// adds and inserts (the interpreter's order of sums).
// CHECK-LABEL: func.func @scatter_add(
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             tensor.extract
// CHECK:             arith.addf
// CHECK:             tensor.insert
func.func @scatter_add(%u: tensor<3x2xf32>, %i: tensor<3xi64>) -> tensor<5x2xf32> {
  %r = loom.scatter_add %u[%i] axis = 0 : (tensor<3x2xf32>, tensor<3xi64>) -> tensor<5x2xf32>
  return %r : tensor<5x2xf32>
}

// -----

// Tests that a constant 0, 1, ..., n-1 (the class ids of cross-entropy's
// one-hot) is read as the loop index, not streamed from a table; a constant
// that is not an iota stays a table.
// CHECK-LABEL: func.func @one_hot(
// CHECK:         linalg.generic
// CHECK:           %[[J:.+]] = linalg.index 1 : index
// CHECK:           arith.index_cast %[[J]] : index to i64
// CHECK-LABEL: func.func @not_iota(
// CHECK:         arith.constant dense<[0, 2, 1, 3]> : tensor<4xi64>
// CHECK-NOT:     linalg.index
func.func @one_hot(%labels: tensor<3xi64>) -> tensor<3x4xi64> {
  %ids = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %c = loom.broadcast_in_dim %ids dims = [1] : tensor<4xi64> -> tensor<3x4xi64>
  return %c : tensor<3x4xi64>
}
func.func @not_iota(%labels: tensor<3xi64>) -> tensor<3x4xi64> {
  %ids = loom.constant dense<[0, 2, 1, 3]> : tensor<4xi64>
  %c = loom.broadcast_in_dim %ids dims = [1] : tensor<4xi64> -> tensor<3x4xi64>
  return %c : tensor<3x4xi64>
}

// -----

// Tests that a power with a constant exponent of 3 (GELU's x^3) or 0.5 is
// multiplications or a square root, not powf, and that any other exponent
// stays powf.
// CHECK-LABEL: func.func @pow_constant(
// CHECK:         linalg.generic
// CHECK:         ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[X2:.*]] = arith.mulf %[[X]], %[[X]]
// CHECK-NEXT:      %[[X3:.*]] = arith.mulf %[[X2]], %[[X]]
// CHECK-NEXT:      linalg.yield %[[X3]]
// CHECK:         linalg.generic
// CHECK:           math.sqrt
// CHECK:         linalg.generic
// CHECK:           math.powf
func.func @pow_constant(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %c3 = loom.constant dense<3.0> : tensor<8xf32>
  %half = loom.constant dense<0.5> : tensor<8xf32>
  %other = loom.constant dense<2.5> : tensor<8xf32>
  %a = loom.pow %x, %c3 : tensor<8xf32>
  %b = loom.pow %x, %half : tensor<8xf32>
  %c = loom.pow %x, %other : tensor<8xf32>
  return %a, %b, %c : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Tests that a max pool reads through the ReLU before it: the pool's
// window loop recomputes max(x, 0) on each element it reads from x, and the
// ReLU's own generic is left without users (erased later as dead), so no
// ReLU tensor is materialized.
// CHECK-LABEL: func.func @relu_then_pool(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<1x2x6x6xf32>)
// CHECK:         %[[RELU:.+]] = linalg.generic
// CHECK:         %[[POOL:.+]] = linalg.generic
// CHECK:           %[[E:.+]] = tensor.extract %[[X]][
// CHECK:           arith.maximumf %[[E]], %{{.+}} : f32
// CHECK:         return %[[POOL]]
func.func @relu_then_pool(%x: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32> {
  %r = loom.relu %x : tensor<1x2x6x6xf32>
  %p = loom.max_pool2d %r {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<1x2x6x6xf32> -> tensor<1x2x3x3xf32>
  return %p : tensor<1x2x3x3xf32>
}
