// RUN: loom-opt %s --split-input-file --loom-channels-last=always --cse | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-channels-last --cse | FileCheck %s --check-prefix=AUTO

// Tests a block of a CNN's training step: the library convolutions become
// channels-last, the transposes between them cancel through batch norm,
// ReLU, its gradient's mask and select, a product with a per-channel
// broadcast and the reductions, and what is left is a transpose of the
// input and of each NCHW result. (test/Interp/channels-last.test runs this
// function before and after the pass and compares every result.)
// Without `always`, the pass keeps this block NCHW: its transposes (of
// the input and of each NCHW result) would move more than a quarter of
// the activation bytes its convolutions save from reordering.
// AUTO-LABEL: func.func @block(
// AUTO-NOT:     channels_last
// AUTO-NOT:     loom.transpose
// AUTO:         return
// CHECK-LABEL: func.func @block(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<2x3x6x6xf32>
// CHECK:         %[[XR:.*]] = loom.relu %[[X]] : tensor<2x3x6x6xf32>
// CHECK:         %[[XT:.*]] = loom.transpose %[[XR]] perm = [0, 2, 3, 1] : tensor<2x3x6x6xf32> -> tensor<2x6x6x3xf32>
// CHECK:         %[[C:.*]] = loom.conv2d %[[XT]], %{{.*}} {channels_last,{{.*}}loom.library_call{{.*}}} : (tensor<2x6x6x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x6x6x4xf32>
// CHECK:         %[[ROWS:.*]] = loom.reshape %[[C]] : tensor<2x6x6x4xf32> -> tensor<72x4xf32>
// CHECK:         loom.batch_norm_stats %[[ROWS]] : tensor<72x4xf32>
// CHECK:         loom.batch_norm %[[ROWS]], {{.*}} : (tensor<72x4xf32>, tensor<4xf32>) -> tensor<72x4xf32>
// CHECK:         %[[N:.*]] = loom.reshape %{{.*}} : tensor<72x4xf32> -> tensor<2x6x6x4xf32>
// CHECK:         %[[R:.*]] = loom.relu %[[N]] : tensor<2x6x6x4xf32>
// CHECK:         loom.conv2d %[[R]], %{{.*}} {channels_last
// CHECK:         loom.conv2d_input_grad %{{.*}}, %{{.*}} {channels_last
// CHECK:         loom.conv2d_filter_grad %[[R]], %{{.*}} {channels_last
// CHECK:         loom.broadcast_in_dim %{{.*}} dims = [3] : tensor<4xf32> -> tensor<2x6x6x4xf32>
// CHECK:         loom.reduce_sum %{{.*}} dims = [0, 1, 2] : tensor<2x6x6x4xf32> -> tensor<4xf32>
// CHECK:         loom.conv2d_input_grad {{.*}} -> tensor<2x6x6x3xf32>
// CHECK:         loom.conv2d_filter_grad %[[XT]], {{.*}} -> tensor<4x3x3x3xf32>
// CHECK:         loom.reduce_mean %{{.*}} dims = [1, 2] {keep_dims} : tensor<2x6x6x4xf32> -> tensor<2x1x1x4xf32>
// CHECK-NOT:     loom.transpose %{{.*}} perm = [0, 2, 3, 1]
// CHECK-NOT:     loom.transpose {{.*}} -> tensor<2x4x1x1xf32>
// CHECK:         return
func.func @block(%x: tensor<2x3x6x6xf32> {loom.input = "x"},
                 %w1: tensor<4x3x3x3xf32> {loom.input = "w1"},
                 %w2: tensor<4x4x3x3xf32> {loom.input = "w2"},
                 %s: tensor<4xf32> {loom.input = "s"},
                 %b: tensor<4xf32> {loom.input = "b"},
                 %dy: tensor<2x4x6x6xf32> {loom.input = "dy"})
    -> (tensor<2x4x6x6xf32> {loom.output = "y"},
        tensor<2x3x6x6xf32> {loom.output = "dx"},
        tensor<4x3x3x3xf32> {loom.output = "dw1"},
        tensor<4x4x3x3xf32> {loom.output = "dw2"},
        tensor<4xf32> {loom.output = "dsum"},
        tensor<2x4xf32> {loom.output = "pooled"}) {
  %xr = loom.relu %x : tensor<2x3x6x6xf32>
  %c = loom.conv2d %xr, %w1 {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  %m, %v = loom.batch_norm_stats %c : tensor<2x4x6x6xf32> -> tensor<4xf32>, tensor<4xf32>
  %n = loom.batch_norm %c, %s, %b, %m, %v epsilon = 1.0e-05 : (tensor<2x4x6x6xf32>, tensor<4xf32>) -> tensor<2x4x6x6xf32>
  %r = loom.relu %n : tensor<2x4x6x6xf32>
  %y = loom.conv2d %r, %w2 {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  %g = loom.conv2d_input_grad %dy, %w2 {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x4x6x6xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  %dw2 = loom.conv2d_filter_grad %r, %dy {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x4x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<4x4x3x3xf32>
  %zero = loom.constant dense<0.0> : tensor<2x4x6x6xf32>
  %mask = loom.compare gt, %n, %zero : tensor<2x4x6x6xf32> -> tensor<2x4x6x6xi1>
  %gr = loom.select %mask, %g, %zero : tensor<2x4x6x6xi1>, tensor<2x4x6x6xf32>
  %sb = loom.broadcast_in_dim %s dims = [1] : tensor<4xf32> -> tensor<2x4x6x6xf32>
  %gs = loom.mul %gr, %sb : tensor<2x4x6x6xf32>
  %dsum = loom.reduce_sum %gs dims = [0, 2, 3] : tensor<2x4x6x6xf32> -> tensor<4xf32>
  %dx = loom.conv2d_input_grad %gs, %w1 {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x4x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x6x6xf32>
  %dw1 = loom.conv2d_filter_grad %xr, %gs {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<2x3x6x6xf32>, tensor<2x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  %p = loom.reduce_mean %y dims = [2, 3] {keep_dims} : tensor<2x4x6x6xf32> -> tensor<2x4x1x1xf32>
  %flat = loom.reshape %p : tensor<2x4x1x1xf32> -> tensor<2x4xf32>
  return %y, %dx, %dw1, %dw2, %dsum, %flat
      : tensor<2x4x6x6xf32>, tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>,
        tensor<4x4x3x3xf32>, tensor<4xf32>, tensor<2x4xf32>
}

// -----

// Tests what is left alone: a convolution that is not a library call (an
// im2col GEMM or a kernel of its own), a grouped one, one already
// channels-last, and one that reads the function's argument (the model's
// image: a network's stem stays NCHW up to its first pool).
// CHECK-LABEL: func.func @left(
// CHECK-NOT:     loom.transpose
// CHECK:         loom.conv2d %{{.*}}, %{{.*}} {dilations
// CHECK-NOT:     channels_last
// CHECK:         loom.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, groups = 2 : i64, loom.library_call
// CHECK-NOT:     loom.transpose
// CHECK:         loom.conv2d {{.*}}channels_last
// CHECK-NOT:     loom.transpose
// CHECK:         loom.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, loom.library_call, padding
// CHECK-NOT:     loom.transpose
func.func @left(%x: tensor<1x4x5x5xf32>, %w: tensor<4x4x3x3xf32>,
                %wg: tensor<4x2x3x3xf32>, %xl: tensor<1x5x5x4xf32>)
    -> (tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x5x5x4xf32>, tensor<1x4x5x5xf32>) {
  %a = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x5x5xf32>
  %b = loom.conv2d %x, %wg {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64}
      : (tensor<1x4x5x5xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x5x5xf32>
  %c = loom.conv2d %xl, %w {loom.library_call, channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<1x5x5x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x5x5x4xf32>
  %d = loom.conv2d %x, %w {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x5x5xf32>
  return %a, %b, %c, %d : tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x5x5x4xf32>, tensor<1x4x5x5xf32>
}

// -----

// Tests a max pool between convolutions: it reads NCHW, so its input is
// transposed back and its output (read by the next convolution and by the
// residual add) transposed once to NHWC.
// CHECK-LABEL: func.func @pool(
// CHECK:         loom.conv2d {{.*}}channels_last
// CHECK:         %[[B:.*]] = loom.transpose %{{.*}} perm = [0, 3, 1, 2]
// CHECK:         %[[P:.*]] = loom.max_pool2d %[[B]]
// CHECK:         %[[PT:.*]] = loom.transpose %[[P]] perm = [0, 2, 3, 1]
// CHECK:         %[[D:.*]] = loom.conv2d %[[PT]], {{.*}}channels_last
// CHECK:         loom.add %[[D]], %[[PT]] : tensor<1x2x2x4xf32>
// CHECK-NOT:     loom.transpose %{{.*}} perm = [0, 2, 3, 1]
func.func @pool(%x: tensor<1x4x4x4xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<1x4x2x2xf32> {
  %xr = loom.relu %x : tensor<1x4x4x4xf32>
  %c = loom.conv2d %xr, %w {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x4x4xf32>
  %p = loom.max_pool2d %c {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x4x4x4xf32> -> tensor<1x4x2x2xf32>
  %d = loom.conv2d %p, %w {loom.library_call, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
      : (tensor<1x4x2x2xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x2x2xf32>
  %s = loom.add %d, %p : tensor<1x4x2x2xf32>
  return %s : tensor<1x4x2x2xf32>
}
