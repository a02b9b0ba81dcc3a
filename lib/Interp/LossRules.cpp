//===- LossRules.cpp - cross_entropy and mse ------------------------------===//
//
// The rules of the losses: loom.cross_entropy (over axis 1, with an
// optional ignored label) and loom.mse, each with its reduction.
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

} // namespace

void loom::interp::addLossRules(llvm::StringMap<Rule> &t) {
  t["loom.cross_entropy"] = crossEntropyRule;
  t["loom.mse"] = mseRule;
}
