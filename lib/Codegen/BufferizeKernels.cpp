//===- BufferizeKernels.cpp - loom-bufferize-kernels ---------------------===//
//
// The outlined kernels (loom ops on tensors) become linalg on buffers:
// convert-loom-to-linalg per kernel, elementwise fusion (broadcasts and
// fills into every reader), one-shot
// bufferization across function boundaries, then results as out-params the
// caller provides (inputs first, then outputs: the runtime's kernel ABI).
// Temporaries stay memref.allocs: the next pass places them (arena scratch)
// or frees them.
//
//===----------------------------------------------------------------------===//

#include "SiblingFusion.h"

#include "loom/Codegen/Kernels.h"
#include "loom/Codegen/Passes.h"
#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_BUFFERIZEKERNELSPASS
#include "loom/Codegen/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
/// After bufferization (results are out-params after the inputs): an
/// in-place result's out-param and its argument hold the same address, so
/// the kernel reads and writes through the argument alone. LLVM then sees
/// one pointer where it saw two that might overlap, and vectorizes the
/// update loop instead of falling back to scalar code at run time.
void unifyInPlaceBuffers(func::FuncOp kernel) {
  auto attr = kernel->getAttrOfType<DenseI64ArrayAttr>(kInPlaceAttr);
  if (!attr)
    return;
  ArrayRef<int64_t> p = attr.asArrayRef();
  int64_t inputs = p.front();
  for (size_t i = 1; i + 1 < p.size(); i += 2) {
    int64_t out = inputs + p[i], in = p[i + 1];
    if (out >= kernel.getNumArguments() ||
        kernel.getArgument(out).getType() != kernel.getArgument(in).getType())
      continue; // not the bufferized signature expected: leave it
    kernel.getArgument(out).replaceAllUsesWith(kernel.getArgument(in));
  }
  // The result was made in the argument's buffer: its copy into the
  // out-param is now a copy onto itself.
  SmallVector<memref::CopyOp> selfCopies;
  kernel.walk([&](memref::CopyOp c) {
    if (c.getSource() == c.getTarget())
      selfCopies.push_back(c);
  });
  for (memref::CopyOp c : selfCopies)
    c.erase();
  kernel->removeAttr(kInPlaceAttr);
}
} // namespace

namespace {
/// Whether `op` only broadcasts its inputs, or fills its output with a value
/// from outside: a generic whose body yields an input's element or an outer
/// value, and which reads fewer elements than it writes. Fusing it into each
/// reader costs nothing (an indexing map), where materializing it writes a
/// whole tensor: the AdamW update of a model's same-shaped parameters reads
/// one broadcast of each bias correction, which CSE made shared.
bool isBroadcastOrFill(Operation *op) {
  auto g = dyn_cast<linalg::GenericOp>(op);
  if (!g || g.getNumDpsInits() != 1 || !g.getBody()->without_terminator().empty())
    return false;
  Value yielded = cast<linalg::YieldOp>(g.getBody()->getTerminator())
                      .getValues()[0];
  if (auto arg = dyn_cast<BlockArgument>(yielded)) {
    if (arg.getOwner() == g.getBody() &&
        arg.getArgNumber() >= g.getNumDpsInputs())
      return false; // yields the output's old value
  }
  auto out = dyn_cast<ShapedType>(g.getDpsInits()[0].getType());
  if (!out || !out.hasStaticShape())
    return false;
  return llvm::all_of(g.getDpsInputs(), [&](Value in) {
    auto t = dyn_cast<ShapedType>(in.getType());
    return t && t.hasStaticShape() && t.getNumElements() < out.getNumElements();
  });
}

/// linalg-fuse-elementwise-ops, but a broadcast or fill is fused into every
/// reader, not only into a single one (the upstream pass's rule), and so are
/// a widening of a 16-bit tensor (each reader extends what it loads) and
/// a kernel output its same-shaped reader recomputes; then the loops over
/// one domain merge (SiblingFusion.h).
void fuseElementwise(func::FuncOp func) {
  MLIRContext *context = func.getContext();
  linalg::ControlFusionFn control = [](OpOperand *fused) {
    Operation *producer = fused->get().getDefiningOp();
    return producer &&
           (producer->hasOneUse() || isBroadcastOrFill(producer) ||
            widenedSource(fused->get()) || fusesBackIntoSibling(fused));
  };
  linalg::ControlFusionFn singleUse = [](OpOperand *fused) {
    Operation *producer = fused->get().getDefiningOp();
    return producer && producer->hasOneUse();
  };
  RewritePatternSet patterns(context);
  linalg::populateElementwiseOpsFusionPatterns(patterns, control);
  linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, singleUse);
  tensor::populateBubbleUpExpandShapePatterns(patterns);
  affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
  linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
  context->getLoadedDialect<linalg::LinalgDialect>()
      ->getCanonicalizationPatterns(patterns);
  linalg::populateConstantFoldLinalgOperations(patterns, singleUse);
  GreedyRewriteConfig config;
  config.setUseTopDownTraversal(true);
  (void)applyPatternsGreedily(func, std::move(patterns), config);
  mergeSiblingGenerics(func);
}

