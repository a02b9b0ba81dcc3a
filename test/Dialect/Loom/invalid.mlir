// RUN: loom-opt %s --split-input-file --verify-diagnostics

// One case per numbered constraint (Cn) of every loom op, plus the checks
// that ODS type constraints and traits make. Ops whose result type is
// inferred (InferTypeOpAdaptor) report the inference error and then MLIR's
// generic "failed to infer returned types", both at the op.

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// Tests that loom.add rejects operands of different types (C1).
func.func @add_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.add"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.add rejects an i1 element type (C2).
func.func @add_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.add %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.sub rejects operands of different types (C1).
func.func @sub_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.sub"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.sub rejects an i1 element type (C2).
func.func @sub_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.sub %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.mul rejects operands of different types (C1).
func.func @mul_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.mul"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.mul rejects an i1 element type (C2).
func.func @mul_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.mul %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.div rejects operands of different types (C1).
func.func @div_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.div"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.div rejects an i1 element type (C2).
func.func @div_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.div %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.pow rejects operands of different types (C1).
func.func @pow_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.pow"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.pow rejects an integer element type (C2).
func.func @pow_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %z = loom.pow %x, %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.max rejects operands of different types (C1).
func.func @max_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.max"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.max rejects an i1 element type (C2).
func.func @max_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.max %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.min rejects operands of different types (C1).
func.func @min_c1_type_mismatch(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %z = "loom.min"(%x, %y) : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.min rejects an i1 element type (C2).
func.func @min_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %z = loom.min %x, %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.neg rejects a result type that differs from the operand's (C1).
func.func @neg_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.neg"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.neg rejects an i1 element type (C2).
func.func @neg_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %y = loom.neg %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.abs rejects a result type that differs from the operand's (C1).
func.func @abs_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.abs"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.abs rejects an i1 element type (C2).
func.func @abs_c2_element_type(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values}}
  %y = loom.abs %x : tensor<4xi1>
  return
}

// -----

// Tests that loom.exp rejects a result type that differs from the operand's (C1).
func.func @exp_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.exp rejects an integer element type (C2).
func.func @exp_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.exp %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.log rejects a result type that differs from the operand's (C1).
func.func @log_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.log"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.log rejects an integer element type (C2).
func.func @log_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.log %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.tanh rejects a result type that differs from the operand's (C1).
func.func @tanh_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.tanh"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.tanh rejects an integer element type (C2).
func.func @tanh_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.tanh %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.sigmoid rejects a result type that differs from the operand's (C1).
func.func @sigmoid_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.sigmoid"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.sigmoid rejects an integer element type (C2).
func.func @sigmoid_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.sigmoid %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.relu rejects a result type that differs from the operand's (C1).
func.func @relu_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.relu"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.relu rejects an integer element type (C2).
func.func @relu_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.relu %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.erf rejects a result type that differs from the operand's (C1).
func.func @erf_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.erf"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.erf rejects an integer element type (C2).
func.func @erf_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.erf %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.sqrt rejects a result type that differs from the operand's (C1).
func.func @sqrt_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.sqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.sqrt rejects an integer element type (C2).
func.func @sqrt_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.sqrt %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.rsqrt rejects a result type that differs from the operand's (C1).
func.func @rsqrt_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.rsqrt"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.rsqrt rejects an integer element type (C2).
func.func @rsqrt_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.rsqrt %x : tensor<4xi32>
  return
}

// -----

// Tests that loom.floor rejects a result type that differs from the operand's (C1).
func.func @floor_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.floor"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.floor rejects an integer element type (C2).
func.func @floor_c2_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.floor %x : tensor<4xi32>
  return
}

// -----

// Tests that elementwise ops reject dynamically shaped tensors (operand type constraint).
func.func @elementwise_dynamic_shape(%x: tensor<?xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?xf32>'}}
  %y = loom.exp %x : tensor<?xf32>
  return
}

// -----

// Tests that loom.gelu rejects a result type that differs from the operand's (C1).
func.func @gelu_c1_type_mismatch(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.gelu"(%x) : (tensor<4xf32>) -> tensor<4xbf16>
  return
}

// -----

// Tests that loom.gelu rejects a non-floating-point type (C1).
func.func @gelu_c1_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.gelu %x approximate = tanh : tensor<4xi32>
  return
}

// -----

// Tests that loom.select rejects branches of different types (C1).
func.func @select_c1_branch_types(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{failed to verify that all of {on_true, on_false, result} have same type}}
  %r = "loom.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Tests that loom.select rejects a result type that differs from the branches' (C1).
func.func @select_c1_result_type(%c: tensor<4xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{failed to verify that all of {on_true, on_false, result} have same type}}
  %r = "loom.select"(%c, %a, %a) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xi32>
  return
}

// -----

// Tests that loom.select rejects a condition whose shape differs from the branches' (C2).
func.func @select_c2_cond_shape(%c: tensor<8xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{failed to verify that all of {cond, on_true} have same shape}}
  %r = loom.select %c, %a, %a : tensor<8xi1>, tensor<4xf32>
  return
}

// -----

// Tests that loom.select rejects a condition that is not i1 (C2).
func.func @select_c2_cond_element_type(%c: tensor<4xi32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %r = loom.select %c, %a, %a : tensor<4xi32>, tensor<4xf32>
  return
}

// -----

// Tests that loom.compare rejects operands of different types (C1).
func.func @compare_c1_operand_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{requires all operands to have the same type}}
  %r = "loom.compare"(%a, %b) <{predicate = 0 : i64}> : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xi1>
  return
}

// -----

// Tests that loom.compare rejects a result whose shape differs from the operands' (C2).
func.func @compare_c2_result_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{failed to verify that all of {lhs, result} have same shape}}
  %r = loom.compare lt, %a, %a : tensor<4xf32> -> tensor<2x2xi1>
  return
}

// -----

// Tests that loom.compare rejects a result that is not i1 (C2).
func.func @compare_c2_result_element_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %r = loom.compare lt, %a, %a : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.cast rejects a result whose shape differs from the operand's (C1).
func.func @cast_c1_shape(%x: tensor<4xi64>) {
  // expected-error @+1 {{failed to verify that all of {x, y} have same shape}}
  %y = loom.cast %x : tensor<4xi64> -> tensor<2x2xf32>
  return
}

// -----

// Tests that loom.stop_gradient rejects a result type that differs from the operand's (C1).
func.func @stop_gradient_c1_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.stop_gradient"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// Tests that loom.constant rejects a value whose type is not the result type (C1).
func.func @constant_c1_type() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %c = "loom.constant"() <{value = dense<1.0> : tensor<3xf32>}> : () -> tensor<4xf32>
  return
}

// -----

