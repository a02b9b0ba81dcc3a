// RUN: loom-opt %s --split-input-file --loom-mixed-precision="precision=bf16" | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-mixed-precision | FileCheck %s --check-prefix=FP32
// RUN: loom-opt %s --split-input-file --loom-mixed-precision="precision=fp16" | FileCheck %s --check-prefix=FP16
// RUN: not loom-opt %s --loom-mixed-precision="precision=fp8" 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: loom-mixed-precision: unknown precision 'fp8' (expected fp32, bf16 or fp16)

// Both GEMMs read bf16 copies of their f32 operands (the weight read by
// both is cast once, at the top); the relu between them follows its bf16
// input; the residual add has an f32 operand that is no argument or
// constant, so it stays f32 and reads an f32 copy of the GEMM's result.
// CHECK-LABEL: func.func @two_gemms(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>
// CHECK-NEXT:    %[[W16:.+]] = loom.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-NEXT:    %[[X16:.+]] = loom.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[M1:.+]] = loom.matmul %[[X16]], %[[W16]] : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[R:.+]] = loom.relu %[[M1]] : tensor<4x8xbf16>
// CHECK-NEXT:    %[[M2:.+]] = loom.matmul %[[R]], %[[W16]] {transpose_b}
// CHECK-NEXT:    %[[M2F:.+]] = loom.cast %[[M2]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[E:.+]] = loom.exp %[[X]] : tensor<4x8xf32>
// CHECK-NEXT:    loom.add %[[M2F]], %[[E]] : tensor<4x8xf32>
// FP32-LABEL: func.func @two_gemms(
// FP32-NOT:     loom.cast
// fp16 places the same casts, to f16.
// FP16-LABEL: func.func @two_gemms(
// FP16-NEXT:    %[[W16:.+]] = loom.cast %{{.+}} : tensor<8x8xf32> -> tensor<8x8xf16>
// FP16-NEXT:    %[[X16:.+]] = loom.cast %{{.+}} : tensor<4x8xf32> -> tensor<4x8xf16>
// FP16-NEXT:    %[[M1:.+]] = loom.matmul %[[X16]], %[[W16]] : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
// FP16-NEXT:    loom.relu %[[M1]] : tensor<4x8xf16>
func.func @two_gemms(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %m1 = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = loom.relu %m1 : tensor<4x8xf32>
  %m2 = loom.matmul %r, %w {transpose_b} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = loom.exp %x : tensor<4x8xf32>
  %y = loom.add %m2, %e : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// What follows a bf16 GEMM: the bias add (its broadcast argument cast once,
// after the broadcast, which stays f32: a broadcast's gradient sums), the
// reshape, the scaling by a constant and the softmax (computed in f32 by
// loom-widen-keep-f32 at code generation, stored in bf16) compute in bf16;
// exp and the reduction stay f32 and read f32 copies; the function's
// results are f32.
// CHECK-LABEL: func.func @attention_like(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4x8xf32>, %[[B:[^:]+]]: tensor<8x8xf32>, %[[BIAS:[^:]+]]: tensor<8xf32>
// CHECK:         %[[M:.+]] = loom.matmul %{{.+}}, %{{.+}} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[BB:.+]] = loom.broadcast_in_dim %[[BIAS]] dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[BB16:.+]] = loom.cast %[[BB]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK-NEXT:    %[[ADD:.+]] = loom.add %[[M]], %[[BB16]] : tensor<4x8xbf16>
// CHECK-NEXT:    %[[RS:.+]] = loom.reshape %[[ADD]] : tensor<4x8xbf16> -> tensor<2x16xbf16>
// CHECK-NEXT:    %[[C:.+]] = loom.constant dense<1.250000e-01> : tensor<2x16xf32>
// CHECK-NEXT:    %[[C16:.+]] = loom.cast %[[C]] : tensor<2x16xf32> -> tensor<2x16xbf16>
// CHECK-NEXT:    %[[SC:.+]] = loom.mul %[[RS]], %[[C16]] : tensor<2x16xbf16>
// CHECK-NEXT:    %[[SCF:.+]] = loom.cast %[[SC]] : tensor<2x16xbf16> -> tensor<2x16xf32>
// CHECK-NEXT:    %[[SM:.+]] = loom.softmax %[[SC]] axis = 1 : tensor<2x16xbf16>
// CHECK-NEXT:    %[[SMF:.+]] = loom.cast %[[SM]] : tensor<2x16xbf16> -> tensor<2x16xf32>
// CHECK-NEXT:    %[[EX:.+]] = loom.exp %[[SCF]] : tensor<2x16xf32>
// CHECK-NEXT:    %[[SUM:.+]] = loom.reduce_sum %[[EX]] dims = [1]
// CHECK-NEXT:    return %[[SMF]], %[[SUM]]
func.func @attention_like(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>, %bias: tensor<8xf32>) -> (tensor<2x16xf32>, tensor<2xf32>) {
  %m = loom.matmul %a, %b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %bb = loom.broadcast_in_dim %bias dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %add = loom.add %m, %bb : tensor<4x8xf32>
  %rs = loom.reshape %add : tensor<4x8xf32> -> tensor<2x16xf32>
  %c = loom.constant dense<0.125> : tensor<2x16xf32>
  %sc = loom.mul %rs, %c : tensor<2x16xf32>
  %sm = loom.softmax %sc axis = 1 : tensor<2x16xf32>
  %ex = loom.exp %sc : tensor<2x16xf32>
  %sum = loom.reduce_sum %ex dims = [1] : tensor<2x16xf32> -> tensor<2xf32>
  return %sm, %sum : tensor<2x16xf32>, tensor<2xf32>
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

// -----

// A cross-entropy reads 16-bit logits as they are (no f32 copy of the
// logits to save for the backward); its loss stays f32 (C3).
// CHECK-LABEL: func.func @loss(
// CHECK:         %[[M:.+]] = loom.matmul %{{.+}}, %{{.+}} : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
// CHECK-NEXT:    %[[L:.+]] = loom.cross_entropy %[[M]], %{{.+}} reduction = mean : (tensor<4x3xbf16>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT:    return %[[L]]
func.func @loss(%x: tensor<4x8xf32>, %w: tensor<8x3xf32>, %y: tensor<4xi64>) -> tensor<f32> {
  %m = loom.matmul %x, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %l = loom.cross_entropy %m, %y reduction = mean : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The fused LM head reads 16-bit copies of x (the output of an f32 op
// here) and of the weight, as the GEMM it replaces would; its loss and lse
// stay f32 (C1, C3), and the labels are untouched.
// CHECK-LABEL: func.func @head(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<6x4xf32>, %[[W:[^:]+]]: tensor<10x4xf32>, %[[Y:[^:]+]]: tensor<6xi64>
// CHECK-NEXT:    %[[W16:.+]] = loom.cast %[[W]] : tensor<10x4xf32> -> tensor<10x4xbf16>
// CHECK-NEXT:    %[[E:.+]] = loom.exp %[[X]] : tensor<6x4xf32>
// CHECK-NEXT:    %[[E16:.+]] = loom.cast %[[E]] : tensor<6x4xf32> -> tensor<6x4xbf16>
// CHECK-NEXT:    %[[L:.+]], %{{.+}} = loom.linear_cross_entropy %[[E16]], %[[W16]], %[[Y]] reduction = mean {transpose_w} : (tensor<6x4xbf16>, tensor<10x4xbf16>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
// CHECK-NEXT:    return %[[L]]
// FP32-LABEL: func.func @head(
// FP32-NOT:     loom.cast
func.func @head(%x: tensor<6x4xf32>, %w: tensor<10x4xf32>, %y: tensor<6xi64>) -> tensor<f32> {
  %e = loom.exp %x : tensor<6x4xf32>
  %l, %lse = loom.linear_cross_entropy %e, %w, %y reduction = mean {transpose_w}
      : (tensor<6x4xf32>, tensor<10x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return %l : tensor<f32>
}
