//===- Autodiff.cpp - Reverse-mode automatic differentiation --------------===//
//
// `loom-autodiff` adds `@<entry>_backward` (by default `@forward_backward`)
// next to the forward function `@<entry>`: same arguments (and argument
// attributes), results `(loss, d loss / d param...)` with one gradient per
// argument marked `loom.param`, in argument order, each result marked
// `loom.grad = "<param>"`; with `with-inputs`, the gradients of the float
// inputs follow; then the forward's results marked `loom.buffer` (the new
// running statistics of batch norms that train).
//
// Algorithm:
//  1. Clone the forward function; the clone's body computes the forward
//     values the backward ops read.
//  2. Activity: a value is *varied* if it is a float value that depends on a
//     differentiated argument through operands that the op's
//     DifferentiableOpInterface calls differentiable (so integer paths,
//     comparisons and `loom.stop_gradient` carry no variation).
//  3. Seed the loss's cotangent with 1 (or, with loss scaling, with a new
//     last argument `loss_scale`, a 0-D f32 marked loom.opt_state, so that
//     every gradient comes out multiplied by it; loom-optimizer divides it
//     out) and walk the forward ops backwards.
//     An op whose results have a cotangent and which has a varied
//     differentiable operand gets its `buildVJP`; the cotangents of its
//     varied operands are accumulated (`loom.add` when a value is used
//     several times). Ops the loss does not depend on never get a
//     cotangent, and ops no parameter reaches are never differentiated.
//  4. Return the loss and the gradients (a zero constant for a parameter
//     the loss does not depend on), then erase the ops nothing uses: the
//     cotangents rules built for operands nobody needs, and the forward ops
//     of outputs other than the loss.
//
// Invariants: `@forward` is unchanged; every backward op sits before the
// return of the new function, at the location of the forward op it
// differentiates (so diagnostics point at the model's node); each gradient
// has exactly the type of its parameter.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Autodiff.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "loom-autodiff"

namespace loom {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

using Target = AutodiffTarget;

struct AutodiffPass : loom::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override;

private:
  /// Index of the loss among the results of `func`, or failure (reported).
  FailureOr<unsigned> findLoss(func::FuncOp func);
  /// Whether the loss is scaled (option loss-scale; `auto`: when some value
  /// of `forward` is f16), or failure (reported).
  FailureOr<bool> scalesLoss(func::FuncOp forward);
};

FailureOr<unsigned> AutodiffPass::findLoss(func::FuncOp func) {
  std::optional<unsigned> index;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kOutputAttr))
      if (name.getValue() == "loss")
        index = i;
  if (!index) {
    if (func.getNumResults() != 1) {
      func.emitError() << "cannot tell which of the " << func.getNumResults()
                       << " results of @" << func.getName()
                       << " is the loss: mark it loom.output = \"loss\"";
      return failure();
    }
    index = 0;
  }
  Type type = func.getResultTypes()[*index];
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != 0 || !isFloatTensor(tensor)) {
    func.emitError() << "loss must be a scalar (a 0-D float tensor), got "
                     << type;
    return failure();
  }
  return *index;
}

