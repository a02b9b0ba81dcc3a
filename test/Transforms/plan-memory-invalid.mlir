// RUN: loom-opt %s --loom-plan-memory --verify-diagnostics

// Tests that the planner refuses a function that was not fused.
func.func @unfused(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @below {{loom-plan-memory: 'loom.exp' is not a step of a fused function (run loom-fuse first)}}
  %e = loom.exp %a : tensor<2xf32>
  return %e : tensor<2xf32>
}
