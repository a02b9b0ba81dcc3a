//===- CpuParallelLoops.cpp - Which parallel loops get threads ------------===//
//
// loom-cpu-parallel-loops (Passes.td): small or nested scf.parallel loops of
// CPU kernels become sequential scf.for nests before convert-scf-to-openmp
// gives the others an OpenMP team.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/CpuParallelLoops/CpuParallelLoops.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/Pass.h"

namespace loom {
#define GEN_PASS_DEF_LOOMCPUPARALLELLOOPSPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;

namespace {
/// Trip counts that are not static count as this many.
constexpr int64_t kUnknownTrips = 64;

int64_t tripCount(Value lb, Value ub, Value step) {
  std::optional<int64_t> l = getConstantIntValue(lb),
                         u = getConstantIntValue(ub),
                         s = getConstantIntValue(step);
  if (!l || !u || !s || *s <= 0)
    return kUnknownTrips;
  return *u > *l ? (*u - *l + *s - 1) / *s : 0;
}

int64_t saturatingMul(int64_t a, int64_t b) {
  constexpr int64_t kMax = int64_t(1) << 62;
  return (a != 0 && b > kMax / a) ? kMax : a * b;
}

/// Work of one execution of `block`: 1 for straight-line code, else the
/// largest product of trip counts down a nest of loops inside it.
int64_t blockWork(Block &block) {
  int64_t worst = 1;
  for (Operation &op : block) {
    int64_t trips = 1;
    if (auto f = dyn_cast<scf::ForOp>(op))
      trips = tripCount(f.getLowerBound(), f.getUpperBound(), f.getStep());
    else if (auto p = dyn_cast<scf::ParallelOp>(op))
      for (auto [l, u, s] : llvm::zip(p.getLowerBound(), p.getUpperBound(),
                                      p.getStep()))
        trips = saturatingMul(trips, tripCount(l, u, s));
    for (Region &r : op.getRegions())
      for (Block &b : r)
        worst = std::max(worst, saturatingMul(trips, blockWork(b)));
  }
  return worst;
}

/// Replaces `p` by an scf.parallel over its first `keep` dimensions (none:
/// no parallel loop) around an scf.for nest over the others, in the same
/// order. OpenMP collapses a multi-dimensional parallel loop into one
/// iteration space whose indices are recomputed by division at every
/// iteration, which keeps the innermost loop from vectorizing: only the
/// outer dimensions stay parallel.
void splitParallel(scf::ParallelOp p, unsigned keep) {
  OpBuilder b(p);
  auto buildInner = [&](OpBuilder &builder, ValueRange outerIvs) {
    scf::buildLoopNest(
        builder, p.getLoc(), p.getLowerBound().drop_front(keep),
        p.getUpperBound().drop_front(keep), p.getStep().drop_front(keep),
        [&](OpBuilder &nested, Location, ValueRange innerIvs) {
          IRMapping map;
          SmallVector<Value> ivs(outerIvs);
          ivs.append(innerIvs.begin(), innerIvs.end());
          map.map(p.getInductionVars(), ivs);
          for (Operation &op : p.getBody()->without_terminator())
            nested.clone(op, map);
        });
  };
  if (keep == 0) {
    buildInner(b, {});
  } else {
    scf::ParallelOp::create(
        b, p.getLoc(), p.getLowerBound().take_front(keep),
        p.getUpperBound().take_front(keep), p.getStep().take_front(keep),
        [&](OpBuilder &nested, Location, ValueRange ivs) {
          buildInner(nested, ivs);
          // (the body builder's scf.reduce terminator is added by create)
        });
  }
  p.erase();
}

/// Outer dimensions enough to give every core some iterations.
constexpr int64_t kMinParallelIterations = 64;

struct CpuParallelLoops
    : loom::impl::LoomCpuParallelLoopsPassBase<CpuParallelLoops> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<scf::ParallelOp, unsigned>> rewrites;
    // Post-order: inner loops first, so an outer loop rewritten later
    // clones the already rewritten body.
    getOperation().walk([&](scf::ParallelOp p) {
      int64_t work = 1, iterations = 1;
      unsigned keep = 0, dims = p.getNumLoops();
      Block &body = p.getRegion().front();
      for (auto [l, u, s] : llvm::zip(p.getLowerBound(), p.getUpperBound(),
                                      p.getStep())) {
        int64_t trips = tripCount(l, u, s);
        work = saturatingMul(work, trips);
        if (iterations < kMinParallelIterations) {
          iterations = saturatingMul(iterations, trips);
          ++keep;
        }
      }
      work = saturatingMul(work, blockWork(body));
      if (p.getNumResults() != 0)
        return; // reductions: left to the upstream lowering (sequential)
      if (work < minWork || p->getParentOfType<scf::ParallelOp>())
        rewrites.push_back({p, 0});
      else if (keep < dims)
        rewrites.push_back({p, keep});
    });
    for (auto [p, keep] : rewrites)
      splitParallel(p, keep);
  }
};
} // namespace
