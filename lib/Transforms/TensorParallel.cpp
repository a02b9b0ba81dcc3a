//===- TensorParallel.cpp - Megatron-style tensor parallelism -------------===//
//
// loom-tensor-parallel: chooses which linear layers of @forward to split
// over the "tp" ranks, propagates the split through the ops between them,
// and rewrites every entry point that takes the parameters into the
// program one rank runs (see TensorParallel.h and the pass's description).
//
// A value is whole on every rank, or split along one dimension into n
// blocks (optionally within G groups). Propagation walks the ops in order
// with one rule per op kind (the table in `Propagation::visit`); an op
// with a split operand and no rule that keeps it split makes the choice
// under trial fail. Choices are tried greedily, one column-parallel layer
// at a time, and kept when the whole function propagates.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"
#include "TensorParallelRules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Regex.h"

#include <set>

namespace loom {
#define GEN_PASS_DEF_TENSORPARALLELPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

using namespace loom::tensor_parallel;

namespace {

/// This rank's block of the ids 0..total-1 (element type `idx`): `local`
/// consecutive ids, block r on tp rank r.
Value rankIds(OpBuilder &b, Location loc, Type idx, int64_t total,
              int64_t local) {
  SmallVector<APInt> iota;
  for (int64_t v = 0; v < total; ++v)
    iota.push_back(APInt(idx.getIntOrFloatBitWidth(), v));
  Value all = ConstantOp::create(
      b, loc,
      cast<ElementsAttr>(DenseElementsAttr::get(
          RankedTensorType::get({total}, idx), iota)));
  return RankSliceOp::create(b, loc, RankedTensorType::get({local}, idx), all,
                             kTensorParallelAxis);
}

/// The vocabulary-parallel form of `ce`, whose logits (now [N, C / n]) are
/// this rank's block of the classes: log-sum-exp and the label's logit
/// each summed over the ranks (Megatron's parallel cross-entropy). The
/// maximum that steadies the exponentials is the ranks' maximum, behind a
/// stop_gradient (any constant per row gives the same loss).
Value vocabParallelCrossEntropy(OpBuilder &b, CrossEntropyOp ce,
                                int64_t classes) {
  Location loc = ce.getLoc();
  Value x = ce.getLogits(), labels = ce.getLabels();
  auto xt = cast<RankedTensorType>(x.getType());
  auto lt = cast<RankedTensorType>(labels.getType());
  Type f = xt.getElementType(), idx = lt.getElementType();
  int64_t rows = xt.getDimSize(0), local = xt.getDimSize(1);
  auto rowT = RankedTensorType::get({rows}, f);
  auto rowsI1 = RankedTensorType::get({rows}, b.getI1Type());
  auto gridI1 = RankedTensorType::get({rows, local}, b.getI1Type());
  auto scalar = RankedTensorType::get({}, f);
  StringRef axis = kTensorParallelAxis;
  auto dims = [&](ArrayRef<int64_t> d) { return b.getDenseI64ArrayAttr(d); };
  auto splat = [&](RankedTensorType t, double v) -> Value {
    return ConstantOp::create(
        b, loc, cast<ElementsAttr>(DenseElementsAttr::get(
                    t, b.getFloatAttr(t.getElementType(), v))));
  };
  auto rowToGrid = [&](Value v) -> Value {
    auto t = cast<RankedTensorType>(v.getType());
    return BroadcastInDimOp::create(
        b, loc, RankedTensorType::get({rows, local}, t.getElementType()), v,
        ArrayRef<int64_t>{0});
  };
  Value localMax = ReduceMaxOp::create(b, loc, rowT, x, dims({1}));
  Value max = StopGradientOp::create(
      b, loc,
      AllReduceOp::create(b, loc, rowT, localMax, axis, CollectiveReduce::Max)
          .getResult());
  Value z = SubOp::create(b, loc, x, rowToGrid(max));
  Value sumExp = AllReduceOp::create(
      b, loc, rowT,
      ReduceSumOp::create(b, loc, rowT, ExpOp::create(b, loc, z), dims({1})),
      axis, CollectiveReduce::Sum);
  Value lse = LogOp::create(b, loc, sumExp);
  // This rank's class ids: its block of 0..C-1.
  Value ids = rankIds(b, loc, idx, classes, local);
  Value hit = CompareOp::create(
      b, loc, gridI1, ComparePredicate::EQ, rowToGrid(labels),
      BroadcastInDimOp::create(b, loc, RankedTensorType::get({rows, local}, idx),
                               ids, ArrayRef<int64_t>{1}));
  Value picked = AllReduceOp::create(
      b, loc, rowT,
      ReduceSumOp::create(
          b, loc, rowT,
          SelectOp::create(b, loc, hit, z,
                           splat(RankedTensorType::get({rows, local}, f), 0)),
          dims({0 + 1})),
      axis, CollectiveReduce::Sum);
  Value loss = SubOp::create(b, loc, lse, picked);
  Value count = splat(scalar, static_cast<double>(rows));
  if (std::optional<int64_t> ignore = ce.getIgnoreIndex()) {
    Value ignored = ConstantOp::create(
        b, loc, cast<ElementsAttr>(DenseElementsAttr::get(
                    lt, b.getIntegerAttr(idx, *ignore))));
    Value valid = CompareOp::create(b, loc, rowsI1, ComparePredicate::NE,
                                    labels, ignored);
    loss = SelectOp::create(b, loc, valid, loss, splat(rowT, 0));
    count = ReduceSumOp::create(b, loc, scalar,
                                CastOp::create(b, loc, rowT, valid),
                                dims({0}));
  }
  Value total = ReduceSumOp::create(b, loc, scalar, loss, dims({0}));
  if (ce.getReduction() == Reduction::Sum)
    return total;
  // The mean over the labels counted (0 when none is).
  return DivOp::create(b, loc, total, MaxOp::create(b, loc, count, splat(scalar, 1)));
}

/// The vocabulary-parallel form of `g`, whose table (now [V / n, C]) is this
/// rank's block of rows: the ids in the block looked up, the others give
/// zero rows, and the ranks' rows are summed (Megatron's parallel
/// embedding).
Value vocabParallelEmbedding(OpBuilder &b, GatherOp g, int64_t vocab) {
  Location loc = g.getLoc();
  Value ids = g.getIndices();
  auto it = cast<RankedTensorType>(ids.getType());
  auto rt = cast<RankedTensorType>(g.getType());
  Type idx = it.getElementType();
  int64_t local = cast<RankedTensorType>(g.getTable().getType()).getDimSize(0);
  auto i1 = RankedTensorType::get(it.getShape(), b.getI1Type());
  auto idConst = [&](int64_t v) -> Value {
    return ConstantOp::create(b, loc,
                              cast<ElementsAttr>(DenseElementsAttr::get(
                                  it, b.getIntegerAttr(idx, v))));
  };
  // Negative ids count from the end, as gather's do.
  Value zero = idConst(0);
  Value negative =
      CompareOp::create(b, loc, i1, ComparePredicate::LT, ids, zero);
  ids = SelectOp::create(b, loc, negative,
                         AddOp::create(b, loc, ids, idConst(vocab)), ids);
  // This rank's first id: the first of its block of 0..V-1.
  Value block = rankIds(b, loc, idx, vocab, local);
  Value first = ReshapeOp::create(
      b, loc, RankedTensorType::get({}, idx),
      SliceOp::create(b, loc, RankedTensorType::get({1}, idx), block,
                      b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({1}),
                      b.getDenseI64ArrayAttr({1})));
  Value rel = SubOp::create(
      b, loc, ids,
      BroadcastInDimOp::create(b, loc, it, first, ArrayRef<int64_t>{}));
  Value here = SelectOp::create(
      b, loc, CompareOp::create(b, loc, i1, ComparePredicate::GE, rel, zero),
      CompareOp::create(b, loc, i1, ComparePredicate::LT, rel,
                        idConst(local)),
      ConstantOp::create(b, loc,
                         cast<ElementsAttr>(DenseElementsAttr::get(
                             i1, b.getBoolAttr(false)))));
  Value rows = GatherOp::create(b, loc, rt, g.getTable(),
                                SelectOp::create(b, loc, here, rel, zero),
                                g.getAxisAttr());
  SmallVector<int64_t> idDims;
  for (int64_t d = 0; d < it.getRank(); ++d)
    idDims.push_back(d);
  Value mask = BroadcastInDimOp::create(
      b, loc, RankedTensorType::get(rt.getShape(), b.getI1Type()), here,
      idDims);
  Value zeros = ConstantOp::create(
      b, loc, cast<ElementsAttr>(DenseElementsAttr::get(
                  rt, b.getFloatAttr(rt.getElementType(), 0.0))));
  Value partial = SelectOp::create(b, loc, mask, rows, zeros);
  return AllReduceOp::create(b, loc, rt, partial, kTensorParallelAxis,
                             CollectiveReduce::Sum);
}

/// Rewrites `p.func` into one rank's program.
void apply(Propagation &p) {
  func::FuncOp func = p.func;
  OpBuilder b(func.getContext());
  Block &body = func.getBody().front();
  for (auto &[i, s] : p.params) {
    BlockArgument arg = body.getArgument(i);
    auto whole = cast<RankedTensorType>(arg.getType());
    arg.setType(localType(whole, s, p.ranks));
    SmallVector<NamedAttribute> shard{
        b.getNamedAttr("axis", b.getStringAttr(kTensorParallelAxis)),
        b.getNamedAttr("shape", b.getDenseI64ArrayAttr(whole.getShape())),
        b.getNamedAttr("dim", b.getI64IntegerAttr(s.dim))};
    if (s.groups != 1)
      shard.push_back(b.getNamedAttr("groups", b.getI64IntegerAttr(s.groups)));
    func.setArgAttr(i, kShardAttr, b.getDictionaryAttr(shard));
  }
  for (auto &[v, s] : p.values)
    v.setType(localType(v.getType(), s, p.ranks));
  // Slices take their group's local block.
  for (Operation &op : body)
    if (auto sl = dyn_cast<SliceOp>(op)) {
      Split s = p.of(sl.getX());
      if (!s.isSplit())
        continue;
      SmallVector<int64_t> start(sl.getStart()), limit(sl.getLimit());
      int64_t width = (limit[s.dim] - start[s.dim]); // whole group's width
      int64_t local = width / p.ranks;
      start[s.dim] = start[s.dim] / width * local;
      limit[s.dim] = start[s.dim] + local;
      sl.setStartAttr(b.getDenseI64ArrayAttr(start));
      sl.setLimitAttr(b.getDenseI64ArrayAttr(limit));
    }
  // Whole operands of split ops, rebuilt in the local shape.
  for (auto [op, idx] : p.localOperands) {
    Operation *def = op->getOperand(idx).getDefiningOp();
    Split s = p.of(op->getResult(0));
    b.setInsertionPoint(op);
    Operation *clone = b.clone(*def);
    Type local = localType(def->getResult(0).getType(), s, p.ranks);
    if (auto c = dyn_cast<ConstantOp>(clone)) {
      auto splat = cast<SplatElementsAttr>(c.getValue());
      c.setValueAttr(SplatElementsAttr::get(cast<ShapedType>(local),
                                            splat.getSplatValue<Attribute>()));
    }
    clone->getResult(0).setType(local);
    op->setOperand(idx, clone->getResult(0));
    if (def->use_empty())
      def->erase();
  }
  for (GatherOp g : p.embeddings) {
    b.setInsertionPoint(g);
    int64_t vocab =
        cast<RankedTensorType>(g.getTable().getType()).getDimSize(0) * p.ranks;
    Value whole = vocabParallelEmbedding(b, g, vocab);
    g.getResult().replaceAllUsesWith(whole);
    g.erase();
  }
  for (CrossEntropyOp ce : p.crossEntropies) {
    b.setInsertionPoint(ce);
    int64_t classes = cast<RankedTensorType>(ce.getLogits().getType())
                          .getDimSize(1) *
                      p.ranks;
    Value loss = vocabParallelCrossEntropy(b, ce, classes);
    if (loss.getType() != ce.getType())
      loss = CastOp::create(b, ce.getLoc(), ce.getType(), loss);
    ce.getResult().replaceAllUsesWith(loss);
    ce.erase();
  }
  // Split results, gathered whole: the split dimension moved to the front,
  // all-gathered, moved back.
  for (auto [op, idx] : p.gathers) {
    b.setInsertionPoint(op);
    Value v = op->getOperand(idx);
    Split s = p.of(v);
    auto local = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> perm{s.dim};
    for (int64_t d = 0; d < local.getRank(); ++d)
      if (d != s.dim)
        perm.push_back(d);
    auto permuted = [&](RankedTensorType t, ArrayRef<int64_t> order) {
      SmallVector<int64_t> shape;
      for (int64_t d : order)
        shape.push_back(t.getDimSize(d));
      return RankedTensorType::get(shape, t.getElementType());
    };
    Value front = v;
    if (s.dim != 0)
      front = TransposeOp::create(b, op->getLoc(), permuted(local, perm), v,
                                  perm);
    auto ft = cast<RankedTensorType>(front.getType());
    SmallVector<int64_t> whole(ft.getShape());
    whole[0] *= p.ranks;
    Value all = AllGatherOp::create(
        b, op->getLoc(), RankedTensorType::get(whole, ft.getElementType()),
        front, kTensorParallelAxis);
    if (s.dim != 0) {
      SmallVector<int64_t> inverse(perm.size());
      for (auto [i, d] : llvm::enumerate(perm))
        inverse[d] = i;
      all = TransposeOp::create(
          b, op->getLoc(),
          permuted(cast<RankedTensorType>(all.getType()), inverse), all,
          inverse);
    }
    op->setOperand(idx, all);
  }
  // The partial sums of row-parallel products, summed.
  for (Operation *op : p.partials) {
    b.setInsertionPointAfter(op);
    Value partial = op->getResult(0);
    auto sum = AllReduceOp::create(b, op->getLoc(), partial.getType(), partial,
                                   kTensorParallelAxis, CollectiveReduce::Sum);
    partial.replaceAllUsesExcept(sum, sum);
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 func.getResultTypes()));
}

/// A diagnostic at the op propagation stopped at.
InFlightDiagnostic report(const Propagation &p, const Twine &what) {
  std::string node = nodeName(p.failedAt->getLoc());
  InFlightDiagnostic d = p.failedAt->emitError();
  d << what << ": '" << p.failedAt->getName() << "'";
  if (!node.empty())
    d << " (node '" << node << "')";
  d << ": " << p.why;
  return d;
}

/// The greedy choice of the layers to split in @forward: token embeddings
/// (a gather of a parameter table by ids that are not constants: not
/// position embeddings), split by rows, then linear layers, by output
/// columns, each kept when the whole function propagates. A linear layer
/// that does not split alone is tried with the layers still undecided that
/// read its input (Llama's separate query, key and value projections;
/// SwiGLU's gate and up projections only split together).
class LayerChooser {
public:
  LayerChooser(func::FuncOp forward, int64_t n,
               const std::optional<llvm::Regex> &pattern)
      : forward(forward), n(n), pattern(pattern) {
    auto paramArg = [&](Value v) {
      auto arg = dyn_cast<BlockArgument>(v);
      return arg && forward.getArgAttr(arg.getArgNumber(), kParamAttr)
                 ? arg
                 : BlockArgument();
    };
    forward.walk([&](GatherOp op) {
      BlockArgument arg = paramArg(op.getTable());
      if (arg && choice(op) == "whole")
        pinned.insert(arg.getArgNumber());
      else if (arg && op.getAxis() == 0 &&
               !op.getIndices().getDefiningOp<ConstantOp>())
        candidates.push_back({op, arg, Split{0, 1}});
    });
    forward.walk([&](MatmulOp op) {
      // The weight as the matmul reads it, or transposed first (PyTorch's
      // exporter writes a Linear's [out, in] weight through a Transpose).
      Value w = op.getRhs();
      bool transposed = op.getTransposeB();
      if (Value x = transposedParameter(w))
        w = x, transposed = !transposed;
      BlockArgument arg = paramArg(w);
      if (arg && choice(op) == "whole")
        pinned.insert(arg.getArgNumber());
      else if (arg && cast<RankedTensorType>(arg.getType()).getRank() == 2 &&
               !op.getBias())
        candidates.push_back(
            {op, arg, Split{transposed ? 0 : 1, outputGroups(op)}});
    });
  }

