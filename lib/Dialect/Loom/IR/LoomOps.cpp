//===- LoomOps.cpp - Verifiers, type inference and folders of loom ops ----===//
//
// Type inference doubles as verification for ops whose result type follows
// from their operands: MLIR checks the declared result type against the
// inferred one, so each constraint is checked in exactly one place. The
// comments `(Cn)` refer to the numbered constraints in LoomOps.td.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <cmath>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace loom;

std::string loom::shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(shape, os);
  os << "]";
  return s;
}

namespace {

RankedTensorType ranked(Type type) { return cast<RankedTensorType>(type); }
} // namespace

//===----------------------------------------------------------------------===//
// CastOp
//===----------------------------------------------------------------------===//

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getX().getType() == getType())
    return getX();
  return {};
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  // (C1)
  if (getValue().getType() != getType())
    return emitOpError("value type ")
           << getValue().getType() << " differs from result type " << getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// MatmulOp
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto lhs = ranked(adaptor.getLhs().getType());
  auto rhs = ranked(adaptor.getRhs().getType());
  int64_t rank = lhs.getRank();
  // (C1)
  if (rank < 2)
    return emitOptionalError(loc, "lhs must have rank >= 2, got ", rank);
  if (rhs.getRank() != rank && rhs.getRank() != 2)
    return emitOptionalError(loc, "rhs must have the rank of lhs (", rank,
                             ") or rank 2, got ", rhs.getRank());
  // (C2)
  ArrayRef<int64_t> ls = lhs.getShape(), rs = rhs.getShape();
  if (rhs.getRank() == rank && ls.drop_back(2) != rs.drop_back(2))
    return emitOptionalError(loc, "batch dimensions differ: lhs ",
                             shapeStr(ls.drop_back(2)), " vs rhs ",
                             shapeStr(rs.drop_back(2)));
  int64_t m = adaptor.getTransposeA() ? ls[rank - 1] : ls[rank - 2];
  int64_t kl = adaptor.getTransposeA() ? ls[rank - 2] : ls[rank - 1];
  int64_t r = rhs.getRank();
  int64_t kr = adaptor.getTransposeB() ? rs[r - 1] : rs[r - 2];
  int64_t n = adaptor.getTransposeB() ? rs[r - 2] : rs[r - 1];
  // (C3)
  if (kl != kr)
    return emitOptionalError(loc, "contracting dimensions differ: lhs ",
                             shapeStr(ls), " has K=", kl, ", rhs ",
                             shapeStr(rs), " has K=", kr);
  // (C4)
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "lhs and rhs element types differ");
  // (C6)
  if (Value bias = adaptor.getBias()) {
    auto bt = ranked(bias.getType());
    if (bt.getRank() != 1 || bt.getDimSize(0) != n ||
        bt.getElementType() != lhs.getElementType())
      return emitOptionalError(loc, "bias must be a rank-1 tensor of N=", n,
                               " elements of the operands' type, got ",
                               bias.getType());
  }
  // (C5)
  SmallVector<int64_t> shape(ls.drop_back(2));
  shape.push_back(m);
  shape.push_back(n);
  results.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

int64_t MatmulOp::getFlopCount() {
  auto lhs = ranked(getLhs().getType());
  int64_t k = getTransposeA() ? lhs.getShape()[lhs.getRank() - 2]
                              : lhs.getShape()[lhs.getRank() - 1];
  int64_t elements = ranked(getType()).getNumElements();
  return (2 * k + (getBias() ? 1 : 0)) * elements;
}

//===----------------------------------------------------------------------===//
// Conv2DOp
//===----------------------------------------------------------------------===//

/// Output size of a window op along one dimension, or -1 if it does not fit.
static int64_t windowOutSize(int64_t in, int64_t padLo, int64_t padHi,
                             int64_t window, int64_t stride, int64_t dilation) {
  int64_t effective = (window - 1) * dilation + 1;
  int64_t padded = in + padLo + padHi;
  if (padded < effective)
    return -1;
  return (padded - effective) / stride + 1;
}

/// The NCHW shape of an NHWC tensor type `t` (`channelsLast`), or `t`.
static RankedTensorType asNchw(RankedTensorType t, bool channelsLast) {
  if (!channelsLast || t.getRank() != 4)
    return t;
  ArrayRef<int64_t> s = t.getShape();
  return t.clone({s[0], s[3], s[1], s[2]});
}

/// The NHWC form of an NCHW tensor type `t` (`channelsLast`), or `t`.
static RankedTensorType fromNchw(RankedTensorType t, bool channelsLast) {
  if (!channelsLast || t.getRank() != 4)
    return t;
  ArrayRef<int64_t> s = t.getShape();
  return t.clone({s[0], s[2], s[3], s[1]});
}

