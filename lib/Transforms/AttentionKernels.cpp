//===- AttentionKernels.cpp - Fused attention as generated kernels --------===//
//
// `loom-attention-kernels`: on the CUDA target there is no runtime attention
// kernel to call, so every loom.attention and loom.attention_grad is marked
// loom.generated_kernel: loom-fuse gives it a kernel of its own and
// convert-loom-to-linalg lowers it (lib/Conversion/LoomToLinalg/
// Attention.cpp). The limit checked here is the lowering's: a thread keeps
// a row of each accumulator in registers.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

namespace loom {
#define GEN_PASS_DEF_ATTENTIONKERNELSPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {
struct AttentionKernelsPass
    : loom::impl::AttentionKernelsPassBase<AttentionKernelsPass> {
  using AttentionKernelsPassBase::AttentionKernelsPassBase;

  void runOnOperation() override {
    WalkResult walk = getOperation().walk([&](Operation *op) {
      if (!isa<AttentionOp, AttentionGradOp>(op))
        return WalkResult::advance();
      int64_t d = cast<ShapedType>(op->getOperand(0).getType()).getDimSize(3);
      int64_t dv = cast<ShapedType>(op->getOperand(2).getType()).getDimSize(3);
      if (std::max(d, dv) > static_cast<int64_t>(maxHeadDim)) {
        op->emitError() << "a generated attention kernel takes head "
                           "dimensions up to "
                        << static_cast<int64_t>(maxHeadDim)
                        << " (each thread keeps a row of "
                        << "them); this one has " << d << " (queries, keys) "
                        << "and " << dv << " (values): keep the chain "
                        << "unfused with --attention=unfused";
        return WalkResult::interrupt();
      }
      op->setAttr(kGeneratedKernelAttr, UnitAttr::get(op->getContext()));
      ++numMarked;
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }
};
} // namespace
