//===- LoomEnums.td - Enumerations of the loom dialect ------*- tablegen -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMENUMS_TD
#define LOOM_DIALECT_LOOM_IR_LOOMENUMS_TD

include "mlir/IR/EnumAttr.td"

// How an op groups with its neighbours in `loom-fuse`.
def Loom_FusionKind : I32EnumAttr<"FusionKind", "fusion kind of an op", [
    I32EnumAttrCase<"Pointwise", 0, "pointwise">,
    I32EnumAttrCase<"Injective", 1, "injective">,
    I32EnumAttrCase<"Reduction", 2, "reduction">,
    I32EnumAttrCase<"Contraction", 3, "contraction">,
    I32EnumAttrCase<"Opaque", 4, "opaque">]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

// What `loom-mixed-precision` does with an op.
def Loom_PrecisionClass : I32EnumAttr<"PrecisionClass",
    "mixed-precision class of an op", [
    I32EnumAttrCase<"LowPrecision", 0, "low_precision">,
    I32EnumAttrCase<"Follow", 1, "follow">,
    I32EnumAttrCase<"KeepF32", 2, "keep_f32">]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

def Loom_ComparePredicate : I64EnumAttr<"ComparePredicate",
    "comparison predicate", [
    I64EnumAttrCase<"EQ", 0, "eq">, I64EnumAttrCase<"NE", 1, "ne">,
    I64EnumAttrCase<"LT", 2, "lt">, I64EnumAttrCase<"LE", 3, "le">,
    I64EnumAttrCase<"GT", 4, "gt">, I64EnumAttrCase<"GE", 5, "ge">]> {
  let cppNamespace = "::loom";
}

def Loom_Reduction : I64EnumAttr<"Reduction", "loss reduction", [
    I64EnumAttrCase<"Mean", 0, "mean">, I64EnumAttrCase<"Sum", 1, "sum">,
    I64EnumAttrCase<"None", 2, "none">]> {
  let cppNamespace = "::loom";
}

def Loom_GeluApproximation : I64EnumAttr<"GeluApproximation",
    "approximation used by gelu", [
    I64EnumAttrCase<"None", 0, "none">, I64EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::loom";
}

// How a collective combines the ranks' values.
def Loom_CollectiveReduce : I64EnumAttr<"CollectiveReduce",
    "reduction of a collective", [
    I64EnumAttrCase<"Sum", 0, "sum">, I64EnumAttrCase<"Max", 1, "max">,
    I64EnumAttrCase<"Mean", 2, "mean">]> {
  let cppNamespace = "::loom";
}

#endif // LOOM_DIALECT_LOOM_IR_LOOMENUMS_TD
