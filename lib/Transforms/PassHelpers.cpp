//===- PassHelpers.cpp - Small helpers the transforms share ---------------===//

#include "PassHelpers.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;

std::optional<double> loom::scalarConstant(Value v) {
  while (auto b = v.getDefiningOp<BroadcastInDimOp>())
    v = b.getX();
  while (auto r = v.getDefiningOp<ReshapeOp>())
    v = r.getX();
  auto c = v.getDefiningOp<ConstantOp>();
  if (!c)
    return std::nullopt;
  auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
  if (!attr || !(attr.isSplat() || attr.getNumElements() == 1))
    return std::nullopt;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (attr.getElementType().isInteger(1))
    return double(!attr.getSplatValue<APInt>().isZero());
  if (isa<IntegerType>(attr.getElementType()))
    return double(attr.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

int64_t loom::removeDropouts(Operation *root) {
  SmallVector<DropoutOp> dropouts;
  root->walk([&](DropoutOp d) { dropouts.push_back(d); });
  for (DropoutOp d : dropouts) {
    d.getY().replaceAllUsesWith(d.getX());
    d.erase();
  }
  return static_cast<int64_t>(dropouts.size());
}

LogicalResult loom::cleanUpAfterDropout(func::FuncOp func) {
  func.walk([](MulOp mul) {
    for (int side = 0; side < 2; ++side) {
      Value other = mul->getOperand(1 - side);
      if (other.getType() == mul.getType() &&
          scalarConstant(mul->getOperand(side)) == 1.0) {
        mul.getResult().replaceAllUsesWith(other);
        return;
      }
    }
  });
  IRRewriter rewriter(func->getContext());
  (void)runRegionDCE(rewriter, func->getRegions());
  llvm::BitVector unused(func.getNumArguments());
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    unused[i] =
        func.getArgAttr(i, kRngSeedAttr) && func.getArgument(i).use_empty();
  return unused.any() ? func.eraseArguments(unused) : success();
}
