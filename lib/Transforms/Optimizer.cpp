//===- Optimizer.cpp - Optimizer update and training-step entry points ----===//
//
// `loom-optimizer` reads `@forward_backward(args...) -> (loss, grads...)`
// (written by loom-autodiff; gradients marked `loom.grad = "<param>"`) and
// adds two entry points:
//
//   @apply_optimizer(params..., state..., step, grads...)
//       -> (new params..., new state..., step + 1)
//   @train_step(forward_backward's args..., state..., step)
//       -> (loss, new params..., new state..., step + 1, new buffers...)
//
// The update is written with the dialect's elementwise and reduction ops, so
// the interpreter runs it as is and loom-fuse turns it into pointwise
// kernels. The learning rate is computed in the graph from the step counter
// (a 0-D i64 input named "step", counting completed steps from 0).
//
// Update rules (g is the gradient after global-norm clipping, t = step + 1):
//   sgd       p -= lr * (g + wd p)
//   momentum  b = mu b + (g + wd p);  p -= lr b          (PyTorch SGD)
//   nesterov  b = mu b + (g + wd p);  p -= lr (g + wd p + mu b)
//   adam      m, v on g + wd p, bias-corrected; p -= lr m^/(sqrt(v^) + eps)
//   adamw     p *= 1 - lr wd, then adam on g            (PyTorch AdamW)
//   adafactor second moment factored into row/column means for matrices
//             (Shazeer & Stern 2018, beta2_t = 1 - t^-0.8, update clipped
//             to RMS 1, no first moment); decoupled weight decay.
// Optimizer state is named `<param>.<slot>` and marked `loom.opt_state`.
//
// Dynamic loss scaling (when loom-autodiff gave @forward_backward a
// `loss_scale` argument): the state grows by `loss_scale`,
// `loss_scale.good_steps` and `loss_scale.skipped`, the outputs by
// `loss_scale_used` and `skipped_steps`; gradients are unscaled before
// clipping, and a step with a non-finite gradient keeps every parameter and
// state tensor (Passes.td has the rules).
//
//===----------------------------------------------------------------------===//

#include "DataParallel.h"
#include "TensorParallel.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Import/GraphBuilder.h"
#include "loom/Import/Import.h"
#include "loom/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

#include <cmath>

#define DEBUG_TYPE "loom-optimizer"

namespace loom {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// Builds scalar arithmetic on 0-D f32 tensors and its broadcasts.
struct Math {
  OpBuilder &b;
  Location loc;

  RankedTensorType scalarType() { return RankedTensorType::get({}, b.getF32Type()); }
  Value c(double v, Type elt = nullptr) {
    auto type = RankedTensorType::get({}, elt ? elt : b.getF32Type());
    return splatConstant(b, loc, type, v);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  /// A 0-D value broadcast to `like`'s shape, in `like`'s element type.
  Value splat(Value scalar, Value like) {
    auto type = cast<RankedTensorType>(like.getType());
    auto st = cast<RankedTensorType>(scalar.getType());
    if (st.getElementType() != type.getElementType())
      scalar = CastOp::create(
          b, loc, RankedTensorType::get({}, type.getElementType()), scalar);
    if (type.getRank() == 0)
      return scalar;
    return BroadcastInDimOp::create(b, loc, type, scalar, ArrayRef<int64_t>{});
  }
  Value sumAll(Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    SmallVector<int64_t> dims;
    for (int64_t i = 0; i < t.getRank(); ++i)
      dims.push_back(i);
    return *createInferred<ReduceSumOp>(b, loc, x, dims, false);
  }
  Value meanOver(Value x, ArrayRef<int64_t> dims) {
    return *createInferred<ReduceMeanOp>(b, loc, x, dims, false);
  }
  Value toF32(Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    if (t.getElementType().isF32())
      return x;
    return CastOp::create(b, loc, RankedTensorType::get(t.getShape(), b.getF32Type()), x);
  }
};

struct ParamInfo {
  std::string name;
  RankedTensorType type;
  /// What @apply_optimizer updates: `type`, or one rank's shard of it.
  RankedTensorType applyType;
  SmallVector<std::string> slots; // state slot names, e.g. adam_m
  SmallVector<RankedTensorType> slotTypes;
  /// Its kShardAttr when tensor parallelism splits it (`type` is then the
  /// rank's block), else null.
  DictionaryAttr tpShard;
};

struct OptimizerPass : loom::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  /// Checks `grad-compression` (the grammar the runtime reads) and records
  /// it on the module for the plan.
  LogicalResult recordGradCompression(ModuleOp module) {
    StringRef spec = gradCompression;
    if (spec == "none")
      return success();
    auto bad = [&](StringRef why) {
      return module.emitError() << "grad-compression '" << spec << "': " << why
                                << " (expected none, powersgd:rank=R, "
                                   "topk:FRACTION or int8)";
    };
    if (dp <= 1)
      return bad("compresses the data-parallel gradient reduction: needs "
                 "dp > 1");
    auto [method, arg] = spec.split(':');
    if (method == "powersgd") {
      int64_t rank = 0;
      if (!arg.consume_front("rank=") || arg.getAsInteger(10, rank) ||
          rank < 1)
        return bad("powersgd takes rank=R, R a positive integer");
    } else if (method == "topk") {
      double fraction = 0;
      if (arg.getAsDouble(fraction) || !(fraction > 0 && fraction <= 1))
        return bad("topk takes a fraction in (0, 1]");
    } else if (spec != "int8") {
      return bad("unknown method");
    }
    module->setAttr(kGradCompressionAttr,
                    StringAttr::get(module.getContext(), spec));
    return success();
  }

