//===- LoomOps.td - Operations of the loom dialect ----------*- tablegen -*-===//
//
// Each op documents its semantics, an example, its lifecycle (which pass
// creates it and which consumes it) and numbered constraints; the verifier
// (or the type inference that doubles as one) cites them as (C1), (C2), ...
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMOPS_TD

include "loom/Dialect/Loom/IR/LoomDialect.td"
include "loom/Dialect/Loom/IR/LoomEnums.td"
include "loom/Dialect/Loom/IR/LoomInterfaces.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Loom_FloatTensor : StaticShapeTensorOf<[F64, F32, F16, BF16]>;
def Loom_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
def Loom_BoolTensor : StaticShapeTensorOf<[I1]>;
def Loom_NumericTensor : StaticShapeTensorOf<[F64, F32, F16, BF16, I64, I32, I8]>;
def Loom_Tensor : StaticShapeTensorOf<[F64, F32, F16, BF16, I64, I32, I8, I1]>;
def Loom_SeedTensor : TensorRankOf<[I64], [0]>;
def Loom_DenseElementsAttr : ElementsAttrBase<
    CPred<"::llvm::isa<::mlir::DenseElementsAttr>($_self)">,
    "dense elements attribute">;

//===----------------------------------------------------------------------===//
// Traits carrying fusion kind and precision class
//===----------------------------------------------------------------------===//

class Loom_FusionKindTrait<string kind>
    : ParamNativeOpTrait<"FusionKindTrait", "::loom::FusionKind::" # kind> {
  let cppNamespace = "::loom::OpTrait";
}
class Loom_PrecisionTrait<string cls>
    : ParamNativeOpTrait<"PrecisionClassTrait", "::loom::PrecisionClass::" # cls> {
  let cppNamespace = "::loom::OpTrait";
}

def Loom_Pointwise : Loom_FusionKindTrait<"Pointwise">;
def Loom_Injective : Loom_FusionKindTrait<"Injective">;
def Loom_ReductionKind : Loom_FusionKindTrait<"Reduction">;
def Loom_Contraction : Loom_FusionKindTrait<"Contraction">;
def Loom_Opaque : Loom_FusionKindTrait<"Opaque">;

def Loom_LowPrecision : Loom_PrecisionTrait<"LowPrecision">;
def Loom_Follow : Loom_PrecisionTrait<"Follow">;
def Loom_KeepF32 : Loom_PrecisionTrait<"KeepF32">;

// Every loom op reports fusion kind, precision class and cost, and has a
// gradient rule (DifferentiableOpInterface, implemented in LoomVJP.cpp): an op
// without one does not link, so `loom-autodiff` never meets a loom op it
// cannot differentiate. Ops that carry no gradient (compare, constant, integer
// results) have a rule that returns no cotangent. `vjpOverrides` names the
// interface methods with a default that the op overrides.
class Loom_Op<string mnemonic, list<Trait> traits = [],
              list<string> vjpOverrides = []>
    : Op<Loom_Dialect, mnemonic, !listconcat(traits, [
        FusionKindOpInterface, PrecisionClassOpInterface, CostOpInterface,
        DeclareOpInterfaceMethods<DifferentiableOpInterface, vjpOverrides>])>;

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

class Loom_UnaryOp<string mnemonic, string formula, Type type = Loom_FloatTensor,
                   list<Trait> traits = [],
                   string elementTypes = "f64, f32, f16 or bf16">
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                             Loom_Pointwise, Loom_Follow])> {
  let summary = "Elementwise `" # formula # "`.";
  let description = "Computes `y = " # formula # "` for every element of "
    # "`x`.\n\n```mlir\n%y = loom." # mnemonic
    # " %x : tensor<4x8xf32>\n```\n\n"
    # "**Lifecycle**: created by the importers and by `loom-autodiff`; "
    # "grouped by `loom-fuse` into pointwise kernels.\n\n"
    # "**Constraints**:\n\n"
    # "1. (C1) `x` and `y` have the same type.\n"
    # "2. (C2) the element type is " # elementTypes # ".\n";
  let arguments = (ins type:$x);
  let results = (outs type:$y);
  let assemblyFormat = "$x attr-dict `:` type($y)";
}

class Loom_BinaryOp<string mnemonic, string formula,
                    Type type = Loom_NumericTensor, list<Trait> traits = [],
                    string elementTypes = "f64, f32, f16, bf16, i64, i32 or i8">
    : Loom_Op<mnemonic, !listconcat(traits, [Pure, SameOperandsAndResultType,
                                             Loom_Pointwise, Loom_Follow])> {
  let summary = "Elementwise `" # formula # "`.";
  let description = "Computes `z = " # formula # "` for every pair of "
    # "elements of `x` and `y`, which have the same shape: broadcasting is "
    # "explicit (`loom.broadcast_in_dim`).\n\n```mlir\n%z = loom." # mnemonic
    # " %x, %y : tensor<4x8xf32>\n```\n\n"
    # "**Lifecycle**: created by the importers and by `loom-autodiff`; "
    # "grouped by `loom-fuse` into pointwise kernels.\n\n"
    # "**Constraints**:\n\n"
    # "1. (C1) `x`, `y` and `z` have the same type.\n"
    # "2. (C2) the element type is " # elementTypes # ".\n";
  let arguments = (ins type:$x, type:$y);
  let results = (outs type:$z);
  let assemblyFormat = "$x `,` $y attr-dict `:` type($z)";
}

def Loom_AddOp : Loom_BinaryOp<"add", "x + y", Loom_NumericTensor, [Commutative]>;
def Loom_SubOp : Loom_BinaryOp<"sub", "x - y">;
def Loom_MulOp : Loom_BinaryOp<"mul", "x * y", Loom_NumericTensor, [Commutative]>;
def Loom_DivOp : Loom_BinaryOp<"div", "x / y"> {
  let description = [{
    Computes `z = x / y` elementwise. Integer division truncates toward zero
    (as ONNX `Div` does); division of integers by zero is undefined.

    ```mlir
    %z = loom.div %x, %y : tensor<4x8xf32>
    ```

    **Lifecycle**: created by the importers and by `loom-autodiff`; grouped by
    `loom-fuse` into pointwise kernels.

    **Constraints**:

    1. (C1) `x`, `y` and `z` have the same type.
    2. (C2) the element type is f64, f32, f16, bf16, i64, i32 or i8.
  }];
}
def Loom_PowOp : Loom_BinaryOp<"pow", "pow(x, y)", Loom_FloatTensor, [],
                               "f64, f32, f16 or bf16">;
def Loom_MaxOp : Loom_BinaryOp<"max", "max(x, y)", Loom_NumericTensor, [Commutative]>;
def Loom_MinOp : Loom_BinaryOp<"min", "min(x, y)", Loom_NumericTensor, [Commutative]>;

def Loom_NegOp : Loom_UnaryOp<"neg", "-x", Loom_NumericTensor, [],
                              "f64, f32, f16, bf16, i64, i32 or i8">;
def Loom_AbsOp : Loom_UnaryOp<"abs", "abs(x)", Loom_NumericTensor, [],
                              "f64, f32, f16, bf16, i64, i32 or i8">;
def Loom_ExpOp : Loom_UnaryOp<"exp", "exp(x)">;
def Loom_LogOp : Loom_UnaryOp<"log", "log(x)">;
def Loom_TanhOp : Loom_UnaryOp<"tanh", "tanh(x)">;
def Loom_SigmoidOp : Loom_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def Loom_ReluOp : Loom_UnaryOp<"relu", "max(x, 0)">;
def Loom_ErfOp : Loom_UnaryOp<"erf", "erf(x)">;
def Loom_SqrtOp : Loom_UnaryOp<"sqrt", "sqrt(x)">;
def Loom_RsqrtOp : Loom_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Loom_FloorOp : Loom_UnaryOp<"floor", "floor(x)">;
def Loom_CosOp : Loom_UnaryOp<"cos", "cos(x)">;
def Loom_SinOp : Loom_UnaryOp<"sin", "sin(x)">;

def Loom_GeluOp : Loom_Op<"gelu", [Pure, SameOperandsAndResultType,
                                   Loom_Pointwise, Loom_Follow]> {
  let summary = "Gaussian error linear unit.";
  let description = [{
    Computes `y = x * Phi(x)` where `Phi` is the standard normal CDF:
    exactly, `0.5 * x * (1 + erf(x / sqrt(2)))` (`approximate = none`), or
    with the tanh approximation
    `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))`
    (`approximate = tanh`). Kept whole so its gradient and kernel are exact
    and cheap.

    ```mlir
    %y = loom.gelu %x approximate = tanh : tensor<4x8xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Gelu`, or the erf pattern
    recognised at import); grouped by `loom-fuse` into pointwise kernels.

    **Constraints**:

    1. (C1) `x` and `y` have the same floating-point type.
  }];
  let arguments = (ins Loom_FloatTensor:$x,
      DefaultValuedAttr<Loom_GeluApproximation,
                        "::loom::GeluApproximation::None">:$approximate);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = "$x (`approximate` `=` $approximate^)? attr-dict `:` type($y)";
}

