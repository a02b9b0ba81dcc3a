//===- OutlineKernels.cpp - loom-outline-kernels ---------------------------===//
//
// Each loom.fusion region of a fused, memory-planned module becomes a
// func.func of the kernel module nested in it (KernelInfo.h), still in loom
// ops on tensors; the fusion names it by `loom.kernel`. Kernels are keyed by
// their printed text under one placeholder name, so a region equal to one
// outlined before (train_step repeats forward_backward's and
// apply_optimizer's kernels, a model repeats its blocks) calls that kernel:
// it is compiled once. Entry functions other than the kernel module are
// left as they are: the plan writer reads them.
//
// In-place state: a result loom-plan-memory placed on the bytes of one of
// the fusion's arguments is materialized in that argument, which becomes
// writable; `loom.in_place` lists those pairs for loom-bufferize-kernels.
//
//===----------------------------------------------------------------------===//

#include "loom/Codegen/Kernels.h"
#include "loom/Codegen/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>

namespace loom {
#define GEN_PASS_DEF_OUTLINEKERNELSPASS
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

int64_t offsetOfArgument(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return -1;
  auto offset = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                   "loom.offset");
  return offset ? offset.getInt() : -1;
}

/// The results of `kernel` that share bytes with one of its arguments
/// (same offset and type: loom-plan-memory's in-place state update) are
/// made in that argument's buffer, and recorded for unifyInPlaceBuffers.
void markInPlaceResults(func::FuncOp func, FusionOp fusion,
                        func::FuncOp kernel) {
  auto offsets = fusion->getAttrOfType<DenseI64ArrayAttr>("loom.offsets");
  if (!offsets)
    return;
  SmallVector<int64_t> pairs;
  unsigned result = 0;
  for (auto [i, r] : llvm::enumerate(fusion.getResults())) {
    if (isEmptyTensor(r.getType()))
      continue;
    unsigned arg = 0;
    for (Value operand : fusion.getOperands()) {
      if (isEmptyTensor(operand.getType()))
        continue;
      if (static_cast<int64_t>(i) < offsets.size() && operand.getType() == r.getType() &&
          offsetOfArgument(func, operand) == offsets[i]) {
        pairs.append({result, arg});
        break;
      }
      ++arg;
    }
    ++result;
  }
  if (pairs.empty())
    return;
  // The result is made in its argument's buffer: the argument becomes
  // writable and the result is materialized in it (eliminate-empty-tensors
  // then lets the op that computes it write there directly). One-shot
  // bufferization's conflict analysis keeps that sound: were the argument
  // still read after the result is written, it would copy instead. A
  // result written straight into its out-param instead could be a
  // temporary's buffer reused early (bufferization may use a result's
  // buffer as scratch before the result's own op), overwriting the
  // argument while it is still to be read.
  auto ret = cast<func::ReturnOp>(kernel.getBody().front().getTerminator());
  OpBuilder rb(ret);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    unsigned r = pairs[i], a = pairs[i + 1];
    Value dest = kernel.getArgument(a);
    kernel.setArgAttr(a, bufferization::BufferizationDialect::kWritableAttrName,
                      rb.getBoolAttr(true));
    ret->setOperand(r, bufferization::MaterializeInDestinationOp::create(
                           rb, ret.getLoc(), ret->getOperand(r), dest)
                           .getResult());
  }
  pairs.insert(pairs.begin(), kernel.getNumArguments());
  kernel->setAttr(kInPlaceAttr,
                  DenseI64ArrayAttr::get(kernel.getContext(), pairs));
}

} // namespace

