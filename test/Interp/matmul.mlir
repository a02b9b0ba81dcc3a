// Tests that loom.matmul honours transpose_a/transpose_b, batch dimensions,
// and a rank-2 rhs shared by every batch.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(1); \
// RUN:   [np.save('%t/' + n + '.npy', r.randn(*s).astype(np.float32)) for n, s in \
// RUN:    [('a', (2, 3)), ('at', (3, 2)), ('b', (3, 4)), ('bt', (4, 3)), ('x', (2, 2, 3)), ('y', (2, 3, 4)), ('yt', (2, 4, 3)), ('c', (4,))]]"
// RUN: loom-interp %s --input a=%t/a.npy --input at=%t/at.npy --input b=%t/b.npy \
// RUN:   --input bt=%t/bt.npy --input x=%t/x.npy --input y=%t/y.npy --input yt=%t/yt.npy --input c=%t/c.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   ref.check('plain', O('plain'), L('a') @ L('b')); \
// RUN:   ref.check('ta', O('ta'), L('at').T @ L('b')); \
// RUN:   ref.check('tb', O('tb'), L('a') @ L('bt').T); \
// RUN:   ref.check('tab', O('tab'), L('at').T @ L('bt').T); \
// RUN:   ref.check('shared', O('shared'), L('x') @ L('b')); \
// RUN:   ref.check('batched', O('batched'), L('x') @ L('y')); \
// RUN:   ref.check('batched_tb', O('batched_tb'), L('x') @ L('yt').transpose(0, 2, 1)); \
// RUN:   ref.check('bias', O('bias'), L('x') @ L('b') + L('c')); \
// RUN:   print(O('plain').dtype)" | FileCheck %s

// CHECK: OK plain
// CHECK: OK ta
// CHECK: OK tb
// CHECK: OK tab
// CHECK: OK shared
// CHECK: OK batched
// CHECK: OK batched_tb
// CHECK: OK bias
// CHECK: float32

func.func @forward(%a: tensor<2x3xf32> {loom.input = "a"},
                   %at: tensor<3x2xf32> {loom.input = "at"},
                   %b: tensor<3x4xf32> {loom.input = "b"},
                   %bt: tensor<4x3xf32> {loom.input = "bt"},
                   %x: tensor<2x2x3xf32> {loom.input = "x"},
                   %y: tensor<2x3x4xf32> {loom.input = "y"},
                   %yt: tensor<2x4x3xf32> {loom.input = "yt"},
                   %c: tensor<4xf32> {loom.input = "c"})
    -> (tensor<2x4xf32> {loom.output = "plain"},
        tensor<2x4xf32> {loom.output = "ta"},
        tensor<2x4xf32> {loom.output = "tb"},
        tensor<2x4xf32> {loom.output = "tab"},
        tensor<2x2x4xf32> {loom.output = "shared"},
        tensor<2x2x4xf32> {loom.output = "batched"},
        tensor<2x2x4xf32> {loom.output = "batched_tb"},
        tensor<2x2x4xf32> {loom.output = "bias"}) {
  %0 = loom.matmul %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = loom.matmul %at, %b {transpose_a} : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %2 = loom.matmul %a, %bt {transpose_b} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %3 = loom.matmul %at, %bt {transpose_a, transpose_b} : (tensor<3x2xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %4 = loom.matmul %x, %b : (tensor<2x2x3xf32>, tensor<3x4xf32>) -> tensor<2x2x4xf32>
  %5 = loom.matmul %x, %y : (tensor<2x2x3xf32>, tensor<2x3x4xf32>) -> tensor<2x2x4xf32>
  %6 = loom.matmul %x, %yt {transpose_b} : (tensor<2x2x3xf32>, tensor<2x4x3xf32>) -> tensor<2x2x4xf32>
  %7 = loom.matmul %x, %b bias(%c : tensor<4xf32>) : (tensor<2x2x3xf32>, tensor<3x4xf32>) -> tensor<2x2x4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>, tensor<2x2x4xf32>
}
