//===- PipelineStages.cpp - Pipeline stages and their schedule ------------===//
//
// `loom-pipeline-stages` (Passes.td has the contract, docs/pipeline.md the
// formats). After loom-optimizer, the module has @forward (the model and
// its loss) and @apply_gradients / @apply_optimizer (the update). This pass
//  1. cuts @forward's ops into stages (PipelineCut below),
//  2. writes each stage's forward, its backward (a VJP: loom::buildBackward
//     on the forward plus a pseudo loss), and its share of the update,
//  3. generates or reads the schedule, checks it (loomrt::pp), and records
//     it with the boundaries in the module's `loom.pipeline` attribute,
//  4. erases the whole-model entry points.
//
//===----------------------------------------------------------------------===//

#include "TensorParallel.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Autodiff.h"
#include "loom/Transforms/Passes.h"
#include "loomrt/PipelineSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <set>

namespace loom {
#define GEN_PASS_DEF_PIPELINESTAGESPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr llvm::StringLiteral kPipelineAxis = "pp";

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

int64_t byteSize(Type type) {
  auto t = cast<RankedTensorType>(type);
  return t.getNumElements() *
         std::max<int64_t>(1, (t.getElementTypeBitWidth() + 7) / 8);
}


std::string boundaryName(int64_t b, size_t i) {
  return "pp.b" + std::to_string(b) + "." + std::to_string(i);
}

/// @forward's ops cut into stages.
struct PipelineCut {
  func::FuncOp forward;
  int64_t stages = 1;
  /// Ops that read only data inputs, constants and other such ops: copied
  /// into each stage that needs them.
  DenseSet<Operation *> replicable;
  /// Ops that read only parameters and replicable values: they belong to
  /// the first stage that reads them, not to their place in @forward.
  DenseSet<Operation *> sinkable;
  /// The other ops (not the return), in program order, and their stages.
  SmallVector<Operation *> ops;
  SmallVector<int64_t> stageOf;
  DenseMap<Operation *, size_t> position;
  /// Each stage's parameter arguments (those it reads), in argument order,
  /// and those it updates (owns).
  std::vector<SmallVector<unsigned>> params, owned;
  /// Parameters read by several stages (argument, stages in order; the
  /// first owns it).
  SmallVector<std::pair<unsigned, SmallVector<int64_t>>> shared;
  /// Boundary b's values, in program order.
  std::vector<SmallVector<Value>> boundaries;
  Value loss;

  int64_t stageOfValue(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && position.count(def) ? stageOf[position.lookup(def)] : -1;
  }
};

bool isParam(func::FuncOp f, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && arg.getOwner()->getParentOp() == f &&
         f.getArgAttr(arg.getArgNumber(), kParamAttr);
}

/// Cost of one op for balancing: FLOPs plus bytes moved.
int64_t opCost(Operation *op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return std::max<int64_t>(1, cost.getFlopCount() + cost.getByteCount());
  return 1;
}

struct PipelineStagesPass
    : loom::impl::PipelineStagesPassBase<PipelineStagesPass> {
  using PipelineStagesPassBase::PipelineStagesPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkSupported(ModuleOp module, func::FuncOp forward,
                               func::FuncOp update);
  LogicalResult cut(PipelineCut &c);
  LogicalResult chooseCuts(PipelineCut &c, SmallVectorImpl<size_t> &starts);
  func::FuncOp buildForward(OpBuilder &b, PipelineCut &c, int64_t s);
  LogicalResult buildBackwards(OpBuilder &b, PipelineCut &c, int64_t s,
                               func::FuncOp fwd, bool whole, bool split);
  FailureOr<func::FuncOp> buildUpdate(OpBuilder &b, PipelineCut &c, int64_t s,
                                      func::FuncOp update);
  LogicalResult buildSchedule(ModuleOp module, PipelineCut &c,
                              loomrt::pp::Schedule &schedule);
};

} // namespace

//===----------------------------------------------------------------------===//
// Cutting @forward
//===----------------------------------------------------------------------===//

