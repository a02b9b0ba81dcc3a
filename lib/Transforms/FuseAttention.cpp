//===- FuseAttention.cpp - Attention chains into loom.attention -----------===//
//
// `loom-fuse-attention`: every softmax over the last dimension is a
// candidate. Its chain is matched backward and forward:
//
//   scores = matmul(Q', K') where Q' is Q times scalar constants and K' is
//            K^T (a transpose, a transpose between reshapes, or the
//            matmul's transpose_b flag) times scalar constants, K possibly
//            repeated over query heads (grouped-query attention's
//            reshape -> broadcast -> reshape);
//   x      = scores (times / divided by scalars) + additive terms, or
//            select(keep, x, very negative) at any level of the sum;
//   p      = softmax(x, last), optionally guarded (select(p != p, 0, p)),
//            optionally with dropout (loom.dropout: the op's dropout);
//   out    = matmul(p, V), V possibly repeated like K.
//
// The additive terms and kept masks are split into leaves (an additive
// select(keep, 0, lowest) is the keep mask `keep`; a keep mask
// select(a, b, false), ONNX's And, is `a` and `b`), with the broadcasts
// that put them in the scores' shape stripped. Leaves that do not depend
// on the function's arguments are evaluated at compile time position by
// position, never materialized (a [B, 1, T, T] mask is what makes T = 2048
// impossible otherwise): a position is allowed where the additive leaves
// are 0 and every keep leaf is true, masked where a leaf is <= -1e30
// (float32's lowest, or -inf) or a mask false; a constant real bias the same
// for every query row (ALiBi) becomes the op's bias operand, any other keeps
// the chain as it is. These allowed positions must be exactly none masked,
// causal, or a causal sliding window. Leaves computed from the arguments
// (padding masks, relative biases) become the op's mask and bias operands
// at their own broadcast shape, and an equality of [B, T] integer ids
// broadcast along the queries and the keys (a document mask of packed
// sequences) its segments operand. Invariant: the rewrite changes no value the
// function computes, except rows that are entirely masked (0 here; the
// unfused softmax of all-lowest scores averages every value), which only
// padded query positions have. Chains computed with batch and heads merged
// ([B*H, T, S] around a 4-D softmax, BLOOM's) are first rebuilt on
// [B, H, ...] (LiftMergedHeads.h).
//
//===----------------------------------------------------------------------===//

#include "LiftMergedHeads.h"
#include "PassHelpers.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>
#include <optional>

namespace loom {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "loom/Transforms/Passes.h.inc"
} // namespace loom

#define DEBUG_TYPE "loom-fuse-attention"

using namespace mlir;
using namespace loom;

