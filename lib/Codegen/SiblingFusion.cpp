//===- SiblingFusion.cpp - One loop for a kernel's same-shaped outputs ----===//
//
// Elementwise fusion (upstream) fuses a producer into a reader; when the
// producer is also a kernel output (AdamW's new moment, which the
// parameter update reads and the kernel returns) it stays, and the reader
// computes it again: three loops, each reading its inputs. Merging the
// loops that now read only the kernel's inputs makes one loop that reads
// each input once and writes every output (7 memory streams per parameter
// element for AdamW instead of 10), and CSE folds the repeated arithmetic.
//
//===----------------------------------------------------------------------===//

#include "SiblingFusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace loom {
namespace {

bool allParallel(linalg::GenericOp g) {
  return g.getNumParallelLoops() == g.getNumLoops() && g.hasPureTensorSemantics();
}

bool sameDomain(linalg::GenericOp a, linalg::GenericOp b) {
  SmallVector<int64_t> ra = a.getStaticLoopRanges(),
                       rb = b.getStaticLoopRanges();
  return ra == rb && !llvm::any_of(ra, ShapedType::isDynamic);
}

/// An op without operands that can be moved up freely (an empty tensor, a
/// constant).
bool movable(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         isa<tensor::EmptyOp, arith::ConstantOp>(op);
}

/// Whether `v` is available at `at` (same block), or can be made so.
bool availableAt(Value v, Operation *at) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return cast<BlockArgument>(v).getOwner() == at->getBlock();
  return (def->getBlock() == at->getBlock() && def->isBeforeInBlock(at)) ||
         movable(def);
}

/// Whether everything `g` reads, its operands and the values its body
/// takes from outside, is available at `at`.
bool readsAvailableAt(Operation *g, Operation *at,
                      OpOperand *except = nullptr) {
  for (OpOperand &operand : g->getOpOperands())
    if (&operand != except && !availableAt(operand.get(), at))
      return false;
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(g->getRegions(), captured);
  return llvm::all_of(captured, [&](Value v) { return availableAt(v, at); });
}

linalg::GenericOp merge(linalg::GenericOp first, linalg::GenericOp second) {
  OpBuilder b(first);
  // Operands of the second that are defined later but movable go first.
  for (Value v : second->getOperands())
    if (Operation *def = v.getDefiningOp();
        def && movable(def) && !(def->getBlock() == first->getBlock() &&
                                 def->isBeforeInBlock(first)))
      def->moveBefore(first);

  SmallVector<Value> inputs, outputs;
  SmallVector<AffineMap> inputMaps, outputMaps;
  llvm::DenseMap<std::pair<Value, AffineMap>, unsigned> inputIndex;
  // Block-argument positions of each generic's operands in the new body.
  SmallVector<unsigned> firstArgs, secondArgs;
  auto addInputs = [&](linalg::GenericOp g, SmallVector<unsigned> &args) {
    for (OpOperand *in : g.getDpsInputOperands()) {
      AffineMap map = g.getMatchingIndexingMap(in);
      auto [it, inserted] =
          inputIndex.try_emplace({in->get(), map}, inputs.size());
      if (inserted) {
        inputs.push_back(in->get());
        inputMaps.push_back(map);
      }
      args.push_back(it->second);
    }
  };
  addInputs(first, firstArgs);
  addInputs(second, secondArgs);
  // Every input is in place by now: outputs' arguments follow them.
  auto addOutputs = [&](linalg::GenericOp g, SmallVector<unsigned> &args) {
    for (OpOperand &out : g.getDpsInitsMutable()) {
      args.push_back(inputs.size() + outputs.size());
      outputs.push_back(out.get());
      outputMaps.push_back(g.getMatchingIndexingMap(&out));
    }
  };
  addOutputs(first, firstArgs);
  addOutputs(second, secondArgs);

  SmallVector<AffineMap> maps(inputMaps);
  maps.append(outputMaps);
  SmallVector<Type> resultTypes;
  for (Value v : outputs)
    resultTypes.push_back(v.getType());
  auto merged = linalg::GenericOp::create(
      b, first.getLoc(), resultTypes, inputs, outputs, maps,
      first.getIteratorTypesArray());
  SmallVector<Type> argTypes;
  SmallVector<Location> argLocs;
  for (Value v : llvm::concat<Value>(inputs, outputs)) {
    argTypes.push_back(getElementTypeOrSelf(v.getType()));
    argLocs.push_back(v.getLoc());
  }
  Block *body = b.createBlock(&merged.getRegion(), {}, argTypes, argLocs);
  SmallVector<Value> yielded;
  auto cloneBody = [&](linalg::GenericOp g, ArrayRef<unsigned> args) {
    IRMapping map;
    for (auto [arg, index] : llvm::zip(g.getBody()->getArguments(), args))
      map.map(arg, body->getArgument(index));
    for (Operation &op : g.getBody()->without_terminator())
      b.clone(op, map);
    for (Value v : g.getBody()->getTerminator()->getOperands())
      yielded.push_back(map.lookupOrDefault(v));
  };
  cloneBody(first, firstArgs);
  cloneBody(second, secondArgs);
  linalg::YieldOp::create(b, first.getLoc(), yielded);

  unsigned n = first->getNumResults();
  for (unsigned i = 0; i < n; ++i)
    first->getResult(i).replaceAllUsesWith(merged->getResult(i));
  for (unsigned i = 0; i < second->getNumResults(); ++i)
    second->getResult(i).replaceAllUsesWith(merged->getResult(n + i));
  second->erase();
  first->erase();
  return merged;
}

} // namespace

bool fusesBackIntoSibling(OpOperand *fused) {
  auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
  auto reader = dyn_cast<linalg::GenericOp>(fused->getOwner());
  if (!producer || !reader || !allParallel(producer) || !allParallel(reader) ||
      !sameDomain(producer, reader))
    return false;
  for (OpOperand &use : fused->get().getUses())
    if (&use != fused && !isa<func::ReturnOp>(use.getOwner()))
      return false;
  return readsAvailableAt(reader, producer, fused);
}

int64_t mergeSiblingGenerics(func::FuncOp func) {
  int64_t merges = 0;
  SmallVector<linalg::GenericOp> heads;
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    auto g = dyn_cast<linalg::GenericOp>(&op);
    if (!g || !allParallel(g))
      continue;
    bool merged = false;
    for (linalg::GenericOp &head : heads) {
      if (!sameDomain(head, g) || !readsAvailableAt(g, head))
        continue;
      head = merge(head, g);
      ++merges;
      merged = true;
      break;
    }
    if (!merged)
      heads.push_back(g);
  }
  return merges;
}

} // namespace loom