  LogicalResult checkOptions(func::FuncOp fb) {
    static const char *known[] = {"sgd", "momentum", "nesterov", "adam",
                                  "adamw", "adafactor"};
    if (!llvm::is_contained(known, StringRef(optimizer)))
      return fb.emitError() << "unknown optimizer '" << optimizer
                            << "' (expected sgd, momentum, nesterov, adam, "
                            << "adamw or adafactor)";
    static const char *schedules[] = {"constant", "warmup", "cosine",
                                      "warmup-cosine"};
    if (!llvm::is_contained(schedules, StringRef(schedule)))
      return fb.emitError() << "unknown schedule '" << schedule
                            << "' (expected constant, warmup, cosine or "
                            << "warmup-cosine)";
    if (!(lr > 0))
      return fb.emitError() << "lr must be positive, got " << lr;
    if (weightDecay < 0 || clipNorm < 0 || momentum < 0 || momentum >= 1 ||
        beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1 || eps <= 0)
      return fb.emitError() << "optimizer hyper-parameters out of range "
                            << "(weight-decay >= 0, clip-norm >= 0, momentum, "
                            << "beta1, beta2 in [0, 1), eps > 0)";
    if ((schedule == "warmup" || schedule == "warmup-cosine") &&
        warmupSteps <= 0)
      return fb.emitError() << "schedule '" << schedule
                            << "' needs warmup-steps > 0";
    if ((schedule == "cosine" || schedule == "warmup-cosine") &&
        totalSteps <= warmupSteps)
      return fb.emitError() << "schedule '" << schedule
                            << "' needs total-steps > warmup-steps";
    if (!(lossScaleInit > 0 && std::isfinite(lossScaleInit)) ||
        !(lossScaleGrowth >= 1 && std::isfinite(lossScaleGrowth)) ||
        !(lossScaleBackoff > 0 && lossScaleBackoff < 1) ||
        lossScaleGrowthInterval < 1)
      return fb.emitError()
             << "loss scaling options out of range (loss-scale-init > 0, "
             << "loss-scale-growth >= 1, loss-scale-backoff in (0, 1), "
             << "loss-scale-growth-interval >= 1)";
    return success();
  }

  SmallVector<std::string> slotsFor(RankedTensorType type) {
    StringRef o = optimizer;
    if (o == "momentum" || o == "nesterov")
      return {"momentum"};
    if (o == "adam" || o == "adamw")
      return {"adam_m", "adam_v"};
    if (o == "adafactor") {
      if (type.getRank() >= 2)
        return {"adafactor_row", "adafactor_col"};
      return {"adafactor_v"};
    }
    return {};
  }

  RankedTensorType slotType(RankedTensorType p, StringRef slot) {
    SmallVector<int64_t> shape(p.getShape());
    if (slot == "adafactor_row")
      shape.pop_back(); // mean over the last dimension
    else if (slot == "adafactor_col")
      shape.erase(shape.end() - 2); // mean over the second-to-last
    return RankedTensorType::get(shape, p.getElementType());
  }