LogicalResult Conv2DOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  bool channelsLast = adaptor.getChannelsLast();
  auto in = asNchw(ranked(adaptor.getInput().getType()), channelsLast);
  auto filter = ranked(adaptor.getFilter().getType());
  // (C5)
  if (channelsLast && adaptor.getGroups() != 1)
    return emitOptionalError(loc, "a channels-last convolution has one group");
  // (C1)
  if (in.getRank() != 4 || filter.getRank() != 4)
    return emitOptionalError(loc, "input and filter must have rank 4 (NCHW, "
                                  "OIHW), got ",
                             in.getRank(), " and ", filter.getRank());
  if (in.getElementType() != filter.getElementType())
    return emitOptionalError(loc, "input and filter element types differ");
  ArrayRef<int64_t> strides = adaptor.getStrides(), pads = adaptor.getPadding(),
                    dil = adaptor.getDilations();
  // (C2)
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return emitOptionalError(loc, "strides and dilations need 2 entries and "
                                  "padding 4");
  if (llvm::any_of(strides, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(dil, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(pads, [](int64_t v) { return v < 0; }))
    return emitOptionalError(loc, "strides and dilations must be positive and "
                                  "padding non-negative");
  // (C3)
  int64_t groups = adaptor.getGroups();
  int64_t c = in.getDimSize(1), o = filter.getDimSize(0);
  if (groups < 1 || c % groups != 0 || o % groups != 0)
    return emitOptionalError(loc, "groups (", groups,
                             ") must divide input channels (", c,
                             ") and output channels (", o, ")");
  if (filter.getDimSize(1) != c / groups)
    return emitOptionalError(loc, "filter has ", filter.getDimSize(1),
                             " input channels per group, expected ", c / groups);
  // (C4)
  int64_t h = windowOutSize(in.getDimSize(2), pads[0], pads[2],
                            filter.getDimSize(2), strides[0], dil[0]);
  int64_t w = windowOutSize(in.getDimSize(3), pads[1], pads[3],
                            filter.getDimSize(3), strides[1], dil[1]);
  if (h < 1 || w < 1)
    return emitOptionalError(loc, "filter ", shapeStr(filter.getShape()),
                             " does not fit in padded input ",
                             shapeStr(in.getShape()));
  results.push_back(fromNchw(RankedTensorType::get({in.getDimSize(0), o, h, w},
                                                   in.getElementType()),
                             channelsLast));
  return success();
}

int64_t Conv2DOp::getFlopCount() {
  auto filter = ranked(getFilter().getType());
  int64_t macs = filter.getDimSize(1) * filter.getDimSize(2) * filter.getDimSize(3);
  return 2 * macs * ranked(getType()).getNumElements();
}

//===----------------------------------------------------------------------===//
// Im2ColOp, Col2ImOp
//===----------------------------------------------------------------------===//

/// (C1)-(C3) of im2col for an `x` of type `xType`: the columns' type.
static FailureOr<RankedTensorType>
im2colType(std::optional<Location> loc, Type xType, ArrayRef<int64_t> kernel,
           ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
           ArrayRef<int64_t> dil) {
  auto x = ranked(xType);
  // (C1)
  if (x.getRank() != 4) {
    (void)emitOptionalError(loc, "the image must have rank 4 (NCHW), got ",
                            x.getRank());
    return failure();
  }
  // (C2)
  auto positive = [](ArrayRef<int64_t> v) {
    return v.size() == 2 && llvm::all_of(v, [](int64_t e) { return e > 0; });
  };
  if (!positive(kernel) || !positive(strides) || !positive(dil) ||
      pads.size() != 4 ||
      llvm::any_of(pads, [](int64_t v) { return v < 0; })) {
    (void)emitOptionalError(loc, "kernel, strides and dilations need 2 "
                                 "positive entries and padding 4 "
                                 "non-negative ones");
    return failure();
  }
  // (C3)
  int64_t h = windowOutSize(x.getDimSize(2), pads[0], pads[2], kernel[0],
                            strides[0], dil[0]);
  int64_t w = windowOutSize(x.getDimSize(3), pads[1], pads[3], kernel[1],
                            strides[1], dil[1]);
  if (h < 1 || w < 1) {
    (void)emitOptionalError(loc, "the dilated ", shapeStr(kernel),
                            " kernel does not fit in the padded image ",
                            shapeStr(x.getShape()));
    return failure();
  }
  return RankedTensorType::get(
      {x.getDimSize(1) * kernel[0] * kernel[1], x.getDimSize(0) * h * w},
      x.getElementType());
}

LogicalResult Im2ColOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> t =
      im2colType(loc, adaptor.getX().getType(), adaptor.getKernel(),
                 adaptor.getStrides(), adaptor.getPadding(),
                 adaptor.getDilations());
  if (failed(t))
    return failure();
  results.push_back(*t);
  return success();
}

