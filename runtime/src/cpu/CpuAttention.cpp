//===- CpuAttention.cpp - Attention steps as tiled online-softmax loops ---===//

#include "CpuAttention.h"
#include "loomrt/Random.h"
#include "CpuSoftmaxMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#ifdef _OPENMP
#include <omp.h>
#endif

// The loops are compiled once per instruction set: each ISA's entry points
// carry a target attribute, and everything they call is inlined into them
// (always_inline), so it is compiled for that target too. Out-of-line
// helpers (std::) stay baseline: nothing built for AVX-512 leaks to another
// caller, as it would with per-file -m flags.
#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#define LOOMRT_ATTENTION_X86 1
#define LOOMRT_TARGET_AVX512                                                   \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
#define LOOMRT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace loomrt {

AttentionShape attentionShape(const PlanBuffer &q, const PlanBuffer &k,
                              const PlanBuffer &v, const PlanBuffer *mask,
                              const PlanBuffer *bias) noexcept {
  AttentionShape s;
  s.batch = q.shape[0], s.heads = q.shape[1], s.queries = q.shape[2];
  s.headDim = q.shape[3];
  s.kvHeads = k.shape[1], s.keys = k.shape[2];
  s.valueDim = v.shape[3];
  // Row-major strides of a [B, Hq, T, S] operand, 0 along its dimensions
  // of size 1 (which broadcast).
  auto strides = [](const PlanBuffer *b, int64_t *out) {
    if (!b)
      return;
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      out[d] = b->shape[d] == 1 ? 0 : stride;
      stride *= b->shape[d];
    }
  };
  strides(mask, s.maskStrides);
  strides(bias, s.biasStrides);
  s.biasElements = bias ? static_cast<int64_t>(bias->elements) : 0;
  return s;
}

namespace {

/// Query rows and keys per block: the scores of one block pair (32 KiB),
/// the transposed keys (and values) and the accumulators stay in L2. On a
/// Zen 4 core (AVX-512, D = 64, causal, T = S = 2048) 64 x 128 ran the
/// forward 8% faster than 64 x 64 (fewer rescales, longer products) and
/// the backward as fast; 128 x 64, 32 x 64 and 64 x 256 were slower.
/// kBlockK is a multiple of every ISA's tile width.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 128;

// The softmax's exp, max and sums (shared with the linear_cross_entropy
// steps): inlined into each instruction set's loops like the rest.
using softmax::expF32;
using softmax::expRow;
using softmax::kLanes;
using softmax::kMinusInf;
using softmax::maxNaN;
using softmax::rowMax;

/// Everything a task needs: the step, its sizes and tensors.
struct Problem {
  AttentionShape shape;
  AttentionTensors t;
  float scale = 1;
  bool causal = false;
  int64_t window = 0;
  int64_t group = 1; ///< query heads per key/value head
  /// Dropout on the probabilities: ratio (0: none), 1 / (1 - ratio), and
  /// the key of its stream under the step's seed (loomrt/Random.h).
  float dropout = 0.0f, dropoutScale = 1.0f;
  uint64_t dropoutKey = 0;
  /// Backward task grid: batches x key/value heads, or 1 along a
  /// dimension a dbias broadcasts over (that dimension then runs inside
  /// each task, so no two tasks add into one dbias element).
  int64_t taskBatches = 1, taskGroups = 1;
};

/// Dropout on a block of probabilities: rows [i0, i0 + mq) of head h of
/// batch b, columns [j0, j0 + nk), `block` with row stride kBlockK. Element
/// (i, j) is dropped as loom.dropout drops element ((b Hq + h) T + i) S + j
/// of the [B, Hq, T, S] probabilities, and kept ones are scaled.
LOOMRT_INLINE void dropBlock(const Problem &p, int64_t b, int64_t h,
                             int64_t i0, int64_t mq, int64_t j0, int64_t nk,
                             float *block, int64_t stride) {
  const AttentionShape &s = p.shape;
  for (int64_t r = 0; r < mq; ++r) {
    float *row = block + r * stride;
    const int64_t first = ((b * s.heads + h) * s.queries + i0 + r) * s.keys + j0;
    for (int64_t c = 0; c < nk; ++c)
      row[c] = randomUniform(p.dropoutKey, first + c) < p.dropout
                   ? 0.0f
                   : row[c] * p.dropoutScale;
  }
}

/// Document id of position `i` of batch `b` (the step has segments).
LOOMRT_INLINE int64_t segmentAt(const Problem &p, int64_t b, int64_t i) {
  const int64_t at = b * p.shape.queries + i;
  return p.t.segments64 ? static_cast<const int64_t *>(p.t.segments)[at]
                        : static_cast<const int32_t *>(p.t.segments)[at];
}

/// Whether no query row of [i0, i0 + mq) shares a document with a key of
/// [j0, j0 + nk): their id ranges do not meet, so the block pair is
/// skipped (packed documents: most pairs far from the diagonal).
LOOMRT_INLINE bool separateDocuments(const Problem &p, int64_t b, int64_t i0,
                                     int64_t mq, int64_t j0, int64_t nk) {
  if (!p.t.segments)
    return false;
  int64_t rowLo = segmentAt(p, b, i0), rowHi = rowLo;
  for (int64_t r = 1; r < mq; ++r) {
    int64_t x = segmentAt(p, b, i0 + r);
    rowLo = std::min(rowLo, x), rowHi = std::max(rowHi, x);
  }
  for (int64_t c = 0; c < nk; ++c) {
    int64_t x = segmentAt(p, b, j0 + c);
    if (x >= rowLo && x <= rowHi)
      return false;
  }
  return true;
}

/// dot(a[0 .. n), b[0 .. n)).
LOOMRT_INLINE float dotRow(const float *a, const float *b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int l = 0; l < kLanes; ++l)
      lanes[l] += a[c + l] * b[c + l];
  for (; c < n; ++c)
    lanes[0] += a[c] * b[c];
  float sum = 0;
  for (int l = 0; l < kLanes; ++l)
    sum += lanes[l];
  return sum;
}

