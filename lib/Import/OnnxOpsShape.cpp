//===- OnnxOpsShape.cpp - ONNX data movement
//--------------------------------===//
//
// Reshapes, transposes, broadcasts, concatenation, splits, slices, gathers,
// sequences (which exist only at import) and the shape ops that must fold.
// Each handler converts one node (see OnnxImport.h); addXHandlers lists
// the ops it serves.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace loom;
using namespace loom::onnx_import;

void OnnxNode::convertReshape() {
  Value x = input(0);
  auto xt = typeOf(x);
  SmallVector<int64_t> shape = constInts(1, "shape");
  bool allowZero = n.getInt("allowzero", 0) != 0;
  int64_t known = 1, inferIdx = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (static_cast<int64_t>(i) >= xt.getRank())
        n.fail("shape imp.entry 0 at position " + Twine(i) +
               " has no input dimension to copy");
      shape[i] = xt.getDimSize(i);
    }
    if (shape[i] == -1) {
      if (inferIdx >= 0)
        n.fail("more than one -1 in shape " + formatShape(shape));
      inferIdx = i;
    } else if (shape[i] < 0) {
      n.fail("negative dimension in shape " + formatShape(shape));
    } else {
      known *= shape[i];
    }
  }
  if (inferIdx >= 0) {
    if (known == 0 || xt.getNumElements() % known != 0)
      n.fail("cannot reshape " + formatShape(xt.getShape()) + " to " +
             formatShape(shape));
    shape[inferIdx] = xt.getNumElements() / known;
  }
  finishReshape(reshapeTo(x, shape));
  return;
}

void OnnxNode::convertFlatten() {
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t axis = n.getInt("axis", 1);
  if (axis < 0)
    axis += xt.getRank();
  if (axis < 0 || axis > xt.getRank())
    n.fail("axis out of range");
  int64_t outer = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= xt.getDimSize(i);
  finishReshape(reshapeTo(x, {outer, outer ? xt.getNumElements() / outer : 0}));
  return;
}

void OnnxNode::convertSqueeze() {
  Value x = input(0);
  auto xt = typeOf(x);
  SmallVector<int64_t> axes;
  if (n.hasInput(1))
    axes = constInts(1, "axes");
  else if (auto a = n.getInts("axes"))
    axes = *a;
  SmallVector<int64_t> shape;
  if (op == "Unsqueeze") {
    int64_t outRank = xt.getRank() + axes.size();
    for (int64_t &a : axes)
      a = normAxis(n, a, outRank);
    llvm::sort(axes);
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      n.fail("repeated axis");
    auto it = xt.getShape().begin();
    for (int64_t i = 0; i < outRank; ++i)
      shape.push_back(llvm::is_contained(axes, i) ? 1 : *it++);
  } else {
    for (int64_t &a : axes)
      a = normAxis(n, a, xt.getRank());
    for (int64_t i = 0; i < xt.getRank(); ++i) {
      bool drop =
          axes.empty() ? xt.getDimSize(i) == 1 : llvm::is_contained(axes, i);
      if (drop && xt.getDimSize(i) != 1)
        n.fail("cannot squeeze dimension " + Twine(i) + " of size " +
               Twine(xt.getDimSize(i)));
      if (!drop)
        shape.push_back(xt.getDimSize(i));
    }
  }
  finishReshape(reshapeTo(x, shape));
  return;
}

void OnnxNode::convertTranspose() {
  Value x = input(0);
  SmallVector<int64_t> perm = transposePerm(n, typeOf(x).getRank());
  setOut(0, check(createInferred<TransposeOp>(b, loc, x, perm)).getResult());
  return;
}

void OnnxNode::convertExpand() {
  Value x = input(0);
  SmallVector<int64_t> shape = constInts(1, "shape");
  auto out = broadcastShapes(typeOf(x).getShape(), shape);
  if (!out)
    n.fail("cannot expand " + formatShape(typeOf(x).getShape()) + " to " +
           formatShape(shape));
  setOut(0, broadcastTo(b, loc, x, *out));
  return;
}

