//===- LoomInterfaces.cpp - Default implementations of loom interfaces ----===//

#include "loom/Dialect/Loom/IR/LoomInterfaces.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

#include "loom/Dialect/Loom/IR/LoomEnums.cpp.inc"
#include "loom/Dialect/Loom/IR/LoomInterfaces.cpp.inc"

static int64_t numElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return shaped && shaped.hasStaticShape() ? shaped.getNumElements() : 0;
}

static int64_t numBytes(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  // i1 is stored as one byte.
  int64_t bits = shaped.getElementTypeBitWidth();
  return shaped.getNumElements() * ((bits + 7) / 8);
}

int64_t loom::detail::defaultFlopCount(Operation *op) {
  int64_t flops = 0;
  for (Type type : op->getResultTypes())
    flops += numElements(type);
  return flops;
}

int64_t loom::detail::defaultByteCount(Operation *op) {
  int64_t bytes = 0;
  for (Type type : op->getOperandTypes())
    bytes += numBytes(type);
  for (Type type : op->getResultTypes())
    bytes += numBytes(type);
  return bytes;
}
