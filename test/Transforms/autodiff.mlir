// RUN: loom-opt %s --split-input-file --loom-autodiff | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-autodiff=with-inputs=true | FileCheck %s --check-prefix=INPUTS

// Tests that a value used by two ops receives the sum of both cotangents,
// and that @forward itself is left as it was.
// CHECK-LABEL: func.func @forward(
// CHECK-NOT:     loom.cos
// CHECK:         return
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<4xf32> {loom.param = "w"})
// CHECK-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<4xf32> {loom.grad = "w"})
// CHECK:         %[[EXP:.+]] = loom.exp %[[W]]
// CHECK:         %[[LOSS:.+]] = loom.reduce_sum
// CHECK:         %[[ONE:.+]] = loom.constant dense<1.000000e+00> : tensor<f32>
// CHECK:         %[[G:.+]] = loom.broadcast_in_dim %[[ONE]] dims = [] : tensor<f32> -> tensor<4xf32>
// CHECK:         %[[COS:.+]] = loom.cos %[[W]]
// CHECK:         %[[GSIN:.+]] = loom.mul %[[G]], %[[COS]]
// CHECK:         %[[GEXP:.+]] = loom.mul %[[G]], %[[EXP]]
// CHECK:         %[[SUM:.+]] = loom.add %[[GSIN]], %[[GEXP]]
// CHECK:         return %[[LOSS]], %[[SUM]]
// INPUTS-LABEL: func.func @forward_backward(%{{[^:]+}}: tensor<4xf32> {loom.param = "w"})
// INPUTS-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<4xf32> {loom.grad = "w"})
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  %a = loom.exp %w : tensor<4xf32>
  %b = loom.sin %w : tensor<4xf32>
  %c = loom.add %a, %b : tensor<4xf32>
  %l = loom.reduce_sum %c dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that loom.stop_gradient blocks the cotangent: only the direct use of