  /// Tries every candidate in order.
  void run() {
    for (const Candidate &c : candidates) {
      unsigned i = c.weight.getArgNumber();
      if (chosen.count(i) || pinned.count(i) || !allowed(c.op))
        continue;
      SmallVector<const Candidate *> group{&c};
      Propagation trial = attempt(group);
      if (trial.failedAt && isa<MatmulOp>(c.op)) {
        group = withSiblings(c);
        if (group.size() > 1)
          trial = attempt(group);
      }
      if (trial.failedAt) {
        std::string node = nodeName(trial.failedAt->getLoc());
        std::string why =
            "'" + trial.failedAt->getName().getStringRef().str() + "'" +
            (node.empty() ? "" : " (node '" + node + "')") + ": " + trial.why;
        whyWhole[c.op] = why;
        if (!firstAt && isa<MatmulOp>(c.op))
          firstAt = trial.failedAt, firstWhy = trial.why;
        if (choice(c.op) == "split")
          refused.push_back({c.op, why});
        continue;
      }
      chosen = trial.params;
      best = std::move(trial);
    }
  }

  /// The report: one entry per layer tried, split (how) or whole (why).
  ArrayAttr report(MLIRContext *ctx) const {
    SmallVector<Attribute> entries;
    auto entry = [&](Operation *op, StringRef outcome, StringRef detail) {
      entries.push_back(DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, "node"),
                               StringAttr::get(ctx, nodeName(op->getLoc()))),
                NamedAttribute(StringAttr::get(ctx, "outcome"),
                               StringAttr::get(ctx, outcome)),
                NamedAttribute(StringAttr::get(ctx, "detail"),
                               StringAttr::get(ctx, detail))}));
    };
    for (const Candidate &c : candidates) {
      auto it = chosen.find(c.weight.getArgNumber());
      if (it != chosen.end() && it->second == c.split)
        entry(c.op, "split",
              isa<GatherOp>(c.op) ? "vocabulary-parallel embedding"
                                  : "column-parallel");
      else if (it == chosen.end() && whyWhole.count(c.op))
        entry(c.op, "whole", whyWhole.lookup(c.op));
    }
    if (best)
      for (Operation *op : best->partials)
        entry(op, "split", "row-parallel");
    return ArrayAttr::get(ctx, entries);
  }

  /// The number of linear layers split column-parallel.
  unsigned columns() const {
    return llvm::count_if(candidates, [&](const Candidate &c) {
      auto it = chosen.find(c.weight.getArgNumber());
      return isa<MatmulOp>(c.op) && it != chosen.end() && it->second == c.split;
    });
  }

  std::map<unsigned, Split> chosen;
  std::optional<Propagation> best;
  /// Why the first linear layer tried was not split (for the error if none
  /// is).
  Operation *firstAt = nullptr;
  std::string firstWhy;
  /// Layers the model marks "split" that could not be, and why.
  SmallVector<std::pair<Operation *, std::string>> refused;

