//===- OnnxNode.cpp - One ONNX node's conversion
//---------------------------===//
//
// The helpers every handler uses (inputs, compile-time inputs, checked
// outputs), the table of handlers, and convertNode: Constant, then folding,
// then the op's handler.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include <algorithm>

using namespace mlir;
using namespace loom;
using namespace loom::onnx_import;

OnnxNode::OnnxNode(OnnxImporter &imp, const onnx::NodeProto &node)
    : imp(imp), node(node), op(node.op_type()), n(node, imp.nodeLoc(node)),
      loc(n.loc), b(imp.b) {}

Value OnnxNode::input(int i) {
  if (!n.hasInput(i))
    n.fail("input " + Twine(i) + " is missing");
  b.setInsertionPointToEnd(imp.entry);
  Value v = imp.get(n.inputName(i));
  if (!v && imp.failedValues.contains(n.inputName(i)))
    throw ImportFailure{}; // reported at the node that failed
  if (!v)
    n.fail("input '" + n.inputName(i) + "' is not defined");
  return v;
}

SmallVector<int64_t> OnnxNode::constInts(int i, StringRef what) {
  auto c = imp.getConst(n.inputName(i));
  if (!c)
    n.fail(what + " (input " + Twine(i) +
           ") must be a compile-time "
           "constant; Loom needs static shapes");
  SmallVector<int64_t> v;
  // Clamp first: ONNX uses INT64_MAX/INT64_MIN as "to the end", and a
  // double that large does not convert to int64 safely.
  for (double d : c->values)
    v.push_back(static_cast<int64_t>(std::clamp(d, -4.0e18, 4.0e18)));
  return v;
}

void OnnxNode::setOut(int i, Value v) {
  StringRef name = n.outputName(i);
  if (name.empty())
    return;
  auto it = imp.inferred.find(name);
  if (it != imp.inferred.end() && it->second != v.getType())
    n.fail("imported result type " + formatType(v.getType()) +
           " differs from the ONNX inferred type " + formatType(it->second) +
           " (importer bug; please report)");
  imp.define(name, v);
}

Value OnnxNode::splat(Value like, double value) {
  return splatConstant(b, loc, typeOf(like), value);
}

void OnnxNode::floatOnly(Value v) {
  if (!isa<FloatType>(typeOf(v).getElementType()))
    n.fail("needs a floating-point input");
}

Value OnnxNode::reshapeTo(Value x, ArrayRef<int64_t> shape) {
  auto xt = typeOf(x);
  auto type = RankedTensorType::get(shape, xt.getElementType());
  if (type.getNumElements() != xt.getNumElements())
    n.fail("cannot reshape " + formatShape(xt.getShape()) + " to " +
           formatShape(shape));
  if (auto c = imp.getConst(n.inputName(0))) {
    ConstTensor r = *c;
    r.shape.assign(shape.begin(), shape.end());
    imp.defineConst(n.outputName(0), r);
    return nullptr;
  }
  return type == xt ? x : ReshapeOp::create(b, loc, type, x).getResult();
}

void OnnxNode::finishReshape(Value v) {
  if (v)
    setOut(0, v);
}

const OnnxHandlerTable &loom::onnx_import::onnxHandlers() {
  static const OnnxHandlerTable table = [] {
    OnnxHandlerTable t;
    addElementwiseHandlers(t);
    addNNHandlers(t);
    addShapeHandlers(t);
    addIndexHandlers(t);
    return t;
  }();
  return table;
}

void OnnxImporter::convertNode(const onnx::NodeProto &node) {
  OnnxNode c(*this, node);
  if (tryFold(node))
    return;
  b.setInsertionPointToEnd(entry);
  auto it = onnxHandlers().find(node.op_type());
  if (it == onnxHandlers().end())
    c.n.fail("conversion is not implemented");
  (c.*(it->second))();
}