// %w contributes (no sum), and a parameter seen only through stop_gradient
// gets zeros.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<4xf32> {loom.param = "w"}, %[[V:[^:]+]]: tensor<4xf32> {loom.param = "v"})
// CHECK:         %[[SW:.+]] = loom.stop_gradient %[[W]]
// CHECK:         %[[LOSS:.+]] = loom.reduce_sum
// CHECK:         %[[G:.+]] = loom.broadcast_in_dim
// CHECK:         %[[GW:.+]] = loom.mul %[[G]], %[[SW]]
// CHECK-NOT:     loom.add
// CHECK:         %[[ZERO:.+]] = loom.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK:         return %[[LOSS]], %[[GW]], %[[ZERO]]
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}, %v: tensor<4xf32> {loom.param = "v"}) -> (tensor<f32> {loom.output = "loss"}) {
  %s = loom.stop_gradient %w : tensor<4xf32>
  %t = loom.stop_gradient %v : tensor<4xf32>
  %m = loom.mul %s, %w : tensor<4xf32>
  %n = loom.add %m, %t : tensor<4xf32>
  %l = loom.reduce_sum %n dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that integer paths carry no gradient: the table of a gather gets a
// scatter-add, its indices (computed from a parameter through a cast to i64)
// get nothing, and a parameter that only feeds a comparison gets zeros.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[TABLE:[^:]+]]: tensor<10x4xf32> {loom.param = "table"}, %[[P:[^:]+]]: tensor<3xf32> {loom.param = "p"}, %[[Q:[^:]+]]: tensor<3x4xf32> {loom.param = "q"})
// CHECK:         %[[IDS:.+]] = loom.cast %[[P]] : tensor<3xf32> -> tensor<3xi64>
// CHECK:         %[[COND:.+]] = loom.compare gt, %[[Q]]
// CHECK:         %[[LOSS:.+]] = loom.reduce_sum
// CHECK:         %[[GE:.+]] = loom.select %[[COND]]
// CHECK:         %[[GT:.+]] = loom.scatter_add %[[GE]][%[[IDS]]] axis = 0 : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
// CHECK-NOT:     loom.cast {{.*}} -> tensor<3xf32>
// CHECK:         %[[GP:.+]] = loom.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK:         %[[GQ:.+]] = loom.constant dense<0.000000e+00> : tensor<3x4xf32>
// CHECK:         return %[[LOSS]], %[[GT]], %[[GP]], %[[GQ]]
func.func @forward(%table: tensor<10x4xf32> {loom.param = "table"}, %p: tensor<3xf32> {loom.param = "p"}, %q: tensor<3x4xf32> {loom.param = "q"}) -> (tensor<f32> {loom.output = "loss"}) {
  %ids = loom.cast %p : tensor<3xf32> -> tensor<3xi64>
  %e = loom.gather %table[%ids] axis = 0 : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %zero = loom.constant dense<0.0> : tensor<3x4xf32>
  %c = loom.compare gt, %q, %zero : tensor<3x4xf32> -> tensor<3x4xi1>
  %s = loom.select %c, %e, %zero : tensor<3x4xi1>, tensor<3x4xf32>
  %l = loom.reduce_sum %s dims = [0, 1] : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter the loss does not depend on gets a zero gradient,
// that the loss is the result named "loss", and that the ops of the other
// outputs are dropped. With with-inputs, the float input's gradient follows
// the parameters'.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<2x3xf32> {loom.input = "x"}, %[[W:[^:]+]]: tensor<2x3xf32> {loom.param = "w"}, %[[U:[^:]+]]: tensor<5xf32> {loom.param = "unused"})
// CHECK-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<2x3xf32> {loom.grad = "w"}, tensor<5xf32> {loom.grad = "unused"})
// CHECK-NOT:     loom.exp
// CHECK:         %[[LOSS:.+]] = loom.reduce_mean
// CHECK:         %[[GW:.+]] = loom.mul %{{.+}}, %[[X]]
// CHECK:         %[[GU:.+]] = loom.constant dense<0.000000e+00> : tensor<5xf32>
// CHECK:         return %[[LOSS]], %[[GW]], %[[GU]] : tensor<f32>, tensor<2x3xf32>, tensor<5xf32>
// INPUTS-LABEL: func.func @forward_backward({{.*}}{loom.param = "unused"})
// INPUTS-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<2x3xf32> {loom.grad = "w"}, tensor<5xf32> {loom.grad = "unused"}, tensor<2x3xf32> {loom.grad = "x"})
// INPUTS:         loom.reduce_mean
// INPUTS:         %[[GX:.+]] = loom.mul %{{.+}}, %arg1
// INPUTS:         return %{{.+}}, %{{.+}}, %{{.+}}, %[[GX]]
func.func @forward(%x: tensor<2x3xf32> {loom.input = "x"}, %w: tensor<2x3xf32> {loom.param = "w"}, %unused: tensor<5xf32> {loom.param = "unused"}) -> (tensor<2x3xf32> {loom.output = "logits"}, tensor<f32> {loom.output = "loss"}) {
  %y = loom.mul %x, %w : tensor<2x3xf32>
  %u = loom.exp %unused : tensor<5xf32>
  %l = loom.reduce_mean %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %y, %l : tensor<2x3xf32>, tensor<f32>
}

// -----

// Tests a chain of matmuls: the weight gradients are products with the
// transpose flags set, and no gradient is built for the input %x.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<8x16xf32> {loom.input = "x"}, %[[W1:[^:]+]]: tensor<16x32xf32> {loom.param = "w1"}, %[[W2:[^:]+]]: tensor<10x32xf32> {loom.param = "w2"})
// CHECK:         %[[H:.+]] = loom.matmul %[[X]], %[[W1]]
// CHECK:         %[[A:.+]] = loom.relu %[[H]]
// CHECK:         %[[G:.+]] = loom.broadcast_in_dim {{.*}} -> tensor<8x10xf32>
// CHECK:         %[[GA:.+]] = loom.matmul %[[G]], %[[W2]] : (tensor<8x10xf32>, tensor<10x32xf32>) -> tensor<8x32xf32>
// CHECK:         %[[GW2:.+]] = loom.matmul %[[G]], %[[A]] {transpose_a} : (tensor<8x10xf32>, tensor<8x32xf32>) -> tensor<10x32xf32>
// CHECK:         %[[MASK:.+]] = loom.compare gt, %[[H]]
// CHECK:         %[[GH:.+]] = loom.select %[[MASK]], %[[GA]]
// CHECK:         %[[GW1:.+]] = loom.matmul %[[X]], %[[GH]] {transpose_a} : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-NOT:     loom.matmul
// CHECK:         return %{{.+}}, %[[GW1]], %[[GW2]]
func.func @forward(%x: tensor<8x16xf32> {loom.input = "x"}, %w1: tensor<16x32xf32> {loom.param = "w1"}, %w2: tensor<10x32xf32> {loom.param = "w2"}) -> (tensor<f32> {loom.output = "loss"}) {
  %h = loom.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %a = loom.relu %h : tensor<8x32xf32>
  %y = loom.matmul %a, %w2 {transpose_b} : (tensor<8x32xf32>, tensor<10x32xf32>) -> tensor<8x10xf32>
  %l = loom.reduce_sum %y dims = [0, 1] : tensor<8x10xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the gradient of a broadcast sums over the new dimensions and
// the repeated size-1 dimensions, then reshapes the size-1 dimensions back.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[B:[^:]+]]: tensor<3xf32> {loom.param = "b"}, %[[C:[^:]+]]: tensor<3x1xf32> {loom.param = "c"})
// CHECK:         %[[BB:.+]] = loom.broadcast_in_dim %[[B]] dims = [1]
// CHECK:         %[[CC:.+]] = loom.broadcast_in_dim %[[C]] dims = [1, 2]
// CHECK:         loom.reduce_sum
// CHECK:         %[[GBB:.+]] = loom.mul %{{.+}}, %[[CC]]
// CHECK:         %[[GCC:.+]] = loom.mul %{{.+}}, %[[BB]]
// CHECK:         %[[SC:.+]] = loom.reduce_sum %[[GCC]] dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK:         %[[GC:.+]] = loom.reshape %[[SC]] : tensor<3xf32> -> tensor<3x1xf32>
// CHECK:         %[[GB:.+]] = loom.reduce_sum %[[GBB]] dims = [0, 2] : tensor<2x3x4xf32> -> tensor<3xf32>
// CHECK:         return %{{.+}}, %[[GB]], %[[GC]]
func.func @forward(%b: tensor<3xf32> {loom.param = "b"}, %c: tensor<3x1xf32> {loom.param = "c"}) -> (tensor<f32> {loom.output = "loss"}) {
  %bb = loom.broadcast_in_dim %b dims = [1] : tensor<3xf32> -> tensor<2x3x4xf32>
  %cc = loom.broadcast_in_dim %c dims = [1, 2] : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %m = loom.mul %bb, %cc : tensor<2x3x4xf32>
  %l = loom.reduce_sum %m dims = [0, 1, 2] : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that dropout's gradient is the same dropout (same seed, ratio and
// stream, hence the same mask) applied to the cotangent.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[X:[^:]+]]: tensor<4x8xf32> {loom.param = "x"}, %[[SEED:[^:]+]]: tensor<i64> {loom.rng_seed})
// CHECK:         %[[G:.+]] = loom.broadcast_in_dim
// CHECK:         %[[GX:.+]] = loom.dropout %[[G]], %[[SEED]] ratio = 1.000000e-01 stream = 3
// CHECK:         return %{{.+}}, %[[GX]]
func.func @forward(%x: tensor<4x8xf32> {loom.param = "x"}, %seed: tensor<i64> {loom.rng_seed}) -> (tensor<f32> {loom.output = "loss"}) {
  %d = loom.dropout %x, %seed ratio = 1.000000e-01 stream = 3 : tensor<4x8xf32>, tensor<i64>
  %l = loom.reduce_sum %d dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that cross_entropy's gradient is softmax minus the one-hot labels,
// with the one-hot made after the softmax (so that loom-fuse puts it in the
// softmax's kernel), and that the integer labels get no gradient even with
// with-inputs.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[LOGITS:[^:]+]]: tensor<4x10xf32> {loom.param = "logits"}, %[[LABELS:[^:]+]]: tensor<4xi64> {loom.input = "labels"})
// CHECK:         %[[P:.+]] = loom.softmax %[[LOGITS]] axis = 1
// CHECK:         %[[CLASSES:.+]] = loom.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]> : tensor<10xi64>
// CHECK:         %[[LB:.+]] = loom.broadcast_in_dim %[[LABELS]] dims = [0]
// CHECK:         %[[CB:.+]] = loom.broadcast_in_dim %[[CLASSES]] dims = [1]
// CHECK:         %[[HIT:.+]] = loom.compare eq, %[[LB]], %[[CB]]
// CHECK:         %[[ONEHOT:.+]] = loom.cast %[[HIT]] : tensor<4x10xi1> -> tensor<4x10xf32>
// CHECK:         %[[D:.+]] = loom.sub %[[P]], %[[ONEHOT]]
// CHECK:         %[[G:.+]] = loom.mul %[[D]]
// CHECK:         return %{{.+}}, %[[G]]
// INPUTS-LABEL: func.func @forward_backward({{.*}}{loom.input = "labels"})
// INPUTS-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<4x10xf32> {loom.grad = "logits"})
// INPUTS-NOT:     loom.grad = "labels"
func.func @forward(%logits: tensor<4x10xf32> {loom.param = "logits"}, %labels: tensor<4xi64> {loom.input = "labels"}) -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.cross_entropy %logits, %labels reduction = sum : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that a parameter used both directly and through a transpose gets
// the transposed cotangent of the one use added to the cotangent of the
// other, in the parameter's type.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<2x2xf32> {loom.param = "w"})
// CHECK:         %[[T:.+]] = loom.transpose %[[W]] perm = [1, 0]
// CHECK:         %[[G:.+]] = loom.broadcast_in_dim
// CHECK:         %[[GW:.+]] = loom.mul %[[G]], %[[T]]
// CHECK:         %[[GT:.+]] = loom.mul %[[G]], %[[W]]
// CHECK:         %[[GTT:.+]] = loom.transpose %[[GT]] perm = [1, 0]
// CHECK:         %[[SUM:.+]] = loom.add %[[GW]], %[[GTT]] : tensor<2x2xf32>
// CHECK:         return %{{.+}}, %[[SUM]] : tensor<f32>, tensor<2x2xf32>
func.func @forward(%w: tensor<2x2xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  %t = loom.transpose %w perm = [1, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
  %m = loom.mul %w, %t : tensor<2x2xf32>
  %l = loom.reduce_sum %m dims = [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tests that the gradient of x^3, with the exponent a broadcast scalar
// constant (as the importers write GELU's Pow(x, 3)), raises x to a
// constant 2 rather than computing 3 - 1 at every step (the lowering then
// makes x^2 a multiplication).
// CHECK-LABEL: func.func @forward_backward(
// CHECK:         %[[TWO:.+]] = loom.constant dense<2.000000e+00> : tensor<4xf32>
// CHECK:         loom.pow %{{.+}}, %[[TWO]]
func.func @forward(%w: tensor<4xf32> {loom.param = "w"}) -> (tensor<f32> {loom.output = "loss"}) {
  %c = loom.constant dense<3.0> : tensor<f32>
  %e = loom.broadcast_in_dim %c dims = [] : tensor<f32> -> tensor<4xf32>
  %p = loom.pow %w, %e : tensor<4xf32>
  %l = loom.reduce_sum %p dims = [0] : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// The gradient of a cross-entropy of bf16 logits (an f32 loss, C3): the
// label count and the per-label weight stay f32, (softmax - onehot) times
// the weight is computed in f32 (the softmax of the widened logits, never
// rounded to bf16), and only dlogits is rounded to bf16.
// CHECK-LABEL: func.func @forward_backward(
// CHECK-SAME:    %[[Z:[^:]+]]: tensor<4x3xbf16>
// CHECK-SAME:    -> (tensor<f32> {loom.output = "loss"}, tensor<4x3xbf16> {loom.grad = "z"})
// CHECK:         %[[COUNT:.+]] = loom.reduce_sum %{{.+}} dims = [0] : tensor<4xf32> -> tensor<f32>
// CHECK:         %[[ZF:.+]] = loom.cast %[[Z]] : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK:         %[[PF:.+]] = loom.softmax %[[ZF]] axis = 1 : tensor<4x3xf32>
// CHECK:         %[[D:.+]] = loom.sub %[[PF]], %{{.+}} : tensor<4x3xf32>
// CHECK:         %[[G:.+]] = loom.mul %[[D]], %{{.+}} : tensor<4x3xf32>
// CHECK:         %[[GL:.+]] = loom.cast %[[G]] : tensor<4x3xf32> -> tensor<4x3xbf16>
// CHECK:         return %{{.+}}, %[[GL]]
func.func @forward(%z: tensor<4x3xbf16> {loom.param = "z"}, %y: tensor<4xi64> {loom.input = "labels"}) -> (tensor<f32> {loom.output = "loss"}) {
  %l = loom.cross_entropy %z, %y reduction = mean {ignore_index = -100 : i64} : (tensor<4x3xbf16>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