LogicalResult PipelineStagesPass::cut(PipelineCut &c) {
  func::FuncOp f = c.forward;
  Block &block = f.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  // The loss: the result marked loom.output = "loss", or the only one.
  for (unsigned i = 0; i < f.getNumResults(); ++i)
    if (auto name = f.getResultAttrOfType<StringAttr>(i, kOutputAttr);
        name && name.getValue() == "loss")
      c.loss = ret.getOperand(i);
  if (!c.loss && f.getNumResults() == 1)
    c.loss = ret.getOperand(0);
  if (!c.loss)
    return f.emitError("loom-pipeline-stages: @forward has no loss result");

  auto isFree = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return !isParam(f, v);
    return c.replicable.contains(v.getDefiningOp());
  };
  DenseSet<Operation *> constant; // replicable ops that read no input
  for (Operation &op : block.without_terminator()) {
    bool free = isPure(&op) && !isCollective(&op) && op.getNumRegions() == 0 &&
                llvm::all_of(op.getOperands(), isFree);
    if (free) {
      c.replicable.insert(&op);
      if (llvm::all_of(op.getOperands(), [&](Value v) {
            return constant.contains(v.getDefiningOp());
          }))
        constant.insert(&op);
      continue;
    }
    // Ops of parameters alone (mixed precision's casts of the weights)
    // go with the stage that reads them, wherever they are written.
    if (llvm::all_of(op.getOperands(), [&](Value v) {
          return isParam(f, v) || constant.contains(v.getDefiningOp()) ||
                 c.sinkable.contains(v.getDefiningOp());
        }))
      c.sinkable.insert(&op);
    c.position[&op] = c.ops.size();
    c.ops.push_back(&op);
  }
  if (static_cast<int64_t>(c.ops.size()) < c.stages)
    return f.emitError() << "loom-pipeline-stages: @forward has "
                         << c.ops.size() << " ops that are not constants, "
                         << "too few for " << c.stages << " stages";

  SmallVector<size_t> starts; // first op of stages 1 .. S-1
  if (failed(chooseCuts(c, starts)))
    return failure();
  c.stageOf.assign(c.ops.size(), 0);
  for (size_t i = 0, s = 0; i < c.ops.size(); ++i) {
    while (s < starts.size() && i >= starts[s])
      ++s;
    c.stageOf[i] = static_cast<int64_t>(s);
  }
  for (size_t i = c.ops.size(); i-- > 0;) {
    if (!c.sinkable.contains(c.ops[i]))
      continue;
    int64_t first = -1;
    for (Operation *user : c.ops[i]->getUsers()) {
      int64_t st = isa<func::ReturnOp>(user)
                       ? c.stages - 1
                       : c.stageOf[c.position.lookup(user)];
      first = first < 0 ? st : std::min(first, st);
    }
    if (first >= 0)
      c.stageOf[i] = first;
  }

  // Parameters: the stages that read each. A parameter read by several
  // (a head tied to the embedding) is taken by each of them and updated by
  // the first, its owner; the runtime sums the stages' gradients there and
  // sends the new value back (docs/pipeline.md, "shared").
  c.params.assign(c.stages, {});
  c.owned.assign(c.stages, {});
  std::map<unsigned, std::set<int64_t>> readers;
  for (auto [i, op] : llvm::enumerate(c.ops))
    for (Value v : op->getOperands())
      if (isParam(f, v))
        readers[cast<BlockArgument>(v).getArgNumber()].insert(c.stageOf[i]);
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    if (!f.getArgAttr(i, kParamAttr))
      continue;
    std::set<int64_t> &stages = readers[i];
    if (stages.empty())
      stages.insert(0); // read by no op: stage 0 keeps (and updates) it
    for (int64_t s : stages)
      c.params[s].push_back(i);
    c.owned[*stages.begin()].push_back(i);
    if (stages.size() > 1)
      c.shared.push_back({i, SmallVector<int64_t>(stages.begin(), stages.end())});
  }

  // Boundaries: a value crosses every boundary between its stage and the
  // last stage that reads it (the return is read by the last stage).
  c.boundaries.assign(c.stages - 1, {});
  for (auto [i, op] : llvm::enumerate(c.ops))
    for (Value v : op->getResults()) {
      int64_t last = c.stageOf[i];
      for (OpOperand &use : v.getUses()) {
        Operation *user = use.getOwner();
        if (isa<func::ReturnOp>(user)) {
          if (v == c.loss)
            last = c.stages - 1;
          continue;
        }
        last = std::max(last, c.stageOf[c.position.lookup(user)]);
      }
      for (int64_t b = c.stageOf[i]; b < last; ++b)
        c.boundaries[b].push_back(v);
    }
  return success();
}