LogicalResult Col2ImOp::verify() {
  auto cols = ranked(getCols().getType());
  // (C1)
  if (cols.getRank() != 2)
    return emitOpError("cols must have rank 2, got ") << cols.getRank();
  if (cols.getElementType() != ranked(getType()).getElementType())
    return emitOpError("cols and result must have the same element type");
  // (C2), and (C1) for the result
  FailureOr<RankedTensorType> expected =
      im2colType(getLoc(), getType(), getKernel(), getStrides(), getPadding(),
                 getDilations());
  if (failed(expected))
    return failure();
  // (C3)
  if (expected->getShape() != cols.getShape())
    return emitOpError("im2col of a ")
           << shapeStr(ranked(getType()).getShape()) << " result has shape "
           << shapeStr(expected->getShape()) << ", not the "
           << shapeStr(cols.getShape()) << " of cols";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Shared by the reduce ops: (C1) (C2) (C3).
static LogicalResult inferReduce(std::optional<Location> loc, Type xType,
                                 ArrayRef<int64_t> dims, bool keepDims,
                                 SmallVectorImpl<Type> &results) {
  auto x = ranked(xType);
  int64_t prev = -1;
  for (int64_t d : dims) {
    if (d < 0 || d >= x.getRank())
      return emitOptionalError(loc, "dimension ", d, " is out of range for rank ",
                               x.getRank());
    if (d <= prev)
      return emitOptionalError(loc, "dims must be strictly increasing");
    prev = d;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < x.getRank(); ++i) {
    if (!llvm::is_contained(dims, i))
      shape.push_back(x.getDimSize(i));
    else if (keepDims)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

#define LOOM_REDUCE_INFER(OP)                                                  \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferReduce(loc, adaptor.getX().getType(), adaptor.getDims(),       \
                       adaptor.getKeepDims(), results);                        \
  }
LOOM_REDUCE_INFER(ReduceSumOp)
LOOM_REDUCE_INFER(ReduceMaxOp)
LOOM_REDUCE_INFER(ReduceMinOp)
LOOM_REDUCE_INFER(ReduceMeanOp)
#undef LOOM_REDUCE_INFER

//===----------------------------------------------------------------------===//
// BroadcastInDimOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  auto x = ranked(getX().getType());
  auto result = ranked(getType());
  ArrayRef<int64_t> dims = getDims();
  // (C1)
  if (static_cast<int64_t>(dims.size()) != x.getRank())
    return emitOpError("dims has ") << dims.size() << " entries but the operand "
                                    << "has rank " << x.getRank();
  // (C2)
  int64_t prev = -1;
  for (int64_t d : dims) {
    if (d <= prev || d >= result.getRank())
      return emitOpError("dims must be strictly increasing and below the "
                         "result rank ")
             << result.getRank();
    prev = d;
  }
  // (C3)
  for (auto [i, d] : llvm::enumerate(dims)) {
    int64_t size = x.getDimSize(i);
    if (size != 1 && size != result.getDimSize(d))
      return emitOpError("operand dimension ")
             << i << " (size " << size << ") cannot broadcast to result "
             << "dimension " << d << " (size " << result.getDimSize(d) << ")";
  }
  // (C4)
  if (x.getElementType() != result.getElementType())
    return emitOpError("operand and result element types differ");
  return success();
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getX()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

//===----------------------------------------------------------------------===//
// ReshapeOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto x = ranked(getX().getType());
  auto result = ranked(getType());
  // (C1)
  if (x.getNumElements() != result.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeStr(x.getShape()) << " (" << x.getNumElements()
           << " elements) to " << shapeStr(result.getShape()) << " ("
           << result.getNumElements() << " elements)";
  // (C2)
  if (x.getElementType() != result.getElementType())
    return emitOpError("operand and result element types differ");
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getX().getType() == getType())
    return getX();
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(adaptor.getX()))
    return dense.reshape(getType());
  return {};
}

//===----------------------------------------------------------------------===//
// TransposeOp
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto x = ranked(adaptor.getX().getType());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  // (C1)
  if (static_cast<int64_t>(perm.size()) != x.getRank())
    return emitOptionalError(loc, "perm has ", perm.size(),
                             " entries but the operand has rank ", x.getRank());
  llvm::SmallBitVector seen(perm.size());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen.test(p))
      return emitOptionalError(loc, "perm ", shapeStr(perm),
                               " is not a permutation of [0, ", x.getRank(), ")");
    seen.set(p);
    shape.push_back(x.getDimSize(p));
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// SliceOp
//===----------------------------------------------------------------------===//

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto x = ranked(adaptor.getX().getType());
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit(),
                    stride = adaptor.getStride();
  size_t rank = x.getRank();
  // (C1)
  if (start.size() != rank || limit.size() != rank || stride.size() != rank)
    return emitOptionalError(loc, "start, limit and stride need ", rank,
                             " entries each");
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < rank; ++d) {
    // (C2)
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > x.getDimSize(d) ||
        stride[d] < 1)
      return emitOptionalError(loc, "invalid slice [", start[d], ":", limit[d],
                               ":", stride[d], "] of dimension ", d,
                               " with size ", x.getDimSize(d));
    shape.push_back((limit[d] - start[d] + stride[d] - 1) / stride[d]);
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// ConcatOp
//===----------------------------------------------------------------------===//

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  ValueRange inputs = adaptor.getInputs();
  // (C1)
  if (inputs.empty())
    return emitOptionalError(loc, "needs at least one input");
  auto first = ranked(inputs.front().getType());
  int64_t dim = adaptor.getDim();
  // (C2)
  if (dim < 0 || dim >= first.getRank())
    return emitOptionalError(loc, "dim ", dim, " is out of range for rank ",
                             first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (auto [i, v] : llvm::enumerate(inputs)) {
    auto t = ranked(v.getType());
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "input ", i,
                               " differs from input 0 in rank or element type");
    // (C3)
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != dim && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "input ", i, " has shape ",
                                 shapeStr(t.getShape()), ", incompatible with ",
                                 shapeStr(first.getShape()), " outside dim ",
                                 dim);
    shape[dim] += t.getDimSize(dim);
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// GatherOp
//===----------------------------------------------------------------------===//