FailureOr<bool> AutodiffPass::scalesLoss(func::FuncOp forward) {
  if (lossScale == "none")
    return false;
  if (lossScale == "dynamic")
    return true;
  if (lossScale != "auto") {
    forward.emitError() << "loom-autodiff: unknown loss-scale '" << lossScale
                        << "' (expected auto, dynamic or none)";
    return failure();
  }
  bool f16 = false;
  forward.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (auto tensor = dyn_cast<RankedTensorType>(t))
        f16 |= tensor.getElementType().isF16();
    return f16 ? WalkResult::interrupt() : WalkResult::advance();
  });
  return f16;
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto forward = module.lookupSymbol<func::FuncOp>(entry);
  if (!forward || forward.isExternal()) {
    module.emitError() << "loom-autodiff: the module has no @" << entry
                       << " function with a body";
    return signalPassFailure();
  }
  std::string backwardName = entry + "_backward";
  if (module.lookupSymbol(backwardName)) {
    module.emitError() << "loom-autodiff: the module already has @"
                       << backwardName;
    return signalPassFailure();
  }
  if (!forward.getBody().hasOneBlock()) {
    forward.emitError() << "loom-autodiff: @" << entry
                        << " must have a single block";
    return signalPassFailure();
  }

  // Parameters first (in argument order), then float inputs if asked.
  SmallVector<Target> targets;
  Block &forwardBlock = forward.getBody().front();
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (auto name = forward.getArgAttrOfType<StringAttr>(i, kParamAttr))
      targets.push_back({forwardBlock.getArgument(i), name.str()});
  if (targets.empty()) {
    forward.emitError("model has no parameter to differentiate (no argument "
                      "is marked loom.param)");
    return signalPassFailure();
  }
  if (withInputs) {
    for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
      if (forward.getArgAttr(i, kParamAttr) ||
          !isFloatTensor(forward.getArgumentTypes()[i]))
        continue;
      auto name = forward.getArgAttrOfType<StringAttr>(i, kInputAttr);
      targets.push_back({forwardBlock.getArgument(i),
                         name ? name.str() : "arg" + std::to_string(i)});
    }
  }

  FailureOr<unsigned> lossIndex = findLoss(forward);
  if (failed(lossIndex))
    return signalPassFailure();

  FailureOr<bool> scaled = scalesLoss(forward);
  if (failed(scaled))
    return signalPassFailure();

  // The clone keeps the arguments and their attributes; its targets are the
  // same argument numbers.
  auto fb = cast<func::FuncOp>(forward->clone());
  fb.setSymName(backwardName);
  module.getBody()->getOperations().insertAfter(Block::iterator(forward), fb);
  Block &block = fb.getBody().front();
  for (Target &t : targets)
    t.arg = block.getArgument(t.arg.getArgNumber());
  Value seed;
  if (*scaled) {
    OpBuilder b(&getContext());
    unsigned n = fb.getNumArguments();
    if (failed(fb.insertArgument(
            n, RankedTensorType::get({}, b.getF32Type()),
            b.getDictionaryAttr(b.getNamedAttr(
                kOptStateAttr, b.getStringAttr(kLossScaleName))),
            fb.getLoc())))
      return signalPassFailure();
    seed = fb.getArgument(n);
  }

  unsigned rules = 0;
  LogicalResult built = buildBackward(fb, *lossIndex, targets, seed, &rules);
  numRules += rules;
  if (failed(built)) {
    fb.erase();
    return signalPassFailure();
  }
}

} // namespace

