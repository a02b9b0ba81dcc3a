//===- ChannelsLast.cpp - Library convolutions on NHWC activations --------===//
//
// `loom-channels-last`: each f32 library convolution (one group) becomes
// its channels-last form between transposes, and the transposes move
// through the ops between convolutions until they cancel (Passes.td says
// through which). oneDNN convolves NHWC buffers as they are, where it
// reorders NCHW ones to its blocked layout and back around every call.
//
// Every rewrite keeps each value's elements and each sum's order: a
// pointwise op computes the same elements in another order, a reduction
// over (n, h, w) of an NHWC tensor visits them in the NCHW order too, and
// batch norm's statistics over [N*H*W, C] are those over N, H and W.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace loom {
#define GEN_PASS_DEF_CHANNELSLASTPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

/// NCHW -> NHWC and back, as `loom.transpose` permutations (result
/// dimension i is input dimension perm[i]).
constexpr int64_t kToNhwc[4] = {0, 2, 3, 1};
constexpr int64_t kToNchw[4] = {0, 3, 1, 2};

RankedTensorType tensorOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

SmallVector<int64_t> inverse(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = i;
  return inv;
}

bool isIdentity(ArrayRef<int64_t> perm) {
  for (auto [i, p] : llvm::enumerate(perm))
    if (p != static_cast<int64_t>(i))
      return false;
  return true;
}

/// The type of `transpose(t, perm)`.
RankedTensorType permuted(RankedTensorType t, ArrayRef<int64_t> perm) {
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(t.getDimSize(p));
  return t.clone(shape);
}

Value transpose(OpBuilder &b, Location loc, Value x, ArrayRef<int64_t> perm) {
  if (isIdentity(perm))
    return x;
  return TransposeOp::create(b, loc, permuted(tensorOf(x), perm), x,
                             b.getDenseI64ArrayAttr(perm));
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

/// Whether `op` is a convolution this pass makes channels-last: a library
/// call (a plan conv step) of f32 tensors with one group that does not read
/// the entry's own argument (the model's input image). The image is NCHW,
/// and a network's stem (its first convolution, batch norm, ReLU and max
/// pool, which has no NHWC form) would then be transposed at its largest
/// size, both ways; left NCHW, the layout changes after the pool, at a
/// quarter of that size (ResNet-18: 6.4 MB instead of 25.7 MB).
bool candidate(Operation *op) {
  if (!op->hasAttr(kLibraryCallAttr) || op->hasAttr("channels_last"))
    return false;
  if (isa<Conv2DOp, Conv2DFilterGradOp>(op) &&
      isa<BlockArgument>(op->getOperand(0)))
    return false;
  auto groups = op->getAttrOfType<IntegerAttr>("groups");
  return (!groups || groups.getInt() == 1) &&
         tensorOf(op->getResult(0)).getElementType().isF32() &&
         llvm::all_of(op->getOperands(), [](Value v) {
           return tensorOf(v).getRank() == 4;
         });
}

/// The channels-last form of `op` between transposes; `activations` says
/// which operands are activations (the filter is not), `resultIsActivation`
/// whether the result is.
void rewriteConv(Operation *op, ArrayRef<bool> activations,
                 bool resultIsActivation) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  IRMapping map;
  for (auto [v, act] : llvm::zip(op->getOperands(), activations))
    if (act)
      map.map(v, transpose(b, loc, v, kToNhwc));
  Operation *cl = b.clone(*op, map);
  cl->setAttr("channels_last", b.getUnitAttr());
  Value result = cl->getResult(0);
  if (resultIsActivation) {
    result.setType(permuted(tensorOf(result), kToNhwc));
    result = transpose(b, loc, result, kToNchw);
  }
  op->getResult(0).replaceAllUsesWith(result);
  op->erase();
}

//===----------------------------------------------------------------------===//
// Moving transposes
//===----------------------------------------------------------------------===//

/// transpose(transpose(a, p), q) -> transpose(a, p o q), or a.
struct ComposeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp t,
                                PatternRewriter &rewriter) const override {
    auto inner = t.getX().getDefiningOp<TransposeOp>();
    if (!inner)
      return failure();
    SmallVector<int64_t> perm;
    for (int64_t q : t.getPerm())
      perm.push_back(inner.getPerm()[q]);
    rewriter.replaceOp(t, transpose(rewriter, t.getLoc(), inner.getX(), perm));
    return success();
  }
};

