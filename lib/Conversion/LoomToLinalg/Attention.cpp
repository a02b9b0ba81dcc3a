//===- Attention.cpp - Fused attention as per-row loops -------------------===//
//
// The rules of loom.attention and loom.attention_grad for the targets
// without a runtime attention kernel (CUDA: loom-attention-kernels marks
// them loom.generated_kernel, so they reach the kernels). Each op becomes
// scf.forall loops, one iteration per row of its result, that a GPU runs as
// a thread per row (MapKernelsToGpu's `forall` launches):
//
// - forward: per query row (b, h, i), the keys it may see in order, with the
//   running maximum m, the running sum l and the row of the output
//   accumulator carried in registers (online softmax: each new score
//   rescales what came before by exp(m_old - m_new)); then out = acc / l
//   and lse = m + log l;
// - backward (the FlashAttention recipe, probabilities recomputed from q, k
//   and lse, no T x S tensor): D_i = <dout_i, out_i> per query row; dq per
//   query row over its keys; dk and dv per key row over the query rows (of
//   every query head of its group) that see it, so that no two threads add
//   to one element (no atomics, deterministic); dbias, when there is a bias,
//   per bias element over the dimensions it is broadcast along.
//
// Arithmetic is f32 (the op's lse is f32; the element type is converted on
// reads and writes); sums run in key (or query) order. The dropout mask is
// loom.dropout's on the [B, Hq, T, S] probabilities (uniformAt), drawn again
// in the backward. The interpreter (lib/Interp/AttentionRules.cpp, f64) is
// the oracle: test/e2e/cuda-attention.test.
//
//===----------------------------------------------------------------------===//

#include "Lowerer.h"

using namespace mlir;
using namespace loom;
using namespace loom::lowering;

namespace {

/// One fused attention op: its shapes, attributes and operands.
struct Geometry {
  int64_t B, Hq, Hkv, T, S, D, Dv;
  Value q, k, v, mask, bias, segments, seed;
  double scale;
  bool causal;
  int64_t window;
  double dropout;
  int64_t stream;
};

template <typename OpT>
Geometry geometryOf(OpT op) {
  Geometry g;
  ArrayRef<int64_t> q = tensorType(op.getQ()).getShape();
  ArrayRef<int64_t> k = tensorType(op.getK()).getShape();
  g.B = q[0], g.Hq = q[1], g.T = q[2], g.D = q[3];
  g.Hkv = k[1], g.S = k[2], g.Dv = tensorType(op.getV()).getDimSize(3);
  g.q = op.getQ(), g.k = op.getK(), g.v = op.getV();
  g.mask = op.getMask(), g.bias = op.getBias();
  g.segments = op.getSegments(), g.seed = op.getSeed();
  g.scale = op.getScale().convertToDouble();
  g.causal = op.getCausal();
  g.window = static_cast<int64_t>(op.getWindow());
  g.dropout = g.seed ? op.getDropout().convertToDouble() : 0.0;
  g.stream = static_cast<int64_t>(op.getStream());
  return g;
}

/// The scalar code of one thread: reads, loops, the attention's formulas.
struct RowCode {
  Lowerer &l;
  const Geometry &g;
  Type f32;

  RowCode(Lowerer &l, const Geometry &g) : l(l), g(g), f32(l.b.getF32Type()) {}

