//===- Remat.cpp - Recompute forward values to fit a memory budget --------===//
//
// `loom-remat` runs on each inlined entry point before `loom-fuse`. Its
// state is the function itself: every decision rewrites it (clones a value's
// ops before its first late reader, points the late readers at the clone,
// erases what is left dead), and after every decision a copy of the function
// is fused and planned by the real passes to measure its arena. Decisions
// come from an estimate of the live bytes at each op (RematModel below); the
// measurement decides when to stop. Because the decisions never look at the
// budget, the arena for a budget is that of the shortest prefix of one fixed
// sequence that fits, so a smaller budget never gets a larger arena.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <map>

#define DEBUG_TYPE "loom-remat"

namespace loom {
#define GEN_PASS_DEF_REMATPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

std::optional<int64_t> loom::parseByteSize(llvm::StringRef text) {
  text = text.trim();
  int64_t scale = 1;
  if (!text.empty()) {
    switch (llvm::toUpper(text.back())) {
    case 'K':
      scale = int64_t(1) << 10;
      break;
    case 'M':
      scale = int64_t(1) << 20;
      break;
    case 'G':
      scale = int64_t(1) << 30;
      break;
    default:
      break;
    }
    if (scale != 1)
      text = text.drop_back();
  }
  uint64_t value = 0;
  if (text.empty() || text.getAsInteger(10, value) ||
      value > uint64_t(INT64_MAX) / uint64_t(scale))
    return std::nullopt;
  return int64_t(value) * scale;
}

namespace {

constexpr llvm::StringLiteral kCheckpointAttr = "loom.checkpoint";
/// Values smaller than this are always kept, never recomputed.
constexpr int64_t kSmallBytes = 4096;

/// Bytes of a ranked tensor value (i1 takes a byte per element); 0 for
/// anything else.
int64_t bytesOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  int64_t bits = t.getElementTypeBitWidth();
  return t.getNumElements() * std::max<int64_t>(1, (bits + 7) / 8);
}

int64_t flopsOf(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  return cost ? cost.getFlopCount() : 0;
}

/// How reluctantly an op is recomputed: 0 pointwise and data movement, 1 row
/// reductions, 2 GEMMs, convolutions and opaque ops; -1 never (side
/// effects, regions, no results).
int tierOf(Operation *op) {
  if (op->getNumRegions() != 0 || op->getNumResults() == 0 ||
      !isMemoryEffectFree(op) || isa<func::ReturnOp>(op))
    return -1;
  if (op->getNumOperands() == 0 || isa<ReshapeOp>(op))
    return 0; // constants, views
  if (isLibraryCall(op))
    return 2;
  auto kind = dyn_cast<FusionKindOpInterface>(op);
  if (!kind)
    return -1;
  switch (kind.getFusionKind()) {
  case FusionKind::Pointwise:
  case FusionKind::Injective:
    return 0;
  case FusionKind::Reduction:
    return 1;
  default:
    return 2;
  }
}

/// The value whose bytes `v` shares: a reshape is a view of its operand.
Value rootOf(Value v) {
  while (auto reshape = v.getDefiningOp<ReshapeOp>())
    v = reshape->getOperand(0);
  return v;
}

/// One decision: recompute `root` (and the reshapes of it that are read
/// late) for its readers from `insertAt` on, by cloning `clones` (in
/// program order) before `insertAt`.
struct Decision {
  Value root;
  Operation *insertAt = nullptr;
  llvm::SetVector<Operation *> clones;
  /// Values read by the clones from outside them that the estimate says
  /// are not live at the peak (kept alive across it).
  llvm::SetVector<Value> extended;
  int64_t flops = 0, benefit = 0;
  int tier = 0;
};

/// The live-byte estimate of a function's body in program order.
struct RematModel {
  explicit RematModel(func::FuncOp func) : func(func) { update(); }

  func::FuncOp func;
  llvm::DenseMap<Operation *, int64_t> pos;
  SmallVector<Operation *> ops;
  /// Per root value: [definition, last reader of it or of its views].
  llvm::DenseMap<Value, std::pair<int64_t, int64_t>> range;
  int64_t peakPos = 0, peakBytes = 0;

