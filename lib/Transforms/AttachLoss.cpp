//===- AttachLoss.cpp - Append a loss to a forward function ---------------===//
//
// `loom-attach-loss` turns `@forward(inputs..., params...) -> (outputs...)`
// into `@forward(inputs..., labels, params...) -> (loss)`: it adds the labels
// as an input argument (inserted after the existing inputs so that inputs
// stay first) and computes `loss = <loss>(output, labels)` from the chosen
// model output. The other outputs are dropped: the training entry points
// need the loss only, and evaluation uses the original model.
//
// Invariants: afterwards `@forward` has exactly one result, a 0-D float
// tensor marked `loom.output = "loss"`. With `loss=auto` a model that already
// returns such a result is left untouched (e.g. ONNX SoftmaxCrossEntropyLoss).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "loom-attach-loss"

namespace loom {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// Index of the result named `loss` that is a float scalar, if any.
std::optional<unsigned> findScalarLoss(func::FuncOp func) {
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[i]);
    auto name = func.getResultAttrOfType<StringAttr>(i, kOutputAttr);
    if (type && type.getRank() == 0 && isa<FloatType>(type.getElementType()) &&
        (!name || name.getValue() == "loss"))
      return i;
  }
  return std::nullopt;
}

struct AttachLossPass : loom::impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    if (!func) {
      module.emitError("loom-attach-loss: the module has no @forward");
      return signalPassFailure();
    }
    if (loss != "auto" && loss != "cross_entropy" && loss != "mse") {
      func.emitError() << "loom-attach-loss: unknown loss '" << loss
                       << "' (expected cross_entropy, mse or auto)";
      return signalPassFailure();
    }
    // The model as given, for evaluation (predictions, accuracy), before
    // @forward is turned into the loss.
    if (keepPredict && !module.lookupSymbol("predict")) {
      OpBuilder b(func);
      auto predict = cast<func::FuncOp>(b.clone(*func));
      predict.setSymName("predict");
    }
    if (reduction != "mean" && reduction != "sum") {
      func.emitError() << "loom-attach-loss: unknown reduction '" << reduction
                       << "' (expected mean or sum)";
      return signalPassFailure();
    }
    if (loss == "auto") {
      if (auto index = findScalarLoss(func)) {
        keepOnly(func, *index);
        return;
      }
      func.emitError() << "the model does not compute a loss (no scalar "
                       << "output named 'loss'): choose one with "
                       << "--loss=cross_entropy or --loss=mse";
      return signalPassFailure();
    }

    // The model output the loss reads.
    std::optional<unsigned> outIndex;
    if (output.empty()) {
      if (func.getNumResults() != 1) {
        func.emitError() << "the model has " << func.getNumResults()
                         << " outputs: name the one the loss reads (output=)";
        return signalPassFailure();
      }
      outIndex = 0;
    } else {
      for (unsigned i = 0; i < func.getNumResults(); ++i)
        if (auto name = func.getResultAttrOfType<StringAttr>(i, kOutputAttr))
          if (name.getValue() == output)
            outIndex = i;
      if (!outIndex) {
        func.emitError() << "the model has no output named '" << output << "'";
        return signalPassFailure();
      }
    }
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto name = func.getArgAttrOfType<StringAttr>(i, kInputAttr))
        if (name.getValue() == labels) {
          func.emitError() << "the model already has an input named '"
                           << labels << "': choose another --labels name";
          return signalPassFailure();
        }

    auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value prediction = returnOp.getOperand(*outIndex);
    auto predType = cast<RankedTensorType>(prediction.getType());
    if (!isa<FloatType>(predType.getElementType())) {
      func.emitError() << "the output the loss reads must be floating point, "
                       << "got " << predType;
      return signalPassFailure();
    }

    // Labels: class indices without the class dimension for cross-entropy,
    // the prediction's type for mse.
    RankedTensorType labelType;
    bool lastAxisClasses = false;
    if (loss == "cross_entropy") {
      if (predType.getRank() < 2) {
        func.emitError() << "cross_entropy needs logits of rank >= 2 ([N, C, "
                         << "...]), got " << predType;
        return signalPassFailure();
      }
      if (labelsDtype != "i64" && labelsDtype != "i32") {
        func.emitError() << "labels-dtype must be i64 or i32";
        return signalPassFailure();
      }
      int64_t rank = predType.getRank();
      int64_t axis = classAxis < 0 ? classAxis + rank : classAxis;
      if (axis != 1 && axis != rank - 1) {
        func.emitError() << "class-axis must be 1 or the last dimension";
        return signalPassFailure();
      }
      lastAxisClasses = axis == rank - 1 && rank > 2;
      SmallVector<int64_t> shape(predType.getShape());
      shape.erase(shape.begin() + axis);
      OpBuilder b(&getContext());
      labelType = RankedTensorType::get(
          shape, labelsDtype == "i64" ? b.getI64Type() : b.getI32Type());
    } else {
      labelType = predType;
    }

    // Insert the labels after the last input argument.
    unsigned insertAt = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (func.getArgAttr(i, kInputAttr))
        insertAt = i + 1;
    OpBuilder b(&getContext());
    Location loc = NameLoc::get(b.getStringAttr("loss"), func.getLoc());
    if (failed(func.insertArgument(
            insertAt, labelType,
            b.getDictionaryAttr(
                b.getNamedAttr(kInputAttr, b.getStringAttr(labels))),
            loc))) {
      func.emitError("cannot add the labels argument");
      return signalPassFailure();
    }
    Value labelArg = func.getArgument(insertAt);

    b.setInsertionPoint(returnOp);
    Reduction red = reduction == "sum" ? Reduction::Sum : Reduction::Mean;
    Value lossValue;
    if (loss == "cross_entropy") {
      IntegerAttr ignore = b.getI64IntegerAttr(ignoreIndex);
      Value logits = prediction, flatLabels = labelArg;
      if (lastAxisClasses) {
        // [d0, ..., C] -> [d0 * ..., C]: cross_entropy reads classes on
        // dimension 1.
        int64_t classes = predType.getShape().back();
        int64_t rows = predType.getNumElements() / classes;
        logits = ReshapeOp::create(
            b, loc, RankedTensorType::get({rows, classes}, predType.getElementType()),
            prediction);
        flatLabels = ReshapeOp::create(
            b, loc, RankedTensorType::get({rows}, labelType.getElementType()),
            labelArg);
      }
      auto op = createInferred<CrossEntropyOp>(b, loc, logits, flatLabels,
                                               red, ignore);
      if (failed(op))
        return signalPassFailure();
      lossValue = op->getResult();
    } else {
      auto op = createInferred<MseOp>(b, loc, prediction, labelArg, red);
      if (failed(op))
        return signalPassFailure();
      lossValue = op->getResult();
    }
    func::ReturnOp::create(b, returnOp.getLoc(), ValueRange{lossValue});
    returnOp.erase();
    func.setType(b.getFunctionType(func.getArgumentTypes(),
                                   {lossValue.getType()}));
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
        b.getNamedAttr(kOutputAttr, b.getStringAttr("loss")))});
  }

  /// Drops every result but `index` (which becomes the loss).
  void keepOnly(func::FuncOp func, unsigned index) {
    if (func.getNumResults() == 1)
      return;
    auto returnOp = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder b(returnOp);
    Value v = returnOp.getOperand(index);
    func::ReturnOp::create(b, returnOp.getLoc(), ValueRange{v});
    returnOp.erase();
    func.setType(b.getFunctionType(func.getArgumentTypes(), {v.getType()}));
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{b.getDictionaryAttr(
        b.getNamedAttr(kOutputAttr, b.getStringAttr("loss")))});
  }
};
} // namespace
