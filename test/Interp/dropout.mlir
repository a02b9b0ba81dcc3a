// Tests that dropout with ratio 0 is the identity, and that with ratio 0.3
// its mask follows the documented splitmix64 contract (reimplemented in
// Python), for the seed given with --seed and per-op streams.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; np.save('%t/x.npy', np.random.RandomState(8).randn(4, 16).astype(np.float32))"
// RUN: loom-interp %s --input x=%t/x.npy --seed 42 --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   x = np.load('%t/x.npy'); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   print('identity', np.array_equal(O('identity'), x)); \
// RUN:   ref.check('stream0', O('stream0'), ref.dropout(x, 42, 0, 0.3)); \
// RUN:   ref.check('stream5', O('stream5'), ref.dropout(x, 42, 5, 0.3)); \
// RUN:   print('streams differ', not np.array_equal(O('stream0') == 0, O('stream5') == 0)); \
// RUN:   print('dropped', (O('stream0') == 0).sum())" | FileCheck %s

// CHECK: identity True
// CHECK: OK stream0
// CHECK: OK stream5
// CHECK: streams differ True
// CHECK: dropped {{1[0-9]|2[0-9]}}

func.func @forward(%x: tensor<4x16xf32> {loom.input = "x"},
                   %seed: tensor<i64> {loom.rng_seed})
    -> (tensor<4x16xf32> {loom.output = "identity"},
        tensor<4x16xf32> {loom.output = "stream0"},
        tensor<4x16xf32> {loom.output = "stream5"}) {
  %0 = loom.dropout %x, %seed ratio = 0.000000e+00 stream = 1 : tensor<4x16xf32>, tensor<i64>
  %1 = loom.dropout %x, %seed ratio = 3.000000e-01 stream = 0 : tensor<4x16xf32>, tensor<i64>
  %2 = loom.dropout %x, %seed ratio = 3.000000e-01 stream = 5 : tensor<4x16xf32>, tensor<i64>
  return %0, %1, %2 : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}
