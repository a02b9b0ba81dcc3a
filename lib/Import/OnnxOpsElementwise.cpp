//===- OnnxOpsElementwise.cpp - ONNX elementwise ops
//------------------------===//
//
// Elementwise arithmetic with numpy broadcasting, comparisons, unary math and
// activations, casts and Where.
// Each handler converts one node (see OnnxImport.h); addXHandlers lists
// the ops it serves.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace loom;
using namespace loom::onnx_import;

void OnnxNode::convertVariadic() {
  // Folds the inputs left to right with one broadcasting binary op (Sum and
  // Mean add; Mean divides at the end).
  using BinBuilder = FailureOr<Value> (*)(OpBuilder &, Location, Value, Value);
  static const llvm::StringMap<BinBuilder> binary = {
      {"Add", &createBroadcastBinary<AddOp>},
      {"Sub", &createBroadcastBinary<SubOp>},
      {"Mul", &createBroadcastBinary<MulOp>},
      {"Div", &createBroadcastBinary<DivOp>},
      {"Max", &createBroadcastBinary<MaxOp>},
      {"Min", &createBroadcastBinary<MinOp>},
      {"Sum", &createBroadcastBinary<AddOp>},
      {"Mean", &createBroadcastBinary<AddOp>},
  };
  BinBuilder combine = binary.lookup(op);
  Value acc = input(0);
  for (int i = 1; i < n.numInputs(); ++i)
    acc = check(combine(b, loc, acc, input(i)));
  if (op == "Mean" && n.numInputs() > 1)
    acc = DivOp::create(b, loc, acc, splat(acc, n.numInputs()));
  setOut(0, acc);
  return;
}

void OnnxNode::convertPow() {
  Value x = input(0), y = input(1);
  if (!isa<FloatType>(typeOf(x).getElementType()))
    n.fail("integer Pow is not supported");
  if (typeOf(y).getElementType() != typeOf(x).getElementType())
    y = CastOp::create(
        b, loc,
        RankedTensorType::get(typeOf(y).getShape(), typeOf(x).getElementType()),
        y);
  setOut(0, check(createBroadcastBinary<PowOp>(b, loc, x, y)));
  return;
}

void OnnxNode::convertPRelu() {
  Value x = input(0), slope = input(1);
  auto st = typeOf(slope), xt = typeOf(x);
  if (!broadcastShapes(xt.getShape(), st.getShape()) && st.getRank() == 1 &&
      xt.getRank() >= 2 && st.getDimSize(0) == xt.getDimSize(1)) {
    // Models from before imp.opset 7 give one slope per channel (dimension 1).
    slope = BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(xt.getShape(), st.getElementType()),
        slope, ArrayRef<int64_t>{1});
  }
  Value neg = check(createBroadcastBinary<MulOp>(b, loc, x, slope));
  Value zero = splat(x, 0.0);
  Value isNeg = CompareOp::create(
      b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
      ComparePredicate::LT, x, zero);
  setOut(0, SelectOp::create(b, loc, isNeg, neg, x));
  return;
}

void OnnxNode::convertCompare() {
  static const llvm::StringMap<ComparePredicate> cmps = {
      {"Equal", ComparePredicate::EQ},
      {"Less", ComparePredicate::LT},
      {"LessOrEqual", ComparePredicate::LE},
      {"Greater", ComparePredicate::GT},
      {"GreaterOrEqual", ComparePredicate::GE}};
  ComparePredicate predicate = cmps.lookup(op);
  Value x = input(0), y = input(1);
  if (failed(broadcastPair(b, loc, x, y)))
    throw ImportFailure{};
  if (x.getType() != y.getType())
    n.fail("operand types differ");
  setOut(0,
         CompareOp::create(
             b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
             predicate, x, y));
  return;
}

void OnnxNode::convertNot() {
  Value x = input(0);
  setOut(0, CompareOp::create(b, loc, typeOf(x), ComparePredicate::EQ, x,
                              splat(x, 0)));
  return;
}

void OnnxNode::convertRelu() {
  setOut(0, ReluOp::create(b, loc, input(0)));
  return;
}

void OnnxNode::convertNegAbs() {
  Value x = input(0);
  setOut(0, op == "Neg" ? NegOp::create(b, loc, x).getResult()
                        : AbsOp::create(b, loc, x).getResult());
  return;
}

