// loom-conv-to-gemm: the convolutions become im2col / col2im and GEMMs, and
// the rewritten function still computes the convolutions (run by the
// interpreter, checked against NumPy's, with a batch of 2, strides,
// asymmetric padding and dilations).

// RUN: loom-opt --loom-conv-to-gemm %s | FileCheck %s
// RUN: loom-opt --loom-conv-to-gemm=library-convs=true %s | FileCheck %s --check-prefix=LIB
// RUN: rm -rf %t && mkdir -p %t
// RUN: loom-opt --loom-conv-to-gemm %s -o %t/gemm.mlir
// RUN: %python -c "import numpy as np; r = np.random.RandomState(3); \
// RUN:   [np.save('%t/' + n + '.npy', r.randn(*s).astype(np.float32)) for n, s in \
// RUN:    [('x', (2, 3, 6, 5)), ('w', (4, 3, 3, 2)), ('dy', (2, 4, 4, 4))]]"
// RUN: loom-interp %t/gemm.mlir --input x=%t/x.npy --input w=%t/w.npy --input dy=%t/dy.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/../Interp/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   a = ((2, 1), (1, 0, 2, 1), (1, 2), 1); \
// RUN:   ref.check('conv', O('y'), ref.conv2d(L('x'), L('w'), *a)); \
// RUN:   ref.check('input_grad', O('dx'), ref.conv2d_input_grad(L('dy'), L('w'), (2, 3, 6, 5), *a)); \
// RUN:   ref.check('filter_grad', O('dw'), ref.conv2d_filter_grad(L('x'), L('dy'), (4, 3, 3, 2), *a))" | FileCheck %s --check-prefix=NUM

// NUM: OK conv
// NUM: OK input_grad
// NUM: OK filter_grad

// CHECK-LABEL: func.func @forward
// dy as [O, N*P] and the filter as [O, K] are made once each, for every
// GEMM that reads them.
// CHECK:      %[[DY3:.*]] = loom.reshape %arg2 : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[DYT:.*]] = loom.transpose %[[DY3]] perm = [1, 0, 2] : tensor<2x4x16xf32> -> tensor<4x2x16xf32>
// CHECK-NEXT: %[[DYM:.*]] = loom.reshape %[[DYT]] : tensor<4x2x16xf32> -> tensor<4x32xf32>
// CHECK-NEXT: %[[WM:.*]] = loom.reshape %arg1 : tensor<4x3x3x2xf32> -> tensor<4x18xf32>
// CHECK-NEXT: %[[COLS:.*]] = loom.im2col %arg0 {{.*}}kernel = array<i64: 3, 2>{{.*}} : tensor<2x3x6x5xf32> -> tensor<18x32xf32>
// CHECK-NEXT: %[[Y:.*]] = loom.matmul %[[WM]], %[[COLS]] : (tensor<4x18xf32>, tensor<18x32xf32>) -> tensor<4x32xf32>
// CHECK:      loom.transpose {{.*}} -> tensor<2x4x16xf32>
// CHECK-NOT:  loom.reshape %arg1
// CHECK:      %[[DCOLS:.*]] = loom.matmul %[[WM]], %[[DYM]] {transpose_a} : (tensor<4x18xf32>, tensor<4x32xf32>) -> tensor<18x32xf32>
// CHECK:      loom.col2im %[[DCOLS]] {{.*}} : tensor<18x32xf32> -> tensor<2x3x6x5xf32>
// CHECK:      %[[COLS2:.*]] = loom.im2col %arg0
// CHECK:      loom.matmul %[[DYM]], %[[COLS2]] {transpose_b} : (tensor<4x32xf32>, tensor<18x32xf32>) -> tensor<4x18xf32>
// CHECK-NOT:  loom.conv2d
// CHECK:      return
func.func @forward(%x: tensor<2x3x6x5xf32> {loom.input = "x"},
                   %w: tensor<4x3x3x2xf32> {loom.input = "w"},
                   %dy: tensor<2x4x4x4xf32> {loom.input = "dy"})
    -> (tensor<2x4x4x4xf32> {loom.output = "y"},
        tensor<2x3x6x5xf32> {loom.output = "dx"},
        tensor<4x3x3x2xf32> {loom.output = "dw"}) {
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 1 : i64}
      : (tensor<2x3x6x5xf32>, tensor<4x3x3x2xf32>) -> tensor<2x4x4x4xf32>
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 1 : i64}
      : (tensor<2x4x4x4xf32>, tensor<4x3x3x2xf32>) -> tensor<2x3x6x5xf32>
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 1 : i64}
      : (tensor<2x3x6x5xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x2xf32>
  return %y, %dx, %dw : tensor<2x4x4x4xf32>, tensor<2x3x6x5xf32>, tensor<4x3x3x2xf32>
}