/// Tile as a broadcast and a reshape, [d0, d1] -> [r0, d0, r1, d1] ->
/// [r0 * d0, r1 * d1]: two ops whatever the repeats (a concat of r copies
/// per dimension made an op with r operands; a fuzzed model with repeats
/// of 2^37 crashed loomc).
void OnnxNode::convertTile() {
  Value x = input(0);
  auto xt = typeOf(x);
  SmallVector<int64_t> reps = constInts(1, "repeats");
  if (static_cast<int64_t>(reps.size()) != xt.getRank())
    n.fail("repeats needs one entry per dimension");
  SmallVector<int64_t> expanded, out, dims;
  for (auto [d, r] : llvm::enumerate(reps)) {
    if (r < 1)
      n.fail("repeats must be positive");
    int64_t size = xt.getDimSize(d), total = 0;
    if (__builtin_mul_overflow(size, r, &total))
      n.fail("repeats " + formatShape(reps) + " make dimension " +
             Twine(d).str() + " larger than 2^63");
    dims.push_back(static_cast<int64_t>(expanded.size()) + 1);
    expanded.append({r, size});
    out.push_back(total);
  }
  if (llvm::all_of(reps, [](int64_t r) { return r == 1; })) {
    setOut(0, x);
    return;
  }
  auto elem = xt.getElementType();
  Value wide = BroadcastInDimOp::create(
      b, loc, RankedTensorType::get(expanded, elem), x, dims);
  setOut(0, ReshapeOp::create(b, loc, RankedTensorType::get(out, elem), wide)
                .getResult());
}

void OnnxNode::convertConcat() {
  SmallVector<Value> parts;
  for (int i = 0; i < n.numInputs(); ++i)
    if (n.hasInput(i))
      parts.push_back(input(i));
  if (parts.empty())
    n.fail("no inputs");
  int64_t axis = normAxis(n, n.getInt("axis", 0), typeOf(parts[0]).getRank());
  // Zero-sized inputs contribute nothing.
  SmallVector<Value> nonEmpty;
  for (Value v : parts)
    if (typeOf(v).getNumElements() != 0)
      nonEmpty.push_back(v);
  if (nonEmpty.empty())
    nonEmpty.push_back(parts[0]);
  setOut(0,
         check(createInferred<ConcatOp>(b, loc, nonEmpty, axis)).getResult());
  return;
}

void OnnxNode::convertSplit() {
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t axis = normAxis(n, n.getInt("axis", 0), xt.getRank());
  SmallVector<int64_t> sizes;
  if (n.hasInput(1))
    sizes = constInts(1, "split");
  else if (auto s = n.getInts("split"))
    sizes = *s;
  int64_t numOut = node.output_size();
  if (sizes.empty()) {
    int64_t total = xt.getDimSize(axis);
    int64_t chunk = (total + numOut - 1) / numOut;
    for (int64_t i = 0; i < numOut; ++i)
      sizes.push_back(std::min(chunk, total - i * chunk));
  }
  if (static_cast<int64_t>(sizes.size()) != numOut)
    n.fail("split sizes do not match the number of outputs");
  int64_t offset = 0;
  for (int64_t i = 0; i < numOut; ++i) {
    SmallVector<int64_t> start(xt.getRank(), 0), limit(xt.getShape()),
        stride(xt.getRank(), 1);
    start[axis] = offset;
    limit[axis] = offset + sizes[i];
    offset += sizes[i];
    if (sizes[i] < 0 || offset > xt.getDimSize(axis))
      n.fail("split sizes exceed dimension " + Twine(axis));
    setOut(i, check(createInferred<SliceOp>(b, loc, x, start, limit, stride))
                  .getResult());
  }
  if (offset != xt.getDimSize(axis))
    n.fail("split sizes sum to " + Twine(offset) + ", not " +
           Twine(xt.getDimSize(axis)));
  return;
}

