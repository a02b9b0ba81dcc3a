//===- TensorParallelRules.cpp - How splits propagate through ops ---------===//
//
// One rule per op kind (see TensorParallelRules.h). A rule either records
// the split of the op's results (and of a parameter it decides, such as a
// row-parallel weight or a bias), or fails with the reason, which the pass
// reports at the op when the layer it tried was one the model asked for.
//
//===----------------------------------------------------------------------===//

#include "TensorParallelRules.h"

#include "loom/Import/Import.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;
using namespace loom::tensor_parallel;

bool Propagation::visit(Operation *op) {
  // An op that reads only whole values computes a whole value, except a
  // matmul with a split weight.
  if (auto mm = dyn_cast<MatmulOp>(op))
    return matmul(mm);
  SmallVector<Split> in;
  bool anySplit = false;
  for (Value v : op->getOperands()) {
    in.push_back(of(v));
    anySplit |= in.back().isSplit();
  }
  if (auto fk = dyn_cast<FusionKindOpInterface>(op);
      fk && fk.getFusionKind() == FusionKind::Pointwise &&
      !isa<DropoutOp, BatchNormOp>(op))
    return pointwise(op);
  if (!anySplit)
    return true;
  Split s = in[0];
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](BroadcastInDimOp b) {
        return set(op, b.getResult(),
                   Split{b.getDims()[s.dim], s.groups});
      })
      .Case([&](TransposeOp t) {
        ArrayRef<int64_t> perm = t.getPerm();
        auto pos = llvm::find(perm, s.dim) - perm.begin();
        return set(op, t.getResult(), Split{pos, s.groups});
      })
      .Case([&](SliceOp sl) { return slice(sl, s); })
      .Case([&](ReshapeOp r) { return reshape(r, s); })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](auto sm) {
        if (static_cast<int64_t>(sm.getAxis()) == s.dim)
          return fail(op, "it normalizes along the split dimension " +
                              Twine(s.dim));
        return set(op, sm.getResult(), s);
      })
      .Case<LayerNormOp, RmsNormOp>([&](auto ln) {
        if (in.size() > 1 && llvm::any_of(ArrayRef(in).drop_front(),
                                          [](Split x) { return x.isSplit(); }))
          return fail(op, "its scale or bias is split");
        if (s.dim >= static_cast<int64_t>(ln.getAxis()))
          return fail(op, "it normalizes along the split dimension " +
                              Twine(s.dim));
        return set(op, ln.getResult(), s);
      })
      .Case([&](ConcatOp c) { return concat(c, in); })
      .Case([&](AttentionOp a) { return attention(a); })
      .Case([&](GatherOp g) {
        auto table = cast<RankedTensorType>(g.getTable().getType());
        if (s.dim != 0 || g.getAxis() != 0 || s.groups != 1 ||
            table.getRank() != 2 || in[1].isSplit())
          return fail(op, "a vocabulary-parallel embedding needs a [V, C] "
                          "table split along V and looked up along it");
        embeddings.push_back(g);
        return true;
      })
      .Case([&](CrossEntropyOp ce) {
        // Vocabulary-parallel: each rank holds a block of the classes.
        auto logits = cast<RankedTensorType>(ce.getLogits().getType());
        if (logits.getRank() != 2 || s.dim != 1 || s.groups != 1 ||
            in[1].isSplit() || ce.getReduction() == Reduction::None)
          return fail(op, "a vocabulary-parallel loss needs [N, C] logits "
                          "split along C and a mean or sum reduction");
        crossEntropies.push_back(ce);
        return true;
      })
      .Case([&](func::ReturnOp) {
        for (auto [i, x] : llvm::enumerate(in)) {
          if (!x.isSplit())
            continue;
          if (x.groups != 1)
            return fail(op, "a result of @" + func.getSymName() +
                                " would be split over the ranks in groups");
          gathers.push_back({op, static_cast<unsigned>(i)});
        }
        return true;
      })
      .Default([&](Operation *) {
        return fail(op, "it has no tensor-parallel rule for an operand "
                        "split along dimension " +
                            Twine(s.dim));
      });
}