/// The operands of one block product C (+)= A B: A is m x k with element
/// (r, p) at a[r * aRow + p * aCol] (any strides: its elements are
/// broadcast, so A may be a transposed view), B is k x n row-major, C is
/// m x n row-major.
struct Gemm {
  int64_t m, n, k;
  const float *a;
  int64_t aRow, aCol;
  const float *b;
  int64_t ldb;
  float *c;
  int64_t ldc;
  bool accumulate;
};

/// W floats as one value of a GCC/Clang vector type: arithmetic on it
/// compiles to the target's vector registers (xmm, ymm or zmm, by the
/// function's target) without intrinsics, and an array of them indexed by
/// constants lives in registers, which plain loops over a 2-D accumulator
/// array do not reliably get.
template <int W> struct Vec {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
};

// Vectors pass by reference: by value, GCC warns that the ABI of vector
// arguments depends on the target (these are always inlined anyway).
template <typename V> LOOMRT_INLINE void loadVec(V &v, const float *p) {
  std::memcpy(&v, p, sizeof v);
}

template <typename V> LOOMRT_INLINE void storeVec(float *p, const V &v) {
  std::memcpy(p, &v, sizeof v);
}

/// One MR x (NV * W) tile of C, its MR * NV vector accumulators in
/// registers across k; each step of k is NV vector loads of B, MR scalar
/// broadcasts of A and MR * NV multiply-adds.
template <int W, int MR, int NV>
LOOMRT_INLINE void tile(const Gemm &g, const float *a, const float *b,
                        float *c) {
  using V = typename Vec<W>::type;
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      acc[r][v] = V{};
      if (g.accumulate)
        loadVec(acc[r][v], c + r * g.ldc + v * W);
    }
  for (int64_t p = 0; p < g.k; ++p) {
    V bp[NV];
    for (int v = 0; v < NV; ++v)
      loadVec(bp[v], b + p * g.ldb + v * W);
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * g.aRow + p * g.aCol];
      for (int v = 0; v < NV; ++v)
        acc[r][v] += ar * bp[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v)
      storeVec(c + r * g.ldc + v * W, acc[r][v]);
}