private:
  struct Candidate {
    Operation *op;
    BlockArgument weight;
    Split split;
  };

  static StringRef choice(Operation *op) {
    auto c = op->getAttrOfType<StringAttr>(kTensorParallelChoiceAttr);
    return c ? c.getValue() : StringRef();
  }

  /// Whether `op` may be tried: marked "split", or matching `pattern`.
  bool allowed(Operation *op) const {
    return choice(op) == "split" || !pattern ||
           pattern->match(nodeName(op->getLoc()));
  }

  /// A propagation of the choices so far and `group`'s splits.
  Propagation attempt(ArrayRef<const Candidate *> group) const {
    Propagation p(forward, n, chosen);
    p.pinned = pinned;
    for (const Candidate *g : group)
      if (!p.set(g->op, g->weight, g->split))
        return p;
    p.run();
    return p;
  }

  /// `c` and the linear layers still undecided that read `c`'s input.
  SmallVector<const Candidate *> withSiblings(const Candidate &c) const {
    SmallVector<const Candidate *> group{&c};
    auto mm = cast<MatmulOp>(c.op);
    for (const Candidate &o : candidates) {
      auto other = dyn_cast<MatmulOp>(o.op);
      unsigned w = o.weight.getArgNumber();
      if (&o == &c || !other || other.getLhs() != mm.getLhs() ||
          other.getTransposeA() != mm.getTransposeA() || chosen.count(w) ||
          pinned.count(w) || o.weight == c.weight || !allowed(o.op))
        continue;
      group.push_back(&o);
    }
    return group;
  }

  func::FuncOp forward;
  int64_t n;
  const std::optional<llvm::Regex> &pattern;
  SmallVector<Candidate> candidates;
  std::set<unsigned> pinned;
  llvm::DenseMap<Operation *, std::string> whyWhole;
};