  Value c(double v) { return l.constant(f32, v); }
  Value negInf() { return c(-std::numeric_limits<double>::infinity()); }
  Value read(Value t, ValueRange at) {
    return l.convert(tensor::ExtractOp::create(l.b, l.loc, t, at), f32);
  }
  /// t[prefix..., 0 .. n-1] as f32 scalars.
  SmallVector<Value> readRow(Value t, ValueRange prefix, int64_t n) {
    SmallVector<Value> row;
    SmallVector<Value> at(prefix);
    at.push_back(Value());
    for (int64_t e = 0; e < n; ++e) {
      at.back() = l.index(e);
      row.push_back(read(t, at));
    }
    return row;
  }
  /// sum_e a[e] * b[e], in order.
  Value dot(ArrayRef<Value> a, ArrayRef<Value> b) {
    Value s = c(0);
    for (auto [x, y] : llvm::zip(a, b))
      s = l.add(s, l.mul(x, y));
    return s;
  }
  /// The key/value head of query head h.
  Value groupOf(Value h) {
    return arith::DivUIOp::create(l.b, l.loc, h, l.index(g.Hq / g.Hkv));
  }
  /// t[b, h, i, j] of a rank-4 tensor broadcast along its size-1 dims.
  Value broadcastRead(Value t, Value b, Value h, Value i, Value j) {
    ArrayRef<int64_t> s = tensorType(t).getShape();
    SmallVector<Value> at = {b, h, i, j};
    for (int d = 0; d < 4; ++d)
      if (s[d] == 1)
        at[d] = l.index(0);
    return tensor::ExtractOp::create(l.b, l.loc, t, at);
  }
  Value segmentOf(Value b, Value i) {
    return tensor::ExtractOp::create(l.b, l.loc, g.segments,
                                     ValueRange{b, i});
  }
  /// Whether query i may attend to key j (the causal and window limits
  /// too, which the loops' bounds already keep: this is for loops that
  /// do not).
  Value allowed(Value b, Value h, Value i, Value j, Value segI) {
    Value ok = l.constant(l.b.getI1Type(), 1);
    if (g.causal)
      ok = l.andi(ok, l.cmpi(arith::CmpIPredicate::sle, j, i));
    if (g.window > 0)
      ok = l.andi(ok, l.cmpi(arith::CmpIPredicate::slt, l.sub(i, j),
                             l.index(g.window)));
    if (g.mask)
      ok = l.andi(ok, broadcastRead(g.mask, b, h, i, j));
    if (g.segments)
      ok = l.andi(ok, l.cmpi(arith::CmpIPredicate::eq, segI,
                             segmentOf(b, j)));
    return ok;
  }
  /// s_ij = scale <q_i, k_j> + bias.
  Value score(ArrayRef<Value> qi, ArrayRef<Value> kj, Value b, Value h,
              Value i, Value j) {
    Value s = l.mul(c(g.scale), dot(qi, kj));
    if (g.bias)
      s = l.add(s, l.convert(broadcastRead(g.bias, b, h, i, j), f32));
    return s;
  }
  /// The dropout factor z_ij (1 without dropout).
  Value keep(Value seed, Value b, Value h, Value i, Value j) {
    if (g.dropout == 0.0)
      return c(1);
    Value flat = l.add(
        l.mul(l.add(l.mul(l.add(l.mul(b, l.index(g.Hq)), h), l.index(g.T)),
                    i),
              l.index(g.S)),
        j);
    Value u = uniformAt(
        l, seed, g.stream,
        arith::IndexCastOp::create(l.b, l.loc, l.b.getI64Type(), flat));
    Value drop = arith::CmpFOp::create(l.b, l.loc, arith::CmpFPredicate::OLT,
                                       u, l.constant(l.b.getF64Type(),
                                                     g.dropout));
    return l.select(drop, c(0), c(1.0 / (1.0 - g.dropout)));
  }
  Value seedValue() {
    return g.seed ? Value(tensor::ExtractOp::create(l.b, l.loc, g.seed,
                                                    ValueRange{}))
                  : Value();
  }
  /// The keys query row i can see: [max(0, i - window + 1), i + 1) when
  /// causal, else all of [0, S).
  std::pair<Value, Value> keyRange(Value i) {
    Value lo = l.index(0), hi = l.index(g.S);
    if (g.causal)
      hi = l.add(i, l.index(1));
    if (g.window > 0)
      lo = l.max(lo, l.sub(l.add(i, l.index(1)), l.index(g.window)));
    return {lo, hi};
  }
  /// The query rows that can see key j: [j, min(T, j + window)) when
  /// causal, else all of [0, T).
  std::pair<Value, Value> queryRange(Value j) {
    Value lo = l.index(0), hi = l.index(g.T);
    if (g.causal)
      lo = j;
    if (g.window > 0)
      hi = l.min(hi, l.add(j, l.index(g.window)));
    return {lo, hi};
  }

