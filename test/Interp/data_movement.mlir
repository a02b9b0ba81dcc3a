// Tests broadcast_in_dim, reshape, transpose, strided slice, concat, pad
// (low, high, interior) and the reductions with and without keep_dims.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(11); \
// RUN:   np.save('%t/x.npy', r.randn(2, 3, 4).astype(np.float32)); \
// RUN:   np.save('%t/c.npy', r.randn(3, 1).astype(np.float32)); \
// RUN:   np.save('%t/i.npy', r.randint(-9, 9, (2, 3)).astype(np.int32))"
// RUN: loom-interp %s --input x=%t/x.npy --input c=%t/c.npy --input i=%t/i.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy'); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   x, c, i = L('x'), L('c'), L('i'); \
// RUN:   p = np.zeros((2, 1 + 3 + 2 * 1 + 2, 4 + 4 + 3 * 2)); p[:, 1:6:2, 0:10:3] = x; \
// RUN:   want = dict(bcast=np.broadcast_to(c[None, :, :], (2, 3, 4)), reshape=x.reshape(4, 6), transpose=x.transpose(2, 0, 1), \
// RUN:     slice=x[0:2, 1:3, 0:4:3], concat=np.concatenate([x, x[:, :1, :], x], axis=1), pad=p, \
// RUN:     sum=x.sum((0, 2)), max=x.max(1, keepdims=True), min=x.min((0, 1, 2)), mean=x.mean(2), isum=i.sum(1), nothing=x); \
// RUN:   [ref.check(k, O(k), v) for k, v in want.items()]; print(O('isum').dtype)" | FileCheck %s

// CHECK: OK bcast
// CHECK: OK reshape
// CHECK: OK transpose
// CHECK: OK slice
// CHECK: OK concat
// CHECK: OK pad
// CHECK: OK sum
// CHECK: OK max
// CHECK: OK min
// CHECK: OK mean
// CHECK: OK isum
// CHECK: OK nothing
// CHECK: int32

func.func @forward(%x: tensor<2x3x4xf32> {loom.input = "x"},
                   %c: tensor<3x1xf32> {loom.input = "c"},
                   %i: tensor<2x3xi32> {loom.input = "i"})
    -> (tensor<2x3x4xf32> {loom.output = "bcast"},
        tensor<4x6xf32> {loom.output = "reshape"},
        tensor<4x2x3xf32> {loom.output = "transpose"},
        tensor<2x2x2xf32> {loom.output = "slice"},
        tensor<2x7x4xf32> {loom.output = "concat"},
        tensor<2x8x14xf32> {loom.output = "pad"},
        tensor<3xf32> {loom.output = "sum"},
        tensor<2x1x4xf32> {loom.output = "max"},
        tensor<f32> {loom.output = "min"},
        tensor<2x3xf32> {loom.output = "mean"},
        tensor<2xi32> {loom.output = "isum"},
        tensor<2x3x4xf32> {loom.output = "nothing"}) {
  %0 = loom.broadcast_in_dim %c dims = [1, 2] : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %1 = loom.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
  %2 = loom.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %3 = loom.slice %x start = [0, 1, 0] limit = [2, 3, 4] stride = [1, 1, 3] : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %head = loom.slice %x start = [0, 0, 0] limit = [2, 1, 4] stride = [1, 1, 1] : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %4 = loom.concat %x, %head, %x dim = 1 : (tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>) -> tensor<2x7x4xf32>
  %5 = loom.pad %x low = [0, 1, 0] high = [0, 2, 4] interior = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<2x8x14xf32>
  %6 = loom.reduce_sum %x dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
  %7 = loom.reduce_max %x dims = [1] {keep_dims} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %8 = loom.reduce_min %x dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  %9 = loom.reduce_mean %x dims = [2] : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %10 = loom.reduce_sum %i dims = [1] : tensor<2x3xi32> -> tensor<2xi32>
  %11 = loom.reduce_sum %x dims = [] : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11 : tensor<2x3x4xf32>, tensor<4x6xf32>, tensor<4x2x3xf32>, tensor<2x2x2xf32>, tensor<2x7x4xf32>, tensor<2x8x14xf32>, tensor<3xf32>, tensor<2x1x4xf32>, tensor<f32>, tensor<2x3xf32>, tensor<2xi32>, tensor<2x3x4xf32>
}