bool Propagation::matmul(MatmulOp op) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  int64_t lr = cast<RankedTensorType>(lhs.getType()).getRank();
  int64_t rr = cast<RankedTensorType>(rhs.getType()).getRank();
  int64_t lk = op.getTransposeA() ? lr - 2 : lr - 1;
  int64_t rk = op.getTransposeB() ? rr - 1 : rr - 2;
  int64_t rn = op.getTransposeB() ? rr - 2 : rr - 1;
  Split a = of(lhs), w = of(rhs);
  if (op.getBias() && (a.isSplit() || w.isSplit()))
    return fail(op, "it has a fused bias");
  // Row-parallel: the contraction dimension split on both sides; the
  // ranks' products are partial sums.
  if (a.dim == lk && a.groups == 1 && !w.isSplit() && rr == 2) {
    if (freeParam(rhs) && !set(op, rhs, Split{rk, 1}))
      return false;
    // A weight transposed first (read by this product alone): the
    // parameter split along the other dimension, the transpose like it.
    Value param = transposedParameter(rhs);
    if (param && freeParam(param) && rhs.hasOneUse() &&
        (!set(op, param, Split{1 - rk, 1}) || !set(op, rhs, Split{rk, 1})))
      return false;
  }
  w = of(rhs);
  if (a.dim == lk && w.dim == rk) {
    if (a.groups != 1 || w.groups != 1)
      return fail(op, "its contraction dimension is split in groups");
    partials.push_back(op);
    return true;
  }
  // Column-parallel: the weight's output columns split.
  if (!a.isSplit() && w.dim == rn && (rr == 2 || lr == 2))
    return set(op, op.getResult(), Split{lr - 1, w.groups});
  // Batch dimensions split alike (attention's heads).
  if (a.isSplit() && a.dim < lr - 2 &&
      ((rr == lr && w == a) || (rr == 2 && !w.isSplit())))
    return set(op, op.getResult(), a);
  if (!a.isSplit() && !w.isSplit())
    return true;
  return fail(op, "no tensor-parallel rule for a product with operands "
                  "split along dimensions " +
                      Twine(a.dim) + " and " + Twine(w.dim));
}

/// Head-parallel attention: q, k and v split alike along their heads
/// (dimension 1), each rank attending with its own query heads and the
/// key/value heads they read (with grouped-query attention the key/value
/// heads split into the same number of contiguous blocks, which keeps
/// each query head's key/value head on its rank). A mask or bias must
/// broadcast over the heads or be split like them; document ids stay
/// whole. out and lse are split along their heads.
bool Propagation::attention(AttentionOp op) {
  Split q = of(op.getQ()), k = of(op.getK()), v = of(op.getV());
  if (q.dim != 1 || !(k == q) || !(v == q))
    return fail(op, "head-parallel attention needs q, k and v split alike "
                    "along their heads (dimension 1)");
  auto heads = [](Value x) {
    return cast<RankedTensorType>(x.getType()).getDimSize(1);
  };
  if (q.groups != 1 && heads(op.getQ()) != heads(op.getK()))
    return fail(op, "its query heads are split in groups with fewer "
                    "key/value heads");
  for (Value x : {op.getMask(), op.getBias()}) {
    if (!x)
      continue;
    Split s = of(x);
    if (!(s.isSplit() ? s == q : heads(x) == 1))
      return fail(op, "its mask or bias is neither split like its heads "
                      "nor broadcast over them");
  }
  if (op.getSegments() && of(op.getSegments()).isSplit())
    return fail(op, "its document ids are split");
  if (op.getSeed())
    return fail(op, "its dropout mask is drawn over all the heads (a rank "
                    "would draw its heads' elements at other indices)");
  return set(op, op.getOut(), q) && set(op, op.getLse(), q);
}

/// A concatenation along another dimension than the split one, of inputs
/// all split alike (rotary embeddings' rotate_half on heads split over the
/// ranks): the result is split the same way.
bool Propagation::concat(ConcatOp op, ArrayRef<Split> in) {
  Split s = in[0];
  if (llvm::any_of(in, [&](Split x) { return !(x == s); }))
    return fail(op, "its inputs are not all split alike");
  if (static_cast<int64_t>(op.getDim()) == s.dim)
    return fail(op, "it concatenates along the split dimension " +
                        Twine(s.dim));
  return set(op, op.getResult(), s);
}

bool Propagation::pointwise(Operation *op) {
  Split s;
  for (Value v : op->getOperands()) {
    Split x = of(v);
    if (!x.isSplit())
      continue;
    if (s.isSplit() && !(s == x))
      return fail(op, "its operands are split differently");
    s = x;
  }
  if (!s.isSplit())
    return true;
  for (OpOperand &use : op->getOpOperands()) {
    Value v = use.get();
    if (of(v).isSplit())
      continue;
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || type.getRank() == 0)
      continue; // a scalar (a seed) is the same everywhere
    Operation *def = v.getDefiningOp();
    if (auto b = dyn_cast_or_null<BroadcastInDimOp>(def)) {
      ArrayRef<int64_t> dims = b.getDims();
      auto pos = llvm::find(dims, s.dim);
      auto bx = cast<RankedTensorType>(b.getX().getType());
      if (pos == dims.end() || bx.getDimSize(pos - dims.begin()) == 1) {
        // Broadcast along the split dimension: the same on every rank.
        localOperands.push_back({op, use.getOperandNumber()});
        continue;
      }
      // A parameter broadcast into the split dimension alone (a bias):
      // split it too.
      BlockArgument p = freeParam(b.getX());
      if (p && p.hasOneUse() && b->hasOneUse()) {
        if (!set(op, p, Split{pos - dims.begin(), s.groups}) ||
            !set(op, b.getResult(), s))
          return false;
        continue;
      }
    }
    if (auto c = dyn_cast_or_null<ConstantOp>(def))
      if (auto dense = dyn_cast<SplatElementsAttr>(c.getValue())) {
        localOperands.push_back({op, use.getOperandNumber()});
        continue;
      }
    return fail(op, "operand #" + Twine(use.getOperandNumber()) +
                        " is whole on every rank while another is split "
                        "along dimension " +
                        Twine(s.dim));
  }
  for (Value r : op->getResults())
    if (!set(op, r, s))
      return false;
  return true;
}