  void update() {
    pos.clear(), ops.clear(), range.clear();
    Block &body = func.getBody().front();
    for (Operation &op : body)
      pos[&op] = ops.size(), ops.push_back(&op);
    auto note = [&](Value v, int64_t def) {
      auto &r = range[v];
      r = {def, def};
    };
    for (BlockArgument arg : body.getArguments())
      note(arg, -1);
    for (Operation *op : ops)
      for (Value r : op->getResults())
        if (!isa<ReshapeOp>(op))
          note(r, pos[op]);
    for (Operation *op : ops)
      for (Value v : op->getOperands()) {
        auto it = range.find(rootOf(v));
        if (it != range.end())
          it->second.second = std::max(it->second.second, pos[op]);
      }
    std::vector<int64_t> delta(ops.size() + 2, 0);
    for (auto &[v, r] : range) {
      int64_t b = bytesOf(v);
      delta[r.first + 1] += b;
      delta[r.second + 2] -= b;
    }
    peakBytes = 0, peakPos = 0;
    int64_t live = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      live += delta[i + 1] + (i == 0 ? delta[0] : 0);
      if (live > peakBytes)
        peakBytes = live, peakPos = i;
    }
  }

  bool liveAt(Value v, int64_t at) const {
    auto it = range.find(rootOf(v));
    return it != range.end() && it->second.first <= at &&
           it->second.second >= at;
  }

  /// The readers of `root` and of its views past `after`, and whether one
  /// reads it at `after` itself.
  void lateUses(Value root, int64_t after, SmallVectorImpl<OpOperand *> &late,
                bool &readAt) const {
    SmallVector<Value> worklist{root};
    while (!worklist.empty()) {
      Value v = worklist.pop_back_val();
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        int64_t p = pos.lookup(user);
        if (isa<ReshapeOp>(user))
          worklist.push_back(user->getResult(0));
        if (p == after)
          readAt = true;
        else if (p > after && !isa<ReshapeOp>(user))
          late.push_back(&use);
      }
    }
  }

  /// What recomputing `root` before its first reader past `at` takes
  /// (none when an op at `at` reads it, unless `readAtOk`). An operand that
  /// is not live at `at` is recomputed too when `chain` accepts its op,
  /// else kept alive.
  std::optional<Decision> plan(Value root, int64_t at,
                               llvm::function_ref<bool(Operation *)> chain,
                               bool readAtOk = false) const {
    Operation *def = root.getDefiningOp();
    if (!def || tierOf(def) < 0 || bytesOf(root) < kSmallBytes)
      return std::nullopt;
    SmallVector<OpOperand *> late;
    bool readAt = false;
    lateUses(root, at, late, readAt);
    if (late.empty() || (readAt && !readAtOk))
      return std::nullopt;
    for (OpOperand *use : late)
      if (isa<func::ReturnOp>(use->getOwner()))
        return std::nullopt;
    Decision d;
    d.root = root;
    d.insertAt = late.front()->getOwner();
    for (OpOperand *use : late)
      if (pos.lookup(use->getOwner()) < pos.lookup(d.insertAt))
        d.insertAt = use->getOwner();
    // The ops between root and the late readers (views), then the chain.
    SmallVector<Operation *> worklist{def};
    for (OpOperand *use : late)
      for (Operation *v = use->get().getDefiningOp(); v && v != def;
           v = v->getOperand(0).getDefiningOp())
        worklist.push_back(v);
    constexpr size_t kMaxChain = 64;
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!d.clones.insert(op))
        continue;
      d.tier = std::max(d.tier, tierOf(op));
      d.flops += flopsOf(op);
      for (Value operand : op->getOperands()) {
        Operation *src = operand.getDefiningOp();
        if (!src || d.clones.contains(src))
          continue;
        // Read where it is still live anyway, or kept live through the
        // peak already: read the original.
        if (liveAt(operand, pos.lookup(d.insertAt)) || liveAt(operand, at))
          continue;
        // Small values (scalars: the optimizer's bias corrections) are
        // kept: they cost nothing to keep, and a copy fused into a loop
        // over a big tensor may round differently (a vector pow).
        if (bytesOf(operand) >= kSmallBytes && tierOf(src) >= 0 &&
            chain(src) && d.clones.size() < kMaxChain) {
          worklist.push_back(src);
          continue;
        }
        d.extended.insert(rootOf(operand));
      }
    }
    d.benefit = bytesOf(root);
    for (Value v : d.extended)
      d.benefit -= bytesOf(v);
    return d;
  }
};

