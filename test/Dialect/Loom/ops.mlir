// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s

// Round trip of every loom op: parse, print, parse again, print again.

// Tests that loom.add round-trips.
// CHECK-LABEL: func.func @add(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.add %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @add(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.add %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.sub round-trips.
// CHECK-LABEL: func.func @sub(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.sub %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @sub(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.sub %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.mul round-trips.
// CHECK-LABEL: func.func @mul(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.mul %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @mul(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.mul %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.div round-trips.
// CHECK-LABEL: func.func @div(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.div %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @div(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.div %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.pow round-trips.
// CHECK-LABEL: func.func @pow(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.pow %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @pow(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.pow %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.max round-trips.
// CHECK-LABEL: func.func @max(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.max %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @max(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.max %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.min round-trips.
// CHECK-LABEL: func.func @min(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>, %[[Y:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Z:.+]] = loom.min %[[X]], %[[Y]] : tensor<4x8xf32>
// CHECK:         return %[[Z]]
func.func @min(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %z = loom.min %x, %y : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}

// -----

// Tests that loom.neg round-trips.
// CHECK-LABEL: func.func @neg(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.neg %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @neg(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.neg %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.abs round-trips.
// CHECK-LABEL: func.func @abs(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.abs %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @abs(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.abs %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.exp round-trips.
// CHECK-LABEL: func.func @exp(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.exp %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @exp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.exp %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.log round-trips.
// CHECK-LABEL: func.func @log(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.log %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @log(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.log %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.tanh round-trips.
// CHECK-LABEL: func.func @tanh(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.tanh %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.tanh %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.sigmoid round-trips.
// CHECK-LABEL: func.func @sigmoid(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.sigmoid %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @sigmoid(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.sigmoid %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.relu round-trips.
// CHECK-LABEL: func.func @relu(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.relu %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @relu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.relu %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.erf round-trips.
// CHECK-LABEL: func.func @erf(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.erf %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.erf %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.sqrt round-trips.
// CHECK-LABEL: func.func @sqrt(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.sqrt %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @sqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.sqrt %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.rsqrt round-trips.
// CHECK-LABEL: func.func @rsqrt(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.rsqrt %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @rsqrt(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.rsqrt %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.floor round-trips.
// CHECK-LABEL: func.func @floor(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.floor %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @floor(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.floor %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.gelu round-trips.
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.gelu %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.gelu %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that loom.stop_gradient round-trips.
// CHECK-LABEL: func.func @stop_gradient(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.stop_gradient %[[X]] : tensor<4x8xf32>
// CHECK:         return %[[Y]]
func.func @stop_gradient(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loom.stop_gradient %x : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Tests that the integer forms of the numeric elementwise ops round-trip.
// CHECK-LABEL: func.func @integer_elementwise(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4xi32>, %[[Y:[^:]+]]: tensor<4xi32>)
// CHECK:         %[[ADD:.+]] = loom.add %[[X]], %[[Y]] : tensor<4xi32>
// CHECK:         %[[DIV:.+]] = loom.div %[[ADD]], %[[Y]] : tensor<4xi32>
// CHECK:         %[[NEG:.+]] = loom.neg %[[DIV]] : tensor<4xi32>
// CHECK:         %[[ABS:.+]] = loom.abs %[[NEG]] : tensor<4xi32>
// CHECK:         return %[[ABS]]
func.func @integer_elementwise(%x: tensor<4xi32>, %y: tensor<4xi32>) -> tensor<4xi32> {
  %a = loom.add %x, %y : tensor<4xi32>
  %d = loom.div %a, %y : tensor<4xi32>
  %n = loom.neg %d : tensor<4xi32>
  %b = loom.abs %n : tensor<4xi32>
  return %b : tensor<4xi32>
}

// -----

// Tests that gelu keeps `approximate = tanh` and elides the default `none`.
// CHECK-LABEL: func.func @gelu_approximate(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xbf16>)
// CHECK:         %[[T:.+]] = loom.gelu %[[X]] approximate = tanh : tensor<4x8xbf16>
// CHECK:         %[[N:.+]] = loom.gelu %[[T]] : tensor<4x8xbf16>
// CHECK:         return %[[N]]
func.func @gelu_approximate(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %t = loom.gelu %x approximate = tanh : tensor<4x8xbf16>
  %n = loom.gelu %t approximate = none : tensor<4x8xbf16>
  return %n : tensor<4x8xbf16>
}

// -----

// Tests that loom.select round-trips.
// CHECK-LABEL: func.func @select(
// CHECK-SAME:    %[[C:[^:]+]]: tensor<4xi1>, %[[A:[^:]+]]: tensor<4xf32>, %[[B:[^:]+]]: tensor<4xf32>)
// CHECK:         %[[R:.+]] = loom.select %[[C]], %[[A]], %[[B]] : tensor<4xi1>, tensor<4xf32>
// CHECK:         return %[[R]]
func.func @select(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = loom.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that loom.compare round-trips every predicate.
// CHECK-LABEL: func.func @compare(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<4xf32>, %[[B:[^:]+]]: tensor<4xf32>, %[[I:[^:]+]]: tensor<4xi64>)
// CHECK:         loom.compare eq, %[[A]], %[[B]] : tensor<4xf32> -> tensor<4xi1>
// CHECK:         loom.compare ne, %[[A]], %[[B]] : tensor<4xf32> -> tensor<4xi1>
// CHECK:         loom.compare lt, %[[A]], %[[B]] : tensor<4xf32> -> tensor<4xi1>
// CHECK:         loom.compare le, %[[A]], %[[B]] : tensor<4xf32> -> tensor<4xi1>
// CHECK:         loom.compare gt, %[[A]], %[[B]] : tensor<4xf32> -> tensor<4xi1>
// CHECK:         loom.compare ge, %[[I]], %[[I]] : tensor<4xi64> -> tensor<4xi1>
func.func @compare(%a: tensor<4xf32>, %b: tensor<4xf32>, %i: tensor<4xi64>)
    -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %eq = loom.compare eq, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %ne = loom.compare ne, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %lt = loom.compare lt, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %le = loom.compare le, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %gt = loom.compare gt, %a, %b : tensor<4xf32> -> tensor<4xi1>
  %ge = loom.compare ge, %i, %i : tensor<4xi64> -> tensor<4xi1>
  return %eq, %ne, %lt, %le, %gt, %ge
      : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// Tests that loom.cast round-trips integer to float, float to float and to i1.
// CHECK-LABEL: func.func @cast(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4xi64>)
// CHECK:         %[[F:.+]] = loom.cast %[[X]] : tensor<4xi64> -> tensor<4xf32>
// CHECK:         %[[H:.+]] = loom.cast %[[F]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK:         %[[B:.+]] = loom.cast %[[X]] : tensor<4xi64> -> tensor<4xi1>
// CHECK:         return %[[H]], %[[B]]
func.func @cast(%x: tensor<4xi64>) -> (tensor<4xbf16>, tensor<4xi1>) {
  %f = loom.cast %x : tensor<4xi64> -> tensor<4xf32>
  %h = loom.cast %f : tensor<4xf32> -> tensor<4xbf16>
  %b = loom.cast %x : tensor<4xi64> -> tensor<4xi1>
  return %h, %b : tensor<4xbf16>, tensor<4xi1>
}

// -----

// Tests that loom.stop_gradient round-trips on an integer tensor.
// CHECK-LABEL: func.func @stop_gradient_int(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xi64>)
// CHECK:         %[[Y:.+]] = loom.stop_gradient %[[X]] : tensor<2x3xi64>
// CHECK:         return %[[Y]]
func.func @stop_gradient_int(%x: tensor<2x3xi64>) -> tensor<2x3xi64> {
  %y = loom.stop_gradient %x : tensor<2x3xi64>
  return %y : tensor<2x3xi64>
}

// -----

// Tests that loom.constant round-trips splat, non-splat, integer and boolean
// values.
// CHECK-LABEL: func.func @constant(
// CHECK:         %[[S:.+]] = loom.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK:         %[[D:.+]] = loom.constant dense<[2, 16, 64]> : tensor<3xi64>
// CHECK:         %[[B:.+]] = loom.constant dense<[true, false]> : tensor<2xi1>
// CHECK:         %[[Z:.+]] = loom.constant dense<0.000000e+00> : tensor<f32>
// CHECK:         return %[[S]], %[[D]], %[[B]], %[[Z]]
func.func @constant() -> (tensor<4xf32>, tensor<3xi64>, tensor<2xi1>, tensor<f32>) {
  %s = loom.constant dense<1.0> : tensor<4xf32>
  %d = loom.constant dense<[2, 16, 64]> : tensor<3xi64>
  %b = loom.constant dense<[true, false]> : tensor<2xi1>
  %z = loom.constant dense<0.0> : tensor<f32>
  return %s, %d, %b, %z : tensor<4xf32>, tensor<3xi64>, tensor<2xi1>, tensor<f32>
}

// -----

// Tests that a plain 2-D loom.matmul round-trips without transpose flags.
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<32x64xf32>, %[[B:[^:]+]]: tensor<64x128xf32>)
// CHECK:         %[[Y:.+]] = loom.matmul %[[A]], %[[B]] : (tensor<32x64xf32>, tensor<64x128xf32>) -> tensor<32x128xf32>
// CHECK:         return %[[Y]]
func.func @matmul(%a: tensor<32x64xf32>, %b: tensor<64x128xf32>) -> tensor<32x128xf32> {
  %y = loom.matmul %a, %b : (tensor<32x64xf32>, tensor<64x128xf32>) -> tensor<32x128xf32>
  return %y : tensor<32x128xf32>
}

// -----

// Tests that loom.matmul's bias round-trips.
// CHECK-LABEL: func.func @matmul_bias(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x32x64xf32>, %[[B:[^:]+]]: tensor<128x64xf32>, %[[C:[^:]+]]: tensor<128xf32>)
// CHECK:         loom.matmul %[[A]], %[[B]] bias(%[[C]] : tensor<128xf32>) {transpose_b} : (tensor<2x32x64xf32>, tensor<128x64xf32>) -> tensor<2x32x128xf32>
func.func @matmul_bias(%a: tensor<2x32x64xf32>, %b: tensor<128x64xf32>, %c: tensor<128xf32>) -> tensor<2x32x128xf32> {
  %y = loom.matmul %a, %b bias(%c : tensor<128xf32>) {transpose_b} : (tensor<2x32x64xf32>, tensor<128x64xf32>) -> tensor<2x32x128xf32>
  return %y : tensor<2x32x128xf32>
}

// -----

// Tests that the transpose flags of loom.matmul round-trip, alone and together.
// CHECK-LABEL: func.func @matmul_transpose(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<64x32xf16>, %[[B:[^:]+]]: tensor<128x64xf16>)
// CHECK:         %[[TA:.+]] = loom.matmul %[[A]], %[[A]] {transpose_a} : (tensor<64x32xf16>, tensor<64x32xf16>) -> tensor<32x32xf16>
// CHECK:         %[[TB:.+]] = loom.matmul %[[TA]], %[[A]] {transpose_b} : (tensor<32x32xf16>, tensor<64x32xf16>) -> tensor<32x64xf16>
// CHECK:         %[[TT:.+]] = loom.matmul %[[A]], %[[B]] {transpose_a, transpose_b} : (tensor<64x32xf16>, tensor<128x64xf16>) -> tensor<32x128xf16>
// CHECK:         return %[[TB]], %[[TT]]
func.func @matmul_transpose(%a: tensor<64x32xf16>, %b: tensor<128x64xf16>) -> (tensor<32x64xf16>, tensor<32x128xf16>) {
  %ta = loom.matmul %a, %a {transpose_a} : (tensor<64x32xf16>, tensor<64x32xf16>) -> tensor<32x32xf16>
  %tb = loom.matmul %ta, %a {transpose_b} : (tensor<32x32xf16>, tensor<64x32xf16>) -> tensor<32x64xf16>
  %tt = loom.matmul %a, %b {transpose_a, transpose_b} : (tensor<64x32xf16>, tensor<128x64xf16>) -> tensor<32x128xf16>
  return %tb, %tt : tensor<32x64xf16>, tensor<32x128xf16>
}

// -----

// Tests that a batched loom.matmul round-trips with a per-batch rhs and with
// a shared rank-2 rhs.
// CHECK-LABEL: func.func @matmul_batched(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x16x64xf32>, %[[W:[^:]+]]: tensor<64x192xf32>, %[[K:[^:]+]]: tensor<2x16x64xf32>)
// CHECK:         %[[P:.+]] = loom.matmul %[[X]], %[[W]] : (tensor<2x16x64xf32>, tensor<64x192xf32>) -> tensor<2x16x192xf32>
// CHECK:         %[[S:.+]] = loom.matmul %[[X]], %[[K]] {transpose_b} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x16xf32>
// CHECK:         return %[[P]], %[[S]]
func.func @matmul_batched(%x: tensor<2x16x64xf32>, %w: tensor<64x192xf32>, %k: tensor<2x16x64xf32>)
    -> (tensor<2x16x192xf32>, tensor<2x16x16xf32>) {
  %p = loom.matmul %x, %w : (tensor<2x16x64xf32>, tensor<64x192xf32>) -> tensor<2x16x192xf32>
  %s = loom.matmul %x, %k {transpose_b} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>) -> tensor<2x16x16xf32>
  return %p, %s : tensor<2x16x192xf32>, tensor<2x16x16xf32>
}

