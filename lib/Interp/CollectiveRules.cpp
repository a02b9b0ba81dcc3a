//===- CollectiveRules.cpp - all_reduce, reduce_scatter, all_gather -------===//
//
// The rules of the collectives and rank_slice. Under interp::runRanks the
// ranks meet in its SimulatedMesh; without one the run is the only rank.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "SimulatedMesh.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include <algorithm>
#include <string>

using namespace mlir;
using namespace loom::interp;

namespace {

/// Every rank's `x` along `axis`, in coordinate order. Without a mesh the
/// run is the only rank, which is right for an axis of size 1 only.
FailureOr<std::vector<std::vector<double>>>
exchange(Operation *op, StringRef axis, const Tensor &x, Interpreter &interp) {
  const Options &o = interp.getOptions();
  if (!o.mesh) {
    int64_t n = loom::meshAxisSize(op, axis);
    if (n > 1)
      return op->emitError("loom-interp: axis '")
             << axis << "' has " << n << " ranks: run every rank "
             << "(loom-interp --ranks, interp::runRanks)";
    return std::vector<std::vector<double>>{x.data};
  }
  std::string what = op->getName().getStringRef().str() + " of " +
                     std::to_string(x.data.size()) + " elements";
  std::string error;
  auto all = o.mesh->exchange(o.rank, axis, what, x.data, error);
  if (!all)
    return op->emitError("loom-interp: rank ") << o.rank << ": " << error;
  return std::move(*all);
}

/// Combines `values` (equal sizes) elementwise, in order.
std::vector<double> combine(ArrayRef<std::vector<double>> values,
                            loom::CollectiveReduce reduce, size_t begin,
                            size_t count) {
  std::vector<double> r(values[0].begin() + begin,
                        values[0].begin() + begin + count);
  for (const std::vector<double> &v : values.drop_front())
    for (size_t i = 0; i < count; ++i)
      r[i] = reduce == loom::CollectiveReduce::Max ? nanMax(r[i], v[begin + i])
                                                   : r[i] + v[begin + i];
  if (reduce == loom::CollectiveReduce::Mean)
    for (double &e : r)
      e /= static_cast<double>(values.size());
  return r;
}

int64_t coordinateOf(Operation *op, StringRef axis, Interpreter &interp) {
  const Options &o = interp.getOptions();
  return o.mesh ? o.mesh->coordinate(o.rank, axis) : 0;
}

LogicalResult allReduceRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  auto ar = cast<loom::AllReduceOp>(op);
  auto all = exchange(op, ar.getAxis(), *in[0], interp);
  if (failed(all))
    return failure();
  out[0].data = combine(*all, ar.getReduce(), 0, in[0]->data.size());
  return success();
}

LogicalResult reduceScatterRule(Operation *op, ArrayRef<const Tensor *> in,
                                MutableArrayRef<Tensor> out,
                                Interpreter &interp) {
  auto rs = cast<loom::ReduceScatterOp>(op);
  auto all = exchange(op, rs.getAxis(), *in[0], interp);
  if (failed(all))
    return failure();
  size_t block = out[0].data.size();
  int64_t r = coordinateOf(op, rs.getAxis(), interp);
  out[0].data = combine(*all, rs.getReduce(), r * block, block);
  return success();
}

LogicalResult allGatherRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  auto all = exchange(op, cast<loom::AllGatherOp>(op).getAxis(), *in[0],
                      interp);
  if (failed(all))
    return failure();
  if (all->size() * in[0]->data.size() != out[0].data.size())
    return op->emitError("loom-interp: the mesh gives ")
           << all->size() << " ranks, the result type another number";
  out[0].data.clear();
  for (const std::vector<double> &v : *all)
    out[0].data.insert(out[0].data.end(), v.begin(), v.end());
  return success();
}

LogicalResult rankSliceRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &interp) {
  size_t block = out[0].data.size();
  int64_t r = coordinateOf(op, cast<loom::RankSliceOp>(op).getAxis(), interp);
  if ((r + 1) * block > in[0]->data.size())
    return op->emitError("loom-interp: rank_slice out of range");
  std::copy_n(in[0]->data.begin() + r * block, block, out[0].data.begin());
  return success();
}

} // namespace

void loom::interp::addCollectiveRules(llvm::StringMap<Rule> &t) {
  t["loom.all_reduce"] = allReduceRule;
  t["loom.reduce_scatter"] = reduceScatterRule;
  t["loom.all_gather"] = allGatherRule;
  t["loom.rank_slice"] = rankSliceRule;
}