namespace {

RankedTensorType typeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// Strips multiplications and divisions by scalar constants off `v`,
/// folding them into `scale`.
Value stripScale(Value v, double &scale) {
  while (true) {
    if (auto m = v.getDefiningOp<MulOp>()) {
      if (auto c = scalarConstant(m.getY())) {
        scale *= *c, v = m.getX();
        continue;
      }
      if (auto c = scalarConstant(m.getX())) {
        scale *= *c, v = m.getY();
        continue;
      }
    }
    if (auto d = v.getDefiningOp<DivOp>())
      if (auto c = scalarConstant(d.getY()); c && *c != 0) {
        scale /= *c, v = d.getX();
        continue;
      }
    return v;
  }
}

/// `x` if `v` repeats the heads of `x : [B, Hkv, S, D]` to `[B, Hkv * n,
/// S, D]` as grouped-query attention's repeat_kv does (reshape to [B, Hkv,
/// 1, S, D], broadcast to [B, Hkv, n, S, D], reshape back), else `v`.
Value stripHeadRepeat(Value v) {
  auto outer = v.getDefiningOp<ReshapeOp>();
  if (!outer)
    return v;
  auto bcast = outer.getX().getDefiningOp<BroadcastInDimOp>();
  if (!bcast)
    return v;
  auto inner = bcast.getX().getDefiningOp<ReshapeOp>();
  if (!inner)
    return v;
  Value x = inner.getX();
  ArrayRef<int64_t> xs = typeOf(x).getShape(), vs = typeOf(v).getShape();
  ArrayRef<int64_t> mid = typeOf(inner).getShape(),
                    big = typeOf(bcast).getShape();
  if (xs.size() != 4 || vs.size() != 4 || mid.size() != 5 ||
      big.size() != 5)
    return v;
  SmallVector<int64_t> wantMid{xs[0], xs[1], 1, xs[2], xs[3]};
  SmallVector<int64_t> ident{0, 1, 2, 3, 4};
  if (mid != ArrayRef<int64_t>(wantMid) ||
      bcast.getDims() != ArrayRef<int64_t>(ident) || big[0] != xs[0] ||
      big[1] != xs[1] || big[3] != xs[2] || big[4] != xs[3] ||
      vs[0] != xs[0] || vs[1] != xs[1] * big[2] || vs[2] != xs[2] ||
      vs[3] != xs[3])
    return v;
  return x;
}

/// `k : [B, H, S, D]` if `kt : [B, H, D, S]` is its transpose (directly, or
/// as [B*H, S, D] -> [B*H, D, S] between reshapes), else null.
Value untransposeKey(Value kt) {
  ArrayRef<int64_t> ks = typeOf(kt).getShape();
  if (ks.size() != 4)
    return {};
  if (auto t = kt.getDefiningOp<TransposeOp>()) {
    if (t.getPerm() == ArrayRef<int64_t>{0, 1, 3, 2})
      return t.getX();
    return {};
  }
  auto outer = kt.getDefiningOp<ReshapeOp>();
  if (!outer)
    return {};
  auto t = outer.getX().getDefiningOp<TransposeOp>();
  if (!t || t.getPerm() != ArrayRef<int64_t>{0, 2, 1})
    return {};
  auto inner = t.getX().getDefiningOp<ReshapeOp>();
  if (!inner)
    return {};
  Value k = inner.getX();
  ArrayRef<int64_t> s = typeOf(k).getShape();
  if (s.size() != 4 || s[0] != ks[0] || s[1] != ks[1] || s[2] != ks[3] ||
      s[3] != ks[2])
    return {};
  return k;
}

//===----------------------------------------------------------------------===//
// Evaluating masks at compile time, one position at a time
//===----------------------------------------------------------------------===//

/// Evaluates values computed from constants alone at one index, without
/// materializing them; fails (with the reason) on a value that depends on
/// a function argument or is made by an op it does not know.
class MaskEvaluator {
public:
  /// The element of `v` at `index` (of v's shape), or nullopt (see `why`).
  std::optional<double> at(Value v, ArrayRef<int64_t> index) {
    Operation *op = v.getDefiningOp();
    if (!op) {
      why = "it depends on the function's arguments (a mask computed from "
            "the inputs)";
      return std::nullopt;
    }
    if (auto c = dyn_cast<ConstantOp>(op))
      return constantAt(c, index);
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      ArrayRef<int64_t> in = typeOf(b.getX()).getShape();
      SmallVector<int64_t, 4> idx;
      for (auto [k, d] : llvm::enumerate(b.getDims()))
        idx.push_back(in[k] == 1 ? 0 : index[d]);
      return at(b.getX(), idx);
    }
    if (auto r = dyn_cast<ReshapeOp>(op)) {
      int64_t flat = 0;
      ArrayRef<int64_t> out = typeOf(r).getShape();
      for (auto [i, d] : llvm::zip(index, out))
        flat = flat * d + i;
      ArrayRef<int64_t> in = typeOf(r.getX()).getShape();
      SmallVector<int64_t, 4> idx(in.size());
      for (int64_t d = in.size() - 1; d >= 0; --d) {
        idx[d] = flat % in[d];
        flat /= in[d];
      }
      return at(r.getX(), idx);
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      SmallVector<int64_t, 4> idx(index.size());
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        idx[p] = index[i];
      return at(t.getX(), idx);
    }
    if (auto s = dyn_cast<SliceOp>(op)) {
      SmallVector<int64_t, 4> idx;
      for (auto [i, st, str] :
           llvm::zip(index, s.getStart(), s.getStride()))
        idx.push_back(st + i * str);
      return at(s.getX(), idx);
    }
    if (auto s = dyn_cast<SelectOp>(op)) {
      std::optional<double> c = at(s.getCond(), index);
      if (!c)
        return std::nullopt;
      return at(*c != 0 ? s.getOnTrue() : s.getOnFalse(), index);
    }
    if (auto c = dyn_cast<CastOp>(op)) {
      std::optional<double> x = at(c.getX(), index);
      if (!x)
        return std::nullopt;
      Type to = getElementTypeOrSelf(c.getType());
      if (to.isInteger(1))
        return double(*x != 0);
      return isa<FloatType>(to) ? *x : std::trunc(*x);
    }
    if (auto c = dyn_cast<CompareOp>(op)) {
      std::optional<double> x = at(c.getLhs(), index),
                            y = x ? at(c.getRhs(), index) : std::nullopt;
      if (!y)
        return std::nullopt;
      switch (c.getPredicate()) {
      case ComparePredicate::EQ: return double(*x == *y);
      case ComparePredicate::NE: return double(*x != *y);
      case ComparePredicate::LT: return double(*x < *y);
      case ComparePredicate::LE: return double(*x <= *y);
      case ComparePredicate::GT: return double(*x > *y);
      case ComparePredicate::GE: return double(*x >= *y);
      }
    }
    if (isa<AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp>(op)) {
      std::optional<double> x = at(op->getOperand(0), index),
                            y = x ? at(op->getOperand(1), index)
                                  : std::nullopt;
      if (!y)
        return std::nullopt;
      bool isInt = !isa<FloatType>(getElementTypeOrSelf(v.getType()));
      if (isa<AddOp>(op)) return *x + *y;
      if (isa<SubOp>(op)) return *x - *y;
      if (isa<MulOp>(op)) return *x * *y;
      if (isa<MaxOp>(op)) return std::max(*x, *y);
      if (isa<MinOp>(op)) return std::min(*x, *y);
      if (isInt && *y == 0) {
        why = "it divides integers by zero";
        return std::nullopt;
      }
      return isInt ? std::trunc(*x / *y) : *x / *y;
    }
    if (auto n = dyn_cast<NegOp>(op)) {
      std::optional<double> x = at(n.getX(), index);
      return x ? std::optional<double>(-*x) : std::nullopt;
    }
    why = ("it is computed by '" + op->getName().getStringRef() +
           "', which the mask evaluator does not know")
              .str();
    return std::nullopt;
  }