void OnnxNode::convertSlice() {
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  SmallVector<int64_t> starts = constInts(1, "starts"),
                       ends = constInts(2, "ends");
  SmallVector<int64_t> axes, steps;
  if (n.hasInput(3))
    axes = constInts(3, "axes");
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (n.hasInput(4))
    steps = constInts(4, "steps");
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    n.fail("starts, ends, axes and steps must have the same length");
  SmallVector<int64_t> start(rank, 0), limit(xt.getShape()), stride(rank, 1);
  SmallVector<int64_t> reversed;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normAxis(n, axes[i], rank), dim = xt.getDimSize(a);
    int64_t st = steps[i];
    if (st == 0)
      n.fail("step 0");
    int64_t s = starts[i], e = ends[i];
    if (st > 0) {
      s = s < 0 ? std::max<int64_t>(0, s + dim) : std::min(s, dim);
      e = e < 0 ? std::max<int64_t>(0, e + dim) : std::min(e, dim);
      start[a] = s;
      limit[a] = std::max(s, e);
      stride[a] = st;
    } else {
      // A negative step walks backwards: slice forwards over the same
      // elements, then reverse this axis with a gather.
      s = s < 0 ? std::max<int64_t>(-1, s + dim) : std::min(s, dim - 1);
      e = e < 0 ? std::max<int64_t>(-1, e + dim) : std::min(e, dim - 1);
      if (s <= e) {
        start[a] = 0;
        limit[a] = 0;
      } else {
        int64_t count = (s - e + (-st) - 1) / (-st);
        int64_t last = s - (count - 1) * (-st);
        start[a] = last;
        limit[a] = s + 1;
        stride[a] = -st;
        reversed.push_back(a);
      }
    }
  }
  Value y = check(createInferred<SliceOp>(b, loc, x, start, limit, stride))
                .getResult();
  for (int64_t a : reversed) {
    int64_t size = typeOf(y).getDimSize(a);
    ConstTensor idx{{size}, b.getI64Type(), {}};
    for (int64_t i = size - 1; i >= 0; --i)
      idx.values.push_back(static_cast<double>(i));
    y = check(createInferred<GatherOp>(b, loc, y, imp.materialize(idx, loc), a))
            .getResult();
  }
  setOut(0, y);
  return;
}

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
  if (!index)
    n.fail("indices (input 1) computed at run time are not supported: the "
           "data may be, the indices must be compile-time constants");
  Value data = input(0);
  auto dt = typeOf(data);
  int64_t r = dt.getRank(), q = index->shape.size();
  int64_t batch = n.getInt("batch_dims", 0);
  if (q == 0 || batch < 0 || batch >= std::min(r, q))
    n.fail("invalid batch_dims " + Twine(batch) + " for data of rank " +
           Twine(r) + " and indices of rank " + Twine(q));
  int64_t k = index->shape[q - 1];
  if (k < 1 || batch + k > r)
    n.fail("index depth " + Twine(k) + " exceeds the data rank " + Twine(r));
  for (int64_t d = 0; d < batch; ++d)
    if (index->shape[d] != dt.getDimSize(d))
      n.fail("indices dimension " + Twine(d) + " (" +
             Twine(index->shape[d]) + ") differs from the data's (" +
             Twine(dt.getDimSize(d)) + ") within batch_dims");
  int64_t lead = 1, batchSize = 1;
  for (int64_t d = 0; d < batch + k; ++d)
    lead *= dt.getDimSize(d);
  for (int64_t d = 0; d < batch; ++d)
    batchSize *= dt.getDimSize(d);
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
  SmallVector<int64_t> flat{lead};
  flat.append(dt.getShape().begin() + batch + k, dt.getShape().end());
  Value table = ReshapeOp::create(
      b, loc, RankedTensorType::get(flat, dt.getElementType()), data);
  SmallVector<int64_t> idxShape(index->shape.begin(), index->shape.end() - 1);
  auto idxType = RankedTensorType::get(idxShape, b.getI64Type());
  Value idx = ConstantOp::create(
      b, loc, DenseElementsAttr::get(idxType, ArrayRef<int64_t>(linear)));
  setOut(0, check(createInferred<GatherOp>(b, loc, table, idx, int64_t(0)))
                .getResult());
}