/// Column x of MR rows of C (the last columns of a width that is not a
/// multiple of W).
template <int MR>
LOOMRT_INLINE void scalarColumn(const Gemm &g, const float *a, int64_t x,
                                float *c) {
  float acc[MR];
  for (int r = 0; r < MR; ++r)
    acc[r] = g.accumulate ? c[r * g.ldc + x] : 0.0f;
  for (int64_t p = 0; p < g.k; ++p)
    for (int r = 0; r < MR; ++r)
      acc[r] += a[r * g.aRow + p * g.aCol] * g.b[p * g.ldb + x];
  for (int r = 0; r < MR; ++r)
    c[r * g.ldc + x] = acc[r];
}

/// Columns [x, n) of MR rows of C: tiles NV vectors wide, then narrower
/// ones, then single columns.
template <int W, int MR, int NV>
LOOMRT_INLINE void columns(const Gemm &g, const float *a, int64_t x, float *c) {
  for (; x + NV * W <= g.n; x += NV * W)
    tile<W, MR, NV>(g, a, g.b + x, c + x);
  if constexpr (NV > 1) {
    columns<W, MR, NV / 2>(g, a, x, c);
  } else {
    for (; x < g.n; ++x)
      scalarColumn<MR>(g, a, x, c);
  }
}

/// Rows [r, m) of C: MR at a time, then fewer.
template <int W, int MR, int NV>
LOOMRT_INLINE void rows(const Gemm &g, int64_t r) {
  for (; r + MR <= g.m; r += MR)
    columns<W, MR, NV>(g, g.a + r * g.aRow, 0, g.c + r * g.ldc);
  if constexpr (MR > 1)
    rows<W, MR / 2, NV>(g, r);
}

/// C (+)= A B in register tiles of MR rows x NV vectors of W floats (MR and
/// NV powers of 2).
template <int W, int MR, int NV> LOOMRT_INLINE void gemmTiles(const Gemm &g) {
  rows<W, MR, NV>(g, 0);
}

/// k (or v) rows [j0, j0 + nk) of one head, `dim` wide, transposed into
/// `out` [dim][kBlockK]; columns [nk, nkPad) zeroed (the block products
/// run over whole tiles).
LOOMRT_INLINE void transposeBlock(const float *rows, int64_t nk, int64_t nkPad,
                                  int64_t dim, float *out) {
  for (int64_t d = 0; d < dim; ++d) {
    float *o = out + d * kBlockK;
    for (int64_t c = 0; c < nk; ++c)
      o[c] = rows[c * dim + d];
    for (int64_t c = nk; c < nkPad; ++c)
      o[c] = 0.0f;
  }
}