struct TensorParallelPass
    : public loom::impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t n = tp;
    if (n < 1) {
      module.emitError() << "tp must be at least 1, got " << n;
      return signalPassFailure();
    }
    if (n == 1)
      return;
    std::optional<llvm::Regex> pattern;
    if (!layers.empty()) {
      pattern.emplace(layers);
      std::string error;
      if (!pattern->isValid(error)) {
        module.emitError() << "tp-layers '" << layers
                           << "' is not a regular expression: " << error;
        return signalPassFailure();
      }
    }
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || !forward.getBody().hasOneBlock()) {
      module.emitError("loom-tensor-parallel needs @forward with one block "
                       "(run loom-attach-loss first)");
      return signalPassFailure();
    }
    FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    if (llvm::any_of(*mesh, [](const MeshAxis &a) {
          return a.name == kTensorParallelAxis;
        })) {
      module.emitError("the module's mesh already has a 'tp' axis");
      return signalPassFailure();
    }

    LayerChooser chooser(forward, n, pattern);
    chooser.run();
    std::map<unsigned, Split> &chosen = chooser.chosen;
    std::optional<Propagation> &best = chooser.best;
    Operation *firstAt = chooser.firstAt;
    const std::string &firstWhy = chooser.firstWhy;
    auto &refused = chooser.refused;
    for (auto &[op, why] : refused) {
      std::string node = nodeName(op->getLoc());
      op->emitError() << "tp=" << n << ": node '" << node
                      << "' is marked tp = \"split\" but cannot be split: "
                      << why;
    }
    if (!refused.empty())
      return signalPassFailure();
    if (!best) {
      InFlightDiagnostic d = forward.emitError();
      d << "tp=" << n << ": no linear layer of @forward"
        << (pattern ? " whose node matches tp-layers '" + layers + "'" : "")
        << " can be split "
        << "over the ranks (a matmul by a parameter weight whose output "
        << "columns divide by " << n << " and whose split output reaches "
        << "a matmul that sums it back)";
      if (firstAt) {
        std::string node = nodeName(firstAt->getLoc());
        d.attachNote(firstAt->getLoc())
            << "the first layer tried stops at '" << firstAt->getName() << "'"
            << (node.empty() ? "" : " (node '" + node + "')") << ": "
            << firstWhy;
      }
      return signalPassFailure();
    }

    // Every other entry taking the parameters gets the same split.
    std::vector<Propagation> others;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func == forward || func.isExternal())
        continue;
      Propagation p(func, n, {});
      for (unsigned i = 0; i < func.getNumArguments(); ++i) {
        auto name = func.getArgAttrOfType<StringAttr>(i, kParamAttr);
        if (!name)
          continue;
        for (auto &[j, s] : chosen)
          if (forward.getArgAttrOfType<StringAttr>(j, kParamAttr) == name)
            p.params[i] = s;
      }
      size_t given = p.params.size();
      if (!p.run()) {
        report(p, "tp=" + Twine(n) + ": @" + func.getSymName() +
                      " cannot take the split that @forward takes");
        return signalPassFailure();
      }
      if (p.params.size() != given) {
        func.emitError() << "tp=" << n << ": @" << func.getSymName()
                         << " splits a parameter @forward keeps whole";
        return signalPassFailure();
      }
      others.push_back(std::move(p));
    }
    // Before the rewrite, which replaces some of the layers it names.
    ArrayAttr tpReport = chooser.report(module.getContext());
    unsigned columns = chooser.columns();
    apply(*best);
    for (Propagation &p : others)
      apply(p);
    mesh->push_back(MeshAxis{kTensorParallelAxis.str(), n});
    setMesh(module, *mesh);
    module->setAttr("loom.tp_report", tpReport);
    numColumnParallel = columns;
    numRowParallel = best->partials.size();
    numSplitParams = best->params.size();
  }
};

} // namespace