  //===--- control flow -------------------------------------------------===//

  using Values = SmallVector<Value>;
  /// An scf.for over [lo, hi) carrying `inits`.
  Values loop(Value lo, Value hi, ValueRange inits,
              function_ref<Values(Value, ValueRange)> body) {
    auto op = scf::ForOp::create(
        l.b, l.loc, lo, hi, l.index(1), inits,
        [&](OpBuilder &nested, Location, Value iv, ValueRange args) {
          OpBuilder::InsertionGuard guard(l.b);
          l.b.setInsertionPoint(nested.getInsertionBlock(),
                                nested.getInsertionPoint());
          scf::YieldOp::create(l.b, l.loc, body(iv, args));
        });
    return Values(op.getResults());
  }
  /// `then()` where `cond` holds, else `otherwise`.
  Values when(Value cond, ValueRange otherwise, function_ref<Values()> then) {
    auto op = scf::IfOp::create(l.b, l.loc, TypeRange(otherwise), cond,
                                /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(l.b);
    l.b.setInsertionPointToStart(op.thenBlock());
    scf::YieldOp::create(l.b, l.loc, then());
    l.b.setInsertionPointToStart(op.elseBlock());
    scf::YieldOp::create(l.b, l.loc, otherwise);
    return Values(op.getResults());
  }
};

/// What one forall iteration writes: a row of `n` values of result
/// `output` at `offsets` (its last dimension, from the offset there).
struct RowWrite {
  unsigned output;
  SmallVector<Value> offsets;
  SmallVector<Value> values;
};

/// An scf.forall with one iteration per point of `ubs`, computing the
/// results `types` (each iteration writes its own rows of them): `body`
/// gets the induction variables and returns the rows it writes.
SmallVector<Value>
forallRows(Lowerer &l, ArrayRef<int64_t> ubs, TypeRange types,
           function_ref<SmallVector<RowWrite>(ValueRange)> body) {
  SmallVector<OpFoldResult> bounds;
  for (int64_t u : ubs)
    bounds.push_back(l.b.getIndexAttr(u));
  SmallVector<Value> inits;
  for (Type t : types)
    inits.push_back(l.empty(cast<RankedTensorType>(t)));
  auto forall = scf::ForallOp::create(l.b, l.loc, bounds, inits, std::nullopt);
  OpBuilder::InsertionGuard guard(l.b);
  l.b.setInsertionPoint(forall.getTerminator());
  SmallVector<RowWrite> writes = body(forall.getInductionVars());
  struct Slice {
    Value value, shared;
    SmallVector<OpFoldResult> offsets, sizes, strides;
  };
  SmallVector<Slice> slices;
  for (RowWrite &w : writes) {
    Slice s;
    s.shared = forall.getRegionIterArgs()[w.output];
    auto st = cast<RankedTensorType>(s.shared.getType());
    int64_t rank = st.getRank(), n = w.values.size();
    SmallVector<int64_t> shape(rank, 1);
    shape.back() = n;
    for (int64_t d = 0; d < rank; ++d) {
      s.offsets.push_back(w.offsets[d]);
      s.sizes.push_back(l.b.getIndexAttr(shape[d]));
      s.strides.push_back(l.b.getIndexAttr(1));
    }
    auto rowType = RankedTensorType::get(shape, st.getElementType());
    Value row = tensor::ExtractSliceOp::create(l.b, l.loc, rowType, s.shared,
                                               s.offsets, s.sizes, s.strides);
    SmallVector<Value> at(rank, l.index(0));
    for (int64_t e = 0; e < n; ++e) {
      at.back() = l.index(e);
      row = tensor::InsertOp::create(
          l.b, l.loc, l.convert(w.values[e], st.getElementType()), row, at);
    }
    s.value = row;
    slices.push_back(std::move(s));
  }
  l.b.setInsertionPointToStart(forall.getTerminator().getBody());
  for (Slice &s : slices)
    tensor::ParallelInsertSliceOp::create(l.b, l.loc, s.value, s.shared,
                                          s.offsets, s.sizes, s.strides);
  return SmallVector<Value>(forall.getResults());
}

Rewrite lowerAttention(Lowerer &l, AttentionOp op) {
  Geometry g = geometryOf(op);
  TypeRange types = op->getResultTypes();
  return forallRows(
      l, {g.B, g.Hq, g.T}, types, [&](ValueRange iv) {
        RowCode r(l, g);
        Value b = iv[0], h = iv[1], i = iv[2], grp = r.groupOf(h);
        SmallVector<Value> qi = r.readRow(g.q, {b, h, i}, g.D);
        Value segI = g.segments ? r.segmentOf(b, i) : Value();
        Value seed = r.seedValue();
        Value lo, hi;
        std::tie(lo, hi) = r.keyRange(i);
        // Carried: the running maximum, the running sum, the accumulator.
        SmallVector<Value> inits = {r.negInf(), r.c(0)};
        inits.append(g.Dv, r.c(0));
        SmallVector<Value> fin =
            r.loop(lo, hi, inits, [&](Value j, ValueRange cur) {
              return r.when(r.allowed(b, h, i, j, segI), cur, [&] {
                Value s = r.score(qi, r.readRow(g.k, {b, grp, j}, g.D), b, h,
                                  i, j);
                // A score of -inf adds nothing (and would make the
                // rescaling below NaN while m is -inf too).
                Value live = arith::CmpFOp::create(
                    l.b, l.loc, arith::CmpFPredicate::UNE, s, r.negInf());
                return r.when(live, cur, [&] {
                  Value m = l.max(cur[0], s);
                  Value rescale = l.exp(l.sub(cur[0], m));
                  Value e = l.exp(l.sub(s, m));
                  SmallVector<Value> next = {
                      m, l.add(l.mul(cur[1], rescale), e)};
                  Value pz = l.mul(e, r.keep(seed, b, h, i, j));
                  SmallVector<Value> vj =
                      r.readRow(g.v, {b, grp, j}, g.Dv);
                  for (int64_t e2 = 0; e2 < g.Dv; ++e2)
                    next.push_back(l.add(l.mul(cur[2 + e2], rescale),
                                         l.mul(pz, vj[e2])));
                  return next;
                });
              });
            });
        Value any = arith::CmpFOp::create(l.b, l.loc,
                                          arith::CmpFPredicate::OGT, fin[1],
                                          r.c(0));
        SmallVector<Value> out;
        for (int64_t e = 0; e < g.Dv; ++e)
          out.push_back(l.select(any, l.div(fin[2 + e], fin[1]), r.c(0)));
        Value lse =
            l.select(any, l.add(fin[0], l.log(fin[1])), r.negInf());
        return SmallVector<RowWrite>{{0, {b, h, i, l.index(0)}, out},
                                     {1, {b, h, i}, {lse}}};
      });
}

/// The terms of one probability's gradient, for query row (b, h, i) and
/// key j: p_ij (0 where not allowed), z_ij and ds_ij = p (z <dout_i, v_j>
/// - D_i).
struct GradTerms {
  Value p, z, ds;
};

/// What one query row of the backward reads once.
struct QueryRow {
  SmallVector<Value> q, dout;
  Value lse, delta, seg;
};

QueryRow readQueryRow(RowCode &r, Value dout, Value lse, Value delta,
                      Value b, Value h, Value i) {
  const Geometry &g = r.g;
  QueryRow row;
  row.q = r.readRow(g.q, {b, h, i}, g.D);
  row.dout = r.readRow(dout, {b, h, i}, g.Dv);
  row.lse = r.read(lse, {b, h, i});
  row.delta = r.read(delta, {b, h, i});
  row.seg = g.segments ? r.segmentOf(b, i) : Value();
  return row;
}

/// p, z and ds of (query row, key j), or zeros where the key is not
/// allowed or the row has no key (lse = -inf).
GradTerms gradTerms(RowCode &r, const QueryRow &qr, ArrayRef<Value> kj,
                    ArrayRef<Value> vj, Value seed, Value b, Value h,
                    Value i, Value j) {
  Lowerer &l = r.l;
  Value live = l.andi(r.allowed(b, h, i, j, qr.seg),
                      arith::CmpFOp::create(l.b, l.loc,
                                            arith::CmpFPredicate::UNE, qr.lse,
                                            r.negInf()));
  SmallVector<Value> zeros = {r.c(0), r.c(0), r.c(0)};
  SmallVector<Value> t = r.when(live, zeros, [&] {
    Value p = l.exp(l.sub(r.score(qr.q, kj, b, h, i, j), qr.lse));
    Value z = r.keep(seed, b, h, i, j);
    Value dp = l.mul(z, r.dot(qr.dout, vj));
    return SmallVector<Value>{p, z, l.mul(p, l.sub(dp, qr.delta))};
  });
  return {t[0], t[1], t[2]};
}

Rewrite lowerAttentionGrad(Lowerer &l, AttentionGradOp op) {
  Geometry g = geometryOf(op);
  Value out = op.getOut(), lse = op.getLse(), dout = op.getDout();
  Type f32 = l.b.getF32Type();
  // D_i = <dout_i, out_i>, per query row.
  auto rowsType = RankedTensorType::get({g.B, g.Hq, g.T}, f32);
  Value delta = forallRows(l, {g.B, g.Hq, g.T}, TypeRange{rowsType},
                           [&](ValueRange iv) {
                             RowCode r(l, g);
                             Value d = r.dot(r.readRow(dout, iv, g.Dv),
                                             r.readRow(out, iv, g.Dv));
                             return SmallVector<RowWrite>{
                                 {0, {iv[0], iv[1], iv[2]}, {d}}};
                           })[0];
  // dq, per query row over the keys it sees.
  Value dq = forallRows(
      l, {g.B, g.Hq, g.T}, TypeRange{tensorType(g.q)}, [&](ValueRange iv) {
        RowCode r(l, g);
        Value b = iv[0], h = iv[1], i = iv[2], grp = r.groupOf(h);
        QueryRow qr = readQueryRow(r, dout, lse, delta, b, h, i);
        Value seed = r.seedValue();
        Value lo, hi;
        std::tie(lo, hi) = r.keyRange(i);
        SmallVector<Value> acc(g.D, r.c(0));
        acc = r.loop(lo, hi, acc, [&](Value j, ValueRange cur) {
          SmallVector<Value> kj = r.readRow(g.k, {b, grp, j}, g.D);
          SmallVector<Value> vj = r.readRow(g.v, {b, grp, j}, g.Dv);
          GradTerms t = gradTerms(r, qr, kj, vj, seed, b, h, i, j);
          SmallVector<Value> next;
          for (int64_t e = 0; e < g.D; ++e)
            next.push_back(l.add(cur[e], l.mul(t.ds, kj[e])));
          return next;
        });
        for (Value &a : acc)
          a = l.mul(a, r.c(g.scale));
        return SmallVector<RowWrite>{{0, {b, h, i, l.index(0)}, acc}};
      })[0];
  // dk and dv, per key row over the query rows of its group's heads.
  int64_t group = g.Hq / g.Hkv;
  SmallVector<Value> dkdv = forallRows(
      l, {g.B, g.Hkv, g.S}, TypeRange{tensorType(g.k), tensorType(g.v)},
      [&](ValueRange iv) {
        RowCode r(l, g);
        Value b = iv[0], grp = iv[1], j = iv[2];
        SmallVector<Value> kj = r.readRow(g.k, {b, grp, j}, g.D);
        SmallVector<Value> vj = r.readRow(g.v, {b, grp, j}, g.Dv);
        Value seed = r.seedValue();
        Value lo, hi;
        std::tie(lo, hi) = r.queryRange(j);
        SmallVector<Value> acc(g.D + g.Dv, r.c(0));
        acc = r.loop(l.index(0), l.index(group), acc,
                     [&](Value hh, ValueRange outer) {
          Value h = l.add(l.mul(grp, l.index(group)), hh);
          return r.loop(lo, hi, outer, [&](Value i, ValueRange cur) {
            QueryRow qr = readQueryRow(r, dout, lse, delta, b, h, i);
            GradTerms t = gradTerms(r, qr, kj, vj, seed, b, h, i, j);
            Value pz = l.mul(t.p, t.z);
            SmallVector<Value> next;
            for (int64_t e = 0; e < g.D; ++e)
              next.push_back(l.add(cur[e], l.mul(t.ds, qr.q[e])));
            for (int64_t e = 0; e < g.Dv; ++e)
              next.push_back(l.add(cur[g.D + e], l.mul(pz, qr.dout[e])));
            return next;
          });
        });
        SmallVector<Value> dk(acc.begin(), acc.begin() + g.D);
        for (Value &a : dk)
          a = l.mul(a, r.c(g.scale));
        SmallVector<Value> dv(acc.begin() + g.D, acc.end());
        return SmallVector<RowWrite>{{0, {b, grp, j, l.index(0)}, dk},
                                     {1, {b, grp, j, l.index(0)}, dv}};
      });
  SmallVector<Value> results = {dq, dkdv[0], dkdv[1]};
  if (!g.bias)
    return results;
  // dbias, per bias element: ds summed over the dimensions the bias is
  // broadcast along, in row-major order of (b, h, i, j).
  RankedTensorType bt = tensorType(g.bias);
  int64_t full[4] = {g.B, g.Hq, g.T, g.S};
  results.push_back(forallRows(
      l, bt.getShape(), TypeRange{bt}, [&](ValueRange iv) {
        RowCode r(l, g);
        Value seed = r.seedValue();
        SmallVector<Value> at(iv);
        std::function<Value(int, Value)> sumFrom = [&](int d,
                                                       Value sum) -> Value {
          if (d == 4) {
            Value b = at[0], h = at[1], i = at[2], j = at[3];
            Value grp = r.groupOf(h);
            QueryRow qr = readQueryRow(r, dout, lse, delta, b, h, i);
            GradTerms t =
                gradTerms(r, qr, r.readRow(g.k, {b, grp, j}, g.D),
                          r.readRow(g.v, {b, grp, j}, g.Dv), seed, b, h, i, j);
            return l.add(sum, t.ds);
          }
          if (bt.getDimSize(d) == full[d])
            return sumFrom(d + 1, sum);
          return r.loop(l.index(0), l.index(full[d]), {sum},
                        [&](Value x, ValueRange cur) {
                          at[d] = x;
                          return SmallVector<Value>{sumFrom(d + 1, cur[0])};
                        })[0];
        };
        Value dbias = sumFrom(0, r.c(0));
        return SmallVector<RowWrite>{
            {0, {iv[0], iv[1], iv[2], iv[3]}, {dbias}}};
      })[0]);
  return results;
}

} // namespace

void loom::lowering::populateAttentionRules(RewritePatternSet &patterns) {
  addRule<AttentionOp>(patterns, lowerAttention);
  addRule<AttentionGradOp>(patterns, lowerAttentionGrad);
}
