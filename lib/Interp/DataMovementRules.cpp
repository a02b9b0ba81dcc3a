//===- DataMovementRules.cpp - Ops that move elements around --------------===//
//
// The rules of the ops that only move or copy elements: broadcast_in_dim,
// reshape, transpose, slice, concat, gather, scatter_add and pad.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <algorithm>

using namespace mlir;
using namespace loom::interp;

namespace {

LogicalResult broadcastRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  ArrayRef<int64_t> dims = cast<loom::BroadcastInDimOp>(op).getDims();
  ArrayRef<int64_t> xs = in[0]->type.getShape(), ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(xs), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      src += (xs[d] == 1 ? 0 : index[dims[d]]) * xStrides[d];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult transposeRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  ArrayRef<int64_t> perm = cast<loom::TransposeOp>(op).getPerm();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(in[0]->type.getShape()), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      src += index[d] * xStrides[perm[d]];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult sliceRule(Operation *op, ArrayRef<const Tensor *> in,
                        MutableArrayRef<Tensor> out, Interpreter &) {
  auto slice = cast<loom::SliceOp>(op);
  ArrayRef<int64_t> start = slice.getStart(), stride = slice.getStride();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  SmallVector<int64_t> xStrides = stridesOf(in[0]->type.getShape()), index;
  for (size_t i = 0; i < out[0].data.size(); ++i) {
    unravel(i, ys, index);
    int64_t src = 0;
    for (size_t d = 0; d < ys.size(); ++d)
      src += (start[d] + index[d] * stride[d]) * xStrides[d];
    out[0].data[i] = in[0]->data[src];
  }
  return success();
}

LogicalResult concatRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t dim = cast<loom::ConcatOp>(op).getDim();
  ArrayRef<int64_t> ys = out[0].type.getShape();
  int64_t outer = product(ys.take_front(dim));
  size_t pos = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor *t : in) {
      int64_t block = product(t->type.getShape().drop_front(dim));
      for (int64_t k = 0; k < block; ++k)
        out[0].data[pos++] = t->data[o * block + k];
    }
  return success();
}

LogicalResult gatherRule(Operation *op, ArrayRef<const Tensor *> in,
                         MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t axis = cast<loom::GatherOp>(op).getAxis();
  ArrayRef<int64_t> ts = in[0]->type.getShape();
  int64_t outer = product(ts.take_front(axis));
  int64_t axisSize = ts[axis];
  int64_t inner = product(ts.drop_front(axis + 1));
  int64_t numIndices = in[1]->data.size();
  for (int64_t k = 0; k < numIndices; ++k) {
    int64_t index = static_cast<int64_t>(in[1]->data[k]);
    int64_t wrapped = index < 0 ? index + axisSize : index;
    if (wrapped < 0 || wrapped >= axisSize) {
      SmallVector<int64_t> position;
      unravel(k, in[1]->type.getShape(), position);
      return op->emitError("gather index ")
             << index << " (at position " << formatIndex(position)
             << " of the indices) is out of range for dimension " << axis
             << " of size " << axisSize;
    }
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < numIndices; ++k) {
      int64_t index = static_cast<int64_t>(in[1]->data[k]);
      if (index < 0)
        index += axisSize;
      for (int64_t s = 0; s < inner; ++s)
        out[0].data[(o * numIndices + k) * inner + s] =
            in[0]->data[(o * axisSize + index) * inner + s];
    }
  return success();
}

LogicalResult scatterAddRule(Operation *op, ArrayRef<const Tensor *> in,
                             MutableArrayRef<Tensor> out, Interpreter &) {
  int64_t axis = cast<loom::ScatterAddOp>(op).getAxis();
  ArrayRef<int64_t> rs = out[0].type.getShape();
  int64_t outer = product(rs.take_front(axis));
  int64_t axisSize = rs[axis];
  int64_t inner = product(rs.drop_front(axis + 1));
  int64_t numIndices = in[1]->data.size();
  for (int64_t k = 0; k < numIndices; ++k) {
    int64_t index = static_cast<int64_t>(in[1]->data[k]);
    int64_t wrapped = index < 0 ? index + axisSize : index;
    if (wrapped < 0 || wrapped >= axisSize) {
      SmallVector<int64_t> position;
      unravel(k, in[1]->type.getShape(), position);
      return op->emitError("scatter_add index ")
             << index << " (at position " << formatIndex(position)
             << " of the indices) is out of range for dimension " << axis
             << " of size " << axisSize;
    }
  }
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < numIndices; ++k) {
      int64_t index = static_cast<int64_t>(in[1]->data[k]);
      if (index < 0)
        index += axisSize;
      for (int64_t s = 0; s < inner; ++s)
        out[0].data[(o * axisSize + index) * inner + s] +=
            in[0]->data[(o * numIndices + k) * inner + s];
    }
  return success();
}

LogicalResult padRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  auto pad = cast<loom::PadOp>(op);
  ArrayRef<int64_t> low = pad.getLow(), interior = pad.getInterior();
  ArrayRef<int64_t> xs = in[0]->type.getShape();
  SmallVector<int64_t> yStrides = stridesOf(out[0].type.getShape()), index;
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (size_t i = 0; i < in[0]->data.size(); ++i) {
    unravel(i, xs, index);
    int64_t dst = 0;
    for (size_t d = 0; d < xs.size(); ++d)
      dst += (low[d] + index[d] * (interior[d] + 1)) * yStrides[d];
    out[0].data[dst] = in[0]->data[i];
  }
  return success();
}

} // namespace

void loom::interp::addDataMovementRules(llvm::StringMap<Rule> &t) {
  t["loom.broadcast_in_dim"] = broadcastRule;
  t["loom.reshape"] = copyRule;
  t["loom.transpose"] = transposeRule;
  t["loom.slice"] = sliceRule;
  t["loom.concat"] = concatRule;
  t["loom.gather"] = gatherRule;
  t["loom.scatter_add"] = scatterAddRule;
  t["loom.pad"] = padRule;
}
