// RUN: loom-opt %s --verify-diagnostics --loom-attention-kernels="max-head-dim=8"

// Tests that a head dimension over the limit is refused, naming the op.
func.func @wide(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x4xf32>) -> tensor<2x4x8x4xf32> {
  // expected-error @+1 {{a generated attention kernel takes head dimensions up to 8 (each thread keeps a row of them); this one has 16 (queries, keys) and 4 (values): keep the chain unfused with --attention=unfused}}
  %o, %lse = loom.attention %q, %k, %v {scale = 0.25 : f64, causal} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x4xf32>) -> (tensor<2x4x8x4xf32>, tensor<2x4x8xf32>)
  return %o : tensor<2x4x8x4xf32>
}
