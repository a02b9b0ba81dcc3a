// Gradient-check cases for test/unit/GradCheckTest.cpp.
//
// One function `@case_<op>` (variants `@case_<op>__<variant>`) per
// differentiable loom op, in f64, with `loom.param` arguments and a scalar
// result (usually reduce_sum(op(...) * weights) with random `weights`).
// GradCheckTest runs loom-autodiff on each case and compares every gradient
// with central differences through the reference interpreter. Arguments get
// random values from a fixed seed: uniform in `gradcheck.range` (default
// [-1, 1]); with `gradcheck.signed`, a magnitude in the range and a random
// sign (to stay away from the kinks of relu and abs). Integer operands
// (indices, labels, seeds) are constants inside the cases.
//
// GradCheckTest also checks that every op of the dialect has a case here or
// is on its list of ops without a gradient.

// loom.add with respect to both operands.
func.func @case_add(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.add %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.sub with respect to both operands.
func.func @case_sub(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.sub %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.mul with respect to both operands.
func.func @case_mul(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.mul %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.div with respect to both operands.
func.func @case_div(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y", gradcheck.range = array<f64: 0.5, 2.0>, gradcheck.signed}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.div %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.pow with respect to both operands.
func.func @case_pow(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.5, 2.0>}, %y: tensor<2x3xf64> {loom.param = "y", gradcheck.range = array<f64: -1.5, 1.5>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.pow %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.max with respect to both operands.
func.func @case_max(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.max %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.min with respect to both operands.
func.func @case_min(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.min %x, %y : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// A value used twice by one op gets both cotangents.
func.func @case_mul__same_operand(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.mul %x, %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.neg.
func.func @case_neg(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.neg %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.abs.
func.func @case_abs(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.1, 1.0>, gradcheck.signed}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.abs %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.exp.
func.func @case_exp(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.exp %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.log.
func.func @case_log(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.5, 2.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.log %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.tanh.
func.func @case_tanh(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.tanh %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.sigmoid.
func.func @case_sigmoid(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.sigmoid %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.relu.
func.func @case_relu(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.1, 1.0>, gradcheck.signed}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.relu %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.erf.
func.func @case_erf(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.erf %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.sqrt.
func.func @case_sqrt(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.5, 2.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.sqrt %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.rsqrt.
func.func @case_rsqrt(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.5, 2.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.rsqrt %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.floor.
func.func @case_floor(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.1, 2.9>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.floor %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.cos.
func.func @case_cos(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: -3.0, 3.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.cos %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.sin.
func.func @case_sin(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: -3.0, 3.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.sin %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.gelu.
func.func @case_gelu(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: -3.0, 3.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.gelu %x : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.gelu with the tanh approximation.
func.func @case_gelu__tanh(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: -3.0, 3.0>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.gelu %x approximate = tanh : tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.select: each branch gets the cotangent where it is chosen.
func.func @case_select(%x: tensor<2x3xf64> {loom.param = "x"}, %y: tensor<2x3xf64> {loom.param = "y"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[[true, false, true], [false, false, true]]> : tensor<2x3xi1>
  %v1 = loom.select %v0, %x, %y : tensor<2x3xi1>, tensor<2x3xf64>
  %v2 = loom.mul %v1, %weights : tensor<2x3xf64>
  %v3 = loom.reduce_sum %v2 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.cast f64 -> f32 -> f64 carries the gradient; the integer path does not.
func.func @case_cast(%x: tensor<2x3xf64> {loom.param = "x", gradcheck.range = array<f64: 0.1, 2.9>}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.cast %x : tensor<2x3xf64> -> tensor<2x3xf32>
  %v1 = loom.cast %v0 : tensor<2x3xf32> -> tensor<2x3xf64>
  %v2 = loom.cast %x : tensor<2x3xf64> -> tensor<2x3xi64>
  %v3 = loom.cast %v2 : tensor<2x3xi64> -> tensor<2x3xf64>
  %v4 = loom.mul %v1, %v3 : tensor<2x3xf64>
  %v5 = loom.mul %v4, %weights : tensor<2x3xf64>
  %v6 = loom.reduce_sum %v5 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v6 : tensor<f64>
}

// loom.matmul, 2-D.
func.func @case_matmul(%a: tensor<3x4xf64> {loom.param = "a"}, %b: tensor<4x2xf64> {loom.param = "b"}, %weights: tensor<3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b : (tensor<3x4xf64>, tensor<4x2xf64>) -> tensor<3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul with transpose_a.
func.func @case_matmul__ta(%a: tensor<4x3xf64> {loom.param = "a"}, %b: tensor<4x2xf64> {loom.param = "b"}, %weights: tensor<3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_a} : (tensor<4x3xf64>, tensor<4x2xf64>) -> tensor<3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul with transpose_b.
func.func @case_matmul__tb(%a: tensor<3x4xf64> {loom.param = "a"}, %b: tensor<2x4xf64> {loom.param = "b"}, %weights: tensor<3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_b} : (tensor<3x4xf64>, tensor<2x4xf64>) -> tensor<3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul, batched, both transposed.
func.func @case_matmul__batched_tatb(%a: tensor<2x4x3xf64> {loom.param = "a"}, %b: tensor<2x2x4xf64> {loom.param = "b"}, %weights: tensor<2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_a, transpose_b} : (tensor<2x4x3xf64>, tensor<2x2x4xf64>) -> tensor<2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul with a bias epilogue, 3-D lhs with a shared rhs.
func.func @case_matmul__bias(%a: tensor<2x3x4xf64> {loom.param = "a"}, %b: tensor<4x2xf64> {loom.param = "b"}, %c: tensor<2xf64> {loom.param = "c"}, %weights: tensor<2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b bias(%c : tensor<2xf64>) : (tensor<2x3x4xf64>, tensor<4x2xf64>) -> tensor<2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul, 3-D lhs with a shared 2-D rhs.
func.func @case_matmul__shared(%a: tensor<2x3x4xf64> {loom.param = "a"}, %b: tensor<4x2xf64> {loom.param = "b"}, %weights: tensor<2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x2xf64>) -> tensor<2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul, shared rhs, transpose_a.
func.func @case_matmul__shared_ta(%a: tensor<2x4x3xf64> {loom.param = "a"}, %b: tensor<4x2xf64> {loom.param = "b"}, %weights: tensor<2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_a} : (tensor<2x4x3xf64>, tensor<4x2xf64>) -> tensor<2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul, shared rhs, transpose_b.
func.func @case_matmul__shared_tb(%a: tensor<2x3x4xf64> {loom.param = "a"}, %b: tensor<2x4xf64> {loom.param = "b"}, %weights: tensor<2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_b} : (tensor<2x3x4xf64>, tensor<2x4xf64>) -> tensor<2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.matmul, 4-D lhs, shared rhs, both transposed.
func.func @case_matmul__shared_tatb(%a: tensor<2x2x4x3xf64> {loom.param = "a"}, %b: tensor<2x4xf64> {loom.param = "b"}, %weights: tensor<2x2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %a, %b {transpose_a, transpose_b} : (tensor<2x2x4x3xf64>, tensor<2x4xf64>) -> tensor<2x2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.conv2d, padded, with respect to input and filter.
func.func @case_conv2d(%x: tensor<2x2x5x5xf64> {loom.param = "x"}, %w: tensor<3x2x3x3xf64> {loom.param = "w"}, %weights: tensor<2x3x5x5xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x2x5x5xf64>, tensor<3x2x3x3xf64>) -> tensor<2x3x5x5xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x5x5xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x3x5x5xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.conv2d with strides (an unread remainder row), asymmetric padding, dilation and groups.
func.func @case_conv2d__strided_grouped(%x: tensor<2x4x7x6xf64> {loom.param = "x"}, %w: tensor<6x2x3x2xf64> {loom.param = "w"}, %weights: tensor<2x6x3x5xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.conv2d %x, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x7x6xf64>, tensor<6x2x3x2xf64>) -> tensor<2x6x3x5xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x6x3x5xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x6x3x5xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.conv2d_input_grad with respect to dy and filter.
func.func @case_conv2d_input_grad(%dy: tensor<2x6x3x5xf64> {loom.param = "dy"}, %w: tensor<6x2x3x2xf64> {loom.param = "w"}, %weights: tensor<2x4x7x6xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.conv2d_input_grad %dy, %w {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x6x3x5xf64>, tensor<6x2x3x2xf64>) -> tensor<2x4x7x6xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x4x7x6xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x4x7x6xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.conv2d_filter_grad with respect to x and dy.
func.func @case_conv2d_filter_grad(%x: tensor<2x4x7x6xf64> {loom.param = "x"}, %dy: tensor<2x6x3x5xf64> {loom.param = "dy"}, %weights: tensor<6x2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x7x6xf64>, tensor<2x6x3x5xf64>) -> tensor<6x2x3x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<6x2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<6x2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.im2col with strides, asymmetric padding and dilations.
func.func @case_im2col(%x: tensor<2x3x5x4xf64> {loom.param = "x"}, %weights: tensor<18x12xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.im2col %x {kernel = array<i64: 3, 2>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>} : tensor<2x3x5x4xf64> -> tensor<18x12xf64>
  %v1 = loom.mul %v0, %weights : tensor<18x12xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<18x12xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.col2im, the adjoint of the im2col above.
func.func @case_col2im(%c: tensor<18x12xf64> {loom.param = "cols"}, %weights: tensor<2x3x5x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.col2im %c {kernel = array<i64: 3, 2>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 2>} : tensor<18x12xf64> -> tensor<2x3x5x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x5x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x3x5x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_sum over one dimension.
func.func @case_reduce_sum(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_sum %x dims = [1] : tensor<2x3x4xf64> -> tensor<2x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_sum over two dimensions with keep_dims.
func.func @case_reduce_sum__keep_dims(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<1x3x1xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_sum %x dims = [0, 2] {keep_dims} : tensor<2x3x4xf64> -> tensor<1x3x1xf64>
  %v1 = loom.mul %v0, %weights : tensor<1x3x1xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<1x3x1xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_mean over one dimension.
func.func @case_reduce_mean(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_mean %x dims = [1] : tensor<2x3x4xf64> -> tensor<2x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_mean over two dimensions with keep_dims.
func.func @case_reduce_mean__keep_dims(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<1x3x1xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_mean %x dims = [0, 2] {keep_dims} : tensor<2x3x4xf64> -> tensor<1x3x1xf64>
  %v1 = loom.mul %v0, %weights : tensor<1x3x1xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<1x3x1xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_max over one dimension.
func.func @case_reduce_max(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_max %x dims = [1] : tensor<2x3x4xf64> -> tensor<2x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_max over two dimensions with keep_dims.
func.func @case_reduce_max__keep_dims(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<1x3x1xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_max %x dims = [0, 2] {keep_dims} : tensor<2x3x4xf64> -> tensor<1x3x1xf64>
  %v1 = loom.mul %v0, %weights : tensor<1x3x1xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<1x3x1xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_min over one dimension.
func.func @case_reduce_min(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_min %x dims = [1] : tensor<2x3x4xf64> -> tensor<2x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reduce_min over two dimensions with keep_dims.
func.func @case_reduce_min__keep_dims(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<1x3x1xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reduce_min %x dims = [0, 2] {keep_dims} : tensor<2x3x4xf64> -> tensor<1x3x1xf64>
  %v1 = loom.mul %v0, %weights : tensor<1x3x1xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<1x3x1xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.broadcast_in_dim: a new dimension and a repeated size-1 dimension are summed.
func.func @case_broadcast_in_dim(%x: tensor<3x1xf64> {loom.param = "x"}, %weights: tensor<2x3x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.broadcast_in_dim %x dims = [1, 2] : tensor<3x1xf64> -> tensor<2x3x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.reshape.
func.func @case_reshape(%x: tensor<2x6xf64> {loom.param = "x"}, %weights: tensor<3x2x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.reshape %x : tensor<2x6xf64> -> tensor<3x2x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x2x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<3x2x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.transpose.
func.func @case_transpose(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<4x2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf64> -> tensor<4x2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<4x2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<4x2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.slice with an offset and a stride.
func.func @case_slice(%x: tensor<4x7xf64> {loom.param = "x"}, %weights: tensor<3x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.slice %x start = [1, 1] limit = [4, 6] stride = [1, 2] : tensor<4x7xf64> -> tensor<3x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<3x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.pad with low, high and interior padding.
func.func @case_pad(%x: tensor<2x3xf64> {loom.param = "x"}, %weights: tensor<3x7xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.pad %x low = [1, 0] high = [0, 2] interior = [0, 1] : tensor<2x3xf64> -> tensor<3x7xf64>
  %v1 = loom.mul %v0, %weights : tensor<3x7xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<3x7xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.concat of three inputs.
func.func @case_concat(%a: tensor<2x1xf64> {loom.param = "a"}, %b: tensor<2x3xf64> {loom.param = "b"}, %d: tensor<2x2xf64> {loom.param = "d"}, %weights: tensor<2x6xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.concat %a, %b, %d dim = 1 : (tensor<2x1xf64>, tensor<2x3xf64>, tensor<2x2xf64>) -> tensor<2x6xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x6xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x6xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.gather along axis 1 with repeated and negative indices.
func.func @case_gather(%table: tensor<2x5x3xf64> {loom.param = "table"}, %weights: tensor<2x2x2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[[0, 3], [3, -1]]> : tensor<2x2xi64>
  %v1 = loom.gather %table[%v0] axis = 1 : (tensor<2x5x3xf64>, tensor<2x2xi64>) -> tensor<2x2x2x3xf64>
  %v2 = loom.mul %v1, %weights : tensor<2x2x2x3xf64>
  %v3 = loom.reduce_sum %v2 dims = [0, 1, 2, 3] : tensor<2x2x2x3xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.scatter_add with repeated indices.
func.func @case_scatter_add(%updates: tensor<3x2xf64> {loom.param = "updates"}, %weights: tensor<4x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[1, 3, 1]> : tensor<3xi64>
  %v1 = loom.scatter_add %updates[%v0] axis = 0 : (tensor<3x2xf64>, tensor<3xi64>) -> tensor<4x2xf64>
  %v2 = loom.mul %v1, %weights : tensor<4x2xf64>
  %v3 = loom.reduce_sum %v2 dims = [0, 1] : tensor<4x2xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.softmax.
func.func @case_softmax(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x3x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.softmax %x axis = 1 : tensor<2x3x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.log_softmax.
func.func @case_log_softmax(%x: tensor<2x3x4xf64> {loom.param = "x"}, %weights: tensor<2x3x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.log_softmax %x axis = 2 : tensor<2x3x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.layer_norm over the last two dimensions, w.r.t. x, scale and bias.
func.func @case_layer_norm(%x: tensor<2x3x4xf64> {loom.param = "x"}, %scale: tensor<3x4xf64> {loom.param = "scale"}, %bias: tensor<3x4xf64> {loom.param = "bias"}, %weights: tensor<2x3x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.layer_norm %x, %scale, %bias axis = 1 epsilon = 1.0e-05 : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<2x3x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.rms_norm w.r.t. x and scale.
func.func @case_rms_norm(%x: tensor<2x3x4xf64> {loom.param = "x"}, %scale: tensor<4xf64> {loom.param = "scale"}, %weights: tensor<2x3x4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.rms_norm %x, %scale axis = 2 epsilon = 1.0e-06 : (tensor<2x3x4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x4xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2] : tensor<2x3x4xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.batch_norm w.r.t. x, scale, bias, mean and variance.
func.func @case_batch_norm(%x: tensor<2x3x2x2xf64> {loom.param = "x"}, %scale: tensor<3xf64> {loom.param = "scale"}, %bias: tensor<3xf64> {loom.param = "bias"}, %mean: tensor<3xf64> {loom.param = "mean"}, %variance: tensor<3xf64> {loom.param = "variance", gradcheck.range = array<f64: 0.5, 2.0>}, %weights: tensor<2x3x2x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.batch_norm %x, %scale, %bias, %mean, %variance epsilon = 1.0e-05 : (tensor<2x3x2x2xf64>, tensor<3xf64>) -> tensor<2x3x2x2xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3x2x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x3x2x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.batch_norm_stats: both statistics.
func.func @case_batch_norm_stats(%x: tensor<2x3x2x2xf64> {loom.param = "x"}, %wm: tensor<3xf64> {loom.input = "wm"}, %wv: tensor<3xf64> {loom.input = "wv"}, %weights: tensor<3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0:2 = loom.batch_norm_stats %x : tensor<2x3x2x2xf64> -> tensor<3xf64>, tensor<3xf64>
  %v1 = loom.mul %v0#0, %wm : tensor<3xf64>
  %v2 = loom.mul %v0#1, %wv : tensor<3xf64>
  %v3 = loom.add %v1, %v2 : tensor<3xf64>
  %v4 = loom.mul %v3, %weights : tensor<3xf64>
  %v5 = loom.reduce_sum %v4 dims = [0] : tensor<3xf64> -> tensor<f64>
  return %v5 : tensor<f64>
}

// Training-mode batch normalization: statistics from loom.batch_norm_stats.
func.func @case_batch_norm__training(%x: tensor<2x3x2x2xf64> {loom.param = "x"}, %scale: tensor<3xf64> {loom.param = "scale"}, %bias: tensor<3xf64> {loom.param = "bias"}, %weights: tensor<2x3x2x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0:2 = loom.batch_norm_stats %x : tensor<2x3x2x2xf64> -> tensor<3xf64>, tensor<3xf64>
  %v1 = loom.batch_norm %x, %scale, %bias, %v0#0, %v0#1 epsilon = 1.0e-05 : (tensor<2x3x2x2xf64>, tensor<3xf64>) -> tensor<2x3x2x2xf64>
  %v2 = loom.mul %v1, %weights : tensor<2x3x2x2xf64>
  %v3 = loom.reduce_sum %v2 dims = [0, 1, 2, 3] : tensor<2x3x2x2xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.max_pool2d with overlapping, padded windows.
func.func @case_max_pool2d(%x: tensor<2x2x5x5xf64> {loom.param = "x"}, %weights: tensor<2x2x3x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<2x2x5x5xf64> -> tensor<2x2x3x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x2x3x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x3x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.max_pool2d_grad with respect to dy (a gather at the argmax), the
// argmax of overlapping, padded windows of a fixed input.
func.func @case_max_pool2d_grad(%dy: tensor<2x2x3x3xf64> {loom.param = "dy"}, %x: tensor<2x2x5x5xf64> {loom.input = "x"}, %weights: tensor<2x2x5x5xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<2x2x5x5xf64> -> tensor<2x2x3x3xi64>
  %v0 = loom.max_pool2d_grad %dy[%i] {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<2x2x3x3xf64>, tensor<2x2x3x3xi64>) -> tensor<2x2x5x5xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x2x5x5xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x5x5xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.avg_pool2d, padding not counted.
func.func @case_avg_pool2d(%x: tensor<2x2x5x5xf64> {loom.param = "x"}, %weights: tensor<2x2x3x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : tensor<2x2x5x5xf64> -> tensor<2x2x3x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x2x3x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x3x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.avg_pool2d, padding counted.
func.func @case_avg_pool2d__count_include_pad(%x: tensor<2x2x5x5xf64> {loom.param = "x"}, %weights: tensor<2x2x3x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.avg_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, count_include_pad} : tensor<2x2x5x5xf64> -> tensor<2x2x3x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x2x3x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x3x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.dropout: linear in x for a fixed seed.
func.func @case_dropout(%x: tensor<4x8xf64> {loom.param = "x"}, %weights: tensor<4x8xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<7> : tensor<i64>
  %v1 = loom.dropout %x, %v0 ratio = 3.000000e-01 stream = 2 : tensor<4x8xf64>, tensor<i64>
  %v2 = loom.mul %v1, %weights : tensor<4x8xf64>
  %v3 = loom.reduce_sum %v2 dims = [0, 1] : tensor<4x8xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.cross_entropy, mean over the labels that are not ignored.
func.func @case_cross_entropy(%logits: tensor<4x3xf64> {loom.param = "logits"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[2, 0, -100, 1]> : tensor<4xi64>
  %v1 = loom.cross_entropy %logits, %v0 reduction = mean {ignore_index = -100 : i64} : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<f64>
  return %v1 : tensor<f64>
}

// loom.cross_entropy, sum, classes on dimension 1 of a 3-D input, i32 labels.
func.func @case_cross_entropy__sum_spatial(%logits: tensor<2x3x2xf64> {loom.param = "logits"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[[2, 0], [1, 1]]> : tensor<2x2xi32>
  %v1 = loom.cross_entropy %logits, %v0 reduction = sum : (tensor<2x3x2xf64>, tensor<2x2xi32>) -> tensor<f64>
  return %v1 : tensor<f64>
}

// loom.cross_entropy without reduction.
func.func @case_cross_entropy__none(%logits: tensor<4x3xf64> {loom.param = "logits"}, %weights: tensor<4xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[2, 0, 1, 1]> : tensor<4xi64>
  %v1 = loom.cross_entropy %logits, %v0 reduction = none : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<4xf64>
  %v2 = loom.mul %v1, %weights : tensor<4xf64>
  %v3 = loom.reduce_sum %v2 dims = [0] : tensor<4xf64> -> tensor<f64>
  return %v3 : tensor<f64>
}

// loom.cross_entropy, mean, no ignore_index.
func.func @case_cross_entropy__mean(%logits: tensor<4x3xf64> {loom.param = "logits"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.constant dense<[2, 0, 1, 1]> : tensor<4xi64>
  %v1 = loom.cross_entropy %logits, %v0 reduction = mean : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<f64>
  return %v1 : tensor<f64>
}

// loom.mse, reduction mean, w.r.t. prediction and target.
func.func @case_mse(%prediction: tensor<2x3xf64> {loom.param = "prediction"}, %target: tensor<2x3xf64> {loom.param = "target"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.mse %prediction, %target reduction = mean : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<f64>
  return %v0 : tensor<f64>
}

// loom.mse, reduction sum, w.r.t. prediction and target.
func.func @case_mse__sum(%prediction: tensor<2x3xf64> {loom.param = "prediction"}, %target: tensor<2x3xf64> {loom.param = "target"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.mse %prediction, %target reduction = sum : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<f64>
  return %v0 : tensor<f64>
}

// loom.mse, reduction none, w.r.t. prediction and target.
func.func @case_mse__none(%prediction: tensor<2x3xf64> {loom.param = "prediction"}, %target: tensor<2x3xf64> {loom.param = "target"}, %weights: tensor<2x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.mse %prediction, %target reduction = none : (tensor<2x3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %v1 = loom.mul %v0, %weights : tensor<2x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1] : tensor<2x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// A two-layer MLP with a residual (fan-out) and a cross-entropy loss.
func.func @case_mlp(%x: tensor<4x3xf64> {loom.input = "x"}, %w1: tensor<3x3xf64> {loom.param = "w1"}, %b1: tensor<3xf64> {loom.param = "b1"}, %w2: tensor<3x3xf64> {loom.param = "w2"}) -> (tensor<f64> {loom.output = "loss"}) {
  %v0 = loom.matmul %x, %w1 : (tensor<4x3xf64>, tensor<3x3xf64>) -> tensor<4x3xf64>
  %v1 = loom.broadcast_in_dim %b1 dims = [1] : tensor<3xf64> -> tensor<4x3xf64>
  %v2 = loom.add %v0, %v1 : tensor<4x3xf64>
  %v3 = loom.gelu %v2 : tensor<4x3xf64>
  %v4 = loom.matmul %v3, %w2 : (tensor<4x3xf64>, tensor<3x3xf64>) -> tensor<4x3xf64>
  %v5 = loom.add %v4, %v2 : tensor<4x3xf64>
  %v6 = loom.constant dense<[2, 0, 1, 1]> : tensor<4xi64>
  %v7 = loom.cross_entropy %v5, %v6 reduction = mean : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<f64>
  return %v7 : tensor<f64>
}

// loom.attention: causal, grouped-query (two query heads read one key/value
// head), with respect to q, k and v.
func.func @case_attention(%q: tensor<1x2x3x4xf64> {loom.param = "q"}, %k: tensor<1x1x3x4xf64> {loom.param = "k"}, %v: tensor<1x1x3x2xf64> {loom.param = "v"}, %weights: tensor<1x2x3x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %o, %lse = loom.attention %q, %k, %v {scale = 0.5 : f64, causal} : (tensor<1x2x3x4xf64>, tensor<1x1x3x4xf64>, tensor<1x1x3x2xf64>) -> (tensor<1x2x3x2xf64>, tensor<1x2x3xf32>)
  %v1 = loom.mul %o, %weights : tensor<1x2x3x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<1x2x3x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.attention with a sliding window, a key mask and a bias broadcast
// over the batch, with respect to q, k, v and the bias.
func.func @case_attention__bias_mask(%q: tensor<2x2x4x3xf64> {loom.param = "q"}, %k: tensor<2x2x4x3xf64> {loom.param = "k"}, %v: tensor<2x2x4x3xf64> {loom.param = "v"}, %bias: tensor<1x2x4x4xf64> {loom.param = "bias"}, %weights: tensor<2x2x4x3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %m = loom.constant dense<[[[[true, false, true, true]]], [[[true, true, true, false]]]]> : tensor<2x1x1x4xi1>
  %o, %lse = loom.attention %q, %k, %v mask %m bias %bias {scale = 0.7 : f64, causal, window = 2 : i64} : (tensor<2x2x4x3xf64>, tensor<2x2x4x3xf64>, tensor<2x2x4x3xf64>, tensor<2x1x1x4xi1>, tensor<1x2x4x4xf64>) -> (tensor<2x2x4x3xf64>, tensor<2x2x4xf32>)
  %v1 = loom.mul %o, %weights : tensor<2x2x4x3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x2x4x3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.attention with dropout on the probabilities (a fixed seed: the mask
// is fixed, the function smooth), causal, grouped-query.
func.func @case_attention__dropout(%q: tensor<1x2x6x3xf64> {loom.param = "q"}, %k: tensor<1x1x6x3xf64> {loom.param = "k"}, %v: tensor<1x1x6x2xf64> {loom.param = "v"}, %weights: tensor<1x2x6x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %seed = loom.constant dense<11> : tensor<i64>
  %o, %lse = loom.attention %q, %k, %v seed %seed {scale = 0.6 : f64, causal, dropout = 0.4 : f32, stream = 3 : i64} : (tensor<1x2x6x3xf64>, tensor<1x1x6x3xf64>, tensor<1x1x6x2xf64>, tensor<i64>) -> (tensor<1x2x6x2xf64>, tensor<1x2x6xf32>)
  %v1 = loom.mul %o, %weights : tensor<1x2x6x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<1x2x6x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.attention with document ids (three documents in batch row 0, one
// in row 1), causal, with respect to q, k and v.
func.func @case_attention__documents(%q: tensor<2x1x5x3xf64> {loom.param = "q"}, %k: tensor<2x1x5x3xf64> {loom.param = "k"}, %v: tensor<2x1x5x2xf64> {loom.param = "v"}, %weights: tensor<2x1x5x2xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %docs = loom.constant dense<[[0, 0, 1, 2, 2], [7, 7, 7, 7, 7]]> : tensor<2x5xi64>
  %o, %lse = loom.attention %q, %k, %v segments %docs {scale = 0.6 : f64, causal} : (tensor<2x1x5x3xf64>, tensor<2x1x5x3xf64>, tensor<2x1x5x2xf64>, tensor<2x5xi64>) -> (tensor<2x1x5x2xf64>, tensor<2x1x5xf32>)
  %v1 = loom.mul %o, %weights : tensor<2x1x5x2xf64>
  %v2 = loom.reduce_sum %v1 dims = [0, 1, 2, 3] : tensor<2x1x5x2xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}

// loom.linear_cross_entropy: w [V, C] (transpose_w), mean over the labels
// that are not ignored, with respect to x and w.
func.func @case_linear_cross_entropy(%x: tensor<4x3xf64> {loom.param = "x"}, %w: tensor<5x3xf64> {loom.param = "w"}) -> (tensor<f64> {loom.output = "loss"}) {
  %y = loom.constant dense<[2, 0, -100, 4]> : tensor<4xi64>
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w, ignore_index = -100 : i64} : (tensor<4x3xf64>, tensor<5x3xf64>, tensor<4xi64>) -> (tensor<f64>, tensor<4xf32>)
  return %l : tensor<f64>
}

// loom.linear_cross_entropy without reduction: w [C, V], i32 labels, the
// per-row losses weighted.
func.func @case_linear_cross_entropy__none(%x: tensor<3x2xf64> {loom.param = "x"}, %w: tensor<2x4xf64> {loom.param = "w"}, %weights: tensor<3xf64> {loom.input = "weights"}) -> (tensor<f64> {loom.output = "loss"}) {
  %y = loom.constant dense<[3, 1, 0]> : tensor<3xi32>
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = none : (tensor<3x2xf64>, tensor<2x4xf64>, tensor<3xi32>) -> (tensor<3xf64>, tensor<3xf32>)
  %v1 = loom.mul %l, %weights : tensor<3xf64>
  %v2 = loom.reduce_sum %v1 dims = [0] : tensor<3xf64> -> tensor<f64>
  return %v2 : tensor<f64>
}
