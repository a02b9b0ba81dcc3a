// Tests 2-D max and average pooling over padded input (padding skipped, or
// counted with count_include_pad), max_pool2d_argmax with ties, and
// max_pool2d_grad (numpy's unbuffered add at the argmax).

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(3); \
// RUN:   np.save('%t/x.npy', np.round(r.randn(1, 2, 5, 5)).astype(np.float32)); \
// RUN:   np.save('%t/g.npy', r.randn(1, 2, 3, 3).astype(np.float32))"
// RUN: loom-interp %s --input x=%t/x.npy --input g=%t/g.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   x = np.load('%t/x.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   a = ((3, 3), (2, 2), (1, 1, 1, 1)); \
// RUN:   ref.check('max', O('max'), ref.pool2d(x, *a, kind='max')); \
// RUN:   ref.check('avg', O('avg'), ref.pool2d(x, *a, kind='avg')); \
// RUN:   ref.check('avg_pad', O('avg_pad'), ref.pool2d(x, *a, kind='avg', count_include_pad=True)); \
// RUN:   ref.check('argmax', O('argmax'), ref.pool2d_argmax(x, *a)); \
// RUN:   dx = np.zeros(x.size); np.add.at(dx, ref.pool2d_argmax(x, *a).ravel(), np.load('%t/g.npy').astype(np.float64).ravel()); \
// RUN:   ref.check('grad', O('grad'), dx.reshape(x.shape)); \
// RUN:   print(O('argmax').dtype)" | FileCheck %s

// CHECK: OK max
// CHECK: OK avg
// CHECK: OK avg_pad
// CHECK: OK argmax
// CHECK: OK grad
// CHECK: int64

func.func @forward(%x: tensor<1x2x5x5xf32> {loom.input = "x"},
                   %g: tensor<1x2x3x3xf32> {loom.input = "g"})
    -> (tensor<1x2x3x3xf32> {loom.output = "max"},
        tensor<1x2x3x3xf32> {loom.output = "avg"},
        tensor<1x2x3x3xf32> {loom.output = "avg_pad"},
        tensor<1x2x3x3xi64> {loom.output = "argmax"},
        tensor<1x2x5x5xf32> {loom.output = "grad"}) {
  %0 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %1 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %2 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, count_include_pad} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %3 = loom.max_pool2d_argmax %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xi64>
  %4 = loom.max_pool2d_grad %g[%3] {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x3x3xf32>, tensor<1x2x3x3xi64>) -> tensor<1x2x5x5xf32>
  return %0, %1, %2, %3, %4 : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x2x3x3xi64>, tensor<1x2x5x5xf32>
}