  /// The learning rate at 0-D i64 `step`, as a 0-D f32 value.
  Value learningRate(Math &m, Value step) {
    Value s = CastOp::create(m.b, m.loc, m.scalarType(), step);
    double w = static_cast<double>(warmupSteps);
    double total = static_cast<double>(totalSteps);
    Value base = m.c(lr);
    auto cosineAt = [&](Value progress) {
      // lr_min + (lr - lr_min) * (1 + cos(pi * min(progress, 1))) / 2
      Value p = m.min(progress, m.c(1.0));
      Value cosv = CosOp::create(m.b, m.loc, m.mul(p, m.c(M_PI)));
      double lrMin = lr * minLrRatio;
      return m.add(m.c(lrMin),
                   m.mul(m.c((lr - lrMin) * 0.5), m.add(m.c(1.0), cosv)));
    };
    if (schedule == "constant")
      return base;
    if (schedule == "warmup")
      return m.mul(base, m.min(m.c(1.0), m.div(m.add(s, m.c(1.0)), m.c(w))));
    if (schedule == "cosine")
      return cosineAt(m.div(s, m.c(total)));
    // warmup-cosine: linear warmup, then cosine over the remaining steps.
    Value warm = m.mul(base, m.div(m.add(s, m.c(1.0)), m.c(w)));
    Value decay = cosineAt(m.div(m.max(m.sub(s, m.c(w)), m.c(0.0)),
                                 m.c(total - w)));
    Value inWarmup = CompareOp::create(
        m.b, m.loc, RankedTensorType::get({}, m.b.getI1Type()),
        ComparePredicate::LT, s, m.c(w));
    return SelectOp::create(m.b, m.loc, inWarmup, warm, decay);
  }

