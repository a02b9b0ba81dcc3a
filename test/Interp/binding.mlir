// Tests how loom-interp binds arguments and names results: parameters and
// optimizer state from the module's loom.params_file (relative to the .mlir
// file) or from --params, inputs by name or by argument position, float
// inputs of another float dtype converted, results named by loom.output or
// loom.grad (sanitized) or result<i>, func.call, and --f64.

// RUN: rm -rf %t && mkdir -p %t/model %t/other
// RUN: cp %s %t/model/m.mlir
// RUN: %python -c "import sys; sys.path.insert(0, '%S/Inputs'); import numpy as np, ref; \
// RUN:   ref.write_safetensors('%t/model/m.safetensors', {'fc.w': np.arange(6, dtype=np.float32).reshape(3, 2), 'fc.w.m': np.full((3, 2), 0.5, np.float32)}); \
// RUN:   ref.write_safetensors('%t/other/p.safetensors', {'fc.w': np.ones((3, 2), np.float64), 'fc.w.m': np.zeros((3, 2), np.float32)}); \
// RUN:   np.save('%t/x.npy', np.array([[1.0, 1e-10, 2.0]], dtype=np.float64))"

// RUN: loom-interp %t/model/m.mlir --input x=%t/x.npy --output-dir %t/out
// RUN: %python -c "import numpy as np; O = lambda n: np.load('%t/out/' + n + '.npy'); \
// RUN:   print('y', O('y').dtype, O('y').tolist()); print('grad', O('fc.w.grad').tolist()); \
// RUN:   print('sanitized', O('a_b_c').tolist()); print('unnamed', O('result3').tolist())" | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: y float32 [
// DEFAULT-SAME: [8.0, 11.0]]
// DEFAULT: grad [
// DEFAULT-SAME: [0.5, 0.5], [0.5, 0.5], [0.5, 0.5]]
// DEFAULT: sanitized [
// DEFAULT-SAME: [8.0, 11.0]]
// DEFAULT: unnamed [
// DEFAULT-SAME: [16.0, 22.0]]

// RUN: loom-interp %t/model/m.mlir --input 0=%t/x.npy --params %t/other/p.safetensors --output-dir %t/out2
// RUN: %python -c "import numpy as np; print('override', np.load('%t/out2/y.npy').tolist())" | FileCheck %s --check-prefix=PARAMS
// PARAMS: override {{\[\[}}3.0, 3.0]]

// With --f64 the 1e-10 survives the f32 argument and results are float64.
// RUN: loom-interp %t/model/m.mlir --input x=%t/x.npy --f64 --output-dir %t/out3
// RUN: %python -c "import numpy as np; y = np.load('%t/out3/y.npy'); print('f64', y.dtype, repr(y[0, 0]))" | FileCheck %s --check-prefix=F64
// F64: f64 float64 8.0000000002

module attributes {loom.params_file = "m.safetensors"} {
  func.func @forward(%x: tensor<1x3xf32> {loom.input = "x"},
                     %w: tensor<3x2xf32> {loom.param = "fc.w"},
                     %m: tensor<3x2xf32> {loom.opt_state = "fc.w.m"})
      -> (tensor<1x2xf32> {loom.output = "y"},
          tensor<3x2xf32> {loom.grad = "fc.w.grad"},
          tensor<1x2xf32> {loom.output = "a/b c"},
          tensor<1x2xf32>) {
    %y = func.call @linear(%x, %w) : (tensor<1x3xf32>, tensor<3x2xf32>) -> tensor<1x2xf32>
    %y2 = loom.add %y, %y : tensor<1x2xf32>
    return %y, %m, %y, %y2 : tensor<1x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
  }
  func.func private @linear(%x: tensor<1x3xf32>, %w: tensor<3x2xf32>) -> tensor<1x2xf32> {
    %y = loom.matmul %x, %w : (tensor<1x3xf32>, tensor<3x2xf32>) -> tensor<1x2xf32>
    return %y : tensor<1x2xf32>
  }
}
