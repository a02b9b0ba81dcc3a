//===- LoomInterfaces.h - What passes ask of loom ops -----------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H
#define LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H

#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/TypeUtilities.h"

#include "loom/Dialect/Loom/IR/LoomEnums.h.inc"

namespace loom {
namespace detail {
/// One FLOP per result element: right for pointwise ops.
int64_t defaultFlopCount(mlir::Operation *op);
/// Every operand read once, every result written once.
int64_t defaultByteCount(mlir::Operation *op);
} // namespace detail

namespace OpTrait {
/// Carries an op's fusion kind; satisfies FusionKindOpInterface.
template <FusionKind Kind> struct FusionKindTrait {
  template <typename ConcreteType>
  class Impl : public mlir::OpTrait::TraitBase<ConcreteType, Impl> {
  public:
    static FusionKind getFusionKind() { return Kind; }
  };
};
/// Carries an op's mixed-precision class; satisfies PrecisionClassOpInterface.
template <PrecisionClass Class> struct PrecisionClassTrait {
  template <typename ConcreteType>
  class Impl : public mlir::OpTrait::TraitBase<ConcreteType, Impl> {
  public:
    static PrecisionClass getPrecisionClass() { return Class; }
  };
};
} // namespace OpTrait
} // namespace loom

#include "loom/Dialect/Loom/IR/LoomInterfaces.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H