LogicalResult GatherOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto table = ranked(adaptor.getTable().getType());
  auto indices = ranked(adaptor.getIndices().getType());
  int64_t axis = adaptor.getAxis();
  // (C1)
  if (axis < 0 || axis >= table.getRank())
    return emitOptionalError(loc, "axis ", axis, " is out of range for rank ",
                             table.getRank());
  // (C2)
  SmallVector<int64_t> shape(table.getShape().take_front(axis));
  llvm::append_range(shape, indices.getShape());
  llvm::append_range(shape, table.getShape().drop_front(axis + 1));
  results.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax, normalizations
//===----------------------------------------------------------------------===//

static LogicalResult verifyAxis(Operation *op, int64_t axis, Type type) {
  int64_t rank = ranked(type).getRank();
  if (axis < 0 || axis >= rank)
    return op->emitOpError("axis ")
           << axis << " is out of range for rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getX().getType()); // (C2)
}
LogicalResult LogSoftmaxOp::verify() {
  return verifyAxis(*this, getAxis(), getX().getType()); // (C2)
}

/// (C2) of layer_norm and rms_norm: a parameter has the normalized shape.
static LogicalResult verifyNormalizedShape(Operation *op, StringRef name,
                                           Value param, Type xType,
                                           int64_t axis) {
  ArrayRef<int64_t> expected = ranked(xType).getShape().drop_front(axis);
  ArrayRef<int64_t> got = ranked(param.getType()).getShape();
  if (expected != got)
    return op->emitOpError() << name << " has shape " << shapeStr(got)
                             << " but the normalized shape is "
                             << shapeStr(expected);
  return success();
}

static LogicalResult verifyEpsilon(Operation *op, APFloat epsilon) {
  if (!(epsilon.convertToDouble() > 0.0))
    return op->emitOpError("epsilon must be positive");
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), getX().getType()))) // (C1)
    return failure();
  if (failed(verifyNormalizedShape(*this, "scale", getScale(), getX().getType(),
                                   getAxis())) ||
      failed(verifyNormalizedShape(*this, "bias", getBias(), getX().getType(),
                                   getAxis()))) // (C2)
    return failure();
  return verifyEpsilon(*this, getEpsilonAttr().getValue()); // (C3)
}

LogicalResult RmsNormOp::verify() {
  if (failed(verifyAxis(*this, getAxis(), getX().getType()))) // (C1)
    return failure();
  if (failed(verifyNormalizedShape(*this, "scale", getScale(), getX().getType(),
                                   getAxis()))) // (C2)
    return failure();
  return verifyEpsilon(*this, getEpsilonAttr().getValue()); // (C3)
}

/// (C1) (C2) of batch_norm and batch_norm_stats: per-channel vectors.
static LogicalResult checkChannelVector(std::optional<Location> loc,
                                        RankedTensorType x, Type statType,
                                        StringRef name) {
  if (x.getRank() < 2)
    return emitOptionalError(loc, "input must have rank >= 2, got ", x.getRank());
  auto stat = ranked(statType);
  if (stat.getRank() != 1 || stat.getDimSize(0) != x.getDimSize(1) ||
      stat.getElementType() != x.getElementType())
    return emitOptionalError(loc, name, " must be 1-D with ", x.getDimSize(1),
                             " elements (the channels) of the input's element "
                             "type, got ",
                             statType);
  return success();
}

LogicalResult BatchNormOp::verify() {
  auto x = ranked(getX().getType());
  if (failed(checkChannelVector(getLoc(), x, getScale().getType(), "scale")))
    return failure();
  if (failed(verifyEpsilon(*this, getEpsilonAttr().getValue()))) // (C3)
    return failure();
  if (auto m = getMomentum()) { // (C4)
    double v = m->convertToDouble();
    if (!(v >= 0.0 && v <= 1.0))
      return emitOpError("momentum must be in [0, 1], got ") << v;
  }
  return success();
}