  /// The dimensions of `v` along which it may vary (a conservative answer:
  /// a dimension it broadcasts along does not).
  llvm::SmallBitVector varying(Value v) {
    auto shape = typeOf(v).getShape();
    llvm::SmallBitVector all(shape.size());
    for (auto [d, n] : llvm::enumerate(shape))
      all[d] = n != 1;
    Operation *op = v.getDefiningOp();
    if (!op)
      return all;
    if (auto b = dyn_cast<BroadcastInDimOp>(op)) {
      llvm::SmallBitVector in = varying(b.getX()), out(shape.size());
      for (auto [k, d] : llvm::enumerate(b.getDims()))
        out[d] = in[k];
      return out;
    }
    if (auto t = dyn_cast<TransposeOp>(op)) {
      llvm::SmallBitVector in = varying(t.getX()), out(shape.size());
      for (auto [i, p] : llvm::enumerate(t.getPerm()))
        out[i] = in[p];
      return out;
    }
    if (auto c = dyn_cast<ConstantOp>(op)) {
      auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
      return attr && attr.isSplat() ? llvm::SmallBitVector(shape.size())
                                    : all;
    }
    if (isa<SelectOp, CompareOp, CastOp, AddOp, SubOp, MulOp, DivOp, MaxOp,
            MinOp, NegOp>(op)) {
      llvm::SmallBitVector out(shape.size());
      for (Value x : op->getOperands())
        out |= varying(x);
      return out;
    }
    return all;
  }

  std::string why;

private:
  std::optional<double> constantAt(ConstantOp c, ArrayRef<int64_t> index) {
    auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!attr) {
      why = "it reads a constant that is not dense";
      return std::nullopt;
    }
    auto it = constants.find(c);
    if (it == constants.end()) {
      std::vector<double> values;
      values.reserve(attr.isSplat() ? 1 : attr.getNumElements());
      if (isa<FloatType>(attr.getElementType())) {
        for (APFloat f : attr.getValues<APFloat>()) {
          values.push_back(f.convertToDouble());
          if (attr.isSplat())
            break;
        }
      } else {
        bool isBool = attr.getElementType().isInteger(1);
        for (APInt i : attr.getValues<APInt>()) {
          values.push_back(isBool ? double(!i.isZero())
                                  : double(i.getSExtValue()));
          if (attr.isSplat())
            break;
        }
      }
      it = constants.try_emplace(c, std::move(values)).first;
    }
    if (it->second.size() == 1)
      return it->second[0];
    int64_t flat = 0;
    for (auto [i, d] : llvm::zip(index, typeOf(c).getShape()))
      flat = flat * d + i;
    return it->second[flat];
  }

  llvm::DenseMap<Operation *, std::vector<double>> constants;
};

/// What the masks of one chain allow: nothing masked, causal, or a causal
/// sliding window.
struct MaskKind {
  bool causal = false;
  int64_t window = 0;
};

/// One mask of the chain: an additive term (allowed where 0, masked where
/// <= -1e30) or a keep mask (allowed where true, or where false with
/// `inverted`).
struct MaskTerm {
  Value value;
  bool additive = true, inverted = false;
};

constexpr double kMaskedBelow = -1e30;

/// A mask term split to its leaves: `value` with the broadcasts that put
/// it in the scores' [B, H, T, S] shape stripped. Dimension k of `value`
/// is the scores' dimension `dims[k]` (increasing); `shape` is `value`'s
/// shape placed in four dimensions, 1 where it broadcasts.
struct MaskLeaf {
  MaskTerm term;
  SmallVector<int64_t, 4> dims, shape;

  /// The leaf's own index for the scores' index `idx`.
  SmallVector<int64_t, 4> indexOf(ArrayRef<int64_t> idx) const {
    SmallVector<int64_t, 4> own;
    for (int64_t d : dims)
      own.push_back(shape[d] == 1 ? 0 : idx[d]);
    return own;
  }
};

/// Splits `t` (of the scores' shape) into leaves: an additive
/// `select(c, 0, -big)` is the keep mask `c`, a keep mask
/// `select(a, b, false)` (ONNX's And) the keep masks `a` and `b`.
void splitMaskTerm(MaskTerm t, SmallVectorImpl<MaskLeaf> &out) {
  SmallVector<int64_t, 4> dims{0, 1, 2, 3};
  std::function<void(MaskTerm, SmallVector<int64_t, 4>)> split =
      [&](MaskTerm t, SmallVector<int64_t, 4> dims) {
        while (auto b = t.value.getDefiningOp<BroadcastInDimOp>()) {
          ArrayRef<int64_t> bd = b.getDims();
          bool increasing = true;
          for (size_t k = 1; k < bd.size(); ++k)
            increasing &= bd[k] > bd[k - 1];
          if (!increasing)
            break;
          SmallVector<int64_t, 4> inner;
          for (int64_t d : bd)
            inner.push_back(dims[d]);
          dims = inner;
          t.value = b.getX();
        }
        if (auto sel = t.value.getDefiningOp<SelectOp>()) {
          std::optional<double> on = scalarConstant(sel.getOnTrue()),
                                off = scalarConstant(sel.getOnFalse());
          if (t.additive && on && off && *on == 0 && *off <= kMaskedBelow)
            return split({sel.getCond(), false, false}, dims);
          if (t.additive && on && off && *off == 0 && *on <= kMaskedBelow)
            return split({sel.getCond(), false, true}, dims);
          if (!t.additive && !t.inverted && off && *off == 0) {
            split({sel.getCond(), false, false}, dims);
            return split({sel.getOnTrue(), false, false}, dims);
          }
        }
        MaskLeaf leaf{t, dims, SmallVector<int64_t, 4>(4, 1)};
        for (auto [k, d] : llvm::enumerate(dims))
          leaf.shape[d] = typeOf(t.value).getDimSize(k);
        out.push_back(std::move(leaf));
      };
  split(t, dims);
}