bool Propagation::slice(SliceOp op, Split s) {
  auto type = cast<RankedTensorType>(op.getX().getType());
  int64_t d = s.dim, size = type.getDimSize(d);
  int64_t start = op.getStart()[d], limit = op.getLimit()[d];
  int64_t group = size / s.groups;
  if (op.getStride()[d] != 1 || start % group != 0 || limit - start != group)
    return fail(op, "it does not take whole groups of the split dimension " +
                        Twine(d) + " (" + Twine(s.groups) + " groups of " +
                        Twine(group) + ")");
  return set(op, op.getResult(), Split{d, 1});
}

bool Propagation::reshape(ReshapeOp op, Split s) {
  ArrayRef<int64_t> in = cast<RankedTensorType>(op.getX().getType()).getShape();
  ArrayRef<int64_t> out = op.getType().getShape();
  // Walk both shapes in runs of equal products. In the run holding the
  // split dimension d, a rank owns block r of each of T = (product of the
  // run's dimensions before d) * groups equal consecutive groups of the
  // run's flattened elements. An output dimension j of the run carries
  // that as a split of its own when the run's dimensions before it
  // (product Q) are outer to every group (Q divides T) and it holds the
  // T / Q groups of each outer index whole, each cut into n blocks.
  size_t i = 0, j = 0;
  while (i < in.size() && j < out.size()) {
    size_t i0 = i, j0 = j;
    int64_t pi = in[i++], pj = out[j++];
    while (pi != pj) {
      if (pi < pj && i < in.size())
        pi *= in[i++];
      else if (j < out.size())
        pj *= out[j++];
      else
        break;
    }
    if (pi != pj)
      break;
    if (s.dim < static_cast<int64_t>(i0) || s.dim >= static_cast<int64_t>(i))
      continue;
    int64_t total = s.groups;
    for (size_t k = i0; k < static_cast<size_t>(s.dim); ++k)
      total *= in[k];
    int64_t outer = 1;
    for (size_t k = j0; k < j; ++k) {
      if (total % outer == 0) {
        int64_t groups = total / outer;
        if (out[k] % (groups * ranks) == 0)
          return set(op, op.getResult(), Split{static_cast<int64_t>(k), groups});
      }
      outer *= out[k];
    }
    return fail(op, "no dimension of its result carries the split of "
                    "dimension " +
                        Twine(s.dim));
  }
  return fail(op, "its shapes do not line up around the split dimension");
}

/// The number of groups a column-parallel layer's output falls into: G when
/// (after elementwise ops with one reader each) every reader slices one of
/// G equal consecutive blocks of the last dimension (GPT-2's fused query,
/// key and value), else 1.
int64_t tensor_parallel::outputGroups(MatmulOp op) {
  Value v = op.getResult();
  auto lastDim = [](Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    return t.getDimSize(t.getRank() - 1);
  };
  while (v.hasOneUse()) {
    Operation *user = *v.getUsers().begin();
    auto fk = dyn_cast<FusionKindOpInterface>(user);
    bool pointwise = fk && fk.getFusionKind() == FusionKind::Pointwise;
    // A reshape of the leading dimensions ([B*T, 3C] -> [B, T, 3C]).
    bool keepsLast = isa<ReshapeOp>(user) &&
                     lastDim(user->getResult(0)) == lastDim(v);
    if ((!pointwise && !keepsLast) || user->getNumResults() != 1)
      break;
    v = user->getResult(0);
  }
  auto type = cast<RankedTensorType>(v.getType());
  int64_t d = type.getRank() - 1, size = type.getDimSize(d);
  int64_t width = 0;
  for (Operation *user : v.getUsers()) {
    auto sl = dyn_cast<SliceOp>(user);
    if (!sl)
      return 1;
    int64_t w = sl.getLimit()[d] - sl.getStart()[d];
    if (sl.getStride()[d] != 1 || (width && w != width) || w == 0 ||
        sl.getStart()[d] % w != 0)
      return 1;
    width = w;
  }
  if (!width || size % width != 0)
    return 1;
  return size / width;
}

Value tensor_parallel::transposedParameter(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  if (!t || t.getPerm() != ArrayRef<int64_t>{1, 0} ||
      !isa<BlockArgument>(t.getX()))
    return {};
  return t.getX();
}

/// The local type of `type` split by `s` over `ranks`.
RankedTensorType tensor_parallel::localType(Type type, Split s, int64_t ranks) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[s.dim] /= ranks;
  return RankedTensorType::get(shape, t.getElementType());
}
