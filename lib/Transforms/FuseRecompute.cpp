//===- FuseRecompute.cpp - Recompute cheap values instead of storing them -===//
//
// A training step's backward reads the forward's activations. Where an
// activation is a pointwise function of values the backward kernel reads
// anyway (the chain convolution -> batch norm -> hardswish, whose backward
// reads the convolution's output and the batch statistics), storing every
// link and reading each back costs a write and a read of a full tensor
// per link; recomputing the links in the backward kernel costs a few
// arithmetic instructions per element. PyTorch's min-cut partitioner makes
// the same trade (it recomputes pointwise ops by default).
//
//===----------------------------------------------------------------------===//

#include "FuseRecompute.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace loom {
namespace {

/// Ops safe to run twice: pointwise ones (not dropout, whose
/// recomputation would need its seed and stream kept) and broadcasts; with
/// `cheapOnly`, only those of an instruction or two per element (adds,
/// products, comparisons and selections: ReLU and hardswish and their
/// masks), not a division, a square root or a transcendental function (a
/// batch norm's normalization recomputed per element made ResNet-18's
/// backward slower: LLVM does not hoist the per-channel divisions).
bool recomputable(Operation *op, bool cheapOnly) {
  if (isa<DropoutOp>(op) || op->getNumRegions() != 0 ||
      op->getNumResults() != 1)
    return false;
  if (isa<BroadcastInDimOp>(op))
    return true;
  auto kind = dyn_cast<FusionKindOpInterface>(op);
  if (!kind || kind.getFusionKind() != FusionKind::Pointwise)
    return false;
  return !cheapOnly || isa<AddOp, SubOp, MulOp, NegOp, AbsOp, MaxOp, MinOp,
                           ReluOp, SelectOp, CompareOp, StopGradientOp>(op);
}

int64_t elementsOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

struct Recomputer {
  Recomputer(SmallVectorImpl<SmallVector<Operation *>> &groups,
             int64_t minElements, bool cheapOnly)
      : groups(groups), minElements(minElements), cheapOnly(cheapOnly) {}

  SmallVectorImpl<SmallVector<Operation *>> &groups;
  int64_t minElements;
  bool cheapOnly;
  bool recomputable(Operation *op) const {
    return loom::recomputable(op, cheapOnly);
  }
  llvm::DenseMap<Operation *, unsigned> groupOf;
  /// Per group: the values it reads from outside, and what was cloned into
  /// it (original value -> its copy).
  SmallVector<llvm::DenseSet<Value>> reads;
  SmallVector<IRMapping> clones;
  /// Per group: how many of its first ops are copies.
  SmallVector<size_t> numCopies;

  bool big(Value v) const { return elementsOf(v) >= minElements; }

  bool inGroup(Operation *op, unsigned g) const {
    auto it = groupOf.find(op);
    return it != groupOf.end() && it->second == g;
  }

  /// The ops to clone into group `g` to make `v` there (operands first),
  /// and the big values they read that `g` does not read yet. A producer
  /// that cannot be recomputed (or is no group's) ends the walk: its value
  /// is read as it is.
  void closure(Value v, unsigned g, llvm::SetVector<Operation *> &ops,
               llvm::SetVector<Value> &newBig) {
    if (clones[g].contains(v))
      return;
    Operation *def = v.getDefiningOp();
    if (!def || isa<ConstantOp>(def) || !recomputable(def) ||
        !groupOf.count(def)) {
      // A leaf: read as it is (constants are copied into every region).
      if (def && isa<ConstantOp>(def))
        return;
      if (big(v) && !reads[g].contains(v))
        newBig.insert(v);
      return;
    }
    if (ops.contains(def))
      return;
    for (Value operand : def->getOperands())
      closure(operand, g, ops, newBig);
    ops.insert(def);
  }

  /// Clones `ops`, the closure of `v` in group `g`, into `g`.
  void cloneInto(Value v, unsigned g, ArrayRef<Operation *> ops) {
    // Closure ops are in program order already (operands first), all
    // before the group's first op.
    llvm::SmallVector<Operation *> sorted(ops.begin(), ops.end());
    llvm::sort(sorted, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
    // After the copies made earlier (which these may read), before the
    // group's own ops.
    OpBuilder b(groups[g][numCopies[g]]);
    SmallVector<Operation *> added;
    for (Operation *op : sorted) {
      Operation *copy = b.clone(*op, clones[g]);
      added.push_back(copy);
      groupOf[copy] = g;
      for (Value operand : op->getOperands())
        if (!clones[g].contains(operand))
          reads[g].insert(operand);
    }
    groups[g].insert(groups[g].begin() + numCopies[g], added.begin(),
                     added.end());
    numCopies[g] += added.size();
    Value copy = clones[g].lookup(v);
    v.replaceUsesWithIf(copy, [&](OpOperand &use) {
      return inGroup(use.getOwner(), g);
    });
  }

  int64_t run() {
    reads.resize(groups.size());
    clones.resize(groups.size());
    numCopies.resize(groups.size());
    for (auto [g, group] : llvm::enumerate(groups))
      for (Operation *op : group)
        groupOf[op] = g;
    for (auto [g, group] : llvm::enumerate(groups))
      for (Operation *op : group)
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp(); !def || !inGroup(def, g))
            reads[g].insert(v);

    int64_t dropped = 0;
    // Forward order: a chain's first link is recomputed first, and later
    // links then start from its copy.
    for (unsigned gp = 0; gp < groups.size(); ++gp) {
      for (Operation *op : SmallVector<Operation *>(groups[gp])) {
        if (!recomputable(op) || !inGroup(op, gp))
          continue;
        Value v = op->getResult(0);
        if (!big(v))
          continue;
        llvm::SetVector<unsigned> readers;
        bool hostReader = false;
        for (Operation *user : v.getUsers()) {
          auto it = groupOf.find(user);
          if (it == groupOf.end())
            hostReader = true; // a library call, a view or the return
          else if (it->second != gp)
            readers.insert(it->second);
        }
        if (hostReader || readers.empty())
          continue;
        // Worth it when each reader reads at most one big tensor more.
        SmallVector<SmallVector<Operation *>> closures;
        bool worthIt = true;
        for (unsigned g : readers) {
          llvm::SetVector<Operation *> ops;
          llvm::SetVector<Value> newBig;
          closure(v, g, ops, newBig);
          worthIt &= newBig.size() <= 1;
          closures.emplace_back(ops.begin(), ops.end());
        }
        if (!worthIt)
          continue;
        for (auto [g, ops] : llvm::zip(readers, closures))
          cloneInto(v, g, ops);
        ++dropped;
      }
    }
    // Originals nothing reads any more (users first; again until none
    // is left, since a group's op may have been read only by a later
    // group's dead one).
    for (bool erased = true; erased;) {
      erased = false;
      for (auto &group : llvm::reverse(groups)) {
        SmallVector<Operation *> kept;
        for (Operation *op : llvm::reverse(group)) {
          if (op->use_empty() && recomputable(op)) {
            op->erase();
            erased = true;
            continue;
          }
          kept.push_back(op);
        }
        std::reverse(kept.begin(), kept.end());
        group = std::move(kept);
      }
    }
    llvm::erase_if(groups, [](const SmallVector<Operation *> &g) {
      return g.empty();
    });
    return dropped;
  }
};

} // namespace

int64_t recomputeAcrossGroups(
    SmallVectorImpl<SmallVector<Operation *>> &groups, int64_t minElements,
    bool cheapOnly) {
  Recomputer r{groups, minElements, cheapOnly};
  return r.run();
}

} // namespace loom