/// A kernel returns each of its results into a buffer of its own; once
/// folded, two results can be one value (a model that returns both a
/// tensor and a full-range slice of it), which one-shot bufferization and
/// buffer-results-to-out-params cannot give two buffers. A repeated result
/// becomes a copy of the first.
void distinctResults(func::FuncOp func) {
  func.walk([](func::ReturnOp ret) {
    llvm::SmallPtrSet<Value, 8> seen;
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (seen.insert(v).second || !isa<RankedTensorType>(v.getType()))
        continue;
      operand.set(bufferization::AllocTensorOp::create(
          b, ret.getLoc(), cast<RankedTensorType>(v.getType()),
          ValueRange{}, /*copy=*/v));
    }
  });
}
} // namespace

StringRef loom::bufferizationPipeline() {
  return "canonicalize,cse,eliminate-empty-tensors,"
         "one-shot-bufferize{bufferize-function-boundaries "
         "function-boundary-type-conversion=identity-layout-map},"
         "buffer-results-to-out-params{hoist-static-allocs "
         "modify-public-functions},"
         // cse first: the copy that closes an scf.forall's line (see
         // lowerScatterAdd) copies a subview onto an identical one, which
         // canonicalize then erases.
         "cse,canonicalize";
}

LogicalResult loom::bufferizeKernels(ModuleOp kernels, PipelineRunner run) {
  for (auto func : kernels.getOps<func::FuncOp>()) {
    if (failed(lowerLoomToLinalg(func)))
      return failure();
    fuseElementwise(func);
    distinctResults(func);
  }
  if (failed(runKernelPipeline(kernels, bufferizationPipeline(), run)))
    return failure();
  for (auto kernel : kernels.getOps<func::FuncOp>())
    unifyInPlaceBuffers(kernel);
  // Strided copies (insert_slice with strides) would call the MLIR runner's
  // memrefCopy; as linalg.copy they become plain loops.
  SmallVector<memref::CopyOp> copies;
  kernels.walk([&](memref::CopyOp c) { copies.push_back(c); });
  for (memref::CopyOp c : copies) {
    OpBuilder b(c);
    linalg::CopyOp::create(b, c.getLoc(), c.getSource(), c.getTarget());
    c.erase();
  }
  return success();
}

namespace {
struct BufferizeKernelsPass
    : public KernelModulePass<BufferizeKernelsPass,
                              loom::impl::BufferizeKernelsPassBase> {
  void getDependentDialects(DialectRegistry &registry) const override {
    BufferizeKernelsPassBase::getDependentDialects(registry);
    addKernelPipelineDialects(bufferizationPipeline(), registry);
  }
  LogicalResult runOnKernels(ModuleOp kernels, PipelineRunner run) {
    return bufferizeKernels(kernels, run);
  }
};
} // namespace
