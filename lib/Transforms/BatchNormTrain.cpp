//===- BatchNormTrain.cpp - Batch norm in training mode -------------------===//
//
// `loom-batch-norm-train` turns each `loom.batch_norm` that carries
// `momentum` in the training forward into training-mode batch
// normalization:
//
//   %y = loom.batch_norm %x, %s, %b, %rm, %rv epsilon = e momentum = m
//
// becomes
//
//   %mean, %var = loom.batch_norm_stats %x
//   %y = loom.batch_norm %x, %s, %b, %mean, %var epsilon = e
//   new %rm = m * %rm + (1 - m) * %mean
//   new %rv = m * %rv + (1 - m) * %var * n / (n - 1)
//
// (n: the values per channel; PyTorch keeps the unbiased variance) and the
// two new values are returned, marked `loom.buffer = "<name of %rm / %rv>"`.
// %rm and %rv must be the function's `loom.buffer` arguments, each read by
// one batch norm only (a buffer has one update).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace loom {
#define GEN_PASS_DEF_BATCHNORMTRAINPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

struct BatchNormTrainPass
    : loom::impl::BatchNormTrainPassBase<BatchNormTrainPass> {
  using BatchNormTrainPassBase::BatchNormTrainPassBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>(entry);
    if (!func || func.isExternal()) {
      getOperation().emitError()
          << "loom-batch-norm-train: the module has no @" << entry
          << " function with a body";
      return signalPassFailure();
    }
    SmallVector<BatchNormOp> training;
    func.walk([&](BatchNormOp bn) {
      if (bn.getMomentum())
        training.push_back(bn);
    });
    if (training.empty())
      return;

    SmallVector<Value> newValues;
    SmallVector<DictionaryAttr> newAttrs;
    llvm::StringMap<Location> updated; // buffer name -> its batch norm
    for (BatchNormOp bn : training) {
      // The running statistics: buffer arguments of this function.
      auto bufferName = [&](Value v) -> StringAttr {
        auto arg = dyn_cast<BlockArgument>(v);
        if (!arg || arg.getOwner()->getParentOp() != func)
          return {};
        return func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                 kBufferAttr);
      };
      StringAttr meanName = bufferName(bn.getMean());
      StringAttr varName = bufferName(bn.getVariance());
      if (!meanName || !varName) {
        bn.emitError() << "a batch norm that trains (it has a momentum) "
                       << "needs running statistics that are arguments "
                       << "marked " << kBufferAttr;
        return signalPassFailure();
      }
      for (StringAttr name : {meanName, varName}) {
        auto [it, inserted] = updated.try_emplace(name.getValue(), bn.getLoc());
        if (!inserted) {
          InFlightDiagnostic d = bn.emitError()
                                 << "buffer '" << name.getValue()
                                 << "' is the running statistics of two "
                                 << "batch norms that train; it can have "
                                 << "one update only";
          d.attachNote(it->second) << "the other batch norm";
          return signalPassFailure();
        }
      }

      OpBuilder b(bn);
      Location loc = bn.getLoc();
      Value x = bn.getX();
      auto stats = createInferred<BatchNormStatsOp>(b, loc, x);
      if (failed(stats)) {
        bn.emitError("cannot compute the batch statistics of this input");
        return signalPassFailure();
      }
      Value mean = stats->getMean(), var = stats->getVariance();
      Value y = BatchNormOp::create(b, loc, x, bn.getScale(), bn.getBias(),
                                    mean, var, bn.getEpsilonAttr(),
                                    FloatAttr());
      bn.getResult().replaceAllUsesWith(y);

      // The running statistics' update.
      auto xType = cast<RankedTensorType>(x.getType());
      int64_t perChannel = xType.getNumElements() / xType.getDimSize(1);
      double m = bn.getMomentum()->convertToDouble();
      auto statType = cast<RankedTensorType>(mean.getType());
      auto c = [&](double v) { return splatConstant(b, loc, statType, v); };
      auto blend = [&](Value running, Value batch, double scale) {
        Value keep = MulOp::create(b, loc, running, c(m));
        Value take = MulOp::create(b, loc, batch, c((1.0 - m) * scale));
        return AddOp::create(b, loc, keep, take).getResult();
      };
      double unbias = perChannel > 1 ? double(perChannel) / (perChannel - 1)
                                     : 1.0;
      newValues.push_back(blend(bn.getMean(), mean, 1.0));
      newValues.push_back(blend(bn.getVariance(), var, unbias));
      for (StringAttr name : {meanName, varName})
        newAttrs.push_back(
            b.getDictionaryAttr(b.getNamedAttr(kBufferAttr, name)));
      bn.erase();
      ++numRewritten;
    }

    // Return the new values after the function's results.
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    SmallVector<Value> results(ret.getOperands());
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      resultAttrs.push_back(func.getResultAttrDict(i)
                                ? func.getResultAttrDict(i)
                                : DictionaryAttr::get(&getContext()));
    results.append(newValues);
    resultAttrs.append(newAttrs);
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    func.setFunctionType(b.getFunctionType(func.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
    func.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
