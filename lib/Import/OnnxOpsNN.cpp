//===- OnnxOpsNN.cpp - ONNX network layers
//----------------------------------===//
//
// Contractions (MatMul, Gemm, Conv), pooling, softmax and normalizations,
// dropout, the softmax cross-entropy loss and reductions.
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

/// Whether `v` is +0.0 everywhere: a splat constant, maybe broadcast
/// (PyTorch's exporter gives a convolution without bias a zero bias).
static bool isPositiveZero(Value v) {
  while (auto broadcast = v.getDefiningOp<BroadcastInDimOp>())
    v = broadcast.getX();
  auto constant = v.getDefiningOp<ConstantOp>();
  auto splat =
      constant ? dyn_cast<SplatElementsAttr>(constant.getValue()) : nullptr;
  if (!splat || !isa<FloatType>(splat.getElementType()))
    return false;
  APFloat value = splat.getSplatValue<APFloat>();
  return value.isZero() && !value.isNegative();
}

void OnnxNode::convertMatMul() {
  Value a = input(0), w = input(1);
  floatOnly(a);
  auto at = typeOf(a), wt = typeOf(w);
  if (at.getRank() == 0 || wt.getRank() == 0)
    n.fail("MatMul of a scalar");
  // numpy semantics: 1-D operands gain a unit dimension that is dropped
  // from the result.
  bool aVec = at.getRank() == 1, wVec = wt.getRank() == 1;
  if (aVec)
    a = ReshapeOp::create(
        b, loc,
        RankedTensorType::get({1, at.getDimSize(0)}, at.getElementType()), a);
  if (wVec)
    w = ReshapeOp::create(
        b, loc,
        RankedTensorType::get({wt.getDimSize(0), 1}, wt.getElementType()), w);
  at = typeOf(a);
  wt = typeOf(w);
  // Broadcast batch dimensions; a 2-D right operand stays shared.
  ArrayRef<int64_t> ab = at.getShape().drop_back(2),
                    wb = wt.getShape().drop_back(2);
  auto batch = broadcastShapes(ab, wb);
  if (!batch)
    n.fail("batch dimensions " + formatShape(ab) + " and " + formatShape(wb) +
           " are not broadcast-compatible");
  auto full = [&](Value v, RankedTensorType t) {
    SmallVector<int64_t> s(*batch);
    s.append(t.getShape().take_back(2).begin(),
             t.getShape().take_back(2).end());
    return broadcastTo(b, loc, v, s);
  };
  if (wt.getRank() != 2 || batch->empty()) {
    a = full(a, at);
    w = full(w, wt);
  } else {
    a = full(a, at);
  }
  if (typeOf(a).getRank() < 2 || typeOf(w).getRank() < 2)
    n.fail("unsupported operand ranks");
  Value y =
      check(createInferred<MatmulOp>(b, loc, a, w, Value(), false, false))
          .getResult();
  if (aVec || wVec) {
    SmallVector<int64_t> s(typeOf(y).getShape());
    if (wVec)
      s.pop_back();
    if (aVec)
      s.erase(s.end() - (wVec ? 1 : 2));
    y = ReshapeOp::create(
        b, loc, RankedTensorType::get(s, typeOf(y).getElementType()), y);
  }
  setOut(0, y);
  return;
}

void OnnxNode::convertGemm() {
  Value a = input(0), w = input(1);
  floatOnly(a);
  if (typeOf(a).getRank() != 2 || typeOf(w).getRank() != 2)
    n.fail("A and B must be 2-D");
  Value y =
      check(createInferred<MatmulOp>(b, loc, a, w, Value(),
                                     n.getInt("transA", 0) != 0,
                                     n.getInt("transB", 0) != 0))
          .getResult();
  float alpha = n.getFloat("alpha", 1.0f), beta = n.getFloat("beta", 1.0f);
  if (alpha != 1.0f)
    y = MulOp::create(b, loc, y, splat(y, alpha));
  if (n.hasInput(2) && beta != 0.0f) {
    Value c = input(2);
    if (beta != 1.0f)
      c = MulOp::create(b, loc, c, splat(c, beta));
    y = check(createBroadcastBinary<AddOp>(b, loc, y, c));
  }
  setOut(0, y);
  return;
}