std::vector<SmallVector<int64_t, 1>> loom::onnx_import::scatterNDSources(
    const NodeCtx &n, ArrayRef<int64_t> dataShape, const ConstTensor &indices,
    ArrayRef<int64_t> updatesShape, int64_t &slice) {
  int64_t r = dataShape.size(), q = indices.shape.size();
  if (q == 0)
    n.fail("indices must have rank >= 1");
  int64_t k = indices.shape[q - 1];
  if (k < 1 || k > r)
    n.fail("index depth " + Twine(k) + " must be in [1, " + Twine(r) +
           "] for data of rank " + Twine(r));
  SmallVector<int64_t> want(indices.shape.begin(), indices.shape.end() - 1);
  want.append(dataShape.begin() + k, dataShape.end());
  if (updatesShape != ArrayRef<int64_t>(want))
    n.fail("updates are " + formatShape(updatesShape) + ", expected " +
           formatShape(want) + " (indices' leading dimensions, then the "
           "data's after the first " + Twine(k) + ")");
  int64_t rows = 1;
  slice = 1;
  for (int64_t d = 0; d < r; ++d)
    (d < k ? rows : slice) *= dataShape[d];
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
  if (imp.failedValues.contains(n.inputName(1)))
    throw ImportFailure{};
  std::optional<ConstTensor> index = imp.getConst(n.inputName(1));
  if (!index)
    n.fail("indices (input 1) computed at run time are not supported: the "
           "data and updates may be, the indices must be compile-time "
           "constants");
  std::string reduction = n.getString("reduction", "none");
  if (!llvm::is_contained({"none", "add", "mul", "max", "min"}, reduction))
    n.fail("unknown reduction '" + reduction + "'");
  Value data = input(0), updates = input(2);
  auto dt = typeOf(data), ut = typeOf(updates);
  if (dt.getElementType() != ut.getElementType())
    n.fail("data and updates have different element types");
  int64_t slice = 0;
  std::vector<SmallVector<int64_t, 1>> src =
      scatterNDSources(n, dt.getShape(), *index, ut.getShape(), slice);
  int64_t rows = static_cast<int64_t>(src.size());
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
  Value merged = scatterRows(reshaped(data, rows), reshaped(updates, tuples),
                             src, reduction);
  setOut(0, ReshapeOp::create(b, loc, dt, merged));
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

void OnnxNode::convertCumSum() {
  // On run-time data (what transformers' RoBERTa computes its position ids
  // with, from the padding mask): a product with a constant 0/1 matrix M
  // along the axis, M[j][i] = 1 where element j adds into sum i, whose
  // gradient is the product with M's transpose.
  if (imp.failedValues.contains(n.inputName(1)))
    throw ImportFailure{};
  std::optional<ConstTensor> axisConst = imp.getConst(n.inputName(1));
  if (!axisConst || axisConst->values.size() != 1)
    n.fail("axis (input 1) must be one compile-time constant");
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  int64_t axis = normAxis(n, static_cast<int64_t>(axisConst->values[0]), rank);
  const bool exclusive = n.getInt("exclusive", 0) != 0,
             reverse = n.getInt("reverse", 0) != 0;
  const int64_t len = xt.getDimSize(axis);
  if (len > (int64_t(1) << 12))
    n.fail("a cumulative sum over " + Twine(len) + " positions would use a " +
           Twine(len) + " x " + Twine(len) +
           " constant (at most 4096 positions on run-time data)");
  Type elem = xt.getElementType();
  const bool isFloat = isa<FloatType>(elem);
  Type ft = elem;
  if (!isFloat) {
    // Integers: the product runs in f32 for 0s and 1s (integers cast from
    // a boolean, through integer casts: sums below 2^24), else in f64,
    // exact while every partial sum is below 2^53 in magnitude (BLOOM's
    // ALiBi sums its 0/1 attention_mask input, which the importer cannot
    // know to be 0/1).
    Value from = x;
    while (auto c = from.getDefiningOp<CastOp>()) {
      from = c.getX();
      if (!isa<IntegerType>(getElementTypeOrSelf(from.getType())))
        break;
    }
    ft = getElementTypeOrSelf(from.getType()).isInteger(1)
             ? Type(b.getF32Type())
             : Type(b.getF64Type());
  }
  std::vector<float> m(len * len, 0.0f);
  for (int64_t j = 0; j < len; ++j)
    for (int64_t i = 0; i < len; ++i) {
      bool adds = reverse ? (exclusive ? j > i : j >= i)
                          : (exclusive ? j < i : j <= i);
      m[j * len + i] = adds ? 1.0f : 0.0f;
    }
  auto mType = RankedTensorType::get({len, len}, ft);
  Value matrix;
  if (ft.isF32()) {
    matrix = ConstantOp::create(b, loc,
                                DenseElementsAttr::get(mType, ArrayRef(m)));
  } else {
    SmallVector<APFloat> vals;
    for (float v : m) {
      APFloat a(v);
      bool lost;
      a.convert(cast<FloatType>(ft).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &lost);
      vals.push_back(a);
    }
    matrix = ConstantOp::create(b, loc, DenseElementsAttr::get(mType, vals));
  }
  Value v = isFloat ? x
                    : CastOp::create(b, loc,
                                     RankedTensorType::get(xt.getShape(), ft), x)
                          .getResult();
  // The axis last, the product, the axis back.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  const bool moved = axis != rank - 1;
  if (moved)
    v = check(createInferred<TransposeOp>(b, loc, v, perm)).getResult();
  if (rank == 1) // a product needs a row dimension
    v = ReshapeOp::create(b, loc, RankedTensorType::get({1, len}, ft), v);
  v = check(createInferred<MatmulOp>(b, loc, v, matrix, Value(), false, false))
          .getResult();
  if (rank == 1)
    v = ReshapeOp::create(b, loc, RankedTensorType::get({len}, ft), v);
  if (moved) {
    SmallVector<int64_t> back(rank);
    for (int64_t d = 0; d < rank; ++d)
      back[perm[d]] = d;
    v = check(createInferred<TransposeOp>(b, loc, v, back)).getResult();
  }
  if (!isFloat)
    v = CastOp::create(b, loc, xt, v).getResult();
  setOut(0, v);
}

void OnnxNode::convertSplitToSequence() {
  // Sequences exist only at import: the tensors are kept by name and
  // SequenceAt with a constant position picks one.
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t axis = normAxis(n, n.getInt("axis", 0), xt.getRank());
  int64_t dim = xt.getDimSize(axis);
  SmallVector<int64_t> sizes;
  bool keep = true;
  if (n.hasInput(1)) {
    auto c = imp.getConst(n.inputName(1));
    if (!c)
      n.fail("split (input 1) must be a compile-time constant");
    if (c->shape.empty()) {
      int64_t chunk = static_cast<int64_t>(c->values.at(0));
      if (chunk <= 0)
        n.fail("split size " + Twine(chunk) + " is not positive");
      for (int64_t off = 0; off < dim; off += chunk)
        sizes.push_back(std::min(chunk, dim - off));
    } else {
      for (double v : c->values)
        sizes.push_back(static_cast<int64_t>(v));
    }
  } else {
    sizes.assign(dim, 1);
    keep = n.getInt("keepdims", 1) != 0;
  }
  SmallVector<Value> parts;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    if (size < 0 || offset + size > dim)
      n.fail("split sizes exceed dimension " + Twine(axis) + " of size " +
             Twine(dim));
    SmallVector<int64_t> start(xt.getRank(), 0), limit(xt.getShape()),
        stride(xt.getRank(), 1);
    start[axis] = offset;
    limit[axis] = offset + size;
    offset += size;
    Value part =
        check(createInferred<SliceOp>(b, loc, x, start, limit, stride));
    if (!keep) {
      SmallVector<int64_t> shape(typeOf(part).getShape());
      shape.erase(shape.begin() + axis);
      part = ReshapeOp::create(
          b, loc, RankedTensorType::get(shape, xt.getElementType()), part);
    }
    parts.push_back(part);
  }
  if (offset != dim)
    n.fail("split sizes sum to " + Twine(offset) + ", not " + Twine(dim));
  if (!n.outputName(0).empty())
    imp.sequences[n.outputName(0)] = std::move(parts);
  return;
}

