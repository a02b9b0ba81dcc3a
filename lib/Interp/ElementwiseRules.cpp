//===- ElementwiseRules.cpp - Pointwise ops, select, cast, constants ------===//
//
// The rules of the pointwise ops (unary and binary math, gelu), select,
// compare, the identity of cast and stop_gradient, and constants.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace loom::interp;

namespace {

Rule unary(std::function<double(double)> f) {
  return [f](Operation *, ArrayRef<const Tensor *> in,
             MutableArrayRef<Tensor> out, Interpreter &) {
    for (size_t i = 0; i < out[0].data.size(); ++i)
      out[0].data[i] = f(in[0]->data[i]);
    return success();
  };
}

Rule binary(std::function<double(double, double)> f) {
  return [f](Operation *, ArrayRef<const Tensor *> in,
             MutableArrayRef<Tensor> out, Interpreter &) {
    for (size_t i = 0; i < out[0].data.size(); ++i)
      out[0].data[i] = f(in[0]->data[i], in[1]->data[i]);
    return success();
  };
}

LogicalResult divRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  bool integer = !isFloat(op->getResult(0).getType());
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    double x = in[0]->data[i], y = in[1]->data[i];
    if (integer) {
      if (y == 0) {
        SmallVector<int64_t> index;
        unravel(i, out[0].type.getShape(), index);
        return op->emitError("integer division by zero at element ")
               << formatIndex(index);
      }
      out[0].data[i] = std::trunc(x / y);
    } else {
      out[0].data[i] = x / y;
    }
  }
  return success();
}

double gelu(double x, loom::GeluApproximation approximation) {
  if (approximation == loom::GeluApproximation::Tanh) {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

LogicalResult geluRule(Operation *op, ArrayRef<const Tensor *> in,
                       MutableArrayRef<Tensor> out, Interpreter &) {
  auto approximation = cast<loom::GeluOp>(op).getApproximate();
  for (size_t i = 0; i < out[0].data.size(); ++i)
    out[0].data[i] = gelu(in[0]->data[i], approximation);
  return success();
}

LogicalResult selectRule(Operation *, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  for (size_t i = 0; i < out[0].data.size(); ++i)
    out[0].data[i] = in[0]->data[i] != 0 ? in[1]->data[i] : in[2]->data[i];
  return success();
}

LogicalResult compareRule(Operation *op, ArrayRef<const Tensor *> in,
                          MutableArrayRef<Tensor> out, Interpreter &) {
  loom::ComparePredicate predicate = cast<loom::CompareOp>(op).getPredicate();
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    // C++ comparisons of doubles are ordered: false with NaN except !=.
    double a = in[0]->data[i], b = in[1]->data[i];
    bool r = false;
    switch (predicate) {
    case loom::ComparePredicate::EQ:
      r = a == b;
      break;
    case loom::ComparePredicate::NE:
      r = a != b;
      break;
    case loom::ComparePredicate::LT:
      r = a < b;
      break;
    case loom::ComparePredicate::LE:
      r = a <= b;
      break;
    case loom::ComparePredicate::GT:
      r = a > b;
      break;
    case loom::ComparePredicate::GE:
      r = a >= b;
      break;
    }
    out[0].data[i] = r ? 1 : 0;
  }
  return success();
}

LogicalResult constantRule(Operation *op, ArrayRef<const Tensor *>,
                           MutableArrayRef<Tensor> out, Interpreter &) {
  auto attr =
      dyn_cast<DenseElementsAttr>(cast<loom::ConstantOp>(op).getValue());
  if (!attr)
    return op->emitError("loom-interp: constant is not a dense elements "
                         "attribute");
  std::vector<double> &data = out[0].data;
  Type elementType = attr.getElementType();
  size_t i = 0;
  if (isa<FloatType>(elementType)) {
    for (const APFloat &v : attr.getValues<APFloat>()) {
      APFloat d = v;
      bool losesInfo = false;
      d.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      data[i++] = d.convertToDouble();
    }
  } else if (auto intType = dyn_cast<IntegerType>(elementType)) {
    for (const APInt &v : attr.getValues<APInt>())
      data[i++] = intType.getWidth() == 1 ? double(v.getBoolValue())
                                          : double(v.getSExtValue());
  } else {
    return op->emitError("loom-interp: constant of element type ")
           << elementType << " is not supported";
  }
  return success();
}

} // namespace

/// Identity: cast's conversion is the rounding every result gets (float to
/// float rounds to nearest even, float to integer truncates, to i1 is != 0).
LogicalResult loom::interp::copyRule(Operation *, ArrayRef<const Tensor *> in,
                                     MutableArrayRef<Tensor> out,
                                     Interpreter &) {
  out[0].data = in[0]->data;
  return success();
}

void loom::interp::addElementwiseRules(llvm::StringMap<Rule> &t) {
  t["loom.add"] = binary([](double x, double y) { return x + y; });
  t["loom.sub"] = binary([](double x, double y) { return x - y; });
  t["loom.mul"] = binary([](double x, double y) { return x * y; });
  t["loom.div"] = divRule;
  t["loom.pow"] = binary([](double x, double y) { return std::pow(x, y); });
  t["loom.max"] = binary(nanMax);
  t["loom.min"] = binary(nanMin);
  t["loom.neg"] = unary([](double x) { return -x; });
  t["loom.abs"] = unary([](double x) { return std::fabs(x); });
  t["loom.exp"] = unary([](double x) { return std::exp(x); });
  t["loom.log"] = unary([](double x) { return std::log(x); });
  t["loom.tanh"] = unary([](double x) { return std::tanh(x); });
  t["loom.sigmoid"] =
      unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); });
  // relu(NaN) is NaN, as max(x, 0) with NaN propagation.
  t["loom.relu"] = unary([](double x) { return nanMax(x, 0.0); });
  t["loom.erf"] = unary([](double x) { return std::erf(x); });
  t["loom.sqrt"] = unary([](double x) { return std::sqrt(x); });
  t["loom.rsqrt"] = unary([](double x) { return 1.0 / std::sqrt(x); });
  t["loom.floor"] = unary([](double x) { return std::floor(x); });
  t["loom.cos"] = unary([](double x) { return std::cos(x); });
  t["loom.sin"] = unary([](double x) { return std::sin(x); });
  t["loom.gelu"] = geluRule;
  t["loom.select"] = selectRule;
  t["loom.compare"] = compareRule;
  t["loom.cast"] = copyRule;
  t["loom.stop_gradient"] = copyRule;
  t["loom.constant"] = constantRule;
}