void OnnxNode::resolveAutoPad(Value x, ArrayRef<int64_t> extent,
                              ArrayRef<int64_t> strides,
                              SmallVectorImpl<int64_t> &pads) {
  std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Output size ceil(in / stride); the padding it needs is split in two,
    // the odd element at the end (UPPER) or at the start (LOWER).
    for (int i = 0; i < 2; ++i) {
      int64_t in = typeOf(x).getDimSize(2 + i);
      int64_t out = (in + strides[i] - 1) / strides[i];
      int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[i] + extent[i] - in);
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[i + 2] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad == "VALID") {
    pads.assign({0, 0, 0, 0});
  } else if (autoPad != "NOTSET") {
    n.fail("unknown auto_pad '" + autoPad + "'");
  }
}

void OnnxNode::convertConv() {
  Value x = input(0), w = input(1);
  floatOnly(x);
  if (typeOf(x).getRank() != 4)
    n.fail("only 2-D convolution (rank-4 NCHW input) is supported, got rank " +
           Twine(typeOf(x).getRank()));
  auto wt = typeOf(w);
  SmallVector<int64_t> strides =
      n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> dil =
      n.getInts("dilations").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> pads =
      n.getInts("pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4)
    n.fail("strides/dilations need 2 entries and pads 4");
  SmallVector<int64_t> extent;
  for (int i = 0; i < 2; ++i)
    extent.push_back((wt.getDimSize(2 + i) - 1) * dil[i] + 1);
  resolveAutoPad(x, extent, strides, pads);
  Value y = check(createInferred<Conv2DOp>(b, loc, x, w, strides, pads, dil,
                                           n.getInt("group", 1)))
                .getResult();
  // A zero bias adds nothing (x + 0 = x but for x = -0, which a
  // convolution without bias leaves as it is too).
  if (n.hasInput(2) && !isPositiveZero(input(2))) {
    Value bias = input(2);
    bias = BroadcastInDimOp::create(
        b, loc,
        RankedTensorType::get(typeOf(y).getShape(),
                              typeOf(bias).getElementType()),
        bias, ArrayRef<int64_t>{1});
    y = AddOp::create(b, loc, y, bias);
  }
  setOut(0, y);
  return;
}

void OnnxNode::convertPool() {
  Value x = input(0);
  floatOnly(x);
  if (typeOf(x).getRank() != 4)
    n.fail("only 2-D pooling (rank-4 NCHW input) is supported");
  if (n.outputName(1).size())
    n.fail("the Indices output of MaxPool is not supported");
  const bool ceilMode = n.getInt("ceil_mode", 0) != 0;
  auto dilations = n.getInts("dilations");
  if (dilations && llvm::any_of(*dilations, [](int64_t d) { return d != 1; }))
    n.fail("dilated pooling is not supported");
  SmallVector<int64_t> kernel = *n.getInts("kernel_shape");
  SmallVector<int64_t> strides =
      n.getInts("strides").value_or(SmallVector<int64_t>{1, 1});
  SmallVector<int64_t> pads =
      n.getInts("pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    n.fail("kernel_shape/strides need 2 entries and pads 4");
  resolveAutoPad(x, kernel, strides, pads);
  const SmallVector<int64_t> declaredPads = pads;
  if (ceilMode) {
    // The output size rounds up (SqueezeNet's pools): the part of the last
    // window past the end is padding at the end, which max pooling never
    // chooses and average pooling never counts. As in ONNX and PyTorch, a
    // last window that would start in the end padding is dropped.
    for (int i = 0; i < 2; ++i) {
      int64_t in = typeOf(x).getDimSize(2 + i);
      int64_t total = in + pads[i] + pads[i + 2];
      if (total < kernel[i])
        continue; // the op's verifier names it
      int64_t out = (total - kernel[i] + strides[i] - 1) / strides[i] + 1;
      if ((out - 1) * strides[i] >= in + pads[i])
        --out;
      pads[i + 2] += std::max<int64_t>(
          0, (out - 1) * strides[i] + kernel[i] - total);
    }
  }
  if (op == "MaxPool") {
    if (n.getInt("storage_order", 0) != 0)
      n.fail("storage_order=1 is not supported");
    setOut(0, check(createInferred<MaxPool2DOp>(b, loc, x, kernel, strides,
                                                pads, false))
                  .getResult());
  } else {
    bool countPad = n.getInt("count_include_pad", 0) != 0;
    bool extended = pads != declaredPads;
    // With count_include_pad, the declared padding counts but not what
    // ceil_mode added: average without padding, then scale each output
    // position by (its window's elements in the input) / (those in the
    // input and the declared padding).
    Value y = check(createInferred<AvgPool2DOp>(b, loc, x, kernel, strides,
                                                pads, countPad && !extended))
                  .getResult();
    if (countPad && extended) {
      auto yt = typeOf(y);
      int64_t oh = yt.getDimSize(2), ow = yt.getDimSize(3);
      SmallVector<double> factor(oh * ow);
      auto counts = [&](int i, int64_t o, int64_t &valid, int64_t &clipped) {
        int64_t in = typeOf(x).getDimSize(2 + i);
        int64_t start = o * strides[i] - declaredPads[i];
        int64_t end = start + kernel[i];
        valid = std::min(end, in) - std::max<int64_t>(start, 0);
        clipped = std::min(end, in + declaredPads[i + 2]) - start;
      };
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          int64_t vr, cr, vc, cc;
          counts(0, r, vr, cr);
          counts(1, c, vc, cc);
          factor[r * ow + c] = double(vr * vc) / double(cr * cc);
        }
      auto ft = RankedTensorType::get({oh, ow}, yt.getElementType());
      SmallVector<Attribute> values;
      for (double f : factor)
        values.push_back(b.getFloatAttr(yt.getElementType(), f));
      Value f = ConstantOp::create(b, loc, DenseElementsAttr::get(ft, values));
      y = MulOp::create(b, loc, y,
                        BroadcastInDimOp::create(b, loc, yt, f,
                                                 ArrayRef<int64_t>{2, 3}));
    }
    setOut(0, y);
  }
  return;
}

void OnnxNode::convertGlobalPool() {
  Value x = input(0);
  floatOnly(x);
  if (typeOf(x).getRank() < 3)
    n.fail("input must have rank >= 3");
  SmallVector<int64_t> dims;
  for (int64_t d = 2; d < typeOf(x).getRank(); ++d)
    dims.push_back(d);
  if (op == "GlobalAveragePool")
    setOut(
        0,
        check(createInferred<ReduceMeanOp>(b, loc, x, dims, true)).getResult());
  else
    setOut(
        0,
        check(createInferred<ReduceMaxOp>(b, loc, x, dims, true)).getResult());
  return;
}

void OnnxNode::convertSoftmax() {
  Value x = input(0);
  floatOnly(x);
  int64_t axis = normAxis(n, n.getInt("axis", -1), typeOf(x).getRank());
  if (op == "Softmax")
    setOut(0, SoftmaxOp::create(b, loc, x, axis));
  else
    setOut(0, LogSoftmaxOp::create(b, loc, x, axis));
  return;
}

void OnnxNode::convertLayerNorm() {
  Value x = input(0);
  floatOnly(x);
  auto xt = typeOf(x);
  int64_t axis = normAxis(n, n.getInt("axis", -1), xt.getRank());
  if (n.getInt("stash_type", 1) != 1)
    n.fail("stash_type other than float is not supported");
  if (n.outputName(1).size() || n.outputName(2).size()) {
    // Mean and 1/stddev over the normalized dimensions, kept as size 1.
    SmallVector<int64_t> dims;
    for (int64_t d = axis; d < xt.getRank(); ++d)
      dims.push_back(d);
    Value mean =
        check(createInferred<ReduceMeanOp>(b, loc, x, dims, true)).getResult();
    Value centered =
        SubOp::create(b, loc, x, broadcastTo(b, loc, mean, xt.getShape()));
    Value var =
        check(createInferred<ReduceMeanOp>(
                  b, loc, MulOp::create(b, loc, centered, centered).getResult(),
                  dims, true))
            .getResult();
    Value inv = RsqrtOp::create(
        b, loc,
        AddOp::create(b, loc, var, splat(var, n.getFloat("epsilon", 1e-5f))));
    setOut(1, mean);
    setOut(2, inv);
  }
  SmallVector<int64_t> normShape(xt.getShape().drop_front(axis));
  auto paramType = RankedTensorType::get(normShape, xt.getElementType());
  auto fit = [&](Value v) {
    if (typeOf(v).getShape() == ArrayRef<int64_t>(normShape))
      return v;
    auto s = broadcastShapes(typeOf(v).getShape(), normShape);
    if (!s || ArrayRef<int64_t>(*s) != ArrayRef<int64_t>(normShape))
      n.fail("scale/bias shape " + formatShape(typeOf(v).getShape()) +
             " does not broadcast to the normalized shape " +
             formatShape(normShape));
    return broadcastTo(b, loc, v, normShape);
  };
  Value scale = fit(input(1));
  Value bias =
      n.hasInput(2) ? fit(input(2)) : splatConstant(b, loc, paramType, 0.0);
  setOut(0,
         LayerNormOp::create(b, loc, x, scale, bias, b.getI64IntegerAttr(axis),
                             b.getF32FloatAttr(n.getFloat("epsilon", 1e-5f))));
  return;
}

void OnnxNode::convertBatchNorm() {
  Value x = input(0);
  floatOnly(x);
  FloatAttr eps = b.getF32FloatAttr(n.getFloat("epsilon", 1e-5f));
  BatchNormMode mode = imp.options.batchNorm;
  if (imp.buffers.contains(n.inputName(3)) &&
      imp.buffers.contains(n.inputName(4))) {
    // Trains, with running statistics as buffers: the inference form, which
    // @predict keeps and loom-batch-norm-train rewrites in the training
    // step (batch statistics, the buffers' update).
    FloatAttr momentum = b.getF32FloatAttr(n.getFloat("momentum", 0.9f));
    setOut(0, BatchNormOp::create(b, loc, x, input(1), input(2), input(3),
                                  input(4), eps, momentum));
    return;
  }
  Value mean = input(3), var = input(4);
  if (n.getInt("training_mode", 0) != 0 && mode != BatchNormMode::Frozen) {
    // ONNX's training mode on statistics that are not buffers (graph
    // inputs, computed values): batch statistics, and the running
    // statistics' update as outputs 1 and 2.
    auto stats = check(createInferred<BatchNormStatsOp>(b, loc, x));
    mean = stats.getMean();
    var = stats.getVariance();
    if (n.outputName(1).size() || n.outputName(2).size()) {
      // Running statistics: momentum * running + (1 - momentum) * batch.
      float m = n.getFloat("momentum", 0.9f);
      auto blend = [&](Value running, Value batch) {
        return AddOp::create(
                   b, loc, MulOp::create(b, loc, running, splat(running, m)),
                   MulOp::create(b, loc, batch, splat(batch, 1.0 - m)))
            .getResult();
      };
      setOut(1, blend(input(3), mean));
      setOut(2, blend(input(4), var));
    }
  } else if (n.outputName(1).size() || n.outputName(2).size()) {
    if (n.getInt("training_mode", 0) == 0)
      n.fail("running-statistics outputs need training_mode=1");
    // Frozen (--batch-norm=frozen): the statistics stay as they are.
    setOut(1, mean);
    setOut(2, var);
  }
  setOut(0, BatchNormOp::create(b, loc, x, input(1), input(2), mean, var, eps,
                                FloatAttr()));
  return;
}

Value OnnxImporter::seedArgument() {
  if (!rngSeed) {
    auto seedType = RankedTensorType::get({}, b.getI64Type());
    argTypes.push_back(seedType);
    argAttrs.push_back(
        b.getDictionaryAttr(b.getNamedAttr(kRngSeedAttr, b.getUnitAttr())));
    rngSeed =
        entry->addArgument(seedType, NameLoc::get(b.getStringAttr("rng_seed")));
  }
  return rngSeed;
}

void OnnxNode::convertDropout() {
  Value x = input(0);
  bool training = false;
  if (n.hasInput(2)) {
    auto t = imp.getConst(n.inputName(2));
    if (!t)
      n.fail("training_mode must be a compile-time constant");
    training = !t->values.empty() && t->values[0] != 0;
  }
  double ratio = 0.5;
  if (n.hasInput(1)) {
    auto r = imp.getConst(n.inputName(1));
    if (!r)
      n.fail("ratio must be a compile-time constant");
    ratio = r->values.at(0);
  }
  if (!(ratio >= 0.0 && ratio < 1.0))
    n.fail("ratio must be in [0, 1), got " + std::to_string(ratio));
  auto maskType = RankedTensorType::get(typeOf(x).getShape(), b.getI1Type());
  if (!n.hasInput(2) && ratio > 0.0)
    imp.inferenceDropouts.push_back({loc, node.name()});
  if (!training || ratio == 0.0) {
    // Inference mode: the identity, and a mask that keeps everything.
    setOut(0, x);
    if (n.outputName(1).size())
      setOut(1, ConstantOp::create(b, loc, DenseElementsAttr::get(
                                               maskType, true)));
    return;
  }
  auto stream = b.getI64IntegerAttr(imp.dropoutStreams++);
  Value seed = imp.seedArgument();
  setOut(0, DropoutOp::create(b, loc, x, seed, b.getF32FloatAttr(ratio),
                              stream));
  if (n.outputName(1).size()) {
    // The mask of the same draw (same seed and stream): where dropout of
    // ones is not 0. It carries no gradient.
    Value kept = DropoutOp::create(b, loc, splat(x, 1.0), seed,
                                   b.getF32FloatAttr(ratio), stream);
    setOut(1, CompareOp::create(b, loc, maskType, ComparePredicate::NE, kept,
                                splat(x, 0.0)));
  }
  return;
}

/// RandomUniform(Like), RandomNormal(Like) and Bernoulli: draws of
/// loom.random from Loom's per-step seed (the node's `seed` attribute is
/// not used: a fixed seed would give the same mask every step).
void OnnxNode::convertRandom() {
  bool like = op == "RandomUniformLike" || op == "RandomNormalLike" ||
              op == "Bernoulli";
  SmallVector<int64_t> shape;
  Type elt;
  if (like) {
    RankedTensorType in = typeOf(input(0));
    shape.assign(in.getShape().begin(), in.getShape().end());
    elt = in.getElementType();
  } else {
    auto s = n.getInts("shape");
    if (!s)
      n.fail("the shape attribute is required");
    shape = *s;
    for (int64_t d : shape)
      if (d < 0)
        n.fail("shape " + formatShape(shape) + " has a negative dimension");
    elt = b.getF32Type();
  }
  if (n.attr("dtype")) {
    elt = imp.elementType(n.getInt("dtype", 0), loc);
    if (!elt)
      throw ImportFailure{};
  }
  bool bernoulli = op == "Bernoulli";
  if (!bernoulli && !isa<FloatType>(elt))
    n.fail("draws of a non-float element type are not supported");
  bool normal = op == "RandomNormal" || op == "RandomNormalLike";
  double a = normal ? n.getFloat("mean", 0.0f) : n.getFloat("low", 0.0f);
  double hi = normal ? n.getFloat("scale", 1.0f) : n.getFloat("high", 1.0f);
  if (bernoulli)
    a = 0.0, hi = 1.0;
  Type drawType = bernoulli ? typeOf(input(0)).getElementType() : elt;
  if (!isa<FloatType>(drawType))
    n.fail("Bernoulli probabilities must be floats");
  auto type = RankedTensorType::get(shape, drawType);
  Value draw = RandomOp::create(
      b, loc, type, imp.seedArgument(),
      b.getStringAttr(normal ? "normal" : "uniform"), b.getF64FloatAttr(a),
      b.getF64FloatAttr(hi), b.getI64IntegerAttr(imp.dropoutStreams++));
  if (!bernoulli) {
    setOut(0, draw);
    return;
  }
  // Bernoulli(p): 1 where u < p, else 0, in the output's element type.
  auto maskType = RankedTensorType::get(shape, b.getI1Type());
  Value one = CompareOp::create(b, loc, maskType, ComparePredicate::LT, draw,
                                input(0));
  auto outType = RankedTensorType::get(shape, elt);
  setOut(0, elt.isInteger(1) ? one : CastOp::create(b, loc, outType, one));
  return;
}

void OnnxNode::convertSoftmaxCrossEntropy() {
  Value logits = input(0), labels = input(1);
  floatOnly(logits);
  if (n.hasInput(2))
    n.fail("the class-weight input is not supported");
  if (n.outputName(1).size())
    n.fail("the log_prob output is not supported");
  std::string red = n.getString("reduction", "mean");
  Reduction reduction =
      red == "mean"  ? Reduction::Mean
      : red == "sum" ? Reduction::Sum
      : red == "none"
          ? Reduction::None
          : (n.fail("unknown reduction '" + red + "'"), Reduction::Mean);
  IntegerAttr ignore;
  if (auto *a = n.attr("ignore_index"))
    ignore = b.getI64IntegerAttr(a->i());
  setOut(0, check(createInferred<CrossEntropyOp>(b, loc, logits, labels,
                                                 reduction, ignore))
                .getResult());
  return;
}

void OnnxNode::convertReduce() {
  Value x = input(0);
  auto xt = typeOf(x);
  if (xt.getElementType().isInteger(1))
    n.fail("a reduction of bool values is not supported (Loom's reductions "
           "take numbers)");
  SmallVector<int64_t> axes;
  bool fromInput = op == "ReduceSum" || imp.opset >= 18;
  if (fromInput && n.hasInput(1))
    axes = constInts(1, "axes");
  else if (!fromInput)
    axes = n.getInts("axes").value_or(SmallVector<int64_t>{});
  bool keep = n.getInt("keepdims", 1) != 0;
  if (axes.empty()) {
    if (n.getInt("noop_with_empty_axes", 0) != 0) {
      setOut(0, x);
      return;
    }
    for (int64_t d = 0; d < xt.getRank(); ++d)
      axes.push_back(d);
  }
  for (int64_t &a : axes)
    a = normAxis(n, a, xt.getRank());
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  auto reduce = [&](StringRef kind, Value v) -> Value {
    if (kind == "sum")
      return check(createInferred<ReduceSumOp>(b, loc, v, axes, keep))
          .getResult();
    if (kind == "mean")
      return check(createInferred<ReduceMeanOp>(b, loc, v, axes, keep))
          .getResult();
    if (kind == "max")
      return check(createInferred<ReduceMaxOp>(b, loc, v, axes, keep))
          .getResult();
    return check(createInferred<ReduceMinOp>(b, loc, v, axes, keep))
        .getResult();
  };
  Value y;
  if (op == "ReduceSum")
    y = reduce("sum", x);
  else if (op == "ReduceMean")
    y = reduce("mean", x);
  else if (op == "ReduceMax")
    y = reduce("max", x);
  else if (op == "ReduceMin")
    y = reduce("min", x);
  else if (op == "ReduceSumSquare")
    y = reduce("sum", MulOp::create(b, loc, x, x));
  else if (op == "ReduceL1")
    y = reduce("sum", AbsOp::create(b, loc, x));
  else if (op == "ReduceL2") {
    floatOnly(x);
    y = SqrtOp::create(b, loc, reduce("sum", MulOp::create(b, loc, x, x)));
  } else if (op == "ReduceLogSum") {
    floatOnly(x);
    y = LogOp::create(b, loc, reduce("sum", x));
  } else if (op == "ReduceLogSumExp") {
    floatOnly(x);
    // Stable: max + log(sum(exp(x - max))).
    bool savedKeep = keep;
    keep = true;
    Value m = reduce("max", x);
    Value mb = broadcastTo(b, loc, m, xt.getShape());
    keep = savedKeep;
    Value s =
        reduce("sum", ExpOp::create(b, loc, SubOp::create(b, loc, x, mb)));
    Value mk = keep ? m : ReshapeOp::create(b, loc, typeOf(s), m).getResult();
    y = AddOp::create(b, loc, LogOp::create(b, loc, s), mk);
  } else {
    n.fail("unsupported reduction");
  }
  setOut(0, y);
  return;
}

void loom::onnx_import::addNNHandlers(OnnxHandlerTable &table) {
  table["MatMul"] = &OnnxNode::convertMatMul;
  table["Gemm"] = &OnnxNode::convertGemm;
  table["Conv"] = &OnnxNode::convertConv;
  table["MaxPool"] = &OnnxNode::convertPool;
  table["AveragePool"] = &OnnxNode::convertPool;
  table["GlobalAveragePool"] = &OnnxNode::convertGlobalPool;
  table["GlobalMaxPool"] = &OnnxNode::convertGlobalPool;
  table["Softmax"] = &OnnxNode::convertSoftmax;
  table["LogSoftmax"] = &OnnxNode::convertSoftmax;
  table["LayerNormalization"] = &OnnxNode::convertLayerNorm;
  table["BatchNormalization"] = &OnnxNode::convertBatchNorm;
  table["Dropout"] = &OnnxNode::convertDropout;
  for (const char *name : {"RandomUniformLike", "RandomNormalLike",
                           "RandomUniform", "RandomNormal", "Bernoulli"})
    table[name] = &OnnxNode::convertRandom;
  table["SoftmaxCrossEntropyLoss"] = &OnnxNode::convertSoftmaxCrossEntropy;
  table["ReduceL1"] = &OnnxNode::convertReduce;
  table["ReduceL2"] = &OnnxNode::convertReduce;
  table["ReduceLogSum"] = &OnnxNode::convertReduce;
  table["ReduceLogSumExp"] = &OnnxNode::convertReduce;
  table["ReduceMax"] = &OnnxNode::convertReduce;
  table["ReduceMean"] = &OnnxNode::convertReduce;
  table["ReduceMin"] = &OnnxNode::convertReduce;
  table["ReduceSum"] = &OnnxNode::convertReduce;
  table["ReduceSumSquare"] = &OnnxNode::convertReduce;
}
