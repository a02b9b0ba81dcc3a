//===- LinearCrossEntropyChunks.cpp - The fused LM head in row chunks -----===//
//
// `loom-linear-cross-entropy-chunks` (Passes.td): where no runtime step
// computes loom.linear_cross_entropy (the CUDA target; 16-bit heads on the
// CPU), each fused head and its gradient is expanded into ordinary ops over
// chunks of rows, in program order, one chunk after the other:
//
//   forward, chunk c:   logits_c = x_c w^T              (a library GEMM)
//                       loss_c   = cross_entropy(logits_c, labels_c, none)
//                       lse_c    = log sum exp logits_c  (where read)
//   backward, chunk c:  logits_c = x_c w^T              (recomputed)
//                       dlogits_c = weight_c (softmax(logits_c) - onehot)
//                       dx_c = dlogits_c w,  dw += dlogits_c^T x_c
//
// and the results are the chunks' losses summed (or concatenated for
// reduction none), the lse and dx concatenated, dw the running sum. Every
// chunk's [rows, V] logits are dead before the next chunk's GEMM: loom-fuse
// never groups ops across a GEMM, so loom-plan-memory reuses one chunk's
// buffers for the next and no [N, V] tensor is in the arena. The math is
// the op's definition (the rows' weights as in the cross-entropy's
// gradient: the loss's cotangent, over the count of labels not ignored for
// mean, at least 1, 0 for an ignored label). The backward recomputes its
// row statistics with a softmax, as the cross-entropy's gradient does,
// rather than reading the forward's lse: the same math, and the same
// kernels as the unfused chain's (the CUDA target's exp and log are not
// exact, and exp(logits - lse) compounds both), so a training step's
// gradients agree with the reference interpreter's as the chain's do; a
// forward whose lse only a gradient read computes none. With 16-bit x
// and w the row statistics are computed in f32 from the 16-bit logits,
// dlogits rounded to 16 bits, and dw summed over the chunks in f32.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/Emitter.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace loom {
#define GEN_PASS_DEF_LINEARCROSSENTROPYCHUNKSPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

using namespace mlir;
using namespace loom;

namespace {

constexpr llvm::StringLiteral kLmHeadAttr = "loom.lm_head";

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The rows of each chunk: `rows` at a time, the last chunk what is left.
SmallVector<std::pair<int64_t, int64_t>> chunksOf(int64_t n, int64_t rows) {
  SmallVector<std::pair<int64_t, int64_t>> chunks;
  for (int64_t r = 0; r < n; r += rows)
    chunks.push_back({r, std::min(n, r + rows)});
  return chunks;
}

/// What the forward and the backward expansions share: the operands, the
/// chunks and the ops over one chunk.
struct Expansion {
  Emitter e;
  Value x, w, labels;
  bool transposeW;
  std::optional<int64_t> ignore;
  Reduction reduction;
  int64_t n, classes;
  Type lossType; ///< the loss's and the rows' weights' element type

  /// Rows [r0, r1) of `v` (the whole of it for one chunk).
  Value rows(Value v, int64_t r0, int64_t r1) {
    auto t = typeOf(v);
    if (r0 == 0 && r1 == t.getDimSize(0))
      return v;
    SmallVector<int64_t> start(t.getRank(), 0), limit(t.getShape()),
        stride(t.getRank(), 1);
    start[0] = r0;
    limit[0] = r1;
    return e.slice(v, start, limit, stride);
  }

  /// The chunk's logits, [rows, V].
  Value logits(Value xc) { return e.matmul(xc, w, false, transposeW); }

  /// `gemm`, the logits of chunk `index` of `count`, marked kLmHeadAttr
  /// with which pass and chunk it computes: a backward's recomputed logits
  /// are then no longer equal to the forward's for CSE (which would keep
  /// every chunk's forward logits for the backward: all [N, V] of them),
  /// and loomc --report counts the expanded heads by their first chunk.
  Value tagged(Value gemm, StringRef pass, size_t index, size_t count) {
    gemm.getDefiningOp()->setAttr(
        kLmHeadAttr,
        e.b.getStringAttr(pass + ", chunk " + std::to_string(index + 1) +
                          " of " + std::to_string(count)));
    return gemm;
  }

  /// Whether each label counts (1) or is ignore_index (0), in lossType;
  /// null without ignore_index.
  Value valid(Value y) {
    if (!ignore)
      return Value();
    auto yt = typeOf(y);
    return e.castTo(e.cmp(ComparePredicate::NE, y,
                          e.splat(yt, static_cast<double>(*ignore))),
                    lossType);
  }

