//===- Elementwise.cpp - Pointwise loom ops to linalg ---------------------===//
//
// Pointwise ops (unary and binary math, select, compare, cast), constants,
// stop_gradient and dropout: each one `linalg.generic` over the result's
// shape, its body the scalar rule the interpreter applies.
//
//===----------------------------------------------------------------------===//

#include "Lowerer.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {
Value unaryScalar(Lowerer &l, Operation *op, Value x) {
  Type t = x.getType();
  bool isFloat = isa<FloatType>(t);
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](NegOp) {
        return isFloat ? Value(arith::NegFOp::create(l.b, l.loc, x))
                       : l.sub(l.constant(t, 0), x);
      })
      .Case([&](AbsOp) {
        return isFloat ? Value(math::AbsFOp::create(l.b, l.loc, x))
                       : Value(math::AbsIOp::create(l.b, l.loc, x));
      })
      .Case([&](ExpOp) { return l.exp(x); })
      .Case([&](LogOp) { return l.log(x); })
      .Case([&](TanhOp) { return math::TanhOp::create(l.b, l.loc, x); })
      .Case([&](SigmoidOp) {
        Value one = l.constant(t, 1);
        Value e = l.exp(arith::NegFOp::create(l.b, l.loc, x));
        return l.div(one, l.add(one, e));
      })
      .Case([&](ReluOp) { return l.max(x, l.constant(t, 0)); })
      .Case([&](ErfOp) { return math::ErfOp::create(l.b, l.loc, x); })
      .Case([&](SqrtOp) { return l.sqrt(x); })
      .Case([&](RsqrtOp) { return l.div(l.constant(t, 1), l.sqrt(x)); })
      .Case([&](FloorOp) { return math::FloorOp::create(l.b, l.loc, x); })
      .Case([&](CosOp) { return math::CosOp::create(l.b, l.loc, x); })
      .Case([&](SinOp) { return math::SinOp::create(l.b, l.loc, x); })
      .Case([&](GeluOp g) -> Value {
        Value half = l.constant(t, 0.5), one = l.constant(t, 1);
        Value inner;
        if (g.getApproximate() == GeluApproximation::Tanh) {
          Value x3 = l.mul(l.mul(x, x), x);
          Value u = l.mul(l.constant(t, std::sqrt(2.0 / M_PI)),
                          l.add(x, l.mul(l.constant(t, 0.044715), x3)));
          inner = math::TanhOp::create(l.b, l.loc, u);
        } else {
          inner = math::ErfOp::create(
              l.b, l.loc, l.mul(x, l.constant(t, 1.0 / std::sqrt(2.0))));
        }
        return l.mul(l.mul(half, x), l.add(one, inner));
      })
      .Default([](Operation *) { return Value(); });
}

Value binaryScalar(Lowerer &l, Operation *op, Value x, Value y) {
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case([&](AddOp) { return l.add(x, y); })
      .Case([&](SubOp) { return l.sub(x, y); })
      .Case([&](MulOp) { return l.mul(x, y); })
      .Case([&](DivOp) { return l.div(x, y); })
      .Case([&](PowOp) { return math::PowFOp::create(l.b, l.loc, x, y); })
      .Case([&](MaxOp) { return l.max(x, y); })
      .Case([&](MinOp) { return l.min(x, y); })
      .Default([](Operation *) { return Value(); });
}

Value compareScalar(Lowerer &l, ComparePredicate p, Value x, Value y) {
  if (isa<FloatType>(x.getType())) {
    arith::CmpFPredicate fp = arith::CmpFPredicate::OEQ;
    switch (p) {
    case ComparePredicate::EQ: fp = arith::CmpFPredicate::OEQ; break;
    case ComparePredicate::NE: fp = arith::CmpFPredicate::UNE; break;
    case ComparePredicate::LT: fp = arith::CmpFPredicate::OLT; break;
    case ComparePredicate::LE: fp = arith::CmpFPredicate::OLE; break;
    case ComparePredicate::GT: fp = arith::CmpFPredicate::OGT; break;
    case ComparePredicate::GE: fp = arith::CmpFPredicate::OGE; break;
    }
    return arith::CmpFOp::create(l.b, l.loc, fp, x, y);
  }
  // i1 holds 0 and 1: compare unsigned so that true > false.
  bool u = x.getType().isInteger(1);
  arith::CmpIPredicate ip = arith::CmpIPredicate::eq;
  switch (p) {
  case ComparePredicate::EQ: ip = arith::CmpIPredicate::eq; break;
  case ComparePredicate::NE: ip = arith::CmpIPredicate::ne; break;
  case ComparePredicate::LT: ip = u ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt; break;
  case ComparePredicate::LE: ip = u ? arith::CmpIPredicate::ule : arith::CmpIPredicate::sle; break;
  case ComparePredicate::GT: ip = u ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::sgt; break;
  case ComparePredicate::GE: ip = u ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge; break;
  }
  return l.cmpi(ip, x, y);
}

} // namespace