/// A transpose that keeps the order of the dimensions larger than 1 is a
/// reshape (free: a view).
struct UnitTransposeToReshape : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp t,
                                PatternRewriter &rewriter) const override {
    RankedTensorType xt = tensorOf(t.getX());
    int64_t last = -1;
    for (int64_t p : t.getPerm()) {
      if (xt.getDimSize(p) == 1)
        continue;
      if (p < last)
        return failure();
      last = p;
    }
    rewriter.replaceOpWithNewOp<ReshapeOp>(t, t.getType(), t.getX());
    return success();
  }
};

/// The dims of `broadcast_in_dim(x, dims)` transposed by perm^-1: x's
/// dimension j lands in dims[j], which is then dimension perm[dims[j]];
/// empty where they would not stay strictly increasing (C2).
SmallVector<int64_t> permutedDims(BroadcastInDimOp bc,
                                  ArrayRef<int64_t> perm) {
  SmallVector<int64_t> dims;
  for (int64_t d : bc.getDims()) {
    dims.push_back(perm[d]);
    if (dims.size() > 1 && dims[dims.size() - 2] >= dims.back())
      return {};
  }
  return dims;
}

/// Whether `v` is `transpose(v', perm)` for a v' that needs no transpose
/// kernel: v is transpose(v', p) with p o perm^-1 the identity, a splat
/// constant, or a broadcast whose permuted `dims` stay increasing (or has
/// none). Creates nothing.
bool untransposesCheaply(Value v, ArrayRef<int64_t> perm) {
  if (auto t = v.getDefiningOp<TransposeOp>()) {
    // v = transpose(a, p) = transpose(v', perm): v' = transpose(a, c) with
    // c[i] = p[inv[i]].
    SmallVector<int64_t> c;
    for (int64_t i : inverse(perm))
      c.push_back(t.getPerm()[i]);
    return isIdentity(c);
  }
  if (auto c = v.getDefiningOp<ConstantOp>()) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    return dense && dense.isSplat();
  }
  if (auto bc = v.getDefiningOp<BroadcastInDimOp>())
    return bc.getDims().empty() || !permutedDims(bc, perm).empty();
  return false;
}

/// The v' of untransposesCheaply (which must hold), built.
Value untransposedCheaply(OpBuilder &b, Value v, ArrayRef<int64_t> perm) {
  RankedTensorType target = permuted(tensorOf(v), inverse(perm));
  if (auto t = v.getDefiningOp<TransposeOp>())
    return t.getX();
  if (auto c = v.getDefiningOp<ConstantOp>())
    return ConstantOp::create(
        b, c.getLoc(), target,
        cast<DenseElementsAttr>(c.getValue()).resizeSplat(target));
  auto bc = v.getDefiningOp<BroadcastInDimOp>();
  return BroadcastInDimOp::create(
      b, bc.getLoc(), target, bc.getX(),
      b.getDenseI64ArrayAttr(permutedDims(bc, perm)));
}

/// A pointwise op whose operands and result all have one shape (not
/// dropout, whose mask depends on the element's index and which reads a
/// seed).
bool isPlainPointwise(Operation *op) {
  auto kind = dyn_cast<FusionKindOpInterface>(op);
  if (!kind || kind.getFusionKind() != FusionKind::Pointwise ||
      op->getNumResults() != 1 || op->getNumOperands() == 0 ||
      op->getNumRegions() != 0)
    return false;
  auto shape = tensorOf(op->getResult(0)).getShape();
  return llvm::all_of(op->getOperands(), [&](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getShape() == shape;
  });
}

/// op(transpose(a, p), ...) -> transpose(op(a, ...), p) for p NHWC -> NCHW,
/// where the other operands untranspose cheaply (untransposesCheaply) but
/// for at most one, which is then transposed by p^-1.
struct SinkThroughPointwise : RewritePattern {
  SinkThroughPointwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), 1, context) {}
  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    // Only NHWC -> NCHW transposes move down (and NCHW -> NHWC ones up,
    // HoistThroughPointwise): moving both ways could cycle.
    ArrayRef<int64_t> perm(kToNchw);
    if (!isPlainPointwise(op) ||
        llvm::none_of(op->getOperands(), [&](Value v) {
          auto t = v.getDefiningOp<TransposeOp>();
          return t && t.getPerm() == perm;
        }))
      return failure();
    // At most one operand needs a transpose kernel.
    if (llvm::count_if(op->getOperands(), [&](Value v) {
          return !untransposesCheaply(v, perm);
        }) > 1)
      return failure();
    SmallVector<int64_t> inv = inverse(perm);
    IRMapping map;
    for (Value v : op->getOperands())
      map.map(v, untransposesCheaply(v, perm)
                     ? untransposedCheaply(rewriter, v, perm)
                     : transpose(rewriter, op->getLoc(), v, inv));
    Operation *moved = rewriter.clone(*op, map);
    moved->getResult(0).setType(permuted(tensorOf(op->getResult(0)), inv));
    rewriter.replaceOp(
        op, transpose(rewriter, op->getLoc(), moved->getResult(0), perm));
    return success();
  }
};

