// RUN: loom-opt %s --split-input-file --loom-fuse-attention | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse-attention=mode=unfused | FileCheck %s --check-prefix=UNFUSED

// Tests the chain PyTorch's exporter writes for Qwen2 and Llama: q and k
// each scaled by a fourth root, k's heads repeated for grouped-query
// attention and transposed between reshapes, an additive causal mask
// (0 / float32's lowest) computed from positions, and the NaN guard after
// the softmax. It becomes one loom.attention, causal, with the product of
// the scales; the mask, the repeat and the guard are gone.
// CHECK: loom.attention_report = [{detail = "causal", node = "sm", outcome = "fused"}]
// CHECK-LABEL: func.func @qwen2
// CHECK-SAME:    (%[[Q:.+]]: tensor<1x2x4x2xf32>, %[[K:.+]]: tensor<1x1x4x2xf32>, %[[V:.+]]: tensor<1x1x4x2xf32>)
// CHECK:         %[[O:.+]], %{{.+}} = loom.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 2.500000e-01 : f64}
// CHECK-NOT:     loom.softmax
// CHECK-NOT:     loom.compare
// CHECK:         return %[[O]]
// UNFUSED: loom.attention_report = [{detail = "--attention=unfused", node = "sm", outcome = "kept"}]
// UNFUSED: loom.softmax
func.func @qwen2(%q: tensor<1x2x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %half = loom.constant dense<0.5> : tensor<f32>
  %hq = loom.broadcast_in_dim %half dims = [] : tensor<f32> -> tensor<1x2x4x2xf32>
  %qs = loom.mul %q, %hq : tensor<1x2x4x2xf32>
  %k5 = loom.reshape %k : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
  %kb = loom.broadcast_in_dim %k5 dims = [0, 1, 2, 3, 4] : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
  %kr = loom.reshape %kb : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
  %k3 = loom.reshape %kr : tensor<1x2x4x2xf32> -> tensor<2x4x2xf32>
  %kt3 = loom.transpose %k3 perm = [0, 2, 1] : tensor<2x4x2xf32> -> tensor<2x2x4xf32>
  %kt = loom.reshape %kt3 : tensor<2x2x4xf32> -> tensor<1x2x2x4xf32>
  %hk = loom.broadcast_in_dim %half dims = [] : tensor<f32> -> tensor<1x2x2x4xf32>
  %kts = loom.mul %kt, %hk : tensor<1x2x2x4xf32>
  %s = loom.matmul %qs, %kts : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %pos = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %col = loom.broadcast_in_dim %pos dims = [3] : tensor<4xi64> -> tensor<1x1x4x4xi64>
  %row = loom.broadcast_in_dim %pos dims = [2] : tensor<4xi64> -> tensor<1x1x4x4xi64>
  %keep = loom.compare le, %col, %row : tensor<1x1x4x4xi64> -> tensor<1x1x4x4xi1>
  %zero = loom.constant dense<0.0> : tensor<1x1x4x4xf32>
  %low = loom.constant dense<-3.40282347E+38> : tensor<1x1x4x4xf32>
  %mask = loom.select %keep, %zero, %low : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %maskb = loom.broadcast_in_dim %mask dims = [0, 1, 2, 3] : tensor<1x1x4x4xf32> -> tensor<1x2x4x4xf32>
  %x = loom.add %s, %maskb : tensor<1x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x2x4x4xf32> loc("sm")
  %nan = loom.compare ne, %p, %p : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xi1>
  %z = loom.constant dense<0.0> : tensor<1x2x4x4xf32>
  %pg = loom.select %nan, %z, %p : tensor<1x2x4x4xi1>, tensor<1x2x4x4xf32>
  %v5 = loom.reshape %v : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
  %vb = loom.broadcast_in_dim %v5 dims = [0, 1, 2, 3, 4] : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
  %vr = loom.reshape %vb : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
  %o = loom.matmul %pg, %vr : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests a sliding window as Mistral's exporters write it: select(keep,
// scores, lowest) with keep = (j <= i) and (i - j < 2), the scores divided
// by a constant and k transposed by the matmul's flag.
// CHECK: loom.attention_report = [{detail = "causal, window 2", node = "sw", outcome = "fused"}]
// CHECK-LABEL: func.func @window
// CHECK:         loom.attention %{{.+}}, %{{.+}}, %{{.+}} {causal, scale = 5.000000e-01 : f64, window = 2 : i64}
func.func @window(%q: tensor<1x1x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32> {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x4xf32>
  %two = loom.constant dense<2.0> : tensor<1x1x4x4xf32>
  %sd = loom.div %s, %two : tensor<1x1x4x4xf32>
  %pos = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %col = loom.broadcast_in_dim %pos dims = [3] : tensor<4xi64> -> tensor<1x1x4x4xi64>
  %row = loom.broadcast_in_dim %pos dims = [2] : tensor<4xi64> -> tensor<1x1x4x4xi64>
  %causal = loom.compare le, %col, %row : tensor<1x1x4x4xi64> -> tensor<1x1x4x4xi1>
  %diff = loom.sub %row, %col : tensor<1x1x4x4xi64>
  %w = loom.constant dense<2> : tensor<1x1x4x4xi64>
  %near = loom.compare lt, %diff, %w : tensor<1x1x4x4xi64> -> tensor<1x1x4x4xi1>
  %false = loom.constant dense<false> : tensor<1x1x4x4xi1>
  %keep = loom.select %causal, %near, %false : tensor<1x1x4x4xi1>, tensor<1x1x4x4xi1>
  %low = loom.constant dense<0xFF800000> : tensor<1x1x4x4xf32>
  %x = loom.select %keep, %sd, %low : tensor<1x1x4x4xi1>, tensor<1x1x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x1x4x4xf32> loc("sw")
  %o = loom.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %o : tensor<1x1x4x2xf32>
}

// -----

// Tests that a mask that is neither causal nor a window (here: key 2
// masked for every query) keeps the chain, and the report says where it
// differs.
// CHECK: loom.attention_report = [{detail = "its mask: the mask is neither causal nor a causal sliding window (position [0, 0, 0, 2] differs)", node = "odd", outcome = "kept"}]
// CHECK-LABEL: func.func @odd_mask
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
func.func @odd_mask(%q: tensor<1x1x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32> {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x4xf32>
  %m = loom.constant dense<[[[[0.0, 0.0, -3.40282347E+38, 0.0]]]]> : tensor<1x1x1x4xf32>
  %mb = loom.broadcast_in_dim %m dims = [0, 1, 2, 3] : tensor<1x1x1x4xf32> -> tensor<1x1x4x4xf32>
  %x = loom.add %s, %mb : tensor<1x1x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x1x4x4xf32> loc("odd")
  %o = loom.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %o : tensor<1x1x4x2xf32>
}

// -----

// Tests that a bias from an argument (a padding mask, a learned relative
// bias) keeps the chain, and so do probabilities read by something else
// than the product with V.
// CHECK: loom.attention_report = [{detail = "its mask: it depends on the function's arguments (a mask computed from the inputs)", node = "biased", outcome = "kept"}, {detail = "its probabilities have other readers", node = "returned", outcome = "kept"}]
// CHECK-LABEL: func.func @kept
// CHECK-NOT:     loom.attention
func.func @kept(%q: tensor<1x1x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>, %b: tensor<1x1x4x4xf32>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4x4xf32>) {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x4xf32>
  %x = loom.add %s, %b : tensor<1x1x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x1x4x4xf32> loc("biased")
  %o = loom.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  %p2 = loom.softmax %s axis = 3 : tensor<1x1x4x4xf32> loc("returned")
  %o2 = loom.matmul %p2, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %o2, %p2 : tensor<1x1x4x2xf32>, tensor<1x1x4x4xf32>
}