void OnnxNode::convertSequenceAt() {
  auto it = imp.sequences.find(n.inputName(0));
  if (it == imp.sequences.end()) {
    if (imp.failedValues.contains(n.inputName(0)))
      throw ImportFailure{};
    n.fail("input '" + n.inputName(0) +
           "' is not a sequence made by "
           "SplitToSequence");
  }
  auto pos = imp.getConst(n.inputName(1));
  if (!pos || pos->values.size() != 1)
    n.fail("position (input 1) must be a compile-time scalar");
  int64_t size = it->second.size();
  int64_t i = static_cast<int64_t>(pos->values[0]);
  if (i < 0)
    i += size;
  if (i < 0 || i >= size)
    n.fail("position " + Twine(static_cast<int64_t>(pos->values[0])) +
           " is out of range for a sequence of " + Twine(size));
  setOut(0, it->second[i]);
  return;
}

void OnnxNode::convertPad() {
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  std::string mode = n.getString("mode", "constant");
  if (mode != "constant")
    n.fail("mode '" + mode + "' is not supported (only 'constant')");
  SmallVector<int64_t> pads = constInts(1, "pads");
  SmallVector<int64_t> axes;
  if (n.hasInput(3)) {
    axes = constInts(3, "axes");
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size())
    n.fail("pads has " + Twine(pads.size()) + " entries, expected " +
           Twine(2 * axes.size()) + " (a begin and an end per axis)");
  SmallVector<int64_t> lo(rank, 0), hi(rank, 0);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = normAxis(n, axes[i], rank);
    if (seen[a])
      n.fail("axis " + Twine(a) + " is listed twice");
    seen[a] = true;
    lo[a] = pads[i];
    hi[a] = pads[i + axes.size()];
    if (xt.getDimSize(a) + lo[a] + hi[a] < 0)
      n.fail("pads remove more than the " + Twine(xt.getDimSize(a)) +
             " elements of axis " + Twine(a));
  }
  double value = 0.0;
  if (n.hasInput(2)) {
    auto c = imp.getConst(n.inputName(2));
    if (!c)
      n.fail("constant_value must be a compile-time constant");
    if (c->values.size() > 1)
      n.fail("constant_value must be one value");
    if (!c->values.empty())
      value = c->values[0];
  }
  // Positive pads add elements (loom.pad pads with zeros; another value is
  // selected outside the copied block), negative ones remove them (a slice
  // afterwards).
  SmallVector<int64_t> addLo(rank), addHi(rank), zero(rank, 0);
  for (int64_t d = 0; d < rank; ++d) {
    addLo[d] = std::max<int64_t>(lo[d], 0);
    addHi[d] = std::max<int64_t>(hi[d], 0);
  }
  Value y = x;
  if (llvm::any_of(addLo, [](int64_t v) { return v > 0; }) ||
      llvm::any_of(addHi, [](int64_t v) { return v > 0; })) {
    y = check(createInferred<PadOp>(b, loc, x, addLo, addHi, zero))
            .getResult();
    if (value != 0.0) {
      // Where the input was copied: loom.pad of an all-true mask (padding
      // with false), so that no constant of the result's size is needed.
      auto maskType = RankedTensorType::get(xt.getShape(), b.getI1Type());
      Value ones = ConstantOp::create(
          b, loc, DenseElementsAttr::get(maskType, true));
      Value inside =
          check(createInferred<PadOp>(b, loc, ones, addLo, addHi, zero))
              .getResult();
      y = SelectOp::create(b, loc, inside, y, splat(y, value));
    }
  }
  if (llvm::any_of(lo, [](int64_t v) { return v < 0; }) ||
      llvm::any_of(hi, [](int64_t v) { return v < 0; })) {
    auto yt = typeOf(y);
    SmallVector<int64_t> start(rank), limit(rank), stride(rank, 1);
    for (int64_t d = 0; d < rank; ++d) {
      start[d] = std::max<int64_t>(-lo[d], 0);
      limit[d] = yt.getDimSize(d) - std::max<int64_t>(-hi[d], 0);
    }
    y = check(createInferred<SliceOp>(b, loc, y, start, limit, stride))
            .getResult();
  }
  setOut(0, y);
}