/// The [B, T] integer tensor whose broadcasts `leaf` compares for
/// equality, one along the queries and one along the keys (a document
/// mask of packed sequences: `ids[:, None, :, None] == ids[:, None, None,
/// :]`), or null.
Value documentIds(const MaskLeaf &leaf, ArrayRef<int64_t> scoresShape) {
  auto cmp = leaf.term.value.getDefiningOp<CompareOp>();
  if (!cmp || cmp.getPredicate() != ComparePredicate::EQ || leaf.term.inverted)
    return {};
  // Follows an operand through broadcasts and reshapes that move unit
  // dimensions, keeping which scores dimension each dimension is (-1: a
  // unit dimension with none); returns the source and the scores
  // dimension of its second dimension.
  auto trace = [&](Value v) -> std::pair<Value, int64_t> {
    SmallVector<int64_t, 4> dims(leaf.dims.begin(), leaf.dims.end());
    while (true) {
      if (auto b = v.getDefiningOp<BroadcastInDimOp>()) {
        SmallVector<int64_t, 4> inner;
        for (int64_t d : b.getDims())
          inner.push_back(dims[d]);
        dims = inner, v = b.getX();
        continue;
      }
      if (auto r = v.getDefiningOp<ReshapeOp>()) {
        ArrayRef<int64_t> in = typeOf(r.getX()).getShape(),
                          out = typeOf(r).getShape();
        SmallVector<int64_t, 4> inner(in.size(), -1);
        size_t o = 0;
        bool ok = true;
        for (size_t k = 0; k < in.size() && ok; ++k) {
          if (in[k] == 1)
            continue;
          while (o < out.size() && out[o] == 1)
            ++o;
          ok = o < out.size() && out[o] == in[k];
          if (ok)
            inner[k] = dims[o++];
        }
        while (ok && o < out.size() && out[o] == 1)
          ++o;
        if (!ok || o != out.size())
          return {Value(), -1};
        dims = inner, v = r.getX();
        continue;
      }
      break;
    }
    auto t = typeOf(v);
    if (t.getRank() != 2 || !isa<IntegerType>(t.getElementType()) ||
        t.getElementType().isInteger(1) || t.getDimSize(0) != scoresShape[0] ||
        t.getDimSize(1) != scoresShape[2] ||
        (dims[0] != 0 && t.getDimSize(0) != 1))
      return {Value(), -1};
    return {v, dims[1]};
  };
  auto [x, dx] = trace(cmp.getLhs());
  auto [y, dy] = trace(cmp.getRhs());
  if (!x || x != y || scoresShape[2] != scoresShape[3] ||
      !((dx == 2 && dy == 3) || (dx == 3 && dy == 2)))
    return {};
  return x;
}

/// Whether values depend on an argument of their function (memoized).
class ArgDependence {
public:
  bool operator()(Value v) {
    if (isa<BlockArgument>(v))
      return true;
    SmallVector<Value> stack{v};
    while (!stack.empty()) {
      Operation *op = stack.back().getDefiningOp();
      if (memo.count(op)) {
        stack.pop_back();
        continue;
      }
      bool pending = false, dep = false;
      for (Value in : op->getOperands()) {
        if (isa<BlockArgument>(in)) {
          dep = true;
          continue;
        }
        auto it = memo.find(in.getDefiningOp());
        if (it == memo.end()) {
          stack.push_back(in);
          pending = true;
        } else {
          dep |= it->second;
        }
      }
      if (!pending) {
        memo[op] = dep;
        stack.pop_back();
      }
    }
    return memo[v.getDefiningOp()];
  }

private:
  llvm::DenseMap<Operation *, bool> memo;
};

/// The 4-D (b, h, i, j) position of `index` of a term of the scores' shape.
class MaskClassifier {
public:
  explicit MaskClassifier(MaskEvaluator &eval) : eval(eval) {}