/// The loops of one instruction set: `Isa::gemm` is its block product,
/// `Isa::kTile` its tile width (kBlockK is a multiple of it).
template <typename Isa> struct Kernels {
  /// Turns the products q.k of rows [i0, i0 + mq) x keys [j0, j0 + nk)
  /// (`sc`, row stride kBlockK) into scores: scale, plus bias; -inf where
  /// the key is not allowed (causal, window, mask) and on the pad columns
  /// [nk, nkPad).
  static LOOMRT_INLINE void scores(const Problem &p, int64_t b, int64_t h,
                                   int64_t i0, int64_t mq, int64_t j0,
                                   int64_t nk, int64_t nkPad, float *sc) {
    const AttentionShape &s = p.shape;
    const int64_t *bs = s.biasStrides, *ms = s.maskStrides;
    for (int64_t r = 0; r < mq; ++r) {
      const int64_t i = i0 + r;
      float *row = sc + r * kBlockK;
      for (int64_t c = 0; c < nk; ++c)
        row[c] = row[c] * p.scale;
      if (p.t.bias) {
        const float *bias =
            p.t.bias + b * bs[0] + h * bs[1] + i * bs[2] + j0 * bs[3];
        if (bs[3])
          for (int64_t c = 0; c < nk; ++c)
            row[c] += bias[c];
        else
          for (int64_t c = 0; c < nk; ++c)
            row[c] += bias[0];
      }
      if (p.t.mask) {
        const uint8_t *mask =
            p.t.mask + b * ms[0] + h * ms[1] + i * ms[2] + j0 * ms[3];
        if (ms[3]) {
          for (int64_t c = 0; c < nk; ++c)
            row[c] = mask[c] ? row[c] : kMinusInf;
        } else if (!mask[0]) {
          for (int64_t c = 0; c < nk; ++c)
            row[c] = kMinusInf;
        }
      }
      if (p.t.segments) {
        const int64_t own = segmentAt(p, b, i);
        for (int64_t c = 0; c < nk; ++c)
          if (segmentAt(p, b, j0 + c) != own)
            row[c] = kMinusInf;
      }
      // Causal and window: the allowed keys of row i are one range.
      int64_t hi = p.causal ? std::clamp<int64_t>(i - j0 + 1, 0, nk) : nk;
      int64_t lo =
          p.window > 0 ? std::clamp<int64_t>(i - p.window + 1 - j0, 0, hi) : 0;
      for (int64_t c = 0; c < lo; ++c)
        row[c] = kMinusInf;
      for (int64_t c = hi; c < nkPad; ++c)
        row[c] = kMinusInf;
    }
  }

  /// Forward task `task`: one block of query rows of one (b, h).
  static LOOMRT_INLINE void forward(const Problem &p, int64_t task,
                                    float *scratch) {
    const AttentionShape &s = p.shape;
    const int64_t T = s.queries, S = s.keys, D = s.headDim, Dv = s.valueDim;
    const int64_t blocks = (T + kBlockQ - 1) / kBlockQ;
    // The last query blocks first: under causal they see the most keys,
    // and the dynamic schedule then ends on small tasks.
    const int64_t bh = task / blocks, qb = blocks - 1 - task % blocks;
    const int64_t b = bh / s.heads, h = bh % s.heads, g = h / p.group;
    const int64_t i0 = qb * kBlockQ, mq = std::min(kBlockQ, T - i0);
    const float *q = p.t.q + (bh * T + i0) * D;
    const float *k = p.t.k + (b * s.kvHeads + g) * S * D;
    const float *v = p.t.v + (b * s.kvHeads + g) * S * Dv;

    float *kt = scratch;                  // [D][kBlockK]
    float *sc = kt + D * kBlockK;         // [kBlockQ][kBlockK]
    float *acc = sc + kBlockQ * kBlockK;  // [kBlockQ][Dv]
    float *rowMaxes = acc + kBlockQ * Dv; // [kBlockQ]
    float *rowSums = rowMaxes + kBlockQ;  // [kBlockQ]
    for (int64_t r = 0; r < mq; ++r) {
      rowMaxes[r] = kMinusInf;
      rowSums[r] = 0.0f;
    }
    std::fill(acc, acc + mq * Dv, 0.0f);

    // The keys any row of the block may see.
    const int64_t jEnd = p.causal ? std::min(S, i0 + mq) : S;
    const int64_t jBegin =
        p.window > 0 ? std::max<int64_t>(0, i0 - p.window + 1) : 0;
    for (int64_t j0 = jBegin; j0 < jEnd; j0 += kBlockK) {
      const int64_t nk = std::min(kBlockK, jEnd - j0);
      if (separateDocuments(p, b, i0, mq, j0, nk))
        continue; // every score of the block is masked
      const int64_t nkPad = (nk + Isa::kTile - 1) / Isa::kTile * Isa::kTile;
      transposeBlock(k + j0 * D, nk, nkPad, D, kt);
      Isa::gemm({mq, nkPad, D, q, D, 1, kt, kBlockK, sc, kBlockK, false});
      scores(p, b, h, i0, mq, j0, nk, nkPad, sc);
      // Online softmax: rescale each row's sum and accumulator by
      // exp(old max - new max), then add this block's exponentials.
      for (int64_t r = 0; r < mq; ++r) {
        float *row = sc + r * kBlockK;
        const float newMax = maxNaN(rowMaxes[r], rowMax(row, nkPad));
        if (newMax == kMinusInf) { // nothing allowed yet
          std::fill(row, row + nkPad, 0.0f);
          continue;
        }
        const float alpha = expF32(rowMaxes[r] - newMax);
        rowSums[r] = rowSums[r] * alpha + expRow(row, nkPad, newMax);
        rowMaxes[r] = newMax;
        if (alpha != 1.0f) {
          float *o = acc + r * Dv;
          for (int64_t x = 0; x < Dv; ++x)
            o[x] *= alpha;
        }
      }
      if (p.dropout > 0.0f) // after the sums: lse is dropout's own
        dropBlock(p, b, h, i0, mq, j0, nk, sc, kBlockK);
      Isa::gemm({mq, Dv, nk, sc, kBlockK, 1, v + j0 * Dv, Dv, acc, Dv, true});
    }
    float *out = p.t.out + (bh * T + i0) * Dv;
    float *lse = p.t.lse + bh * T + i0;
    for (int64_t r = 0; r < mq; ++r) {
      float *o = out + r * Dv;
      const float *a = acc + r * Dv;
      if (rowSums[r] != 0.0f) { // >= 1, or NaN
        const float inv = 1.0f / rowSums[r];
        for (int64_t x = 0; x < Dv; ++x)
          o[x] = a[x] * inv;
        lse[r] = rowMaxes[r] + std::log(rowSums[r]);
      } else { // no key allowed: out 0, lse -inf
        std::fill(o, o + Dv, 0.0f);
        lse[r] = kMinusInf;
      }
    }
  }

  /// The backward of key/value head g of batch b (its dk, dv and the dq
  /// of its query heads; dbias where the task owns it).
  static LOOMRT_INLINE void backwardGroup(const Problem &p, int64_t b,
                                          int64_t g, float *scratch) {
    const AttentionShape &s = p.shape;
    const int64_t T = s.queries, S = s.keys, D = s.headDim, Dv = s.valueDim;
    const int64_t kvOffset = (b * s.kvHeads + g) * S;
    const float *k = p.t.k + kvOffset * D;
    const float *v = p.t.v + kvOffset * Dv;
    float *dk = p.t.dk + kvOffset * D;
    float *dv = p.t.dv + kvOffset * Dv;
    const int64_t h0 = g * p.group;

    float *kt = scratch;                     // [D][kBlockK]
    float *vt = kt + D * kBlockK;            // [Dv][kBlockK]
    float *dkAcc = vt + Dv * kBlockK;        // [kBlockK][D]
    float *dvAcc = dkAcc + kBlockK * D;      // [kBlockK][Dv]
    float *pb = dvAcc + kBlockK * Dv;        // [kBlockQ][kBlockK]: p
    float *ds = pb + kBlockQ * kBlockK;      // [kBlockQ][kBlockK]: dp, ds
    float *rowDots = ds + kBlockQ * kBlockK; // [kBlockQ]
    float *pz = rowDots + kBlockQ; // [kBlockQ][kBlockK]: p with dropout

    for (int64_t h = h0; h < h0 + p.group; ++h)
      std::fill(p.t.dq + (b * s.heads + h) * T * D,
                p.t.dq + (b * s.heads + h + 1) * T * D, 0.0f);
    const int64_t *dbs = s.biasStrides;
    for (int64_t j0 = 0; j0 < S; j0 += kBlockK) {
      const int64_t nk = std::min(kBlockK, S - j0);
      const int64_t nkPad = (nk + Isa::kTile - 1) / Isa::kTile * Isa::kTile;
      transposeBlock(k + j0 * D, nk, nkPad, D, kt);
      transposeBlock(v + j0 * Dv, nk, nkPad, Dv, vt);
      std::fill(dkAcc, dkAcc + nk * D, 0.0f);
      std::fill(dvAcc, dvAcc + nk * Dv, 0.0f);
      // The query rows that may see a key of the block.
      const int64_t iBegin = p.causal ? j0 : 0;
      const int64_t iEnd =
          p.window > 0 ? std::min(T, j0 + nk - 1 + p.window) : T;
      for (int64_t h = h0; h < h0 + p.group; ++h) {
        const int64_t bh = b * s.heads + h;
        const float *qh = p.t.q + bh * T * D;
        const float *outh = p.t.out + bh * T * Dv;
        const float *douth = p.t.dout + bh * T * Dv;
        const float *lseh = p.t.lse + bh * T;
        float *dqh = p.t.dq + bh * T * D;
        for (int64_t i0 = iBegin; i0 < iEnd; i0 += kBlockQ) {
          const int64_t mq = std::min(kBlockQ, iEnd - i0);
          if (separateDocuments(p, b, i0, mq, j0, nk))
            continue; // p = 0 on the whole block: no gradient
          const float *q = qh + i0 * D;
          const float *dout = douth + i0 * Dv;
          // p = exp(s - lse), recomputed.
          Isa::gemm({mq, nkPad, D, q, D, 1, kt, kBlockK, pb, kBlockK, false});
          scores(p, b, h, i0, mq, j0, nk, nkPad, pb);
          for (int64_t r = 0; r < mq; ++r) {
            float *row = pb + r * kBlockK;
            const float lse = lseh[i0 + r];
            if (lse == kMinusInf) // no key allowed: p = 0
              std::fill(row, row + nkPad, 0.0f);
            else
              expRow(row, nkPad, lse);
            rowDots[r] = dotRow(dout + r * Dv, outh + (i0 + r) * Dv, Dv);
          }
          // With dropout, z p (z the mask's 0 or 1 / (1 - ratio)) is
          // what multiplied the values.
          const bool drop = p.dropout > 0.0f;
          if (drop) {
            std::memcpy(pz, pb, sizeof(float) * mq * kBlockK);
            dropBlock(p, b, h, i0, mq, j0, nk, pz, kBlockK);
          }
          // dv += (z p)^T dout.
          Isa::gemm({nk, Dv, mq, drop ? pz : pb, 1, kBlockK, dout, Dv, dvAcc,
                     Dv, true});
          // dp = dout v^T; ds = p (z dp - rowsum(dout * out)).
          Isa::gemm(
              {mq, nkPad, Dv, dout, Dv, 1, vt, kBlockK, ds, kBlockK, false});
          for (int64_t r = 0; r < mq; ++r) {
            float *d = ds + r * kBlockK;
            const float *pr = pb + r * kBlockK;
            const float dot = rowDots[r];
            if (drop) {
              const float *zr = pz + r * kBlockK;
              for (int64_t c = 0; c < nkPad; ++c)
                d[c] = zr[c] * d[c] - pr[c] * dot;
            } else {
              for (int64_t c = 0; c < nkPad; ++c)
                d[c] = pr[c] * (d[c] - dot);
            }
          }
          if (p.t.dbias)
            for (int64_t r = 0; r < mq; ++r) {
              float *db = p.t.dbias + b * dbs[0] + h * dbs[1] +
                          (i0 + r) * dbs[2] + j0 * dbs[3];
              const float *d = ds + r * kBlockK;
              if (dbs[3]) {
                for (int64_t c = 0; c < nk; ++c)
                  db[c] += d[c];
              } else {
                float sum = 0;
                for (int64_t c = 0; c < nk; ++c)
                  sum += d[c];
                db[0] += sum;
              }
            }
          for (int64_t r = 0; r < mq; ++r) {
            float *d = ds + r * kBlockK;
            for (int64_t c = 0; c < nkPad; ++c)
              d[c] *= p.scale;
          }
          // dq += scale ds k; dk += scale ds^T q.
          Isa::gemm({mq, D, nk, ds, kBlockK, 1, k + j0 * D, D, dqh + i0 * D, D,
                     true});
          Isa::gemm({nk, D, mq, ds, 1, kBlockK, q, D, dkAcc, D, true});
        }
      }
      std::memcpy(dk + j0 * D, dkAcc, sizeof(float) * nk * D);
      std::memcpy(dv + j0 * Dv, dvAcc, sizeof(float) * nk * Dv);
    }
  }

  /// Backward task `task` of the grid taskBatches x taskGroups.
  static LOOMRT_INLINE void backward(const Problem &p, int64_t task,
                                     float *scratch) {
    const AttentionShape &s = p.shape;
    const int64_t tb = task / p.taskGroups, tg = task % p.taskGroups;
    const bool allBatches = p.taskBatches != s.batch;
    const bool allGroups = p.taskGroups != s.kvHeads;
    for (int64_t b = allBatches ? 0 : tb; b < (allBatches ? s.batch : tb + 1);
         ++b)
      for (int64_t g = allGroups ? 0 : tg; g < (allGroups ? s.kvHeads : tg + 1);
           ++g)
        backwardGroup(p, b, g, scratch);
  }
};