  /// The divisor of a mean: the labels counted, at least 1 (the fused op's
  /// mean over no label is 0, as loom.cross_entropy's).
  Value count() {
    auto scalar = RankedTensorType::get({}, lossType);
    Value c = ignore ? e.sum(valid(labels), {0})
                     : e.splat(scalar, static_cast<double>(n));
    return MaxOp::create(e.b, e.loc, c, e.splat(scalar, 1.0));
  }

  Value concat(ArrayRef<Value> parts) {
    if (parts.size() == 1)
      return parts.front();
    return ConcatOp::create(e.b, e.loc, parts, 0);
  }
};

/// The expansion of head `op` (either op: their operands and attributes
/// are alike), building at `b`; `loss` has the loss's element type (the
/// loss, or the gradient's cotangent of it).
template <typename HeadOp>
Expansion expansionOf(OpBuilder &b, HeadOp op, Value loss) {
  bool transposeW = op.getTransposeW();
  return Expansion{Emitter{b, op.getLoc()},
                   op.getX(),
                   op.getW(),
                   op.getLabels(),
                   transposeW,
                   op.getIgnoreIndex(),
                   op.getReduction(),
                   typeOf(op.getX()).getDimSize(0),
                   typeOf(op.getW()).getDimSize(transposeW ? 0 : 1),
                   typeOf(loss).getElementType()};
}

/// Expands `op` at its place; `rowsPerChunk` rows at a time.
void expandForward(LinearCrossEntropyOp op, int64_t rowsPerChunk) {
  OpBuilder b(op);
  Expansion h = expansionOf(b, op, op.getLoss());
  Emitter &e = h.e;
  Type lseType = typeOf(op.getLse()).getElementType();
  bool needLse = !op.getLse().use_empty();
  Value count = h.reduction == Reduction::Mean ? h.count() : Value();
  SmallVector<Value> losses, lses;
  Value total;
  auto chunks = chunksOf(h.n, rowsPerChunk);
  for (auto [i, chunk] : llvm::enumerate(chunks)) {
    auto [r0, r1] = chunk;
    Value logits =
        h.tagged(h.logits(h.rows(h.x, r0, r1)), "forward", i, chunks.size());
    Value y = h.rows(h.labels, r0, r1);
    // The row log-sum-exp, steadied by the row maximum (only where the
    // gradient reads it: an evaluation entry's is dead); from 16-bit
    // logits in f32 (the kernels widen them as they load them).
    if (needLse) {
      Value wide = e.castTo(logits, h.lossType);
      Value max = e.reduce<ReduceMaxOp>(wide, {1}, false);
      Value grid = e.broadcast(max, typeOf(wide), {0});
      Value lse = e.add(e.log(e.sum(e.exp(e.sub(wide, grid)), {1})), max);
      lses.push_back(e.castTo(lse, lseType));
    }
    auto lossT = RankedTensorType::get({r1 - r0}, h.lossType);
    Value loss = CrossEntropyOp::create(
        b, e.loc, lossT, logits, y, Reduction::None, op.getIgnoreIndexAttr());
    if (h.reduction == Reduction::None) {
      losses.push_back(loss);
      continue;
    }
    Value sum = e.sum(loss, {0});
    total = total ? e.add(total, sum) : sum;
  }
  Value loss = h.reduction == Reduction::None  ? h.concat(losses)
               : h.reduction == Reduction::Sum ? total
                                               : e.div(total, count);
  op.getLoss().replaceAllUsesWith(loss);
  if (needLse)
    op.getLse().replaceAllUsesWith(h.concat(lses));
  op.erase();
}

/// Expands the gradient `op` at its place; `rowsPerChunk` rows at a time.
void expandBackward(LinearCrossEntropyGradOp op, int64_t rowsPerChunk) {
  OpBuilder b(op);
  Expansion h = expansionOf(b, op, op.getDloss());
  Emitter &e = h.e;
  Value dloss = op.getDloss();
  // Each row's weight of (softmax - onehot), [N] in lossType.
  auto perRow = RankedTensorType::get({h.n}, h.lossType);
  Value weight;
  switch (h.reduction) {
  case Reduction::None:
    weight = dloss;
    break;
  case Reduction::Sum:
    weight = e.broadcast(dloss, perRow, {});
    break;
  case Reduction::Mean:
    weight = e.broadcast(e.div(dloss, h.count()), perRow, {});
    break;
  }
  if (Value valid = h.valid(h.labels))
    weight = e.mul(weight, valid);
  Type intType = typeOf(h.labels).getElementType();
  SmallVector<Attribute> ids;
  for (int64_t v = 0; v < h.classes; ++v)
    ids.push_back(b.getIntegerAttr(intType, v));
  Value classIds = ConstantOp::create(
      b, e.loc,
      DenseElementsAttr::get(RankedTensorType::get({h.classes}, intType), ids));
  Type elt = typeOf(h.x).getElementType();
  SmallVector<Value> dxs;
  Value dw;
  auto chunks = chunksOf(h.n, rowsPerChunk);
  for (auto [i, chunk] : llvm::enumerate(chunks)) {
    auto [r0, r1] = chunk;
    Value xc = h.rows(h.x, r0, r1);
    Value logits = h.tagged(h.logits(xc), "backward", i, chunks.size());
    auto grid = typeOf(logits).clone(h.lossType);
    Value probs =
        SoftmaxOp::create(e.b, e.loc, e.castTo(logits, h.lossType), 1);
    Value onehot = e.castTo(
        e.cmp(ComparePredicate::EQ,
              e.broadcast(h.rows(h.labels, r0, r1), grid.clone(intType), {0}),
              e.broadcast(classIds, grid.clone(intType), {1})),
        h.lossType);
    Value dlogits =
        e.castTo(e.mul(e.sub(probs, onehot),
                       e.broadcast(h.rows(weight, r0, r1), grid, {0})),
                 elt);
    // logits = x w^T (transpose_w) or x w.
    dxs.push_back(e.matmul(dlogits, h.w, false, !h.transposeW));
    // Summed in lossType: a 16-bit dw is rounded once, not per chunk.
    Value dwc = e.castTo(h.transposeW ? e.matmul(dlogits, xc, true, false)
                                      : e.matmul(xc, dlogits, true, false),
                         h.lossType);
    dw = dw ? e.add(dw, dwc) : dwc;
  }
  op.getDx().replaceAllUsesWith(h.concat(dxs));
  op.getDw().replaceAllUsesWith(e.castTo(dw, elt));
  op.erase();
}

struct LinearCrossEntropyChunksPass
    : loom::impl::LinearCrossEntropyChunksPassBase<
          LinearCrossEntropyChunksPass> {
  using LinearCrossEntropyChunksPassBase::LinearCrossEntropyChunksPassBase;

  /// The rows of a chunk for `classes` classes: --rows when given, else
  /// as many as keep a chunk's logits within chunkElements, in multiples
  /// of 128 rows (GEMM tiles) where that is at least one multiple.
  int64_t rowsFor(int64_t classes) {
    if (rows > 0)
      return rows;
    int64_t fit = std::max<int64_t>(1, chunkElements / classes);
    return fit >= 128 ? fit / 128 * 128 : fit;
  }

  void runOnOperation() override {
    if (rows < 0 || chunkElements < 1) {
      getOperation().emitError("loom-linear-cross-entropy-chunks: rows (loomc "
                               "--lm-head-rows) must be >= 0, not ")
          << static_cast<int64_t>(rows) << ", and chunk-elements >= 1, not "
          << static_cast<int64_t>(chunkElements);
      return signalPassFailure();
    }
    SmallVector<Operation *> heads;
    getOperation().walk([&](Operation *op) {
      if (!isa<LinearCrossEntropyOp, LinearCrossEntropyGradOp>(op))
        return;
      if (runtimeF32 && getElementTypeOrSelf(op->getOperand(0)).isF32())
        return;
      heads.push_back(op);
    });
    // Gradients first: they recompute their row statistics, so a forward
    // whose lse only a gradient read then computes none.
    std::stable_partition(heads.begin(), heads.end(), [](Operation *op) {
      return isa<LinearCrossEntropyGradOp>(op);
    });
    // What --report prints: each head once (every entry point has a copy).
    llvm::SetVector<Attribute> report;
    MLIRContext *ctx = &getContext();
    for (Operation *op : heads) {
      auto w = typeOf(op->getOperand(1));
      bool transposeW = op->hasAttr("transpose_w");
      int64_t perChunk = rowsFor(w.getDimSize(transposeW ? 0 : 1));
      int64_t n = typeOf(op->getOperand(0)).getDimSize(0);
      int64_t chunks = (n + perChunk - 1) / perChunk;
      report.insert(StringAttr::get(
          ctx, nodeName(op->getLoc()) + ": " + std::to_string(chunks) +
                   (chunks == 1 ? " chunk of " : " chunks of ") +
                   std::to_string(std::min(n, perChunk)) + " rows"));
      if (auto f = dyn_cast<LinearCrossEntropyOp>(op))
        expandForward(f, perChunk);
      else
        expandBackward(cast<LinearCrossEntropyGradOp>(op), perChunk);
      ++numExpanded;
    }
    if (report.empty())
      return;
    getOperation()->setAttr("loom.lm_head_chunks",
                            ArrayAttr::get(ctx, report.getArrayRef()));
  }
};

} // namespace
