// RUN: loom-opt %s --loom-widen-keep-f32 | FileCheck %s

// A softmax and a row sum on bf16 compute in f32 and round their results
// once; the bf16 mul (follow) and the f32 reduction are left alone.
// CHECK-LABEL: func.func @widen(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x8xbf16>, %[[Y:[^:]+]]: tensor<2x8xf32>
// CHECK-NEXT:    %[[M:.+]] = loom.mul %[[X]], %[[X]] : tensor<2x8xbf16>
// CHECK-NEXT:    %[[MW:.+]] = loom.cast %[[M]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[S:.+]] = loom.softmax %[[MW]] axis = 1 : tensor<2x8xf32>
// CHECK-NEXT:    %[[SN:.+]] = loom.cast %[[S]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT:    %[[SW:.+]] = loom.cast %[[SN]] : tensor<2x8xbf16> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[R:.+]] = loom.reduce_sum %[[SW]] dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
// CHECK-NEXT:    %[[RN:.+]] = loom.cast %[[R]] : tensor<2xf32> -> tensor<2xbf16>
// CHECK-NEXT:    %[[F:.+]] = loom.reduce_sum %[[Y]] dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
// CHECK-NEXT:    return %[[RN]], %[[F]]
func.func @widen(%x: tensor<2x8xbf16>, %y: tensor<2x8xf32>) -> (tensor<2xbf16>, tensor<2xf32>) {
  %m = loom.mul %x, %x : tensor<2x8xbf16>
  %s = loom.softmax %m axis = 1 : tensor<2x8xbf16>
  %r = loom.reduce_sum %s dims = [1] : tensor<2x8xbf16> -> tensor<2xbf16>
  %f = loom.reduce_sum %y dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  return %r, %f : tensor<2xbf16>, tensor<2xf32>
}