void OnnxNode::convertIdentity() {
  setOut(0, input(0));
  return;
}

void OnnxNode::convertIsNaN() {
  // NaN is the one value that differs from itself (an unordered compare).
  Value x = input(0);
  floatOnly(x);
  setOut(0,
         CompareOp::create(
             b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
             ComparePredicate::NE, x, x));
  return;
}

void OnnxNode::convertGelu() {
  Value x = input(0);
  floatOnly(x);
  std::string approx = n.getString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    n.fail("approximate = '" + approx + "' is not 'none' or 'tanh'");
  setOut(0, GeluOp::create(b, loc, x,
                           approx == "tanh" ? GeluApproximation::Tanh
                                            : GeluApproximation::None));
  return;
}

void OnnxNode::convertFloatUnary() {
  Value x = input(0);
  if (op != "Clip")
    floatOnly(x);
  Value y;
  if (op == "Exp")
    y = ExpOp::create(b, loc, x);
  else if (op == "Log")
    y = LogOp::create(b, loc, x);
  else if (op == "Tanh")
    y = TanhOp::create(b, loc, x);
  else if (op == "Sigmoid")
    y = SigmoidOp::create(b, loc, x);
  else if (op == "Erf")
    y = ErfOp::create(b, loc, x);
  else if (op == "Sqrt")
    y = SqrtOp::create(b, loc, x);
  else if (op == "Floor")
    y = FloorOp::create(b, loc, x);
  else if (op == "Cos")
    y = CosOp::create(b, loc, x);
  else if (op == "Sin")
    y = SinOp::create(b, loc, x);
  else if (op == "Ceil")
    y = NegOp::create(b, loc,
                      FloorOp::create(b, loc, NegOp::create(b, loc, x)));
  else if (op == "Reciprocal")
    y = DivOp::create(b, loc, splat(x, 1.0), x);
  else if (op == "Softplus")
    y = LogOp::create(
        b, loc, AddOp::create(b, loc, splat(x, 1.0), ExpOp::create(b, loc, x)));
  else if (op == "HardSigmoid" || op == "HardSwish") {
    // HardSwish(x) = x * HardSigmoid(x) with alpha 1/6, beta 0.5.
    bool swish = op == "HardSwish";
    float alpha = swish ? 1.0f / 6.0f : n.getFloat("alpha", 0.2f);
    float beta = swish ? 0.5f : n.getFloat("beta", 0.5f);
    Value lin = AddOp::create(b, loc, MulOp::create(b, loc, x, splat(x, alpha)),
                              splat(x, beta));
    y = MinOp::create(b, loc, MaxOp::create(b, loc, lin, splat(x, 0.0)),
                      splat(x, 1.0));
    if (swish)
      y = MulOp::create(b, loc, x, y);
  } else if (op == "Clip") {
    y = x;
    auto bound = [&](int i) -> Value {
      if (!n.hasInput(i))
        return nullptr;
      Value v = input(i);
      if (typeOf(v).getRank() != 0)
        n.fail("min/max must be scalars");
      return BroadcastInDimOp::create(b, loc, typeOf(x), v,
                                      ArrayRef<int64_t>{});
    };
    if (Value lo = bound(1))
      y = MaxOp::create(b, loc, y, lo);
    if (Value hi = bound(2))
      y = MinOp::create(b, loc, y, hi);
  } else {
    // LeakyRelu, Elu, Selu: select on the sign.
    Value zero = splat(x, 0.0);
    Value isNeg = CompareOp::create(
        b, loc, RankedTensorType::get(typeOf(x).getShape(), b.getI1Type()),
        ComparePredicate::LT, x, zero);
    Value negPart, posPart = x;
    if (op == "LeakyRelu") {
      negPart = MulOp::create(b, loc, x, splat(x, n.getFloat("alpha", 0.01f)));
    } else {
      float alpha =
          n.getFloat("alpha", op == "Elu" ? 1.0f : 1.67326319217681884765625f);
      Value em1 =
          SubOp::create(b, loc, ExpOp::create(b, loc, x), splat(x, 1.0));
      negPart = MulOp::create(b, loc, em1, splat(x, alpha));
      if (op == "Selu") {
        float gamma = n.getFloat("gamma", 1.05070102214813232421875f);
        negPart = MulOp::create(b, loc, negPart, splat(x, gamma));
        posPart = MulOp::create(b, loc, x, splat(x, gamma));
      }
    }
    y = SelectOp::create(b, loc, isNeg, negPart, posPart);
  }
  setOut(0, y);
  return;
}

