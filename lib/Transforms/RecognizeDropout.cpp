//===- RecognizeDropout.cpp - Random masks into loom.dropout --------------===//
//
// `loom-recognize-dropout`: a dropout or drop-path mask written as
// div(cast(compare lt (uniform draw in [0, 1), keep)), keep) (or a
// multiplication by 1 / keep) becomes loom.dropout of ones with ratio
// 1 - keep and the draw's stream. Then, with dropout=off, every
// loom.dropout is replaced by its input. The rewrite keeps each value's
// distribution; the draws themselves differ (dropout drops where u < ratio,
// the exported mask keeps where u < keep), which no one can observe but a
// test that pins the random numbers.
//
//===----------------------------------------------------------------------===//

#include "PassHelpers.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>

namespace loom {
#define GEN_PASS_DEF_RECOGNIZEDROPOUTPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// `keep` if `v` is cast(compare lt (uniform [0, 1) draw, keep)) to a float
/// type, with `keep` a scalar constant in (0, 1]; the draw in `draw`.
std::optional<double> keepMask(Value v, RandomOp &draw) {
  auto cast = v.getDefiningOp<CastOp>();
  if (!cast || !isa<FloatType>(getElementTypeOrSelf(cast.getY().getType())))
    return std::nullopt;
  auto cmp = cast.getX().getDefiningOp<CompareOp>();
  if (!cmp || cmp.getPredicate() != ComparePredicate::LT)
    return std::nullopt;
  auto random = cmp.getLhs().getDefiningOp<RandomOp>();
  if (!random || random.getDistribution() != "uniform" ||
      random.getA().convertToDouble() != 0.0 ||
      random.getB().convertToDouble() != 1.0)
    return std::nullopt;
  std::optional<double> keep = scalarConstant(cmp.getRhs());
  if (!keep || !(*keep > 0.0 && *keep <= 1.0))
    return std::nullopt;
  draw = random;
  return keep;
}

/// Whether `scale` is 1 / keep in the element type's precision.
bool isInverse(double scale, double keep, bool divides) {
  double expected = divides ? keep : 1.0 / keep;
  return std::fabs(scale - expected) <= 1e-6 * std::fabs(expected);
}

struct RecognizeDropoutPass
    : loom::impl::RecognizeDropoutPassBase<RecognizeDropoutPass> {
  using RecognizeDropoutPassBase::RecognizeDropoutPassBase;

  void runOnOperation() override {
    if (dropout != "on" && dropout != "off") {
      getOperation().emitError()
          << "loom-recognize-dropout: dropout must be on or off, got '"
          << dropout << "'";
      return signalPassFailure();
    }
    SmallVector<Operation *> candidates;
    getOperation().walk([&](Operation *op) {
      if (isa<DivOp, MulOp>(op))
        candidates.push_back(op);
    });
    for (Operation *op : candidates)
      recognize(op);
    if (dropout == "off")
      removeAll();
  }

  void recognize(Operation *op) {
    bool divides = isa<DivOp>(op);
    for (int side = 0; side < (divides ? 1 : 2); ++side) {
      RandomOp draw;
      std::optional<double> keep = keepMask(op->getOperand(side), draw);
      std::optional<double> scale = scalarConstant(op->getOperand(1 - side));
      if (!keep || !scale || !isInverse(*scale, *keep, divides))
        continue;
      OpBuilder b(op);
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      Value ones = ConstantOp::create(
          b, op->getLoc(),
          DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(),
                                                      1.0)));
      Value replacement = DropoutOp::create(
          b, op->getLoc(), type, ones, draw.getSeed(),
          b.getF32FloatAttr(static_cast<float>(1.0 - *keep)),
          draw.getStreamAttr());
      op->getResult(0).replaceAllUsesWith(replacement);
      ++numRecognized;
      return;
    }
  }

  void removeAll() {
    numRemoved += removeDropouts(getOperation());
    // What the recognized masks leave behind (draw, compare, cast, divide)
    // is dead now; the draws still read are not masks this pass knows.
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(cleanUpAfterDropout(func))) {
        func.emitError() << "loom-recognize-dropout: cannot remove the "
                            "unused seed argument";
        return signalPassFailure();
      }
    getOperation().walk([&](RandomOp r) {
      r.emitWarning() << "this random draw is not a dropout or drop-path "
                         "mask Loom recognizes: --dropout=off leaves it "
                         "random";
    });
  }
};

} // namespace
