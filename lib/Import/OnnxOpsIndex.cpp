//===- OnnxOpsIndex.cpp - ONNX gathers and scatters ------------------------===//
//
// Gather, GatherND, GatherElements, ScatterND and ScatterElements (and
// opset < 11's Scatter): indices known at compile time become constant
// gathers and row masks, run-time ones loom.gather and loom.scatter_add
// where the op allows. Each handler converts one node (see OnnxImport.h);
// addIndexHandlers lists the ops it serves.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include <algorithm>

using namespace mlir;
using namespace loom;
using namespace loom::onnx_import;

void OnnxNode::convertGather() {
  Value data = input(0), indices = input(1);
  int64_t axis = normAxis(n, n.getInt("axis", 0), typeOf(data).getRank());
  if (auto c = imp.getConst(n.inputName(1))) {
    int64_t size = typeOf(data).getDimSize(axis);
    for (double v : c->values)
      if (v < -size || v >= size)
        n.fail("index " + Twine(static_cast<int64_t>(v)) +
               " is out of range for dimension of size " + Twine(size));
  }
  setOut(
      0,
      check(createInferred<GatherOp>(b, loc, data, indices, axis)).getResult());
  return;
}

void OnnxNode::convertGatherND() {
  // Run-time data with compile-time indices (what exporters write to pick
  // a padding mask's entries by batch and key position): the data's
  // leading batch_dims + k dimensions flattened into one, and a
  // loom.gather along it with the linear indices, computed here.
  if (imp.failedValues.contains(n.inputName(1)))
    throw ImportFailure{}; // reported at the node that failed
  std::optional<ConstTensor> index = imp.getConst(n.inputName(1));
  Value data = input(0);
  auto dt = typeOf(data);
  ArrayRef<int64_t> indexShape = typeOf(input(1)).getShape();
  int64_t r = dt.getRank(), q = indexShape.size();
  int64_t batch = n.getInt("batch_dims", 0);
  if (q == 0 || batch < 0 || batch >= std::min(r, q))
    n.fail("invalid batch_dims " + Twine(batch) + " for data of rank " +
           Twine(r) + " and indices of rank " + Twine(q));
  int64_t k = indexShape[q - 1];
  if (k < 1 || batch + k > r)
    n.fail("index depth " + Twine(k) + " exceeds the data rank " + Twine(r));
  for (int64_t d = 0; d < batch; ++d)
    if (indexShape[d] != dt.getDimSize(d))
      n.fail("indices dimension " + Twine(d) + " (" + Twine(indexShape[d]) +
             ") differs from the data's (" + Twine(dt.getDimSize(d)) +
             ") within batch_dims");
  int64_t lead = 1, batchSize = 1;
  for (int64_t d = 0; d < batch + k; ++d)
    lead *= dt.getDimSize(d);
  for (int64_t d = 0; d < batch; ++d)
    batchSize *= dt.getDimSize(d);
  SmallVector<int64_t> flat{lead};
  flat.append(dt.getShape().begin() + batch + k, dt.getShape().end());
  Value table = ReshapeOp::create(
      b, loc, RankedTensorType::get(flat, dt.getElementType()), data);
  if (!index) {
    // Run-time indices: their rows computed in the step.
    setOut(0, check(createInferred<GatherOp>(
                        b, loc, table, tupleRowIndex(dt, input(1), batch),
                        int64_t(0)))
                  .getResult());
    return;
  }
  int64_t tuples = index->numElements() / k;
  int64_t perBatch = std::max<int64_t>(tuples / std::max<int64_t>(batchSize, 1), 1);
  std::vector<int64_t> linear(tuples);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = t / perBatch;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = dt.getDimSize(batch + j);
      int64_t v = static_cast<int64_t>(index->values[t * k + j]);
      if (v < -dim || v >= dim)
        n.fail("index " + Twine(v) + " is out of range for data dimension " +
               Twine(batch + j) + " of size " + Twine(dim));
      off = off * dim + (v < 0 ? v + dim : v);
    }
    linear[t] = off;
  }
  SmallVector<int64_t> idxShape(index->shape.begin(), index->shape.end() - 1);
  auto idxType = RankedTensorType::get(idxShape, b.getI64Type());
  Value idx = ConstantOp::create(
      b, loc, DenseElementsAttr::get(idxType, ArrayRef<int64_t>(linear)));
  setOut(0, check(createInferred<GatherOp>(b, loc, table, idx, int64_t(0)))
                .getResult());
}

