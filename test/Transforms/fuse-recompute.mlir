// RUN: loom-opt %s --split-input-file --loom-fuse="recompute-min-elements=16" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse | FileCheck %s --check-prefix=OFF
// RUN: loom-opt %s --split-input-file --loom-fuse="recompute-min-elements=16 recompute-ops=pointwise" | FileCheck %s --check-prefix=ALL
// RUN: not loom-opt %s --loom-fuse="recompute-min-elements=16 recompute-ops=some" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: recompute-ops must be cheap or pointwise, not 'some'

// With recompute-min-elements, a pointwise value a later region reads is
// made again there from what that region can read instead (here x, one
// more big tensor), so its own region no longer yields it; the value the
// matmul (a host step) reads is still yielded.
// CHECK-LABEL: func.func @recomputed(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>
// CHECK:         %[[F1:.+]] = loom.fusion(%[[X]]) : (tensor<8x8xf32>) -> tensor<8x8xf32> {
// CHECK:           loom.relu
// CHECK:           loom.mul
// CHECK:         %[[MM:.+]] = loom.matmul %[[F1]], %[[W]]
// CHECK:         loom.fusion(%[[X]], %[[MM]]) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32> {
// CHECK-NEXT:    ^bb0(%[[X2:.+]]: tensor<8x8xf32>, %[[M2:.+]]: tensor<8x8xf32>):
// CHECK-NEXT:      %[[A2:.+]] = loom.relu %[[X2]]
// CHECK-NEXT:      loom.add %[[M2]], %[[A2]]
// Off by default: the relu's value is yielded by the first region.
// OFF-LABEL: func.func @recomputed(
// OFF:         loom.fusion({{.*}}) : (tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
func.func @recomputed(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = loom.relu %x : tensor<8x8xf32>
  %b = loom.mul %a, %a : tensor<8x8xf32>
  %m = loom.matmul %b, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = loom.add %m, %a : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Not recomputed: making the sum again would read two more big tensors
// (x and y) than the later region reads; the small value (below 16
// elements) is not considered either.
// CHECK-LABEL: func.func @kept(
// CHECK:         %[[F1:.+]]:3 = loom.fusion
// CHECK:         loom.matmul
// CHECK:         loom.fusion(%{{.+}}, %[[F1]]#{{[0-9]}}, %[[F1]]#{{[0-9]}})
// CHECK-NOT:       loom.relu
func.func @kept(%x: tensor<8x8xf32>, %y: tensor<8x8xf32>, %s: tensor<2x2xf32>,
                %w: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<2x2xf32>) {
  %a = loom.add %x, %y : tensor<8x8xf32>
  %t = loom.relu %s : tensor<2x2xf32>
  %b = loom.mul %a, %a : tensor<8x8xf32>
  %m = loom.matmul %b, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = loom.add %m, %a : tensor<8x8xf32>
  %u = loom.exp %t : tensor<2x2xf32>
  return %c, %u : tensor<8x8xf32>, tensor<2x2xf32>
}

// -----

// An exponential is not cheap: recomputed only with recompute-ops=pointwise
// (its region then no longer yields it), kept by default (cheap: adds,
// products, comparisons, selections).
// CHECK-LABEL: func.func @costly(
// CHECK:         loom.fusion({{.*}}) : (tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK:         loom.matmul
// CHECK:         loom.fusion
// CHECK-NOT:       loom.exp
// CHECK:         return
// ALL-LABEL: func.func @costly(
// ALL:         loom.fusion({{.*}}) : (tensor<8x8xf32>) -> tensor<8x8xf32>
// ALL:         loom.matmul
// ALL:         loom.fusion
// ALL:           loom.exp
func.func @costly(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %a = loom.exp %x : tensor<8x8xf32>
  %b = loom.mul %a, %a : tensor<8x8xf32>
  %m = loom.matmul %b, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = loom.add %m, %a : tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}