/// Clones `d.clones` before `d.insertAt` and points the late readers at the
/// copies; counts the recomputed ops by name in `cloned`; returns the number
/// of clones.
int64_t apply(const Decision &d, const RematModel &model,
              std::map<std::string, int64_t> &cloned) {
  SmallVector<OpOperand *> late;
  bool readAt = false;
  model.lateUses(d.root, model.pos.lookup(d.insertAt) - 1, late, readAt);
  SmallVector<Operation *> order(d.clones.begin(), d.clones.end());
  llvm::sort(order, [&](Operation *a, Operation *b) {
    return model.pos.lookup(a) < model.pos.lookup(b);
  });
  OpBuilder b(d.insertAt);
  IRMapping map;
  for (Operation *op : order)
    b.clone(*op, map);
  for (OpOperand *use : late)
    if (Value copy = map.lookupOrNull(use->get()))
      use->set(copy);
  // The originals no longer read are erased, latest first: those ops were
  // moved, not recomputed. Constants are free and not counted.
  for (Operation *op : llvm::reverse(order)) {
    if (op->use_empty() && isMemoryEffectFree(op))
      op->erase();
    else if (op->getNumOperands() != 0)
      ++cloned[op->getName().getStringRef().drop_front(5).str()];
  }
  return order.size();
}

/// Whether `func` computes gradients: the joint forward and backward of
/// loom-autodiff (gradient results) or the training step (optimizer state).
bool computesGradients(func::FuncOp func) {
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (func.getResultAttr(i, kGradAttr))
      return true;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (func.getArgAttr(i, kOptStateAttr))
      return true;
  return false;
}

/// The forward of a function that computes gradients: the ops its first
/// result (the loss) is computed from.
llvm::DenseSet<Operation *> forwardOf(func::FuncOp func) {
  llvm::DenseSet<Operation *> forward;
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() == 0)
    return forward;
  SmallVector<Operation *> worklist;
  if (Operation *def = ret.getOperand(0).getDefiningOp())
    worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!forward.insert(op).second)
      continue;
    for (Value v : op->getOperands())
      if (Operation *d = v.getDefiningOp())
        worklist.push_back(d);
  }
  return forward;
}

struct RematPass : public loom::impl::RematPassBase<RematPass> {
  using RematPassBase::RematPassBase;

  /// The arena loom-fuse and loom-plan-memory give a copy of `func`, or
  /// nullopt (the error is reported).
  std::optional<int64_t> plannedArena(func::FuncOp func) {
    ++numTrials;
    MLIRContext *ctx = func.getContext();
    OwningOpRef<ModuleOp> copy = ModuleOp::create(func.getLoc());
    OpBuilder b(ctx);
    b.setInsertionPointToEnd(copy->getBody());
    auto clone = cast<func::FuncOp>(b.clone(*func));
    PassManager pm(ctx, ModuleOp::getOperationName(),
                   OpPassManager::Nesting::Explicit);
    FusePassOptions fuse;
    fuse.recomputeMinElements = fuseRecomputeMinElements;
    fuse.recomputeOps = fuseRecomputeOps;
    pm.addPass(createFusePass(fuse));
    pm.addPass(createPlanMemoryPass());
    std::string errors;
    {
      // The trial's remarks are not the user's; its errors are.
      ScopedDiagnosticHandler quiet(ctx, [&](Diagnostic &diag) {
        if (diag.getSeverity() == DiagnosticSeverity::Error)
          errors += diag.str() + "; ";
        return success();
      });
      if (failed(pm.run(*copy))) {
        mlir::emitError(func.getLoc(),
                        "loom-remat: fusing and planning a copy of @")
            << func.getName() << " failed: " << errors;
        return std::nullopt;
      }
    }
    auto bytes = clone->getAttrOfType<IntegerAttr>("loom.arena_bytes");
    if (!bytes) {
      mlir::emitError(func.getLoc(),
                      "loom-remat: loom-plan-memory wrote no arena size");
      return std::nullopt;
    }
    return bytes.getInt();
  }