LogicalResult PipelineStagesPass::chooseCuts(PipelineCut &c,
                                             SmallVectorImpl<size_t> &starts) {
  size_t n = c.ops.size();
  // The model's own marks (JSON "pp_stage_start"): exact node names.
  SmallVector<std::string> marked;
  if (stageSplit.empty())
    for (Operation *op : c.ops)
      if (op->hasAttr(kPipelineStageStartAttr) &&
          !llvm::is_contained(marked, nodeName(op->getLoc())))
        marked.push_back(nodeName(op->getLoc()));
  if (!stageSplit.empty() || !marked.empty()) {
    SmallVector<std::string> patterns;
    for (StringRef p : llvm::split(StringRef(stageSplit), ','))
      if (!p.empty())
        patterns.push_back(p.str());
    for (const std::string &name : marked)
      patterns.push_back("^" + llvm::Regex::escape(name) + "$");
    const char *what = marked.empty() ? "split" : "the nodes marked "
                                                  "pp_stage_start";
    if (static_cast<int64_t>(patterns.size()) != c.stages - 1)
      return c.forward.emitError()
             << "loom-pipeline-stages: " << what << " give "
             << patterns.size() << " stage start(s); " << c.stages
             << " stages need " << c.stages - 1;
    size_t from = 1;
    for (StringRef pattern : patterns) {
      llvm::Regex re(pattern);
      std::string why;
      if (!re.isValid(why))
        return c.forward.emitError() << "loom-pipeline-stages: split: '"
                                     << pattern << "' is not a regular "
                                     << "expression: " << why;
      size_t at = from;
      while (at < n && (c.sinkable.contains(c.ops[at]) ||
                        !re.match(nodeName(c.ops[at]->getLoc()))))
        ++at;
      if (at >= n)
        return c.forward.emitError()
               << "loom-pipeline-stages: split: no op after the start of "
               << "stage " << starts.size() << " has a node name matching '"
               << pattern << "'";
      starts.push_back(at);
      from = at + 1;
    }
    return success();
  }

  // Prefix costs and the bytes that would cross a cut before op p: values
  // made before p and read at or after it (parameters and replicable
  // values never cross).
  std::vector<int64_t> prefix(n + 1, 0), crossDelta(n + 2, 0);
  for (size_t i = 0; i < n; ++i) {
    prefix[i + 1] = prefix[i] + opCost(c.ops[i]);
    if (c.sinkable.contains(c.ops[i]))
      continue; // moves to its reader's stage
    for (Value v : c.ops[i]->getResults()) {
      size_t last = i;
      for (Operation *user : v.getUsers())
        last = std::max(last, isa<func::ReturnOp>(user)
                                  ? n
                                  : c.position.lookup(user));
      if (last > i) {
        crossDelta[i + 1] += byteSize(v.getType());
        crossDelta[last + 1] -= byteSize(v.getType());
      }
    }
  }
  std::vector<int64_t> crossing(n + 1, 0);
  for (size_t p = 1; p <= n; ++p)
    crossing[p] = crossing[p - 1] + crossDelta[p];
  double per = static_cast<double>(prefix[n]) / c.stages;
  size_t from = 1;
  for (int64_t k = 1; k < c.stages; ++k) {
    double ideal = per * k;
    size_t last = n - (c.stages - k); // leave one op per stage after it
    size_t best = 0;
    auto better = [&](size_t p) {
      if (!best)
        return true;
      if (crossing[p] != crossing[best])
        return crossing[p] < crossing[best];
      return std::abs(prefix[p] - ideal) < std::abs(prefix[best] - ideal);
    };
    for (size_t p = from; p <= last; ++p)
      if (std::abs(prefix[p] - ideal) <= per / 4 && better(p))
        best = p;
    if (!best) // no op starts within the window: the nearest place
      for (size_t p = from; p <= last; ++p)
        if (!best ||
            std::abs(prefix[p] - ideal) < std::abs(prefix[best] - ideal))
          best = p;
    starts.push_back(best);
    from = best + 1;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Stage functions
//===----------------------------------------------------------------------===//

func::FuncOp PipelineStagesPass::buildForward(OpBuilder &b, PipelineCut &c,
                                              int64_t s) {
  func::FuncOp f = c.forward;
  SmallVector<Operation *> mine;
  for (auto [i, op] : llvm::enumerate(c.ops))
    if (c.stageOf[i] == s)
      mine.push_back(op);

  // The replicable ops and data inputs the stage's ops read, transitively.
  llvm::SetVector<Operation *> copies;
  std::set<unsigned> dataArgs;
  SmallVector<Value> work;
  for (Operation *op : mine)
    for (Value v : op->getOperands())
      work.push_back(v);
  if (s == c.stages - 1 && c.stageOfValue(c.loss) < 0)
    work.push_back(c.loss); // not computed by a stage: copied (or an input)
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (!isParam(f, v))
        dataArgs.insert(arg.getArgNumber());
      continue;
    }
    Operation *def = v.getDefiningOp();
    if (!c.replicable.contains(def) || copies.contains(def))
      continue;
    copies.insert(def);
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }

  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> argValues; // what each argument stands for
  for (unsigned i : dataArgs) {
    argTypes.push_back(f.getArgumentTypes()[i]);
    argAttrs.push_back(f.getArgAttrDict(i));
    argValues.push_back(f.getArgument(i));
  }
  if (s > 0)
    for (auto [i, v] : llvm::enumerate(c.boundaries[s - 1])) {
      argTypes.push_back(v.getType());
      argAttrs.push_back(b.getDictionaryAttr(b.getNamedAttr(
          kInputAttr, b.getStringAttr(boundaryName(s - 1, i)))));
      argValues.push_back(v);
    }
  for (unsigned i : c.params[s]) {
    argTypes.push_back(f.getArgumentTypes()[i]);
    argAttrs.push_back(f.getArgAttrDict(i));
    argValues.push_back(f.getArgument(i));
  }
  SmallVector<Value> outs;
  SmallVector<DictionaryAttr> resultAttrs;
  if (s == c.stages - 1) {
    outs.push_back(c.loss);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kOutputAttr, b.getStringAttr("loss"))));
  } else {
    for (auto [i, v] : llvm::enumerate(c.boundaries[s])) {
      outs.push_back(v);
      resultAttrs.push_back(b.getDictionaryAttr(
          b.getNamedAttr(kOutputAttr, b.getStringAttr(boundaryName(s, i)))));
    }
  }

  auto fn = func::FuncOp::create(
      b, f.getLoc(), "stage" + std::to_string(s) + "_forward",
      b.getFunctionType(argTypes, ValueRange(outs).getTypes()));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
  Block *body = fn.addEntryBlock();
  IRMapping map;
  for (auto [v, arg] : llvm::zip(argValues, body->getArguments()))
    map.map(v, arg);
  OpBuilder in = OpBuilder::atBlockEnd(body);
  // Copies in program order (they only read data inputs and each other).
  for (Operation &op : f.getBody().front().without_terminator())
    if (copies.contains(&op))
      in.clone(op, map);
  for (Operation *op : mine)
    in.clone(*op, map);
  SmallVector<Value> mapped;
  for (Value v : outs)
    mapped.push_back(map.lookup(v));
  func::ReturnOp::create(in, f.getLoc(), mapped);
  return fn;
}