LogicalResult BatchNormStatsOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto x = ranked(adaptor.getX().getType());
  // (C1)
  if (x.getRank() < 2)
    return emitOptionalError(loc, "input must have rank >= 2, got ", x.getRank());
  // (C2)
  auto stat = RankedTensorType::get({x.getDimSize(1)}, x.getElementType());
  results.push_back(stat);
  results.push_back(stat);
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

static LogicalResult inferPool(std::optional<Location> loc, Type xType,
                               ArrayRef<int64_t> kernel,
                               ArrayRef<int64_t> strides,
                               ArrayRef<int64_t> pads,
                               SmallVectorImpl<Type> &results) {
  auto x = ranked(xType);
  // (C1)
  if (x.getRank() != 4)
    return emitOptionalError(loc, "input must have rank 4 (NCHW), got ",
                             x.getRank());
  // (C2)
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return emitOptionalError(loc, "kernel and strides need 2 entries and "
                                  "padding 4");
  for (int i = 0; i < 2; ++i)
    if (kernel[i] < 1 || strides[i] < 1)
      return emitOptionalError(loc, "kernel and strides must be positive");
  for (int i = 0; i < 4; ++i)
    if (pads[i] < 0 || pads[i] >= kernel[i % 2])
      return emitOptionalError(loc, "padding must be non-negative and smaller "
                                    "than the kernel");
  // (C3)
  int64_t h = windowOutSize(x.getDimSize(2), pads[0], pads[2], kernel[0],
                            strides[0], 1);
  int64_t w = windowOutSize(x.getDimSize(3), pads[1], pads[3], kernel[1],
                            strides[1], 1);
  if (h < 1 || w < 1)
    return emitOptionalError(loc, "kernel ", shapeStr(kernel),
                             " does not fit in padded input ",
                             shapeStr(x.getShape()));
  results.push_back(RankedTensorType::get(
      {x.getDimSize(0), x.getDimSize(1), h, w}, x.getElementType()));
  return success();
}

LogicalResult MaxPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  return inferPool(loc, adaptor.getX().getType(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(), results);
}

LogicalResult AvgPool2DOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  return inferPool(loc, adaptor.getX().getType(), adaptor.getKernel(),
                   adaptor.getStrides(), adaptor.getPadding(), results);
}

//===----------------------------------------------------------------------===//
// DropoutOp
//===----------------------------------------------------------------------===//

LogicalResult DropoutOp::verify() {
  // (C1); (C2) is the operand's type constraint.
  double ratio = getRatioAttr().getValueAsDouble();
  if (!(ratio >= 0.0 && ratio < 1.0))
    return emitOpError("ratio must be in [0, 1), got ") << ratio;
  return success();
}

LogicalResult RandomOp::verify() {
  // (C1); (C2) is the operand's type constraint.
  double a = getA().convertToDouble(), b = getB().convertToDouble();
  if (!std::isfinite(a) || !std::isfinite(b))
    return emitOpError("a and b must be finite, got ") << a << " and " << b;
  StringRef d = getDistribution();
  if (d == "uniform") {
    if (!(a < b))
      return emitOpError("a uniform distribution needs a < b, got [")
             << a << ", " << b << ")";
    return success();
  }
  if (d == "normal") {
    if (b < 0)
      return emitOpError("a normal distribution needs a standard deviation "
                         "b >= 0, got ")
             << b;
    return success();
  }
  return emitOpError("distribution must be 'uniform' or 'normal', got '")
         << d << "'";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> loc,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &results) {
  auto logits = ranked(adaptor.getLogits().getType());
  auto labels = ranked(adaptor.getLabels().getType());
  // (C1)
  if (logits.getRank() < 2)
    return emitOptionalError(loc, "logits must have rank >= 2 ([N, C, ...]), "
                                  "got ",
                             logits.getRank());
  // (C2)
  SmallVector<int64_t> expected(logits.getShape());
  expected.erase(expected.begin() + 1);
  if (ArrayRef<int64_t>(expected) != labels.getShape())
    return emitOptionalError(loc, "labels have shape ",
                             shapeStr(labels.getShape()), " but logits ",
                             shapeStr(logits.getShape()), " need labels ",
                             shapeStr(expected));
  // (C3) 16-bit logits (mixed precision) give an f32 loss.
  Type element = logits.getElementType();
  if (element.isBF16() || element.isF16())
    element = Float32Type::get(element.getContext());
  if (adaptor.getReduction() == Reduction::None)
    results.push_back(RankedTensorType::get(expected, element));
  else
    results.push_back(RankedTensorType::get({}, element));
  return success();
}

