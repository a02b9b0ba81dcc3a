//===- AttentionRules.cpp - Reference rules of the fused attention ops ----===//
//
// loom.attention and loom.attention_grad computed by their definitions
// (LoomOps.td), one query row at a time in double precision: the scores of
// the row, its log-sum-exp, the probabilities, then the products. These are
// the oracle the runtime's tiled online-softmax kernels are tested against,
// so they share nothing with them.
//
//===----------------------------------------------------------------------===//

#include "Rules.h"

#include "loom/Dialect/Loom/IR/LoomOps.h"

using namespace mlir;
using namespace loom::interp;

namespace {

/// The shapes and attributes of one attention op, and where its optional
/// mask, bias and segments are among the operands.
struct AttentionGeometry {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  const Tensor *mask = nullptr, *bias = nullptr, *segments = nullptr;
  double scale;
  bool causal;
  int64_t window;
  /// Dropout on the probabilities: its ratio (0: none), seed and stream.
  double dropout = 0.0;
  int64_t seed = 0, stream = 0;

  /// The dropout factor z of probability (b, h, i, j): loom.dropout's mask
  /// of the [B, Hq, T, S] probabilities (LoomOps.td).
  double keep(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (dropout == 0.0)
      return 1.0;
    int64_t index = ((b * Hq + h) * T + i) * S + j;
    return dropoutUniform(seed, stream, index) < dropout
               ? 0.0
               : 1.0 / (1.0 - dropout);
  }

  bool allowed(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (causal && j > i)
      return false;
    if (window > 0 && i - j >= window)
      return false;
    if (segments && segments->data[b * T + i] != segments->data[b * T + j])
      return false;
    return !mask || mask->data[broadcastIndex(*mask, b, h, i, j)] != 0;
  }
  double biasAt(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return bias ? bias->data[broadcastIndex(*bias, b, h, i, j)] : 0.0;
  }
  /// The flat index of [b, h, i, j] in `t`, broadcast along its size-1 dims.
  static int64_t broadcastIndex(const Tensor &t, int64_t b, int64_t h,
                                int64_t i, int64_t j) {
    ArrayRef<int64_t> s = t.type.getShape();
    int64_t idx[4] = {b, h, i, j}, flat = 0;
    for (int d = 0; d < 4; ++d)
      flat = flat * s[d] + (s[d] == 1 ? 0 : idx[d]);
    return flat;
  }
  int64_t qAt(int64_t b, int64_t h, int64_t i) const {
    return ((b * Hq + h) * T + i);
  }
  int64_t kAt(int64_t b, int64_t g, int64_t j) const {
    return ((b * Hkv + g) * S + j);
  }
};

template <typename AttnOp>
AttentionGeometry geometryOf(AttnOp op, ArrayRef<const Tensor *> in,
                             unsigned firstOptional) {
  AttentionGeometry g;
  ArrayRef<int64_t> q = in[0]->type.getShape(), k = in[1]->type.getShape(),
                    v = in[2]->type.getShape();
  g.B = q[0], g.Hq = q[1], g.T = q[2], g.D = q[3];
  g.Hkv = k[1], g.S = k[2], g.Dv = v[3];
  unsigned next = firstOptional;
  if (op.getMask())
    g.mask = in[next++];
  if (op.getBias())
    g.bias = in[next++];
  if (op.getSegments())
    g.segments = in[next++];
  if (op.getSeed()) {
    g.seed = static_cast<int64_t>(in[next++]->data[0]);
    g.dropout = op.getDropout().convertToFloat();
    g.stream = static_cast<int64_t>(op.getStream());
  }
  g.scale = op.getScale().convertToDouble();
  g.causal = op.getCausal();
  g.window = static_cast<int64_t>(op.getWindow());
  return g;
}

/// The scores of query row (b, h, i) and its log-sum-exp; `allowed[j]`
/// says which keys it may attend to.
double scoreRow(const AttentionGeometry &g, const Tensor &q, const Tensor &k,
                int64_t b, int64_t h, int64_t i, std::vector<double> &s,
                std::vector<char> &allowed) {
  int64_t grp = h / (g.Hq / g.Hkv);
  const double *qi = &q.data[g.qAt(b, h, i) * g.D];
  double maxS = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < g.S; ++j) {
    allowed[j] = g.allowed(b, h, i, j);
    if (!allowed[j])
      continue;
    const double *kj = &k.data[g.kAt(b, grp, j) * g.D];
    double dot = 0;
    for (int64_t d = 0; d < g.D; ++d)
      dot += qi[d] * kj[d];
    s[j] = g.scale * dot + g.biasAt(b, h, i, j);
    maxS = std::max(maxS, s[j]);
  }
  if (maxS == -std::numeric_limits<double>::infinity())
    return maxS; // no key allowed
  double sum = 0;
  for (int64_t j = 0; j < g.S; ++j)
    if (allowed[j])
      sum += std::exp(s[j] - maxS);
  return maxS + std::log(sum);
}