  /// Classifies the conjunction of `terms` over scores of `shape` [B, H,
  /// T, S], or fails with the reason in `why`.
  std::optional<MaskKind> classify(ArrayRef<MaskLeaf> leaves,
                                   ArrayRef<int64_t> shape) {
    int64_t T = shape[2], S = shape[3];
    // The index ranges worth visiting: a dimension no term varies along
    // is visited once.
    llvm::SmallBitVector vary(4);
    for (const MaskLeaf &l : leaves) {
      llvm::SmallBitVector own = eval.varying(l.term.value);
      for (auto [k, d] : llvm::enumerate(l.dims))
        if (own[k])
          vary.set(d);
    }
    int64_t nb = vary[0] ? shape[0] : 1, nh = vary[1] ? shape[1] : 1;
    auto allowedAt = [&](int64_t b, int64_t h, int64_t i,
                         int64_t j) -> std::optional<bool> {
      int64_t idx[4] = {b, h, i, j};
      bool allowed = true;
      for (const MaskLeaf &l : leaves) {
        const MaskTerm &t = l.term;
        std::optional<double> x = eval.at(t.value, l.indexOf(idx));
        if (!x)
          return std::nullopt;
        if (t.additive) {
          if (*x == 0)
            continue;
          if (*x <= kMaskedBelow) {
            allowed = false;
            continue;
          }
          eval.why = "an additive term is neither 0 nor a mask value "
                     "(a bias: it stays unfused)";
          return std::nullopt;
        }
        allowed &= (*x != 0) != t.inverted;
      }
      return allowed;
    };
    // The hypothesis, from the first and the last query rows.
    std::optional<bool> first = allowedAt(0, 0, 0, S > 1 ? 1 : 0);
    if (!first)
      return fail();
    MaskKind kind;
    kind.causal = S > 1 && !*first;
    if (kind.causal) {
      if (T != S) {
        eval.why = "a causal mask with as many queries as keys is needed";
        return std::nullopt;
      }
      int64_t count = 0;
      for (int64_t j = 0; j < S; ++j) {
        std::optional<bool> a = allowedAt(0, 0, T - 1, j);
        if (!a)
          return fail();
        count += *a;
      }
      kind.window = count == S ? 0 : count;
    }
    for (int64_t b = 0; b < nb; ++b)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j) {
            bool want = (!kind.causal || j <= i) &&
                        (kind.window == 0 || i - j < kind.window);
            std::optional<bool> a = allowedAt(b, h, i, j);
            if (!a)
              return fail();
            if (*a != want) {
              eval.why = "the mask is neither causal nor a causal sliding "
                         "window (position [" +
                         std::to_string(b) + ", " + std::to_string(h) +
                         ", " + std::to_string(i) + ", " +
                         std::to_string(j) + "] differs)";
              return std::nullopt;
            }
          }
    return kind;
  }

  std::string why() const { return eval.why; }

private:
  std::optional<MaskKind> fail() { return std::nullopt; }
  MaskEvaluator &eval;
};

//===----------------------------------------------------------------------===//
// Matching a chain
//===----------------------------------------------------------------------===//

struct Chain {
  Value q, k, v;
  double scale = 1.0;
  MaskKind mask;
  /// Mask and bias leaves computed from the function's arguments.
  SmallVector<MaskLeaf> runMasks, runBiases;
  /// Bias leaves computed from constants, the same for every query row
  /// (ALiBi); the op's bias operand with runBiases.
  SmallVector<MaskLeaf> constBiases;
  /// Document ids [B, T] an equality leaf compares (the op's segments).
  Value segments;
  /// Dropout on the probabilities (a loom.dropout between the softmax and
  /// the product with V): its seed, ratio and stream; null seed: none.
  Value seed;
  float dropout = 0.0f;
  int64_t stream = 0;
  MatmulOp scores, pv;
  SoftmaxOp softmax;
};

class ChainMatcher {
public:
  /// A mask term's classification and, when it failed, the reason.
  using Cache =
      llvm::DenseMap<Value, std::pair<std::optional<MaskKind>, std::string>>;

  ChainMatcher(MaskEvaluator &eval, Cache &cache, ArgDependence &dependsOnArgs)
      : eval(eval), cache(cache), dependsOnArgs(dependsOnArgs) {}