int64_t loom::onnx_import::scatterNDShapes(const NodeCtx &n,
                                           ArrayRef<int64_t> dataShape,
                                           ArrayRef<int64_t> indexShape,
                                           ArrayRef<int64_t> updatesShape,
                                           int64_t &rows, int64_t &slice) {
  int64_t r = dataShape.size(), q = indexShape.size();
  if (q == 0)
    n.fail("indices must have rank >= 1");
  int64_t k = indexShape[q - 1];
  if (k < 1 || k > r)
    n.fail("index depth " + Twine(k) + " must be in [1, " + Twine(r) +
           "] for data of rank " + Twine(r));
  SmallVector<int64_t> want(indexShape.begin(), indexShape.end() - 1);
  want.append(dataShape.begin() + k, dataShape.end());
  if (updatesShape != ArrayRef<int64_t>(want))
    n.fail("updates are " + formatShape(updatesShape) + ", expected " +
           formatShape(want) + " (indices' leading dimensions, then the "
           "data's after the first " + Twine(k) + ")");
  rows = 1;
  slice = 1;
  for (int64_t d = 0; d < r; ++d)
    (d < k ? rows : slice) *= dataShape[d];
  return k;
}

std::vector<SmallVector<int64_t, 1>> loom::onnx_import::scatterNDSources(
    const NodeCtx &n, ArrayRef<int64_t> dataShape, const ConstTensor &indices,
    ArrayRef<int64_t> updatesShape, int64_t &slice) {
  int64_t rows = 0;
  int64_t k = scatterNDShapes(n, dataShape, indices.shape, updatesShape, rows,
                              slice);
  std::vector<SmallVector<int64_t, 1>> src(rows);
  int64_t tuples = k ? indices.numElements() / k : 0;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = dataShape[j];
      int64_t v = static_cast<int64_t>(indices.values[t * k + j]);
      if (v < -dim || v >= dim)
        n.fail("index " + Twine(v) + " is out of range for data dimension " +
               Twine(j) + " of size " + Twine(dim));
      row = row * dim + (v < 0 ? v + dim : v);
    }
    src[row].push_back(t);
  }
  return src;
}