namespace {
/// Keeps the results of `fn` that `keep` accepts (by index), then erases
/// the ops nothing uses.
void keepResults(func::FuncOp fn, llvm::function_ref<bool(unsigned)> keep) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  SmallVector<Value> values;
  SmallVector<DictionaryAttr> attrs;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i)
    if (keep(i)) {
      values.push_back(ret.getOperand(i));
      attrs.push_back(fn.getResultAttrDict(i));
    }
  OpBuilder b(ret);
  func::ReturnOp::create(b, ret.getLoc(), values);
  ret.erase();
  fn.setFunctionType(b.getFunctionType(fn.getArgumentTypes(),
                                       ValueRange(values).getTypes()));
  fn.setAllResultAttrs(attrs);
  // Erase what the kept results do not need, collectives included (every
  // rank of their axis runs the same function, so they stay matched).
  Block &block = fn.getBody().front();
  DenseSet<Operation *> live;
  SmallVector<Value> work(values.begin(), values.end());
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (def && live.insert(def).second)
      llvm::append_range(work, def->getOperands());
  }
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (!op.hasTrait<mlir::OpTrait::IsTerminator>() && !live.contains(&op))
      op.erase();
}

/// Inlines every func.call in `fn` (single-block callees).
LogicalResult inlineCalls(func::FuncOp fn, ModuleOp module) {
  SmallVector<func::CallOp> calls;
  fn.walk([&](func::CallOp call) { calls.push_back(call); });
  for (func::CallOp call : calls) {
    auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee());
    if (!callee || !callee.getBody().hasOneBlock())
      return call.emitError("loom-pipeline-stages: cannot inline @")
             << call.getCallee();
    IRMapping map;
    Block &body = callee.getBody().front();
    for (auto [arg, operand] :
         llvm::zip(body.getArguments(), call.getOperands()))
      map.map(arg, operand);
    OpBuilder b(call);
    for (Operation &op : body.without_terminator())
      b.clone(op, map);
    for (auto [r, v] : llvm::zip(call.getResults(),
                                 body.getTerminator()->getOperands()))
      r.replaceAllUsesWith(map.lookupOrDefault(v));
    call.erase();
  }
  return success();
}
} // namespace