  /// Recomputes `result` of a forward op for the backward: cloned before
  /// its first reader that is not in `forward`, with what `chain` accepts.
  /// Returns whether it was.
  bool recomputeInBackward(func::FuncOp func, Value result,
                           llvm::function_ref<bool(Operation *)> chain,
                           std::map<std::string, int64_t> &cloned) {
    // Taken afresh: earlier decisions erased ops (moved ones), whose
    // addresses new ops may reuse.
    llvm::DenseSet<Operation *> forward = forwardOf(func);
    RematModel model(func);
    // The last forward reader: the backward's readers come after it.
    int64_t lastForward = model.pos.lookup(result.getDefiningOp());
    bool backward = false;
    for (Operation *user : result.getUsers()) {
      if (forward.contains(user))
        lastForward = std::max(lastForward, model.pos.lookup(user));
      else
        backward = true;
    }
    if (!backward)
      return false;
    std::optional<Decision> d =
        model.plan(result, lastForward, chain, /*readAtOk=*/true);
    if (!d)
      return false;
    (void)apply(*d, model, cloned);
    return true;
  }

  /// Recomputes the hand-marked values in the backward (first reader that
  /// is not part of the forward). Returns the number of values.
  int64_t applyMarks(func::FuncOp func, const llvm::Regex *pattern,
                     std::map<std::string, int64_t> &cloned) {
    // A mark is on the op itself (attribute, location), so the copies of a
    // marked op are marked too.
    auto isMarked = [&](Operation *op) {
      return tierOf(op) >= 0 &&
             (op->hasAttr(kCheckpointAttr) ||
              (pattern && pattern->match(nodeName(op->getLoc()))));
    };
    llvm::DenseSet<Operation *> forward = forwardOf(func);
    SmallVector<Operation *> order;
    for (Operation &op : func.getBody().front())
      if (forward.contains(&op) && isMarked(&op))
        order.push_back(&op);
    // Inside the marked region, anything is recomputed; outside it, only
    // pointwise ops and row reductions. Program order: a value's chain
    // reaches back only, so the later marked ops are still there.
    auto chain = [&](Operation *src) {
      return isMarked(src) || tierOf(src) <= 1;
    };
    int64_t count = 0;
    for (Operation *op : order)
      for (Value result : op->getResults())
        count += recomputeInBackward(func, result, chain, cloned);
    return count;
  }

  /// The forward values of `func` (of 4 KiB or more, not returned) that
  /// its backward reads, as (op index, result number) in program order.
  static SmallVector<std::pair<unsigned, unsigned>>
  storedForwardValues(func::FuncOp func) {
    llvm::DenseSet<Operation *> forward = forwardOf(func);
    SmallVector<std::pair<unsigned, unsigned>> values;
    for (auto [i, op] : llvm::enumerate(func.getBody().front())) {
      if (!forward.contains(&op) || tierOf(&op) < 0)
        continue;
      for (OpResult r : op.getResults()) {
        bool late = false, returned = false;
        for (Operation *user : r.getUsers()) {
          late |= !forward.contains(user);
          returned |= isa<func::ReturnOp>(user);
        }
        if (late && !returned && bytesOf(r) >= kSmallBytes)
          values.push_back({unsigned(i), r.getResultNumber()});
      }
    }
    return values;
  }

  /// Recomputes the values of `subset` (bits over `values`, which index
  /// `func` as it is now) before their first backward readers.
  void recomputeSubset(func::FuncOp func,
                       ArrayRef<std::pair<unsigned, unsigned>> values,
                       uint64_t subset,
                       std::map<std::string, int64_t> &cloned) {
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      ops.push_back(&op);
    // Earliest first: a value's chain reaches back only, so the ops of the
    // later values are still there.
    for (auto [bit, v] : llvm::enumerate(values))
      if (subset & (uint64_t(1) << bit))
        (void)recomputeInBackward(
            func, ops[v.first]->getResult(v.second),
            [](Operation *) { return true; }, cloned);
  }

