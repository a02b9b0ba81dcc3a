// Tests softmax and log_softmax along inner and outer axes, with values
// large enough that a version without the max subtraction overflows.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(4); \
// RUN:   x = r.randn(2, 3, 4).astype(np.float32); x[0, 0, 0] = 1000; x[1, 2, 3] = -1000; np.save('%t/x.npy', x)"
// RUN: loom-interp %s --input x=%t/x.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   x = np.load('%t/x.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   lse = lambda a, k: np.log(np.exp(a - a.max(k, keepdims=True)).sum(k, keepdims=True)) + a.max(k, keepdims=True); \
// RUN:   ref.check('softmax1', O('softmax1'), np.exp(x - lse(x, 1))); \
// RUN:   ref.check('softmax2', O('softmax2'), np.exp(x - lse(x, 2))); \
// RUN:   ref.check('log_softmax0', O('log_softmax0'), x - lse(x, 0)); \
// RUN:   ref.check('log_softmax2', O('log_softmax2'), x - lse(x, 2))" | FileCheck %s

// CHECK: OK softmax1
// CHECK: OK softmax2
// CHECK: OK log_softmax0
// CHECK: OK log_softmax2

func.func @forward(%x: tensor<2x3x4xf32> {loom.input = "x"})
    -> (tensor<2x3x4xf32> {loom.output = "softmax1"},
        tensor<2x3x4xf32> {loom.output = "softmax2"},
        tensor<2x3x4xf32> {loom.output = "log_softmax0"},
        tensor<2x3x4xf32> {loom.output = "log_softmax2"}) {
  %0 = loom.softmax %x axis = 1 : tensor<2x3x4xf32>
  %1 = loom.softmax %x axis = 2 : tensor<2x3x4xf32>
  %2 = loom.log_softmax %x axis = 0 : tensor<2x3x4xf32>
  %3 = loom.log_softmax %x axis = 2 : tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>
}