/// transpose(op(...), q) -> op(transpose(..., q)) for q NCHW -> NHWC and a
/// pointwise op read by that transpose alone, whose operands all
/// untranspose cheaply (untransposesCheaply).
struct HoistThroughPointwise : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp t,
                                PatternRewriter &rewriter) const override {
    Operation *op = t.getX().getDefiningOp();
    if (t.getPerm() != ArrayRef<int64_t>(kToNhwc) || !op ||
        !isPlainPointwise(op) || !op->hasOneUse())
      return failure();
    // Each operand o as transpose(o', q^-1): o' = transpose(o, q).
    SmallVector<int64_t> inv = inverse(t.getPerm());
    if (!llvm::all_of(op->getOperands(),
                      [&](Value v) { return untransposesCheaply(v, inv); }))
      return failure();
    IRMapping map;
    for (Value v : op->getOperands())
      map.map(v, untransposedCheaply(rewriter, v, inv));
    Operation *moved = rewriter.clone(*op, map);
    moved->getResult(0).setType(t.getType());
    rewriter.replaceOp(t, moved->getResults());
    return success();
  }
};

/// reduce(transpose(a, p), dims) -> reduce(a, p(dims)), transposed back
/// when the reduced dimensions are kept; without keep_dims only where the
/// dimensions left keep their order.
template <typename ReduceOp>
struct ReduceOfTranspose : OpRewritePattern<ReduceOp> {
  using OpRewritePattern<ReduceOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp r,
                                PatternRewriter &rewriter) const override {
    auto t = r.getX().template getDefiningOp<TransposeOp>();
    if (!t)
      return failure();
    ArrayRef<int64_t> perm = t.getPerm();
    SmallVector<int64_t> dims;
    for (int64_t d : r.getDims())
      dims.push_back(perm[d]);
    llvm::sort(dims);
    bool keep = r.getKeepDims();
    if (!keep) {
      int64_t last = -1;
      for (auto [i, p] : llvm::enumerate(perm)) {
        if (llvm::is_contained(r.getDims(), static_cast<int64_t>(i)))
          continue;
        if (p < last)
          return failure();
        last = p;
      }
    }
    Operation *moved = rewriter.clone(*r);
    moved->setOperand(0, t.getX());
    moved->setAttr("dims", rewriter.getDenseI64ArrayAttr(dims));
    RankedTensorType at = tensorOf(t.getX());
    SmallVector<int64_t> shape;
    for (int64_t i = 0; i < at.getRank(); ++i) {
      bool reduced = llvm::is_contained(dims, i);
      if (!reduced)
        shape.push_back(at.getDimSize(i));
      else if (keep)
        shape.push_back(1);
    }
    moved->getResult(0).setType(tensorOf(r.getResult()).clone(shape));
    Value result = moved->getResult(0);
    if (keep)
      result = transpose(rewriter, r.getLoc(), result, perm);
    rewriter.replaceOp(r, result);
    return success();
  }
};

/// For a batch norm of `transpose(a, p)`: `a` as [M, C] (its channels, the
/// transpose's dimension 1, last; the other dimensions in their order), or
/// null.
Value asRowsOfChannels(PatternRewriter &rewriter, Value x) {
  auto t = x.getDefiningOp<TransposeOp>();
  if (!t)
    return {};
  ArrayRef<int64_t> perm = t.getPerm();
  int64_t rank = perm.size();
  if (rank < 3 || perm[1] != rank - 1)
    return {};
  int64_t last = -1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i == 1)
      continue;
    if (perm[i] < last)
      return {};
    last = perm[i];
  }
  RankedTensorType at = tensorOf(t.getX());
  int64_t rows = at.getNumElements() / at.getDimSize(rank - 1);
  return ReshapeOp::create(rewriter, t.getLoc(),
                           at.clone({rows, at.getDimSize(rank - 1)}),
                           t.getX());
}

/// batch_norm_stats(transpose(a, p)) -> batch_norm_stats(a as [M, C]).
struct StatsOfTranspose : OpRewritePattern<BatchNormStatsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchNormStatsOp s,
                                PatternRewriter &rewriter) const override {
    Value rows = asRowsOfChannels(rewriter, s.getX());
    if (!rows)
      return failure();
    rewriter.modifyOpInPlace(s, [&] { s.getXMutable().assign(rows); });
    return success();
  }
};