void OnnxNode::convertTrilu() {
  Value x = input(0);
  auto xt = typeOf(x);
  int64_t rank = xt.getRank();
  if (rank < 2)
    n.fail("input must have rank >= 2, got " + Twine(rank));
  int64_t k = 0;
  if (n.hasInput(1)) {
    SmallVector<int64_t> kv = constInts(1, "k");
    if (kv.size() != 1)
      n.fail("k must be one value");
    k = kv[0];
  }
  bool upper = n.getInt("upper", 1) != 0;
  // Keeps element (i, j) of every matrix where j - i >= k (upper) or
  // j - i <= k (lower), zeros elsewhere: a select with a constant
  // rows x cols mask, broadcast over the leading dimensions.
  int64_t rows = xt.getDimSize(rank - 2), cols = xt.getDimSize(rank - 1);
  int64_t cells = 0;
  if (__builtin_mul_overflow(rows, cols, &cells) || cells > (int64_t(1) << 24))
    n.fail("a " + Twine(rows) + " x " + Twine(cols) +
           " mask is too large (at most 2^24 elements)");
  SmallVector<bool> keep(cells);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      keep[i * cols + j] = upper ? j - i >= k : j - i <= k;
  Value mask = ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(
          RankedTensorType::get({rows, cols}, b.getI1Type()), keep));
  if (rank > 2)
    mask = BroadcastInDimOp::create(
        b, loc, RankedTensorType::get(xt.getShape(), b.getI1Type()), mask,
        ArrayRef<int64_t>{rank - 2, rank - 1});
  setOut(0, SelectOp::create(b, loc, mask, x, splat(x, 0.0)));
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
  auto boolType = RankedTensorType::get(it.getShape(), b.getI1Type());
  Value negative =
      CompareOp::create(b, loc, boolType, ComparePredicate::LT, idx,
                        constant(0));
  Value wrapped = SelectOp::create(
      b, loc, negative, AddOp::create(b, loc, idx, constant(size)), idx);
  Value inRange = SelectOp::create(
      b, loc,
      CompareOp::create(b, loc, boolType, ComparePredicate::GE, wrapped,
                        constant(0)),
      CompareOp::create(b, loc, boolType, ComparePredicate::LT, wrapped,
                        constant(size)),
      ConstantOp::create(b, loc, DenseElementsAttr::get(boolType, false)));
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
  if (reduction != "none" && reduction != "add")
    n.fail("reduction '" + reduction +
           "' with indices computed at run time "
           "is not supported (only 'none' and 'add'; with compile-time "
           "indices every reduction is)");
  if (reduction == "none" && !isa<FloatType>(et))
    n.fail("reduction 'none' with indices computed at run time needs float "
           "data (a repeated index is marked NaN)");
  Value idxFlat = elementFlatIndex(dt, input(1), axis);
  idxFlat = ReshapeOp::create(
      b, loc, RankedTensorType::get({count}, b.getI64Type()), idxFlat);
  auto flatType = RankedTensorType::get({total}, et);
  auto scatter = [&](Value v) -> Value {
    return ScatterAddOp::create(b, loc, flatType, v, idxFlat, int64_t(0))
        .getResult();
  };
  Value summed = scatter(updFlat);
  if (reduction == "add") {
    setOut(0, ReshapeOp::create(b, loc, dt,
                                AddOp::create(b, loc, dataFlat, summed)));
    return;
  }
  auto splat = [&](RankedTensorType t, double v) {
    return splatConstant(b, loc, t, v);
  };
  Value hits = scatter(splat(RankedTensorType::get({count}, et), 1.0));
  Value once = CompareOp::create(b, loc, maskType, ComparePredicate::GT, hits,
                                 splat(flatType, 0.0));
  Value more = CompareOp::create(b, loc, maskType, ComparePredicate::GT, hits,
                                 splat(flatType, 1.0));
  Value out = SelectOp::create(b, loc, once, summed, dataFlat);
  out = SelectOp::create(
      b, loc, more, splat(flatType, std::numeric_limits<double>::quiet_NaN()),
      out);
  setOut(0, ReshapeOp::create(b, loc, dt, out));
}