LogicalResult MseOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  auto pred = ranked(adaptor.getPrediction().getType());
  // (C1)
  if (pred != adaptor.getTarget().getType())
    return emitOptionalError(loc, "prediction ", Type(pred), " and target ",
                             adaptor.getTarget().getType(), " differ");
  // (C2)
  if (adaptor.getReduction() == Reduction::None)
    results.push_back(pred);
  else
    results.push_back(RankedTensorType::get({}, pred.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Ops the gradients need: scatter_add, pad, conv2d_input_grad,
// conv2d_filter_grad, max_pool2d_argmax
//===----------------------------------------------------------------------===//

LogicalResult ScatterAddOp::verify() {
  auto result = ranked(getType());
  auto updates = ranked(getUpdates().getType());
  auto indices = ranked(getIndices().getType());
  int64_t axis = getAxis();
  // (C1)
  if (axis < 0 || axis >= result.getRank())
    return emitOpError("axis ")
           << axis << " is out of range for rank " << result.getRank();
  // (C2)
  SmallVector<int64_t> expected(result.getShape().take_front(axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, result.getShape().drop_front(axis + 1));
  if (ArrayRef<int64_t>(expected) != updates.getShape())
    return emitOpError("updates have shape ")
           << shapeStr(updates.getShape()) << " but result "
           << shapeStr(result.getShape()) << " and indices "
           << shapeStr(indices.getShape()) << " need " << shapeStr(expected);
  // (C3)
  if (updates.getElementType() != result.getElementType())
    return emitOpError("updates and result element types differ");
  return success();
}

/// Indices 0, 1, ..., n-1 over an axis of size n (a position embedding's
/// arange) scatter every slice to where it already is: the updates.
OpFoldResult ScatterAddOp::fold(FoldAdaptor adaptor) {
  auto indices = dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getIndices());
  if (!indices || getUpdates().getType() != getType() ||
      ranked(getIndices().getType()).getRank() != 1)
    return {};
  int64_t expected = 0;
  for (const APInt &v : indices.getValues<APInt>())
    if (v.getSExtValue() != expected++)
      return {};
  return getUpdates();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  auto x = ranked(adaptor.getX().getType());
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh(),
                    interior = adaptor.getInterior();
  size_t rank = x.getRank();
  // (C1)
  if (low.size() != rank || high.size() != rank || interior.size() != rank)
    return emitOptionalError(loc, "low, high and interior need ", rank,
                             " entries each");
  // (C2)
  for (size_t d = 0; d < rank; ++d)
    if (low[d] < 0 || high[d] < 0 || interior[d] < 0)
      return emitOptionalError(loc, "padding of dimension ", d,
                               " must be non-negative");
  // (C3)
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = x.getDimSize(d);
    shape.push_back(low[d] + high[d] +
                    (n == 0 ? 0 : n + (n - 1) * interior[d]));
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

/// (C1)-(C4) of the convolution gradients: `in` and `filter` are the shapes
/// of the forward convolution's input and filter, `out` the shape of its
/// output; `inName`, `filterName` and `outName` say which operand or result
/// of `op` each one is.
static LogicalResult
verifyConvGrad(Operation *op, Type inType, StringRef inName, Type filterType,
               StringRef filterName, Type outType, StringRef outName,
               ArrayRef<int64_t> strides, ArrayRef<int64_t> pads,
               ArrayRef<int64_t> dil, int64_t groups, bool channelsLast) {
  // (C5)
  if (channelsLast && groups != 1)
    return op->emitOpError("a channels-last convolution has one group");
  // In and out as NCHW (C1-C4 read them so).
  auto in = asNchw(ranked(inType), channelsLast), filter = ranked(filterType),
       out = asNchw(ranked(outType), channelsLast);
  // (C1)
  if (in.getRank() != 4 || filter.getRank() != 4 || out.getRank() != 4)
    return op->emitOpError() << inName << ", " << filterName << " and "
                             << outName << " must have rank 4";
  if (in.getElementType() != filter.getElementType() ||
      in.getElementType() != out.getElementType())
    return op->emitOpError() << inName << ", " << filterName << " and "
                             << outName << " must have the same element type";
  // (C2)
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    return op->emitOpError(
        "strides and dilations need 2 entries and padding 4");
  if (llvm::any_of(strides, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(dil, [](int64_t v) { return v < 1; }) ||
      llvm::any_of(pads, [](int64_t v) { return v < 0; }))
    return op->emitOpError("strides and dilations must be positive and "
                           "padding non-negative");
  // (C3)
  int64_t c = in.getDimSize(1), o = filter.getDimSize(0);
  if (groups < 1 || c % groups != 0 || o % groups != 0)
    return op->emitOpError("groups (")
           << groups << ") must divide input channels (" << c
           << ") and output channels (" << o << ")";
  if (filter.getDimSize(1) != c / groups)
    return op->emitOpError()
           << filterName << " has " << filter.getDimSize(1)
           << " input channels per group, expected " << c / groups;
  // (C4)
  int64_t h = windowOutSize(in.getDimSize(2), pads[0], pads[2],
                            filter.getDimSize(2), strides[0], dil[0]);
  int64_t w = windowOutSize(in.getDimSize(3), pads[1], pads[3],
                            filter.getDimSize(3), strides[1], dil[1]);
  SmallVector<int64_t> expected = {in.getDimSize(0), o, h, w};
  if (h < 1 || w < 1 || ArrayRef<int64_t>(expected) != out.getShape())
    return op->emitOpError("the convolution of a ")
           << shapeStr(in.getShape()) << " input with a "
           << shapeStr(filter.getShape()) << " filter does not have the shape "
           << shapeStr(out.getShape()) << " of " << outName;
  return success();
}

LogicalResult Conv2DInputGradOp::verify() {
  return verifyConvGrad(*this, getType(), "result", getFilter().getType(),
                        "filter", getDy().getType(), "dy", getStrides(),
                        getPadding(), getDilations(), getGroups(),
                        getChannelsLast());
}

int64_t Conv2DInputGradOp::getFlopCount() {
  auto filter = ranked(getFilter().getType());
  int64_t macs =
      filter.getDimSize(1) * filter.getDimSize(2) * filter.getDimSize(3);
  return 2 * macs * ranked(getDy().getType()).getNumElements();
}

LogicalResult Conv2DFilterGradOp::verify() {
  return verifyConvGrad(*this, getX().getType(), "x", getType(), "result",
                        getDy().getType(), "dy", getStrides(), getPadding(),
                        getDilations(), getGroups(), getChannelsLast());
}

int64_t Conv2DFilterGradOp::getFlopCount() {
  auto filter = ranked(getType());
  int64_t macs =
      filter.getDimSize(1) * filter.getDimSize(2) * filter.getDimSize(3);
  return 2 * macs * ranked(getDy().getType()).getNumElements();
}

LogicalResult MaxPool2DArgmaxOp::inferReturnTypes(
    MLIRContext *ctx, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  // (C1) (C2) (C3)
  if (failed(inferPool(loc, adaptor.getX().getType(), adaptor.getKernel(),
                       adaptor.getStrides(), adaptor.getPadding(), results)))
    return failure();
  // (C4)
  results.back() = ranked(results.back()).clone(IntegerType::get(ctx, 64));
  return success();
}

LogicalResult MaxPool2DGradOp::verify() {
  auto dy = ranked(getDy().getType()), idx = ranked(getArgmax().getType()),
       dx = ranked(getType());
  // (C1)
  if (dy.getRank() != 4 || dy.getShape() != idx.getShape())
    return emitOpError("dy ")
           << shapeStr(dy.getShape()) << " and argmax "
           << shapeStr(idx.getShape()) << " must have one shape of rank 4";
  // (C3)
  if (dx.getElementType() != dy.getElementType())
    return emitOpError("result element type ")
           << dx.getElementType() << " differs from dy's "
           << dy.getElementType();
  // (C2), and the rank of (C3)
  SmallVector<Type> pooled;
  if (failed(inferPool(getLoc(), dx, getKernel(), getStrides(), getPadding(),
                       pooled)))
    return failure();
  // (C3)
  if (ranked(pooled[0]).getShape() != dy.getShape())
    return emitOpError("pooling the result ")
           << shapeStr(dx.getShape()) << " gives "
           << shapeStr(ranked(pooled[0]).getShape()) << ", not dy's "
           << shapeStr(dy.getShape());
  return success();
}

#define GET_OP_CLASSES
#include "loom/Dialect/Loom/IR/LoomOps.cpp.inc"

std::string loom::dtypeName(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (t.isInteger(64))
    return "i64";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(8))
    return "i8";
  if (t.isInteger(1))
    return "bool";
  return "";
}

std::string loom::nodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location l : fused.getLocations())
      if (std::string n = nodeName(l); !n.empty())
        return n;
    return "";
  }
  if (auto callsite = dyn_cast<CallSiteLoc>(loc))
    return nodeName(callsite.getCallee());
  return "";
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

LogicalResult loom::FusionOp::verify() {
  Block &body = getBody().front();
  // (C1)
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body has ")
           << body.getNumArguments() << " arguments for "
           << getInputs().size() << " operands (C1)";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError("body argument #")
             << arg.getArgNumber() << " has type " << arg.getType()
             << ", its operand " << input.getType() << " (C1)";
  // (C2)
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("body yields ")
           << yield.getValues().getTypes() << " for results "
           << getResultTypes() << " (C2)";
  return success();
}

//===----------------------------------------------------------------------===//
// Meshes and collectives
//===----------------------------------------------------------------------===//

FailureOr<std::vector<MeshAxis>> loom::getMesh(ModuleOp module) {
  auto axes = module->getAttrOfType<ArrayAttr>(kMeshAxesAttr);
  auto shape = module->getAttrOfType<DenseI64ArrayAttr>(kMeshShapeAttr);
  if (!axes && !shape && !module->hasAttr(kMeshAxesAttr) &&
      !module->hasAttr(kMeshShapeAttr))
    return std::vector<MeshAxis>{};
  if (!axes || !shape || axes.size() != shape.size())
    return module.emitError()
           << kMeshAxesAttr << " (an array of strings) and " << kMeshShapeAttr
           << " (array<i64>) must both be given, one entry per axis";
  std::vector<MeshAxis> mesh;
  for (auto [name, size] : llvm::zip(axes, shape.asArrayRef())) {
    auto s = dyn_cast<StringAttr>(name);
    if (!s || s.getValue().empty() || size < 1)
      return module.emitError()
             << "mesh axes need a non-empty name and a size of at least 1";
    for (const MeshAxis &a : mesh)
      if (a.name == s.getValue())
        return module.emitError() << "mesh axis '" << a.name << "' twice";
    mesh.push_back({s.str(), size});
  }
  return mesh;
}

void loom::setMesh(ModuleOp module, ArrayRef<MeshAxis> mesh) {
  Builder b(module.getContext());
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  for (const MeshAxis &a : mesh) {
    names.push_back(b.getStringAttr(a.name));
    sizes.push_back(a.size);
  }
  module->setAttr(kMeshAxesAttr, b.getArrayAttr(names));
  module->setAttr(kMeshShapeAttr, b.getDenseI64ArrayAttr(sizes));
}

int64_t loom::meshAxisSize(Operation *op, StringRef axis) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module)
    return 0;
  auto axes = module->getAttrOfType<ArrayAttr>(kMeshAxesAttr);
  auto shape = module->getAttrOfType<DenseI64ArrayAttr>(kMeshShapeAttr);
  if (!axes || !shape || axes.size() != shape.size())
    return 0;
  for (auto [name, size] : llvm::zip(axes, shape.asArrayRef()))
    if (auto s = dyn_cast<StringAttr>(name); s && s.getValue() == axis)
      return size;
  return 0;
}