  /// Every subset of the stored forward values, each recomputed before its
  /// first backward reader, when there are at most `exhaustive` of them:
  /// the one with the least recomputation within `budget` (the smallest
  /// arena without one), or nullopt. What the greedy search is measured
  /// against (bench/remat_sweep.py --exhaustive); recorded in `info`.
  FailureOr<std::optional<uint64_t>>
  searchSubsets(func::FuncOp func, std::optional<int64_t> budget,
                SmallVectorImpl<NamedAttribute> &info) {
    SmallVector<std::pair<unsigned, unsigned>> values =
        storedForwardValues(func);
    Builder b(func.getContext());
    info.push_back(b.getNamedAttr("exhaustive_candidates",
                                  b.getI64IntegerAttr(values.size())));
    if (values.empty() || int64_t(values.size()) > exhaustive)
      return std::optional<uint64_t>();
    int64_t stepFlops = 0;
    func.walk([&](Operation *op) { stepFlops += flopsOf(op); });
    std::optional<uint64_t> best;
    int64_t bestArena = 0, bestFlops = 0;
    for (uint64_t subset = 0; subset < (uint64_t(1) << values.size());
         ++subset) {
      OwningOpRef<func::FuncOp> copy = cast<func::FuncOp>(func->clone());
      std::map<std::string, int64_t> ignored;
      recomputeSubset(*copy, values, subset, ignored);
      std::optional<int64_t> arena = plannedArena(*copy);
      if (!arena)
        return failure();
      int64_t flops = -stepFlops;
      copy->walk([&](Operation *op) { flops += flopsOf(op); });
      if (budget && *arena > *budget)
        continue;
      // Fewest FLOPs within a budget (then the smaller arena); the
      // smallest arena without one (then the fewer FLOPs). Ties keep the
      // first subset, so a smaller budget never gets a larger arena.
      std::pair<int64_t, int64_t> key =
          budget ? std::make_pair(flops, *arena) : std::make_pair(*arena, flops);
      std::pair<int64_t, int64_t> bestKey =
          budget ? std::make_pair(bestFlops, bestArena)
                 : std::make_pair(bestArena, bestFlops);
      if (!best || key < bestKey)
        best = subset, bestArena = *arena, bestFlops = flops;
    }
    if (best) {
      info.push_back(b.getNamedAttr("exhaustive_arena",
                                    b.getI64IntegerAttr(bestArena)));
      info.push_back(b.getNamedAttr("exhaustive_recompute_flops",
                                    b.getI64IntegerAttr(bestFlops)));
    }
    return best;
  }

  /// The best decision at the estimate's peak, applied; nullopt when no
  /// value live across the peak can be recomputed with a saving.
  std::optional<Decision> decide(func::FuncOp func,
                                 std::map<std::string, int64_t> &cloned) {
    RematModel model(func);
    auto better = [&](const Decision &a, const Decision &b) {
      if (a.tier != b.tier)
        return a.tier < b.tier;
      // Fewer FLOPs per byte saved first (cross-multiplied).
      __int128 lhs = (__int128)a.flops * b.benefit;
      __int128 rhs = (__int128)b.flops * a.benefit;
      if (lhs != rhs)
        return lhs < rhs;
      if (a.benefit != b.benefit)
        return a.benefit > b.benefit;
      // Then program order, so that the choice never depends on where
      // values happen to live in memory (the candidates come from a map).
      auto place = [&](Value v) {
        return std::make_pair(model.pos.lookup(v.getDefiningOp()),
                              cast<OpResult>(v).getResultNumber());
      };
      return place(a.root) < place(b.root);
    };
    std::optional<Decision> pick;
    for (auto &[root, r] : model.range) {
      if (!(r.first < model.peakPos && r.second > model.peakPos))
        continue;
      std::optional<Decision> d =
          model.plan(root, model.peakPos, [](Operation *) { return true; });
      if (d && d->benefit > 0 && (!pick || better(*d, *pick)))
        pick = std::move(d);
    }
    if (pick) {
      (void)apply(*pick, model, cloned);
    }
    return pick;
  }