void OnnxNode::convertShapeOnly() {
  for (int i = 0; i < n.numInputs(); ++i)
    if (imp.failedValues.contains(n.inputName(i)))
      throw ImportFailure{}; // reported at the node that failed
  n.fail("inputs must be compile-time constants; Loom needs static shapes");
}

void OnnxNode::convertLogical() {
  Value x = input(0), y = input(1);
  auto shape = broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
  if (!shape)
    n.fail("operand shapes " + formatShape(typeOf(x).getShape()) + " and " +
           formatShape(typeOf(y).getShape()) +
           " are not broadcast-compatible");
  x = broadcastTo(b, loc, x, *shape);
  y = broadcastTo(b, loc, y, *shape);
  auto type = RankedTensorType::get(*shape, b.getI1Type());
  Value out;
  if (op == "And") // x ? y : false
    out = SelectOp::create(b, loc, x, y, splat(x, 0));
  else if (op == "Or") // x ? true : y
    out = SelectOp::create(b, loc, x, splat(x, 1), y);
  else
    out = CompareOp::create(b, loc, type, ComparePredicate::NE, x, y);
  setOut(0, out);
}

void OnnxNode::convertFoldOnly() {
  for (int i = 0; i < n.numInputs(); ++i)
    if (imp.failedValues.contains(n.inputName(i)))
      throw ImportFailure{}; // reported at the node that failed
  n.fail("is imported only when every input is a compile-time constant (it "
         "is then folded, as exporters' mask and position computations are); "
         "here an input is computed at run time");
}

