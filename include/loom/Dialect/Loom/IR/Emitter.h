//===- Emitter.h - Building loom ops with their result types ---*- C++ -*-===//
//
// A small builder over OpBuilder for code that creates many loom ops at one
// location: constants, elementwise arithmetic, reductions, broadcasts,
// slices and products, each with its result type computed from its
// operands.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_EMITTER_H
#define LOOM_DIALECT_LOOM_IR_EMITTER_H

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"

namespace loom {

/// Builds loom ops at one location, computing their result types: the
/// gradient rules (LoomVJP.cpp) and the passes that expand a fused op into
/// ordinary ones are written with it.
struct Emitter {
  mlir::OpBuilder &b;
  mlir::Location loc;

  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  static llvm::SmallVector<int64_t> range(int64_t begin, int64_t end) {
    llvm::SmallVector<int64_t> r;
    for (int64_t i = begin; i < end; ++i)
      r.push_back(i);
    return r;
  }

  // Constants.
  mlir::Value splat(mlir::RankedTensorType type, double value) {
    mlir::Type elt = type.getElementType();
    mlir::Attribute attr;
    if (auto f = mlir::dyn_cast<mlir::FloatType>(elt))
      attr = b.getFloatAttr(f, value);
    else
      attr = b.getIntegerAttr(elt, static_cast<int64_t>(value));
    return ConstantOp::create(b, loc, mlir::DenseElementsAttr::get(type, attr));
  }
  mlir::Value splatLike(mlir::Value v, double value) {
    return splat(typeOf(v), value);
  }
  mlir::Value zerosLike(mlir::Value v) { return splatLike(v, 0.0); }

  // Elementwise arithmetic (operands of one type).
  mlir::Value add(mlir::Value x, mlir::Value y) {
    return AddOp::create(b, loc, x, y);
  }
  mlir::Value sub(mlir::Value x, mlir::Value y) {
    return SubOp::create(b, loc, x, y);
  }
  mlir::Value mul(mlir::Value x, mlir::Value y) {
    return MulOp::create(b, loc, x, y);
  }
  mlir::Value div(mlir::Value x, mlir::Value y) {
    return DivOp::create(b, loc, x, y);
  }
  mlir::Value neg(mlir::Value x) { return NegOp::create(b, loc, x); }
  mlir::Value scale(mlir::Value x, double c) { return mul(x, splatLike(x, c)); }
  mlir::Value addScalar(mlir::Value x, double c) {
    return add(x, splatLike(x, c));
  }
  mlir::Value exp(mlir::Value x) { return ExpOp::create(b, loc, x); }
  mlir::Value log(mlir::Value x) { return LogOp::create(b, loc, x); }
  mlir::Value pow(mlir::Value x, mlir::Value y) {
    return PowOp::create(b, loc, x, y);
  }
  mlir::Value erf(mlir::Value x) { return ErfOp::create(b, loc, x); }
  mlir::Value tanh(mlir::Value x) { return TanhOp::create(b, loc, x); }
  mlir::Value sin(mlir::Value x) { return SinOp::create(b, loc, x); }
  mlir::Value cos(mlir::Value x) { return CosOp::create(b, loc, x); }
  mlir::Value rsqrt(mlir::Value x) { return RsqrtOp::create(b, loc, x); }

  mlir::Value cmp(ComparePredicate pred, mlir::Value x, mlir::Value y) {
    auto type = typeOf(x).clone(b.getI1Type());
    return CompareOp::create(b, loc, type, pred, x, y);
  }
  mlir::Value select(mlir::Value cond, mlir::Value t, mlir::Value f) {
    return SelectOp::create(b, loc, t.getType(), cond, t, f);
  }
  mlir::Value castTo(mlir::Value x, mlir::Type elementType) {
    auto type = typeOf(x).clone(elementType);
    if (type == x.getType())
      return x;
    return CastOp::create(b, loc, type, x);
  }

  // Data movement and reductions; result types computed here.
  mlir::Value reshape(mlir::Value x, mlir::RankedTensorType type) {
    if (x.getType() == type)
      return x;
    return ReshapeOp::create(b, loc, type, x);
  }
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    return reshape(x, typeOf(x).clone(shape));
  }
  mlir::Value broadcast(mlir::Value x, mlir::RankedTensorType type,
                        llvm::ArrayRef<int64_t> dims) {
    if (x.getType() == type)
      return x;
    return BroadcastInDimOp::create(b, loc, type, x, dims);
  }
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm) {
    auto type = typeOf(x);
    llvm::SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(type.getDimSize(p));
    return TransposeOp::create(b, loc, type.clone(shape), x, perm);
  }
  template <typename OpTy>
  mlir::Value reduce(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                     bool keepDims) {
    if (dims.empty())
      return x;
    auto type = typeOf(x);
    llvm::SmallVector<int64_t> shape;
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (!llvm::is_contained(dims, i))
        shape.push_back(type.getDimSize(i));
      else if (keepDims)
        shape.push_back(1);
    }
    return OpTy::create(b, loc, type.clone(shape), x, dims, keepDims);
  }
  mlir::Value sum(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                  bool keepDims = false) {
    return reduce<ReduceSumOp>(x, dims, keepDims);
  }
  mlir::Value mean(mlir::Value x, llvm::ArrayRef<int64_t> dims,
                   bool keepDims = false) {
    return reduce<ReduceMeanOp>(x, dims, keepDims);
  }
  /// Broadcasts `g`, the result of reducing a `type` tensor over `dims`
  /// (kept with size 1 or removed), back to `type`.
  mlir::Value unreduce(mlir::Value g, mlir::RankedTensorType type,
                       llvm::ArrayRef<int64_t> dims, bool keepDims) {
    if (keepDims)
      return broadcast(g, type, range(0, type.getRank()));
    llvm::SmallVector<int64_t> kept;
    for (int64_t i = 0; i < type.getRank(); ++i)
      if (!llvm::is_contained(dims, i))
        kept.push_back(i);
    return broadcast(g, type, kept);
  }
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs, bool ta, bool tb) {
    auto l = typeOf(lhs), r = typeOf(rhs);
    int64_t lr = l.getRank(), rr = r.getRank();
    llvm::SmallVector<int64_t> shape(l.getShape().drop_back(2));
    shape.push_back(ta ? l.getDimSize(lr - 1) : l.getDimSize(lr - 2));
    shape.push_back(tb ? r.getDimSize(rr - 2) : r.getDimSize(rr - 1));
    return MatmulOp::create(b, loc, l.clone(shape), lhs, rhs, mlir::Value(), ta,
                            tb);
  }
  /// Swaps the last two dimensions.
  mlir::Value swapLast2(mlir::Value x) {
    int64_t rank = typeOf(x).getRank();
    llvm::SmallVector<int64_t> perm = range(0, rank);
    std::swap(perm[rank - 1], perm[rank - 2]);
    return transpose(x, perm);
  }
  mlir::Value slice(mlir::Value x, llvm::ArrayRef<int64_t> start,
                    llvm::ArrayRef<int64_t> limit,
                    llvm::ArrayRef<int64_t> stride) {
    llvm::SmallVector<int64_t> shape;
    for (size_t d = 0; d < start.size(); ++d)
      shape.push_back((limit[d] - start[d] + stride[d] - 1) / stride[d]);
    return SliceOp::create(b, loc, typeOf(x).clone(shape), x, start, limit,
                           stride);
  }
  /// Broadcasts a per-channel vector [C] to `type` along dimension 1.
  mlir::Value channel(mlir::Value v, mlir::RankedTensorType type) {
    return broadcast(v, type, {1});
  }
};

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_EMITTER_H
