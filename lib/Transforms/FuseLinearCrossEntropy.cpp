//===- FuseLinearCrossEntropy.cpp - LM heads into one fused op ------------===//
//
// `loom-fuse-linear-cross-entropy`: every loom.cross_entropy over [N, V]
// logits is a candidate. It becomes one loom.linear_cross_entropy when its
// logits are a loom.matmul (through reshapes that only merge leading
// dimensions) that nothing else reads:
//
//   logits = reshape(matmul(x, w))    x [..., C], w [C, V] or [V, C]
//                                     (transpose_b), no bias, not
//                                     transpose_a, f32
//   loss   = cross_entropy(logits, labels)
//
// x is reshaped to [N, C] (a view). A cross-entropy whose logits are not a
// matmul's (a classifier's last layer with its bias added) is not a head
// and is not reported. Invariant: the loss is the same value
// (the fused op is defined as exactly this chain); the logits, which no
// other op read, are no longer computed as a tensor. The module attribute
// `loom.lm_head_report` lists each candidate with its outcome (fused, and
// the logits bytes no longer stored, or kept, and why); `loomc --report`
// prints it. Runs after `loom-attach-loss` (which builds the cross-entropy
// of language models) and before `loom-autodiff`.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <string>

namespace loom {
#define GEN_PASS_DEF_FUSELINEARCROSSENTROPYPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

#define DEBUG_TYPE "loom-fuse-linear-cross-entropy"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// A cross-entropy whose logits are a product the rewrite may fuse.
struct Head {
  CrossEntropyOp loss;
  MatmulOp product;
  ReshapeOp reshape; ///< between the product and the loss; may be null
};

/// The candidate at `ce`, or the reason it cannot be fused (empty when
/// `ce` is not a head at all: its logits are not a matmul's, as a
/// classifier's biased last layer; nothing is reported for it).
FailureOr<Head> matchHead(CrossEntropyOp ce, std::string &why) {
  auto fail = [&](StringRef reason) -> FailureOr<Head> {
    why = reason.str();
    return failure();
  };
  Head h{ce, {}, {}};
  Value logits = ce.getLogits();
  if (typeOf(logits).getRank() != 2)
    return fail("the logits are not [N, V]");
  if (auto r = logits.getDefiningOp<ReshapeOp>()) {
    h.reshape = r;
    logits = r.getX();
  }
  h.product = logits.getDefiningOp<MatmulOp>();
  if (!h.product)
    return fail("");
  // The logits must be the loss's alone: another reader (an eval output,
  // a metric) needs them as a tensor.
  if (!logits.hasOneUse() || (h.reshape && !h.reshape->hasOneUse()))
    return fail("the logits are read by other ops too");
  MatmulOp m = h.product;
  if (m.getBias() || m.getTransposeA())
    return fail("the matmul has a bias or a transposed lhs");
  auto rt = typeOf(m.getRhs()), lt = typeOf(m.getLhs());
  if (rt.getRank() != 2)
    return fail("the weight is not a matrix shared by the batch");
  if (!lt.getElementType().isF32() || !rt.getElementType().isF32())
    return fail("the product is not f32");
  // A reshape that merges leading dimensions keeps each row's classes
  // together: the product's last dimension must be the logits' V.
  if (typeOf(m.getResult()).getShape().back() !=
      typeOf(ce.getLogits()).getDimSize(1))
    return fail("the reshape before the loss mixes rows and classes");
  return h;
}

struct FuseLinearCrossEntropyPass
    : loom::impl::FuseLinearCrossEntropyPassBase<FuseLinearCrossEntropyPass> {
  using FuseLinearCrossEntropyPassBase::FuseLinearCrossEntropyPassBase;

  void runOnOperation() override {
    if (lmHead != "fused" && lmHead != "unfused") {
      getOperation().emitError("loom-fuse-linear-cross-entropy: mode '")
          << lmHead << "' is not fused or unfused";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    SmallVector<Attribute> report;
    auto entry = [&](CrossEntropyOp ce, StringRef outcome, StringRef detail) {
      auto str = [&](StringRef s) { return StringAttr::get(ctx, s); };
      report.push_back(DictionaryAttr::get(
          ctx, {NamedAttribute(str("node"), str(nodeName(ce.getLoc()))),
                NamedAttribute(str("outcome"), str(outcome)),
                NamedAttribute(str("detail"), str(detail))}));
    };
    SmallVector<CrossEntropyOp> losses;
    module.walk([&](CrossEntropyOp ce) { losses.push_back(ce); });
    for (CrossEntropyOp ce : losses) {
      std::string why;
      FailureOr<Head> head = matchHead(ce, why);
      if (failed(head)) {
        if (!why.empty()) {
          entry(ce, "kept", why);
          ++numKept;
        }
        continue;
      }
      if (lmHead == "unfused") {
        entry(ce, "kept", "--lm-head=unfused");
        ++numKept;
        continue;
      }
      auto logits = typeOf(ce.getLogits());
      std::string detail =
          "logits [" + std::to_string(logits.getDimSize(0)) + ", " +
          std::to_string(logits.getDimSize(1)) + "] not stored: " +
          std::to_string(logits.getNumElements() * 4) + " bytes";
      entry(ce, "fused", detail);
      rewrite(*head); // erases ce
      ++numFused;
    }
    if (!report.empty())
      module->setAttr("loom.lm_head_report", ArrayAttr::get(ctx, report));
  }

  void rewrite(Head h) {
    MatmulOp m = h.product;
    CrossEntropyOp ce = h.loss;
    OpBuilder b(ce);
    Location loc = FusedLoc::get(ctx(), {m.getLoc(), ce.getLoc()});
    auto logits = typeOf(ce.getLogits());
    int64_t N = logits.getDimSize(0);
    auto lt = typeOf(m.getLhs());
    Value x = m.getLhs();
    int64_t C = lt.getShape().back();
    if (lt.getRank() != 2 || lt.getDimSize(0) != N)
      x = ReshapeOp::create(b, loc, RankedTensorType::get({N, C},
                                                          lt.getElementType()),
                            x);
    auto lseType = RankedTensorType::get({N}, b.getF32Type());
    auto fused = LinearCrossEntropyOp::create(
        b, loc, ce.getResult().getType(), lseType, x, m.getRhs(),
        ce.getLabels(), ce.getReductionAttr(), ce.getIgnoreIndexAttr(),
        m.getTransposeB() ? b.getUnitAttr() : UnitAttr());
    ce.getResult().replaceAllUsesWith(fused.getLoss());
    ce.erase();
    if (h.reshape)
      h.reshape.erase();
    m.erase();
  }

  MLIRContext *ctx() { return &getContext(); }
};

} // namespace