void OnnxNode::convertCast() {
  Value x = input(0);
  Type elt;
  if (op == "Cast") {
    elt = imp.elementType(n.getInt("to", 0), loc);
    if (!elt)
      throw ImportFailure{};
  } else {
    elt = typeOf(input(1)).getElementType();
  }
  auto type = RankedTensorType::get(typeOf(x).getShape(), elt);
  setOut(0,
         type == x.getType() ? x : CastOp::create(b, loc, type, x).getResult());
  return;
}

void OnnxNode::convertWhere() {
  Value c = input(0), x = input(1), y = input(2);
  auto s1 = broadcastShapes(typeOf(c).getShape(), typeOf(x).getShape());
  auto shape = s1 ? broadcastShapes(*s1, typeOf(y).getShape()) : std::nullopt;
  if (!shape)
    n.fail("condition " + formatShape(typeOf(c).getShape()) + ", X " +
           formatShape(typeOf(x).getShape()) + " and Y " +
           formatShape(typeOf(y).getShape()) + " are not broadcast-compatible");
  c = broadcastTo(b, loc, c, *shape);
  x = broadcastTo(b, loc, x, *shape);
  y = broadcastTo(b, loc, y, *shape);
  setOut(0, SelectOp::create(b, loc, c, x, y));
  return;
}

void loom::onnx_import::addElementwiseHandlers(OnnxHandlerTable &table) {
  table["Add"] = &OnnxNode::convertVariadic;
  table["Sub"] = &OnnxNode::convertVariadic;
  table["Mul"] = &OnnxNode::convertVariadic;
  table["Div"] = &OnnxNode::convertVariadic;
  table["Max"] = &OnnxNode::convertVariadic;
  table["Min"] = &OnnxNode::convertVariadic;
  table["Sum"] = &OnnxNode::convertVariadic;
  table["Mean"] = &OnnxNode::convertVariadic;
  table["Pow"] = &OnnxNode::convertPow;
  table["PRelu"] = &OnnxNode::convertPRelu;
  table["Equal"] = &OnnxNode::convertCompare;
  table["Less"] = &OnnxNode::convertCompare;
  table["LessOrEqual"] = &OnnxNode::convertCompare;
  table["Greater"] = &OnnxNode::convertCompare;
  table["GreaterOrEqual"] = &OnnxNode::convertCompare;
  table["Not"] = &OnnxNode::convertNot;
  table["Relu"] = &OnnxNode::convertRelu;
  table["Neg"] = &OnnxNode::convertNegAbs;
  table["Abs"] = &OnnxNode::convertNegAbs;
  table["Identity"] = &OnnxNode::convertIdentity;
  table["IsNaN"] = &OnnxNode::convertIsNaN;
  table["Gelu"] = &OnnxNode::convertGelu;
  table["Exp"] = &OnnxNode::convertFloatUnary;
  table["Log"] = &OnnxNode::convertFloatUnary;
  table["Tanh"] = &OnnxNode::convertFloatUnary;
  table["Sigmoid"] = &OnnxNode::convertFloatUnary;
  table["Erf"] = &OnnxNode::convertFloatUnary;
  table["Sqrt"] = &OnnxNode::convertFloatUnary;
  table["Reciprocal"] = &OnnxNode::convertFloatUnary;
  table["Floor"] = &OnnxNode::convertFloatUnary;
  table["Ceil"] = &OnnxNode::convertFloatUnary;
  table["Softplus"] = &OnnxNode::convertFloatUnary;
  table["LeakyRelu"] = &OnnxNode::convertFloatUnary;
  table["Elu"] = &OnnxNode::convertFloatUnary;
  table["Selu"] = &OnnxNode::convertFloatUnary;
  table["HardSigmoid"] = &OnnxNode::convertFloatUnary;
  table["HardSwish"] = &OnnxNode::convertFloatUnary;
  table["Clip"] = &OnnxNode::convertFloatUnary;
  table["Cos"] = &OnnxNode::convertFloatUnary;
  table["Sin"] = &OnnxNode::convertFloatUnary;
  table["Cast"] = &OnnxNode::convertCast;
  table["CastLike"] = &OnnxNode::convertCast;
  table["Where"] = &OnnxNode::convertWhere;
}
