//===- LossRules.cpp - cross_entropy and mse ------------------------------===//
//
// The rules of the losses: loom.cross_entropy (over axis 1, with an
// optional ignored label) and loom.mse, each with its reduction; and the
// fused language-model head, loom.linear_cross_entropy and its gradient,
// by their definitions (the full logits, row by row, in double precision:
// the oracle the runtime's chunked kernel is checked against).
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
using namespace loom::interp;

namespace {

LogicalResult crossEntropyRule(Operation *op, ArrayRef<const Tensor *> in,
                               MutableArrayRef<Tensor> out, Interpreter &) {
  auto ce = cast<loom::CrossEntropyOp>(op);
  AxisSplit s = splitAt(in[0]->type.getShape(), 1);
  std::optional<int64_t> ignore;
  if (IntegerAttr attr = ce.getIgnoreIndexAttr())
    ignore = attr.getInt();
  const std::vector<double> &x = in[0]->data, &labels = in[1]->data;
  std::vector<double> losses(labels.size(), 0.0);
  int64_t counted = 0;
  for (int64_t n = 0; n < s.outer; ++n)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t k = n * s.inner + i;
      int64_t label = static_cast<int64_t>(labels[k]);
      if (ignore && label == *ignore)
        continue;
      if (label < 0 || label >= s.size) {
        SmallVector<int64_t> position;
        unravel(k, in[1]->type.getShape(), position);
        return op->emitError("label ")
               << label << " at position " << formatIndex(position)
               << " is out of range [0, " << s.size << ")";
      }
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < s.size; ++c)
        mx = nanMax(mx, x[s.at(n, c, i)]);
      double sum = 0;
      for (int64_t c = 0; c < s.size; ++c)
        sum += std::exp(x[s.at(n, c, i)] - mx);
      losses[k] = mx + std::log(sum) - x[s.at(n, label, i)];
      ++counted;
    }
  switch (ce.getReduction()) {
  case loom::Reduction::None:
    out[0].data = losses;
    break;
  case loom::Reduction::Sum:
  case loom::Reduction::Mean: {
    double total = 0;
    for (double l : losses)
      total += l;
    if (ce.getReduction() == loom::Reduction::Mean)
      total = counted == 0 ? 0.0 : total / counted;
    out[0].data[0] = total;
    break;
  }
  }
  return success();
}

LogicalResult mseRule(Operation *op, ArrayRef<const Tensor *> in,
                      MutableArrayRef<Tensor> out, Interpreter &) {
  auto mse = cast<loom::MseOp>(op);
  size_t n = in[0]->data.size();
  std::vector<double> sq(n);
  for (size_t i = 0; i < n; ++i) {
    double d = in[0]->data[i] - in[1]->data[i];
    sq[i] = d * d;
  }
  if (mse.getReduction() == loom::Reduction::None) {
    out[0].data = sq;
    return success();
  }
  double total = 0;
  for (double v : sq)
    total += v;
  if (mse.getReduction() == loom::Reduction::Mean)
    total /= static_cast<double>(n);
  out[0].data[0] = total;
  return success();
}

/// The shapes and attributes of a loom.linear_cross_entropy(_grad): rows N,
/// inputs C, classes V, and w's element (c, v) wherever its layout puts it.
struct Head {
  int64_t N, C, V;
  bool transposeW;
  /// x's element type, which the logits (and dlogits) are rounded to as
  /// the chain they stand for rounds its matmul's result (kept in double
  /// precision with --f64).
  mlir::Type element;
  bool keepF64;
  std::optional<int64_t> ignore;
  loom::Reduction reduction;
  int64_t wAt(int64_t c, int64_t v) const {
    return transposeW ? v * C + c : c * V + v;
  }
};

template <typename HeadOp>
Head headOf(HeadOp op, ArrayRef<const Tensor *> in, const Interpreter &interp) {
  Head h;
  h.element = in[0]->type.getElementType();
  h.keepF64 = interp.getOptions().f64;
  h.N = in[0]->type.getDimSize(0);
  h.C = in[0]->type.getDimSize(1);
  h.V = in[1]->type.getNumElements() / h.C;
  h.transposeW = op.getTransposeW();
  if (IntegerAttr attr = op.getIgnoreIndexAttr())
    h.ignore = attr.getInt();
  h.reduction = op.getReduction();
  return h;
}