// A batch of one needs no transposes; grouped convolutions keep their
// direct loops; a bf16 one with one group becomes a bf16 GEMM (which sums
// in f32).
// CHECK-LABEL: func.func @single_grouped_bf16
// CHECK-NOT:   loom.transpose
// CHECK:       loom.im2col
// CHECK:       loom.conv2d {{.*}}groups = 2
// CHECK:       loom.im2col {{.*}} : tensor<1x4x5x5xbf16> -> tensor<36x9xbf16>
// CHECK-NEXT:  loom.matmul {{.*}} : (tensor<6x36xbf16>, tensor<36x9xbf16>) -> tensor<6x9xbf16>
func.func @single_grouped_bf16(%x: tensor<1x4x5x5xf32>, %w: tensor<6x4x3x3xf32>,
                               %wg: tensor<6x2x3x3xf32>, %xb: tensor<1x4x5x5xbf16>,
                               %wb: tensor<6x4x3x3xbf16>)
    -> (tensor<1x6x3x3xf32>, tensor<1x6x3x3xf32>, tensor<1x6x3x3xbf16>) {
  %a = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x5x5xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x3x3xf32>
  %b = loom.conv2d %x, %wg {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64}
      : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32>
  %c = loom.conv2d %xb, %wb {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x5x5xbf16>, tensor<6x4x3x3xbf16>) -> tensor<1x6x3x3xbf16>
  return %a, %b, %c : tensor<1x6x3x3xf32>, tensor<1x6x3x3xf32>, tensor<1x6x3x3xbf16>
}

// With library-convs (the CPU target), f32 convolutions of any group count
// stay whole for the plan's conv steps; others are rewritten or kept as
// before.
// LIB-LABEL: func.func @forward
// LIB-NOT:   loom.im2col
// LIB:       loom.conv2d %arg0, %arg1 {dilations = {{.*}}, loom.library_call
// LIB:       loom.conv2d_input_grad %arg2, %arg1 {dilations = {{.*}}, loom.library_call
// LIB:       loom.conv2d_filter_grad %arg0, %arg2 {dilations = {{.*}}, loom.library_call
// LIB-LABEL: func.func @single_grouped_bf16
// LIB:       loom.conv2d {{.*}}loom.library_call
// LIB:       loom.conv2d {{.*}}groups = 2 : i64, loom.library_call
// LIB-NOT:   loom.library_call
// LIB:       loom.matmul {{.*}}bf16
// LIB-LABEL: func.func @f64
// LIB:       loom.im2col
// LIB-NOT:   loom.library_call
func.func @f64(%x: tensor<1x2x4x4xf64>, %w: tensor<3x2x3x3xf64>) -> tensor<1x3x2x2xf64> {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>}
      : (tensor<1x2x4x4xf64>, tensor<3x2x3x3xf64>) -> tensor<1x3x2x2xf64>
  return %y : tensor<1x3x2x2xf64>
}

// The filter gradient of a depthwise 5x5 convolution stays a kernel (oneDNN
// has no direct kernel for it); a 3x3 one and the 5x5 forward are library
// calls.
// LIB-LABEL: func.func @depthwise
// LIB:       loom.conv2d {{.*}}groups = 4 : i64, loom.library_call
// LIB:       loom.conv2d_filter_grad {{.*}}groups = 4 : i64, loom.library_call{{.*}} -> tensor<4x1x3x3xf32>
// LIB:       loom.conv2d_filter_grad
// LIB-NOT:   loom.library_call
// LIB-SAME:  -> tensor<4x1x5x5xf32>
func.func @depthwise(%x: tensor<2x4x8x8xf32>, %w: tensor<4x1x5x5xf32>, %dy: tensor<2x4x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>, tensor<4x1x5x5xf32>) {
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>, groups = 4 : i64}
      : (tensor<2x4x8x8xf32>, tensor<4x1x5x5xf32>) -> tensor<2x4x8x8xf32>
  %d3 = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 4 : i64}
      : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x1x3x3xf32>
  %d5 = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 2, 2, 2, 2>, dilations = array<i64: 1, 1>, groups = 4 : i64}
      : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x1x5x5xf32>
  return %y, %d3, %d5 : tensor<2x4x8x8xf32>, tensor<4x1x3x3xf32>, tensor<4x1x5x5xf32>
}

// -----

// A bf16 input gradient: the GEMM gives bf16 columns, and col2im sums the
// overlapping patches in f32, rounded once to bf16 at the end.
// CHECK-LABEL: func.func @input_grad_bf16
// CHECK:       %[[COLS:.+]] = loom.matmul {{.*}} -> tensor<{{[0-9x]+}}xbf16>
// CHECK-NEXT:  %[[WIDE:.+]] = loom.cast %[[COLS]] : tensor<{{[0-9x]+}}xbf16> -> tensor<{{[0-9x]+}}xf32>
// CHECK-NEXT:  %[[SUM:.+]] = loom.col2im %[[WIDE]] {{.*}} -> tensor<1x2x4x4xf32>
// CHECK-NEXT:  loom.cast %[[SUM]] : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xbf16>
func.func @input_grad_bf16(%dy: tensor<1x3x2x2xbf16>, %w: tensor<3x2x3x3xbf16>) -> tensor<1x2x4x4xbf16> {
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64}
      : (tensor<1x3x2x2xbf16>, tensor<3x2x3x3xbf16>) -> tensor<1x2x4x4xbf16>
  return %dx : tensor<1x2x4x4xbf16>
}