// -----

// Tests that loom.conv2d round-trips, eliding the default `groups = 1`.
// CHECK-LABEL: func.func @conv2d(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x1x28x28xf32>, %[[W:[^:]+]]: tensor<8x1x3x3xf32>)
// CHECK:         %[[Y:.+]] = loom.conv2d %[[X]], %[[W]] {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<8x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<8x8x28x28xf32>
// CHECK:         return %[[Y]]
func.func @conv2d(%x: tensor<8x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) -> tensor<8x8x28x28xf32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<8x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<8x8x28x28xf32>
  return %y : tensor<8x8x28x28xf32>
}

// -----

// Tests that a grouped, strided, dilated, asymmetrically padded loom.conv2d
// round-trips.
// CHECK-LABEL: func.func @conv2d_grouped(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x4x16x16xf32>, %[[W:[^:]+]]: tensor<6x2x3x3xf32>)
// CHECK:         %[[Y:.+]] = loom.conv2d %[[X]], %[[W]] {dilations = array<i64: 2, 1>, groups = 2 : i64, padding = array<i64: 2, 1, 2, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x16x16xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x8x8xf32>
// CHECK:         return %[[Y]]
func.func @conv2d_grouped(%x: tensor<2x4x16x16xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x8x8xf32> {
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 2, 1, 2, 0>, dilations = array<i64: 2, 1>, groups = 2 : i64}
      : (tensor<2x4x16x16xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x8x8xf32>
  return %y : tensor<2x6x8x8xf32>
}

// -----

// Tests that the reductions round-trip, with and without `keep_dims`.
// CHECK-LABEL: func.func @reductions(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8x16xf32>, %[[I:[^:]+]]: tensor<4x8xi32>)
// CHECK:         %[[SUM:.+]] = loom.reduce_sum %[[X]] dims = [1] : tensor<4x8x16xf32> -> tensor<4x16xf32>
// CHECK:         %[[MAX:.+]] = loom.reduce_max %[[X]] dims = [2] {keep_dims} : tensor<4x8x16xf32> -> tensor<4x8x1xf32>
// CHECK:         %[[MIN:.+]] = loom.reduce_min %[[I]] dims = [0, 1] : tensor<4x8xi32> -> tensor<i32>
// CHECK:         %[[MEAN:.+]] = loom.reduce_mean %[[X]] dims = [0, 2] {keep_dims} : tensor<4x8x16xf32> -> tensor<1x8x1xf32>
// CHECK:         %[[NONE:.+]] = loom.reduce_sum %[[X]] dims = [] : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
// CHECK:         return %[[SUM]], %[[MAX]], %[[MIN]], %[[MEAN]], %[[NONE]]
func.func @reductions(%x: tensor<4x8x16xf32>, %i: tensor<4x8xi32>)
    -> (tensor<4x16xf32>, tensor<4x8x1xf32>, tensor<i32>, tensor<1x8x1xf32>, tensor<4x8x16xf32>) {
  %sum = loom.reduce_sum %x dims = [1] : tensor<4x8x16xf32> -> tensor<4x16xf32>
  %max = loom.reduce_max %x dims = [2] {keep_dims} : tensor<4x8x16xf32> -> tensor<4x8x1xf32>
  %min = loom.reduce_min %i dims = [0, 1] : tensor<4x8xi32> -> tensor<i32>
  %mean = loom.reduce_mean %x dims = [0, 2] {keep_dims} : tensor<4x8x16xf32> -> tensor<1x8x1xf32>
  %none = loom.reduce_sum %x dims = [] : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  return %sum, %max, %min, %mean, %none
      : tensor<4x16xf32>, tensor<4x8x1xf32>, tensor<i32>, tensor<1x8x1xf32>, tensor<4x8x16xf32>
}

// -----

// Tests that loom.broadcast_in_dim round-trips, adding dimensions and
// expanding dimensions of size 1.
// CHECK-LABEL: func.func @broadcast_in_dim(
// CHECK-SAME:    %[[B:[^:]+]]: tensor<8xf32>, %[[C:[^:]+]]: tensor<4x1xf32>, %[[S:[^:]+]]: tensor<f32>)
// CHECK:         %[[Y:.+]] = loom.broadcast_in_dim %[[B]] dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK:         %[[Z:.+]] = loom.broadcast_in_dim %[[C]] dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK:         %[[W:.+]] = loom.broadcast_in_dim %[[S]] dims = [] : tensor<f32> -> tensor<4x8xf32>
// CHECK:         return %[[Y]], %[[Z]], %[[W]]
func.func @broadcast_in_dim(%b: tensor<8xf32>, %c: tensor<4x1xf32>, %s: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %y = loom.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %z = loom.broadcast_in_dim %c dims = [0, 1] : tensor<4x1xf32> -> tensor<4x8xf32>
  %w = loom.broadcast_in_dim %s dims = [] : tensor<f32> -> tensor<4x8xf32>
  return %y, %z, %w : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Tests that loom.reshape round-trips.
// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x16x64xf32>)
// CHECK:         %[[Y:.+]] = loom.reshape %[[X]] : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
// CHECK:         return %[[Y]]
func.func @reshape(%x: tensor<2x16x64xf32>) -> tensor<2x16x4x16xf32> {
  %y = loom.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
  return %y : tensor<2x16x4x16xf32>
}

// -----

// Tests that loom.transpose round-trips.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x16x4x8xf32>)
// CHECK:         %[[Y:.+]] = loom.transpose %[[X]] perm = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
// CHECK:         return %[[Y]]
func.func @transpose(%x: tensor<2x16x4x8xf32>) -> tensor<2x4x16x8xf32> {
  %y = loom.transpose %x perm = [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  return %y : tensor<2x4x16x8xf32>
}

// -----

// Tests that loom.slice round-trips, with unit and non-unit strides.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x192xf32>)
// CHECK:         %[[A:.+]] = loom.slice %[[X]] start = [0, 64] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x64xf32>
// CHECK:         %[[B:.+]] = loom.slice %[[X]] start = [1, 0] limit = [2, 192] stride = [1, 3] : tensor<2x192xf32> -> tensor<1x64xf32>
// CHECK:         return %[[A]], %[[B]]
func.func @slice(%x: tensor<2x192xf32>) -> (tensor<2x64xf32>, tensor<1x64xf32>) {
  %a = loom.slice %x start = [0, 64] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x64xf32>
  %b = loom.slice %x start = [1, 0] limit = [2, 192] stride = [1, 3] : tensor<2x192xf32> -> tensor<1x64xf32>
  return %a, %b : tensor<2x64xf32>, tensor<1x64xf32>
}

// -----

// Tests that loom.concat round-trips with two and with one input.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME:    %[[A:[^:]+]]: tensor<2x3xf32>, %[[B:[^:]+]]: tensor<2x5xf32>)
// CHECK:         %[[Y:.+]] = loom.concat %[[A]], %[[B]] dim = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
// CHECK:         %[[Z:.+]] = loom.concat %[[A]] dim = 0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK:         return %[[Y]], %[[Z]]
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> (tensor<2x8xf32>, tensor<2x3xf32>) {
  %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %z = loom.concat %a dim = 0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y, %z : tensor<2x8xf32>, tensor<2x3xf32>
}

// -----

// Tests that loom.gather round-trips as an embedding lookup and on an inner
// axis.
// CHECK-LABEL: func.func @gather(
// CHECK-SAME:    %[[T:[^:]+]]: tensor<128x64xf32>, %[[I:[^:]+]]: tensor<2x16xi64>, %[[J:[^:]+]]: tensor<3xi32>)
// CHECK:         %[[E:.+]] = loom.gather %[[T]][%[[I]]] axis = 0 : (tensor<128x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
// CHECK:         %[[C:.+]] = loom.gather %[[T]][%[[J]]] axis = 1 : (tensor<128x64xf32>, tensor<3xi32>) -> tensor<128x3xf32>
// CHECK:         return %[[E]], %[[C]]
func.func @gather(%t: tensor<128x64xf32>, %i: tensor<2x16xi64>, %j: tensor<3xi32>)
    -> (tensor<2x16x64xf32>, tensor<128x3xf32>) {
  %e = loom.gather %t[%i] axis = 0 : (tensor<128x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
  %c = loom.gather %t[%j] axis = 1 : (tensor<128x64xf32>, tensor<3xi32>) -> tensor<128x3xf32>
  return %e, %c : tensor<2x16x64xf32>, tensor<128x3xf32>
}

// -----

// Tests that loom.softmax round-trips.
// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x10xf32>)
// CHECK:         %[[Y:.+]] = loom.softmax %[[X]] axis = 1 : tensor<4x10xf32>
// CHECK:         return %[[Y]]
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = loom.softmax %x axis = 1 : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// Tests that loom.log_softmax round-trips.
// CHECK-LABEL: func.func @log_softmax(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x10xf32>)
// CHECK:         %[[Y:.+]] = loom.log_softmax %[[X]] axis = 0 : tensor<4x10xf32>
// CHECK:         return %[[Y]]
func.func @log_softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %y = loom.log_softmax %x axis = 0 : tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// Tests that loom.layer_norm round-trips.
// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x16x64xf32>, %[[G:[^:]+]]: tensor<64xf32>, %[[B:[^:]+]]: tensor<64xf32>)
// CHECK:         %[[Y:.+]] = loom.layer_norm %[[X]], %[[G]], %[[B]] axis = 2 epsilon = {{.+}} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
// CHECK:         return %[[Y]]
func.func @layer_norm(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<2x16x64xf32> {
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05
      : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return %y : tensor<2x16x64xf32>
}

// -----

// Tests that loom.rms_norm round-trips, normalizing over several dimensions.
// CHECK-LABEL: func.func @rms_norm(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x4x64xf32>, %[[G:[^:]+]]: tensor<4x64xf32>)
// CHECK:         %[[Y:.+]] = loom.rms_norm %[[X]], %[[G]] axis = 1 epsilon = 5.000000e-01 : (tensor<2x4x64xf32>, tensor<4x64xf32>) -> tensor<2x4x64xf32>
// CHECK:         return %[[Y]]
func.func @rms_norm(%x: tensor<2x4x64xf32>, %g: tensor<4x64xf32>) -> tensor<2x4x64xf32> {
  %y = loom.rms_norm %x, %g axis = 1 epsilon = 0.5 : (tensor<2x4x64xf32>, tensor<4x64xf32>) -> tensor<2x4x64xf32>
  return %y : tensor<2x4x64xf32>
}

// -----

// Tests that loom.batch_norm round-trips.
// CHECK-LABEL: func.func @batch_norm(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x4x28x28xf32>, %[[S:[^:]+]]: tensor<4xf32>, %[[B:[^:]+]]: tensor<4xf32>, %[[M:[^:]+]]: tensor<4xf32>, %[[V:[^:]+]]: tensor<4xf32>)
// CHECK:         %[[Y:.+]] = loom.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] epsilon = {{.+}} : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
// CHECK:         return %[[Y]]
func.func @batch_norm(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>)
    -> tensor<8x4x28x28xf32> {
  %y = loom.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-05 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
  return %y : tensor<8x4x28x28xf32>
}

// -----

// Tests that loom.batch_norm round-trips with a momentum (one that trains).
// CHECK-LABEL: func.func @batch_norm_momentum(
// CHECK:         loom.batch_norm %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} epsilon = {{.+}} momentum = 0.899999976 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
func.func @batch_norm_momentum(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>)
    -> tensor<8x4x28x28xf32> {
  %y = loom.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-05 momentum = 0.9 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
  return %y : tensor<8x4x28x28xf32>
}

// -----

// Tests that loom.batch_norm_stats round-trips with its two results.
// CHECK-LABEL: func.func @batch_norm_stats(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x4x28x28xf32>)
// CHECK:         %[[M:.+]], %[[V:.+]] = loom.batch_norm_stats %[[X]] : tensor<8x4x28x28xf32> -> tensor<4xf32>, tensor<4xf32>
// CHECK:         return %[[M]], %[[V]]
func.func @batch_norm_stats(%x: tensor<8x4x28x28xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %m, %v = loom.batch_norm_stats %x : tensor<8x4x28x28xf32> -> tensor<4xf32>, tensor<4xf32>
  return %m, %v : tensor<4xf32>, tensor<4xf32>
}

// -----

// Tests that loom.max_pool2d round-trips, with padding.
// CHECK-LABEL: func.func @max_pool2d(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x8x28x28xf32>)
// CHECK:         %[[Y:.+]] = loom.max_pool2d %[[X]] {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
// CHECK:         return %[[Y]]
func.func @max_pool2d(%x: tensor<8x8x28x28xf32>) -> tensor<8x8x14x14xf32> {
  %y = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>}
      : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return %y : tensor<8x8x14x14xf32>
}

// -----

// Tests that loom.avg_pool2d round-trips, with and without `count_include_pad`.
// CHECK-LABEL: func.func @avg_pool2d(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x8x28x28xf32>)
// CHECK:         %[[A:.+]] = loom.avg_pool2d %[[X]] {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
// CHECK:         %[[B:.+]] = loom.avg_pool2d %[[X]] {count_include_pad, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<8x8x28x28xf32> -> tensor<8x8x28x28xf32>
// CHECK:         return %[[A]], %[[B]]
func.func @avg_pool2d(%x: tensor<8x8x28x28xf32>) -> (tensor<8x8x14x14xf32>, tensor<8x8x28x28xf32>) {
  %a = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>}
      : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  %b = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, count_include_pad}
      : tensor<8x8x28x28xf32> -> tensor<8x8x28x28xf32>
  return %a, %b : tensor<8x8x14x14xf32>, tensor<8x8x28x28xf32>
}

// -----

// Tests that loom.dropout round-trips its ratio and stream.
// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x16x64xf32>, %[[SEED:[^:]+]]: tensor<i64>)
// CHECK:         %[[Y:.+]] = loom.dropout %[[X]], %[[SEED]] ratio = 1.000000e-01 stream = 0 : tensor<2x16x64xf32>, tensor<i64>
// CHECK:         %[[Z:.+]] = loom.dropout %[[Y]], %[[SEED]] ratio = 5.000000e-01 stream = 3 : tensor<2x16x64xf32>, tensor<i64>
// CHECK:         return %[[Z]]
func.func @dropout(%x: tensor<2x16x64xf32>, %seed: tensor<i64>) -> tensor<2x16x64xf32> {
  %y = loom.dropout %x, %seed ratio = 1.000000e-01 stream = 0 : tensor<2x16x64xf32>, tensor<i64>
  %z = loom.dropout %y, %seed ratio = 0.5 stream = 3 : tensor<2x16x64xf32>, tensor<i64>
  return %z : tensor<2x16x64xf32>
}

// -----

// Tests that loom.random round-trips its distribution, parameters and stream.
// CHECK-LABEL: func.func @random(
// CHECK-SAME:    %[[SEED:[^:]+]]: tensor<i64>)
// CHECK:         loom.random %[[SEED]] "uniform" a = 0.000000e+00 b = 1.000000e+00 stream = 2 : tensor<i64>, tensor<8x1x1x1xf32>
// CHECK:         loom.random %[[SEED]] "normal" a = 5.000000e-01 b = 2.000000e+00 stream = 0 : tensor<i64>, tensor<3x4xbf16>
func.func @random(%seed: tensor<i64>) -> (tensor<8x1x1x1xf32>, tensor<3x4xbf16>) {
  %u = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 2 : tensor<i64>, tensor<8x1x1x1xf32>
  %n = loom.random %seed "normal" a = 0.5 b = 2.0 stream = 0 : tensor<i64>, tensor<3x4xbf16>
  return %u, %n : tensor<8x1x1x1xf32>, tensor<3x4xbf16>
}

// -----

// Tests that loom.cross_entropy round-trips its reductions and ignore_index.
// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME:    %[[L:[^:]+]]: tensor<32x10xf32>, %[[Y:[^:]+]]: tensor<32xi64>)
// CHECK:         %[[MEAN:.+]] = loom.cross_entropy %[[L]], %[[Y]] reduction = mean : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
// CHECK:         %[[SUM:.+]] = loom.cross_entropy %[[L]], %[[Y]] reduction = sum {ignore_index = -100 : i64} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
// CHECK:         %[[NONE:.+]] = loom.cross_entropy %[[L]], %[[Y]] reduction = none {ignore_index = 0 : i64} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<32xf32>
// CHECK:         return %[[MEAN]], %[[SUM]], %[[NONE]]
func.func @cross_entropy(%l: tensor<32x10xf32>, %y: tensor<32xi64>) -> (tensor<f32>, tensor<f32>, tensor<32xf32>) {
  %mean = loom.cross_entropy %l, %y reduction = mean : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
  %sum = loom.cross_entropy %l, %y reduction = sum {ignore_index = -100 : i64} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
  %none = loom.cross_entropy %l, %y reduction = none {ignore_index = 0 : i64} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<32xf32>
  return %mean, %sum, %none : tensor<f32>, tensor<f32>, tensor<32xf32>
}

// -----

// Tests that loom.cross_entropy round-trips with spatial dimensions and i32
// labels.
// CHECK-LABEL: func.func @cross_entropy_spatial(
// CHECK-SAME:    %[[L:[^:]+]]: tensor<4x10x8x8xf32>, %[[Y:[^:]+]]: tensor<4x8x8xi32>)
// CHECK:         %[[R:.+]] = loom.cross_entropy %[[L]], %[[Y]] reduction = none : (tensor<4x10x8x8xf32>, tensor<4x8x8xi32>) -> tensor<4x8x8xf32>
// CHECK:         return %[[R]]
func.func @cross_entropy_spatial(%l: tensor<4x10x8x8xf32>, %y: tensor<4x8x8xi32>) -> tensor<4x8x8xf32> {
  %r = loom.cross_entropy %l, %y reduction = none : (tensor<4x10x8x8xf32>, tensor<4x8x8xi32>) -> tensor<4x8x8xf32>
  return %r : tensor<4x8x8xf32>
}

// -----

// Tests that loom.mse round-trips its three reductions.
// CHECK-LABEL: func.func @mse(
// CHECK-SAME:    %[[P:[^:]+]]: tensor<32x1xf32>, %[[T:[^:]+]]: tensor<32x1xf32>)
// CHECK:         %[[MEAN:.+]] = loom.mse %[[P]], %[[T]] reduction = mean : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
// CHECK:         %[[SUM:.+]] = loom.mse %[[P]], %[[T]] reduction = sum : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
// CHECK:         %[[NONE:.+]] = loom.mse %[[P]], %[[T]] reduction = none : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x1xf32>
// CHECK:         return %[[MEAN]], %[[SUM]], %[[NONE]]
func.func @mse(%p: tensor<32x1xf32>, %t: tensor<32x1xf32>) -> (tensor<f32>, tensor<f32>, tensor<32x1xf32>) {
  %mean = loom.mse %p, %t reduction = mean : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
  %sum = loom.mse %p, %t reduction = sum : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
  %none = loom.mse %p, %t reduction = none : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x1xf32>
  return %mean, %sum, %none : tensor<f32>, tensor<f32>, tensor<32x1xf32>
}

// -----

// Tests that loom.scatter_add round-trips.
// CHECK-LABEL: func.func @scatter_add(
// CHECK-SAME:    %[[U:[^:]+]]: tensor<2x16x64xf32>, %[[I:[^:]+]]: tensor<2x16xi64>)
// CHECK:         %[[T:.+]] = loom.scatter_add %[[U]][%[[I]]] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<128x64xf32>
// CHECK:         return %[[T]]
func.func @scatter_add(%u: tensor<2x16x64xf32>, %i: tensor<2x16xi64>) -> tensor<128x64xf32> {
  %t = loom.scatter_add %u[%i] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<128x64xf32>
  return %t : tensor<128x64xf32>
}

// -----

// Tests that loom.pad round-trips.
// CHECK-LABEL: func.func @pad(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32>)
// CHECK:         %[[Y:.+]] = loom.pad %[[X]] low = [0, 1] high = [0, 2] interior = [0, 1] : tensor<2x3xf32> -> tensor<2x8xf32>
// CHECK:         return %[[Y]]
func.func @pad(%x: tensor<2x3xf32>) -> tensor<2x8xf32> {
  %y = loom.pad %x low = [0, 1] high = [0, 2] interior = [0, 1] : tensor<2x3xf32> -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that loom.conv2d_input_grad round-trips with strides, groups and a
// remainder row the forward convolution never reads.
// CHECK-LABEL: func.func @conv2d_input_grad(
// CHECK-SAME:    %[[DY:[^:]+]]: tensor<2x6x3x5xf32>, %[[W:[^:]+]]: tensor<6x2x3x2xf32>)
// CHECK:         %[[DX:.+]] = loom.conv2d_input_grad %[[DY]], %[[W]] {dilations = array<i64: 1, 2>, groups = 2 : i64, padding = array<i64: 1, 0, 0, 1>, strides = array<i64: 2, 1>} : (tensor<2x6x3x5xf32>, tensor<6x2x3x2xf32>) -> tensor<2x4x7x6xf32>
// CHECK:         return %[[DX]]
func.func @conv2d_input_grad(%dy: tensor<2x6x3x5xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<2x4x7x6xf32> {
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64}
      : (tensor<2x6x3x5xf32>, tensor<6x2x3x2xf32>) -> tensor<2x4x7x6xf32>
  return %dx : tensor<2x4x7x6xf32>
}

// -----

// Tests that loom.conv2d_filter_grad round-trips, eliding the default `groups = 1`.
// CHECK-LABEL: func.func @conv2d_filter_grad(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x1x28x28xf32>, %[[DY:[^:]+]]: tensor<8x8x28x28xf32>)
// CHECK:         %[[DW:.+]] = loom.conv2d_filter_grad %[[X]], %[[DY]] {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<8x1x28x28xf32>, tensor<8x8x28x28xf32>) -> tensor<8x1x3x3xf32>
// CHECK:         return %[[DW]]
func.func @conv2d_filter_grad(%x: tensor<8x1x28x28xf32>, %dy: tensor<8x8x28x28xf32>) -> tensor<8x1x3x3xf32> {
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<8x1x28x28xf32>, tensor<8x8x28x28xf32>) -> tensor<8x1x3x3xf32>
  return %dw : tensor<8x1x3x3xf32>
}

// -----

// Tests that loom.im2col and loom.col2im round-trip.
// CHECK-LABEL: func.func @im2col_col2im(
// CHECK:         %[[C:.+]] = loom.im2col %{{.+}} {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<2x4x9x9xf32> -> tensor<36x50xf32>
// CHECK:         loom.col2im %[[C]] {dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<36x50xf32> -> tensor<2x4x9x9xf32>
func.func @im2col_col2im(%x: tensor<2x4x9x9xf32>) -> tensor<2x4x9x9xf32> {
  %c = loom.im2col %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<2x4x9x9xf32> -> tensor<36x50xf32>
  %y = loom.col2im %c {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : tensor<36x50xf32> -> tensor<2x4x9x9xf32>
  return %y : tensor<2x4x9x9xf32>
}

// -----

// Tests that loom.max_pool2d_argmax round-trips.
// CHECK-LABEL: func.func @max_pool2d_argmax(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x8x28x28xf32>)
// CHECK:         %[[I:.+]] = loom.max_pool2d_argmax %[[X]] {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xi64>
// CHECK:         return %[[I]]
func.func @max_pool2d_argmax(%x: tensor<8x8x28x28xf32>) -> tensor<8x8x14x14xi64> {
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xi64>
  return %i : tensor<8x8x14x14xi64>
}

// -----

// Tests that loom.max_pool2d_grad round-trips.
// CHECK-LABEL: func.func @max_pool2d_grad(
// CHECK-SAME:    %[[G:[^:]+]]: tensor<8x8x14x14xf32>, %[[I:[^:]+]]: tensor<8x8x14x14xi64>)
// CHECK:         %[[DX:.+]] = loom.max_pool2d_grad %[[G]][%[[I]]] {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<8x8x14x14xf32>, tensor<8x8x14x14xi64>) -> tensor<8x8x28x28xf32>
// CHECK:         return %[[DX]]
func.func @max_pool2d_grad(%g: tensor<8x8x14x14xf32>, %i: tensor<8x8x14x14xi64>) -> tensor<8x8x28x28xf32> {
  %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<8x8x14x14xf32>, tensor<8x8x14x14xi64>) -> tensor<8x8x28x28xf32>
  return %dx : tensor<8x8x28x28xf32>
}

// -----

// Tests that the collectives round-trip, with the module's mesh.
// CHECK: module attributes {loom.mesh_axes = ["dp", "tp"], loom.mesh_shape = array<i64: 2, 4>}
// CHECK-LABEL: func.func @collectives(
// CHECK:         loom.all_reduce %{{.+}} over "dp" reduce = mean : tensor<8x2xf32>
// CHECK:         loom.reduce_scatter %{{.+}} over "tp" reduce = sum : tensor<8x2xf32> -> tensor<2x2xf32>
// CHECK:         loom.all_gather %{{.+}} over "dp" : tensor<2x2xf32> -> tensor<4x2xf32>
// CHECK:         loom.rank_slice %{{.+}} over "tp" : tensor<8x2xf32> -> tensor<2x2xf32>
module attributes {loom.mesh_axes = ["dp", "tp"], loom.mesh_shape = array<i64: 2, 4>} {
  func.func @collectives(%x: tensor<8x2xf32>) -> (tensor<8x2xf32>, tensor<2x2xf32>, tensor<4x2xf32>, tensor<2x2xf32>) {
    %a = loom.all_reduce %x over "dp" reduce = mean : tensor<8x2xf32>
    %r = loom.reduce_scatter %x over "tp" reduce = sum : tensor<8x2xf32> -> tensor<2x2xf32>
    %g = loom.all_gather %r over "dp" : tensor<2x2xf32> -> tensor<4x2xf32>
    %s = loom.rank_slice %x over "tp" : tensor<8x2xf32> -> tensor<2x2xf32>
    return %a, %r, %g, %s : tensor<8x2xf32>, tensor<2x2xf32>, tensor<4x2xf32>, tensor<2x2xf32>
  }
}

// -----

// Tests that loom.attention and loom.attention_grad round-trip, with and
// without their optional mask, bias and document ids, and grouped-query
// shapes.
// CHECK-LABEL: func.func @attention
// CHECK: loom.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 1.250000e-01 : f64, window = 4 : i64}
// CHECK: loom.attention %{{.+}}, %{{.+}}, %{{.+}} mask %{{.+}} bias %{{.+}} {scale = 5.000000e-01 : f64}
// CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} bias %{{.+}} {scale = 5.000000e-01 : f64}
// CHECK: loom.attention %{{.+}}, %{{.+}}, %{{.+}} segments %{{.+}} {causal, scale = 5.000000e-01 : f64}
// CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} segments %{{.+}} {causal, scale = 5.000000e-01 : f64}
// CHECK: loom.attention %{{.+}}, %{{.+}}, %{{.+}} seed %{{.+}} {causal, dropout = 1.000000e-01 : f32, scale = 5.000000e-01 : f64, stream = 2 : i64}
// CHECK: loom.attention_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} seed %{{.+}} {causal, dropout = 1.000000e-01 : f32, scale = 5.000000e-01 : f64, stream = 2 : i64}
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
                     %v: tensor<2x2x8x32xf32>, %m: tensor<2x1x1x8xi1>,
                     %b: tensor<1x4x8x8xf32>, %do: tensor<2x4x8x32xf32>,
                     %docs: tensor<2x8xi32>, %seed: tensor<i64>) {
  %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64, causal, window = 4 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %o2, %lse2 = loom.attention %q, %k, %v mask %m bias %b {scale = 0.5 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<2x1x1x8xi1>, tensor<1x4x8x8xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %dq, %dk, %dv, %db = loom.attention_grad %q, %k, %v, %o2, %lse2, %do bias %b {scale = 0.5 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8x32xf32>, tensor<1x4x8x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<1x4x8x8xf32>)
  %o3, %lse3 = loom.attention %q, %k, %v segments %docs {scale = 0.5 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<2x8xi32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %dq3, %dk3, %dv3 = loom.attention_grad %q, %k, %v, %o3, %lse3, %do segments %docs {scale = 0.5 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8x32xf32>, tensor<2x8xi32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>)
  %o4, %lse4 = loom.attention %q, %k, %v seed %seed {scale = 0.5 : f64, causal, dropout = 0.1 : f32, stream = 2 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<i64>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  %dq4, %dk4, %dv4 = loom.attention_grad %q, %k, %v, %o4, %lse4, %do seed %seed {scale = 0.5 : f64, causal, dropout = 0.1 : f32, stream = 2 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8xf32>, tensor<2x4x8x32xf32>, tensor<i64>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy and its gradient round-trip, in both
// weight layouts.
// CHECK-LABEL: func.func @linear_cross_entropy
// CHECK: loom.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} reduction = mean {ignore_index = -100 : i64, transpose_w}
// CHECK: loom.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} reduction = none :
// CHECK: loom.linear_cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} reduction = mean {ignore_index = -100 : i64, transpose_w}
func.func @linear_cross_entropy(%x: tensor<6x4xf32>, %w: tensor<10x4xf32>,
                                %wt: tensor<4x10xf32>, %y: tensor<6xi64>,
                                %g: tensor<f32>) {
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w, ignore_index = -100 : i64} : (tensor<6x4xf32>, tensor<10x4xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  %l2, %lse2 = loom.linear_cross_entropy %x, %wt, %y reduction = none : (tensor<6x4xf32>, tensor<4x10xf32>, tensor<6xi64>) -> (tensor<6xf32>, tensor<6xf32>)
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = mean {transpose_w, ignore_index = -100 : i64} : (tensor<6x4xf32>, tensor<10x4xf32>, tensor<6xi64>, tensor<6xf32>, tensor<f32>) -> (tensor<6x4xf32>, tensor<10x4xf32>)
  return
}