LogicalResult PipelineStagesPass::buildBackwards(OpBuilder &b, PipelineCut &c,
                                                 int64_t s, func::FuncOp fwd,
                                                 bool whole, bool split) {
  auto bwd = cast<func::FuncOp>(fwd->clone());
  bwd.setSymName("stage" + std::to_string(s) + "_backward");
  b.insert(bwd);
  Block &block = bwd.getBody().front();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  bool last = s == c.stages - 1;
  OpBuilder at(ret);
  Location loc = ret.getLoc();
  Value loss;
  if (last) {
    loss = ret.getOperand(0);
  } else {
    // sum_i <output_i, gradient_i> over the float outputs.
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value out = ret.getOperand(i);
      if (!isFloatTensor(out.getType()))
        continue;
      unsigned n = bwd.getNumArguments();
      if (failed(bwd.insertArgument(
              n, out.getType(),
              b.getDictionaryAttr(b.getNamedAttr(
                  kInputAttr,
                  b.getStringAttr(boundaryName(s, i) + ".grad"))),
              loc)))
        return failure();
      Value prod = MulOp::create(at, loc, out, bwd.getArgument(n));
      auto t = cast<RankedTensorType>(out.getType());
      SmallVector<int64_t> dims;
      for (int64_t d = 0; d < t.getRank(); ++d)
        dims.push_back(d);
      FailureOr<ReduceSumOp> sum =
          createInferred<ReduceSumOp>(at, loc, prod, dims, false);
      if (failed(sum))
        return failure();
      Value term = sum->getResult();
      if (!t.getElementType().isF32())
        term = CastOp::create(at, loc,
                              RankedTensorType::get({}, at.getF32Type()),
                              term);
      loss = loss ? AddOp::create(at, loc, loss, term).getResult() : term;
    }
    if (!loss) // nothing differentiable flows on: a zero loss
      loss = ConstantOp::create(
          at, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, at.getF32Type()),
                                 at.getF32FloatAttr(0.0f)));
  }
  func::ReturnOp::create(at, loc, loss);
  ret.erase();
  bwd.setFunctionType(at.getFunctionType(bwd.getArgumentTypes(),
                                         TypeRange{loss.getType()}));
  bwd.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
      b.getNamedAttr(kOutputAttr, b.getStringAttr("loss")))});

  // Parameters, then the float inputs from the boundary before.
  SmallVector<AutodiffTarget> targets;
  SmallVector<std::string> inputGradNames;
  for (unsigned i = 0; i < bwd.getNumArguments(); ++i)
    if (auto name = bwd.getArgAttrOfType<StringAttr>(i, kParamAttr))
      targets.push_back({bwd.getArgument(i), name.str()});
  size_t numParams = targets.size();
  if (s > 0)
    for (unsigned i = 0; i < bwd.getNumArguments(); ++i) {
      auto name = bwd.getArgAttrOfType<StringAttr>(i, kInputAttr);
      if (!name || !name.getValue().starts_with("pp.b") ||
          name.getValue().ends_with(".grad") ||
          !isFloatTensor(bwd.getArgumentTypes()[i]))
        continue;
      targets.push_back({bwd.getArgument(i), name.str()});
      inputGradNames.push_back(name.str() + ".grad");
    }
  if (failed(buildBackward(bwd, 0, targets, Value())))
    return failure();
  // Input gradients are outputs, not parameter gradients.
  for (auto [k, name] : llvm::enumerate(inputGradNames))
    bwd.setResultAttrs(1 + numParams + k,
                       b.getDictionaryAttr(b.getNamedAttr(
                           kOutputAttr, b.getStringAttr(name))));
  if (failed(fixTensorParallelGradients(bwd)))
    return failure();
  if (meshAxisSize(bwd, kTensorParallelAxis) > 1) {
    // Like a whole parameter's: each tp rank has n times the part that
    // flows through its blocks; their mean is the gradient.
    auto r = cast<func::ReturnOp>(bwd.getBody().front().getTerminator());
    OpBuilder rb(r);
    for (size_t k = 0; k < inputGradNames.size(); ++k) {
      unsigned i = 1 + numParams + k;
      Value g = r.getOperand(i);
      r.setOperand(i, AllReduceOp::create(rb, r.getLoc(), g.getType(), g,
                                          kTensorParallelAxis,
                                          CollectiveReduce::Mean));
    }
  }
  // Drop the (pseudo) loss: the forward reports the loss.
  keepResults(bwd, [](unsigned i) { return i != 0; });

  auto isInputGrad = [&](unsigned i) { return i >= numParams; };
  if (split) {
    std::string stem = "stage" + std::to_string(s) + "_backward";
    if (s > 0) {
      auto input = cast<func::FuncOp>(bwd->clone());
      input.setSymName(stem + "_input");
      b.insert(input);
      keepResults(input, isInputGrad);
    }
    auto weight = cast<func::FuncOp>(bwd->clone());
    weight.setSymName(stem + "_weight");
    b.insert(weight);
    keepResults(weight, [&](unsigned i) { return !isInputGrad(i); });
  }
  if (!whole)
    bwd.erase();
  return success();
}

