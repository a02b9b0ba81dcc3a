//===- OnnxFold.cpp - Compile-time folding of ONNX shape arithmetic -------===//
//
// Exporters compute shapes, positions and masks with ONNX ops (Shape, Gather,
// Concat, Range, CastLike, ...); a static-shape compiler evaluates them at
// import. tryFold evaluates a node whose inputs are all compile-time
// constants (ConstTensor, numbers held as doubles) and defines its output as
// a constant; it returns false when the node is not foldable, and the node
// is then converted to loom ops.
//
//===----------------------------------------------------------------------===//

#include "OnnxImport.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mlir;
using namespace loom;
using namespace loom::onnx_import;

/// Normalizes a possibly negative axis against `rank`.
int64_t loom::onnx_import::normAxis(const NodeCtx &n, int64_t axis,
                                    int64_t rank) {
  std::optional<int64_t> a = normalizeAxis(axis, rank);
  if (!a)
    n.fail("axis " + Twine(axis) + " is out of range for rank " + Twine(rank));
  return *a;
}

SmallVector<int64_t> loom::onnx_import::transposePerm(const NodeCtx &n,
                                                      int64_t rank) {
  SmallVector<int64_t> perm;
  if (auto p = n.getInts("perm"))
    perm = *p;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank)
    n.fail("perm has " + Twine(perm.size()) + " entries for rank " +
           Twine(rank));
  for (int64_t &d : perm)
    d = normAxis(n, d, rank);
  return perm;
}

int64_t loom::onnx_import::checkFoldSize(const NodeCtx &n,
                                         ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0)
      n.fail("a constant with a negative dimension (" + formatShape(shape) +
             ")");
    if (__builtin_mul_overflow(count, d, &count) || count > kMaxFoldElements)
      n.fail("folding it at compile time would make a constant of shape " +
             formatShape(shape) + ", more than " + Twine(kMaxFoldElements) +
             " elements");
  }
  return count;
}

int64_t loom::onnx_import::checkRangeSize(const NodeCtx &n, double start,
                                          double limit, double delta) {
  if (delta == 0)
    n.fail("Range with delta 0");
  double steps = std::ceil((limit - start) / delta);
  if (!(steps <= double(kMaxFoldElements)))
    n.fail("folding it at compile time would make a Range of more than " +
           Twine(kMaxFoldElements) + " elements (start " +
           llvm::formatv("{0}", start) + ", limit " +
           llvm::formatv("{0}", limit) + ", delta " +
           llvm::formatv("{0}", delta) + ")");
  return std::max<int64_t>(0, static_cast<int64_t>(steps));
}

