// Tests loom.conv2d with groups, asymmetric padding, strides and dilations,
// and its two gradients (checked against the Jacobian of a NumPy conv2d).

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(2); \
// RUN:   [np.save('%t/' + n + '.npy', r.randn(*s).astype(np.float32)) for n, s in \
// RUN:    [('x', (1, 4, 5, 5)), ('w', (6, 2, 3, 3)), ('dy', (1, 6, 3, 2))]]"
// RUN: loom-interp %s --input x=%t/x.npy --input w=%t/w.npy --input dy=%t/dy.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   a = ((2, 1), (1, 0, 2, 1), (1, 2), 2); \
// RUN:   ref.check('conv', O('y'), ref.conv2d(L('x'), L('w'), *a)); \
// RUN:   ref.check('input_grad', O('dx'), ref.conv2d_input_grad(L('dy'), L('w'), (1, 4, 5, 5), *a)); \
// RUN:   ref.check('filter_grad', O('dw'), ref.conv2d_filter_grad(L('x'), L('dy'), (6, 2, 3, 3), *a))" | FileCheck %s

// CHECK: OK conv
// CHECK: OK input_grad
// CHECK: OK filter_grad

func.func @forward(%x: tensor<1x4x5x5xf32> {loom.input = "x"},
                   %w: tensor<6x2x3x3xf32> {loom.input = "w"},
                   %dy: tensor<1x6x3x2xf32> {loom.input = "dy"})
    -> (tensor<1x6x3x2xf32> {loom.output = "y"},
        tensor<1x4x5x5xf32> {loom.output = "dx"},
        tensor<6x2x3x3xf32> {loom.output = "dw"}) {
  %y = loom.conv2d %x, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64}
      : (tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x2xf32>
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64}
      : (tensor<1x6x3x2xf32>, tensor<6x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 2, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64}
      : (tensor<1x4x5x5xf32>, tensor<1x6x3x2xf32>) -> tensor<6x2x3x3xf32>
  return %y, %dx, %dw : tensor<1x6x3x2xf32>, tensor<1x4x5x5xf32>, tensor<6x2x3x3xf32>
}