namespace {
/// (C2) of every collective: the axis is in the mesh of the enclosing
/// module. An op outside any module (a function being built) is not
/// checked yet.
LogicalResult verifyAxis(Operation *op, StringRef axis, int64_t &n) {
  n = meshAxisSize(op, axis);
  if (n > 0 || !op->getParentOfType<ModuleOp>())
    return success();
  return op->emitOpError("axis '")
         << axis << "' is not an axis of the module's mesh (" << kMeshAxesAttr
         << ") (C2)";
}

/// (C1) and (C3) of the collectives that split or join dimension 0: `whole`
/// is n blocks of `part` along dimension 0 (n unknown outside a module).
LogicalResult verifyBlocks(Operation *op, RankedTensorType whole,
                           RankedTensorType part, int64_t n,
                           StringRef wholeName) {
  if (whole.getElementType() != part.getElementType() ||
      whole.getRank() != part.getRank() || whole.getRank() < 1)
    return op->emitOpError("x and y need the same element type and rank, "
                           "at least 1 (C1)");
  bool ok = whole.getShape().drop_front() == part.getShape().drop_front();
  if (n > 0)
    ok = ok && whole.getDimSize(0) == n * part.getDimSize(0);
  if (!ok)
    return op->emitOpError()
           << wholeName << " " << shapeStr(whole.getShape()) << " is not "
           << (n > 0 ? std::to_string(n) : std::string("n"))
           << " blocks of " << shapeStr(part.getShape())
           << " along dimension 0 (C3)";
  return success();
}
} // namespace