def Loom_SelectOp : Loom_Op<"select", [Pure, Loom_Pointwise, Loom_Follow,
    AllTypesMatch<["on_true", "on_false", "result"]>,
    AllShapesMatch<["cond", "on_true"]>]> {
  let summary = "Elementwise choice between two tensors.";
  let description = [{
    `result[i] = cond[i] ? on_true[i] : on_false[i]`.

    ```mlir
    %r = loom.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Where`) and by
    `loom-autodiff` (gradients of max/min/relu); pointwise in `loom-fuse`.

    **Constraints**:

    1. (C1) `on_true`, `on_false` and `result` have the same type.
    2. (C2) `cond` has the shape of `on_true` and element type `i1`.
  }];
  let arguments = (ins Loom_BoolTensor:$cond, Loom_Tensor:$on_true,
                       Loom_Tensor:$on_false);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $cond `,` $on_true `,` $on_false attr-dict `:` type($cond) `,` type($result)
  }];
}

def Loom_CompareOp : Loom_Op<"compare", [Pure, Loom_Pointwise, Loom_Follow,
    SameTypeOperands, AllShapesMatch<["lhs", "result"]>]> {
  let summary = "Elementwise comparison.";
  let description = [{
    `result[i] = lhs[i] <predicate> rhs[i]` with predicate one of `eq`, `ne`,
    `lt`, `le`, `gt`, `ge`. Comparisons of floats are ordered: any comparison
    with NaN is false except `ne`. The result carries no gradient.

    ```mlir
    %m = loom.compare lt, %a, %b : tensor<4xf32> -> tensor<4xi1>
    ```

    **Lifecycle**: created by the importers (ONNX `Equal`, `Less`, ...);
    pointwise in `loom-fuse`.

    **Constraints**:

    1. (C1) `lhs` and `rhs` have the same type.
    2. (C2) `result` has the shape of `lhs` and element type `i1`.
  }];
  let arguments = (ins Loom_ComparePredicate:$predicate, Loom_Tensor:$lhs,
                       Loom_Tensor:$rhs);
  let results = (outs Loom_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)
  }];
}

def Loom_CastOp : Loom_Op<"cast", [Pure, Loom_Pointwise, Loom_Follow,
    AllShapesMatch<["x", "y"]>]> {
  let summary = "Elementwise conversion of the element type.";
  let description = [{
    Converts each element to the result's element type: float to float
    rounds to nearest even; float to integer truncates toward zero; integer
    to `i1` is `x != 0`; `i1` to a number is 0 or 1.

    ```mlir
    %y = loom.cast %x : tensor<4xi64> -> tensor<4xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Cast`) and by
    `loom-mixed-precision`; pointwise in `loom-fuse`.

    **Constraints**:

    1. (C1) `x` and `y` have the same shape.
  }];
  let arguments = (ins Loom_Tensor:$x);
  let results = (outs Loom_Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($y)";
  let hasFolder = 1;
}

def Loom_StopGradientOp : Loom_Op<"stop_gradient", [Pure,
    SameOperandsAndResultType, Loom_Pointwise, Loom_Follow],
    ["isDifferentiableOperand"]> {
  let summary = "Identity that blocks gradients.";
  let description = [{
    Returns `x` unchanged; `loom-autodiff` sends no cotangent through it.

    ```mlir
    %y = loom.stop_gradient %x : tensor<4xf32>
    ```

    **Lifecycle**: written by users or importers; `loom-autodiff` consumes
    it; removed before code generation.

    **Constraints**:

    1. (C1) `x` and `y` have the same type.
  }];
  let arguments = (ins Loom_Tensor:$x);
  let results = (outs Loom_Tensor:$y);
  let assemblyFormat = "$x attr-dict `:` type($y)";
}