void OnnxNode::convertScatterND() {
  // Run-time data or updates with compile-time indices (exporters' slice
  // and index assignments): the data seen as [rows, slice], its rows
  // combined in order with the update slices the indices send there.
  // Run-time indices: each tuple's row computed in the step, the update
  // slices added there or written (scatterRowsAtRunTime).
  if (imp.failedValues.contains(n.inputName(1)))
    throw ImportFailure{};
  std::optional<ConstTensor> index = imp.getConst(n.inputName(1));
  std::string reduction = n.getString("reduction", "none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    n.fail("unknown reduction '" + reduction + "'");
  Value data = input(0), updates = input(2);
  auto dt = typeOf(data), ut = typeOf(updates);
  if (dt.getElementType() != ut.getElementType())
    n.fail("data and updates have different element types");
  int64_t rows = 0, slice = 0;
  scatterNDShapes(n, dt.getShape(), typeOf(input(1)).getShape(),
                  ut.getShape(), rows, slice);
  int64_t tuples = ut.getNumElements() / std::max<int64_t>(slice, 1);
  if (tuples == 0 || slice == 0) {
    setOut(0, data); // nothing written
    return;
  }
  Type et = dt.getElementType();
  auto reshaped = [&](Value v, int64_t n) -> Value {
    auto type = RankedTensorType::get({n, slice}, et);
    return v.getType() == type ? v : ReshapeOp::create(b, loc, type, v);
  };
  Value merged;
  if (index) {
    merged = scatterRows(
        reshaped(data, rows), reshaped(updates, tuples),
        scatterNDSources(n, dt.getShape(), *index, ut.getShape(), slice),
        reduction);
  } else {
    Value rowIdx = tupleRowIndex(dt, input(1), 0);
    rowIdx = ReshapeOp::create(
        b, loc, RankedTensorType::get({tuples}, b.getI64Type()), rowIdx);
    merged = scatterRowsAtRunTime(reshaped(data, rows),
                                  reshaped(updates, tuples), rowIdx,
                                  reduction);
  }
  setOut(0, ReshapeOp::create(b, loc, dt, merged));
}

Value OnnxNode::tupleRowIndex(RankedTensorType dt, Value idx, int64_t batch) {
  auto it = typeOf(idx);
  int64_t q = it.getRank(), k = it.getDimSize(q - 1);
  SmallVector<int64_t> outShape(it.getShape().begin(), it.getShape().end() - 1);
  auto i64 = RankedTensorType::get(outShape, b.getI64Type());
  auto boolType = RankedTensorType::get(outShape, b.getI1Type());
  auto constant = [&](int64_t v) -> Value {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(i64, b.getI64IntegerAttr(v)));
  };
  int64_t lead = 1, batchSize = 1;
  for (int64_t d = 0; d < batch + k; ++d)
    lead *= dt.getDimSize(d);
  for (int64_t d = 0; d < batch; ++d)
    batchSize *= dt.getDimSize(d);
  // The first row of each tuple's batch position (0 without batch dims).
  int64_t count = i64.getNumElements();
  int64_t perBatch = std::max<int64_t>(count / std::max<int64_t>(batchSize, 1), 1);
  std::vector<int64_t> base(count);
  for (int64_t e = 0; e < count; ++e)
    base[e] = (e / perBatch) * (lead / std::max<int64_t>(batchSize, 1));
  Value row = ConstantOp::create(
      b, loc, DenseElementsAttr::get(i64, ArrayRef<int64_t>(base)));
  auto it64 = RankedTensorType::get(it.getShape(), b.getI64Type());
  if (it.getElementType() != b.getI64Type())
    idx = CastOp::create(b, loc, it64, idx);
  Value inRange = ConstantOp::create(b, loc, DenseElementsAttr::get(boolType, true));
  Value falses = ConstantOp::create(b, loc, DenseElementsAttr::get(boolType, false));
  int64_t stride = lead / std::max<int64_t>(batchSize, 1);
  for (int64_t j = 0; j < k; ++j) {
    int64_t dim = dt.getDimSize(batch + j);
    stride /= dim;
    SmallVector<int64_t> start(q, 0), limit(it.getShape()), steps(q, 1);
    start[q - 1] = j;
    limit[q - 1] = j + 1;
    Value col = check(createInferred<SliceOp>(b, loc, idx, start, limit, steps))
                    .getResult();
    col = ReshapeOp::create(b, loc, i64, col);
    auto [wrapped, ok] = wrapIndex(col, dim);
    inRange = SelectOp::create(b, loc, inRange, ok, falses);
    row = AddOp::create(b, loc, row,
                        MulOp::create(b, loc, wrapped, constant(stride)));
  }
  return SelectOp::create(b, loc, inRange, row, constant(lead));
}

