// Tests gather (embedding lookup on axis 0 with a negative index, and a
// middle axis) and scatter_add, its adjoint (repeated indices accumulate).

// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; r = np.random.RandomState(7); \
// RUN:   np.save('%t/table.npy', r.randn(5, 3).astype(np.float32)); \
// RUN:   np.save('%t/t3.npy', r.randn(2, 4, 3).astype(np.float32)); \
// RUN:   np.save('%t/ids.npy', np.array([[4, 0], [-1, 2]], dtype=np.int64)); \
// RUN:   np.save('%t/ids32.npy', np.array([3, 1, 3], dtype=np.int32)); \
// RUN:   np.save('%t/upd.npy', r.randn(2, 3, 3).astype(np.float32))"
// RUN: loom-interp %s --input table=%t/table.npy --input t3=%t/t3.npy --input ids=%t/ids.npy \
// RUN:   --input ids32=%t/ids32.npy --input upd=%t/upd.npy --output-dir %t/out
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   L = lambda n: np.load('%t/' + n + '.npy'); O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   ref.check('embedding', O('embedding'), L('table')[L('ids')]); \
// RUN:   ref.check('axis1', O('axis1'), L('t3')[:, L('ids32'), :]); \
// RUN:   s = np.zeros((2, 4, 3)); np.add.at(s, (slice(None), L('ids32')), L('upd').astype(np.float64)); \
// RUN:   ref.check('scatter', O('scatter'), s)" | FileCheck %s

// CHECK: OK embedding
// CHECK: OK axis1
// CHECK: OK scatter

func.func @forward(%table: tensor<5x3xf32> {loom.input = "table"},
                   %t3: tensor<2x4x3xf32> {loom.input = "t3"},
                   %ids: tensor<2x2xi64> {loom.input = "ids"},
                   %ids32: tensor<3xi32> {loom.input = "ids32"},
                   %upd: tensor<2x3x3xf32> {loom.input = "upd"})
    -> (tensor<2x2x3xf32> {loom.output = "embedding"},
        tensor<2x3x3xf32> {loom.output = "axis1"},
        tensor<2x4x3xf32> {loom.output = "scatter"}) {
  %0 = loom.gather %table[%ids] axis = 0 : (tensor<5x3xf32>, tensor<2x2xi64>) -> tensor<2x2x3xf32>
  %1 = loom.gather %t3[%ids32] axis = 1 : (tensor<2x4x3xf32>, tensor<3xi32>) -> tensor<2x3x3xf32>
  %2 = loom.scatter_add %upd[%ids32] axis = 1 : (tensor<2x3x3xf32>, tensor<3xi32>) -> tensor<2x4x3xf32>
  return %0, %1, %2 : tensor<2x2x3xf32>, tensor<2x3x3xf32>, tensor<2x4x3xf32>
}