def Loom_ConstantOp : Loom_Op<"constant", [ConstantLike, Pure,
    AllTypesMatch<["value", "result"]>,
    Loom_Injective, Loom_Follow]> {
  let summary = "A constant tensor.";
  let description = [{
    A tensor known at compile time. Constants are for small values (shapes,
    masks, scalars, splats); parameters are function arguments marked
    `loom.param`, never constants.

    ```mlir
    %c = loom.constant dense<1.0> : tensor<4xf32>
    ```

    **Lifecycle**: created by the importers (initializers that are not
    parameters, ONNX `Constant`, folded shape computations) and by any pass.

    **Constraints**:

    1. (C1) `value` is a dense elements attribute whose type is the result
       type.
  }];
  let arguments = (ins Loom_DenseElementsAttr:$value);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Loom_MatmulOp : Loom_Op<"matmul", [Pure, Loom_Contraction,
    Loom_LowPrecision, InferTypeOpAdaptor]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "Batched matrix product with transpose flags.";
  let description = [{
    `result[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[n])` where `A`
    is `lhs` (or its last two dimensions swapped when `transpose_a` is set)
    and `B` is `rhs` (swapped when `transpose_b`). Leading dimensions are
    batch dimensions. A rank-2 `rhs` is shared by every batch (the common
    `[B, T, D] x [D, E]` projection) and never materialised per batch. The
    optional `bias` is added to every row of the product (a GEMM epilogue).

    ```mlir
    %y = loom.matmul %x, %w {transpose_b} : (tensor<32x64xf32>, tensor<128x64xf32>) -> tensor<32x128xf32>
    %z = loom.matmul %x, %w bias(%b : tensor<128xf32>) {transpose_b} : (tensor<32x64xf32>, tensor<128x64xf32>) -> tensor<32x128xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `MatMul`, `Gemm`) and by
    `loom-autodiff`, without a bias; `loom-gemm-epilogues` (CUDA code
    generation) moves a following bias add into `bias`; codegen calls
    cuBLASLt (the bias as its epilogue) or BLAS.

    **Constraints**:

    1. (C1) `lhs` has rank >= 2; `rhs` has the rank of `lhs` or rank 2.
    2. (C2) when `rhs` has the rank of `lhs`, their batch dimensions are
       equal.
    3. (C3) the contracting dimensions of `lhs` and `rhs` are equal.
    4. (C4) `lhs` and `rhs` have the same floating-point element type, which
       is the element type of `result`.
    5. (C5) `result` has shape `batch x M x N`.
    6. (C6) `bias`, when present, has rank 1, N elements and the element
       type of `lhs`.
  }];
  let arguments = (ins Loom_FloatTensor:$lhs, Loom_FloatTensor:$rhs,
                       Optional<Loom_FloatTensor>:$bias,
                       UnitAttr:$transpose_a, UnitAttr:$transpose_b);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)
  }];
}

def Loom_Conv2DOp : Loom_Op<"conv2d", [Pure, Loom_Contraction,
    Loom_LowPrecision, InferTypeOpAdaptor]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "2-D convolution, NCHW input and OIHW filter.";
  let description = [{
    `out[n, o, y, x] = sum_{c, i, j} in[n, g*C/G + c, y*sh + i*dh - pt,
    x*sw + j*dw - pl] * filter[o, c, i, j]` over the group `g` of output
    channel `o`, with zero padding `[top, left, bottom, right]`. The bias, if
    any, is a separate broadcast add (which `loom-fuse` folds into the
    epilogue).

    ```mlir
    %y = loom.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
        : (tensor<8x1x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<8x8x28x28xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Conv`) and by
    `loom-autodiff` (the second-order gradients of `loom.conv2d_input_grad`
    and `loom.conv2d_filter_grad` use it). On the CPU target an f32 one
    is a plan `conv` step (oneDNN; `loom-conv-to-gemm` marks it
    `loom.library_call`); otherwise `loom-conv-to-gemm` makes it
    `loom.im2col` and a GEMM (one group, f32 or f64), or it is a kernel of
    its own (a direct loop nest).

    **Constraints**:

    1. (C1) `input` and `filter` have rank 4 and the same element type.
    2. (C2) `strides` and `dilations` have 2 positive entries, `padding` 4
       non-negative entries.
    3. (C3) `groups` is positive and divides the input channels and the
       output channels; filter dimension 1 is input channels / `groups`.
    4. (C4) the dilated filter fits in the padded input.
    5. (C5) with `channels_last`, `groups` is 1.

    With `channels_last` the input and the result are NHWC (`[n, y, x,
    c]`), the filter still OIHW: the layout oneDNN convolves without
    reordering. `loom-channels-last` makes it after autodiff, on the CPU
    target; it has no gradient.
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter attr-dict `:` `(` type($input) `,` type($filter) `)` `->` type($result)
  }];
}

def Loom_Conv2DInputGradOp : Loom_Op<"conv2d_input_grad", [Pure,
    Loom_Contraction, Loom_LowPrecision]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "Gradient of conv2d with respect to its input (transposed convolution).";
  let description = [{
    The adjoint of `loom.conv2d` in its input: for the convolution
    `dy = conv2d(x, filter)` with the same `strides`, `padding`,
    `dilations` and `groups`, `result = d<dy, conv2d(x, filter)>/dx`:

    `result[n, g*C/G + c, h, w] = sum dy[n, o, y, x] * filter[o, c, i, j]`
    over the output channels `o` of group `g` and all `(y, x, i, j)` with
    `y*sh + i*dh - pt = h` and `x*sw + j*dw - pl = w`. Input positions no
    window reads (the bottom/right remainder of a strided convolution) get
    zero. The result type is given, since a strided convolution maps several
    input sizes to one output size.

    ```mlir
    %dx = loom.conv2d_input_grad %dy, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
        : (tensor<8x8x28x28xf32>, tensor<8x1x3x3xf32>) -> tensor<8x1x28x28xf32>
    ```

    **Lifecycle**: created by `loom-autodiff` (gradient of `loom.conv2d`
    and of `loom.avg_pool2d`). On the CPU target an f32 one is a plan
    `conv` step (oneDNN); otherwise `loom-conv-to-gemm` makes it a GEMM and
    `loom.col2im` (one group, f32 or f64), or it is a kernel of its own.
    Its own gradient uses `loom.conv2d` and `loom.conv2d_filter_grad`.

    **Constraints**:

    1. (C1) `dy`, `filter` and `result` have rank 4 and the same
       floating-point element type.
    2. (C2) `strides` and `dilations` have 2 positive entries, `padding` 4
       non-negative entries.
    3. (C3) `groups` is positive and divides the result channels and the
       output channels (`dim(filter, 0)`); `dim(filter, 1)` is result
       channels / `groups`.
    4. (C4) `loom.conv2d` of a `result`-shaped input with `filter` has the
       shape of `dy`.
    5. (C5) with `channels_last`, `groups` is 1.

    With `channels_last`, `dy` and `result` are NHWC, as in `loom.conv2d`.
  }];
  let arguments = (ins Loom_FloatTensor:$dy, Loom_FloatTensor:$filter,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $dy `,` $filter attr-dict `:` `(` type($dy) `,` type($filter) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_Conv2DFilterGradOp : Loom_Op<"conv2d_filter_grad", [Pure,
    Loom_Contraction, Loom_LowPrecision]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "Gradient of conv2d with respect to its filter.";
  let description = [{
    The derivative of `<dy, conv2d(x, filter)>` in `filter`, for the
    convolution with the same `strides`, `padding`, `dilations` and
    `groups`:

    `result[o, c, i, j] = sum_{n, y, x} dy[n, o, y, x] *
    x[n, g*C/G + c, y*sh + i*dh - pt, x*sw + j*dw - pl]` where `g` is the
    group of output channel `o` and reads outside `x` are zero. The result
    type (the filter's) is given: the kernel size does not follow from the
    operands.

    ```mlir
    %dw = loom.conv2d_filter_grad %x, %dy {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
        : (tensor<8x1x28x28xf32>, tensor<8x8x28x28xf32>) -> tensor<8x1x3x3xf32>
    ```

    **Lifecycle**: created by `loom-autodiff` (gradient of `loom.conv2d`);
    On the CPU target an f32 one is a plan `conv` step (oneDNN);
    otherwise `loom-conv-to-gemm` makes it `loom.im2col` and a GEMM (one
    group, f32 or f64), or it is a kernel of its own. Its own
    gradient uses `loom.conv2d` and `loom.conv2d_input_grad`.

    **Constraints**:

    1. (C1) `x`, `dy` and `result` have rank 4 and the same floating-point
       element type.
    2. (C2) `strides` and `dilations` have 2 positive entries, `padding` 4
       non-negative entries.
    3. (C3) `groups` is positive and divides the input channels
       (`dim(x, 1)`) and the output channels (`dim(result, 0)`);
       `dim(result, 1)` is input channels / `groups`.
    4. (C4) `loom.conv2d` of `x` with a `result`-shaped filter has the shape
       of `dy`.
    5. (C5) with `channels_last`, `groups` is 1.

    With `channels_last`, `x` and `dy` are NHWC, as in `loom.conv2d`; the
    result is OIHW.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$dy,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$groups,
                       UnitAttr:$channels_last);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $x `,` $dy attr-dict `:` `(` type($x) `,` type($dy) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_Im2ColOp : Loom_Op<"im2col", [Pure, Loom_Opaque, Loom_Follow,
    InferTypeOpAdaptor]> {
  let summary = "The windows of a 2-D convolution's input as the columns of a matrix.";
  let description = [{
    Lays out every window a `loom.conv2d` with these `kernel` (`[KH, KW]`),
    `strides`, `padding` (`[top, left, bottom, right]`) and `dilations`
    would read from `x` (`[N, C, H, W]`) as one column of a
    `[C*KH*KW, N*OH*OW]` matrix, so that the convolution becomes one GEMM
    (`filter[O, C*KH*KW] x cols`):

    `result[(c*KH + i)*KW + j, (n*OH + y)*OW + x] =
    x[n, c, y*sh + i*dh - pt, x*sw + j*dw - pl]`, and zero where that
    position is in the padding.

    ```mlir
    %cols = loom.im2col %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
        : tensor<8x4x28x28xf32> -> tensor<36x6272xf32>
    ```

    **Lifecycle**: created by `loom-conv-to-gemm` (before `loom-fuse`) from
    `loom.conv2d` and `loom.conv2d_filter_grad`; one kernel of its own. Its
    gradient is `loom.col2im`.

    **Constraints**:

    1. (C1) `x` has rank 4 and `result` rank 2, with the same element type.
    2. (C2) `kernel`, `strides` and `dilations` have 2 positive entries,
       `padding` 4 non-negative entries.
    3. (C3) the dilated kernel fits in the padded input.
  }];
  let arguments = (ins Loom_FloatTensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Loom_Col2ImOp : Loom_Op<"col2im", [Pure, Loom_Opaque, Loom_Follow]> {
  let summary = "Sums the columns of an im2col matrix back into the image (its adjoint).";
  let description = [{
    The adjoint of `loom.im2col` with the same `kernel`, `strides`,
    `padding` and `dilations`: every entry of `cols` is added to the
    position of `result` (`[N, C, H, W]`) that `loom.im2col` read it from;
    entries read from the padding are dropped, and positions no window reads
    are zero:

    `result[n, c, h, w] = sum cols[(c*KH + i)*KW + j, (n*OH + y)*OW + x]`
    over all `(i, j, y, x)` with `y*sh + i*dh - pt = h` and
    `x*sw + j*dw - pl = w`, in the order of increasing `(i, j)`.

    ```mlir
    %dx = loom.col2im %dcols {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>}
        : tensor<36x6272xf32> -> tensor<8x4x28x28xf32>
    ```

    The result type is given, since a strided window maps several input
    sizes to one output size.

    **Lifecycle**: created by `loom-conv-to-gemm` from
    `loom.conv2d_input_grad` (after the GEMM `filter^T x dy`); one kernel of
    its own, a gather (no atomics, the same sum order on every target). Its
    gradient is `loom.im2col`.

    **Constraints**:

    1. (C1) `cols` has rank 2 and `result` rank 4, with the same element
       type.
    2. (C2) `kernel`, `strides` and `dilations` have 2 positive entries,
       `padding` 4 non-negative entries.
    3. (C3) `loom.im2col` of a `result`-shaped input has the shape of
       `cols`.
  }];
  let arguments = (ins Loom_FloatTensor:$cols, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilations);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$cols attr-dict `:` type($cols) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class Loom_ReduceOp<string mnemonic, string what>
    : Loom_Op<mnemonic, [Pure, Loom_ReductionKind, Loom_KeepF32,
                         InferTypeOpAdaptor]> {
  let summary = "Reduces by " # what # " over the given dimensions.";
  let description = "Reduces `x` by " # what # " over `dims` (sorted, "
    # "unique). With `keep_dims` the reduced dimensions stay with size 1; "
    # "otherwise they are removed. An empty `dims` reduces nothing. The "
    # "gradient of `reduce_max` / `reduce_min` is split equally between the "
    # "elements that tie for the extremum.\n\n"
    # "```mlir\n%s = loom." # mnemonic
    # " %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>\n```\n\n"
    # "**Lifecycle**: created by the importers (ONNX `Reduce*`, global "
    # "pooling) and by `loom-autodiff` (summing broadcast cotangents); "
    # "`loom-fuse` makes row reductions with their pointwise neighbours.\n\n"
    # "**Constraints**:\n\n"
    # "1. (C1) every entry of `dims` is in `[0, rank(x))`.\n"
    # "2. (C2) `dims` is strictly increasing.\n"
    # "3. (C3) `result` has the shape of `x` with `dims` removed (or set to 1 "
    # "with `keep_dims`) and the element type of `x`.\n";
  let arguments = (ins Loom_NumericTensor:$x, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keep_dims);
  let results = (outs Loom_NumericTensor:$result);
  let assemblyFormat = [{
    $x `dims` `=` $dims attr-dict `:` type($x) `->` type($result)
  }];
}

def Loom_ReduceSumOp : Loom_ReduceOp<"reduce_sum", "sum">;
def Loom_ReduceMaxOp : Loom_ReduceOp<"reduce_max", "maximum">;
def Loom_ReduceMinOp : Loom_ReduceOp<"reduce_min", "minimum">;
def Loom_ReduceMeanOp : Loom_ReduceOp<"reduce_mean", "arithmetic mean">;

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Loom_BroadcastInDimOp : Loom_Op<"broadcast_in_dim", [Pure,
    Loom_Injective, Loom_Follow]> {
  let summary = "Broadcasts a tensor to a larger shape.";
  let description = [{
    Dimension `i` of `x` becomes dimension `dims[i]` of the result;
    result dimensions not named in `dims` are new. A dimension of size 1 is
    repeated to the result's size. This is how the importers make numpy
    broadcasting explicit.

    ```mlir
    %y = loom.broadcast_in_dim %b dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
    ```

    **Lifecycle**: created by the importers and by `loom-autodiff`; fused as
    a prologue (injective) by `loom-fuse`.

    **Constraints**:

    1. (C1) `dims` has one entry per dimension of `x`.
    2. (C2) `dims` is strictly increasing and within `[0, rank(result))`.
    3. (C3) each dimension of `x` is 1 or equal to the result dimension it
       maps to.
    4. (C4) `x` and `result` have the same element type.
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$dims);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $x `dims` `=` $dims attr-dict `:` type($x) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_ReshapeOp : Loom_Op<"reshape", [Pure, Loom_Injective, Loom_Follow]> {
  let summary = "Reinterprets a tensor with another shape.";
  let description = [{
    Row-major reshape: the elements keep their order.

    ```mlir
    %y = loom.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x4x16xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Reshape`, `Flatten`,
    `Squeeze`, `Unsqueeze`); free at codegen (a view of the same buffer).

    **Constraints**:

    1. (C1) `x` and `result` have the same number of elements.
    2. (C2) `x` and `result` have the same element type.
  }];
  let arguments = (ins Loom_Tensor:$x);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Loom_TransposeOp : Loom_Op<"transpose", [Pure, Loom_Injective,
    Loom_Follow, InferTypeOpAdaptor]> {
  let summary = "Permutes the dimensions of a tensor.";
  let description = [{
    `result` dimension `i` is `x` dimension `perm[i]`.

    ```mlir
    %y = loom.transpose %x perm = [0, 2, 1, 3] : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Transpose`) and by
    `loom-autodiff`; fused as injective by `loom-fuse`, or folded into a
    matmul's transpose flags.

    **Constraints**:

    1. (C1) `perm` is a permutation of `[0, rank(x))`.
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$perm);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $x `perm` `=` $perm attr-dict `:` type($x) `->` type($result)
  }];
}

def Loom_SliceOp : Loom_Op<"slice", [Pure, Loom_Injective, Loom_Follow,
    InferTypeOpAdaptor]> {
  let summary = "Static strided slice.";
  let description = [{
    Along each dimension `d`, takes indices `start[d], start[d] + stride[d],
    ...` below `limit[d]`.

    ```mlir
    %y = loom.slice %x start = [0, 64] limit = [2, 128] stride = [1, 1] : tensor<2x192xf32> -> tensor<2x64xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Slice`, `Split`); its
    gradient pads with zeros.

    **Constraints**:

    1. (C1) `start`, `limit` and `stride` have one entry per dimension.
    2. (C2) `0 <= start[d] <= limit[d] <= dim(x, d)` and `stride[d] >= 1`.
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$start,
                       DenseI64ArrayAttr:$limit, DenseI64ArrayAttr:$stride);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $x `start` `=` $start `limit` `=` $limit `stride` `=` $stride attr-dict `:` type($x) `->` type($result)
  }];
}

def Loom_PadOp : Loom_Op<"pad", [Pure, Loom_Injective, Loom_Follow,
    InferTypeOpAdaptor]> {
  let summary = "Pads a tensor with zeros: at both ends and between elements.";
  let description = [{
    Along each dimension `d` of size `n`, puts `low[d]` zeros before the
    first element, `interior[d]` zeros between consecutive elements and
    `high[d]` zeros after the last one: the result has size
    `low[d] + n + (n - 1) * interior[d] + high[d]` (`low[d] + high[d]` when
    `n` is 0). Element `x[i...]` lands at `result[low + i * (interior + 1)]`.

    ```mlir
    %y = loom.pad %x low = [0, 1] high = [0, 2] interior = [0, 1] : tensor<2x3xf32> -> tensor<2x8xf32>
    ```

    **Lifecycle**: created by `loom-autodiff` (the gradient of
    `loom.slice`: the cotangent goes back to the sliced positions, zeros
    elsewhere); its own gradient is a `loom.slice`. Fused as injective by
    `loom-fuse`.

    **Constraints**:

    1. (C1) `low`, `high` and `interior` have one entry per dimension of `x`.
    2. (C2) every entry of `low`, `high` and `interior` is non-negative.
    3. (C3) `result` has the padded shape and the element type of `x`.
  }];
  let arguments = (ins Loom_Tensor:$x, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high, DenseI64ArrayAttr:$interior);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $x `low` `=` $low `high` `=` $high `interior` `=` $interior attr-dict `:` type($x) `->` type($result)
  }];
}

def Loom_ConcatOp : Loom_Op<"concat", [Pure, Loom_Injective, Loom_Follow,
    InferTypeOpAdaptor]> {
  let summary = "Concatenates tensors along a dimension.";
  let description = [{
    ```mlir
    %y = loom.concat %a, %b dim = 1 : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Concat`); its gradient
    is one slice per input.

    **Constraints**:

    1. (C1) there is at least one input.
    2. (C2) all inputs have the same rank and element type, and `dim` is in
       `[0, rank)`.
    3. (C3) all inputs have the same size in every dimension but `dim`.
  }];
  let arguments = (ins Variadic<Loom_Tensor>:$inputs, I64Attr:$dim);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $inputs `dim` `=` $dim attr-dict `:` `(` type($inputs) `)` `->` type($result)
  }];
}