std::pair<unsigned, unsigned> loom::outlineKernels(ModuleOp module) {
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto kernels = ModuleOp::create(b, module.getLoc(), kKernelModuleName);
  kernels->setAttr(kKernelModuleAttr, b.getUnitAttr());
  b.setInsertionPointToEnd(kernels.getBody());
  unsigned numKernels = 0, numReused = 0;
  // Kernels by their text (under one placeholder name): a region the same
  // as one already outlined (train_step repeats forward_backward's and
  // apply_optimizer's kernels, forward repeats predict's; a model repeats
  // its blocks) calls that kernel instead of compiling a copy.
  llvm::StringMap<std::string> byText;
  // train_step first: the entry a training run calls names the kernels it
  // shares with the others (profiles and plans read loom_train_step_k*).
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  std::stable_partition(funcs.begin(), funcs.end(), [](func::FuncOp f) {
    return f.getName() == "train_step";
  });
  for (func::FuncOp func : funcs) {
    unsigned index = 0;
    for (auto fusion : func.getBody().getOps<FusionOp>()) {
      if (llvm::all_of(fusion.getResultTypes(), isEmptyTensor))
        continue; // Nothing to compute: no kernel, no step.
      std::string name =
          ("loom_" + func.getName() + "_k" + Twine(index++)).str();
      fusion->setAttr(kKernelAttr, b.getStringAttr(name));
      Block &body = fusion.getBody().front();
      SmallVector<Type> argTypes, resultTypes;
      for (Type t : body.getArgumentTypes())
        if (!isEmptyTensor(t))
          argTypes.push_back(t);
      for (Type t : fusion.getResultTypes())
        if (!isEmptyTensor(t))
          resultTypes.push_back(t);
      auto kernel = func::FuncOp::create(b, fusion.getLoc(), name,
                                         b.getFunctionType(argTypes,
                                                           resultTypes));
      Block *entry = kernel.addEntryBlock();
      OpBuilder kb = OpBuilder::atBlockEnd(entry);
      IRMapping map;
      unsigned next = 0;
      for (BlockArgument arg : body.getArguments()) {
        auto t = cast<RankedTensorType>(arg.getType());
        if (isEmptyTensor(t))
          map.map(arg, tensor::EmptyOp::create(kb, arg.getLoc(), t.getShape(),
                                               t.getElementType()));
        else
          map.map(arg, entry->getArgument(next++));
      }
      for (Operation &op : body.without_terminator())
        kb.clone(op, map);
      auto yield = cast<YieldOp>(body.getTerminator());
      SmallVector<Value> results;
      for (Value v : yield.getValues())
        if (!isEmptyTensor(v.getType()))
          results.push_back(map.lookupOrDefault(v));
      func::ReturnOp::create(kb, yield.getLoc(), results);
      // Inputs live in the arena beside other values: never written (but
      // where a result takes an input's place, below).
      for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
        kernel.setArgAttr(i, bufferization::BufferizationDialect::kWritableAttrName,
                          b.getBoolAttr(false));
      markInPlaceResults(func, fusion, kernel);
      std::string text;
      {
        llvm::raw_string_ostream os(text);
        kernel.setSymName("kernel");
        // Local scope: numbering the SSA names of the whole module (the
        // default for an op inside one) for every kernel took MobileNetV3's
        // outlining 7.7 s; the kernel is verified when the pass ends.
        kernel->print(os, OpPrintingFlags().useLocalScope().assumeVerified());
        kernel.setSymName(name);
      }
      auto [it, added] = byText.try_emplace(text, name);
      if (!added) {
        fusion->setAttr(kKernelAttr, b.getStringAttr(it->second));
        kernel.erase();
        ++numReused;
      } else {
        ++numKernels;
      }
    }
  }
  return {numKernels, numReused};
}

namespace {
struct OutlineKernelsPass
    : public loom::impl::OutlineKernelsPassBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (getKernelModule(module)) {
      module.emitError("loom-outline-kernels: the kernels are outlined "
                       "already (a module @")
          << kKernelModuleName << " exists)";
      return signalPassFailure();
    }
    auto [kernels, reused] = outlineKernels(module);
    numKernels = kernels;
    numReused = reused;
  }
};
} // namespace
