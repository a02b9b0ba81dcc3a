//===- OnnxOpsShape.cpp - ONNX data movement
//--------------------------------===//
//
// Reshapes, transposes, broadcasts, concatenation, splits, slices,
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
  table["SplitToSequence"] = &OnnxNode::convertSplitToSequence;
  table["SequenceAt"] = &OnnxNode::convertSequenceAt;
  table["Pad"] = &OnnxNode::convertPad;
  table["Trilu"] = &OnnxNode::convertTrilu;
  table["Range"] = &OnnxNode::convertShapeOnly;
  table["Mod"] = &OnnxNode::convertFoldOnly;
  table["ConstantOfShape"] = &OnnxNode::convertShapeOnly;
  table["Shape"] = &OnnxNode::convertShapeOnly;
  table["Size"] = &OnnxNode::convertShapeOnly;
}