def Loom_GatherOp : Loom_Op<"gather", [Pure, Loom_Opaque, Loom_Follow,
    InferTypeOpAdaptor]> {
  let summary = "Gathers slices of a table along one axis (embedding lookup).";
  let description = [{
    `result[p..., i..., s...] = table[p..., indices[i...], s...]` where `p`
    ranges over the dimensions before `axis` and `s` over those after it.
    With `axis = 0` and a `[vocab, d]` table this is an embedding lookup.
    Negative indices count from the end (as in ONNX); out-of-range indices
    are an error at run time.

    ```mlir
    %e = loom.gather %wte[%ids] axis = 0 : (tensor<128x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `Gather`); its gradient is
    a scatter-add into the table.

    **Constraints**:

    1. (C1) `axis` is in `[0, rank(table))`.
    2. (C2) `result` has shape `table[:axis] ++ indices ++ table[axis+1:]`
       and the element type of `table`.
  }];
  let arguments = (ins Loom_Tensor:$table, Loom_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = [{
    $table `[` $indices `]` `axis` `=` $axis attr-dict `:` `(` type($table) `,` type($indices) `)` `->` type($result)
  }];
}

def Loom_ScatterAddOp : Loom_Op<"scatter_add", [Pure, Loom_Opaque,
    Loom_KeepF32]> {
  let summary = "Adds slices into a zero tensor along one axis (gather's adjoint).";
  let description = [{
    The adjoint of `loom.gather`: starting from a zero tensor of the result
    type, `result[p..., indices[i...], s...] += updates[p..., i..., s...]`
    for every position of `updates`, where `p` ranges over the result
    dimensions before `axis` and `s` over those after it. Repeated indices
    accumulate. Negative indices count from the end (as in `loom.gather`);
    out-of-range indices are an error at run time.

    ```mlir
    %g = loom.scatter_add %dy[%ids] axis = 0 : (tensor<2x16x64xf32>, tensor<2x16xi64>) -> tensor<128x64xf32>
    ```

    **Lifecycle**: created by `loom-autodiff` (the gradient of
    `loom.gather` with respect to its table, e.g. an embedding); its own
    gradient is a `loom.gather`. Accumulates in f32 under mixed precision.
    Folds to `updates` when the indices are the constant `0, 1, ..., n-1`
    over an axis of size `n` (a position embedding's arange).

    **Constraints**:

    1. (C1) `axis` is in `[0, rank(result))`.
    2. (C2) `updates` has shape `result[:axis] ++ indices ++
       result[axis+1:]`.
    3. (C3) `updates` and `result` have the same element type.
  }];
  let arguments = (ins Loom_NumericTensor:$updates, Loom_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs Loom_NumericTensor:$result);
  let assemblyFormat = [{
    $updates `[` $indices `]` `axis` `=` $axis attr-dict `:` `(` type($updates) `,` type($indices) `)` `->` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Composite neural-network ops
//===----------------------------------------------------------------------===//

class Loom_SoftmaxLikeOp<string mnemonic, string formula>
    : Loom_Op<mnemonic, [Pure, SameOperandsAndResultType, Loom_ReductionKind,
                         Loom_KeepF32]> {
  let summary = "`" # formula # "` along one axis.";
  let description = "Computes `" # formula # "` along `axis`, subtracting "
    # "the row maximum first for stability.\n\n```mlir\n%y = loom."
    # mnemonic # " %x axis = 1 : tensor<4x10xf32>\n```\n\n"
    # "**Lifecycle**: created by the importers; kept whole through "
    # "`loom-autodiff` (its gradient needs only the output); one row-"
    # "reduction kernel after `loom-fuse`.\n\n"
    # "**Constraints**:\n\n"
    # "1. (C1) `x` and `y` have the same floating-point type.\n"
    # "2. (C2) `axis` is in `[0, rank(x))`.\n";
  let arguments = (ins Loom_FloatTensor:$x, I64Attr:$axis);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = "$x `axis` `=` $axis attr-dict `:` type($y)";
  let hasVerifier = 1;
}

def Loom_SoftmaxOp : Loom_SoftmaxLikeOp<"softmax", "exp(x_i) / sum_j exp(x_j)">;
def Loom_LogSoftmaxOp
    : Loom_SoftmaxLikeOp<"log_softmax", "x_i - log(sum_j exp(x_j))">;

def Loom_LayerNormOp : Loom_Op<"layer_norm", [Pure, Loom_ReductionKind,
    Loom_KeepF32, AllTypesMatch<["x", "y"]>, AllElementTypesMatch<["x", "scale", "bias"]>]> {
  let summary = "Layer normalization over the trailing dimensions.";
  let description = [{
    Normalizes `x` over dimensions `[axis, rank)`:
    `y = (x - mean) / sqrt(var + epsilon) * scale + bias`, with the biased
    variance. `scale` and `bias` have the normalized shape.

    ```mlir
    %y = loom.layer_norm %x, %g, %b axis = 2 epsilon = 1.0e-05 : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `LayerNormalization`);
    kept whole through `loom-autodiff`; one row-reduction kernel after
    `loom-fuse`.

    **Constraints**:

    1. (C1) `axis` is in `[0, rank(x))`.
    2. (C2) `scale` and `bias` have shape `x.shape[axis:]`.
    3. (C3) `epsilon` is positive.
    4. (C4) `x`, `scale`, `bias` and `y` share one floating-point element
       type; `x` and `y` have the same type.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = [{
    $x `,` $scale `,` $bias `axis` `=` $axis `epsilon` `=` $epsilon attr-dict `:` `(` type($x) `,` type($scale) `,` type($bias) `)` `->` type($y)
  }];
  let hasVerifier = 1;
}

def Loom_RmsNormOp : Loom_Op<"rms_norm", [Pure, Loom_ReductionKind,
    Loom_KeepF32, AllTypesMatch<["x", "y"]>, AllElementTypesMatch<["x", "scale"]>]> {
  let summary = "Root-mean-square normalization over the trailing dimensions.";
  let description = [{
    `y = x / sqrt(mean(x^2 over [axis, rank)) + epsilon) * scale`.

    ```mlir
    %y = loom.rms_norm %x, %g axis = 1 epsilon = 1.0e-06 : (tensor<4x64xf32>, tensor<64xf32>) -> tensor<4x64xf32>
    ```

    **Lifecycle**: created by the JSON importer (and ONNX
    `RMSNormalization` where an opset has it); one row-reduction kernel.

    **Constraints**:

    1. (C1) `axis` is in `[0, rank(x))`.
    2. (C2) `scale` has shape `x.shape[axis:]`.
    3. (C3) `epsilon` is positive.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$scale,
                       I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = [{
    $x `,` $scale `axis` `=` $axis `epsilon` `=` $epsilon attr-dict `:` `(` type($x) `,` type($scale) `)` `->` type($y)
  }];
  let hasVerifier = 1;
}

def Loom_BatchNormOp : Loom_Op<"batch_norm", [Pure, Loom_Pointwise,
    Loom_KeepF32, AllTypesMatch<["x", "y"]>,
    AllTypesMatch<["scale", "bias", "mean", "variance"]>]> {
  let summary = "Batch normalization with given statistics (inference form).";
  let description = [{
    For channel dimension 1:
    `y = (x - mean[c]) / sqrt(variance[c] + epsilon) * scale[c] + bias[c]`.
    The statistics are operands: running statistics in evaluation, or the
    batch statistics `loom.batch_norm_stats` computes when training.

    ```mlir
    %y = loom.batch_norm %x, %s, %b, %m, %v epsilon = 1.0e-05 : (tensor<8x8x28x28xf32>, tensor<8xf32>) -> tensor<8x8x28x28xf32>
    ```

    A batch norm that trains with batch statistics carries `momentum` (ONNX's
    convention: `running = momentum * running + (1 - momentum) * batch`);
    its `mean` and `variance` are then the running statistics, arguments
    marked `loom.buffer`, which evaluation (`@predict`) uses as they are.

    **Lifecycle**: created by the importers (ONNX `BatchNormalization`;
    `momentum` when the node trains, see docs/onnx-import.md); in the
    training step, `loom-batch-norm-train` replaces one with `momentum` by
    batch statistics and the running-statistics update; pointwise once the
    statistics are known.

    **Constraints**:

    1. (C1) `x` has rank >= 2.
    2. (C2) `scale`, `bias`, `mean` and `variance` are 1-D with
       `dim(x, 1)` elements and the element type of `x`.
    3. (C3) `epsilon` is positive.
    4. (C4) `momentum`, if present, is in [0, 1].
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$scale,
                       Loom_FloatTensor:$bias, Loom_FloatTensor:$mean,
                       Loom_FloatTensor:$variance, F32Attr:$epsilon,
                       OptionalAttr<F32Attr>:$momentum);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = [{
    $x `,` $scale `,` $bias `,` $mean `,` $variance `epsilon` `=` $epsilon (`momentum` `=` $momentum^)? attr-dict `:` `(` type($x) `,` type($scale) `)` `->` type($y)
  }];
  let hasVerifier = 1;
}

def Loom_BatchNormStatsOp : Loom_Op<"batch_norm_stats", [Pure,
    Loom_ReductionKind, Loom_KeepF32, InferTypeOpAdaptor]> {
  let summary = "Per-channel mean and biased variance of a batch.";
  let description = [{
    For channel dimension 1, the mean and the biased variance of `x` over all
    other dimensions. Used with `loom.batch_norm` for training-mode batch
    normalization.

    ```mlir
    %m, %v = loom.batch_norm_stats %x : tensor<8x8x28x28xf32> -> tensor<8xf32>, tensor<8xf32>
    ```

    **Lifecycle**: created by the importers (ONNX `BatchNormalization` with
    `training_mode = 1`).

    **Constraints**:

    1. (C1) `x` has rank >= 2.
    2. (C2) `mean` and `variance` are 1-D with `dim(x, 1)` elements and the
       element type of `x`.
  }];
  let arguments = (ins Loom_FloatTensor:$x);
  let results = (outs Loom_FloatTensor:$mean, Loom_FloatTensor:$variance);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($mean) `,` type($variance)";
}

class Loom_Pool2DOp<string mnemonic, string what>
    : Loom_Op<mnemonic, [Pure, Loom_Opaque, Loom_Follow, InferTypeOpAdaptor]> {
  let summary = "2-D " # what # " pooling over NCHW input.";
  let description = "Takes the " # what # " over each `kernel` window, moved "
    # "by `strides`, of the input padded by `padding` (`[top, left, bottom, "
    # "right]`). Padded elements are ignored by max pooling; average pooling "
    # "counts them only with `count_include_pad`.\n\n```mlir\n%y = loom."
    # mnemonic # " %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, "
    # "padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> "
    # "tensor<8x8x14x14xf32>\n```\n\n"
    # "**Lifecycle**: created by the importers (ONNX `MaxPool`, "
    # "`AveragePool`); one kernel of its own.\n\n"
    # "**Constraints**:\n\n"
    # "1. (C1) `x` has rank 4.\n"
    # "2. (C2) `kernel` and `strides` have 2 positive entries, `padding` 4 "
    # "non-negative entries, each smaller than the kernel.\n"
    # "3. (C3) the kernel fits in the padded input.\n";
  let arguments = (ins Loom_FloatTensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
                       UnitAttr:$count_include_pad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Loom_MaxPool2DOp : Loom_Pool2DOp<"max_pool2d", "maximum">;
def Loom_AvgPool2DOp : Loom_Pool2DOp<"avg_pool2d", "average">;

def Loom_MaxPool2DArgmaxOp : Loom_Op<"max_pool2d_argmax", [Pure, Loom_Opaque,
    Loom_Follow, InferTypeOpAdaptor]> {
  let summary = "Where each window of 2-D max pooling takes its maximum.";
  let description = [{
    For each output position of `loom.max_pool2d` with the same `kernel`,
    `strides` and `padding`, the row-major flat index into the whole of `x`
    (`((n * C + c) * H + h) * W + w`) of the window's maximum. Padded
    positions are never chosen; among equal maxima the first in row-major
    window order wins.

    ```mlir
    %i = loom.max_pool2d_argmax %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : tensor<8x8x28x28xf32> -> tensor<8x8x14x14xi64>
    ```

    **Lifecycle**: created by `loom-autodiff`: the gradient of
    `loom.max_pool2d` is a `loom.max_pool2d_grad` of the output cotangent
    at these indices (each window's cotangent goes to its maximum). It
    carries no gradient itself.

    **Constraints**:

    1. (C1) `x` has rank 4.
    2. (C2) `kernel` and `strides` have 2 positive entries, `padding` 4
       non-negative entries, each smaller than the kernel.
    3. (C3) the kernel fits in the padded input.
    4. (C4) `result` has the shape of the pooled output and element type
       `i64`.
  }];
  let arguments = (ins Loom_FloatTensor:$x, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding);
  let results = (outs StaticShapeTensorOf<[I64]>:$result);
  let assemblyFormat = "$x attr-dict `:` type($x) `->` type($result)";
}

def Loom_MaxPool2DGradOp : Loom_Op<"max_pool2d_grad", [Pure, Loom_Opaque,
    Loom_KeepF32]> {
  let summary = "The gradient of 2-D max pooling: each window's cotangent to its maximum.";
  let description = [{
    Starting from a zero tensor of the result type, adds `dy[n, c, oy, ox]`
    at the flat index `argmax[n, c, oy, ox]` (as `loom.max_pool2d_argmax`
    gives it, for the same `kernel`, `strides` and `padding`) for every
    output position, in row-major order of the outputs: what a
    `loom.scatter_add` of the flattened `dy` at the flattened `argmax`
    computes, but known to stay inside each window, hence inside its
    (n, c) plane: compiled, the planes are added in parallel (on all cores,
    one GPU thread each), each in the same order; the flat scatter was one
    sequential loop (one GPU thread).

    ```mlir
    %dx = loom.max_pool2d_grad %dy[%i] {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<8x64x56x56xf32>, tensor<8x64x56x56xi64>) -> tensor<8x64x112x112xf32>
    ```

    **Lifecycle**: created by `loom-autodiff` (the gradient of
    `loom.max_pool2d` with respect to its input); its own gradient (with
    respect to `dy`) is a `loom.gather` of the cotangent at `argmax`.
    Accumulates in f32 under mixed precision.

    **Constraints**:

    1. (C1) `dy` and `argmax` have the same shape, of rank 4.
    2. (C2) `kernel` and `strides` have 2 positive entries, `padding` 4
       non-negative entries, each smaller than the kernel.
    3. (C3) `result` has rank 4 and the element type of `dy`, and pooling
       it with these attributes gives the shape of `dy`.
    4. (C4) each index of `argmax` lies in its window (checked by the
       interpreter; compiled code only keeps an index inside its plane).
  }];
  let arguments = (ins Loom_FloatTensor:$dy, StaticShapeTensorOf<[I64]>:$argmax,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $dy `[` $argmax `]` attr-dict `:` `(` type($dy) `,` type($argmax) `)` `->` type($result)
  }];
  let hasVerifier = 1;
}

def Loom_DropoutOp : Loom_Op<"dropout", [Pure, Loom_Pointwise, Loom_Follow,
    AllTypesMatch<["x", "y"]>]> {
  let summary = "Inverted dropout with an explicit seed.";
  let description = [{
    Zeroes each element with probability `ratio` and scales the others by
    `1 / (1 - ratio)`. The mask is a pure function of (`seed`, `stream`,
    element index), so the backward pass and recomputation reproduce it
    exactly; distinct dropout ops in one graph use distinct `stream`s.

    ```mlir
    %y = loom.dropout %x, %seed ratio = 1.000000e-01 stream = 0 : tensor<2x16x64xf32>, tensor<i64>
    ```

    **Lifecycle**: created by the importers (ONNX `Dropout` in training
    mode; in inference mode it is the identity and no op is made) and by
    `loom-recognize-dropout` (dropout and drop-path masks built from
    `loom.random`; with `--dropout=off` it replaces every dropout by its
    input). `loom-eval-entries` removes it from the evaluation entries
    (`@predict`, `@forward`), as PyTorch's eval mode does. The seed is a
    function argument marked `loom.rng_seed`, advanced by the runtime every
    step.

    **Constraints**:

    1. (C1) `ratio` is in `[0, 1)`.
    2. (C2) `seed` is a 0-D `i64` tensor.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_SeedTensor:$seed,
                       F32Attr:$ratio, DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = [{
    $x `,` $seed `ratio` `=` $ratio `stream` `=` $stream attr-dict `:` type($y) `,` type($seed)
  }];
  let hasVerifier = 1;
}

def Loom_RandomOp : Loom_Op<"random", [Pure, Loom_Pointwise, Loom_Follow]> {
  let summary = "Random numbers drawn from an explicit seed.";
  let description = [{
    Fills the result with draws from `distribution`: `uniform` in
    `[a, b)`, or `normal` with mean `a` and standard deviation `b`. Element
    `i` is a pure function of (`seed`, `stream`, `i`), with the counter-based
    generator of `loom.dropout`: `u(i) = dropoutUniform(seed, stream, i)`
    (24 random bits in `[0, 1)`); uniform draws are `a + (b - a) * u(i)`,
    normal ones `a + b * sqrt(-2 log(1 - u(2i))) * cos(2 pi u(2i + 1))`
    (Box-Muller). The same seed gives the same numbers in the forward, the
    backward and recomputation; the runtime advances the seed every step.
    The result carries no gradient.

    ```mlir
    %r = loom.random %seed "uniform" a = 0.0 b = 1.0 stream = 2 : tensor<i64>, tensor<8x1x1x1xf32>
    ```

    **Lifecycle**: created by the ONNX importer (`RandomUniformLike`,
    `RandomNormalLike`, `RandomUniform`, `RandomNormal`, `Bernoulli`; the
    node's own `seed` attribute is not used: Loom's per-step seed is).
    `loom-recognize-dropout` turns the dropout and drop-path masks built from
    uniform draws into `loom.dropout`; the draws it does not recognize stay.

    **Constraints**:

    1. (C1) `distribution` is `uniform` (with `a < b`) or `normal` (with
       `b >= 0`); `a` and `b` are finite.
    2. (C2) `seed` is a 0-D `i64` tensor.
  }];
  let arguments = (ins Loom_SeedTensor:$seed, StrAttr:$distribution,
                       F64Attr:$a, F64Attr:$b,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $seed $distribution `a` `=` $a `b` `=` $b `stream` `=` $stream attr-dict
    `:` type($seed) `,` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Loom_AttentionOp : Loom_Op<"attention", [Pure, Loom_Opaque, Loom_KeepF32,
    AttrSizedOperandSegments]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "Scaled dot-product attention, fused: no T x T tensor.";
  let description = [{
    For queries `q : [B, Hq, T, D]`, keys `k : [B, Hkv, S, D]` and values
    `v : [B, Hkv, S, Dv]`, query head `h` reads key/value head
    `g = h / (Hq / Hkv)` (grouped-query attention; `Hkv = 1` is multi-query)
    and, for each query `i` and key `j`:

    - `allowed(i, j) = (!causal || j <= i) && (window == 0 || i - j < window)
      && mask[b, h, i, j] && segments[b, i] == segments[b, j]` (the mask,
      if any, broadcast from its shape; the segments, if any, are document
      ids of packed sequences: a token attends only within its document);
    - `s_ij = scale * <q[b, h, i], k[b, g, j]> + bias[b, h, i, j]` (the
      bias, if any, broadcast);
    - `lse[b, h, i] = log sum_{allowed j} exp(s_ij)` (`-inf` when no key is
      allowed), `p_ij = exp(s_ij - lse_i)` where allowed, else 0;
    - `out[b, h, i] = sum_j z_ij p_ij v[b, g, j]` (0 for a row with no
      allowed key, where PyTorch's SDPA would give NaN), where `z_ij` is 1
      without dropout and, with `dropout` > 0, `loom.dropout`'s mask of the
      `[B, Hq, T, S]` probabilities: 0 where `dropoutUniform(seed, stream,
      ((b Hq + h) T + i) S + j) < dropout`, else `1 / (1 - dropout)` (so
      the fused op draws exactly the mask of the chain it replaces).

    `lse` is the row log-sum-exp the backward needs; it is f32 whatever the
    element type of `q`. The masks that exporters build as `T x T` tensors
    from positions (causal, sliding window) are attributes here, so no mask
    of that size is made at any `T`.

    ```mlir
    %o, %lse = loom.attention %q, %k, %v {scale = 0.125 : f64, causal}
        : (tensor<2x8x1024x64xf32>, tensor<2x2x1024x64xf32>, tensor<2x2x1024x64xf32>)
        -> (tensor<2x8x1024x64xf32>, tensor<2x8x1024xf32>)
    ```

    **Lifecycle**: created by `loom-fuse-attention` (from the attention
    chains of imported models) and by the JSON importer (`attention` node);
    its gradient is one `loom.attention_grad` (`loom-autodiff`). On the CPU
    target the plan runs it as an `attention` step (a tiled online-softmax
    kernel of the runtime, f32); on CUDA `loom-attention-kernels` marks it
    `loom.generated_kernel` and it is lowered to a kernel of its own (one
    GPU thread per query row, online softmax in registers).

    **Constraints**:

    1. (C1) `q`, `k`, `v` and `out` have rank 4 and one floating-point
       element type; `lse` is f32.
    2. (C2) `k` is `[B, Hkv, S, D]` and `v` is `[B, Hkv, S, Dv]` for `q :
       [B, Hq, T, D]`, with `Hkv >= 1` dividing `Hq`.
    3. (C3) `out` is `[B, Hq, T, Dv]` and `lse` is `[B, Hq, T]`.
    4. (C4) `mask` (i1) and `bias` (the element type of `q`) have rank 4,
       and each of their dimensions is 1 or that of `[B, Hq, T, S]`.
    5. (C5) `causal` needs `T == S`; `window` is >= 0, and positive only
       with `causal`.
    6. (C6) `scale` is finite.
    7. (C7) `segments` is `[B, T]` of an integer type, and needs `T == S`.
    8. (C8) `dropout` is in `[0, 1)`; `seed` (a 0-D `i64` tensor) is
       present exactly when `dropout` > 0.
  }];
  let arguments = (ins Loom_FloatTensor:$q, Loom_FloatTensor:$k,
                       Loom_FloatTensor:$v, Optional<Loom_BoolTensor>:$mask,
                       Optional<Loom_FloatTensor>:$bias,
                       Optional<Loom_IndexTensor>:$segments,
                       Optional<Loom_SeedTensor>:$seed, F64Attr:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Loom_FloatTensor:$out, Loom_FloatTensor:$lse);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`mask` $mask^)? (`bias` $bias^)? (`segments` $segments^)? (`seed` $seed^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad", [Pure, Loom_Opaque,
    Loom_KeepF32, AttrSizedOperandSegments]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "The gradient of loom.attention, fused (FlashAttention's backward).";
  let description = [{
    For `out, lse = loom.attention(q, k, v, mask, bias, segments, seed)`
    with the same attributes, and the cotangent `dout` of `out`: with
    `p_ij` recomputed from `q`, `k` and `lse`, the dropout mask `z_ij`
    drawn again from the seed (1 without dropout), `D_i = <dout_i,
    out_i>`, `dp_ij = z_ij <dout_i, v_j>` and `ds_ij = p_ij (dp_ij -
    D_i)`:

    - `dq[b, h, i] = scale * sum_j ds_ij k[b, g, j]`;
    - `dk[b, g, j] = scale * sum_{h in g, i} ds_ij q[b, h, i]`;
    - `dv[b, g, j] = sum_{h in g, i} z_ij p_ij dout[b, h, i]`;
    - `dbias` (present exactly when `bias` is) is `ds` summed over the
      dimensions where `bias` has size 1.

    The probabilities are recomputed block by block: only `q`, `k`, `v`,
    `out` and `lse` are kept from the forward, never a `T x S` tensor.

    ```mlir
    %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %do {scale = 0.125 : f64, causal}
        : (tensor<2x8x1024x64xf32>, tensor<2x2x1024x64xf32>, tensor<2x2x1024x64xf32>,
           tensor<2x8x1024x64xf32>, tensor<2x8x1024xf32>, tensor<2x8x1024x64xf32>)
        -> (tensor<2x8x1024x64xf32>, tensor<2x2x1024x64xf32>, tensor<2x2x1024x64xf32>)
    ```

    **Lifecycle**: created by `loom-autodiff` (the gradient of
    `loom.attention`); an `attention` step with direction `backward` in the
    plan on the CPU target, a generated kernel on CUDA (`D_i`, then `dq`
    per query row, `dk` and `dv` per key row, `dbias` per bias element:
    no atomics). It has no gradient of its own (second derivatives of attention
    are refused).

    **Constraints**:

    1. (C1) `q`, `k`, `v`, `out`, `lse`, `mask`, `bias`, `segments`,
       `seed` are as for `loom.attention` with the same attributes.
    2. (C2) `dout` has the type of `out`; `dq`, `dk`, `dv` have the types of
       `q`, `k`, `v`.
    3. (C3) `dbias` is present exactly when `bias` is, with its type.
  }];
  let arguments = (ins Loom_FloatTensor:$q, Loom_FloatTensor:$k,
                       Loom_FloatTensor:$v, Loom_FloatTensor:$out,
                       Loom_FloatTensor:$lse, Loom_FloatTensor:$dout,
                       Optional<Loom_BoolTensor>:$mask,
                       Optional<Loom_FloatTensor>:$bias,
                       Optional<Loom_IndexTensor>:$segments,
                       Optional<Loom_SeedTensor>:$seed, F64Attr:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<I64Attr, "0">:$window,
                       DefaultValuedAttr<F32Attr, "0.0f">:$dropout,
                       DefaultValuedAttr<I64Attr, "0">:$stream);
  let results = (outs Loom_FloatTensor:$dq, Loom_FloatTensor:$dk,
                      Loom_FloatTensor:$dv, Optional<Loom_FloatTensor>:$dbias);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $lse `,` $dout (`mask` $mask^)? (`bias` $bias^)? (`segments` $segments^)? (`seed` $seed^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Loom_CrossEntropyOp : Loom_Op<"cross_entropy", [Pure, Loom_ReductionKind,
    Loom_KeepF32, InferTypeOpAdaptor]> {
  let summary = "Softmax cross-entropy between logits and class labels.";
  let description = [{
    For logits `[N, C]` (or `[N, C, d...]`, classes on dimension 1) and
    integer labels `[N]` (or `[N, d...]`):
    `loss_i = -log_softmax(logits_i)[labels_i]`, then `mean` (over the
    labels not equal to `ignore_index`), `sum`, or `none` (one loss per
    label, 0 where ignored). A label outside `[0, C)` that is not
    `ignore_index` is an error at run time.

    ```mlir
    %l = loom.cross_entropy %logits, %labels reduction = mean : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
    ```

    **Lifecycle**: created by `loomc --loss=cross_entropy` and by the ONNX
    importer (`SoftmaxCrossEntropyLoss`); kept whole through `loom-autodiff`
    (its gradient is `softmax - onehot`); one row-reduction kernel.

    **Constraints**:

    1. (C1) `logits` has rank >= 2.
    2. (C2) `labels` has the shape of `logits` without dimension 1.
    3. (C3) `result` is 0-D for `mean` and `sum`, and has the shape of
       `labels` for `none`; its element type is that of `logits`, or f32
       for bf16 and f16 logits (mixed precision stores the logits in 16
       bits; the loss is computed and returned in f32).
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       DefaultValuedAttr<Loom_Reduction, "::loom::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `reduction` `=` $reduction attr-dict `:` `(` type($logits) `,` type($labels) `)` `->` type($result)
  }];
}

def Loom_LinearCrossEntropyOp : Loom_Op<"linear_cross_entropy", [Pure,
    Loom_Opaque, Loom_KeepF32]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "A language-model head: linear layer and cross-entropy, fused.";
  let description = [{
    For inputs `x : [N, C]`, a weight `w : [V, C]` (`transpose_w`) or
    `[C, V]`, and integer labels `[N]`:
    `logits = x w^T` (or `x w`), then exactly `loom.cross_entropy(logits,
    labels)` with the same `reduction` and `ignore_index`. `lse[i] = log
    sum_v exp(logits[i, v])` is the row log-sum-exp the gradient needs.
    With 16-bit `x` and `w` (`loom-mixed-precision` gives it 16-bit copies,
    as to the GEMM it replaces) the logits are rounded to their type, as
    that GEMM's result, and the loss and `lse` are computed in f32. The
    `[N, V]` logits are never stored: the runtime computes them a tile of
    rows x classes at a time and keeps only `lse`. A label outside `[0, V)` that is not
    `ignore_index` is an error at run time.

    ```mlir
    %l, %lse = loom.linear_cross_entropy %x, %w, %y reduction = mean {transpose_w, ignore_index = -100 : i64}
        : (tensor<8192x768xf32>, tensor<50304x768xf32>, tensor<8192xi64>) -> (tensor<f32>, tensor<8192xf32>)
    ```

    **Lifecycle**: created by `loom-fuse-linear-cross-entropy` (a
    `loom.matmul` whose only reader is a `loom.cross_entropy`, as `loomc
    --train` builds for language models); its gradient is one
    `loom.linear_cross_entropy_grad` (`loom-autodiff`). The plan runs it as
    a `linear_cross_entropy` step on the CPU target in f32; on the CUDA
    target, and in 16 bits on both, `loom-linear-cross-entropy-chunks`
    expands it into GEMMs and row kernels over chunks of rows.

    **Constraints**:

    1. (C1) `x` is `[N, C]`; `w` is `[V, C]` with `transpose_w`, else
       `[C, V]`; both have one element type, f32, f64, bf16 or f16 (the
       plan's step takes f32; 16-bit heads are expanded by
       `loom-linear-cross-entropy-chunks` on every target).
    2. (C2) `labels` is `[N]`, i32 or i64.
    3. (C3) `loss` has the element type of `x` (f32 for 16-bit `x`), and
       is 0-D for `mean` and `sum`, `[N]` for `none`; `lse` is f32 `[N]`.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$w,
                       Loom_IndexTensor:$labels,
                       DefaultValuedAttr<Loom_Reduction, "::loom::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       UnitAttr:$transpose_w);
  let results = (outs Loom_FloatTensor:$loss, Loom_FloatTensor:$lse);
  let assemblyFormat = [{
    $x `,` $w `,` $labels `reduction` `=` $reduction attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_LinearCrossEntropyGradOp : Loom_Op<"linear_cross_entropy_grad", [
    Pure, Loom_Opaque, Loom_KeepF32]> {
  let extraClassDeclaration = [{ int64_t getFlopCount(); }];
  let summary = "The gradient of loom.linear_cross_entropy, fused.";
  let description = [{
    For `loss, lse = loom.linear_cross_entropy(x, w, labels)` with the same
    attributes and the cotangent `dloss` of `loss`: with the logits
    recomputed tile by tile and `weight_i` = `dloss` (`sum`), `dloss /
    count` (`mean`, `count` the labels not ignored) or `dloss[i]` (`none`),
    0 for an ignored label, `dlogits[i, v] = weight_i (exp(logits[i, v] -
    lse[i]) - [v == labels[i]])` (rounded to the type of `x` when it is
    16-bit, as the chain's gradient rounds it), `dx = dlogits w` (or
    `dlogits w^T`) and `dw = dlogits^T x` (or `x^T dlogits`). No `[N, V]`
    tensor is stored.

    ```mlir
    %dx, %dw = loom.linear_cross_entropy_grad %x, %w, %y, %lse, %g reduction = mean {transpose_w, ignore_index = -100 : i64}
        : (tensor<8192x768xf32>, tensor<50304x768xf32>, tensor<8192xi64>, tensor<8192xf32>, tensor<f32>)
        -> (tensor<8192x768xf32>, tensor<50304x768xf32>)
    ```

    **Lifecycle**: created by `loom-autodiff` (the gradient of
    `loom.linear_cross_entropy`); a `linear_cross_entropy` step with
    direction `backward` in the plan (the CPU target, f32), expanded by
    `loom-linear-cross-entropy-chunks` elsewhere. It has no gradient of
    its own.

    **Constraints**:

    1. (C1) `x`, `w`, `labels`, `lse` and `dloss` are as the operands and
       results of `loom.linear_cross_entropy` with the same attributes.
    2. (C2) `dx` and `dw` have the types of `x` and `w`.
  }];
  let arguments = (ins Loom_FloatTensor:$x, Loom_FloatTensor:$w,
                       Loom_IndexTensor:$labels, Loom_FloatTensor:$lse,
                       Loom_FloatTensor:$dloss,
                       DefaultValuedAttr<Loom_Reduction, "::loom::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index,
                       UnitAttr:$transpose_w);
  let results = (outs Loom_FloatTensor:$dx, Loom_FloatTensor:$dw);
  let assemblyFormat = [{
    $x `,` $w `,` $labels `,` $lse `,` $dloss `reduction` `=` $reduction attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MseOp : Loom_Op<"mse", [Pure, Loom_ReductionKind, Loom_KeepF32,
    InferTypeOpAdaptor]> {
  let summary = "Mean squared error.";
  let description = [{
    `loss = (prediction - target)^2` elementwise, then `mean` over all
    elements, `sum`, or `none`.

    ```mlir
    %l = loom.mse %p, %t reduction = mean : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
    ```

    **Lifecycle**: created by `loomc --loss=mse`; kept whole through
    `loom-autodiff`.

    **Constraints**:

    1. (C1) `prediction` and `target` have the same type.
    2. (C2) `result` is 0-D for `mean` and `sum` and has the type of
       `prediction` for `none`.
  }];
  let arguments = (ins Loom_FloatTensor:$prediction, Loom_FloatTensor:$target,
                       DefaultValuedAttr<Loom_Reduction, "::loom::Reduction::Mean">:$reduction);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $prediction `,` $target `reduction` `=` $reduction attr-dict `:` `(` type($prediction) `,` type($target) `)` `->` type($result)
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

// The program is SPMD: every rank of the module's mesh runs it, each on its
// own values. The mesh is the module's `loom.mesh_axes` (names) and
// `loom.mesh_shape` (sizes); ranks are numbered row-major over the axes, and
// a collective over axis `a` combines the ranks that differ only in their
// coordinate along `a` (n of them, n = the axis's size; r below is this
// rank's coordinate). Collectives are never removed, merged, reordered or
// fused (they have side effects): every rank issues the same ones in the
// same order. Gradients follow the sum convention: the objective is the sum
// over the ranks of each rank's own objective (as JAX's psum transposes to
// psum).
class Loom_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Loom_Op<mnemonic, !listconcat(traits, [Loom_Opaque, Loom_Follow])> {
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The size of the mesh axis the op runs over (0 when the op is not in
    /// a module whose mesh names it).
    int64_t getAxisSize();
  }];
}

def Loom_AllReduceOp : Loom_CollectiveOp<"all_reduce",
    [SameOperandsAndResultType]> {
  let summary = "Combines a tensor over the ranks of a mesh axis.";
  let description = [{
    Every rank gets the elementwise `reduce` (sum, max, or mean: the sum
    divided by n) of the n ranks' `x`.

    ```mlir
    %g = loom.all_reduce %x over "dp" reduce = mean : tensor<64x128xf32>
    ```

    **Lifecycle**: created by `loom-data-parallel` (gradients, the loss);
    left outside kernels by `loom-fuse`; a `collective` step of the plan.
    The gradient of a sum or mean is the same all-reduce of the cotangent;
    max has none.

    **Constraints**:

    1. (C1) `x` and `y` have the same type, of f64, f32, f16 or bf16
       elements.
    2. (C2) `axis` names an axis of the module's mesh.
  }];
  let arguments = (ins Loom_FloatTensor:$x, StrAttr:$axis,
                       Loom_CollectiveReduce:$reduce);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = "$x `over` $axis `reduce` `=` $reduce attr-dict `:` type($y)";
}

def Loom_ReduceScatterOp : Loom_CollectiveOp<"reduce_scatter"> {
  let summary = "Combines a tensor over a mesh axis and keeps one block.";
  let description = [{
    `x` is n blocks along dimension 0; rank r gets the `reduce` (sum or
    mean) over the ranks of their block r.

    ```mlir
    %g = loom.reduce_scatter %x over "dp" reduce = sum : tensor<1024xf32> -> tensor<512xf32>
    ```

    **Lifecycle**: created by `loom-data-parallel` (ZeRO 2 and 3:
    gradients); a `collective` step of the plan. Its gradient is an
    all-gather of the cotangent (divided by n for mean).

    **Constraints**:

    1. (C1) `x` and `y` have the same element type, f64, f32, f16 or bf16,
       and rank at least 1.
    2. (C2) `axis` names an axis of the module's mesh.
    3. (C3) `dim(x, 0) = n * dim(y, 0)`; the other dimensions are equal.
    4. (C4) `reduce` is sum or mean.
  }];
  let arguments = (ins Loom_FloatTensor:$x, StrAttr:$axis,
                       Loom_CollectiveReduce:$reduce);
  let results = (outs Loom_FloatTensor:$y);
  let assemblyFormat = [{
    $x `over` $axis `reduce` `=` $reduce attr-dict `:` type($x) `->` type($y)
  }];
}

def Loom_AllGatherOp : Loom_CollectiveOp<"all_gather"> {
  let summary = "Concatenates the ranks' tensors along dimension 0.";
  let description = [{
    Every rank gets the n ranks' `x` concatenated along dimension 0, in rank
    order.

    ```mlir
    %p = loom.all_gather %x over "dp" : tensor<512xf32> -> tensor<1024xf32>
    ```

    **Lifecycle**: created by `loom-data-parallel` (ZeRO: the updated
    parameter shards; ZeRO 3: the parameters before use); a `collective`
    step of the plan. Its gradient is a reduce-scatter (sum) of the
    cotangent.

    **Constraints**:

    1. (C1) `x` and `y` have the same element type and rank at least 1.
    2. (C2) `axis` names an axis of the module's mesh.
    3. (C3) `dim(y, 0) = n * dim(x, 0)`; the other dimensions are equal.
  }];
  let arguments = (ins Loom_Tensor:$x, StrAttr:$axis);
  let results = (outs Loom_Tensor:$y);
  let assemblyFormat = "$x `over` $axis attr-dict `:` type($x) `->` type($y)";
}

def Loom_RankSliceOp : Loom_CollectiveOp<"rank_slice"> {
  let summary = "This rank's block of a tensor, along dimension 0.";
  let description = [{
    `x` is n blocks along dimension 0; rank r gets block r. No data moves
    between ranks.

    ```mlir
    %s = loom.rank_slice %x over "dp" : tensor<1024xf32> -> tensor<512xf32>
    ```

    **Lifecycle**: created by `loom-data-parallel` (ZeRO 1: the parameter
    shard a rank updates); a `collective` step of the plan. It has no
    gradient rule (the cotangent would sit at a rank-dependent offset):
    differentiating through it is an error.

    **Constraints**:

    1. (C1) `x` and `y` have the same element type and rank at least 1.
    2. (C2) `axis` names an axis of the module's mesh.
    3. (C3) `dim(x, 0) = n * dim(y, 0)`; the other dimensions are equal.
  }];
  let arguments = (ins Loom_Tensor:$x, StrAttr:$axis);
  let results = (outs Loom_Tensor:$y);
  let assemblyFormat = "$x `over` $axis attr-dict `:` type($x) `->` type($y)";
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

def Loom_FusionOp : Op<Loom_Dialect, "fusion", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects]> {
  let summary = "A group of ops that becomes one kernel.";
  let description = [{
    The body computes the results from the block arguments, which are the
    operands (the region is isolated from above: everything the kernel reads
    is an operand). Code generation turns each `loom.fusion` into one kernel:
    a pointwise chain, or a row reduction with its pointwise prologue and
    epilogue, or one opaque op (gather, convolution, pooling) alone.
    Values defined inside the region and not yielded never reach memory
    outside the kernel.

    ```mlir
    %y = loom.fusion (%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%x: tensor<4x8xf32>, %w: tensor<4x8xf32>):
      %s = loom.add %x, %w : tensor<4x8xf32>
      %r = loom.relu %s : tensor<4x8xf32>
      loom.yield %r : tensor<4x8xf32>
    }
    ```

    **Lifecycle**: created by `loom-fuse` after the training pipeline;
    consumed by code generation (one kernel each). `loom-interp` runs the
    body as a function.

    **Constraints**:

    1. (C1) the body has one block whose arguments have the operands' types.
    2. (C2) the body yields values of the result types.
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$inputs);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def Loom_YieldOp : Op<Loom_Dialect, "yield", [Pure, Terminator,
    HasParent<"FusionOp">, ReturnLike]> {
  let summary = "Returns the results of a `loom.fusion` body.";
  let description = [{
    ```mlir
    loom.yield %r : tensor<4x8xf32>
    ```

    **Lifecycle**: created with `loom.fusion`.

    **Constraints**:

    1. (C1) the operands have the parent's result types (checked by the
       parent, `loom.fusion` C2).
  }];
  let arguments = (ins Variadic<AnyRankedTensor>:$values);
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMOPS_TD