FailureOr<func::FuncOp> PipelineStagesPass::buildUpdate(OpBuilder &b,
                                                        PipelineCut &c,
                                                        int64_t s,
                                                        func::FuncOp update) {
  func::FuncOp f = c.forward;
  llvm::StringSet<> mine;
  for (unsigned i : c.owned[s])
    mine.insert(f.getArgAttrOfType<StringAttr>(i, kParamAttr).getValue());
  // The parameter a binding of the update belongs to, "" for shared ones
  // (step, lr).
  auto paramOf = [&](StringRef name, bool grad) -> std::string {
    for (StringRef p = name;;) {
      if (mine.contains(p) || !p.contains('.'))
        return mine.contains(p) ? p.str() : "";
      if (grad && p.ends_with(".grad"))
        p = p.drop_back(5);
      else
        p = p.rsplit('.').first;
    }
  };
  auto isOther = [&](DictionaryAttr attrs) {
    for (StringRef key : {kParamAttr, kOptStateAttr, kInputAttr, kOutputAttr,
                          kGradAttr}) {
      auto name = attrs ? attrs.getAs<StringAttr>(key) : StringAttr();
      if (!name || name.getValue() == "step" || name.getValue() == "lr")
        continue;
      return paramOf(name.getValue(), key == kInputAttr).empty();
    }
    return false;
  };

  auto fn = cast<func::FuncOp>(update->clone());
  fn.setSymName("stage" + std::to_string(s) + "_apply_gradients");
  fn.setPublic();
  b.insert(fn);
  if (failed(inlineCalls(fn, getOperation())))
    return failure();
  keepResults(fn, [&](unsigned i) { return !isOther(fn.getResultAttrDict(i)); });
  llvm::BitVector drop(fn.getNumArguments());
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (isOther(fn.getArgAttrDict(i))) {
      if (!fn.getArgument(i).use_empty())
        return fn.emitError()
               << "loom-pipeline-stages: stage " << s << "'s update reads '"
               << fn.getArgAttrDict(i).begin()->getValue()
               << "' of another stage (global-norm clipping, or loss "
               << "scaling, sums over every parameter): not supported with "
               << "pipeline stages yet";
      drop.set(i);
    }
  if (failed(fn.eraseArguments(drop)))
    return failure();
  return fn;
}