using TaskFn = void (*)(const Problem &, int64_t, float *);

/// Baseline x86-64 (SSE2, 16 xmm registers) or the target's own 128-bit
/// vectors: tiles 4 x 8 (8 accumulators).
struct Baseline {
  static constexpr int kTile = 8;
  static void gemm(const Gemm &g) { gemmTiles<4, 4, 2>(g); }
  static void forward(const Problem &p, int64_t t, float *s) {
    Kernels<Baseline>::forward(p, t, s);
  }
  static void backward(const Problem &p, int64_t t, float *s) {
    Kernels<Baseline>::backward(p, t, s);
  }
};

#ifdef LOOMRT_ATTENTION_X86
/// AVX2 + FMA: 16 ymm registers, tiles 4 x 16 (8 accumulators).
struct Avx2 {
  static constexpr int kTile = 16;
  LOOMRT_TARGET_AVX2 static void gemm(const Gemm &g) { gemmTiles<8, 4, 2>(g); }
  LOOMRT_TARGET_AVX2 static void forward(const Problem &p, int64_t t,
                                         float *s) {
    Kernels<Avx2>::forward(p, t, s);
  }
  LOOMRT_TARGET_AVX2 static void backward(const Problem &p, int64_t t,
                                          float *s) {
    Kernels<Avx2>::backward(p, t, s);
  }
};