  /// The chain around `sm`, or nullopt with the reason in `why` (empty
  /// when `sm` is not an attention softmax at all).
  std::optional<Chain> match(SoftmaxOp sm) {
    Chain c;
    c.softmax = sm;
    auto st = typeOf(sm.getX());
    if (st.getRank() != 4 || sm.getAxis() != 3)
      return std::nullopt;
    // Backward from the softmax: the scores and the masks.
    SmallVector<MaskTerm> masks;
    Value scores;
    double outerScale = 1.0;
    if (!collect(sm.getX(), masks, scores, outerScale))
      return std::nullopt;
    c.scores = scores.getDefiningOp<MatmulOp>();
    if (!c.scores)
      return std::nullopt;
    why = "";
    if (c.scores.getBias() || c.scores.getTransposeA())
      return reject("the scores' product has a bias or a transposed "
                    "query");
    double scale = outerScale;
    Value q = stripScale(c.scores.getLhs(), scale);
    Value kt = stripScale(c.scores.getRhs(), scale);
    Value k = c.scores.getTransposeB() ? kt : untransposeKey(kt);
    if (!k)
      return reject("the keys are not read transposed");
    k = stripHeadRepeat(stripScale(k, scale));
    if (typeOf(q).getRank() != 4 || typeOf(k).getRank() != 4)
      return reject("the queries or keys are not [batch, heads, sequence, "
                    "head dim]");
    c.q = q, c.k = k, c.scale = scale;
    // Forward from the softmax: the guard and the product with V.
    if (!matchOutput(sm, c))
      return std::nullopt;
    // The masks: leaves computed from constants are proven none, causal
    // or a causal window (evaluated once per distinct value); leaves
    // computed from the inputs become the op's mask and bias operands.
    SmallVector<MaskLeaf> leaves, fixed;
    for (const MaskTerm &t : masks)
      splitMaskTerm(t, leaves);
    for (MaskLeaf &l : leaves) {
      if (!dependsOnArgs(l.term.value)) {
        fixed.push_back(l);
        continue;
      }
      if (l.term.additive &&
          getElementTypeOrSelf(l.term.value.getType()) != st.getElementType())
        return reject("its bias computed from the inputs is not of the "
                      "scores' element type");
      if (!l.term.additive && !c.segments)
        if (Value ids = documentIds(l, st.getShape())) {
          c.segments = ids;
          continue;
        }
      (l.term.additive ? c.runBiases : c.runMasks).push_back(l);
    }
    if (!fixed.empty()) {
      std::optional<MaskKind> kind = classify(fixed, st.getShape());
      if (!kind) {
        // A term computed from constants that is the same for every query
        // row (ALiBi: a slope per head times the key position) is no mask
        // but adds to the scores as it is: the op's bias operand, of
        // [B, H, 1, S] at most (no T x S tensor). The rest must still be
        // a mask the evaluator proves.
        SmallVector<MaskLeaf> masksOnly, biases;
        for (MaskLeaf &l : fixed)
          (l.term.additive && l.shape[2] == 1 ? biases : masksOnly)
              .push_back(l);
        if (biases.empty())
          return std::nullopt;
        kind = masksOnly.empty() ? MaskKind{}
                                 : classify(masksOnly, st.getShape());
        if (!kind)
          return std::nullopt;
        for (MaskLeaf &l : biases) {
          if (getElementTypeOrSelf(l.term.value.getType()) !=
              st.getElementType())
            return reject("its bias is not of the scores' element type");
          c.constBiases.push_back(l);
        }
      }
      c.mask = *kind;
    }
    if (!getElementTypeOrSelf(q.getType()).isF32() &&
        !getElementTypeOrSelf(q.getType()).isF64())
      return reject("its element type is not f32");
    if (typeOf(c.v).getDimSize(1) != typeOf(k).getDimSize(1) ||
        typeOf(q).getDimSize(1) % typeOf(k).getDimSize(1) != 0)
      return reject("its key and value heads differ");
    return c;
  }

  std::string why;

private:
  std::nullopt_t reject(const Twine &reason) {
    why = reason.str();
    return std::nullopt;
  }
  bool rejectFalse(const Twine &reason) {
    why = reason.str();
    return false;
  }

  /// Splits the softmax input into the scores' product and mask terms.
  bool collect(Value x, SmallVectorImpl<MaskTerm> &masks, Value &scores,
               double &scale) {
    x = stripScale(x, scale);
    if (auto add = x.getDefiningOp<AddOp>()) {
      // The side that leads to the product is the scores; the other is a
      // mask term.
      double s = 1.0;
      for (auto [mine, other] : {std::pair(add.getX(), add.getY()),
                                 std::pair(add.getY(), add.getX())}) {
        SmallVector<MaskTerm> inner;
        Value found;
        double innerScale = s;
        if (collect(mine, inner, found, innerScale)) {
          masks.append(inner);
          masks.push_back({other, /*additive=*/true, false});
          scores = found;
          scale *= innerScale;
          return true;
        }
      }
      return false;
    }
    if (auto sel = x.getDefiningOp<SelectOp>()) {
      for (bool inverted : {false, true}) {
        Value kept = inverted ? sel.getOnFalse() : sel.getOnTrue();
        Value fill = inverted ? sel.getOnTrue() : sel.getOnFalse();
        std::optional<double> f = scalarConstant(fill);
        if (!f || *f > kMaskedBelow)
          continue;
        if (collect(kept, masks, scores, scale)) {
          masks.push_back({sel.getCond(), /*additive=*/false, inverted});
          return true;
        }
      }
      return false;
    }
    if (x.getDefiningOp<MatmulOp>()) {
      scores = x;
      return true;
    }
    return false;
  }

