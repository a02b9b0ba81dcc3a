//===- GemmEpilogues.cpp - Bias adds into the GEMMs before them -----------===//
//
// `loom-gemm-epilogues`: `add(matmul(a, b), broadcast_in_dim(bias))`, the
// bias of a linear layer broadcast over the product's rows, becomes
// `matmul(a, b) bias(bias)`: cuBLASLt adds it as it writes the product
// (CUBLASLT_EPILOGUE_BIAS) where a kernel would read and write the product
// again, one launch more. The CUDA pipeline runs it after loom-remat and
// before loom-fuse; the CPU's does not (its backend would add the bias in
// a pass of its own after the BLAS call, where loom-fuse already puts the
// add in the kernel that reads the product).
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace loom {
#define GEN_PASS_DEF_GEMMEPILOGUESPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// The bias vector `v` broadcasts over the rows of `product`: a function
/// argument (a parameter) of the product's element type and N elements,
/// placed on its last dimension.
Value biasOf(Value v, RankedTensorType product) {
  auto broadcast = v.getDefiningOp<BroadcastInDimOp>();
  if (!broadcast)
    return {};
  Value bias = broadcast.getX();
  auto type = cast<RankedTensorType>(bias.getType());
  int64_t rank = product.getRank();
  if (!isa<BlockArgument>(bias) || type.getRank() != 1 ||
      type.getDimSize(0) != product.getDimSize(rank - 1) ||
      type.getElementType() != product.getElementType() ||
      broadcast.getDims() != ArrayRef<int64_t>{rank - 1})
    return {};
  return bias;
}

/// Folds `add` into the matmul one of its operands is; whether it did.
bool foldBiasAdd(AddOp add) {
  for (unsigned i = 0; i < 2; ++i) {
    auto mm = add->getOperand(i).getDefiningOp<MatmulOp>();
    auto type = add.getType();
    if (!mm || mm.getBias() || !mm->hasOneUse() ||
        !type.getElementType().isF32() || mm.getType() != type)
      continue;
    Value bias = biasOf(add->getOperand(1 - i), type);
    if (!bias)
      continue;
    // At the add: the operands are defined there (the bias is an argument).
    OpBuilder b(add);
    auto fused = MatmulOp::create(b, add.getLoc(), type, mm.getLhs(),
                                  mm.getRhs(), bias, mm.getTransposeA(),
                                  mm.getTransposeB());
    Operation *broadcast = add->getOperand(1 - i).getDefiningOp();
    add.getResult().replaceAllUsesWith(fused.getResult());
    add.erase();
    mm.erase();
    if (broadcast->use_empty())
      broadcast->erase();
    return true;
  }
  return false;
}

struct GemmEpiloguesPass
    : public loom::impl::GemmEpiloguesPassBase<GemmEpiloguesPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds)
      if (foldBiasAdd(add))
        ++numFolded;
  }
};
} // namespace