/// Broadcast-shape of two constant tensors and the flat index mapping.
std::vector<double> loom::onnx_import::broadcastConst(const ConstTensor &c,
                                                      ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<double> out(n);
  size_t rank = shape.size(), crank = c.shape.size();
  SmallVector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t src = 0;
    for (size_t d = 0; d < crank; ++d) {
      int64_t cd = c.shape[d];
      int64_t i = idx[d + rank - crank];
      src = src * cd + (cd == 1 ? 0 : i);
    }
    out[flat] = c.values[src];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

/// Folds shape arithmetic whose inputs are all known at compile time.
/// Returns false (no change) when the node is not foldable here.
bool OnnxImporter::tryFold(const onnx::NodeProto &node) {
  static const llvm::StringSet<> foldable = {
      "Add",    "Sub",           "Mul",       "Div",     "Neg",     "Cast",
      "Concat", "Gather",        "Unsqueeze", "Squeeze", "Reshape", "Identity",
      "Equal",  "Less",          "Greater",   "Where",   "Slice",   "Range",
      "Max",    "Min",           "Not",       "Expand",  "Abs",     "Floor",
      "Sqrt",   "GatherElements", "And", "Or", "Xor", "LessOrEqual",
      "GreaterOrEqual", "CumSum", "GatherND", "Transpose", "Mod",
      "ScatterND"};
  const std::string &op = node.op_type();
  NodeCtx n(node, nodeLoc(node));
  if (op == "Shape" || op == "Size") {
    Value in = get(n.inputName(0));
    if (!in)
      return false;
    auto t = typeOf(in);
    ConstTensor c;
    c.elementType = b.getI64Type();
    if (op == "Size") {
      c.values = {static_cast<double>(t.getNumElements())};
    } else {
      int64_t rank = t.getRank();
      int64_t start = n.getInt("start", 0), end = n.getInt("end", rank);
      if (start < 0)
        start += rank;
      if (end < 0)
        end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      for (int64_t i = start; i < end; ++i)
        c.values.push_back(static_cast<double>(t.getDimSize(i)));
      c.shape = {static_cast<int64_t>(c.values.size())};
    }
    defineConst(n.outputName(0), c);
    return true;
  }
  if (op == "ConstantOfShape") {
    auto shapeC = getConst(n.inputName(0));
    if (!shapeC)
      n.fail("the shape input must be a compile-time constant");
    ConstTensor c;
    for (double d : shapeC->values)
      c.shape.push_back(static_cast<int64_t>(d));
    c.elementType = b.getF32Type();
    double fillValue = 0.0;
    if (auto *a = n.attr("value")) {
      auto type = RankedTensorType::get(
          SmallVector<int64_t>(a->t().dims().begin(), a->t().dims().end()),
          elementType(a->t().data_type(), n.loc));
      if (!type.getElementType())
        throw ImportFailure{};
      DenseElementsAttr attr = tensorToAttr(a->t(), type, n.loc);
      if (!attr)
        throw ImportFailure{};
      ConstTensor v = attrToConst(attr);
      c.elementType = v.elementType;
      if (!v.values.empty())
        fillValue = v.values[0];
    }
    c.values.assign(checkFoldSize(n, c.shape), fillValue);
    defineConst(n.outputName(0), c);
    return true;
  }
  if (op == "CastLike") {
    // Only the element type of the second input matters: it may be a
    // run-time value.
    auto x = getConst(n.inputName(0));
    if (!x)
      return false;
    Type to;
    if (auto like = getConst(n.inputName(1)))
      to = like->elementType;
    else if (Value v = get(n.inputName(1)))
      to = typeOf(v).getElementType();
    else
      return false;
    if (!isa<FloatType>(to))
      for (double &v : x->values)
        v = to.isInteger(1) ? double(v != 0) : std::trunc(v);
    x->elementType = to;
    defineConst(n.outputName(0), *x);
    return true;
  }
  if (!foldable.contains(op))
    return false;
  SmallVector<ConstTensor> in;
  for (int i = 0; i < n.numInputs(); ++i) {
    if (!n.hasInput(i)) {
      in.push_back(ConstTensor{});
      continue;
    }
    auto c = getConst(n.inputName(i));
    // Masks and position tables of exporters reach [batch, 1, T, T]; a
    // million elements keeps folding cheap and the constants bounded.
    if (!c || c->values.size() > size_t(kMaxFoldElements))
      return false;
    in.push_back(*c);
  }
  if (in.empty())
    return false;
  // A result too large to fold (the [batch, 1, T, T] causal mask of a
  // language model at T = 2048) is computed by loom ops instead, which
  // loom-fuse-attention turns into the attention's mask kind: at no T is
  // such a mask made a constant.
  if (auto it = inferred.find(n.outputName(0));
      it != inferred.end() && it->second.hasStaticShape() &&
      it->second.getNumElements() > kMaxFoldElements)
    return false;
  ConstTensor out;
  out.elementType = in[0].elementType;
  auto binary = [&](std::function<double(double, double)> f, bool toBool) {
    auto shape = broadcastShapes(in[0].shape, in[1].shape);
    if (!shape)
      n.fail("operand shapes " + formatShape(in[0].shape) + " and " +
             formatShape(in[1].shape) + " are not broadcast-compatible");
    checkFoldSize(n, *shape);
    auto a = broadcastConst(in[0], *shape), c = broadcastConst(in[1], *shape);
    out.shape = *shape;
    for (size_t i = 0; i < a.size(); ++i)
      out.values.push_back(f(a[i], c[i]));
    if (toBool)
      out.elementType = b.getI1Type();
  };
  bool isInt = !isa<FloatType>(in[0].elementType);
  if (op == "Add")
    binary([](double x, double y) { return x + y; }, false);
  else if (op == "Sub")
    binary([](double x, double y) { return x - y; }, false);
  else if (op == "Mul")
    binary([](double x, double y) { return x * y; }, false);
  else if (op == "Div") {
    if (isInt && llvm::is_contained(in[1].values, 0.0))
      n.fail("integer division by zero in a constant expression");
    binary([isInt](double x,
                   double y) { return isInt ? std::trunc(x / y) : x / y; },
           false);
  } else if (op == "Max" || op == "Min") {
    // Variadic: one input is itself; more fold pairwise, left to right.
    auto f = [&](double x, double y) {
      return op == "Max" ? std::max(x, y) : std::min(x, y);
    };
    if (in.size() == 1) {
      out = in[0];
    } else {
      binary(f, false);
      for (size_t i = 2; i < in.size(); ++i) {
        in[0] = out, in[1] = in[i];
        out = ConstTensor{};
        out.elementType = in[0].elementType;
        binary(f, false);
      }
    }
  } else if (op == "Equal")
    binary([](double x, double y) { return double(x == y); }, true);
  else if (op == "Less")
    binary([](double x, double y) { return double(x < y); }, true);
  else if (op == "Greater")
    binary([](double x, double y) { return double(x > y); }, true);
  else if (op == "LessOrEqual")
    binary([](double x, double y) { return double(x <= y); }, true);
  else if (op == "GreaterOrEqual")
    binary([](double x, double y) { return double(x >= y); }, true);
  else if (op == "And")
    binary([](double x, double y) { return double(x != 0 && y != 0); }, true);
  else if (op == "Or")
    binary([](double x, double y) { return double(x != 0 || y != 0); }, true);
  else if (op == "Xor")
    binary([](double x, double y) { return double((x != 0) != (y != 0)); },
           true);
  else if (op == "Mod") {
    // fmod = 0 (integers only): the sign of the divisor, as Python's %;
    // fmod = 1: C's fmod, the sign of the dividend.
    bool cMod = n.getInt("fmod", 0) != 0;
    if (!isInt && !cMod)
      n.fail("fmod must be 1 for floating-point operands");
    if (isInt && llvm::is_contained(in[1].values, 0.0))
      n.fail("integer modulo by zero in a constant expression");
    binary(
        [cMod](double x, double y) {
          double r = std::fmod(x, y);
          if (!cMod && r != 0 && ((r < 0) != (y < 0)))
            r += y;
          return r;
        },
        false);
  } else if (op == "ScatterND") {
    // Rows of the data (its first k dimensions) replaced by update slices.
    if (n.getString("reduction", "none") != "none")
      return false;
    int64_t slice = 0;
    std::vector<SmallVector<int64_t, 1>> src =
        scatterNDSources(n, in[0].shape, in[1], in[2].shape, slice);
    const ConstTensor &updates = in[2];
    out = in[0];
    for (size_t row = 0; row < src.size(); ++row)
      if (!src[row].empty())
        for (int64_t e = 0; e < slice; ++e)
          out.values[row * slice + e] =
              updates.values[src[row].back() * slice + e];
  }
  else if (op == "Neg" || op == "Abs" || op == "Floor" || op == "Sqrt" ||
           op == "Not") {
    out = in[0];
    for (double &v : out.values)
      v = op == "Neg"     ? -v
          : op == "Abs"   ? std::fabs(v)
          : op == "Floor" ? std::floor(v)
          : op == "Sqrt"  ? std::sqrt(v)
                          : double(v == 0.0);
  } else if (op == "Identity") {
    out = in[0];
  } else if (op == "Cast") {
    out = in[0];
    out.elementType = elementType(n.getInt("to", 1), n.loc);
    if (!out.elementType)
      throw ImportFailure{};
    if (!isa<FloatType>(out.elementType))
      for (double &v : out.values)
        v = out.elementType.isInteger(1) ? double(v != 0) : std::trunc(v);
  } else if (op == "Where") {
    auto s1 = broadcastShapes(in[0].shape, in[1].shape);
    auto shape = s1 ? broadcastShapes(*s1, in[2].shape) : std::nullopt;
    if (!shape)
      n.fail("operand shapes are not broadcast-compatible");
    checkFoldSize(n, *shape);
    auto c = broadcastConst(in[0], *shape), x = broadcastConst(in[1], *shape),
         y = broadcastConst(in[2], *shape);
    out.shape = *shape;
    out.elementType = in[1].elementType;
    for (size_t i = 0; i < c.size(); ++i)
      out.values.push_back(c[i] != 0 ? x[i] : y[i]);
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" ||
             op == "Expand") {
    // Only the shape changes: take it from ONNX shape inference, or for
    // Expand from its shape input (inference gives nothing where that
    // shape is itself computed, as the TorchScript exporter writes it).
    auto it = inferred.find(n.outputName(0));
    if (it != inferred.end()) {
      out.shape.assign(it->second.getShape().begin(),
                       it->second.getShape().end());
    } else if (op == "Expand" && in.size() == 2) {
      SmallVector<int64_t> target;
      for (double d : in[1].values)
        target.push_back(static_cast<int64_t>(d));
      auto shape = broadcastShapes(in[0].shape, target);
      if (!shape)
        return false;
      out.shape.assign(shape->begin(), shape->end());
    } else {
      return false;
    }
    if (op == "Expand") {
      if (!broadcastShapes(in[0].shape, out.shape))
        return false;
      checkFoldSize(n, out.shape);
      out.values = broadcastConst(in[0], out.shape);
    } else {
      out.values = in[0].values;
    }
    if (static_cast<int64_t>(out.values.size()) != out.numElements())
      return false;
  } else if (op == "Concat") {
    // Along `axis`: for each index of the dimensions before it, the blocks
    // of every input in turn.
    int64_t rank = in[0].shape.size();
    if (rank == 0)
      return false;
    int64_t axis = normAxis(n, n.getInt("axis", 0), rank);
    out.shape = in[0].shape;
    out.shape[axis] = 0;
    for (const auto &c : in) {
      if (static_cast<int64_t>(c.shape.size()) != rank)
        return false;
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && c.shape[d] != in[0].shape[d])
          n.fail("inputs differ in dimension " + Twine(d));
      out.shape[axis] += c.shape[axis];
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d)
      outer *= in[0].shape[d];
    for (int64_t o = 0; o < outer; ++o)
      for (const auto &c : in) {
        int64_t block = outer == 0 ? 0 : c.numElements() / outer;
        out.values.insert(out.values.end(), c.values.begin() + o * block,
                          c.values.begin() + (o + 1) * block);
      }
  } else if (op == "Gather") {
    if (in[0].shape.size() != 1 || n.getInt("axis", 0) != 0)
      return false;
    out.shape = in[1].shape;
    int64_t size = in[0].shape[0];
    for (double iv : in[1].values) {
      int64_t i = static_cast<int64_t>(iv);
      if (i < 0)
        i += size;
      if (i < 0 || i >= size)
        n.fail("index " + Twine(static_cast<int64_t>(iv)) +
               " is out of range for " + Twine(size) + " elements");
      out.values.push_back(in[0].values[i]);
    }
  } else if (op == "Transpose") {
    int64_t rank = in[0].shape.size();
    SmallVector<int64_t> perm = transposePerm(n, rank);
    for (int64_t d : perm)
      out.shape.push_back(in[0].shape[d]);
    SmallVector<int64_t> stride(rank, 1), idx(rank, 0);
    for (int64_t d = rank - 2; d >= 0; --d)
      stride[d] = stride[d + 1] * in[0].shape[d + 1];
    for (int64_t flat = 0, total = out.numElements(); flat < total; ++flat) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src += idx[d] * stride[perm[d]];
      out.values.push_back(in[0].values[src]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < out.shape[d])
          break;
        idx[d] = 0;
      }
    }
  } else if (op == "CumSum") {
    // Running sums along `axis` (input 1), optionally exclusive/reversed.
    const ConstTensor &x = in[0];
    int64_t rank = x.shape.size();
    if (rank == 0 || in[1].values.size() != 1)
      n.fail("CumSum needs a tensor and a scalar axis");
    int64_t axis = normAxis(n, static_cast<int64_t>(in[1].values[0]), rank);
    bool exclusive = n.getInt("exclusive", 0) != 0;
    bool reverse = n.getInt("reverse", 0) != 0;
    int64_t inner = 1, dim = x.shape[axis];
    for (int64_t d = axis + 1; d < rank; ++d)
      inner *= x.shape[d];
    out = x;
    int64_t outer = dim == 0 ? 0 : x.numElements() / (dim * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double acc = 0;
        for (int64_t k = 0; k < dim; ++k) {
          int64_t kk = reverse ? dim - 1 - k : k;
          int64_t at = (o * dim + kk) * inner + i;
          double v = x.values[at];
          out.values[at] = exclusive ? acc : acc + v;
          acc += v;
        }
      }
  } else if (op == "GatherND") {
    // out[b..., i...] = data[b..., index[b..., i..., :]...].
    const ConstTensor &data = in[0], &index = in[1];
    int64_t batch = n.getInt("batch_dims", 0);
    int64_t r = data.shape.size(), q = index.shape.size();
    if (q == 0 || batch < 0 || batch >= std::min(r, q))
      n.fail("GatherND: invalid batch_dims or index rank");
    int64_t k = index.shape[q - 1];
    if (k < 1 || batch + k > r)
      n.fail("GatherND: index depth " + Twine(k) + " exceeds the data rank");
    out.shape.assign(index.shape.begin(), index.shape.end() - 1);
    out.shape.append(data.shape.begin() + batch + k, data.shape.end());
    int64_t slice = 1;
    for (int64_t d = batch + k; d < r; ++d)
      slice *= data.shape[d];
    int64_t batchSize = 1;
    for (int64_t d = 0; d < batch; ++d)
      batchSize *= data.shape[d];
    int64_t perBatchData = data.numElements() / std::max<int64_t>(batchSize, 1);
    int64_t tuples = index.numElements() / k;
    int64_t tuplesPerBatch = tuples / std::max<int64_t>(batchSize, 1);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t bIdx = t / std::max<int64_t>(tuplesPerBatch, 1);
      int64_t off = 0;
      for (int64_t j = 0; j < k; ++j) {
        int64_t dim = data.shape[batch + j];
        int64_t v = static_cast<int64_t>(index.values[t * k + j]);
        if (v < 0)
          v += dim;
        if (v < 0 || v >= dim)
          n.fail("GatherND: index " + Twine(v) + " is out of range for a "
                 "dimension of " + Twine(dim));
        off = off * dim + v;
      }
      int64_t base = bIdx * perBatchData + off * slice;
      for (int64_t e = 0; e < slice; ++e)
        out.values.push_back(data.values[base + e]);
    }
  } else if (op == "GatherElements") {
    // out[i] = data[i with index[i] on `axis`]; index and data of one rank.
    const ConstTensor &data = in[0], &index = in[1];
    int64_t rank = data.shape.size();
    if (static_cast<int64_t>(index.shape.size()) != rank || rank == 0)
      n.fail("data and indices must have the same rank");
    int64_t axis = normAxis(n, n.getInt("axis", 0), rank);
    out.shape = index.shape;
    SmallVector<int64_t> idx(rank, 0);
    for (double iv : index.values) {
      int64_t k = static_cast<int64_t>(iv);
      if (k < 0)
        k += data.shape[axis];
      if (k < 0 || k >= data.shape[axis])
        n.fail("index " + Twine(static_cast<int64_t>(iv)) +
               " is out of range for dimension " + Twine(axis) + " of size " +
               Twine(data.shape[axis]));
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d) {
        int64_t i = d == axis ? k : idx[d];
        if (i >= data.shape[d])
          n.fail("indices shape " + formatShape(index.shape) +
                 " exceeds the data shape " + formatShape(data.shape));
        src = src * data.shape[d] + i;
      }
      out.values.push_back(data.values[src]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < index.shape[d])
          break;
        idx[d] = 0;
      }
    }
  } else if (op == "Slice") {
    // ONNX Slice: per listed axis, start/end clamped to the dimension
    // (INT64 extremes mean "to the end"), any non-zero step.
    int64_t rank = in[0].shape.size();
    if (in.size() < 3 || rank == 0)
      return false;
    SmallVector<int64_t> start(rank, 0), step(rank, 1), count(in[0].shape);
    size_t listed = in[1].values.size();
    if (in[2].values.size() != listed)
      n.fail("starts and ends have different lengths");
    auto at = [&](size_t input, size_t i, int64_t dflt) {
      if (in.size() <= input || in[input].values.empty())
        return dflt;
      return static_cast<int64_t>(
          std::clamp(in[input].values.at(i), -4.0e18, 4.0e18));
    };
    for (size_t i = 0; i < listed; ++i) {
      int64_t axis = normAxis(n, at(3, i, i), rank);
      int64_t dim = in[0].shape[axis];
      int64_t st = at(4, i, 1);
      if (st == 0)
        n.fail("slice step 0");
      int64_t b0 = at(1, i, 0), e0 = at(2, i, 0);
      if (b0 < 0)
        b0 += dim;
      if (e0 < 0)
        e0 += dim;
      if (st > 0) {
        b0 = std::clamp<int64_t>(b0, 0, dim);
        e0 = std::clamp<int64_t>(e0, 0, dim);
        count[axis] = std::max<int64_t>(0, (e0 - b0 + st - 1) / st);
      } else {
        b0 = std::clamp<int64_t>(b0, 0, dim - 1);
        e0 = std::clamp<int64_t>(e0, -1, dim - 1);
        count[axis] = std::max<int64_t>(0, (b0 - e0 - st - 1) / -st);
      }
      start[axis] = b0;
      step[axis] = st;
    }
    out.shape = count;
    SmallVector<int64_t> idx(rank, 0);
    for (int64_t flat = 0, total = out.numElements(); flat < total; ++flat) {
      int64_t src = 0;
      for (int64_t d = 0; d < rank; ++d)
        src = src * in[0].shape[d] + start[d] + idx[d] * step[d];
      out.values.push_back(in[0].values[src]);
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (++idx[d] < count[d])
          break;
        idx[d] = 0;
      }
    }
  } else if (op == "Range") {
    double start = in[0].values.at(0), limit = in[1].values.at(0),
           delta = in[2].values.at(0);
    int64_t count = checkRangeSize(n, start, limit, delta);
    // Folded values are doubles: integers beyond 2^53 would not be exact.
    double last = start + std::max<int64_t>(count - 1, 0) * delta;
    if (!isa<FloatType>(out.elementType) &&
        std::max(std::abs(start), std::abs(last)) > 9007199254740992.0)
      n.fail("integer Range with values beyond 2^53 cannot be folded "
             "exactly");
    for (int64_t i = 0; i < count; ++i)
      out.values.push_back(start + i * delta);
    out.shape = {count};
  } else {
    return false;
  }
  defineConst(n.outputName(0), out);
  return true;
}