//===----------------------------------------------------------------------===//
// The schedule
//===----------------------------------------------------------------------===//

LogicalResult PipelineStagesPass::buildSchedule(
    ModuleOp module, PipelineCut &c, loomrt::pp::Schedule &schedule) {
  int64_t ranks = pp, virt = virtualStages;
  int64_t micro = microbatches > 0 ? int64_t(microbatches) : 2 * ranks;
  std::string error;
  if (!scheduleFile.empty()) {
    auto file = llvm::MemoryBuffer::getFile(scheduleFile, /*IsText=*/true);
    if (!file)
      return module.emitError() << "loom-pipeline-stages: cannot read the "
                                << "schedule file '" << scheduleFile
                                << "': " << file.getError().message();
    if (!loomrt::pp::parseSchedule((*file)->getBuffer().str(), ranks,
                                   c.stages, micro, &schedule, &error))
      return module.emitError() << scheduleFile << ": " << error;
    schedule.name = "file";
  } else if (!loomrt::pp::generateSchedule(std::string(pipelineSchedule), ranks, virt,
                                           micro, &schedule, &error)) {
    return module.emitError() << "loom-pipeline-stages: " << error;
  }
  std::vector<std::vector<loomrt::pp::BoundaryTensor>> boundaries;
  for (auto [bi, values] : llvm::enumerate(c.boundaries)) {
    auto &list = boundaries.emplace_back();
    for (auto [i, v] : llvm::enumerate(values)) {
      auto t = cast<RankedTensorType>(v.getType());
      loomrt::pp::BoundaryTensor bt;
      bt.name = boundaryName(bi, i);
      bt.dtype = dtypeName(t.getElementType());
      if (bt.dtype.empty())
        return v.getDefiningOp()->emitError()
               << "loom-pipeline-stages: a value of type " << t
               << " crosses boundary " << bi
               << ", and the runtime cannot send that element type";
      bt.shape.assign(t.getShape().begin(), t.getShape().end());
      bt.grad = isFloatTensor(t);
      list.push_back(std::move(bt));
    }
  }
  if (!loomrt::pp::checkSchedule(schedule, boundaries, nullptr, &error))
    return module.emitError()
           << (scheduleFile.empty() ? "loom-pipeline-stages: the generated "
                                      "schedule '" + std::string(pipelineSchedule) +
                                          "' is wrong (a bug): "
                                    : scheduleFile + ": ")
           << error;

  OpBuilder b(&getContext());
  SmallVector<Attribute> bounds, actions;
  for (auto &list : boundaries) {
    SmallVector<Attribute> tensors;
    for (auto &bt : list)
      tensors.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", b.getStringAttr(bt.name)),
           b.getNamedAttr("dtype", b.getStringAttr(bt.dtype)),
           b.getNamedAttr("shape", b.getDenseI64ArrayAttr(bt.shape)),
           b.getNamedAttr("grad", b.getBoolAttr(bt.grad))}));
    bounds.push_back(b.getArrayAttr(tensors));
  }
  for (auto &list : schedule.actions) {
    SmallVector<Attribute> tokens;
    for (auto &a : list)
      tokens.push_back(b.getStringAttr(loomrt::pp::formatAction(a)));
    actions.push_back(b.getArrayAttr(tokens));
  }
  NamedAttrList attrs;
  attrs.set("axis", b.getStringAttr(kPipelineAxis));
  attrs.set("stages", b.getI64IntegerAttr(c.stages));
  attrs.set("virtual_stages", b.getI64IntegerAttr(virt));
  attrs.set("microbatches", b.getI64IntegerAttr(schedule.microbatches));
  attrs.set("schedule", b.getStringAttr(schedule.name));
  attrs.set("boundaries", b.getArrayAttr(bounds));
  attrs.set("actions", b.getArrayAttr(actions));
  if (!c.shared.empty()) {
    SmallVector<Attribute> shared;
    for (auto &[arg, stages] : c.shared)
      shared.push_back(b.getDictionaryAttr(
          {b.getNamedAttr("name", c.forward.getArgAttrOfType<StringAttr>(
                                      arg, kParamAttr)),
           b.getNamedAttr("stages", b.getDenseI64ArrayAttr(stages))}));
    attrs.set("shared", b.getArrayAttr(shared));
  }
  module->setAttr(kPipelineAttr, attrs.getDictionary(&getContext()));
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