LogicalResult loom::buildBackward(func::FuncOp fb, unsigned lossIndex,
                                  ArrayRef<AutodiffTarget> targets, Value seed,
                                  unsigned *rulesApplied) {
  Block &block = fb.getBody().front();
  auto returnOp = cast<func::ReturnOp>(block.getTerminator());
  Value loss = returnOp.getOperand(lossIndex);
  SmallVector<Operation *> forwardOps;
  for (Operation &op : block.without_terminator())
    forwardOps.push_back(&op);

  // Activity: which values vary with the targets.
  DenseSet<Value> varied;
  for (const Target &t : targets)
    varied.insert(t.arg);
  auto isActiveOperand = [&](Operation *op, unsigned i) {
    if (!varied.contains(op->getOperand(i)))
      return false;
    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    return !diff || diff.isDifferentiableOperand(i);
  };
  for (Operation *op : forwardOps) {
    bool active = false;
    for (unsigned i = 0; i < op->getNumOperands() && !active; ++i)
      active = isActiveOperand(op, i);
    if (active)
      for (Value r : op->getResults())
        if (isFloatTensor(r.getType()))
          varied.insert(r);
  }

  OpBuilder b(returnOp);
  DenseMap<Value, Value> cotangents;
  auto accumulate = [&](Value v, Value c, Location loc) {
    Value &slot = cotangents[v];
    slot = slot ? AddOp::create(b, loc, slot, c).getResult() : c;
  };
  if (varied.contains(loss)) {
    auto type = cast<RankedTensorType>(loss.getType());
    if (seed && seed.getType() != type)
      seed = CastOp::create(b, fb.getLoc(), type, seed);
    cotangents[loss] =
        seed ? seed
             : ConstantOp::create(
                   b, fb.getLoc(),
                   DenseElementsAttr::get(
                       type, b.getFloatAttr(type.getElementType(), 1.0)));
  }

  for (Operation *op : llvm::reverse(forwardOps)) {
    SmallVector<Value> resultCotangents;
    bool any = false;
    for (Value r : op->getResults()) {
      resultCotangents.push_back(cotangents.lookup(r));
      any |= static_cast<bool>(resultCotangents.back());
    }
    if (!any)
      continue;
    SmallVector<unsigned> needed;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (isActiveOperand(op, i))
        needed.push_back(i);
    if (needed.empty())
      continue;

    auto diff = dyn_cast<DifferentiableOpInterface>(op);
    if (!diff)
      return op->emitError() << "'" << op->getName()
                             << "' has no gradient rule (it does not "
                                "implement DifferentiableOpInterface)";
    SmallVector<Value> operandCotangents;
    b.setInsertionPoint(returnOp);
    if (failed(diff.buildVJP(b, resultCotangents, operandCotangents)))
      return op->emitError()
             << "failed to build the gradient of '" << op->getName() << "'";
    if (operandCotangents.size() != op->getNumOperands())
      return op->emitError()
             << "the gradient rule of '" << op->getName() << "' gave "
             << operandCotangents.size() << " cotangents for "
             << op->getNumOperands() << " operands";
    for (unsigned i : needed) {
      Value c = operandCotangents[i];
      if (!c)
        continue;
      if (c.getType() != op->getOperand(i).getType())
        return op->emitError() << "the gradient rule of '" << op->getName()
                               << "' gave a cotangent of type " << c.getType()
                               << " for operand #" << i << " of type "
                               << op->getOperand(i).getType();
      accumulate(op->getOperand(i), c, op->getLoc());
    }
    if (rulesApplied)
      ++*rulesApplied;
  }

  // Results: the loss, then one gradient per target (zeros if the loss does
  // not depend on it).
  b.setInsertionPoint(returnOp);
  SmallVector<Value> results = {loss};
  SmallVector<Attribute> resultAttrs;
  NamedAttrList lossAttrs(fb.getResultAttrDict(lossIndex));
  lossAttrs.set(kOutputAttr, b.getStringAttr("loss"));
  resultAttrs.push_back(lossAttrs.getDictionary(b.getContext()));
  for (const Target &t : targets) {
    Value grad = cotangents.lookup(t.arg);
    if (!grad) {
      auto type = cast<RankedTensorType>(t.arg.getType());
      grad = ConstantOp::create(
          b, fb.getLoc(),
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 0.0)));
    }
    results.push_back(grad);
    resultAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(kGradAttr, b.getStringAttr(t.name))));
  }
  // The new values of buffers (loom-batch-norm-train), as they are.
  for (unsigned i = 0; i < returnOp.getNumOperands(); ++i)
    if (fb.getResultAttr(i, kBufferAttr)) {
      results.push_back(returnOp.getOperand(i));
      resultAttrs.push_back(fb.getResultAttrDict(i));
    }
  func::ReturnOp::create(b, returnOp.getLoc(), results);
  returnOp.erase();
  fb.setFunctionType(b.getFunctionType(block.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  fb.setAllResultAttrs(resultAttrs);

  // Erase what nothing uses: cotangents of operands no target needs, and
  // forward ops computing other outputs than the loss.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return success();
}