/// AVX-512: 32 zmm registers, tiles 8 x 32 (16 accumulators).
struct Avx512 {
  static constexpr int kTile = 32;
  LOOMRT_TARGET_AVX512 static void gemm(const Gemm &g) {
    gemmTiles<16, 8, 2>(g);
  }
  LOOMRT_TARGET_AVX512 static void forward(const Problem &p, int64_t t,
                                           float *s) {
    Kernels<Avx512>::forward(p, t, s);
  }
  LOOMRT_TARGET_AVX512 static void backward(const Problem &p, int64_t t,
                                            float *s) {
    Kernels<Avx512>::backward(p, t, s);
  }
};
#endif

bool supports(AttentionIsa isa) {
  switch (isa) {
  case AttentionIsa::Best:
  case AttentionIsa::Baseline:
    return true;
#ifdef LOOMRT_ATTENTION_X86
  case AttentionIsa::Avx2:
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  case AttentionIsa::Avx512:
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq");
#else
  default:
    return false;
#endif
  }
  return false;
}

AttentionIsa resolve(AttentionIsa isa) {
  if (isa != AttentionIsa::Best && supports(isa))
    return isa;
  for (AttentionIsa best : {AttentionIsa::Avx512, AttentionIsa::Avx2})
    if (supports(best))
      return best;
  return AttentionIsa::Baseline;
}