Value OnnxNode::scatterRowsAtRunTime(Value data, Value updates, Value rowIdx,
                                     StringRef reduction) {
  auto dt = typeOf(data);
  Type et = dt.getElementType();
  if (reduction != "none" && reduction != "add")
    n.fail("reduction '" + reduction +
           "' with indices computed at run time "
           "is not supported (only 'none' and 'add'; with compile-time "
           "indices every reduction is)");
  if (reduction == "none" && !isa<FloatType>(et))
    n.fail("reduction 'none' with indices computed at run time needs float "
           "data (a repeated index is marked NaN)");
  auto scatter = [&](Value v) -> Value {
    return ScatterAddOp::create(b, loc, dt, v, rowIdx, int64_t(0))
        .getResult();
  };
  Value summed = scatter(updates);
  if (reduction == "add")
    return AddOp::create(b, loc, data, summed);
  auto splat = [&](RankedTensorType t, double v) {
    return splatConstant(b, loc, t, v);
  };
  auto maskType = RankedTensorType::get(dt.getShape(), b.getI1Type());
  Value hits = scatter(splat(typeOf(updates), 1.0));
  Value once = CompareOp::create(b, loc, maskType, ComparePredicate::GT, hits,
                                 splat(dt, 0.0));
  Value more = CompareOp::create(b, loc, maskType, ComparePredicate::GT, hits,
                                 splat(dt, 1.0));
  Value out = SelectOp::create(b, loc, once, summed, data);
  return SelectOp::create(
      b, loc, more, splat(dt, std::numeric_limits<double>::quiet_NaN()), out);
}

Value OnnxNode::scatterRows(Value data, Value updates,
                            const std::vector<SmallVector<int64_t, 1>> &sources,
                            StringRef reduction) {
  // Round k gathers each row's k-th update (with `none`: one round, each
  // row's last) and combines it into the rows that have one, picked by a
  // constant row mask.
  auto dt = typeOf(data);
  int64_t rows = dt.getDimSize(0), slice = dt.getDimSize(1);
  size_t rounds = 0;
  for (const auto &list : sources)
    rounds = std::max(rounds, list.size());
  if (reduction == "none")
    rounds = std::min<size_t>(rounds, 1);
  auto maskType = RankedTensorType::get({rows, slice}, b.getI1Type());
  Value out = data;
  for (size_t k = 0; k < rounds; ++k) {
    std::vector<int64_t> from(rows, 0);
    SmallVector<bool> written(rows, false);
    for (int64_t row = 0; row < rows; ++row) {
      const auto &list = sources[row];
      if (reduction == "none" ? list.empty() : list.size() <= k)
        continue;
      from[row] = reduction == "none" ? list.back() : list[k];
      written[row] = true;
    }
    Value idx = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({rows}, b.getI64Type()),
                               ArrayRef<int64_t>(from)));
    Value picked =
        check(createInferred<GatherOp>(b, loc, updates, idx, int64_t(0)))
            .getResult();
    Value rowMask = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({rows}, b.getI1Type()),
                               ArrayRef<bool>(written)));
    Value mask = BroadcastInDimOp::create(b, loc, maskType, rowMask,
                                          ArrayRef<int64_t>{0});
    Value next = picked;
    if (reduction == "add")
      next = AddOp::create(b, loc, out, picked);
    else if (reduction == "mul")
      next = MulOp::create(b, loc, out, picked);
    else if (reduction == "max")
      next = MaxOp::create(b, loc, out, picked);
    else if (reduction == "min")
      next = MinOp::create(b, loc, out, picked);
    out = SelectOp::create(b, loc, mask, next, out);
  }
  return out;
}

void OnnxNode::convertGatherElements() {
  // Every element of a constant that holds one value is that value,
  // wherever the run-time indices point (RoBERTa gathers its all-zero
  // token-type buffer by position ids): the result is that value in the
  // indices' shape. The indices are not checked against the data's size.
  if (auto data = imp.getConst(n.inputName(0)); data && !data->values.empty()) {
    double v = data->values[0];
    if (llvm::all_of(data->values, [&](double x) { return x == v; })) {
      auto shape = typeOf(input(1)).getShape();
      ConstTensor out;
      out.shape.assign(shape.begin(), shape.end());
      out.elementType = data->elementType;
      out.values.assign(out.numElements(), v);
      setOut(0, imp.materialize(out, loc));
      return;
    }
  }
  // Otherwise a loom.gather from the data flattened.
  Value data = input(0);
  auto dt = typeOf(data);
  int64_t axis = normAxis(n, n.getInt("axis", 0), dt.getRank());
  Value flatIdx = elementFlatIndex(dt, input(1), axis);
  Value table = ReshapeOp::create(
      b, loc, RankedTensorType::get({dt.getNumElements()}, dt.getElementType()),
      data);
  setOut(0, check(createInferred<GatherOp>(b, loc, table, flatIdx, int64_t(0)))
                .getResult());
}