  /// The softmax's readers: the product with V, through the NaN guard
  /// `select(p != p, 0, p)` if there is one.
  bool matchOutput(SoftmaxOp sm, Chain &c) {
    Value p = sm.getResult();
    Value used = p;
    // Distinct readers (the guard's compare reads p twice).
    llvm::SetVector<Operation *> readers;
    for (Operation *u : p.getUsers())
      readers.insert(u);
    SmallVector<Operation *> users(readers.begin(), readers.end());
    if (users.size() == 2) {
      auto cmp = dyn_cast<CompareOp>(users[0]);
      auto sel = dyn_cast<SelectOp>(users[1]);
      if (!cmp)
        cmp = dyn_cast<CompareOp>(users[1]), sel = dyn_cast<SelectOp>(users[0]);
      if (!cmp || !sel || cmp.getPredicate() != ComparePredicate::NE ||
          cmp.getLhs() != p || cmp.getRhs() != p ||
          sel.getCond() != cmp.getResult() || sel.getOnFalse() != p ||
          scalarConstant(sel.getOnTrue()) != 0.0 || !cmp->hasOneUse())
        return rejectFalse("its probabilities have other readers");
      used = sel.getResult();
      users.assign(used.getUsers().begin(), used.getUsers().end());
    }
    if (users.size() != 1)
      return rejectFalse("its probabilities have other readers");
    // Dropout on the probabilities: the fused op draws the same mask (it
    // indexes the [B, Hq, T, S] probabilities as loom.dropout does).
    if (auto drop = dyn_cast<DropoutOp>(users[0])) {
      c.seed = drop.getSeed();
      c.dropout = drop.getRatio().convertToFloat();
      c.stream = static_cast<int64_t>(drop.getStream());
      used = drop.getY();
      users.assign(used.getUsers().begin(), used.getUsers().end());
      if (users.size() != 1)
        return rejectFalse("its probabilities after dropout have other "
                           "readers");
    }
    auto pv = dyn_cast<MatmulOp>(users[0]);
    if (!pv || pv.getLhs() != used || pv.getTransposeA() ||
        pv.getTransposeB() || pv.getBias())
      return rejectFalse("its probabilities are not multiplied by the values");
    c.pv = pv;
    c.v = stripHeadRepeat(pv.getRhs());
    if (typeOf(c.v).getRank() != 4)
      return rejectFalse("the values are not [batch, heads, sequence, dim]");
    return true;
  }

  std::optional<MaskKind> classify(ArrayRef<MaskLeaf> masks,
                                   ArrayRef<int64_t> shape) {
    // Cached by the only leaf (the mask one model's layers share).
    Value key = masks.size() == 1 ? masks[0].term.value : Value();
    if (key) {
      auto it = cache.find(key);
      if (it != cache.end()) {
        if (!it->second.first)
          return reject(it->second.second);
        return it->second.first;
      }
    }
    MaskClassifier classifier(eval);
    std::optional<MaskKind> kind = classifier.classify(masks, shape);
    std::string reason = kind ? "" : "its mask: " + classifier.why();
    if (key)
      cache[key] = {kind, reason};
    if (!kind)
      return reject(reason);
    return kind;
  }

  MaskEvaluator &eval;
  Cache &cache;
  ArgDependence &dependsOnArgs;
};

/// Erases the ops of `func` that nothing reads (the rest of each chain).
void eraseDeadOps(func::FuncOp func) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> dead;
    func.walk([&](Operation *op) {
      if (op->getNumResults() && op->use_empty() && isMemoryEffectFree(op) &&
          op->getParentOp() == func)
        dead.push_back(op);
    });
    for (Operation *op : llvm::reverse(dead))
      op->erase();
    changed = !dead.empty();
  }
}

/// The leaves as one operand of loom.attention: each reshaped to its four
/// dimensions, broadcast to their common shape, and combined (keep masks
/// by and, an inverted one negated; biases by sum). Null when none.
Value combineLeaves(OpBuilder &b, Location loc, ArrayRef<MaskLeaf> leaves) {
  if (leaves.empty())
    return {};
  SmallVector<int64_t, 4> common(4, 1);
  for (const MaskLeaf &l : leaves)
    for (int d = 0; d < 4; ++d)
      common[d] = std::max(common[d], l.shape[d]);
  Type elem = getElementTypeOrSelf(leaves[0].term.value.getType());
  auto type = RankedTensorType::get(common, elem);
  auto splat = [&](bool on) -> Value {
    return ConstantOp::create(b, loc, DenseElementsAttr::get(type, on));
  };
  Value sum;
  for (const MaskLeaf &l : leaves) {
    Value v = l.term.value;
    if (typeOf(v).getShape() != ArrayRef<int64_t>(l.shape))
      v = ReshapeOp::create(b, loc, RankedTensorType::get(l.shape, elem), v);
    if (l.shape != common)
      v = BroadcastInDimOp::create(b, loc, type, v,
                                   ArrayRef<int64_t>{0, 1, 2, 3});
    if (l.term.inverted)
      v = SelectOp::create(b, loc, v, splat(false), splat(true));
    if (!sum)
      sum = v;
    else if (l.term.additive)
      sum = AddOp::create(b, loc, sum, v);
    else
      sum = SelectOp::create(b, loc, sum, v, splat(false));
  }
  return sum;
}

