// Tests layer_norm over several trailing dimensions, rms_norm, batch_norm
// with given statistics and batch_norm_stats (biased variance).

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(5); \
// RUN:   [np.save('%t/' + n + '.npy', (r.randn(*s) * 2 + 1).astype(np.float32)) for n, s in \
// RUN:    [('x', (2, 3, 4)), ('g', (3, 4)), ('b', (3, 4)), ('g4', (4,)), ('c', (3,)), ('d', (3,)), ('m', (3,))]]; \
// RUN:   np.save('%t/v.npy', r.rand(3).astype(np.float32) + 0.5)"
// RUN: loom-interp %s --input x=%t/x.npy --input g=%t/g.npy --input b=%t/b.npy --input g4=%t/g4.npy \
// RUN:   --input c=%t/c.npy --input d=%t/d.npy --input m=%t/m.npy --input v=%t/v.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy').astype(np.float64); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   x = L('x'); eps = float(np.float32(1e-5)); ch = lambda a: a[None, :, None]; \
// RUN:   mu = x.mean((1, 2), keepdims=True); var = x.var((1, 2), keepdims=True); \
// RUN:   ref.check('layer_norm', O('layer_norm'), (x - mu) / np.sqrt(var + eps) * L('g') + L('b')); \
// RUN:   ref.check('rms_norm', O('rms_norm'), x / np.sqrt((x * x).mean(2, keepdims=True) + float(np.float32(1e-6))) * L('g4')); \
// RUN:   ref.check('batch_norm', O('batch_norm'), (x - ch(L('m'))) / np.sqrt(ch(L('v')) + eps) * ch(L('c')) + ch(L('d'))); \
// RUN:   ref.check('mean', O('mean'), x.mean((0, 2))); \
// RUN:   ref.check('var', O('var'), x.var((0, 2)))" | FileCheck %s

// CHECK: OK layer_norm
// CHECK: OK rms_norm
// CHECK: OK batch_norm
// CHECK: OK mean
// CHECK: OK var

func.func @forward(%x: tensor<2x3x4xf32> {loom.input = "x"},
                   %g: tensor<3x4xf32> {loom.input = "g"},
                   %b: tensor<3x4xf32> {loom.input = "b"},
                   %g4: tensor<4xf32> {loom.input = "g4"},
                   %c: tensor<3xf32> {loom.input = "c"},
                   %d: tensor<3xf32> {loom.input = "d"},
                   %m: tensor<3xf32> {loom.input = "m"},
                   %v: tensor<3xf32> {loom.input = "v"})
    -> (tensor<2x3x4xf32> {loom.output = "layer_norm"},
        tensor<2x3x4xf32> {loom.output = "rms_norm"},
        tensor<2x3x4xf32> {loom.output = "batch_norm"},
        tensor<3xf32> {loom.output = "mean"},
        tensor<3xf32> {loom.output = "var"}) {
  %0 = loom.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x3x4xf32>
  %1 = loom.rms_norm %x, %g4 axis = 2 epsilon = 1.0e-06 : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %2 = loom.batch_norm %x, %c, %d, %m, %v epsilon = 1.0e-05 : (tensor<2x3x4xf32>, tensor<3xf32>) -> tensor<2x3x4xf32>
  %3, %4 = loom.batch_norm_stats %x : tensor<2x3x4xf32> -> tensor<3xf32>, tensor<3xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>
}