namespace loom::lowering {
namespace {
/// splitmix64 finalizer on i64 (wrapping arithmetic, logical shifts).
Value splitmix(Lowerer &l, Value x) {
  Type i64 = l.b.getI64Type();
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(
        l.b, l.loc, l.b.getIntegerAttr(i64, static_cast<int64_t>(v)));
  };
  auto xorShift = [&](Value z, int64_t k) {
    return arith::XOrIOp::create(
        l.b, l.loc, z, arith::ShRUIOp::create(l.b, l.loc, z, c(k)));
  };
  Value z = l.add(x, c(0x9E3779B97F4A7C15ull));
  z = l.mul(xorShift(z, 30), c(0xBF58476D1CE4E5B9ull));
  z = l.mul(xorShift(z, 27), c(0x94D049BB133111EBull));
  return xorShift(z, 31);
}

/// The row-major linear index (i64) of the current element of an
/// elementwise generic over `type`.
Value linearIndexI64(Lowerer &l, RankedTensorType type) {
  Value linear = l.index(0);
  for (int64_t d = 0; d < type.getRank(); ++d)
    linear = l.add(l.mul(linear, l.index(type.getDimSize(d))), l.linalgIndex(d));
  return arith::IndexCastOp::create(l.b, l.loc, l.b.getI64Type(), linear);
}

} // namespace

/// The interpreter's dropoutUniform(seed, stream, i) as f64 in [0, 1):
/// splitmix64(splitmix64(seed ^ stream * golden) + i) >> 40, times 2^-24
/// (the stream mix folds at compile time).
Value uniformAt(Lowerer &l, Value seed, int64_t stream, Value i) {
  Type i64 = l.b.getI64Type(), f64 = l.b.getF64Type();
  uint64_t streamMix = static_cast<uint64_t>(stream) * 0x9E3779B97F4A7C15ull;
  Value mixed = arith::XOrIOp::create(
      l.b, l.loc, seed,
      arith::ConstantOp::create(
          l.b, l.loc, l.b.getIntegerAttr(i64, static_cast<int64_t>(streamMix))));
  Value h2 = splitmix(l, l.add(splitmix(l, mixed), i));
  Value top = arith::ShRUIOp::create(l.b, l.loc, h2, l.constant(i64, 40));
  return l.mul(arith::SIToFPOp::create(l.b, l.loc, f64, top),
               l.constant(f64, std::ldexp(1.0, -24)));
}

} // namespace loom::lowering

namespace {
Rewrite lowerDropout(Lowerer &l, DropoutOp op, Value x, Value seed) {
  RankedTensorType xt = tensorType(x);
  Type et = xt.getElementType();
  double ratio = op.getRatio().convertToFloat();
  int64_t stream = static_cast<int64_t>(op.getStream());
  Value seedV = tensor::ExtractOp::create(l.b, l.loc, seed, ValueRange{});
  return one(l.elementwise(x, xt, [&](ValueRange a) {
    Value u = uniformAt(l, seedV, stream, linearIndexI64(l, xt));
    Value drop = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OLT,
                                       u, l.constant(l.b.getF64Type(), ratio));
    Value kept = l.mul(a[0], l.constant(et, 1.0 / (1.0 - ratio)));
    return l.select(drop, l.constant(et, 0), kept);
  }));
}

/// loom.random: uniform draws a + (b - a) u(i), or normal ones by
/// Box-Muller on u(2i) and u(2i + 1) (interp::normalDraw), in f64 and
/// rounded to the element type.
Rewrite lowerRandom(Lowerer &l, RandomOp op) {
  RankedTensorType t = tensorType(op.getResult());
  Type f64 = l.b.getF64Type(), i64 = l.b.getI64Type();
  double a = op.getA().convertToDouble(), b = op.getB().convertToDouble();
  int64_t stream = static_cast<int64_t>(op.getStream());
  bool normal = op.getDistribution() == "normal";
  Value seedV =
      tensor::ExtractOp::create(l.b, l.loc, op.getSeed(), ValueRange{});
  return one(l.elementwise(ValueRange{}, t, [&](ValueRange) {
    Value i = linearIndexI64(l, t);
    Value draw;
    if (normal) {
      Value i2 = l.mul(i, l.constant(i64, 2));
      Value u1 = uniformAt(l, seedV, stream, i2);
      Value u2 = uniformAt(l, seedV, stream, l.add(i2, l.constant(i64, 1)));
      Value logTerm =
          math::LogOp::create(l.b, l.loc, l.sub(l.constant(f64, 1.0), u1));
      Value radius = math::SqrtOp::create(
          l.b, l.loc, l.mul(l.constant(f64, -2.0), logTerm));
      Value angle = math::CosOp::create(
          l.b, l.loc, l.mul(l.constant(f64, 2.0 * M_PI), u2));
      draw = l.add(l.constant(f64, a), l.mul(l.constant(f64, b),
                                             l.mul(radius, angle)));
    } else {
      Value u = uniformAt(l, seedV, stream, i);
      draw = l.add(l.constant(f64, a), l.mul(l.constant(f64, b - a), u));
    }
    if (t.getElementType() == f64)
      return draw;
    return arith::TruncFOp::create(l.b, l.loc, t.getElementType(), draw)
        .getResult();
  }));
}
} // namespace

