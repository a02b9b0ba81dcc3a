//===- GraphBuilder.cpp - Helpers shared by the importers -----------------===//

#include "loom/Import/GraphBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

std::string loom::formatShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

std::string loom::formatType(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

std::optional<int64_t> loom::normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    return std::nullopt;
  return a;
}

std::optional<SmallVector<int64_t>> loom::broadcastShapes(ArrayRef<int64_t> a,
                                                          ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value loom::broadcastTo(OpBuilder &b, Location loc, Value value,
                        ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  int64_t offset = static_cast<int64_t>(shape.size()) - type.getRank();
  SmallVector<int64_t> dims;
  for (int64_t i = 0; i < type.getRank(); ++i)
    dims.push_back(i + offset);
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  return BroadcastInDimOp::create(b, loc, resultType, value, dims);
}

Value loom::splatConstant(OpBuilder &b, Location loc, RankedTensorType type,
                          double value) {
  Type elt = type.getElementType();
  Attribute scalar;
  if (auto ft = dyn_cast<FloatType>(elt))
    scalar = b.getFloatAttr(ft, value);
  else
    scalar = b.getIntegerAttr(elt, static_cast<int64_t>(value));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, scalar));
}

LogicalResult loom::broadcastPair(OpBuilder &b, Location loc, Value &lhs,
                                  Value &rhs) {
  auto lt = cast<RankedTensorType>(lhs.getType());
  auto rt = cast<RankedTensorType>(rhs.getType());
  auto shape = broadcastShapes(lt.getShape(), rt.getShape());
  if (!shape) {
    std::string l, r;
    llvm::raw_string_ostream ls(l), rs(r);
    ls << "[";
    llvm::interleaveComma(lt.getShape(), ls);
    ls << "]";
    rs << "[";
    llvm::interleaveComma(rt.getShape(), rs);
    rs << "]";
    return emitError(loc) << "operand shapes " << l << " and " << r
                          << " are not broadcast-compatible";
  }
  lhs = broadcastTo(b, loc, lhs, *shape);
  rhs = broadcastTo(b, loc, rhs, *shape);
  return success();
}