int64_t AllReduceOp::getAxisSize() { return meshAxisSize(*this, getAxis()); }
int64_t ReduceScatterOp::getAxisSize() {
  return meshAxisSize(*this, getAxis());
}
int64_t AllGatherOp::getAxisSize() { return meshAxisSize(*this, getAxis()); }
int64_t RankSliceOp::getAxisSize() { return meshAxisSize(*this, getAxis()); }

LogicalResult AllReduceOp::verify() {
  int64_t n = 0;
  return verifyAxis(*this, getAxis(), n);
}

LogicalResult ReduceScatterOp::verify() {
  int64_t n = 0;
  if (failed(verifyAxis(*this, getAxis(), n)) ||
      failed(verifyBlocks(*this, ranked(getX().getType()),
                          ranked(getType()), n, "x")))
    return failure();
  // (C4)
  if (getReduce() == CollectiveReduce::Max)
    return emitOpError("reduce is sum or mean (C4)");
  return success();
}

LogicalResult AllGatherOp::verify() {
  int64_t n = 0;
  if (failed(verifyAxis(*this, getAxis(), n)))
    return failure();
  return verifyBlocks(*this, ranked(getType()), ranked(getX().getType()), n,
                      "y");
}

LogicalResult RankSliceOp::verify() {
  int64_t n = 0;
  if (failed(verifyAxis(*this, getAxis(), n)))
    return failure();
  return verifyBlocks(*this, ranked(getX().getType()), ranked(getType()), n,
                      "x");
}