bool loom::isTensorParallelShard(func::FuncOp func, unsigned i) {
  auto shard = func.getArgAttrOfType<DictionaryAttr>(i, kShardAttr);
  auto axis = shard ? shard.getAs<StringAttr>("axis") : StringAttr();
  return axis && axis.getValue() == kTensorParallelAxis;
}

LogicalResult loom::fixTensorParallelGradients(func::FuncOp fb) {
  int64_t n = meshAxisSize(fb, kTensorParallelAxis);
  if (n <= 1)
    return success();
  llvm::StringMap<unsigned> paramArg;
  for (unsigned i = 0; i < fb.getNumArguments(); ++i)
    if (auto name = fb.getArgAttrOfType<StringAttr>(i, kParamAttr))
      paramArg[name.getValue()] = i;
  auto ret = cast<func::ReturnOp>(fb.getBody().front().getTerminator());
  OpBuilder b(ret);
  for (unsigned r = 0; r < fb.getNumResults(); ++r) {
    auto name = fb.getResultAttrOfType<StringAttr>(r, kGradAttr);
    if (!name)
      continue;
    auto it = paramArg.find(name.getValue());
    if (it == paramArg.end())
      return fb.emitError() << "gradient '" << name.getValue()
                            << "' has no parameter argument";
    Value g = ret.getOperand(r);
    auto type = cast<RankedTensorType>(g.getType());
    Value fixed;
    if (isTensorParallelShard(fb, it->second)) {
      Value inv = ConstantOp::create(
          b, ret.getLoc(),
          DenseElementsAttr::get(
              type, b.getFloatAttr(type.getElementType(), 1.0 / n)));
      fixed = MulOp::create(b, ret.getLoc(), g, inv);
      fb.setResultAttr(r, kShardAttr, fb.getArgAttr(it->second, kShardAttr));
    } else {
      fixed = AllReduceOp::create(b, ret.getLoc(), type, g,
                                  kTensorParallelAxis, CollectiveReduce::Mean);
    }
    ret.setOperand(r, fixed);
  }
  return success();
}