std::pair<Value, Value> OnnxNode::wrapIndex(Value idx, int64_t size) {
  auto it = typeOf(idx);
  auto boolType = RankedTensorType::get(it.getShape(), b.getI1Type());
  auto constant = [&](int64_t v) -> Value {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(it, b.getI64IntegerAttr(v)));
  };
  Value negative = CompareOp::create(b, loc, boolType, ComparePredicate::LT,
                                     idx, constant(0));
  Value wrapped = SelectOp::create(
      b, loc, negative, AddOp::create(b, loc, idx, constant(size)), idx);
  Value inRange = SelectOp::create(
      b, loc,
      CompareOp::create(b, loc, boolType, ComparePredicate::GE, wrapped,
                        constant(0)),
      CompareOp::create(b, loc, boolType, ComparePredicate::LT, wrapped,
                        constant(size)),
      ConstantOp::create(b, loc, DenseElementsAttr::get(boolType, false)));
  return {wrapped, inRange};
}

Value OnnxNode::elementFlatIndex(RankedTensorType dt, Value idx, int64_t axis) {
  // The flat index of element p of `idx` is base[p] + idx[p] *
  // stride(axis), base[p] the offset of p with its axis coordinate 0 (a
  // constant). An index outside [-size, size) is sent past the end, where
  // loom.gather and loom.scatter_add stop the step with an error.
  auto it = typeOf(idx);
  int64_t rank = dt.getRank();
  if (it.getRank() != rank)
    n.fail("indices have rank " + Twine(it.getRank()) + ", the data " +
           Twine(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && it.getDimSize(d) > dt.getDimSize(d))
      n.fail("indices " + formatShape(it.getShape()) +
             " exceed the data " + formatShape(dt.getShape()) +
             " in dimension " + Twine(d));
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t d = rank - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * dt.getDimSize(d + 1);
  const int64_t total = dt.getNumElements(), size = dt.getDimSize(axis);
  std::vector<int64_t> base(it.getNumElements());
  SmallVector<int64_t> pos(rank, 0);
  for (int64_t e = 0; e < it.getNumElements(); ++e) {
    int64_t off = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis)
        off += pos[d] * strides[d];
    base[e] = off;
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++pos[d] < it.getDimSize(d))
        break;
      pos[d] = 0;
    }
  }
  auto i64 = RankedTensorType::get(it.getShape(), b.getI64Type());
  auto constant = [&](int64_t v) {
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(i64, b.getI64IntegerAttr(v)));
  };
  if (it.getElementType() != b.getI64Type())
    idx = CastOp::create(b, loc, i64, idx);
  auto [wrapped, inRange] = wrapIndex(idx, size);
  Value flatIdx = AddOp::create(
      b, loc,
      ConstantOp::create(
          b, loc, DenseElementsAttr::get(i64, ArrayRef<int64_t>(base))),
      MulOp::create(b, loc, wrapped, constant(strides[axis])));
  return SelectOp::create(b, loc, inRange, flatIdx, constant(total));
}

