//===- ReductionRules.cpp - Reductions over a set of dims -----------------===//
//
// The rules of reduce_sum, reduce_max and reduce_min (NaN-propagating), and
// reduce_mean.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace loom::interp;

namespace {

enum class ReduceKind { Sum, Max, Min, Mean };

Rule reduce(ReduceKind kind) {
  return [kind](Operation *op, ArrayRef<const Tensor *> in,
                MutableArrayRef<Tensor> out, Interpreter &) -> LogicalResult {
    auto dims = op->getAttrOfType<DenseI64ArrayAttr>("dims").asArrayRef();
    ArrayRef<int64_t> xs = in[0]->type.getShape();
    SmallVector<bool> reduced(xs.size(), false);
    int64_t count = 1;
    for (int64_t d : dims) {
      reduced[d] = true;
      count *= xs[d];
    }
    // The result's shape with reduced dims kept as size 1, whatever
    // keep_dims says: both layouts are the same row-major order.
    SmallVector<int64_t> keptShape(xs);
    for (int64_t d : dims)
      keptShape[d] = 1;
    SmallVector<int64_t> keptStrides = stridesOf(keptShape);
    double init = 0;
    if (kind == ReduceKind::Max)
      init = -std::numeric_limits<double>::infinity();
    if (kind == ReduceKind::Min)
      init = std::numeric_limits<double>::infinity();
    std::vector<double> &y = out[0].data;
    std::fill(y.begin(), y.end(), init);
    SmallVector<int64_t> index;
    for (size_t i = 0; i < in[0]->data.size(); ++i) {
      unravel(i, xs, index);
      int64_t o = 0;
      for (size_t d = 0; d < xs.size(); ++d)
        o += (reduced[d] ? 0 : index[d]) * keptStrides[d];
      double v = in[0]->data[i];
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
        y[o] += v;
        break;
      case ReduceKind::Max:
        y[o] = nanMax(y[o], v);
        break;
      case ReduceKind::Min:
        y[o] = nanMin(y[o], v);
        break;
      }
    }
    if (kind == ReduceKind::Mean)
      for (double &v : y)
        v = count == 0 ? std::numeric_limits<double>::quiet_NaN() : v / count;
    return success();
  };
}

} // namespace

void loom::interp::addReductionRules(llvm::StringMap<Rule> &t) {
  t["loom.reduce_sum"] = reduce(ReduceKind::Sum);
  t["loom.reduce_max"] = reduce(ReduceKind::Max);
  t["loom.reduce_min"] = reduce(ReduceKind::Min);
  t["loom.reduce_mean"] = reduce(ReduceKind::Mean);
}
