// RUN: loom-opt %s --split-input-file --loom-fuse --verify-diagnostics

// Tests that calls must be inlined before fusion.
func.func private @callee(%x: tensor<2xf32>) -> tensor<2xf32>
func.func @caller(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @below {{loom-fuse: cannot make a kernel of 'func.call' (inline calls first; only loom ops become kernels)}}
  %y = func.call @callee(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}