/// Row i's logits, and their log-sum-exp.
double headLogits(const Head &h, ArrayRef<const Tensor *> in, int64_t i,
                  std::vector<double> &logits) {
  const std::vector<double> &x = in[0]->data, &w = in[1]->data;
  logits.assign(h.V, 0.0);
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t v = 0; v < h.V; ++v) {
    double z = 0;
    for (int64_t c = 0; c < h.C; ++c)
      z += x[i * h.C + c] * w[h.wAt(c, v)];
    z = roundTo(z, h.element, h.keepF64);
    logits[v] = z;
    mx = nanMax(mx, z);
  }
  double sum = 0;
  for (double z : logits)
    sum += std::exp(z - mx);
  return mx + std::log(sum);
}

/// Row i's label, or nullopt when it is ignored; an error when it is out of
/// range.
FailureOr<std::optional<int64_t>> headLabel(Operation *op, const Head &h,
                                            const Tensor &labels, int64_t i) {
  int64_t label = static_cast<int64_t>(labels.data[i]);
  if (h.ignore && label == *h.ignore)
    return std::optional<int64_t>();
  if (label < 0 || label >= h.V)
    return op->emitError("label ")
           << label << " of row " << i << " is out of range [0, " << h.V
           << ")";
  return std::optional<int64_t>(label);
}

LogicalResult linearCrossEntropyRule(Operation *op,
                                     ArrayRef<const Tensor *> in,
                                     MutableArrayRef<Tensor> out,
                                     Interpreter &interp) {
  Head h = headOf(cast<loom::LinearCrossEntropyOp>(op), in, interp);
  std::vector<double> losses(h.N, 0.0), logits;
  int64_t counted = 0;
  for (int64_t i = 0; i < h.N; ++i) {
    out[1].data[i] = headLogits(h, in, i, logits);
    FailureOr<std::optional<int64_t>> label = headLabel(op, h, *in[2], i);
    if (failed(label))
      return failure();
    if (!*label)
      continue;
    losses[i] = out[1].data[i] - logits[**label];
    ++counted;
  }
  if (h.reduction == loom::Reduction::None) {
    out[0].data = losses;
    return success();
  }
  double total = 0;
  for (double l : losses)
    total += l;
  if (h.reduction == loom::Reduction::Mean)
    total = counted == 0 ? 0.0 : total / counted; // as loom.cross_entropy
  out[0].data[0] = total;
  return success();
}

LogicalResult linearCrossEntropyGradRule(Operation *op,
                                         ArrayRef<const Tensor *> in,
                                         MutableArrayRef<Tensor> out,
                                         Interpreter &interp) {
  Head h = headOf(cast<loom::LinearCrossEntropyGradOp>(op), in, interp);
  const std::vector<double> &x = in[0]->data, &w = in[1]->data,
                            &dloss = in[4]->data;
  // The weight of each row's (softmax - onehot): the loss's cotangent,
  // divided by the count of labels for mean, 0 for an ignored label.
  std::vector<double> weight(h.N, 0.0);
  int64_t counted = 0;
  for (int64_t i = 0; i < h.N; ++i) {
    FailureOr<std::optional<int64_t>> label = headLabel(op, h, *in[2], i);
    if (failed(label))
      return failure();
    if (!*label)
      continue;
    weight[i] = h.reduction == loom::Reduction::None ? dloss[i] : dloss[0];
    ++counted;
  }
  if (h.reduction == loom::Reduction::Mean)
    for (double &wi : weight)
      wi = counted == 0 ? 0.0 : wi / counted;
  std::vector<double> logits;
  for (int64_t i = 0; i < h.N; ++i) {
    if (weight[i] == 0.0)
      continue;
    // The log-sum-exp is recomputed here rather than read from lse: the
    // reference does not trust the forward it checks.
    double lse = headLogits(h, in, i, logits);
    int64_t label = static_cast<int64_t>(in[2]->data[i]);
    for (int64_t v = 0; v < h.V; ++v) {
      double d = roundTo(weight[i] * (std::exp(logits[v] - lse) - (v == label)),
                         h.element, h.keepF64);
      for (int64_t c = 0; c < h.C; ++c) {
        out[0].data[i * h.C + c] += d * w[h.wAt(c, v)];
        out[1].data[h.wAt(c, v)] += d * x[i * h.C + c];
      }
    }
  }
  return success();
}

} // namespace

void loom::interp::addLossRules(llvm::StringMap<Rule> &t) {
  t["loom.cross_entropy"] = crossEntropyRule;
  t["loom.mse"] = mseRule;
  t["loom.linear_cross_entropy"] = linearCrossEntropyRule;
  t["loom.linear_cross_entropy_grad"] = linearCrossEntropyGradRule;
}