/// batch_norm(transpose(a, p), ...) -> transpose(batch_norm(a as [M, C],
/// ...) as a, p).
struct BatchNormOfTranspose : OpRewritePattern<BatchNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchNormOp bn,
                                PatternRewriter &rewriter) const override {
    Value rows = asRowsOfChannels(rewriter, bn.getX());
    if (!rows)
      return failure();
    auto t = bn.getX().getDefiningOp<TransposeOp>();
    Operation *moved = rewriter.clone(*bn);
    moved->setOperand(0, rows);
    moved->getResult(0).setType(rows.getType());
    Value y = ReshapeOp::create(rewriter, bn.getLoc(), tensorOf(t.getX()),
                                moved->getResult(0));
    rewriter.replaceOp(bn, transpose(rewriter, bn.getLoc(), y, t.getPerm()));
    return success();
  }
};

int64_t bytesOf(Value v) {
  RankedTensorType t = tensorOf(v);
  return t.getNumElements() *
         static_cast<int64_t>(t.getElementTypeBitWidth() / 8);
}

/// Makes `func`'s candidate convolutions channels-last and moves the
/// transposes; the number of convolutions changed, or -1 if the
/// transposes did not settle.
int64_t convertFunction(func::FuncOp func) {
  SmallVector<Operation *> convs;
  func.walk([&](Operation *op) {
    if (isa<Conv2DOp, Conv2DInputGradOp, Conv2DFilterGradOp>(op) &&
        candidate(op))
      convs.push_back(op);
  });
  if (convs.empty())
    return 0;
  for (Operation *op : convs) {
    if (isa<Conv2DOp, Conv2DInputGradOp>(op))
      rewriteConv(op, {true, false}, true);
    else
      rewriteConv(op, {true, true}, false);
  }
  MLIRContext *context = func.getContext();
  RewritePatternSet patterns(context);
  patterns.add<ComposeTransposes, UnitTransposeToReshape,
               SinkThroughPointwise, HoistThroughPointwise,
               ReduceOfTranspose<ReduceSumOp>, ReduceOfTranspose<ReduceMeanOp>,
               ReduceOfTranspose<ReduceMaxOp>, ReduceOfTranspose<ReduceMinOp>,
               StatsOfTranspose, BatchNormOfTranspose>(context);
  GreedyRewriteConfig config;
  config.setMaxIterations(64);
  if (failed(applyPatternsGreedily(func, std::move(patterns), config)))
    return -1;
  return convs.size();
}

/// A transpose kernel moves memory several times slower than oneDNN's
/// reorders (strided reads: ResNet-18's 25.7 MB ReLU-and-transpose took
/// 18 ms, 2.8 GB/s, where a reorder of that size takes 2-3 ms): unless
/// `always`, a function is kept channels-last only where the activation
/// bytes its convolutions no longer reorder are at least this many times
/// the bytes its transposes still move. (ResNet-18's training step: 13.5;
/// MobileNetV3-small's, whose depthwise convolutions stay NCHW: 0.8, and
/// measured 8 ms per step slower channels-last.)
constexpr int64_t kTransposeCost = 4;

/// The bytes `func`'s channels-last convolutions read and write as
/// activations (what oneDNN no longer reorders), and those its transposes
/// move.
std::pair<int64_t, int64_t> trafficOf(func::FuncOp func) {
  int64_t saved = 0, moved = 0;
  func.walk([&](Operation *op) {
    if (auto t = dyn_cast<TransposeOp>(op))
      moved += bytesOf(t.getResult());
    if (!op->hasAttr("channels_last"))
      return;
    if (isa<Conv2DFilterGradOp>(op))
      saved += bytesOf(op->getOperand(0)) + bytesOf(op->getOperand(1));
    else
      saved += bytesOf(op->getOperand(0)) + bytesOf(op->getResult(0));
  });
  return {saved, moved};
}

struct ChannelsLastPass
    : public loom::impl::ChannelsLastPassBase<ChannelsLastPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (func::FuncOp func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      // Converted on a copy, kept where it pays (kTransposeCost).
      func::FuncOp copy = func.clone();
      int64_t converted = convertFunction(copy);
      if (converted < 0) {
        copy.erase();
        func.emitError("loom-channels-last: the transposes did not settle");
        return signalPassFailure();
      }
      auto [saved, moved] = trafficOf(copy);
      if (converted == 0 || (!always && saved < kTransposeCost * moved)) {
        if (converted != 0)
          ++numDeclined;
        copy.erase();
        continue;
      }
      func.getBody().takeBody(copy.getBody());
      copy.erase();
      numConvs += converted;
      func.walk([&](TransposeOp) { ++numTransposes; });
    }
  }
};

} // namespace
