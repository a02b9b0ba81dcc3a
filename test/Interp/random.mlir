// Tests loom.random in the interpreter against the documented contract
// (splitmix64 uniforms reimplemented in Python, Box-Muller for normal
// draws), and that the draws have the distribution they claim: the mean and
// standard deviation of 4096 uniform draws in [2, 6) and of 4096 normal
// draws N(1, 0.5^2), and that two streams differ.

// RUN: rm -rf %t && mkdir -p %t
// RUN: loom-interp %s --seed 7 --output-dir %t/out
// RUN: %python -c "import sys, math; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   O = lambda n: np.load('%t/out/' + n + '.npy').astype(np.float64); \
// RUN:   u = lambda i, s: ref.dropout_uniform(7, s, i); \
// RUN:   want_u = np.array([2 + 4 * u(i, 0) for i in range(4096)]); \
// RUN:   want_n = np.array([1 + 0.5 * math.sqrt(-2 * math.log(1 - u(2 * i, 1))) * math.cos(2 * math.pi * u(2 * i + 1, 1)) for i in range(4096)]); \
// RUN:   ref.check('uniform', O('uniform').ravel(), want_u); \
// RUN:   ref.check('normal', O('normal').ravel(), want_n); \
// RUN:   print('uniform range', O('uniform').min() >= 2, O('uniform').max() < 6); \
// RUN:   print('uniform mean', abs(O('uniform').mean() - 4) < 0.07, 'std', abs(O('uniform').std() - 4 / math.sqrt(12)) < 0.05); \
// RUN:   print('normal mean', abs(O('normal').mean() - 1) < 0.03, 'std', abs(O('normal').std() - 0.5) < 0.025); \
// RUN:   print('streams differ', not np.array_equal(O('uniform'), O('other')))" | FileCheck %s

// CHECK: OK uniform
// CHECK: OK normal
// CHECK: uniform range True True
// Within 4 standard errors of 4096 draws: the mean of U[2, 6) is 4 and its
// standard deviation 4 / sqrt(12).
// CHECK: uniform mean True std True
// CHECK: normal mean True std True
// CHECK: streams differ True

func.func @forward(%seed: tensor<i64> {loom.rng_seed})
    -> (tensor<64x64xf32> {loom.output = "uniform"},
        tensor<4096xf32> {loom.output = "normal"},
        tensor<64x64xf32> {loom.output = "other"}) {
  %0 = loom.random %seed "uniform" a = 2.0 b = 6.0 stream = 0 : tensor<i64>, tensor<64x64xf32>
  %1 = loom.random %seed "normal" a = 1.0 b = 0.5 stream = 1 : tensor<i64>, tensor<4096xf32>
  %2 = loom.random %seed "uniform" a = 2.0 b = 6.0 stream = 2 : tensor<i64>, tensor<64x64xf32>
  return %0, %1, %2 : tensor<64x64xf32>, tensor<4096xf32>, tensor<64x64xf32>
}