TaskFn taskFunction(AttentionIsa isa, bool backward) {
  switch (isa) {
#ifdef LOOMRT_ATTENTION_X86
  case AttentionIsa::Avx512:
    return backward ? &Avx512::backward : &Avx512::forward;
  case AttentionIsa::Avx2:
    return backward ? &Avx2::backward : &Avx2::forward;
#endif
  default:
    return backward ? &Baseline::backward : &Baseline::forward;
  }
}

/// Floats rounded up to whole 64-byte lines.
int64_t lineUp(int64_t floats) { return (floats + 15) / 16 * 16; }

} // namespace

const char *attentionIsaName(AttentionIsa isa) noexcept {
  switch (isa) {
  case AttentionIsa::Best:
    return "best";
  case AttentionIsa::Avx512:
    return "avx512";
  case AttentionIsa::Avx2:
    return "avx2";
  case AttentionIsa::Baseline:
    return "baseline";
  }
  return "?";
}

std::vector<AttentionIsa> availableAttentionIsas() {
  std::vector<AttentionIsa> isas;
  for (AttentionIsa isa :
       {AttentionIsa::Avx512, AttentionIsa::Avx2, AttentionIsa::Baseline})
    if (supports(isa))
      isas.push_back(isa);
  return isas;
}

bool runAttention(const AttentionStep &step, const AttentionShape &shape,
                  const AttentionTensors &tensors, std::string *error,
                  AttentionIsa isa) noexcept {
  const bool backward = step.direction == AttentionDirection::Backward;
  Problem p;
  p.shape = shape;
  p.t = tensors;
  p.scale = static_cast<float>(step.scale);
  p.causal = step.causal;
  p.window = step.window;
  p.group = shape.kvHeads > 0 ? shape.heads / shape.kvHeads : 1;
  if (step.seed) {
    p.dropout = step.dropout;
    p.dropoutScale = static_cast<float>(1.0 / (1.0 - double(step.dropout)));
    p.dropoutKey = randomStreamKey(tensors.seed, step.stream);
  }
  const int64_t D = shape.headDim, Dv = shape.valueDim;
  int64_t tasks, scratchFloats;
  if (!backward) {
    tasks =
        shape.batch * shape.heads * ((shape.queries + kBlockQ - 1) / kBlockQ);
    scratchFloats = lineUp(D * kBlockK) + lineUp(kBlockQ * kBlockK) +
                    lineUp(kBlockQ * Dv) + 2 * kBlockQ;
  } else {
    // dbias broadcast over the batch (or the heads, when several
    // key/value heads would share it): that dimension inside each task.
    const bool dbias = tensors.dbias != nullptr;
    p.taskBatches = dbias && shape.biasStrides[0] == 0 ? 1 : shape.batch;
    p.taskGroups = dbias && shape.biasStrides[1] == 0 ? 1 : shape.kvHeads;
    tasks = shape.batch == 0 || shape.kvHeads == 0
                ? 0
                : p.taskBatches * p.taskGroups;
    scratchFloats = 2 * lineUp(D * kBlockK) + 2 * lineUp(Dv * kBlockK) +
                    2 * lineUp(kBlockQ * kBlockK) + kBlockQ +
                    (step.seed ? kBlockQ * kBlockK : 0);
    if (tensors.dbias)
      std::fill(tensors.dbias, tensors.dbias + shape.biasElements, 0.0f);
  }
  if (tasks <= 0)
    return true;
  // Sizes fit: parsePlan checked every buffer against the arena.
  TaskFn run = taskFunction(resolve(isa), backward);
  int threads = 1;
#ifdef _OPENMP
  threads = static_cast<int>(
      std::min<int64_t>(tasks, std::max(1, omp_get_max_threads())));
#endif
  // One 64-byte aligned block per thread.
  const int64_t perThread = lineUp(scratchFloats);
  float *scratch = static_cast<float *>(
      ::operator new(sizeof(float) * size_t(perThread) * size_t(threads),
                     std::align_val_t(64), std::nothrow));
  if (!scratch) {
    if (error) {
      try {
        *error = "attention: out of memory for " + std::to_string(threads) +
                 " threads' scratch of " +
                 std::to_string(perThread * sizeof(float)) + " bytes";
      } catch (...) {
      }
    }
    return false;
  }
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
  {
    float *mine = scratch + perThread * omp_get_thread_num();
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t)
      run(p, t, mine);
  }
#else
  for (int64_t t = 0; t < tasks; ++t)
    run(p, t, scratch);
#endif
  ::operator delete(scratch, std::align_val_t(64), std::nothrow);
  return true;
}

} // namespace loomrt