LogicalResult attentionRule(Operation *op, ArrayRef<const Tensor *> in,
                            MutableArrayRef<Tensor> out, Interpreter &) {
  auto attn = cast<loom::AttentionOp>(op);
  AttentionGeometry g = geometryOf(attn, in, 3);
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
  std::vector<double> s(g.S);
  std::vector<char> allowed(g.S);
  std::fill(out[0].data.begin(), out[0].data.end(), 0.0);
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.Hq; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        double lse = scoreRow(g, q, k, b, h, i, s, allowed);
        out[1].data[g.qAt(b, h, i)] = lse;
        if (std::isinf(lse) && lse < 0)
          continue; // no key: the row stays 0
        int64_t grp = h / (g.Hq / g.Hkv);
        double *o = &out[0].data[g.qAt(b, h, i) * g.Dv];
        for (int64_t j = 0; j < g.S; ++j) {
          if (!allowed[j])
            continue;
          double p = std::exp(s[j] - lse) * g.keep(b, h, i, j);
          const double *vj = &v.data[g.kAt(b, grp, j) * g.Dv];
          for (int64_t d = 0; d < g.Dv; ++d)
            o[d] += p * vj[d];
        }
      }
  return success();
}

LogicalResult attentionGradRule(Operation *op, ArrayRef<const Tensor *> in,
                                MutableArrayRef<Tensor> out, Interpreter &) {
  auto grad = cast<loom::AttentionGradOp>(op);
  AttentionGeometry g = geometryOf(grad, in, 6);
  const Tensor &q = *in[0], &k = *in[1], &v = *in[2], &o = *in[3],
               &dout = *in[5];
  for (Tensor &t : out)
    std::fill(t.data.begin(), t.data.end(), 0.0);
  Tensor *dbias = grad.getDbias() ? &out[3] : nullptr;
  std::vector<double> s(g.S);
  std::vector<char> allowed(g.S);
  for (int64_t b = 0; b < g.B; ++b)
    for (int64_t h = 0; h < g.Hq; ++h)
      for (int64_t i = 0; i < g.T; ++i) {
        // The row's probabilities from its own log-sum-exp (not the saved
        // lse operand: the definition, independent of the forward's).
        double lse = scoreRow(g, q, k, b, h, i, s, allowed);
        if (std::isinf(lse) && lse < 0)
          continue;
        int64_t grp = h / (g.Hq / g.Hkv), row = g.qAt(b, h, i);
        const double *doi = &dout.data[row * g.Dv], *oi = &o.data[row * g.Dv],
                     *qi = &q.data[row * g.D];
        double Di = 0;
        for (int64_t d = 0; d < g.Dv; ++d)
          Di += doi[d] * oi[d];
        for (int64_t j = 0; j < g.S; ++j) {
          if (!allowed[j])
            continue;
          int64_t key = g.kAt(b, grp, j);
          double p = std::exp(s[j] - lse), z = g.keep(b, h, i, j);
          const double *vj = &v.data[key * g.Dv], *kj = &k.data[key * g.D];
          double dp = 0;
          for (int64_t d = 0; d < g.Dv; ++d) {
            dp += doi[d] * vj[d];
            out[2].data[key * g.Dv + d] += z * p * doi[d];
          }
          double ds = p * (z * dp - Di);
          for (int64_t d = 0; d < g.D; ++d) {
            out[0].data[row * g.D + d] += g.scale * ds * kj[d];
            out[1].data[key * g.D + d] += g.scale * ds * qi[d];
          }
          if (dbias)
            dbias->data[AttentionGeometry::broadcastIndex(*dbias, b, h, i,
                                                          j)] += ds;
        }
      }
  return success();
}

} // namespace

void loom::interp::addAttentionRules(llvm::StringMap<Rule> &t) {
  t["loom.attention"] = attentionRule;
  t["loom.attention_grad"] = attentionGradRule;
}