// Tests that loom.constant rejects a value that is not a dense elements attribute (C1).
func.func @constant_c1_sparse() {
  // expected-error @+1 {{dense elements attribute}}
  %c = loom.constant sparse<[[0]], [1.0]> : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

// Tests that loom.matmul rejects a rank-1 lhs (C1).
func.func @matmul_c1_lhs_rank(%a: tensor<4xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+2 {{lhs must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<4xf32>, tensor<4x8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that loom.matmul rejects an rhs whose rank is neither the lhs rank nor 2 (C1).
func.func @matmul_c1_rhs_rank(%a: tensor<2x3x4x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error @+2 {{rhs must have the rank of lhs (4) or rank 2, got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<2x3x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects batch dimensions that differ (C2).
func.func @matmul_c2_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error @+2 {{batch dimensions differ: lhs [2] vs rhs [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects contracting dimensions that differ (C3).
func.func @matmul_c3_contracting(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs [4, 8] has K=8, rhs [16, 8] has K=16}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.matmul takes the contracting dimension of a transposed lhs from its second-to-last dimension (C3).
func.func @matmul_c3_contracting_transposed(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+2 {{contracting dimensions differ: lhs [4, 8] has K=4, rhs [8, 16] has K=8}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b {transpose_a} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects a bias that is not N elements (C6).
func.func @matmul_c6_bias_size(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<8xf32>) {
  // expected-error @+2 {{bias must be a rank-1 tensor of N=16 elements of the operands' type, got 'tensor<8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b bias(%c : tensor<8xf32>) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects a bias of another element type (C6).
func.func @matmul_c6_bias_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<16xf64>) {
  // expected-error @+2 {{bias must be a rank-1 tensor of N=16 elements of the operands' type, got 'tensor<16xf64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b bias(%c : tensor<16xf64>) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects lhs and rhs of different element types (C4).
func.func @matmul_c4_operand_element_types(%a: tensor<4x8xf32>, %b: tensor<8x16xf16>) {
  // expected-error @+2 {{lhs and rhs element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf16>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects a result element type that differs from the operands' (C4).
func.func @matmul_c4_result_element_type(%a: tensor<4x8xbf16>, %b: tensor<8x16xbf16>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x16xbf16>' are incompatible with return type(s) of operation 'tensor<4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that loom.matmul rejects integer operands (C4).
func.func @matmul_c4_integer(%a: tensor<4x8xi32>, %b: tensor<8x16xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.matmul %a, %b : (tensor<4x8xi32>, tensor<8x16xi32>) -> tensor<4x16xi32>
  return
}

// -----

// Tests that loom.matmul rejects a result that is not batch x M x N (C5).
func.func @matmul_c5_result_shape(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x4x16xf32>' are incompatible with return type(s) of operation 'tensor<4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// Tests that loom.conv2d rejects an input that is not rank 4 (C1).
func.func @conv2d_c1_input_rank(%x: tensor<1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{input and filter must have rank 4 (NCHW, OIHW), got 3 and 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a filter that is not rank 4 (C1).
func.func @conv2d_c1_filter_rank(%x: tensor<2x1x28x28xf32>, %w: tensor<8x3x3xf32>) {
  // expected-error @+2 {{input and filter must have rank 4 (NCHW, OIHW), got 4 and 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects input and filter of different element types (C1).
func.func @conv2d_c1_element_types(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf16>) {
  // expected-error @+2 {{input and filter element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf16>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects strides without 2 entries (C2).
func.func @conv2d_c2_strides_size(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects padding without 4 entries (C2).
func.func @conv2d_c2_padding_size(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects dilations without 2 entries (C2).
func.func @conv2d_c2_dilations_size(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a zero stride (C2).
func.func @conv2d_c2_zero_stride(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 0, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a zero dilation (C2).
func.func @conv2d_c2_zero_dilation(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 0>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects negative padding (C2).
func.func @conv2d_c2_negative_padding(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{strides and dilations must be positive and padding non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects zero groups (C3).
func.func @conv2d_c3_zero_groups(%x: tensor<2x4x28x28xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+2 {{groups (0) must divide input channels (4) and output channels (8)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 0 : i64} : (tensor<2x4x28x28xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects groups that do not divide the input channels (C3).
func.func @conv2d_c3_groups_input_channels(%x: tensor<2x4x28x28xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+2 {{groups (3) must divide input channels (4) and output channels (6)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 3 : i64} : (tensor<2x4x28x28xf32>, tensor<6x1x3x3xf32>) -> tensor<2x6x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects groups that do not divide the output channels (C3).
func.func @conv2d_c3_groups_output_channels(%x: tensor<2x4x28x28xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+2 {{groups (4) must divide input channels (4) and output channels (6)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x28x28xf32>, tensor<6x1x3x3xf32>) -> tensor<2x6x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a filter whose dimension 1 is not input channels / groups (C3).
func.func @conv2d_c3_filter_channels(%x: tensor<2x4x28x28xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+2 {{filter has 4 input channels per group, expected 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x28x28xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x26x26xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a dilated filter larger than the padded input (C4).
func.func @conv2d_c4_filter_fits(%x: tensor<2x1x4x4xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{filter [8, 1, 3, 3] does not fit in padded input [2, 1, 4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>} : (tensor<2x1x4x4xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x1x1xf32>
  return
}

// -----

// Tests that loom.conv2d rejects a result type other than the inferred one.
func.func @conv2d_result_shape(%x: tensor<2x1x28x28xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8x26x26xf32>' are incompatible with return type(s) of operation 'tensor<2x8x28x28xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x28x28xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// Tests that loom.reduce_sum rejects a dimension beyond the rank (C1).
func.func @reduce_sum_c1_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects a negative dimension (C1).
func.func @reduce_sum_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects dims that are not strictly increasing (C2).
func.func @reduce_sum_c2_not_increasing(%x: tensor<4x8x16xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [2, 1] : tensor<4x8x16xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects a repeated dimension (C2).
func.func @reduce_sum_c2_duplicate(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects a result that keeps the reduced dimension without keep_dims (C3).
func.func @reduce_sum_c3_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects a result that drops the reduced dimension with keep_dims (C3).
func.func @reduce_sum_c3_keep_dims(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [1] {keep_dims} : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_sum rejects a result element type that differs from the operand's (C3).
func.func @reduce_sum_c3_element_type(%x: tensor<4x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xi32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_sum %x dims = [1] : tensor<4x8xi32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a dimension beyond the rank (C1).
func.func @reduce_max_c1_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a negative dimension (C1).
func.func @reduce_max_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects dims that are not strictly increasing (C2).
func.func @reduce_max_c2_not_increasing(%x: tensor<4x8x16xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [2, 1] : tensor<4x8x16xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a repeated dimension (C2).
func.func @reduce_max_c2_duplicate(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a result that keeps the reduced dimension without keep_dims (C3).
func.func @reduce_max_c3_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a result that drops the reduced dimension with keep_dims (C3).
func.func @reduce_max_c3_keep_dims(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [1] {keep_dims} : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_max rejects a result element type that differs from the operand's (C3).
func.func @reduce_max_c3_element_type(%x: tensor<4x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xi32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_max %x dims = [1] : tensor<4x8xi32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a dimension beyond the rank (C1).
func.func @reduce_min_c1_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a negative dimension (C1).
func.func @reduce_min_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects dims that are not strictly increasing (C2).
func.func @reduce_min_c2_not_increasing(%x: tensor<4x8x16xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [2, 1] : tensor<4x8x16xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a repeated dimension (C2).
func.func @reduce_min_c2_duplicate(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a result that keeps the reduced dimension without keep_dims (C3).
func.func @reduce_min_c3_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a result that drops the reduced dimension with keep_dims (C3).
func.func @reduce_min_c3_keep_dims(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [1] {keep_dims} : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_min rejects a result element type that differs from the operand's (C3).
func.func @reduce_min_c3_element_type(%x: tensor<4x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xi32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_min %x dims = [1] : tensor<4x8xi32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a dimension beyond the rank (C1).
func.func @reduce_mean_c1_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a negative dimension (C1).
func.func @reduce_mean_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dimension -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [-1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects dims that are not strictly increasing (C2).
func.func @reduce_mean_c2_not_increasing(%x: tensor<4x8x16xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [2, 1] : tensor<4x8x16xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a repeated dimension (C2).
func.func @reduce_mean_c2_duplicate(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{dims must be strictly increasing}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a result that keeps the reduced dimension without keep_dims (C3).
func.func @reduce_mean_c3_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a result that drops the reduced dimension with keep_dims (C3).
func.func @reduce_mean_c3_keep_dims(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x1xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [1] {keep_dims} : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Tests that loom.reduce_mean rejects a result element type that differs from the operand's (C3).
func.func @reduce_mean_c3_element_type(%x: tensor<4x8xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xi32>' are incompatible with return type(s) of operation 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %s = loom.reduce_mean %x dims = [1] : tensor<4x8xi32> -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// Tests that loom.broadcast_in_dim rejects dims without one entry per operand dimension (C1).
func.func @broadcast_in_dim_c1_dims_size(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dims has 1 entries but the operand has rank 2}}
  %y = loom.broadcast_in_dim %x dims = [1] : tensor<4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

// Tests that loom.broadcast_in_dim rejects dims that are not strictly increasing (C2).
func.func @broadcast_in_dim_c2_not_increasing(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{dims must be strictly increasing and below the result rank 3}}
  %y = loom.broadcast_in_dim %x dims = [2, 1] : tensor<4x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// Tests that loom.broadcast_in_dim rejects a dimension beyond the result rank (C2).
func.func @broadcast_in_dim_c2_out_of_range(%x: tensor<8xf32>) {
  // expected-error @+1 {{dims must be strictly increasing and below the result rank 2}}
  %y = loom.broadcast_in_dim %x dims = [2] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.broadcast_in_dim rejects a negative dimension (C2).
func.func @broadcast_in_dim_c2_negative(%x: tensor<8xf32>) {
  // expected-error @+1 {{dims must be strictly increasing and below the result rank 2}}
  %y = loom.broadcast_in_dim %x dims = [-1] : tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.broadcast_in_dim rejects an operand dimension that is neither 1 nor the result's (C3).
func.func @broadcast_in_dim_c3_size(%x: tensor<3xf32>) {
  // expected-error @+1 {{operand dimension 0 (size 3) cannot broadcast to result dimension 1 (size 8)}}
  %y = loom.broadcast_in_dim %x dims = [1] : tensor<3xf32> -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.broadcast_in_dim rejects a result element type that differs from the operand's (C4).
func.func @broadcast_in_dim_c4_element_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{operand and result element types differ}}
  %y = loom.broadcast_in_dim %x dims = [1] : tensor<8xf32> -> tensor<4x8xf16>
  return
}

// -----

// Tests that loom.reshape rejects a result with a different number of elements (C1).
func.func @reshape_c1_num_elements(%x: tensor<2x16x64xf32>) {
  // expected-error @+1 {{cannot reshape [2, 16, 64] (2048 elements) to [2, 16, 4, 8] (1024 elements)}}
  %y = loom.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x4x8xf32>
  return
}

// -----

// Tests that loom.reshape rejects a result element type that differs from the operand's (C2).
func.func @reshape_c2_element_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{operand and result element types differ}}
  %y = loom.reshape %x : tensor<2x8xf32> -> tensor<16xi32>
  return
}

// -----

// Tests that loom.transpose rejects a perm without one entry per dimension (C1).
func.func @transpose_c1_perm_size(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm has 2 entries but the operand has rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.transpose %x perm = [1, 0] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

// Tests that loom.transpose rejects a perm that repeats a dimension (C1).
func.func @transpose_c1_repeated(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{perm [0, 1, 1] is not a permutation of [0, 3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.transpose %x perm = [0, 1, 1] : tensor<2x3x4xf32> -> tensor<2x3x3xf32>
  return
}

// -----

// Tests that loom.transpose rejects a perm entry beyond the rank (C1).
func.func @transpose_c1_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{perm [2, 0] is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.transpose %x perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// Tests that loom.transpose rejects a result type other than the permuted operand type.
func.func @transpose_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Tests that loom.slice rejects start, limit and stride without one entry per dimension (C1).
func.func @slice_c1_entries(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{start, limit and stride need 2 entries each}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x128xf32>
  return
}

// -----

// Tests that loom.slice rejects a negative start (C2).
func.func @slice_c2_negative_start(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{invalid slice [-1:128:1] of dimension 1 with size 192}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0, -1] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x129xf32>
  return
}

// -----

// Tests that loom.slice rejects a start beyond the limit (C2).
func.func @slice_c2_start_after_limit(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{invalid slice [130:128:1] of dimension 1 with size 192}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0, 130] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x0xf32>
  return
}

// -----

// Tests that loom.slice rejects a limit beyond the dimension (C2).
func.func @slice_c2_limit_past_end(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{invalid slice [0:3:1] of dimension 0 with size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0, 0] limit = [3, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<3x128xf32>
  return
}

// -----

// Tests that loom.slice rejects a zero stride (C2).
func.func @slice_c2_zero_stride(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{invalid slice [0:128:0] of dimension 1 with size 192}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0, 0] limit = [2, 128] stride = [1, 0] : tensor<2x192xf32> -> tensor<2x128xf32>
  return
}

// -----

// Tests that loom.slice rejects a result type other than the inferred one.
func.func @slice_result_shape(%x: tensor<2x192xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x64xf32>' are incompatible with return type(s) of operation 'tensor<2x128xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.slice %x start = [0, 0] limit = [2, 128] stride = [1, 2] : tensor<2x192xf32> -> tensor<2x128xf32>
  return
}

// -----

// Tests that loom.concat rejects an empty list of inputs (C1); the custom syntax
// cannot spell one, so the case uses the generic form.
func.func @concat_c1_no_inputs() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = "loom.concat"() <{dim = 0 : i64}> : () -> tensor<2xf32>
  return
}

// -----

// Tests that loom.concat rejects inputs of different ranks (C2).
func.func @concat_c2_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{input 1 differs from input 0 in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<2x6xf32>
  return
}

// -----

// Tests that loom.concat rejects inputs of different element types (C2).
func.func @concat_c2_element_type(%a: tensor<2x3xf32>, %b: tensor<2x5xf16>) {
  // expected-error @+2 {{input 1 differs from input 0 in rank or element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x5xf16>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that loom.concat rejects a dim beyond the rank (C2).
func.func @concat_c2_dim(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+2 {{dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = 2 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that loom.concat rejects a negative dim (C2).
func.func @concat_c2_negative_dim(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+2 {{dim -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = -1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that loom.concat rejects inputs whose sizes differ outside dim (C3).
func.func @concat_c3_sizes(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{input 1 has shape [4, 5], incompatible with [2, 3] outside dim 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Tests that loom.concat rejects a result type other than the inferred one.
func.func @concat_result_shape(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Tests that loom.gather rejects an axis beyond the table's rank (C1).
func.func @gather_c1_axis(%t: tensor<128x64xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.gather %t[%i] axis = 2 : (tensor<128x64xf32>, tensor<4xi64>) -> tensor<128x64x4xf32>
  return
}

// -----

// Tests that loom.gather rejects a negative axis (C1).
func.func @gather_c1_negative_axis(%t: tensor<128x64xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{axis -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.gather %t[%i] axis = -1 : (tensor<128x64xf32>, tensor<4xi64>) -> tensor<128x4xf32>
  return
}

// -----

// Tests that loom.gather rejects a result shape other than table[:axis] ++ indices ++ table[axis+1:] (C2).
func.func @gather_c2_result_shape(%t: tensor<128x64xf32>, %i: tensor<2x16xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<2x16x64xf32>' are incompatible with return type(s) of operation 'tensor<32x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.gather %t[%i] axis = 0 : (tensor<128x64xf32>, tensor<2x16xi64>) -> tensor<32x64xf32>
  return
}

// -----

// Tests that loom.gather rejects a result element type that differs from the table's (C2).
func.func @gather_c2_element_type(%t: tensor<128x64xf32>, %i: tensor<4xi32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x64xf32>' are incompatible with return type(s) of operation 'tensor<4x64xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.gather %t[%i] axis = 0 : (tensor<128x64xf32>, tensor<4xi32>) -> tensor<4x64xf16>
  return
}

// -----

// Tests that loom.gather rejects floating-point indices (operand type constraint).
func.func @gather_float_indices(%t: tensor<128x64xf32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values}}
  %y = loom.gather %t[%i] axis = 0 : (tensor<128x64xf32>, tensor<4xf32>) -> tensor<4x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Composite neural-network ops
//===----------------------------------------------------------------------===//

// Tests that loom.softmax rejects a result type that differs from the operand's (C1).
func.func @softmax_c1_type(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.softmax"(%x) <{axis = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf16>
  return
}

// -----

// Tests that loom.softmax rejects a non-floating-point type (C1).
func.func @softmax_c1_integer(%x: tensor<4x10xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.softmax %x axis = 1 : tensor<4x10xi32>
  return
}

// -----

// Tests that loom.softmax rejects an axis beyond the rank (C2).
func.func @softmax_c2_axis(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = loom.softmax %x axis = 2 : tensor<4x10xf32>
  return
}

// -----

// Tests that loom.softmax rejects a negative axis (C2).
func.func @softmax_c2_negative_axis(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = loom.softmax %x axis = -1 : tensor<4x10xf32>
  return
}

// -----

// Tests that loom.log_softmax rejects a result type that differs from the operand's (C1).
func.func @log_softmax_c1_type(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %y = "loom.log_softmax"(%x) <{axis = 1 : i64}> : (tensor<4x10xf32>) -> tensor<4x10xf16>
  return
}

// -----

// Tests that loom.log_softmax rejects a non-floating-point type (C1).
func.func @log_softmax_c1_integer(%x: tensor<4x10xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 64-bit float or 32-bit float or 16-bit float or bfloat16 type values}}
  %y = loom.log_softmax %x axis = 1 : tensor<4x10xi32>
  return
}

// -----

// Tests that loom.log_softmax rejects an axis beyond the rank (C2).
func.func @log_softmax_c2_axis(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = loom.log_softmax %x axis = 2 : tensor<4x10xf32>
  return
}

// -----

// Tests that loom.log_softmax rejects a negative axis (C2).
func.func @log_softmax_c2_negative_axis(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = loom.log_softmax %x axis = -1 : tensor<4x10xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects an axis beyond the rank (C1).
func.func @layer_norm_c1_axis(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{axis 3 is out of range for rank 3}}
  %y = loom.layer_norm %x, %g, %b axis = 3 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a scale without the normalized shape (C2).
func.func @layer_norm_c2_scale_shape(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{scale has shape [16, 64] but the normalized shape is [64]}}
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a bias without the normalized shape (C2).
func.func @layer_norm_c2_bias_shape(%x: tensor<2x16x64xf32>, %g: tensor<16x64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{bias has shape [64] but the normalized shape is [16, 64]}}
  %y = loom.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a zero epsilon (C3).
func.func @layer_norm_c3_zero_epsilon(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 0.0 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a negative epsilon (C3).
func.func @layer_norm_c3_negative_epsilon(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = -1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a scale of another element type (C4).
func.func @layer_norm_c4_param_element_type(%x: tensor<2x16x64xf32>, %g: tensor<64xbf16>, %b: tensor<64xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, scale, bias} have same element type}}
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xbf16>, tensor<64xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// Tests that loom.layer_norm rejects a result type that differs from x's (C4).
func.func @layer_norm_c4_result_type(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, y} have same type}}
  %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf16>
  return
}

// -----

// Tests that loom.rms_norm rejects an axis beyond the rank (C1).
func.func @rms_norm_c1_axis(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %y = loom.rms_norm %x, %g axis = 2 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that loom.rms_norm rejects a negative axis (C1).
func.func @rms_norm_c1_negative_axis(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %y = loom.rms_norm %x, %g axis = -1 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that loom.rms_norm rejects a scale without the normalized shape (C2).
func.func @rms_norm_c2_scale_shape(%x: tensor<4x64xf32>, %g: tensor<4x64xf32>) {
  // expected-error @+1 {{scale has shape [4, 64] but the normalized shape is [64]}}
  %y = loom.rms_norm %x, %g axis = 1 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that loom.rms_norm rejects a non-positive epsilon (C3).
func.func @rms_norm_c3_epsilon(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %y = loom.rms_norm %x, %g axis = 1 epsilon = 0.0 : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that loom.rms_norm rejects a scale of another element type (AllElementTypesMatch).
func.func @rms_norm_scale_element_type(%x: tensor<4x64xf32>, %g: tensor<64xf16>) {
  // expected-error @+1 {{failed to verify that all of {x, scale} have same element type}}
  %y = loom.rms_norm %x, %g axis = 1 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<64xf16>) -> tensor<4x64xf32>
  return
}

// -----

// Tests that loom.rms_norm rejects a result type that differs from x's (AllTypesMatch).
func.func @rms_norm_result_type(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, y} have same type}}
  %y = loom.rms_norm %x, %g axis = 1 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x32xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects an input of rank < 2 (C1).
func.func @batch_norm_c1_rank(%x: tensor<8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{input must have rank >= 2, got 1}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects statistics without dim(x, 1) elements (C2).
func.func @batch_norm_c2_channels(%x: tensor<8x4x28x28xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{scale must be 1-D with 4 elements (the channels) of the input's element type, got 'tensor<8xf32>'}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 : (tensor<8x4x28x28xf32>, tensor<8xf32>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects statistics that are not 1-D (C2).
func.func @batch_norm_c2_rank(%x: tensor<8x4x28x28xf32>, %s: tensor<4x1xf32>) {
  // expected-error @+1 {{scale must be 1-D with 4 elements (the channels)}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 : (tensor<8x4x28x28xf32>, tensor<4x1xf32>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects statistics of another element type (C2).
func.func @batch_norm_c2_element_type(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf16>) {
  // expected-error @+1 {{scale must be 1-D with 4 elements (the channels) of the input's element type, got 'tensor<4xf16>'}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 : (tensor<8x4x28x28xf32>, tensor<4xf16>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects a mean whose type differs from the scale's (C2).
func.func @batch_norm_c2_stats_differ(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>, %m: tensor<8xf32>) {
  // expected-error @+1 {{failed to verify that all of {scale, bias, mean, variance} have same type}}
  %y = "loom.batch_norm"(%x, %s, %s, %m, %s) <{epsilon = 1.0e-05 : f32}> : (tensor<8x4x28x28xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects a non-positive epsilon (C3).
func.func @batch_norm_c3_epsilon(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{epsilon must be positive}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = -1.0 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects a momentum outside [0, 1] (C4).
func.func @batch_norm_c4_momentum(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{momentum must be in [0, 1], got 1.5}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 momentum = 1.5 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf32>
  return
}

// -----

// Tests that loom.batch_norm rejects a result type that differs from x's (AllTypesMatch).
func.func @batch_norm_result_type(%x: tensor<8x4x28x28xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{failed to verify that all of {x, y} have same type}}
  %y = loom.batch_norm %x, %s, %s, %s, %s epsilon = 1.0e-05 : (tensor<8x4x28x28xf32>, tensor<4xf32>) -> tensor<8x4x28x28xf16>
  return
}

// -----

// Tests that loom.batch_norm_stats rejects an input of rank < 2 (C1).
func.func @batch_norm_stats_c1_rank(%x: tensor<8xf32>) {
  // expected-error @+2 {{input must have rank >= 2, got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %m, %v = loom.batch_norm_stats %x : tensor<8xf32> -> tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// Tests that loom.batch_norm_stats rejects statistics without dim(x, 1) elements (C2).
func.func @batch_norm_stats_c2_channels(%x: tensor<8x4x28x28xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>', 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>', 'tensor<8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %m, %v = loom.batch_norm_stats %x : tensor<8x4x28x28xf32> -> tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// Tests that loom.batch_norm_stats rejects a variance of another element type (C2).
func.func @batch_norm_stats_c2_element_type(%x: tensor<8x4x28x28xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>', 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4xf32>', 'tensor<4xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %m, %v = loom.batch_norm_stats %x : tensor<8x4x28x28xf32> -> tensor<4xf32>, tensor<4xf16>
  return
}

// -----

// Tests that loom.max_pool2d rejects an input that is not rank 4 (C1).
func.func @max_pool2d_c1_rank(%x: tensor<8x28x28xf32>) {
  // expected-error @+2 {{input must have rank 4 (NCHW), got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x28x28xf32> -> tensor<8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects a kernel without 2 entries (C2).
func.func @max_pool2d_c2_kernel_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects strides without 2 entries (C2).
func.func @max_pool2d_c2_strides_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects padding without 4 entries (C2).
func.func @max_pool2d_c2_padding_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects a zero kernel size (C2).
func.func @max_pool2d_c2_zero_kernel(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 0, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects a zero stride (C2).
func.func @max_pool2d_c2_zero_stride(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 0>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects negative padding (C2).
func.func @max_pool2d_c2_negative_padding(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{padding must be non-negative and smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, -1, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects padding as large as the kernel (C2).
func.func @max_pool2d_c2_padding_not_smaller(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{padding must be non-negative and smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 2, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x15x15xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects a kernel larger than the padded input (C3).
func.func @max_pool2d_c3_kernel_fits(%x: tensor<8x8x4x4xf32>) {
  // expected-error @+2 {{kernel [6, 2] does not fit in padded input [8, 8, 4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 6, 2>, strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>} : tensor<8x8x4x4xf32> -> tensor<8x8x1x1xf32>
  return
}

// -----

// Tests that loom.max_pool2d rejects a result type other than the inferred one.
func.func @max_pool2d_result_shape(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x8x14x14xf32>' are incompatible with return type(s) of operation 'tensor<8x8x28x28xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x28x28xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects an input that is not rank 4 (C1).
func.func @avg_pool2d_c1_rank(%x: tensor<8x28x28xf32>) {
  // expected-error @+2 {{input must have rank 4 (NCHW), got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x28x28xf32> -> tensor<8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects a kernel without 2 entries (C2).
func.func @avg_pool2d_c2_kernel_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects strides without 2 entries (C2).
func.func @avg_pool2d_c2_strides_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects padding without 4 entries (C2).
func.func @avg_pool2d_c2_padding_size(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides need 2 entries and padding 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects a zero kernel size (C2).
func.func @avg_pool2d_c2_zero_kernel(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 0, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects a zero stride (C2).
func.func @avg_pool2d_c2_zero_stride(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{kernel and strides must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 0>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects negative padding (C2).
func.func @avg_pool2d_c2_negative_padding(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{padding must be non-negative and smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, -1, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects padding as large as the kernel (C2).
func.func @avg_pool2d_c2_padding_not_smaller(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{padding must be non-negative and smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 2, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x15x15xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects a kernel larger than the padded input (C3).
func.func @avg_pool2d_c3_kernel_fits(%x: tensor<8x8x4x4xf32>) {
  // expected-error @+2 {{kernel [6, 2] does not fit in padded input [8, 8, 4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 6, 2>, strides = array<i64: 1, 1>, padding = array<i64: 1, 0, 0, 0>} : tensor<8x8x4x4xf32> -> tensor<8x8x1x1xf32>
  return
}

// -----

// Tests that loom.avg_pool2d rejects a result type other than the inferred one.
func.func @avg_pool2d_result_shape(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x8x14x14xf32>' are incompatible with return type(s) of operation 'tensor<8x8x28x28xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x28x28xf32>
  return
}

// -----

// Tests that loom.random rejects an empty uniform interval (C1).
func.func @random_c1_empty_interval(%seed: tensor<i64>) {
  // expected-error @+1 {{a uniform distribution needs a < b, got [1.000000e+00, 1.000000e+00)}}
  %r = loom.random %seed "uniform" a = 1.0 b = 1.0 stream = 0 : tensor<i64>, tensor<4xf32>
  return
}

// -----

// Tests that loom.random rejects a negative standard deviation (C1).
func.func @random_c1_negative_scale(%seed: tensor<i64>) {
  // expected-error @+1 {{a normal distribution needs a standard deviation b >= 0, got -1.000000e+00}}
  %r = loom.random %seed "normal" a = 0.0 b = -1.0 stream = 0 : tensor<i64>, tensor<4xf32>
  return
}

// -----

// Tests that loom.random rejects an unknown distribution (C1).
func.func @random_c1_distribution(%seed: tensor<i64>) {
  // expected-error @+1 {{distribution must be 'uniform' or 'normal', got 'poisson'}}
  %r = loom.random %seed "poisson" a = 0.0 b = 1.0 stream = 0 : tensor<i64>, tensor<4xf32>
  return
}

// -----

// Tests that loom.random rejects a seed that is not a 0-D i64 tensor (C2).
func.func @random_c2_seed(%seed: tensor<2xi64>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of 64-bit signless integer values}}
  %r = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 0 : tensor<2xi64>, tensor<4xf32>
  return
}

// -----

// Tests that loom.dropout rejects a ratio of 1 (C1).
func.func @dropout_c1_ratio_one(%x: tensor<4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{ratio must be in [0, 1), got 1.000000e+00}}
  %y = loom.dropout %x, %seed ratio = 1.0 stream = 0 : tensor<4xf32>, tensor<i64>
  return
}

// -----

// Tests that loom.dropout rejects a negative ratio (C1).
func.func @dropout_c1_negative_ratio(%x: tensor<4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{ratio must be in [0, 1), got -5.000000e-01}}
  %y = loom.dropout %x, %seed ratio = -0.5 stream = 0 : tensor<4xf32>, tensor<i64>
  return
}

// -----

// Tests that loom.dropout rejects a seed that is not i64 (C2).
func.func @dropout_c2_seed_type(%x: tensor<4xf32>, %seed: tensor<i32>) {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %y = loom.dropout %x, %seed ratio = 0.1 stream = 0 : tensor<4xf32>, tensor<i32>
  return
}

// -----

// Tests that loom.dropout rejects a seed that is not 0-D (C2).
func.func @dropout_c2_seed_rank(%x: tensor<4xf32>, %seed: tensor<1xi64>) {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %y = loom.dropout %x, %seed ratio = 0.1 stream = 0 : tensor<4xf32>, tensor<1xi64>
  return
}

// -----

// Tests that loom.dropout rejects a result type that differs from x's (AllTypesMatch).
func.func @dropout_result_type(%x: tensor<4xf32>, %seed: tensor<i64>) {
  // expected-error @+1 {{failed to verify that all of {x, y} have same type}}
  %y = "loom.dropout"(%x, %seed) <{ratio = 0.1 : f32, stream = 0 : i64}> : (tensor<4xf32>, tensor<i64>) -> tensor<4xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// Tests that loom.cross_entropy rejects rank-1 logits (C1).
func.func @cross_entropy_c1_rank(%l: tensor<10xf32>, %y: tensor<i64>) {
  // expected-error @+2 {{logits must have rank >= 2 ([N, C, ...]), got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = mean : (tensor<10xf32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

// Tests that loom.cross_entropy rejects labels whose shape is not that of logits without dimension 1 (C2).
func.func @cross_entropy_c2_labels_shape(%l: tensor<32x10xf32>, %y: tensor<10xi64>) {
  // expected-error @+2 {{labels have shape [10] but logits [32, 10] need labels [32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = mean : (tensor<32x10xf32>, tensor<10xi64>) -> tensor<f32>
  return
}

// -----

// Tests that loom.cross_entropy rejects labels that miss the spatial dimensions of logits (C2).
func.func @cross_entropy_c2_labels_spatial(%l: tensor<4x10x8x8xf32>, %y: tensor<4xi64>) {
  // expected-error @+2 {{labels have shape [4] but logits [4, 10, 8, 8] need labels [4, 8, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = sum : (tensor<4x10x8x8xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

// Tests that loom.cross_entropy with reduction mean rejects a result that is not 0-D (C3).
func.func @cross_entropy_c3_mean_not_scalar(%l: tensor<32x10xf32>, %y: tensor<32xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = mean : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<32xf32>
  return
}

// -----

// Tests that loom.cross_entropy with reduction none rejects a result without the labels' shape (C3).
func.func @cross_entropy_c3_none_shape(%l: tensor<32x10xf32>, %y: tensor<32xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<32xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = none {ignore_index = -100 : i64} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
  return
}

// -----

// Tests that loom.cross_entropy rejects a result element type other than the
// logits' (f32 for 16-bit logits) (C3).
func.func @cross_entropy_c3_element_type(%l: tensor<32x10xbf16>, %y: tensor<32xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<bf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = sum : (tensor<32x10xbf16>, tensor<32xi64>) -> tensor<bf16>
  return
}

// -----

func.func @cross_entropy_c3_f64(%l: tensor<32x10xf32>, %y: tensor<32xi64>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<f64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %r = loom.cross_entropy %l, %y reduction = sum : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f64>
  return
}

// -----

// Tests that loom.cross_entropy rejects floating-point labels (operand type constraint).
func.func @cross_entropy_float_labels(%l: tensor<32x10xf32>, %y: tensor<32xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values}}
  %r = loom.cross_entropy %l, %y reduction = mean : (tensor<32x10xf32>, tensor<32xf32>) -> tensor<f32>
  return
}

// -----

// Tests that loom.mse rejects prediction and target of different shapes (C1).
func.func @mse_c1_shape(%p: tensor<32x1xf32>, %t: tensor<32xf32>) {
  // expected-error @+2 {{prediction 'tensor<32x1xf32>' and target 'tensor<32xf32>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %l = loom.mse %p, %t reduction = mean : (tensor<32x1xf32>, tensor<32xf32>) -> tensor<f32>
  return
}

// -----

// Tests that loom.mse rejects prediction and target of different element types (C1).
func.func @mse_c1_element_type(%p: tensor<32x1xf32>, %t: tensor<32x1xf16>) {
  // expected-error @+2 {{prediction 'tensor<32x1xf32>' and target 'tensor<32x1xf16>' differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %l = loom.mse %p, %t reduction = sum : (tensor<32x1xf32>, tensor<32x1xf16>) -> tensor<f32>
  return
}

// -----

// Tests that loom.mse with reduction mean rejects a result that is not 0-D (C2).
func.func @mse_c2_mean_not_scalar(%p: tensor<32x1xf32>, %t: tensor<32x1xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<32x1xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %l = loom.mse %p, %t reduction = mean : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x1xf32>
  return
}

// -----

// Tests that loom.mse with reduction none rejects a result without the prediction's type (C2).
func.func @mse_c2_none_type(%p: tensor<32x1xf32>, %t: tensor<32x1xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<32x1xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %l = loom.mse %p, %t reduction = none : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Ops the gradients need
//===----------------------------------------------------------------------===//

// Tests that loom.scatter_add rejects an axis outside the result's rank (C1).
func.func @scatter_add_c1_axis(%u: tensor<3x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.scatter_add' op axis 2 is out of range for rank 2}}
  %t = loom.scatter_add %u[%i] axis = 2 : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
  return
}

// -----

// Tests that loom.scatter_add rejects updates whose shape does not match the result and indices (C2).
func.func @scatter_add_c2_shape(%u: tensor<3x5xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.scatter_add' op updates have shape [3, 5] but result [10, 4] and indices [3] need [3, 4]}}
  %t = loom.scatter_add %u[%i] axis = 0 : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<10x4xf32>
  return
}

// -----

// Tests that loom.scatter_add rejects updates and result of different element types (C3).
func.func @scatter_add_c3_element_type(%u: tensor<3x4xf16>, %i: tensor<3xi64>) {
  // expected-error @+1 {{'loom.scatter_add' op updates and result element types differ}}
  %t = loom.scatter_add %u[%i] axis = 0 : (tensor<3x4xf16>, tensor<3xi64>) -> tensor<10x4xf32>
  return
}

// -----

// Tests that loom.pad rejects padding lists without one entry per dimension (C1).
func.func @pad_c1_size(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{low, high and interior need 2 entries each}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.pad %x low = [0] high = [0, 0] interior = [0, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Tests that loom.pad rejects negative padding (C2).
func.func @pad_c2_negative(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{padding of dimension 1 must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.pad %x low = [0, 0] high = [0, 0] interior = [0, -1] : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

// Tests that loom.pad rejects a result without the padded shape (C3).
func.func @pad_c3_shape(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<3x7xf32>' are incompatible with return type(s) of operation 'tensor<3x6xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.pad %x low = [1, 0] high = [0, 2] interior = [0, 1] : tensor<2x3xf32> -> tensor<3x6xf32>
  return
}

// -----

// Tests that loom.im2col rejects an image that is not rank 4 (C1).
func.func @im2col_c1_rank(%x: tensor<4x9x9xf32>) {
  // expected-error @+2 {{the image must have rank 4 (NCHW), got 3}}
  // expected-error @+1 {{'loom.im2col' op failed to infer returned types}}
  %r = loom.im2col %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<4x9x9xf32> -> tensor<36x49xf32>
  return
}

// -----

// Tests that loom.im2col rejects a kernel without 2 positive entries (C2).
func.func @im2col_c2_kernel(%x: tensor<1x4x9x9xf32>) {
  // expected-error @+2 {{kernel, strides and dilations need 2 positive entries and padding 4 non-negative ones}}
  // expected-error @+1 {{'loom.im2col' op failed to infer returned types}}
  %r = loom.im2col %x {kernel = array<i64: 3, 0>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x4x9x9xf32> -> tensor<36x49xf32>
  return
}

// -----

// Tests that loom.im2col rejects a kernel larger than the padded image (C3).
func.func @im2col_c3_fit(%x: tensor<1x4x2x2xf32>) {
  // expected-error @+2 {{the dilated [3, 3] kernel does not fit in the padded image [1, 4, 2, 2]}}
  // expected-error @+1 {{'loom.im2col' op failed to infer returned types}}
  %r = loom.im2col %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x4x2x2xf32> -> tensor<36x1xf32>
  return
}

// -----

// Tests that loom.col2im rejects cols that are not rank 2 (C1).
func.func @col2im_c1_rank(%c: tensor<36x7x7xf32>) {
  // expected-error @+1 {{cols must have rank 2, got 3}}
  %r = loom.col2im %c {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<36x7x7xf32> -> tensor<1x4x9x9xf32>
  return
}

// -----

// Tests that loom.col2im rejects negative padding (C2).
func.func @col2im_c2_padding(%c: tensor<36x49xf32>) {
  // expected-error @+1 {{kernel, strides and dilations need 2 positive entries and padding 4 non-negative ones}}
  %r = loom.col2im %c {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>} : tensor<36x49xf32> -> tensor<1x4x9x9xf32>
  return
}

// -----

// Tests that loom.col2im rejects cols of the wrong shape (C3).
func.func @col2im_c3_shape(%c: tensor<36x48xf32>) {
  // expected-error @+1 {{im2col of a [1, 4, 9, 9] result has shape [36, 49], not the [36, 48] of cols}}
  %r = loom.col2im %c {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<36x48xf32> -> tensor<1x4x9x9xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects a filter that is not rank 4 (C1).
func.func @conv2d_input_grad_c1_rank(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op result, filter and dy must have rank 4}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x3x3xf32>) -> tensor<2x1x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects mixed element types (C1).
func.func @conv2d_input_grad_c1_element_type(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x1x3x3xf16>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op result, filter and dy must have the same element type}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x1x3x3xf16>) -> tensor<2x1x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects strides without 2 entries (C2).
func.func @conv2d_input_grad_c2_size(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op strides and dilations need 2 entries and padding 4}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x1x3x3xf32>) -> tensor<2x1x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects negative padding (C2).
func.func @conv2d_input_grad_c2_negative(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op strides and dilations must be positive and padding non-negative}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x1x3x3xf32>) -> tensor<2x1x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects groups that do not divide the channels (C3).
func.func @conv2d_input_grad_c3_groups(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op groups (3) must divide input channels (3) and output channels (8)}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 3 : i64} : (tensor<2x8x26x26xf32>, tensor<8x1x3x3xf32>) -> tensor<2x3x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects a filter with the wrong channels per group (C3).
func.func @conv2d_input_grad_c3_filter_channels(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x2x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op filter has 2 input channels per group, expected 1}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x2x3x3xf32>) -> tensor<2x1x28x28xf32>
  return
}

// -----

// Tests that loom.conv2d_input_grad rejects a result whose convolution does not have dy's shape (C4).
func.func @conv2d_input_grad_c4_shape(%dy: tensor<2x8x26x26xf32>, %w: tensor<8x1x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op the convolution of a [2, 1, 27, 28] input with a [8, 1, 3, 3] filter does not have the shape [2, 8, 26, 26] of dy}}
  %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x8x26x26xf32>, tensor<8x1x3x3xf32>) -> tensor<2x1x27x28xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects an input that is not rank 4 (C1).
func.func @conv2d_filter_grad_c1_rank(%x: tensor<1x28x28xf32>, %dy: tensor<2x8x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op x, result and dy must have rank 4}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<1x28x28xf32>, tensor<2x8x26x26xf32>) -> tensor<8x1x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects mixed element types (C1).
func.func @conv2d_filter_grad_c1_element_type(%x: tensor<2x1x28x28xf32>, %dy: tensor<2x8x26x26xf16>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op x, result and dy must have the same element type}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<2x8x26x26xf16>) -> tensor<8x1x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects padding without 4 entries (C2).
func.func @conv2d_filter_grad_c2_size(%x: tensor<2x1x28x28xf32>, %dy: tensor<2x8x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op strides and dilations need 2 entries and padding 4}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<2x8x26x26xf32>) -> tensor<8x1x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects a zero dilation (C2).
func.func @conv2d_filter_grad_c2_zero_dilation(%x: tensor<2x1x28x28xf32>, %dy: tensor<2x8x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op strides and dilations must be positive and padding non-negative}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 0, 1>} : (tensor<2x1x28x28xf32>, tensor<2x8x26x26xf32>) -> tensor<8x1x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects groups that do not divide the channels (C3).
func.func @conv2d_filter_grad_c3_groups(%x: tensor<2x4x28x28xf32>, %dy: tensor<2x6x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op groups (4) must divide input channels (4) and output channels (6)}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x28x28xf32>, tensor<2x6x26x26xf32>) -> tensor<6x1x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects a result with the wrong channels per group (C3).
func.func @conv2d_filter_grad_c3_filter_channels(%x: tensor<2x4x28x28xf32>, %dy: tensor<2x6x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op result has 4 input channels per group, expected 2}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x28x28xf32>, tensor<2x6x26x26xf32>) -> tensor<6x4x3x3xf32>
  return
}

// -----

// Tests that loom.conv2d_filter_grad rejects a result whose convolution does not have dy's shape (C4).
func.func @conv2d_filter_grad_c4_shape(%x: tensor<2x1x28x28xf32>, %dy: tensor<2x8x26x26xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op the convolution of a [2, 1, 28, 28] input with a [8, 1, 5, 5] filter does not have the shape [2, 8, 26, 26] of dy}}
  %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x1x28x28xf32>, tensor<2x8x26x26xf32>) -> tensor<8x1x5x5xf32>
  return
}

// -----

// Tests that loom.max_pool2d_argmax rejects an input that is not rank 4 (C1).
func.func @max_pool2d_argmax_c1_rank(%x: tensor<8x28x28xf32>) {
  // expected-error @+2 {{input must have rank 4 (NCHW), got 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x28x28xf32> -> tensor<8x14x14xi64>
  return
}

// -----

// Tests that loom.max_pool2d_argmax rejects padding as large as the kernel (C2).
func.func @max_pool2d_argmax_c2_padding(%x: tensor<1x1x4x4xf32>) {
  // expected-error @+2 {{padding must be non-negative and smaller than the kernel}}
  // expected-error @+1 {{failed to infer returned types}}
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 2, 0, 0, 0>} : tensor<1x1x4x4xf32> -> tensor<1x1x3x2xi64>
  return
}

// -----

// Tests that loom.max_pool2d_argmax rejects a kernel larger than the padded input (C3).
func.func @max_pool2d_argmax_c3_fit(%x: tensor<1x1x2x2xf32>) {
  // expected-error @+2 {{kernel [3, 3] does not fit in padded input [1, 1, 2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>} : tensor<1x1x2x2xf32> -> tensor<1x1x1x1xi64>
  return
}

// -----

// Tests that loom.max_pool2d_argmax rejects a result that is not i64 (C4).
func.func @max_pool2d_argmax_c4_element_type(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 64-bit signless integer values}}
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xi32>
  return
}

// -----

// Tests that loom.max_pool2d_argmax rejects a result without the pooled shape (C4).
func.func @max_pool2d_argmax_c4_shape(%x: tensor<8x8x28x28xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<8x8x14x14xi64>' are incompatible with return type(s) of operation 'tensor<8x8x28x28xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %i = loom.max_pool2d_argmax %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x28x28xi64>
  return
}

// -----

// Tests that loom.max_pool2d_grad rejects argmax of another shape than dy (C1).
func.func @max_pool2d_grad_c1_shape(%g: tensor<1x2x2x2xf32>, %i: tensor<1x2x2x1xi64>) {
  // expected-error @+1 {{dy [1, 2, 2, 2] and argmax [1, 2, 2, 1] must have one shape of rank 4}}
  %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x2x2x2xf32>, tensor<1x2x2x1xi64>) -> tensor<1x2x4x4xf32>
  return
}

// -----

// Tests that loom.max_pool2d_grad rejects padding as large as the kernel (C2).
func.func @max_pool2d_grad_c2_padding(%g: tensor<1x1x3x2xf32>, %i: tensor<1x1x3x2xi64>) {
  // expected-error @+1 {{padding must be non-negative and smaller than the kernel}}
  %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 2, 0, 0, 0>} : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xi64>) -> tensor<1x1x4x4xf32>
  return
}

// -----

// Tests that loom.max_pool2d_grad rejects a result of another element type (C3).
func.func @max_pool2d_grad_c3_element_type(%g: tensor<1x1x2x2xf32>, %i: tensor<1x1x2x2xi64>) {
  // expected-error @+1 {{result element type 'f16' differs from dy's 'f32'}}
  %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) -> tensor<1x1x4x4xf16>
  return
}

// -----

// Tests that loom.max_pool2d_grad rejects a result that does not pool to dy's shape (C3).
func.func @max_pool2d_grad_c3_shape(%g: tensor<1x1x2x2xf32>, %i: tensor<1x1x2x2xi64>) {
  // expected-error @+1 {{pooling the result [1, 1, 6, 6] gives [1, 1, 3, 3], not dy's [1, 1, 2, 2]}}
  %dx = loom.max_pool2d_grad %g[%i] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xi64>) -> tensor<1x1x6x6xf32>
  return
}

// -----

// Tests that a channels-last loom.conv2d has one group (C5).
func.func @conv2d_c5_channels_last_groups(%x: tensor<1x5x5x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{a channels-last convolution has one group}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x5x5x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x5x5x4xf32>
  return
}

// -----

// Tests that a channels-last loom.conv2d reads its input's channels from
// dimension 3 (C3): an NCHW input is refused.
func.func @conv2d_c3_channels_last_layout(%x: tensor<1x4x5x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{filter has 4 input channels per group, expected 5}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = loom.conv2d %x, %w {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x4x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<1x5x5x4xf32>
  return
}

// -----

// Tests that a channels-last loom.conv2d_input_grad has one group (C5).
func.func @conv2d_input_grad_c5_channels_last_groups(%dy: tensor<1x5x5x4xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{'loom.conv2d_input_grad' op a channels-last convolution has one group}}
  %dx = loom.conv2d_input_grad %dy, %w {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x5x5x4xf32>, tensor<4x2x3x3xf32>) -> tensor<1x5x5x4xf32>
  return
}

// -----

// Tests that a channels-last loom.conv2d_filter_grad checks NHWC shapes
// (C4): dy's channels are its last dimension.
func.func @conv2d_filter_grad_c4_channels_last(%x: tensor<1x5x5x4xf32>, %dy: tensor<1x4x5x5xf32>) {
  // expected-error @+1 {{'loom.conv2d_filter_grad' op the convolution of a [1, 4, 5, 5] input with a [4, 4, 3, 3] filter does not have the shape [1, 5, 4, 5] of dy}}
  %dw = loom.conv2d_filter_grad %x, %dy {channels_last, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x5x5x4xf32>, tensor<1x4x5x5xf32>) -> tensor<4x4x3x3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// -----

// Tests that a collective's axis must be an axis of the module's mesh (C2).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @all_reduce_c2_axis(%x: tensor<4xf32>) {
    // expected-error @+1 {{'loom.all_reduce' op axis 'tp' is not an axis of the module's mesh (loom.mesh_axes) (C2)}}
    %y = loom.all_reduce %x over "tp" reduce = sum : tensor<4xf32>
    return
  }
}

// -----

// Tests that a module without a mesh has no collectives (C2).
func.func @all_gather_c2_no_mesh(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.all_gather' op axis 'dp' is not an axis of the module's mesh (loom.mesh_axes) (C2)}}
  %y = loom.all_gather %x over "dp" : tensor<4xf32> -> tensor<8xf32>
  return
}

// -----

// Tests that loom.all_reduce reduces floats only (C1).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @all_reduce_c1_int(%x: tensor<4xi64>) {
    // expected-error @+1 {{'loom.all_reduce' op operand #0 must be statically shaped tensor of}}
    %y = loom.all_reduce %x over "dp" reduce = sum : tensor<4xi64>
    return
  }
}

// -----

// Tests that loom.reduce_scatter's operand is n blocks of its result (C3).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 4>} {
  func.func @reduce_scatter_c3_blocks(%x: tensor<8x3xf32>) {
    // expected-error @+1 {{'loom.reduce_scatter' op x [8, 3] is not 4 blocks of [4, 3] along dimension 0 (C3)}}
    %y = loom.reduce_scatter %x over "dp" reduce = sum : tensor<8x3xf32> -> tensor<4x3xf32>
    return
  }
}

// -----

// Tests that loom.reduce_scatter does not take the maximum (C4).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @reduce_scatter_c4_max(%x: tensor<8xf32>) {
    // expected-error @+1 {{'loom.reduce_scatter' op reduce is sum or mean (C4)}}
    %y = loom.reduce_scatter %x over "dp" reduce = max : tensor<8xf32> -> tensor<4xf32>
    return
  }
}

// -----

// Tests that loom.all_gather's result is n blocks of its operand (C3).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @all_gather_c3_blocks(%x: tensor<4x2xf32>) {
    // expected-error @+1 {{'loom.all_gather' op y [8, 3] is not 2 blocks of [4, 2] along dimension 0 (C3)}}
    %y = loom.all_gather %x over "dp" : tensor<4x2xf32> -> tensor<8x3xf32>
    return
  }
}

// -----

// Tests that loom.rank_slice keeps the element type and rank (C1).
module attributes {loom.mesh_axes = ["dp"], loom.mesh_shape = array<i64: 2>} {
  func.func @rank_slice_c1_type(%x: tensor<8xf32>) {
    // expected-error @+1 {{'loom.rank_slice' op x and y need the same element type and rank, at least 1 (C1)}}
    %y = loom.rank_slice %x over "dp" : tensor<8xf32> -> tensor<4xf16>
    return
  }
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// -----

// Tests that loom.attention rejects queries that are not rank 4 (C1).
func.func @attention_c1_rank(%q: tensor<4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{q has rank 3; attention takes [batch, heads, sequence, head dim] tensors (C1)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects an lse that is not f32 (C1).
func.func @attention_c1_lse(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{lse is f32, not 'f64' (C1)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf64>)
  return
}

// -----

// Tests that loom.attention rejects key/value heads that do not divide the
// query heads (C2).
func.func @attention_c2_heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x3x8x16xf32>, %v: tensor<2x3x8x16xf32>) {
  // expected-error @+1 {{the 3 key/value heads do not divide the 4 query heads (C2)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x3x8x16xf32>, tensor<2x3x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects keys whose head dim differs (C2).
func.func @attention_c2_dim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x8xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{k [2, 2, 8, 8] does not match q [2, 4, 8, 16] in batch and head dim (C2)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects an output of the wrong shape (C3).
func.func @attention_c3(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x32xf32>) {
  // expected-error @+1 {{out is [2, 4, 8, 16], expected [2, 4, 8, 32] (C3)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x32xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects a mask that does not broadcast to the
// scores (C4).
func.func @attention_c4(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %m: tensor<2x1x1x7xi1>) {
  // expected-error @+1 {{mask [2, 1, 1, 7] does not broadcast to the scores [2, 4, 8, 8] (C4)}}
  %o, %l = loom.attention %q, %k, %v mask %m {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x1x1x7xi1>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects causal attention with fewer queries
// than keys (C5).
func.func @attention_c5_causal(%q: tensor<2x4x4x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{causal attention needs as many queries as keys, not 4 and 8 (C5)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64, causal} : (tensor<2x4x4x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x4x16xf32>, tensor<2x4x4xf32>)
  return
}

// -----

// Tests that loom.attention rejects a window without causal (C5).
func.func @attention_c5_window(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{window 4 needs causal attention and must be >= 0 (C5)}}
  %o, %l = loom.attention %q, %k, %v {scale = 1.0 : f64, window = 4 : i64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects a scale that is not finite (C6).
func.func @attention_c6(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) {
  // expected-error @+1 {{scale is not finite (C6)}}
  %o, %l = loom.attention %q, %k, %v {scale = 0x7FF0000000000000 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects document ids that are not [B, T] (C7).
func.func @attention_c7_shape(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %s: tensor<2x4xi64>) {
  // expected-error @+1 {{segments is [2, 4], expected [2, 8] ([batch, queries]) (C7)}}
  %o, %l = loom.attention %q, %k, %v segments %s {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention refuses document ids with fewer keys than
// queries (C7).
func.func @attention_c7_keys(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x6x16xf32>, %v: tensor<2x2x6x16xf32>, %s: tensor<2x8xi64>) {
  // expected-error @+1 {{segments need as many queries as keys, not 8 and 6 (C7)}}
  %o, %l = loom.attention %q, %k, %v segments %s {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x6x16xf32>, tensor<2x2x6x16xf32>, tensor<2x8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  return
}

// -----

// Tests that loom.attention rejects a dropout of 1 (C8).
func.func @attention_c8_ratio(%q: tensor<1x1x4x2xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{dropout must be in [0, 1), got 1.000000e+00 (C8)}}
  %o, %l = loom.attention %q, %q, %q seed %s {scale = 1.0 : f64, dropout = 1.0 : f32} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<i64>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4xf32>)
  return
}

// -----

// Tests that loom.attention refuses a dropout without a seed (C8).
func.func @attention_c8_no_seed(%q: tensor<1x1x4x2xf32>) {
  // expected-error @+1 {{dropout needs a seed operand (C8)}}
  %o, %l = loom.attention %q, %q, %q {scale = 1.0 : f64, dropout = 0.5 : f32} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4xf32>)
  return
}

// -----

// Tests that loom.attention refuses a seed without a dropout (C8).
func.func @attention_c8_seed_only(%q: tensor<1x1x4x2xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{has a seed but no dropout (C8)}}
  %o, %l = loom.attention %q, %q, %q seed %s {scale = 1.0 : f64} : (tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>, tensor<i64>) -> (tensor<1x1x4x2xf32>, tensor<1x1x4xf32>)
  return
}

// -----

// Tests that loom.attention_grad rejects a dq whose type is not q's (C2).
func.func @attention_grad_c2(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8xf32>) {
  // expected-error @+1 {{dq has type 'tensor<2x4x8x8xf32>', expected 'tensor<2x4x8x16xf32>' (C2)}}
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %l, %o {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x8xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

// -----

// Tests that loom.attention_grad has a dbias exactly when it has a bias (C3).
func.func @attention_grad_c3(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8xf32>, %b: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{dbias is present exactly when bias is (C3)}}
  %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %l, %o bias %b {scale = 1.0 : f64} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>, tensor<2x4x8x16xf32>, tensor<1x4x8x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
  return
}

//===----------------------------------------------------------------------===//
// The fused language-model head
//===----------------------------------------------------------------------===//

// -----

// Tests that loom.linear_cross_entropy rejects a weight that does not
// contract with x (C1).
func.func @linear_cross_entropy_c1_contract(%x: tensor<6x4xf32>, %w: tensor<10x5xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{w 'tensor<10x5xf32>' does not contract with x 'tensor<6x4xf32>' ([V, C] with transpose_w) (C1)}}
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w} : (tensor<6x4xf32>, tensor<10x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy rejects x and w of different
// element types (C1).
func.func @linear_cross_entropy_c1_types(%x: tensor<6x4xf32>, %w: tensor<4x10xf64>, %y: tensor<6xi64>) {
  // expected-error @+1 {{x and w are both f32, f64, bf16 or f16, not 'f32' and 'f64' (C1)}}
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<4x10xf64>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy rejects labels that are not one per
// row (C2).
func.func @linear_cross_entropy_c2(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %y: tensor<5xi64>) {
  // expected-error @+1 {{labels 'tensor<5xi64>' do not give one label to each of the 6 rows of x (C2)}}
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean : (tensor<6x4xf32>, tensor<4x10xf32>, tensor<5xi64>) -> (tensor<f32>, tensor<6xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy rejects a loss whose shape does not
// follow the reduction (C3).
func.func @linear_cross_entropy_c3(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %y: tensor<6xi64>) {
  // expected-error @+1 {{loss is 'tensor<f32>'; for reduction none it is 'f32' of shape [N] (C3)}}
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = none : (tensor<6x4xf32>, tensor<4x10xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy rejects a 16-bit head whose loss
// is not f32 (C3).
func.func @linear_cross_entropy_c3_bf16(%x: tensor<6x4xbf16>, %w: tensor<4x10xbf16>, %y: tensor<6xi64>) {
  // expected-error @+1 {{loss is 'tensor<bf16>'; for reduction mean it is 'f32' of shape [] (C3)}}
  %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean : (tensor<6x4xbf16>, tensor<4x10xbf16>, tensor<6xi64>) -> (tensor<bf16>, tensor<6xf32>)
  return
}

// -----

// Tests that loom.linear_cross_entropy_grad rejects a dw that does not
// have w's type (C2).
func.func @linear_cross_entropy_grad_c2(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %y: tensor<6xi64>, %lse: tensor<6xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{dx and dw have the types of x and w, not 'tensor<6x4xf32>' and 'tensor<10x4xf32>' (C2)}}
  %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = sum : (tensor<6x4xf32>, tensor<4x10xf32>, tensor<6xi64>, tensor<6xf32>, tensor<f32>) -> (tensor<6x4xf32>, tensor<10x4xf32>)
  return
}
