//===- ConvToGemm.cpp - Convolutions as im2col and library GEMMs ----------===//
//
// `loom-conv-to-gemm` rewrites the convolutions of a training step (forward,
// input gradient, filter gradient) into `loom.matmul`, which the plan runs
// as a BLAS / cuBLASLt GEMM, around `loom.im2col` and `loom.col2im` kernels.
// With the columns laid out `[C*KH*KW, N*OH*OW]`, every convolution of a
// batch is one GEMM (not one per image), which matters when the images are
// small (a 32x32 ResNet ends at 1x1). With `library-convs` (the CPU
// target), f32 convolutions stay whole, marked for the plan's conv steps.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace loom {
#define GEN_PASS_DEF_CONVTOGEMMPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

struct Rewriter {
  OpBuilder b;
  Location loc;

  Value reshape(Value v, ArrayRef<int64_t> shape) {
    RankedTensorType t = tensorOf(v);
    if (t.getShape() == shape)
      return v;
    return ReshapeOp::create(b, loc, t.clone(shape), v);
  }
  /// [A, B, P] -> [B, A, P].
  Value swapLeading(Value v) {
    ArrayRef<int64_t> s = tensorOf(v).getShape();
    return TransposeOp::create(b, loc, tensorOf(v).clone({s[1], s[0], s[2]}),
                               v, ArrayRef<int64_t>{1, 0, 2});
  }
  /// A convolution output (or its gradient) `[N, O, OH, OW]` as the matrix
  /// `[O, N*OH*OW]`; a reshape when N is 1.
  Value outputToMatrix(Value y) {
    ArrayRef<int64_t> s = tensorOf(y).getShape();
    int64_t N = s[0], O = s[1], P = s[2] * s[3];
    if (N == 1)
      return reshape(y, {O, P});
    return reshape(swapLeading(reshape(y, {N, O, P})), {O, N * P});
  }
  /// The inverse of outputToMatrix, into `type`.
  Value matrixToOutput(Value m, RankedTensorType type) {
    ArrayRef<int64_t> s = type.getShape();
    int64_t N = s[0], O = s[1], P = s[2] * s[3];
    if (N == 1)
      return reshape(m, s);
    return reshape(swapLeading(reshape(m, {O, N, P})), s);
  }
  Value filterMatrix(Value f) {
    ArrayRef<int64_t> s = tensorOf(f).getShape();
    return reshape(f, {s[0], s[1] * s[2] * s[3]});
  }
  Value matmul(Value lhs, Value rhs, bool ta, bool tb) {
    ArrayRef<int64_t> l = tensorOf(lhs).getShape(), r = tensorOf(rhs).getShape();
    SmallVector<int64_t> shape{ta ? l[1] : l[0], tb ? r[0] : r[1]};
    return MatmulOp::create(b, loc, tensorOf(lhs).clone(shape), lhs, rhs,
                            Value(), ta, tb);
  }
};

/// Whether the GEMM form applies: one group, and an element type the plan's
/// GEMM steps take.
/// Whether the plan's conv step (oneDNN) should run `op`: every f32
/// convolution but the filter gradient of a depthwise one with a kernel
/// larger than 3x3, for which oneDNN 2.6 has no direct kernel (it falls
/// back to an im2col GEMM per group): Loom's generated loop is about 3x
/// faster there (MobileNetV3's 5x5 ones, docs/performance.md).
bool forLibrary(Operation *op) {
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (!result.getElementType().isF32())
    return false;
  auto filterGrad = dyn_cast<Conv2DFilterGradOp>(op);
  if (!filterGrad)
    return true;
  int64_t channels = cast<RankedTensorType>(filterGrad.getX().getType())
                         .getDimSize(1);
  bool depthwise = filterGrad.getGroups() > 1 &&
                   static_cast<int64_t>(filterGrad.getGroups()) == channels;
  return !depthwise || (result.getDimSize(2) <= 3 && result.getDimSize(3) <= 3);
}