void OnnxNode::convertConstantNode() {
  imp.defineConst(n.outputName(0), imp.convertConstant(n));
}

void loom::onnx_import::addShapeHandlers(OnnxHandlerTable &table) {
  table["Constant"] = &OnnxNode::convertConstantNode;
  for (StringRef op : {"And", "Or", "Xor"})
    table[op] = &OnnxNode::convertLogical;
  table["CumSum"] = &OnnxNode::convertCumSum;
  table["GatherND"] = &OnnxNode::convertGatherND;
  table["ScatterND"] = &OnnxNode::convertScatterND;
  table["ScatterElements"] = &OnnxNode::convertScatterElements;
  table["Scatter"] = &OnnxNode::convertScatterElements; // opset < 11's name
  table["Reshape"] = &OnnxNode::convertReshape;
  table["Flatten"] = &OnnxNode::convertFlatten;
  table["Unsqueeze"] = &OnnxNode::convertSqueeze;
  table["Squeeze"] = &OnnxNode::convertSqueeze;
  table["Transpose"] = &OnnxNode::convertTranspose;
  table["Expand"] = &OnnxNode::convertExpand;
  table["Tile"] = &OnnxNode::convertTile;
  table["Concat"] = &OnnxNode::convertConcat;
  table["Split"] = &OnnxNode::convertSplit;
  table["Slice"] = &OnnxNode::convertSlice;
  table["Gather"] = &OnnxNode::convertGather;
  table["SplitToSequence"] = &OnnxNode::convertSplitToSequence;
  table["SequenceAt"] = &OnnxNode::convertSequenceAt;
  table["GatherElements"] = &OnnxNode::convertGatherElements;
  table["Pad"] = &OnnxNode::convertPad;
  table["Trilu"] = &OnnxNode::convertTrilu;
  table["Range"] = &OnnxNode::convertShapeOnly;
  table["Mod"] = &OnnxNode::convertFoldOnly;
  table["ConstantOfShape"] = &OnnxNode::convertShapeOnly;
  table["Shape"] = &OnnxNode::convertShapeOnly;
  table["Size"] = &OnnxNode::convertShapeOnly;
}
