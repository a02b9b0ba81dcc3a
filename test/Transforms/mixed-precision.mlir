// RUN: loom-opt %s --split-input-file --loom-mixed-precision="precision=bf16" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-mixed-precision | FileCheck %s --check-prefix=FP32
// RUN: loom-opt %s --split-input-file --loom-mixed-precision="precision=fp16" | FileCheck %s --check-prefix=FP16
// RUN: not loom-opt %s --loom-mixed-precision="precision=fp8" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: loom-mixed-precision: unknown precision 'fp8' (expected fp32, bf16 or fp16)

// Both GEMMs read bf16 copies of their f32 operands and give f32 to what
// follows; the weight read by both is cast once, at the top; the relu and
// the add stay f32.
// CHECK-LABEL: func.func @two_gemms(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>
// CHECK-NEXT:    %[[W16:.+]] = loom.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT:    %[[X16:.+]] = loom.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[M1:.+]] = loom.matmul %[[X16]], %[[W16]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[M1F:.+]] = loom.cast %[[M1]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[R:.+]] = loom.relu %[[M1F]] : tensor<4x8xf32>
// CHECK-NEXT:    %[[R16:.+]] = loom.cast %[[R]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[M2:.+]] = loom.matmul %[[R16]], %[[W16]] {transpose_b}
// CHECK-NEXT:    %[[M2F:.+]] = loom.cast %[[M2]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    loom.add %[[M2F]], %[[X]] : tensor<4x8xf32>
// fp16 places the same casts, to f16.
// FP16-LABEL: func.func @two_gemms(
// FP16-NEXT:    %[[W16:.+]] = loom.cast %{{.+}} : tensor<8x8xf32> -> tensor<8x8xf16>
// FP16-NEXT:    %[[X16:.+]] = loom.cast %{{.+}} : tensor<4x8xf32> -> tensor<4x8xf16>
// FP16-NEXT:    %[[M1:.+]] = loom.matmul %[[X16]], %[[W16]] : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
// FP16-NEXT:    loom.cast %[[M1]] : tensor<4x8xf16> -> tensor<4x8xf32>
// FP32-LABEL: func.func @two_gemms(
// FP32-NOT:     loom.cast
func.func @two_gemms(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m1 = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = loom.relu %m1 : tensor<4x8xf32>
  %m2 = loom.matmul %r, %w {transpose_b} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = loom.add %m2, %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A GEMM already in f64 or bf16 is left as it is.
// CHECK-LABEL: func.func @other_types(
// CHECK-NOT:     loom.cast
func.func @other_types(%a: tensor<4x8xf64>, %b: tensor<8x4xf64>, %c: tensor<4x8xbf16>, %d: tensor<8x4xbf16>) -> (tensor<4x4xf64>, tensor<4x4xbf16>) {
  %m = loom.matmul %a, %b : (tensor<4x8xf64>, tensor<8x4xf64>) -> tensor<4x4xf64>
  %n = loom.matmul %c, %d : (tensor<4x8xbf16>, tensor<8x4xbf16>) -> tensor<4x4xbf16>
  return %m, %n : tensor<4x4xf64>, tensor<4x4xbf16>
}
