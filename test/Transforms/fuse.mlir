// RUN: loom-opt %s --split-input-file --loom-fuse | FileCheck %s

// Tests that a pointwise chain becomes one region, that a value used only
// inside it is not yielded, and that the constant it reads is copied in.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4xf32>
// CHECK:         %[[R:.+]] = loom.fusion(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:.+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[C:.+]] = loom.constant dense<2.000000e+00>
// CHECK-NEXT:      %[[E:.+]] = loom.exp %[[A]]
// CHECK-NEXT:      %[[M:.+]] = loom.mul %[[E]], %[[C]]
// CHECK-NEXT:      %[[Y:.+]] = loom.relu %[[M]]
// CHECK-NEXT:      loom.yield %[[Y]]
// CHECK:         return %[[R]]
// CHECK-NOT:     loom.constant
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = loom.constant dense<2.0> : tensor<4xf32>
  %e = loom.exp %x : tensor<4xf32>
  %m = loom.mul %e, %c : tensor<4xf32>
  %y = loom.relu %m : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a matmul stays outside (a GEMM step) and splits the chain, and
// that a value read both inside and after a region is yielded.
// CHECK-LABEL: func.func @around_matmul(
// CHECK:         %[[F1:.+]]:2 = loom.fusion
// CHECK:           loom.yield %{{.+}}, %{{.+}} : tensor<2x2xf32>, tensor<2x2xf32>
// CHECK:         %[[MM:.+]] = loom.matmul %[[F1]]#0, %[[F1]]#1
// CHECK:         %[[F2:.+]] = loom.fusion(%[[MM]], %[[F1]]#1)
// CHECK:         return %[[F2]]
func.func @around_matmul(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %a = loom.exp %x : tensor<2x2xf32>
  %b = loom.tanh %a : tensor<2x2xf32>
  %m = loom.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %r = loom.add %m, %b : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

// Tests that a region holds at most one reduction: the second reduction
// starts a new region, with the pointwise epilogue of the first kept in it.
// CHECK-LABEL: func.func @two_reductions(
// CHECK:         %[[F1:.+]] = loom.fusion
// CHECK:           loom.softmax
// CHECK-NEXT:      loom.exp
// CHECK-NEXT:      loom.yield
// CHECK:         %[[F2:.+]] = loom.fusion(%[[F1]])
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      loom.reduce_sum
// CHECK-NEXT:      loom.yield
func.func @two_reductions(%x: tensor<2x8xf32>) -> tensor<2xf32> {
  %s = loom.softmax %x axis = 1 : tensor<2x8xf32>
  %e = loom.exp %s : tensor<2x8xf32>
  %r = loom.reduce_sum %e dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  return %r : tensor<2xf32>
}

// -----

// Tests that an opaque op (gather) is a region alone, and that a reshape
// stays outside as a view.
// CHECK-LABEL: func.func @opaque(
// CHECK:         %[[G:.+]] = loom.fusion
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      loom.gather
// CHECK-NEXT:      loom.yield
// CHECK:         %[[R:.+]] = loom.reshape %[[G]]
// CHECK:         loom.fusion(%[[R]])
// CHECK:           loom.neg
func.func @opaque(%t: tensor<5x3xf32>, %i: tensor<2xi64>) -> tensor<6xf32> {
  %g = loom.gather %t[%i] axis = 0 : (tensor<5x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %r = loom.reshape %g : tensor<2x3xf32> -> tensor<6xf32>
  %n = loom.neg %r : tensor<6xf32>
  return %n : tensor<6xf32>
}

// -----

// Tests that a constant returned as is becomes a region of its own.
// CHECK-LABEL: func.func @returned_constant(
// CHECK:         %[[F:.+]] = loom.fusion() : () -> tensor<2xf32> {
// CHECK-NEXT:      loom.constant dense<[1.000000e+00, 2.000000e+00]>
// CHECK:         return %[[F]]
func.func @returned_constant() -> tensor<2xf32> {
  %c = loom.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return %c : tensor<2xf32>
}
