// Tests that loom-opt loads a user's pass plugin and that the plugin sees
// loom ops through Loom's interfaces.
// RUN: loom-opt %s --load-pass-plugin=%loom_lib_dir/LoomExamplePlugin.so --pass-pipeline="builtin.module(example-count-loom-ops)" -o /dev/null 2>&1 | FileCheck %s

// matmul 2*K*M*N = 2*16*4*32 = 4096, relu and tanh 128 each.
// CHECK: remark: 3 loom ops, 1 contractions, 4352 FLOPs
func.func @forward(%x: tensor<4x16xf32>, %w: tensor<16x32xf32> {loom.param = "w"}) -> tensor<4x32xf32> {
  %y = loom.matmul %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %r = loom.relu %y : tensor<4x32xf32>
  %t = loom.tanh %r : tensor<4x32xf32>
  return %t : tensor<4x32xf32>
}