  /// Emits one parameter's update; appends the new parameter then the new
  /// state values to `results`.
  void update(Math &m, const ParamInfo &info, Value p, ValueRange state,
              Value g, Value lrScalar, Value t, SmallVectorImpl<Value> &results) {
    StringRef o = optimizer;
    Value lrv = m.splat(lrScalar, p);
    Type elt = info.type.getElementType();
    auto cst = [&](double v) { return m.splat(m.c(v), p); };
    (void)elt;
    bool decoupled = o == "adamw" || o == "adafactor";
    Value gd = g;
    if (weightDecay > 0 && !decoupled)
      gd = m.add(g, m.mul(cst(weightDecay), p));
    if (weightDecay > 0 && decoupled) // p *= 1 - lr * wd
      p = m.sub(p, m.mul(m.mul(lrv, cst(weightDecay)), p));

    if (o == "sgd") {
      results.push_back(m.sub(p, m.mul(lrv, gd)));
      return;
    }
    if (o == "momentum" || o == "nesterov") {
      Value buf = m.add(m.mul(cst(momentum), state[0]), gd);
      Value dir = o == "nesterov" ? m.add(gd, m.mul(cst(momentum), buf)) : buf;
      results.push_back(m.sub(p, m.mul(lrv, dir)));
      results.push_back(buf);
      return;
    }
    if (o == "adam" || o == "adamw") {
      Value mNew = m.add(m.mul(cst(beta1), state[0]), m.mul(cst(1 - beta1), gd));
      Value vNew = m.add(m.mul(cst(beta2), state[1]),
                         m.mul(cst(1 - beta2), m.mul(gd, gd)));
      // Bias corrections 1 - beta^t as scalars.
      Value bc1 = m.sub(m.c(1.0), PowOp::create(m.b, m.loc, m.c(beta1), t));
      Value bc2 = m.sub(m.c(1.0), PowOp::create(m.b, m.loc, m.c(beta2), t));
      Value mHat = m.div(mNew, m.splat(bc1, p));
      Value vHat = m.div(vNew, m.splat(bc2, p));
      Value step = m.div(mHat, m.add(m.sqrt(vHat), cst(eps)));
      results.push_back(m.sub(p, m.mul(lrv, step)));
      results.push_back(mNew);
      results.push_back(vNew);
      return;
    }
    // adafactor
    Value beta2t = m.sub(m.c(1.0), PowOp::create(m.b, m.loc, t, m.c(-0.8)));
    Value g2 = m.add(m.mul(g, g), cst(1e-30));
    Value u;
    SmallVector<Value> newState;
    int64_t rank = info.type.getRank();
    if (rank >= 2) {
      Value rowMean = m.meanOver(g2, {rank - 1});
      Value colMean = m.meanOver(g2, {rank - 2});
      Value r = m.add(m.mul(m.splat(beta2t, state[0]), state[0]),
                      m.mul(m.splat(m.sub(m.c(1.0), beta2t), rowMean), rowMean));
      Value c = m.add(m.mul(m.splat(beta2t, state[1]), state[1]),
                      m.mul(m.splat(m.sub(m.c(1.0), beta2t), colMean), colMean));
      // v = r c^T / mean(r): broadcast r along columns, c along rows.
      SmallVector<int64_t> rDims, cDims;
      for (int64_t i = 0; i < rank - 1; ++i)
        rDims.push_back(i);
      for (int64_t i = 0; i < rank; ++i)
        if (i != rank - 2)
          cDims.push_back(i);
      Value rB = BroadcastInDimOp::create(m.b, m.loc, info.type, r, rDims);
      Value cB = BroadcastInDimOp::create(m.b, m.loc, info.type, c, cDims);
      Value rMean = m.meanOver(r, {rank - 2});
      SmallVector<int64_t> mDims;
      for (int64_t i = 0; i < rank - 2; ++i)
        mDims.push_back(i);
      Value rMeanB = BroadcastInDimOp::create(m.b, m.loc, info.type, rMean, mDims);
      Value v = m.div(m.mul(rB, cB), rMeanB);
      u = m.div(g, m.sqrt(v));
      newState = {r, c};
    } else {
      Value v = m.add(m.mul(m.splat(beta2t, state[0]), state[0]),
                      m.mul(m.splat(m.sub(m.c(1.0), beta2t), g2), g2));
      u = m.div(g, m.sqrt(v));
      newState = {v};
    }
    // Clip the update to RMS 1.
    auto n = static_cast<double>(info.type.getNumElements());
    Value rms = m.sqrt(m.div(m.sumAll(m.toF32(m.mul(u, u))), m.c(n)));
    Value scale = m.max(m.c(1.0), rms);
    u = m.div(u, m.splat(scale, u));
    results.push_back(m.sub(p, m.mul(lrv, u)));
    results.append(newState.begin(), newState.end());
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fb = module.lookupSymbol<func::FuncOp>("forward_backward");
    if (!fb) {
      module.emitError("loom-optimizer needs @forward_backward: run "
                       "loom-autodiff first");
      return signalPassFailure();
    }
    if (failed(checkOptions(fb)))
      return signalPassFailure();
    DataParallel dpPlan{dp, zero};
    if (failed(dpPlan.setUp(module, optimizer)))
      return signalPassFailure();
    if (failed(recordGradCompression(module)))
      return signalPassFailure();
    if (meshAxisSize(fb, kTensorParallelAxis) > 1 && dpPlan.shardsUpdate()) {
      module.emitError() << "zero=" << static_cast<int64_t>(zero) << " with tensor parallelism "
                         << "(a 'tp' mesh axis) is not supported yet: "
                         << "use zero=0";
      return signalPassFailure();
    }
    if (failed(fixTensorParallelGradients(fb)))
      return signalPassFailure();
    for (StringRef name : {"apply_optimizer", "train_step"})
      if (module.lookupSymbol(name)) {
        module.emitError() << "the module already has @" << name;
        return signalPassFailure();
      }

    // Parameters, in @forward_backward's argument order, and their grads.
    SmallVector<ParamInfo> params;
    SmallVector<unsigned> paramArgIndex;
    llvm::StringMap<unsigned> gradResult;
    for (unsigned i = 1; i < fb.getNumResults(); ++i)
      if (auto name = fb.getResultAttrOfType<StringAttr>(i, kGradAttr))
        gradResult[name.getValue()] = i;
    for (unsigned i = 0; i < fb.getNumArguments(); ++i) {
      auto name = fb.getArgAttrOfType<StringAttr>(i, kParamAttr);
      if (!name)
        continue;
      if (!gradResult.count(name.getValue())) {
        fb.emitError() << "parameter '" << name.getValue()
                       << "' has no gradient result (loom.grad)";
        return signalPassFailure();
      }
      ParamInfo info;
      info.name = name.getValue().str();
      info.type = cast<RankedTensorType>(fb.getArgumentTypes()[i]);
      if (isTensorParallelShard(fb, i))
        info.tpShard = fb.getArgAttrOfType<DictionaryAttr>(i, kShardAttr);
      info.applyType = dpPlan.shardsUpdate() ? dpPlan.shardType(info.type)
                                             : info.type;
      for (const std::string &slot : slotsFor(info.applyType)) {
        info.slots.push_back(slot);
        info.slotTypes.push_back(slotType(info.applyType, slot));
      }
      params.push_back(std::move(info));
      paramArgIndex.push_back(i);
    }
    if (params.empty()) {
      fb.emitError("the model has no parameter to optimize");
      return signalPassFailure();
    }

    // Dynamic loss scaling: @forward_backward's `loss_scale` argument.
    std::optional<unsigned> scaleArg;
    for (unsigned i = 0; i < fb.getNumArguments(); ++i)
      if (auto name = fb.getArgAttrOfType<StringAttr>(i, kOptStateAttr);
          name && name.getValue() == kLossScaleName)
        scaleArg = i;
    bool scaling = scaleArg.has_value();

    OpBuilder b(&getContext());
    Location loc = NameLoc::get(b.getStringAttr("optimizer"), fb.getLoc());
    auto stepType = RankedTensorType::get({}, b.getI64Type());
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    auto named = [&](StringRef attr, StringRef value) {
      return b.getDictionaryAttr(b.getNamedAttr(attr, b.getStringAttr(value)));
    };
    // The same, marked as one rank's shard of a `full` tensor.
    auto namedShard = [&](StringRef attr, StringRef value,
                          RankedTensorType full) {
      return b.getDictionaryAttr(
          {b.getNamedAttr(attr, b.getStringAttr(value)),
           b.getNamedAttr(kShardAttr, dpPlan.shardAttr(b, full))});
    };
    // A tensor parallelism's split parameter's state, update and gradient
    // are split alike.
    auto namedFor = [&](StringRef attr, StringRef value, const ParamInfo &p,
                        bool sharded) {
      if (sharded)
        return namedShard(attr, value, p.type);
      if (p.tpShard)
        return b.getDictionaryAttr(
            {b.getNamedAttr(attr, b.getStringAttr(value)),
             b.getNamedAttr(kShardAttr, p.tpShard)});
      return named(attr, value);
    };
    bool shardUpdate = dpPlan.shardsUpdate();
    // The loss-scaling state after the optimizer's: name, type, attributes.
    std::string goodName = (kLossScaleName + ".good_steps").str();
    std::string skippedName = (kLossScaleName + ".skipped").str();
    SmallVector<std::pair<std::string, Type>> scaleState;
    if (scaling)
      scaleState = {{kLossScaleName.str(), f32Scalar},
                    {goodName, stepType},
                    {skippedName, stepType}};
    auto scaleStateAttrs = [&](StringRef name) {
      NamedAttrList attrs;
      attrs.set(kOptStateAttr, b.getStringAttr(name));
      if (name == kLossScaleName)
        attrs.set(kInitAttr,
                  DenseElementsAttr::get(
                      f32Scalar, b.getFloatAttr(b.getF32Type(), lossScaleInit)));
      return attrs.getDictionary(&getContext());
    };

    // @apply_optimizer(params..., state..., step, grads...).
    SmallVector<Type> argTypes, resultTypes;
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    for (const ParamInfo &p : params) {
      argTypes.push_back(p.applyType);
      argAttrs.push_back(namedFor(kParamAttr, p.name, p, shardUpdate));
    }
    for (const ParamInfo &p : params)
      for (auto [slot, type] : llvm::zip(p.slots, p.slotTypes)) {
        argTypes.push_back(type);
        argAttrs.push_back(
            namedFor(kOptStateAttr, p.name + "." + slot, p, shardUpdate));
      }
    for (auto &[name, type] : scaleState) {
      argTypes.push_back(type);
      argAttrs.push_back(scaleStateAttrs(name));
    }
    argTypes.push_back(stepType);
    argAttrs.push_back(named(kInputAttr, "step"));
    for (const ParamInfo &p : params) {
      argTypes.push_back(p.applyType);
      argAttrs.push_back(
          namedFor(kInputAttr, p.name + ".grad", p, shardUpdate));
    }
    for (const ParamInfo &p : params) {
      resultTypes.push_back(p.applyType);
      resultAttrs.push_back(namedFor(kOutputAttr, p.name, p, shardUpdate));
    }
    for (const ParamInfo &p : params)
      for (auto [slot, type] : llvm::zip(p.slots, p.slotTypes)) {
        resultTypes.push_back(type);
        resultAttrs.push_back(
            namedFor(kOutputAttr, p.name + "." + slot, p, shardUpdate));
      }
    for (auto &[name, type] : scaleState) {
      resultTypes.push_back(type);
      resultAttrs.push_back(named(kOutputAttr, name));
    }
    resultTypes.push_back(stepType);
    resultAttrs.push_back(named(kOutputAttr, "step"));
    if (scaling) {
      resultTypes.push_back(f32Scalar);
      resultAttrs.push_back(named(kOutputAttr, "loss_scale_used"));
      resultTypes.push_back(stepType);
      resultAttrs.push_back(named(kOutputAttr, "skipped_steps"));
    }

    b.setInsertionPointAfter(fb);
    auto apply = func::FuncOp::create(b, loc, "apply_optimizer",
                                      b.getFunctionType(argTypes, resultTypes));
    apply.setAllArgAttrs(argAttrs);
    apply.setAllResultAttrs(resultAttrs);
    // ZeRO 1 and 2: its parameters are the shards @train_step slices from
    // the whole ones it keeps, not state of their own: @train_step alone
    // calls it.
    if (shardUpdate && !dpPlan.shardsParams())
      apply.setPrivate();
    Block *body = apply.addEntryBlock();
    b.setInsertionPointToStart(body);
    Math m{b, loc};

    size_t numParams = params.size();
    size_t numState = 0;
    for (const ParamInfo &p : params)
      numState += p.slots.size();
    ValueRange args = body->getArguments();
    ValueRange pArgs = args.take_front(numParams);
    ValueRange sArgs = args.slice(numParams, numState);
    ValueRange lsArgs = args.slice(numParams + numState, scaleState.size());
    Value step = args[numParams + numState + scaleState.size()];
    ValueRange gArgs = args.take_back(numParams);
    auto i64c = [&](int64_t v) { return m.c(static_cast<double>(v), b.getI64Type()); };

    SmallVector<Value> grads(gArgs.begin(), gArgs.end());
    // Loss scaling: finite iff sum(g * 0) over every gradient is 0 (an inf
    // or NaN anywhere makes it NaN); then the gradients are unscaled.
    Value finite;
    if (scaling) {
      Value probe = m.c(0.0);
      for (Value g : grads)
        probe = m.add(probe, m.sumAll(m.toF32(m.mul(g, m.splat(m.c(0.0), g)))));
      if (shardUpdate) // every rank skips, or none
        probe = dpPlan.sum(b, loc, probe);
      finite = CompareOp::create(b, loc,
                                 RankedTensorType::get({}, b.getI1Type()),
                                 ComparePredicate::EQ, probe, m.c(0.0));
      Value inv = m.div(m.c(1.0), lsArgs[0]);
      for (Value &g : grads)
        g = m.mul(g, m.splat(inv, g));
    }

    // Global-norm clipping (PyTorch clip_grad_norm_: coef = max/(norm+1e-6),
    // clamped to 1), computed in f32.
    if (clipNorm > 0) {
      Value sq = m.c(0.0);
      for (Value g : grads)
        sq = m.add(sq, m.sumAll(m.toF32(m.mul(g, g))));
      if (shardUpdate)
        sq = dpPlan.sum(b, loc, sq);
      Value norm = m.sqrt(sq);
      Value coef = m.min(m.c(1.0), m.div(m.c(clipNorm), m.add(norm, m.c(1e-6))));
      for (Value &g : grads)
        g = m.mul(g, m.splat(coef, g));
    }

    Value lrScalar = learningRate(m, step);
    // t counts the updates applied: skipped steps do not advance it.
    Value applied = scaling ? m.sub(step, lsArgs[2]) : step;
    Value t = CastOp::create(b, loc, m.scalarType(), m.add(applied, i64c(1)));
    // With loss scaling, a step whose gradients are not finite keeps `old`.
    auto keepIfSkipped = [&](Value now, Value old) -> Value {
      if (!scaling)
        return now;
      auto type = cast<RankedTensorType>(old.getType());
      Value cond = finite;
      if (type.getRank() != 0)
        cond = BroadcastInDimOp::create(
            b, loc, RankedTensorType::get(type.getShape(), b.getI1Type()),
            finite, ArrayRef<int64_t>{});
      return SelectOp::create(b, loc, cond, now, old);
    };
    SmallVector<Value> newParams, newState;
    size_t stateOffset = 0;
    for (size_t i = 0; i < numParams; ++i) {
      const ParamInfo &info = params[i];
      Location ploc = NameLoc::get(b.getStringAttr("optimizer/" + info.name), fb.getLoc());
      Math pm{b, ploc};
      SmallVector<Value> out;
      ValueRange state = sArgs.slice(stateOffset, info.slots.size());
      update(pm, info, pArgs[i], state, grads[i], lrScalar, t, out);
      stateOffset += info.slots.size();
      newParams.push_back(keepIfSkipped(out[0], pArgs[i]));
      for (auto [now, old] : llvm::zip(ArrayRef(out).drop_front(), state))
        newState.push_back(keepIfSkipped(now, old));
    }
    SmallVector<Value> rets(newParams);
    rets.append(newState);
    Value skippedNow;
    if (scaling) {
      // GradScaler's update: back off on a skipped step, grow after
      // growth-interval good steps in a row.
      auto select = [&](Value c, Value x, Value y) -> Value {
        return SelectOp::create(b, loc, c, x, y);
      };
      Value scale = lsArgs[0], good = lsArgs[1], skipped = lsArgs[2];
      Value goodNext = m.add(good, i64c(1));
      Value grow = CompareOp::create(
          b, loc, RankedTensorType::get({}, b.getI1Type()),
          ComparePredicate::GE, goodNext, i64c(lossScaleGrowthInterval));
      Value grown = select(grow, m.mul(scale, m.c(lossScaleGrowth)), scale);
      rets.push_back(
          select(finite, grown, m.mul(scale, m.c(lossScaleBackoff))));
      rets.push_back(select(finite, select(grow, i64c(0), goodNext), i64c(0)));
      skippedNow = select(finite, skipped, m.add(skipped, i64c(1)));
      rets.push_back(skippedNow);
    }
    rets.push_back(AddOp::create(b, loc, step, i64c(1)));
    if (scaling) {
      rets.push_back(lsArgs[0]);
      rets.push_back(skippedNow);
    }
    func::ReturnOp::create(b, loc, rets);

    // @train_step(fb args..., state..., step) -> (loss, params..., state...,
    // step+1, ...). With loss scaling, fb's `loss_scale` argument is the
    // one state tensor both calls read; the other two follow the state.
    SmallVector<Type> tsArgs(fb.getArgumentTypes());
    SmallVector<DictionaryAttr> tsArgAttrs;
    for (unsigned i = 0; i < fb.getNumArguments(); ++i)
      tsArgAttrs.push_back(fb.getArgAttrDict(i) ? fb.getArgAttrDict(i)
                                                 : b.getDictionaryAttr({}));
    // ZeRO 3: the parameters are shards between steps.
    if (dpPlan.shardsParams())
      for (auto [p, idx] : llvm::zip(params, paramArgIndex)) {
        tsArgs[idx] = p.applyType;
        tsArgAttrs[idx] = namedShard(kParamAttr, p.name, p.type);
      }
    for (const ParamInfo &p : params)
      for (auto [slot, type] : llvm::zip(p.slots, p.slotTypes)) {
        tsArgs.push_back(type);
        tsArgAttrs.push_back(
            namedFor(kOptStateAttr, p.name + "." + slot, p, shardUpdate));
      }
    for (auto &[name, type] : ArrayRef(scaleState).drop_front(scaling ? 1 : 0)) {
      tsArgs.push_back(type);
      tsArgAttrs.push_back(scaleStateAttrs(name));
    }
    tsArgs.push_back(stepType);
    tsArgAttrs.push_back(named(kInputAttr, "step"));
    SmallVector<Type> tsResults{fb.getResultTypes()[0]};
    SmallVector<DictionaryAttr> tsResultAttrs{named(kOutputAttr, "loss")};
    tsResults.append(resultTypes);
    tsResultAttrs.append(resultAttrs);
    // ZeRO 1 and 2: the updated shards are gathered into whole parameters.
    bool gatherParams = shardUpdate && !dpPlan.shardsParams();
    if (gatherParams)
      for (auto [j, p] : llvm::enumerate(params)) {
        tsResults[1 + j] = p.type;
        tsResultAttrs[1 + j] = named(kOutputAttr, p.name);
      }
    // Buffers' new values (loom-batch-norm-train), named like the buffer.
    SmallVector<unsigned> bufferResults;
    for (unsigned i = 1; i < fb.getNumResults(); ++i)
      if (auto name = fb.getResultAttrOfType<StringAttr>(i, kBufferAttr)) {
        bufferResults.push_back(i);
        tsResults.push_back(fb.getResultTypes()[i]);
        tsResultAttrs.push_back(named(kOutputAttr, name.getValue()));
      }

    // Data parallelism: @apply_gradients(params..., state..., step,
    // grads...) averages this rank's gradients over the ranks (or takes
    // its shard of the average), updates, and gathers what ZeRO 1 and 2
    // shard; @train_step calls it after the backward, and loom-run calls
    // it once per step after accumulating micro-batches locally.
    // With tensor parallelism alone it is @apply_optimizer under the name
    // loom-run looks for in a plan with a mesh.
    func::FuncOp applyGrads;
    size_t numApplyResults = resultTypes.size();
    bool tensorParallel = meshAxisSize(fb, kTensorParallelAxis) > 1;
    if (dpPlan.enabled() || tensorParallel) {
      SmallVector<Type> gaArgs;
      SmallVector<DictionaryAttr> gaArgAttrs;
      for (auto [p, idx] : llvm::zip(params, paramArgIndex)) {
        gaArgs.push_back(tsArgs[idx]);
        gaArgAttrs.push_back(tsArgAttrs[idx]);
      }
      for (auto [i, type] : llvm::enumerate(argTypes))
        if (i >= numParams && i < argTypes.size() - numParams) {
          gaArgs.push_back(type); // state..., loss scaling, step
          gaArgAttrs.push_back(argAttrs[i]);
        }
      for (const ParamInfo &p : params) {
        gaArgs.push_back(p.type);
        gaArgAttrs.push_back(namedFor(kInputAttr, p.name + ".grad", p, false));
      }
      b.setInsertionPointAfter(apply);
      applyGrads = func::FuncOp::create(
          b, loc, "apply_gradients",
          b.getFunctionType(
              gaArgs, ArrayRef(tsResults).slice(1, numApplyResults)));
      applyGrads.setAllArgAttrs(gaArgAttrs);
      applyGrads.setAllResultAttrs(
          ArrayRef(tsResultAttrs).slice(1, numApplyResults));
      Block *gb = applyGrads.addEntryBlock();
      b.setInsertionPointToStart(gb);
      ValueRange gargs = gb->getArguments();
      SmallVector<Value> applyArgs;
      for (Value p : gargs.take_front(numParams))
        applyArgs.push_back(gatherParams ? dpPlan.localShard(b, loc, p) : p);
      ValueRange middle = gargs.drop_front(numParams).drop_back(numParams);
      applyArgs.append(middle.begin(), middle.end());
      for (auto [j, g] : llvm::enumerate(gargs.take_back(numParams))) {
        StringRef name = params[j].name;
        applyArgs.push_back(shardUpdate ? dpPlan.gradientShard(b, loc, g, name)
                            : dpPlan.enabled()
                                ? dpPlan.gradientMean(b, loc, g, name)
                                : g);
      }
      auto applyCall = func::CallOp::create(b, loc, apply, applyArgs);
      SmallVector<Value> rets(applyCall.getResults());
      if (gatherParams)
        for (auto [j, p] : llvm::enumerate(params))
          rets[j] = dpPlan.gather(b, loc, rets[j], p.type);
      func::ReturnOp::create(b, loc, rets);
    }

    b.setInsertionPointAfter(applyGrads ? applyGrads : apply);
    auto train = func::FuncOp::create(b, loc, "train_step",
                                      b.getFunctionType(tsArgs, tsResults));
    train.setAllArgAttrs(tsArgAttrs);
    train.setAllResultAttrs(tsResultAttrs);
    Block *tb = train.addEntryBlock();
    b.setInsertionPointToStart(tb);
    ValueRange targs = tb->getArguments();
    SmallVector<Value> fbArgs(targs.take_front(fb.getNumArguments()));
    if (dpPlan.shardsParams())
      for (auto [p, idx] : llvm::zip(params, paramArgIndex))
        fbArgs[idx] = dpPlan.gather(b, loc, targs[idx], p.type);
    auto call = func::CallOp::create(b, loc, fb, fbArgs);
    SmallVector<Value> applyArgs;
    for (unsigned idx : paramArgIndex)
      applyArgs.push_back(targs[idx]);
    ValueRange extra = targs.drop_front(fb.getNumArguments());
    applyArgs.append(extra.begin(), extra.begin() + numState); // state...
    if (scaling)
      applyArgs.push_back(targs[*scaleArg]);
    applyArgs.append(extra.begin() + numState, extra.end()); // ..., step
    for (const ParamInfo &p : params)
      applyArgs.push_back(call.getResult(gradResult[p.name]));
    auto applyCall =
        applyGrads ? func::CallOp::create(b, loc, applyGrads, applyArgs)
                   : func::CallOp::create(b, loc, apply, applyArgs);
    Value loss = call.getResult(0);
    SmallVector<Value> tsRets{dpPlan.enabled() ? dpPlan.mean(b, loc, loss)
                                               : loss};
    tsRets.append(applyCall.getResults().begin(), applyCall.getResults().end());
    // Buffers (running statistics): the ranks' new values averaged, so that
    // every rank keeps the same.
    for (unsigned i : bufferResults) {
      Value v = call.getResult(i);
      bool averaged = dpPlan.enabled() &&
                      isa<FloatType>(getElementTypeOrSelf(v.getType()));
      tsRets.push_back(averaged ? dpPlan.mean(b, loc, v) : v);
    }
    func::ReturnOp::create(b, loc, tsRets);
    if (dpPlan.shardsParams() && failed(dpPlan.shardEntryParams(module)))
      return signalPassFailure();
  }
};
} // namespace