struct FuseAttentionPass
    : public loom::impl::FuseAttentionPassBase<FuseAttentionPass> {
  using FuseAttentionPassBase::FuseAttentionPassBase;

  void runOnOperation() override {
    if (attention != "fused" && attention != "unfused") {
      getOperation().emitError("loom-fuse-attention: mode '")
          << attention << "' is not fused or unfused";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    MLIRContext *ctx = module.getContext();
    MaskEvaluator eval;
    ChainMatcher::Cache cache;
    ArgDependence dependsOnArgs;
    SmallVector<Attribute> report;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      splitKeyTransposes(func);
      bool changed = liftMergedHeads(func) > 0;
      SmallVector<SoftmaxOp> softmaxes;
      func.walk([&](SoftmaxOp sm) { softmaxes.push_back(sm); });
      for (SoftmaxOp sm : softmaxes) {
        ChainMatcher matcher(eval, cache, dependsOnArgs);
        std::optional<Chain> chain = matcher.match(sm);
        std::string node = nodeName(sm.getLoc());
        auto entry = [&](StringRef outcome, StringRef detail) {
          report.push_back(DictionaryAttr::get(
              ctx, {NamedAttribute(StringAttr::get(ctx, "node"),
                                   StringAttr::get(ctx, node)),
                    NamedAttribute(StringAttr::get(ctx, "outcome"),
                                   StringAttr::get(ctx, outcome)),
                    NamedAttribute(StringAttr::get(ctx, "detail"),
                                   StringAttr::get(ctx, detail))}));
        };
        if (!chain) {
          if (!matcher.why.empty()) {
            entry("kept", matcher.why);
            ++numKept;
          }
          continue;
        }
        if (attention == "unfused") {
          entry("kept", "--attention=unfused");
          ++numKept;
          continue;
        }
        rewrite(*chain);
        SmallVector<std::string> parts;
        if (chain->mask.window)
          parts.push_back("causal, window " +
                          std::to_string(chain->mask.window));
        else if (chain->mask.causal)
          parts.push_back("causal");
        if (chain->segments)
          parts.push_back("document ids from the inputs");
        if (!chain->runMasks.empty())
          parts.push_back("mask from the inputs");
        if (!chain->runBiases.empty())
          parts.push_back("bias from the inputs");
        if (!chain->constBiases.empty())
          parts.push_back("bias per key from constants (ALiBi)");
        if (chain->seed)
          parts.push_back(llvm::formatv("dropout {0}", chain->dropout).str());
        std::string kind = parts.empty() ? "no mask" : llvm::join(parts, ", ");
        entry("fused", kind);
        ++numFused;
        changed = true;
      }
      if (changed)
        eraseDeadOps(func);
    }
    if (!report.empty())
      module->setAttr("loom.attention_report", ArrayAttr::get(ctx, report));
  }

  /// The TorchScript exporter transposes K from [B, S, H, D] straight to
  /// K^T [B, H, D, S] (one perm [0, 2, 3, 1]): a 4-D transpose read as a
  /// product's right operand becomes the transpose to [.., S, D] then the
  /// swap of the last two dimensions, the form the matcher reads. Where no
  /// chain fuses, loom-fold-transposes folds the swap into the product's
  /// transpose_b flag: still one transpose.
  void splitKeyTransposes(func::FuncOp func) {
    SmallVector<MatmulOp> products;
    func.walk([&](MatmulOp m) { products.push_back(m); });
    for (MatmulOp m : products) {
      auto t = m.getRhs().getDefiningOp<TransposeOp>();
      if (m.getTransposeB() || !t || typeOf(t.getResult()).getRank() != 4)
        continue;
      ArrayRef<int64_t> p = t.getPerm();
      if (p == ArrayRef<int64_t>{0, 1, 3, 2} ||
          p == ArrayRef<int64_t>{0, 1, 2, 3})
        continue;
      SmallVector<int64_t> inner{p[0], p[1], p[3], p[2]};
      ArrayRef<int64_t> xs = typeOf(t.getX()).getShape();
      auto innerType = RankedTensorType::get(
          {xs[inner[0]], xs[inner[1]], xs[inner[2]], xs[inner[3]]},
          typeOf(t.getX()).getElementType());
      OpBuilder b(m);
      Value k = TransposeOp::create(b, t.getLoc(), innerType, t.getX(),
                                    inner);
      Value kt = TransposeOp::create(b, t.getLoc(), t.getType(), k,
                                     ArrayRef<int64_t>{0, 1, 3, 2});
      m.getRhsMutable().assign(kt);
    }
  }

  void rewrite(Chain c) {
    OpBuilder b(c.pv);
    Location loc = FusedLoc::get(
        c.pv.getContext(),
        {c.softmax.getLoc(), c.scores.getLoc(), c.pv.getLoc()});
    auto qt = typeOf(c.q), vt = typeOf(c.v);
    auto outType = RankedTensorType::get(
        {qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2),
         vt.getDimSize(3)},
        qt.getElementType());
    auto lseType = RankedTensorType::get(
        {qt.getDimSize(0), qt.getDimSize(1), qt.getDimSize(2)},
        b.getF32Type());
    SmallVector<MaskLeaf> biases(c.runBiases);
    biases.append(c.constBiases);
    auto attn = AttentionOp::create(
        b, loc, outType, lseType, c.q, c.k, c.v,
        combineLeaves(b, loc, c.runMasks), combineLeaves(b, loc, biases),
        c.segments, c.seed, b.getF64FloatAttr(c.scale),
        c.mask.causal ? b.getUnitAttr() : UnitAttr(),
        b.getI64IntegerAttr(c.mask.window), b.getF32FloatAttr(c.dropout),
        b.getI64IntegerAttr(c.stream));
    Value out = attn.getOut();
    if (out.getType() != c.pv.getType())
      out = ReshapeOp::create(b, loc, c.pv.getType(), out);
    c.pv.getResult().replaceAllUsesWith(out);
  }
};

} // namespace
