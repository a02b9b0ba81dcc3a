//===- LoomDialect.cpp - The loom dialect ---------------------------------===//

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Transforms/InliningUtils.h"

using namespace mlir;
using namespace loom;

#include "loom/Dialect/Loom/IR/LoomOpsDialect.cpp.inc"

namespace {
/// Every loom op is pure and region-free except loom.fusion, whose region is
/// isolated: all of them may be inlined (train_step calls forward_backward
/// and apply_optimizer; code generation inlines them).
struct LoomInlinerInterface : public DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Operation *, bool) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"
      >();
  addInterfaces<LoomInlinerInterface>();
}

Operation *LoomDialect::materializeConstant(OpBuilder &builder,
                                            Attribute value, Type type,
                                            Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}