void loom::lowering::populateElementwiseRules(RewritePatternSet &patterns) {
  addRules<NegOp, AbsOp, ExpOp, LogOp, TanhOp, SigmoidOp, ReluOp, ErfOp,
           SqrtOp, RsqrtOp, FloorOp, CosOp, SinOp, GeluOp>(
      patterns, [](Lowerer &l, Operation *op) -> Rewrite {
        return one(l.elementwise(op->getOperands(),
                                 tensorType(op->getResult(0)),
                                 [&](ValueRange a) {
                                   return unaryScalar(l, op, a[0]);
                                 }));
      });
  addRules<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp>(
      patterns, [](Lowerer &l, Operation *op) -> Rewrite {
        return one(l.elementwise(op->getOperands(),
                                 tensorType(op->getResult(0)),
                                 [&](ValueRange a) {
                                   return binaryScalar(l, op, a[0], a[1]);
                                 }));
      });
  addRule<PowOp>(patterns, [](Lowerer &l, PowOp op) -> Rewrite {
    RankedTensorType t = tensorType(op.getResult());
    // x^n for a constant exponent n in {0.5, 1, 2, 3, 4} (GELU's x^3 and its
    // gradient's x^2): multiplications, or a square root, where powf is a
    // scalar libm call per element that does not vectorize.
    DenseFPElementsAttr exponent;
    if (matchPattern(op.getY(), m_Constant(&exponent)) &&
        exponent.isSplat()) {
      double n = exponent.getSplatValue<APFloat>().convertToDouble();
      if (n == 0.5 || n == 1 || n == 2 || n == 3 || n == 4)
        return one(l.elementwise(op.getX(), t, [&](ValueRange a) {
          Value x = a[0];
          if (n == 0.5)
            return l.sqrt(x);
          Value y = x;
          for (int i = 1; i < static_cast<int>(n); ++i)
            y = l.mul(y, x);
          return y;
        }));
    }
    return one(l.elementwise(op->getOperands(), t, [&](ValueRange a) {
      return binaryScalar(l, op, a[0], a[1]);
    }));
  });
  addRule<StopGradientOp>(patterns, [](Lowerer &l, StopGradientOp op) {
    return Rewrite(one(op.getX()));
  });
  addRule<SelectOp>(patterns, [](Lowerer &l, SelectOp op) -> Rewrite {
    return one(l.elementwise(op->getOperands(), tensorType(op.getResult()),
                             [&](ValueRange a) {
                               return l.select(a[0], a[1], a[2]);
                             }));
  });
  addRule<CompareOp>(patterns, [](Lowerer &l, CompareOp c) -> Rewrite {
    return one(l.elementwise(c->getOperands(), tensorType(c.getResult()),
                             [&](ValueRange a) {
                               return compareScalar(l, c.getPredicate(), a[0],
                                                    a[1]);
                             }));
  });
  addRule<CastOp>(patterns, [](Lowerer &l, CastOp c) -> Rewrite {
    RankedTensorType t = tensorType(c.getResult());
    return one(l.elementwise(c->getOperands(), t, [&](ValueRange a) {
      return l.convert(a[0], t.getElementType());
    }));
  });
  addRule<ConstantOp>(patterns, [](Lowerer &l, ConstantOp c) -> Rewrite {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr)
      return failure();
    return one(arith::ConstantOp::create(l.b, l.loc, attr));
  });
  addRule<DropoutOp>(patterns, [](Lowerer &l, DropoutOp d) {
    return lowerDropout(l, d, d->getOperand(0), d->getOperand(1));
  });
  addRule<RandomOp>(patterns, [](Lowerer &l, RandomOp r) {
    return lowerRandom(l, r);
  });
}