LogicalResult PipelineStagesPass::checkSupported(ModuleOp module,
                                                 func::FuncOp forward,
                                                 func::FuncOp update) {
  if (!forward || !forward.getBody().hasOneBlock())
    return module.emitError("loom-pipeline-stages needs @forward (one block)");
  if (!update)
    return module.emitError("loom-pipeline-stages needs @apply_optimizer: "
                            "run loom-optimizer first");
  if (module->hasAttr(kPipelineAttr))
    return module.emitError("the module already has pipeline stages");
  for (unsigned i = 0; i < forward.getNumResults(); ++i)
    if (forward.getResultAttr(i, kBufferAttr))
      return forward.emitError(
          "loom-pipeline-stages: the model has buffers (BatchNorm's running "
          "statistics); pipeline stages do not carry them yet");
  for (unsigned i = 0; i < update.getNumArguments(); ++i)
    if (auto name = update.getArgAttrOfType<StringAttr>(i, kOptStateAttr);
        name && name.getValue().starts_with(kLossScaleName))
      return update.emitError("loom-pipeline-stages: dynamic loss scaling "
                              "(fp16) is not supported with pipeline stages "
                              "yet; use bf16");
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (forward.getArgAttr(i, kParamAttr) && forward.getArgAttr(i, kShardAttr) &&
        !isTensorParallelShard(forward, i))
      return forward.emitError("loom-pipeline-stages: ZeRO 3 (parameters "
                               "sharded over dp) is not supported with "
                               "pipeline stages yet");
  if (pp < 1 || virtualStages < 1 || microbatches < 0)
    return module.emitError()
           << "loom-pipeline-stages: pp, virtual-stages and microbatches "
           << "must be positive";
  if (!scheduleFile.empty() && pipelineSchedule != "1f1b")
    return module.emitError("loom-pipeline-stages: give schedule or "
                            "schedule-file, not both");
  return success();
}

void PipelineStagesPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (pp == 1 && virtualStages == 1)
    return;
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  auto update = module.lookupSymbol<func::FuncOp>("apply_gradients");
  if (!update)
    update = module.lookupSymbol<func::FuncOp>("apply_optimizer");
  if (failed(checkSupported(module, forward, update)))
    return signalPassFailure();

  PipelineCut c;
  c.forward = forward;
  c.stages = pp * virtualStages;
  if (failed(cut(c)))
    return signalPassFailure();

  loomrt::pp::Schedule schedule;
  if (failed(buildSchedule(module, c, schedule)))
    return signalPassFailure();
  // Which backward entries the actions use, per stage.
  std::vector<bool> whole(c.stages, false), split(c.stages, false);
  for (auto &list : schedule.actions)
    for (auto &a : list) {
      if (a.kind == loomrt::pp::ActionKind::Backward)
        whole[a.stage] = true;
      if (a.kind == loomrt::pp::ActionKind::BackwardInput ||
          a.kind == loomrt::pp::ActionKind::BackwardWeight)
        split[a.stage] = true;
    }

  // The mesh: pp after dp, before tp.
  FailureOr<std::vector<MeshAxis>> mesh = getMesh(module);
  if (failed(mesh))
    return signalPassFailure();
  auto pos = llvm::find_if(*mesh, [](const MeshAxis &a) { return a.name == "dp"; });
  mesh->insert(pos == mesh->end() ? mesh->begin() : pos + 1,
               MeshAxis{kPipelineAxis.str(), pp});
  setMesh(module, *mesh);

  OpBuilder b(&getContext());
  b.setInsertionPointToEnd(module.getBody());
  for (int64_t s = 0; s < c.stages; ++s) {
    func::FuncOp fwd = buildForward(b, c, s);
    if (failed(buildBackwards(b, c, s, fwd, whole[s], split[s])) ||
        failed(buildUpdate(b, c, s, update)))
      return signalPassFailure();
  }
  numStages = c.stages;
  for (auto &list : c.boundaries)
    numBoundaryTensors += list.size();

  // The whole-model entry points: their parameters live on several ranks.
  for (StringRef name : {"predict", "forward", "forward_backward",
                         "train_step", "apply_gradients", "apply_optimizer"})
    if (Operation *op = module.lookupSymbol(name))
      op->erase();
}
