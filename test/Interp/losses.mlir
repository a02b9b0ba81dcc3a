// Tests cross_entropy (mean over the labels not ignored, sum, none with 0 at
// ignored labels, classes on dimension 1 of a 3-D logits tensor, the mean of
// an all-ignored batch is 0) and mse.

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(6); \
// RUN:   np.save('%t/logits.npy', r.randn(4, 5).astype(np.float32)); \
// RUN:   np.save('%t/labels.npy', np.array([1, -100, 4, 0], dtype=np.int64)); \
// RUN:   np.save('%t/logits3.npy', r.randn(2, 3, 2).astype(np.float32)); \
// RUN:   np.save('%t/labels3.npy', np.array([[2, 0], [1, 7]], dtype=np.int64)); \
// RUN:   np.save('%t/ignored.npy', np.array([-100, -100, -100, -100], dtype=np.int64)); \
// RUN:   np.save('%t/p.npy', r.randn(3, 2).astype(np.float32)); np.save('%t/t.npy', r.randn(3, 2).astype(np.float32))"
// RUN: loom-interp %s --input logits=%t/logits.npy --input labels=%t/labels.npy --input logits3=%t/logits3.npy \
// RUN:   --input labels3=%t/labels3.npy --input ignored=%t/ignored.npy --input p=%t/p.npy --input t=%t/t.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy'); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   x = L('logits').astype(np.float64); y = L('labels'); \
// RUN:   lsm = x - np.log(np.exp(x).sum(1, keepdims=True)); \
// RUN:   keep = y != -100; losses = np.where(keep, -lsm[np.arange(4), np.where(keep, y, 0)], 0.0); \
// RUN:   ref.check('mean', O('mean'), losses.sum() / keep.sum()); \
// RUN:   ref.check('sum', O('sum'), losses.sum()); \
// RUN:   ref.check('none', O('none'), losses); \
// RUN:   x3 = L('logits3').astype(np.float64); y3 = L('labels3'); lsm3 = x3 - np.log(np.exp(x3).sum(1, keepdims=True)); \
// RUN:   l3 = np.array([[0.0 if y3[n, d] == 7 else -lsm3[n, y3[n, d], d] for d in range(2)] for n in range(2)]); \
// RUN:   ref.check('spatial', O('spatial'), l3.sum() / 3); \
// RUN:   ref.check('all_ignored', O('all_ignored'), 0.0); \
// RUN:   d = L('p').astype(np.float64) - L('t'); \
// RUN:   ref.check('mse_mean', O('mse_mean'), (d * d).mean()); \
// RUN:   ref.check('mse_sum', O('mse_sum'), (d * d).sum()); \
// RUN:   ref.check('mse_none', O('mse_none'), d * d)" | FileCheck %s

// CHECK: OK mean
// CHECK: OK sum
// CHECK: OK none
// CHECK: OK spatial
// CHECK: OK all_ignored
// CHECK: OK mse_mean
// CHECK: OK mse_sum
// CHECK: OK mse_none

func.func @forward(%logits: tensor<4x5xf32> {loom.input = "logits"},
                   %labels: tensor<4xi64> {loom.input = "labels"},
                   %logits3: tensor<2x3x2xf32> {loom.input = "logits3"},
                   %labels3: tensor<2x2xi64> {loom.input = "labels3"},
                   %ignored: tensor<4xi64> {loom.input = "ignored"},
                   %p: tensor<3x2xf32> {loom.input = "p"},
                   %t: tensor<3x2xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.output = "mean"}, tensor<f32> {loom.output = "sum"},
        tensor<4xf32> {loom.output = "none"},
        tensor<f32> {loom.output = "spatial"},
        tensor<f32> {loom.output = "all_ignored"},
        tensor<f32> {loom.output = "mse_mean"},
        tensor<f32> {loom.output = "mse_sum"},
        tensor<3x2xf32> {loom.output = "mse_none"}) {
  %0 = loom.cross_entropy %logits, %labels reduction = mean {ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  %1 = loom.cross_entropy %logits, %labels reduction = sum {ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  %2 = loom.cross_entropy %logits, %labels reduction = none {ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<4xf32>
  %3 = loom.cross_entropy %logits3, %labels3 reduction = mean {ignore_index = 7 : i64} : (tensor<2x3x2xf32>, tensor<2x2xi64>) -> tensor<f32>
  %4 = loom.cross_entropy %logits, %ignored reduction = mean {ignore_index = -100 : i64} : (tensor<4x5xf32>, tensor<4xi64>) -> tensor<f32>
  %5 = loom.mse %p, %t reduction = mean : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<f32>
  %6 = loom.mse %p, %t reduction = sum : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<f32>
  %7 = loom.mse %p, %t reduction = none : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %0, %1, %2, %3, %4, %5, %6, %7 : tensor<f32>, tensor<f32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<3x2xf32>
}