  LogicalResult runOn(func::FuncOp func, std::optional<int64_t> budget,
                      const llvm::Regex *pattern) {
    if (func.isExternal() || !llvm::hasSingleElement(func.getBody()))
      return success();
    int64_t stepFlops = 0;
    func.walk([&](Operation *op) { stepFlops += flopsOf(op); });
    std::optional<int64_t> before = plannedArena(func);
    if (!before)
      return failure();
    SmallVector<NamedAttribute> exhaustiveInfo;
    std::optional<uint64_t> bestSubset;
    OwningOpRef<func::FuncOp> unmarked;
    if (exhaustive > 0 && computesGradients(func)) {
      FailureOr<std::optional<uint64_t>> found =
          searchSubsets(func, budget, exhaustiveInfo);
      if (failed(found))
        return failure();
      bestSubset = *found;
      unmarked = cast<func::FuncOp>(func->clone());
    }
    std::map<std::string, int64_t> marked, searched;
    bool marks = computesGradients(func) &&
                 applyMarks(func, pattern, marked) > 0;
    std::optional<int64_t> arena = marks ? plannedArena(func) : before;
    if (!arena)
      return failure();
    bool full = mode == "full";
    bool search = full || (budget && *arena > *budget);
    int64_t decisions = 0, best = *arena, bestAt = 0;
    // For `full`: the function before the search, to replay the decisions
    // up to the smallest arena reached.
    OwningOpRef<func::FuncOp> start;
    if (full)
      start = cast<func::FuncOp>(func->clone());
    const int64_t maxDecisions =
        4 * int64_t(func.getBody().front().getOperations().size());
    while (search && decisions < maxDecisions) {
      if (!decide(func, searched))
        break;
      ++decisions;
      arena = plannedArena(func);
      if (!arena)
        return failure();
      if (*arena < best)
        best = *arena, bestAt = decisions;
      if (!full && *arena <= *budget)
        break;
    }
    if (full && bestAt < decisions) {
      func.getBody().takeBody(start->getBody());
      searched.clear();
      for (int64_t i = 0; i < bestAt; ++i)
        (void)decide(func, searched);
      arena = best;
    }
    // Where the greedy search cannot meet the budget and a subset of the
    // stored values can (small graphs, with `exhaustive`), that subset.
    if (budget && *arena > *budget && bestSubset) {
      func.getBody().takeBody(unmarked->getBody());
      marked.clear(), searched.clear();
      recomputeSubset(func, storedForwardValues(func), *bestSubset, searched);
      arena = plannedArena(func);
      if (!arena)
        return failure();
    }
    if (budget && *arena > *budget)
      return mlir::emitError(func.getLoc(), "loom-remat: @")
             << func.getName() << " needs an arena of at least " << best
             << " bytes (the smallest reached by recomputing forward values; "
                "it is "
             << *before << " bytes without), more than the budget of "
             << *budget << " bytes";
    int64_t flopsAfter = 0;
    func.walk([&](Operation *op) { flopsAfter += flopsOf(op); });
    for (auto &[name, n] : searched)
      marked[name] += n;
    Builder b(func.getContext());
    SmallVector<NamedAttribute> ops;
    for (auto &[name, n] : marked)
      ops.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(n)));
    SmallVector<NamedAttribute> info{
        b.getNamedAttr("arena_before", b.getI64IntegerAttr(*before)),
        b.getNamedAttr("arena", b.getI64IntegerAttr(*arena)),
        b.getNamedAttr("budget", b.getI64IntegerAttr(budget ? *budget : 0)),
        b.getNamedAttr("step_flops", b.getI64IntegerAttr(stepFlops)),
        b.getNamedAttr("recompute_flops",
                       b.getI64IntegerAttr(flopsAfter - stepFlops)),
        b.getNamedAttr("recomputed", b.getDictionaryAttr(ops))};
    info.append(exhaustiveInfo);
    func->setAttr("loom.remat", b.getDictionaryAttr(info));
    for (auto &[name, n] : marked)
      numClones += n;
    return success();
  }

  void runOnOperation() override {
    if (mode != "none" && mode != "auto" && mode != "full") {
      getOperation().emitError("loom-remat: unknown mode '")
          << mode << "' (expected none, auto or full)";
      return signalPassFailure();
    }
    std::optional<int64_t> budget;
    if (!memoryBudget.empty()) {
      budget = parseByteSize(memoryBudget);
      if (!budget || *budget <= 0) {
        getOperation().emitError("loom-remat: memory-budget '")
            << memoryBudget
            << "' is not a positive byte count (digits with an optional K, "
               "M or G suffix)";
        return signalPassFailure();
      }
    }
    std::optional<llvm::Regex> pattern;
    if (!checkpoint.empty()) {
      pattern.emplace(checkpoint);
      std::string error;
      if (!pattern->isValid(error)) {
        getOperation().emitError("loom-remat: checkpoint '")
            << checkpoint << "' is not a regular expression: " << error;
        return signalPassFailure();
      }
    }
    if (mode == "none")
      return;
    // Nothing asked (no budget, no marks, no pattern): leave the IR as is.
    bool anyMark = false;
    getOperation().walk([&](Operation *op) {
      anyMark |= op->hasAttr(kCheckpointAttr);
    });
    if (mode == "auto" && !budget && !pattern && !anyMark && exhaustive == 0)
      return;
    for (auto func : llvm::make_early_inc_range(
             getOperation().getOps<func::FuncOp>()))
      if (failed(runOn(func, budget, pattern ? &*pattern : nullptr)))
        return signalPassFailure();
  }
};

} // namespace