void OnnxNode::convertScatterElements() {
  // data[.., idx[p], ..] (along `axis`) = updates[p], or combined with it
  // by `reduction`, on the data flattened. Compile-time indices: a
  // constant map from each written element to its updates, in order (so
  // a repeated index is applied in order, as ONNX's reference does: the
  // last update wins with `none`). Run-time indices: loom.scatter_add of
  // the updates (`add`), or (`none`, float data) of the updates and of
  // ones: elements written once take their update, elements written more
  // than once (ONNX and PyTorch leave the result undefined) become NaN.
  if (imp.failedValues.contains(n.inputName(1)))
    throw ImportFailure{};
  Value data = input(0), updates = input(2);
  auto dt = typeOf(data), ut = typeOf(updates), it = typeOf(input(1));
  if (dt.getElementType() != ut.getElementType())
    n.fail("data and updates have different element types");
  if (ut.getShape() != it.getShape())
    n.fail("updates " + formatShape(ut.getShape()) + " and indices " +
           formatShape(it.getShape()) + " differ in shape");
  std::string reduction = n.getString("reduction", "none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    n.fail("unknown reduction '" + reduction + "'");
  int64_t axis = normAxis(n, n.getInt("axis", 0), dt.getRank());
  Type et = dt.getElementType();
  const int64_t total = dt.getNumElements(), count = ut.getNumElements();
  auto flat = [&](Value v, int64_t size) -> Value {
    auto t = RankedTensorType::get({size}, et);
    return v.getType() == t ? v : ReshapeOp::create(b, loc, t, v);
  };
  if (count == 0) {
    setOut(0, data);
    return;
  }
  Value dataFlat = flat(data, total), updFlat = flat(updates, count);
  auto maskType = RankedTensorType::get({total}, b.getI1Type());
  if (std::optional<ConstTensor> index = imp.getConst(n.inputName(1))) {
    // Each element's updates, in order.
    int64_t size = dt.getDimSize(axis);
    SmallVector<int64_t> strides(dt.getRank(), 1);
    for (int64_t d = dt.getRank() - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * dt.getDimSize(d + 1);
    std::vector<SmallVector<int64_t, 1>> sources(total);
    SmallVector<int64_t> pos(it.getRank(), 0);
    for (int64_t e = 0; e < count; ++e) {
      int64_t i = static_cast<int64_t>(index->values[e]);
      if (i < -size || i >= size)
        n.fail("index " + Twine(i) + " at position " + formatShape(pos) +
               " is out of range for dimension " + Twine(axis) + " of size " +
               Twine(size));
      int64_t off = 0;
      for (int64_t d = 0; d < it.getRank(); ++d)
        off += (d == axis ? (i < 0 ? i + size : i) : pos[d]) * strides[d];
      sources[off].push_back(e);
      for (int64_t d = it.getRank() - 1; d >= 0; --d) {
        if (++pos[d] < it.getDimSize(d))
          break;
        pos[d] = 0;
      }
    }
    auto column = [&](Value v, int64_t n) -> Value {
      return ReshapeOp::create(b, loc, RankedTensorType::get({n, 1}, et), v);
    };
    Value out = scatterRows(column(dataFlat, total), column(updFlat, count),
                            sources, reduction);
    setOut(0, ReshapeOp::create(b, loc, dt, out));
    return;
  }
  Value idxFlat = elementFlatIndex(dt, input(1), axis);
  idxFlat = ReshapeOp::create(
      b, loc, RankedTensorType::get({count}, b.getI64Type()), idxFlat);
  auto column = [&](Value v, int64_t n) -> Value {
    return ReshapeOp::create(b, loc, RankedTensorType::get({n, 1}, et), v);
  };
  Value out = scatterRowsAtRunTime(column(dataFlat, total),
                                   column(updFlat, count), idxFlat, reduction);
  setOut(0, ReshapeOp::create(b, loc, dt, out));
}

void loom::onnx_import::addIndexHandlers(OnnxHandlerTable &table) {
  table["Gather"] = &OnnxNode::convertGather;
  table["GatherND"] = &OnnxNode::convertGatherND;
  table["GatherElements"] = &OnnxNode::convertGatherElements;
  table["ScatterND"] = &OnnxNode::convertScatterND;
  table["ScatterElements"] = &OnnxNode::convertScatterElements;
  table["Scatter"] = &OnnxNode::convertScatterElements; // opset < 11's name
}
