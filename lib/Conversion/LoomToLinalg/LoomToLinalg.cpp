//===- LoomToLinalg.cpp - Lower loom ops to linalg on tensors -------------===//
//
// One rule per op, a rewrite pattern (RulePattern, Lowerer.h) in the file of
// its family: Elementwise.cpp, Shape.cpp, Reductions.cpp, Convolutions.cpp.
// They are applied by one walk over the function (walkAndApplyPatterns:
// tensor types do not change, so the dialect-conversion framework would add
// nothing, and no folding runs, so each kernel is what its rules build). Each rule
// mirrors the interpreter's rule for the op: same iteration order for sums
// where the order is observable (scatter_add), same NaN behaviour (maximumf
// and minimumf propagate NaN like the interpreter's nanMax/nanMin), same
// dropout hash. Values the interpreter rejects (an out-of-range gather index
// or label) are clamped here so that a kernel cannot touch memory outside
// its buffers.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/LoomToLinalg/LoomToLinalg.h"

#include "Lowerer.h"

#include "mlir/Transforms/WalkPatternRewriteDriver.h"

namespace loom {
#define GEN_PASS_DEF_CONVERTLOOMTOLINALGPASS
#include "loom/Conversion/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {
struct ConvertLoomToLinalgPass
    : loom::impl::ConvertLoomToLinalgPassBase<ConvertLoomToLinalgPass> {
  void runOnOperation() override {
    if (failed(lowerLoomToLinalg(getOperation())))
      signalPassFailure();
  }
};

} // namespace

Value loom::widenedSource(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getNumResults() != 1 || g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block *body = g.getBody();
  if (!llvm::hasSingleElement(body->without_terminator()))
    return {};
  auto ext = dyn_cast<arith::ExtFOp>(body->front());
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  if (!ext || ext.getIn() != body->getArgument(0) ||
      yield.getValues()[0] != ext.getResult())
    return {};
  return g.getDpsInputs()[0];
}

linalg::GenericOp loom::lowering::recomputableProducer(Value v) {
  constexpr std::ptrdiff_t kMaxOps = 4;
  auto g = v.getDefiningOp<linalg::GenericOp>();
  if (!g || g.getNumDpsInits() != 1 || g.getNumResults() != 1 ||
      g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block *body = g.getBody();
  if (!g.getRegionOutputArgs()[0].use_empty() ||
      std::distance(body->without_terminator().begin(),
                    body->without_terminator().end()) > kMaxOps)
    return {};
  for (Operation &op : body->without_terminator())
    if (!isa<arith::ConstantOp, arith::AddFOp, arith::SubFOp, arith::MulFOp,
             arith::NegFOp, arith::MaximumFOp, arith::MinimumFOp,
             arith::MaxNumFOp, arith::MinNumFOp, arith::CmpFOp,
             arith::SelectOp, arith::ExtFOp, arith::TruncFOp>(op))
      return {};
  // Its inputs must be there without it: the kernel's arguments or, in
  // turn, recomputable. Reading through a product with a broadcast would
  // materialize the broadcast instead (a scratch of the product's size).
  for (Value in : g.getDpsInputs())
    if (!isa<BlockArgument>(in) && !recomputableProducer(in))
      return {};
  return g;
}

namespace {
/// Whether `attr` is the 1-D integer tensor 0, 1, ..., n-1.
bool isIota(DenseIntElementsAttr attr) {
  if (attr.getType().getRank() != 1)
    return false;
  int64_t i = 0;
  for (const APInt &v : attr.getValues<APInt>())
    if (v.getSExtValue() != i++)
      return false;
  return true;
}

/// A generic that reads a constant 0, 1, ..., n-1 along one of its
/// dimensions (the class ids of a one-hot, say) reads the loop index
/// instead: no table of n integers streamed through the cache beside the
/// data.
void indexIotaConstants(func::FuncOp func) {
  func.walk([](linalg::GenericOp g) {
    for (OpOperand *in : g.getDpsInputOperands()) {
      auto c = in->get().getDefiningOp<arith::ConstantOp>();
      auto attr = c ? dyn_cast<DenseIntElementsAttr>(c.getValue()) : nullptr;
      AffineMap map = g.getMatchingIndexingMap(in);
      if (!attr || !isIota(attr) || map.getNumResults() != 1)
        continue;
      auto d = dyn_cast<AffineDimExpr>(map.getResult(0));
      BlockArgument arg = g.getMatchingBlockArgument(in);
      if (!d || arg.use_empty())
        continue;
      OpBuilder b = OpBuilder::atBlockBegin(g.getBody());
      Value index = linalg::IndexOp::create(b, g.getLoc(), d.getPosition());
      arg.replaceAllUsesWith(
          arith::IndexCastOp::create(b, g.getLoc(), arg.getType(), index));
    }
  });
}
} // namespace

LogicalResult loom::lowerLoomToLinalg(func::FuncOp func) {
  RewritePatternSet patterns(func.getContext());
  populateElementwiseRules(patterns);
  populateShapeRules(patterns);
  populateReductionRules(patterns);
  populateConvolutionRules(patterns);
  populateAttentionRules(patterns);
  walkAndApplyPatterns(func, std::move(patterns));
  Operation *left = nullptr;
  func.walk([&](Operation *op) {
    if (!left && isa<LoomDialect>(op->getDialect()))
      left = op;
  });
  if (left)
    return left->emitError("cannot lower '")
           << left->getName() << "' to a CPU kernel";
  indexIotaConstants(func);
  return success();
}

void loom::registerLoomToLinalgDependentDialects(DialectRegistry &registry) {
  registry.insert<linalg::LinalgDialect, tensor::TensorDialect,
                  arith::ArithDialect, math::MathDialect, scf::SCFDialect>();
}