/// One group, NCHW, and f32, f64, bf16 or f16 elements: the element types GEMM
/// steps take (a 16-bit GEMM sums in f32, over the whole batch: N*P is one
/// of its dimensions).
template <typename ConvOp> bool rewritable(ConvOp op) {
  Type et = tensorOf(op->getResult(0)).getElementType();
  // im2col and col2im read and write NCHW images.
  return op.getGroups() == 1 && !op.getChannelsLast() &&
         (et.isF32() || et.isF64() || et.isBF16() || et.isF16());
}

struct ConvToGemmPass
    : public loom::impl::ConvToGemmPassBase<ConvToGemmPass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) { rewrite(func); });
  }

  void rewrite(func::FuncOp func) {
    // dy as [O, N*P] and a filter as [O, K], each made once per value
    // right after it is defined, however many convolutions read it.
    llvm::DenseMap<Value, Value> matrices;
    auto matrixOf = [&](Value v, bool filter) {
      auto it = matrices.find(v);
      if (it != matrices.end())
        return it->second;
      Rewriter r{OpBuilder(func.getContext()), v.getLoc()};
      r.b.setInsertionPointAfterValue(v);
      return matrices[v] = filter ? r.filterMatrix(v) : r.outputToMatrix(v);
    };
    SmallVector<Operation *> convs;
    func.walk([&](Operation *op) {
      if (!isa<Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp>(op))
        return;
      if (libraryConvs && forLibrary(op)) {
        op->setAttr(kLibraryCallAttr, UnitAttr::get(op->getContext()));
        ++numLibrary;
        return;
      }
      if (auto c = dyn_cast<Conv2DOp>(op); c && rewritable(c))
        convs.push_back(op);
      else if (auto c = dyn_cast<Conv2DInputGradOp>(op); c && rewritable(c))
        convs.push_back(op);
      else if (auto c = dyn_cast<Conv2DFilterGradOp>(op); c && rewritable(c))
        convs.push_back(op);
    });
    for (Operation *op : convs) {
      Rewriter r{OpBuilder(op), op->getLoc()};
      auto kernelOf = [](Value filter) {
        ArrayRef<int64_t> s = tensorOf(filter).getShape();
        return SmallVector<int64_t>{s[2], s[3]};
      };
      Value result;
      if (auto c = dyn_cast<Conv2DOp>(op)) {
        Value cols = Im2ColOp::create(r.b, r.loc, c.getInput(),
                                      kernelOf(c.getFilter()), c.getStrides(),
                                      c.getPadding(), c.getDilations());
        Value y = r.matmul(matrixOf(c.getFilter(), true), cols, false, false);
        result = r.matrixToOutput(y, tensorOf(c.getResult()));
      } else if (auto c = dyn_cast<Conv2DFilterGradOp>(op)) {
        Value cols = Im2ColOp::create(r.b, r.loc, c.getX(),
                                      kernelOf(c.getResult()), c.getStrides(),
                                      c.getPadding(), c.getDilations());
        Value dw = r.matmul(matrixOf(c.getDy(), false), cols, false, true);
        result = r.reshape(dw, tensorOf(c.getResult()).getShape());
      } else {
        auto g = cast<Conv2DInputGradOp>(op);
        Value dcols = r.matmul(matrixOf(g.getFilter(), true),
                               matrixOf(g.getDy(), false), true, false);
        // col2im sums overlapping patches: in 16 bits that sum would round
        // at every term, so it is done in f32 and rounded once.
        auto resultType = cast<RankedTensorType>(g.getType());
        bool half = resultType.getElementType().getIntOrFloatBitWidth() == 16;
        Type f32 = r.b.getF32Type();
        if (half)
          dcols = CastOp::create(
              r.b, r.loc,
              RankedTensorType::get(
                  cast<RankedTensorType>(dcols.getType()).getShape(), f32),
              dcols);
        result = Col2ImOp::create(
            r.b, r.loc,
            half ? RankedTensorType::get(resultType.getShape(), f32)
                 : resultType,
            dcols, kernelOf(g.getFilter()), g.getStrides(), g.getPadding(),
            g.getDilations());
        if (half)
          result = CastOp::create(r.b, r.loc, resultType, result);
      }
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
      ++numRewritten;
    }
  }
};

} // namespace
