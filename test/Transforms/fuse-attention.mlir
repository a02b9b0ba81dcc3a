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
// masked for query 0) keeps the chain, and the report says where it
// differs. (A constant term the same for every query, such as key 2
// masked for all of them, is the op's bias instead: see @bloom.)
// CHECK: loom.attention_report = [{detail = "its mask: the mask is neither causal nor a causal sliding window (position [0, 0, 0, 2] differs)", node = "odd", outcome = "kept"}]
// CHECK-LABEL: func.func @odd_mask
// CHECK-NOT:     loom.attention
// CHECK:         loom.softmax
func.func @odd_mask(%q: tensor<1x1x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32> {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x4xf32>
  %m = loom.constant dense<[[[[0.0, 0.0, -3.40282347E+38, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<1x1x4x4xf32>
  %x = loom.add %s, %m : tensor<1x1x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x1x4x4xf32> loc("odd")
  %o = loom.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %o : tensor<1x1x4x2xf32>
}

// -----

// Tests dropout on the probabilities (transformers' eager attention in
// training mode): the fused op takes its seed, ratio and stream and draws
// the same mask; the dropout is gone.
// CHECK: loom.attention_report = [{detail = "causal, dropout 0.10", node = "dropped", outcome = "fused"}]
// CHECK-LABEL: func.func @dropout
// CHECK-SAME:    (%[[Q:.+]]: tensor<1x2x4x2xf32>, %[[K:.+]]: tensor<1x2x4x2xf32>, %[[V:.+]]: tensor<1x2x4x2xf32>, %[[S:.+]]: tensor<i64>)
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] seed %[[S]] {causal, dropout = 1.000000e-01 : f32, scale = 1.000000e+00 : f64, stream = 5 : i64}
// CHECK-NOT:     loom.dropout
func.func @dropout(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>, %seed: tensor<i64>) -> tensor<1x2x4x2xf32> {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %tri = loom.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %keep = loom.broadcast_in_dim %tri dims = [2, 3] : tensor<4x4xi1> -> tensor<1x2x4x4xi1>
  %low = loom.constant dense<-3.40282347E+38> : tensor<1x2x4x4xf32>
  %x = loom.select %keep, %s, %low : tensor<1x2x4x4xi1>, tensor<1x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x2x4x4xf32> loc("dropped")
  %d = loom.dropout %p, %seed ratio = 0.1 stream = 5 : tensor<1x2x4x4xf32>, tensor<i64>
  %o = loom.matmul %d, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests K^T as the TorchScript exporter writes it: one transpose from
// [B, S, H, D] straight to [B, H, D, S] (perm [0, 2, 3, 1]). It is split
// into the transpose to [B, H, S, D] and the swap, and the chain fuses.
// CHECK: loom.attention_report = [{detail = "no mask", node = "ts", outcome = "fused"}]
// CHECK-LABEL: func.func @torchscript_keys
// CHECK-SAME:    (%[[Q:.+]]: tensor<1x2x4x2xf32>, %[[KR:.+]]: tensor<1x4x2x2xf32>, %[[V:.+]]: tensor<1x2x4x2xf32>)
// CHECK:         %[[K:.+]] = loom.transpose %[[KR]] perm = [0, 2, 1, 3]
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f64}
func.func @torchscript_keys(%q: tensor<1x2x4x2xf32>, %kr: tensor<1x4x2x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %kt = loom.transpose %kr perm = [0, 2, 3, 1] : tensor<1x4x2x2xf32> -> tensor<1x2x2x4xf32>
  %s = loom.matmul %q, %kt : (tensor<1x2x4x2xf32>, tensor<1x2x2x4xf32>) -> tensor<1x2x4x4xf32>
  %c = loom.constant dense<0.5> : tensor<1x2x4x4xf32>
  %x = loom.mul %s, %c : tensor<1x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x2x4x4xf32> loc("ts")
  %o = loom.matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// -----

// Tests that a bias from an argument (a learned relative bias) becomes
// the op's bias operand, and that probabilities read by something else
// than the product with V keep the chain.
// CHECK: loom.attention_report = [{detail = "bias from the inputs", node = "biased", outcome = "fused"}, {detail = "its probabilities have other readers", node = "returned", outcome = "kept"}]
// CHECK-LABEL: func.func @biased
// CHECK-SAME:    (%[[Q:.+]]: tensor<1x1x4x2xf32>, %[[K:.+]]: tensor<1x1x4x2xf32>, %[[V:.+]]: tensor<1x1x4x2xf32>, %[[B:.+]]: tensor<1x1x4x4xf32>)
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] bias %[[B]] {scale = 1.000000e+00 : f64}
// CHECK:         loom.softmax
func.func @biased(%q: tensor<1x1x4x2xf32>, %k: tensor<1x1x4x2xf32>, %v: tensor<1x1x4x2xf32>, %b: tensor<1x1x4x4xf32>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x4xf32>) {
  %s = loom.matmul %q, %k {transpose_b} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x4xf32>
  %x = loom.add %s, %b : tensor<1x1x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x1x4x4xf32> loc("biased")
  %o = loom.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  %p2 = loom.softmax %s axis = 3 : tensor<1x1x4x4xf32> loc("returned")
  %o2 = loom.matmul %p2, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x4x2xf32>
  return %o, %o2, %p2 : tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x4xf32>
}

// -----

// Tests the padding mask transformers builds from an attention_mask input
// for a causal model (Qwen2, Llama, GPT-2 as PyTorch exports them): the
// constant causal mask and the run-time key mask [B, 1, 1, S] joined by
// And (a select with false), turned additive (0 / lowest) and broadcast
// over heads and queries. The causal part becomes the attribute and the
// key mask the op's mask operand at its own shape: nothing [B, H, T, S]
// is made.
// CHECK: loom.attention_report = [{detail = "causal, mask from the inputs", node = "padded", outcome = "fused"}]
// CHECK-LABEL: func.func @padded
// CHECK-SAME:    (%[[Q:.+]]: tensor<2x2x4x2xf32>, %[[K:.+]]: tensor<2x2x4x2xf32>, %[[V:.+]]: tensor<2x2x4x2xf32>, %[[KEEP:.+]]: tensor<2x1x1x4xi1>)
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] mask %[[KEEP]] {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT:     loom.softmax
func.func @padded(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<2x2x4x2xf32>, %keep: tensor<2x1x1x4xi1>) -> tensor<2x2x4x2xf32> {
  %tril = loom.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %causal = loom.broadcast_in_dim %tril dims = [0, 1, 2, 3] : tensor<1x1x4x4xi1> -> tensor<2x1x4x4xi1>
  %pad = loom.broadcast_in_dim %keep dims = [0, 1, 2, 3] : tensor<2x1x1x4xi1> -> tensor<2x1x4x4xi1>
  %false = loom.constant dense<false> : tensor<2x1x4x4xi1>
  %both = loom.select %causal, %pad, %false : tensor<2x1x4x4xi1>, tensor<2x1x4x4xi1>
  %zero = loom.constant dense<0.0> : tensor<2x1x4x4xf32>
  %low = loom.constant dense<-3.40282347E+38> : tensor<2x1x4x4xf32>
  %add1 = loom.select %both, %zero, %low : tensor<2x1x4x4xi1>, tensor<2x1x4x4xf32>
  %add = loom.broadcast_in_dim %add1 dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %s = loom.matmul %q, %k {transpose_b} : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x4xf32>
  %half = loom.constant dense<0.5> : tensor<2x2x4x4xf32>
  %ss = loom.mul %s, %half : tensor<2x2x4x4xf32>
  %x = loom.add %ss, %add : tensor<2x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<2x2x4x4xf32> loc("padded")
  %o = loom.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  return %o : tensor<2x2x4x2xf32>
}

// -----

// Tests a key mask [B, S] from an argument selected in inverted (masked
// where true, as `masked_fill(pad, lowest)` writes) through a broadcast
// that inserts the head and query dimensions: the operand is the mask
// reshaped to [B, 1, 1, S] and negated; no causal attribute.
// CHECK: loom.attention_report = [{detail = "mask from the inputs", node = "filled", outcome = "fused"}]
// CHECK-LABEL: func.func @filled
// CHECK-SAME:    %[[PAD:[^:]+]]: tensor<2x4xi1>)
// CHECK:         %[[R:.+]] = loom.reshape %[[PAD]] : tensor<2x4xi1> -> tensor<2x1x1x4xi1>
// CHECK:         %[[NOT:.+]] = loom.select %[[R]], %{{.+}}, %{{.+}} : tensor<2x1x1x4xi1>, tensor<2x1x1x4xi1>
// CHECK:         loom.attention %{{.+}}, %{{.+}}, %{{.+}} mask %[[NOT]] {scale = 1.000000e+00 : f64}
func.func @filled(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<2x2x4x2xf32>, %pad: tensor<2x4xi1>) -> tensor<2x2x4x2xf32> {
  %m = loom.broadcast_in_dim %pad dims = [0, 3] : tensor<2x4xi1> -> tensor<2x2x4x4xi1>
  %s = loom.matmul %q, %k {transpose_b} : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x4xf32>
  %low = loom.constant dense<-3.40282347E+38> : tensor<2x2x4x4xf32>
  %x = loom.select %m, %low, %s : tensor<2x2x4x4xi1>, tensor<2x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<2x2x4x4xf32> loc("filled")
  %o = loom.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  return %o : tensor<2x2x4x2xf32>
}

// -----

// Tests the document mask of packed sequences as a model writes it from
// document ids `docs : [B, T]` (`docs[:, None, :, None] == docs[:, None,
// None, :]`, and-ed with the causal mask): the ids become the op's
// segments operand, the causal part its attribute, and no [B, 1, T, T]
// mask is left.
// CHECK: loom.attention_report = [{detail = "causal, document ids from the inputs", node = "packed", outcome = "fused"}]
// CHECK-LABEL: func.func @packed
// CHECK-SAME:    %[[DOCS:[^:]+]]: tensor<2x4xi64>)
// CHECK:         loom.attention %{{.+}}, %{{.+}}, %{{.+}} segments %[[DOCS]] {causal, scale = 1.000000e+00 : f64}
// CHECK-NOT:     loom.compare
func.func @packed(%q: tensor<2x2x4x2xf32>, %k: tensor<2x2x4x2xf32>, %v: tensor<2x2x4x2xf32>, %docs: tensor<2x4xi64>) -> tensor<2x2x4x2xf32> {
  %r1 = loom.reshape %docs : tensor<2x4xi64> -> tensor<2x1x4xi64>
  %rows = loom.reshape %r1 : tensor<2x1x4xi64> -> tensor<2x1x4x1xi64>
  %r2 = loom.reshape %docs : tensor<2x4xi64> -> tensor<2x1x4xi64>
  %cols = loom.reshape %r2 : tensor<2x1x4xi64> -> tensor<2x1x1x4xi64>
  %rb = loom.broadcast_in_dim %rows dims = [0, 1, 2, 3] : tensor<2x1x4x1xi64> -> tensor<2x1x4x4xi64>
  %cb = loom.broadcast_in_dim %cols dims = [0, 1, 2, 3] : tensor<2x1x1x4xi64> -> tensor<2x1x4x4xi64>
  %same = loom.compare eq, %rb, %cb : tensor<2x1x4x4xi64> -> tensor<2x1x4x4xi1>
  %tril = loom.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %causal = loom.broadcast_in_dim %tril dims = [2, 3] : tensor<4x4xi1> -> tensor<2x1x4x4xi1>
  %false = loom.constant dense<false> : tensor<2x1x4x4xi1>
  %keep = loom.select %same, %causal, %false : tensor<2x1x4x4xi1>, tensor<2x1x4x4xi1>
  %zero = loom.constant dense<0.0> : tensor<2x1x4x4xf32>
  %low = loom.constant dense<0xFF800000> : tensor<2x1x4x4xf32>
  %add1 = loom.select %keep, %zero, %low : tensor<2x1x4x4xi1>, tensor<2x1x4x4xf32>
  %add = loom.broadcast_in_dim %add1 dims = [0, 1, 2, 3] : tensor<2x1x4x4xf32> -> tensor<2x2x4x4xf32>
  %s = loom.matmul %q, %k {transpose_b} : (tensor<2x2x4x2xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x4xf32>
  %x = loom.add %s, %add : tensor<2x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<2x2x4x4xf32> loc("packed")
  %o = loom.matmul %p, %v : (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>) -> tensor<2x2x4x2xf32>
  return %o : tensor<2x2x4x2xf32>
}

// -----

// Tests BLOOM's form: the scores computed with batch and heads merged,
// [B*H, T, S] (baddbmm: a scaled product plus ALiBi's bias, a slope per head
// times the key position, [B*H, 1, S]), viewed as [B, H, T, S] for the
// causal mask and the softmax, and the probabilities viewed back for the
// product with the merged values. The chain is rebuilt on [B, H, ...]
// (loom-fuse-attention's lift) and fused; the bias, the same for every
// query row and computed from constants, becomes the op's bias operand at
// [1, 2, 1, 4] (no T x S tensor), the causal mask the attribute.
// CHECK: loom.attention_report = [{detail = "causal, bias per key from constants (ALiBi)", node = "bloom", outcome = "fused"}]
// CHECK-LABEL: func.func @bloom
// CHECK-SAME:    (%[[Q:[^:]+]]: tensor<1x2x4x2xf32>, %[[K:[^:]+]]: tensor<1x2x4x2xf32>, %[[V:[^:]+]]: tensor<1x2x4x2xf32>)
// CHECK:         %[[A:.+]] = loom.reshape %{{.+}} : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] bias %[[A]] {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT:     loom.softmax
// CHECK-NOT:     loom.matmul
// UNFUSED: loom.attention_report = [{detail = "--attention=unfused", node = "bloom", outcome = "kept"}]
func.func @bloom(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %q3 = loom.reshape %q : tensor<1x2x4x2xf32> -> tensor<2x4x2xf32>
  %k3 = loom.reshape %k : tensor<1x2x4x2xf32> -> tensor<2x4x2xf32>
  %kt = loom.transpose %k3 perm = [0, 2, 1] : tensor<2x4x2xf32> -> tensor<2x2x4xf32>
  %v3 = loom.reshape %v : tensor<1x2x4x2xf32> -> tensor<2x4x2xf32>
  %s = loom.matmul %q3, %kt : (tensor<2x4x2xf32>, tensor<2x2x4xf32>) -> tensor<2x4x4xf32>
  %c = loom.constant dense<0.5> : tensor<f32>
  %cb = loom.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<2x4x4xf32>
  %ss = loom.mul %s, %cb : tensor<2x4x4xf32>
  %alibi = loom.constant dense<[[[0.0, 0.5, 1.0, 1.5]], [[0.0, 0.25, 0.5, 0.75]]]> : tensor<2x1x4xf32>
  %ab = loom.broadcast_in_dim %alibi dims = [0, 1, 2] : tensor<2x1x4xf32> -> tensor<2x4x4xf32>
  %sa = loom.add %ss, %ab : tensor<2x4x4xf32>
  %s4 = loom.reshape %sa : tensor<2x4x4xf32> -> tensor<1x2x4x4xf32>
  %pos = loom.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
  %col = loom.broadcast_in_dim %pos dims = [3] : tensor<4xi64> -> tensor<1x2x4x4xi64>
  %row = loom.broadcast_in_dim %pos dims = [2] : tensor<4xi64> -> tensor<1x2x4x4xi64>
  %causal = loom.compare le, %col, %row : tensor<1x2x4x4xi64> -> tensor<1x2x4x4xi1>
  %low = loom.constant dense<0xFF800000> : tensor<1x2x4x4xf32>
  %x = loom.select %causal, %s4, %low : tensor<1x2x4x4xi1>, tensor<1x2x4x4xf32>
  %p = loom.softmax %x axis = 3 : tensor<1x2x4x4xf32> loc("bloom")
  %p3 = loom.reshape %p : tensor<1x2x4x4xf32> -> tensor<2x4x4xf32>
  %o3 = loom.matmul %p3, %v3 : (tensor<2x4x4xf32>, tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
  %o = loom.reshape %o3 : tensor<2x4x2xf32> -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}
