//===- GraphBuilder.h - Helpers shared by the importers ---------*- C++ -*-===//
//
// Frontends speak numpy broadcasting and build ops whose result types are
// inferred; these helpers make the broadcasts explicit and turn a failed type
// inference into a diagnostic at the source node instead of a crash.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_IMPORT_GRAPHBUILDER_H
#define LOOM_IMPORT_GRAPHBUILDER_H

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>
#include <string>

namespace loom {

/// A shape as the importers print it in messages: `[2, 3]`.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

/// A type as MLIR prints it: `tensor<2x3xf32>`.
std::string formatType(mlir::Type type);

/// `axis` counted from the end when negative (numpy and ONNX convention);
/// nullopt when it is outside [-rank, rank).
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// The numpy broadcast of two shapes, or nullopt if they are incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Broadcasts `value` (numpy rules, right-aligned) to `shape`; returns it
/// unchanged if it already has that shape. The caller checks compatibility.
mlir::Value broadcastTo(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// A constant tensor of `type` filled with `value` (float or integer).
mlir::Value splatConstant(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::RankedTensorType type, double value);

/// Makes `a` and `b` the same shape by numpy broadcasting. On incompatible
/// shapes emits an error at `loc` naming both shapes and returns failure.
llvm::LogicalResult broadcastPair(mlir::OpBuilder &b, mlir::Location loc,
                                  mlir::Value &lhs, mlir::Value &rhs);

/// Builds `OpTy` whose result types are inferred. Any argument list accepted
/// by `OpTy::create` after the result types works. Type-inference failures
/// are reported at `loc` and give failure, never an abort.
template <typename OpTy, typename... Args>
llvm::FailureOr<OpTy> createInferred(mlir::OpBuilder &b, mlir::Location loc,
                                     Args &&...args) {
  // Build with placeholder result types, infer the real ones (which reports
  // any violated constraint at `loc`), then fix the result types up.
  llvm::SmallVector<mlir::Type, 2> placeholders(
      OpTy::template hasTrait<mlir::OpTrait::OneResult>() ? 1 : 2,
      b.getNoneType());
  auto op = OpTy::create(b, loc, mlir::TypeRange(placeholders),
                         std::forward<Args>(args)...);
  llvm::SmallVector<mlir::Type, 2> types;
  if (mlir::failed(OpTy::inferReturnTypes(b.getContext(), loc,
                                          typename OpTy::Adaptor(op), types))) {
    op->erase();
    return mlir::failure();
  }
  for (auto [result, type] : llvm::zip_equal(op->getResults(), types))
    result.setType(type);
  return op;
}

/// Builds an elementwise binary op after numpy-broadcasting its operands.
template <typename OpTy>
llvm::FailureOr<mlir::Value>
createBroadcastBinary(mlir::OpBuilder &b, mlir::Location loc, mlir::Value lhs,
                      mlir::Value rhs) {
  if (mlir::failed(broadcastPair(b, loc, lhs, rhs)))
    return mlir::failure();
  if (lhs.getType() != rhs.getType()) {
    mlir::emitError(loc) << "operand element types differ: " << lhs.getType()
                         << " vs " << rhs.getType();
    return mlir::failure();
  }
  return OpTy::create(b, loc, lhs, rhs).getResult();
}

} // namespace loom

#endif // LOOM_IMPORT_GRAPHBUILDER_H
