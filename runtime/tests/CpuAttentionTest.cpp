//===- CpuAttentionTest.cpp - attention steps: kernels, plan, artifact ----===//
//
// The tiled online-softmax loops (src/cpu/CpuAttention.h) against a naive
// reference in double precision that materializes every score matrix and
// applies the plain softmax and the plain backward formulas of
// docs/plan-format.md: forward out and lse, backward dq, dk, dv and dbias,
// on every instruction set this CPU runs, over causal, windowed, grouped
// (GQA, MQA), masked and biased cases whose sizes are not multiples of the
// blocks. Then the plan's refusals, an artifact running both directions,
// --check-numerics on a row with no allowed key, and the CUDA backend's
// refusal.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuAttention.h"
#include "CudaFixtures.h"
#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"
#include "loomrt/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace loomrt::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Case {
  std::string name;
  int64_t b = 1, hq = 1, hkv = 1, t = 1, s = 1, d = 16, dv = 16;
  bool causal = false;
  int64_t window = 0;
  std::vector<int64_t> maskShape, biasShape; ///< empty: none
  bool dbias = false;
  double scale = 0; ///< 0: 1 / sqrt(d)
  /// Query rows whose mask is all false (with a mask of T rows).
  std::vector<int64_t> deadRows;
  /// Document ids [B, T]: 0 none; 1 packed documents (runs of random
  /// length, ids increasing); 2 ids i % 3 (unsorted: no block can be
  /// skipped by order). `segments32`: as i32 instead of i64.
  int segments = 0;
  bool segments32 = false;
  /// Dropout on the probabilities (0: none), drawn from (dropoutSeed,
  /// stream) as loomrt/Random.h defines.
  float dropout = 0.0f;
  int64_t dropoutSeed = 0, stream = 0;
  /// The dropout factor of probability (b, h, i, j): 0 or 1 / (1 - p).
  double keep(int64_t bi, int64_t h, int64_t i, int64_t j) const {
    if (dropout == 0.0f)
      return 1.0;
    int64_t index = ((bi * hq + h) * t + i) * s + j;
    return randomUniform(randomStreamKey(dropoutSeed, stream), index) < dropout
               ? 0.0
               : 1.0 / (1.0 - double(dropout));
  }
  unsigned seed = 1;

  double realScale() const { return scale != 0 ? scale : 1 / std::sqrt(d); }
  std::vector<int64_t> qShape() const { return {b, hq, t, d}; }
  std::vector<int64_t> kShape() const { return {b, hkv, s, d}; }
  std::vector<int64_t> vShape() const { return {b, hkv, s, dv}; }
  std::vector<int64_t> outShape() const { return {b, hq, t, dv}; }
};

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The flat index of score (b, h, i, j) in an operand of `shape`
/// (broadcast along its dimensions of size 1).
int64_t broadcastIndex(const std::vector<int64_t> &shape, int64_t b, int64_t h,
                       int64_t i, int64_t j) {
  int64_t at[4] = {b, h, i, j}, index = 0;
  for (int d = 0; d < 4; ++d)
    index = index * shape[d] + (shape[d] == 1 ? 0 : at[d]);
  return index;
}

struct Inputs {
  std::vector<float> q, k, v, dout, bias;
  std::vector<uint8_t> mask;
  std::vector<int64_t> segments;
  std::vector<int32_t> segments32;
};

Inputs randomInputs(const Case &c) {
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](std::vector<float> &x, int64_t n, float amplitude) {
    x.resize(n);
    for (float &e : x)
      e = amplitude * u(rng);
  };
  Inputs in;
  // Larger q and k: peaked softmaxes, where the online rescaling matters.
  fill(in.q, count(c.qShape()), 2.0f);
  fill(in.k, count(c.kShape()), 2.0f);
  fill(in.v, count(c.vShape()), 1.0f);
  fill(in.dout, count(c.outShape()), 1.0f);
  if (!c.biasShape.empty())
    fill(in.bias, count(c.biasShape), 1.0f);
  if (!c.maskShape.empty()) {
    in.mask.resize(count(c.maskShape));
    for (uint8_t &m : in.mask)
      m = u(rng) > -0.4f; // 70% may attend
    // Whole rows false (the mask is [.., T, ..] with T rows then).
    for (int64_t row : c.deadRows)
      for (int64_t b = 0; b < c.maskShape[0]; ++b)
        for (int64_t h = 0; h < c.maskShape[1]; ++h)
          for (int64_t j = 0; j < c.maskShape[3]; ++j)
            in.mask[broadcastIndex(c.maskShape, b, h, row, j)] = 0;
  }
  if (c.segments) {
    std::uniform_int_distribution<int64_t> length(1, 150);
    for (int64_t b = 0; b < c.b; ++b) {
      int64_t id = 0, left = length(rng);
      for (int64_t i = 0; i < c.t; ++i) {
        if (c.segments == 2) {
          in.segments.push_back(i % 3);
          continue;
        }
        if (left-- == 0)
          ++id, left = length(rng) - 1;
        in.segments.push_back(id);
      }
    }
    in.segments32.assign(in.segments.begin(), in.segments.end());
  }
  return in;
}

struct Reference {
  std::vector<double> out, lse, dq, dk, dv, dbias;
};

/// Materializes each (b, h)'s T x S scores; plain softmax and backward.
Reference reference(const Case &c, const Inputs &in) {
  const int64_t T = c.t, S = c.s, D = c.d, Dv = c.dv, group = c.hq / c.hkv;
  const double scale = c.realScale();
  Reference r;
  r.out.assign(count(c.outShape()), 0);
  r.lse.assign(c.b * c.hq * T, 0);
  r.dq.assign(count(c.qShape()), 0);
  r.dk.assign(count(c.kShape()), 0);
  r.dv.assign(count(c.vShape()), 0);
  r.dbias.assign(c.biasShape.empty() ? 0 : count(c.biasShape), 0);
  std::vector<double> sc(T * S), p(T * S), ds(T * S);
  std::vector<char> allowed(T * S);
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t g = h / group;
      const float *q = &in.q[((b * c.hq + h) * T) * D];
      const float *k = &in.k[((b * c.hkv + g) * S) * D];
      const float *v = &in.v[((b * c.hkv + g) * S) * Dv];
      const float *dout = &in.dout[((b * c.hq + h) * T) * Dv];
      double *out = &r.out[((b * c.hq + h) * T) * Dv];
      double *lse = &r.lse[(b * c.hq + h) * T];
      for (int64_t i = 0; i < T; ++i) {
        double m = -kInf;
        for (int64_t j = 0; j < S; ++j) {
          bool ok = (!c.causal || j <= i) &&
                    (c.window == 0 || i - j < c.window) &&
                    (c.maskShape.empty() ||
                     in.mask[broadcastIndex(c.maskShape, b, h, i, j)]) &&
                    (!c.segments || in.segments[b * T + i] ==
                                        in.segments[b * T + j]);
          double dot = 0;
          for (int64_t x = 0; x < D; ++x)
            dot += double(q[i * D + x]) * k[j * D + x];
          double sv = scale * dot;
          if (!c.biasShape.empty())
            sv += in.bias[broadcastIndex(c.biasShape, b, h, i, j)];
          allowed[i * S + j] = ok;
          sc[i * S + j] = sv;
          if (ok)
            m = std::max(m, sv);
        }
        double sum = 0;
        for (int64_t j = 0; j < S; ++j)
          if (allowed[i * S + j])
            sum += std::exp(sc[i * S + j] - m);
        lse[i] = sum > 0 ? m + std::log(sum) : -kInf;
        for (int64_t j = 0; j < S; ++j)
          p[i * S + j] =
              allowed[i * S + j] ? std::exp(sc[i * S + j] - lse[i]) : 0;
        for (int64_t x = 0; x < Dv; ++x) {
          double o = 0;
          for (int64_t j = 0; j < S; ++j)
            o += c.keep(b, h, i, j) * p[i * S + j] * v[j * Dv + x];
          out[i * Dv + x] = o;
        }
      }
      // Backward.
      for (int64_t i = 0; i < T; ++i) {
        double di = 0;
        for (int64_t x = 0; x < Dv; ++x)
          di += double(dout[i * Dv + x]) * out[i * Dv + x];
        for (int64_t j = 0; j < S; ++j) {
          double dp = 0;
          for (int64_t x = 0; x < Dv; ++x)
            dp += double(dout[i * Dv + x]) * v[j * Dv + x];
          ds[i * S + j] = p[i * S + j] * (c.keep(b, h, i, j) * dp - di);
        }
      }
      double *dq = &r.dq[((b * c.hq + h) * T) * D];
      double *dk = &r.dk[((b * c.hkv + g) * S) * D];
      double *dv = &r.dv[((b * c.hkv + g) * S) * Dv];
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) {
          const double pij = p[i * S + j], dsij = ds[i * S + j];
          const double zp = c.keep(b, h, i, j) * pij;
          for (int64_t x = 0; x < Dv; ++x)
            dv[j * Dv + x] += zp * dout[i * Dv + x];
          for (int64_t x = 0; x < D; ++x) {
            dq[i * D + x] += scale * dsij * k[j * D + x];
            dk[j * D + x] += scale * dsij * q[i * D + x];
          }
          if (!c.biasShape.empty())
            r.dbias[broadcastIndex(c.biasShape, b, h, i, j)] += dsij;
        }
    }
  return r;
}

AttentionStep stepOf(const Case &c, AttentionDirection direction) {
  AttentionStep step;
  step.direction = direction;
  step.scale = c.realScale();
  step.causal = c.causal;
  step.window = c.window;
  if (c.dropout > 0.0f) {
    step.seed = 0; // a buffer id; runAttention reads the value from t.seed
    step.dropout = c.dropout;
    step.stream = c.stream;
  }
  return step;
}

/// A PlanBuffer of `shape` (attentionShape reads shapes and elements).
PlanBuffer planBuffer(DType dtype, const std::vector<int64_t> &shape) {
  PlanBuffer b;
  b.dtype = dtype;
  b.shape = shape;
  b.elements = uint64_t(count(shape));
  return b;
}

struct Results {
  std::vector<float> out, lse, dq, dk, dv, dbias;
};

/// Both directions of `c` through runAttention with `isa`; every output
/// starts as NaN (the kernels must write all of it).
Results runKernels(const Case &c, const Inputs &in, AttentionIsa isa) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Results r;
  r.out.assign(count(c.outShape()), nan);
  r.lse.assign(c.b * c.hq * c.t, nan);
  r.dq.assign(count(c.qShape()), nan);
  r.dk.assign(count(c.kShape()), nan);
  r.dv.assign(count(c.vShape()), nan);
  if (c.dbias)
    r.dbias.assign(count(c.biasShape), nan);
  PlanBuffer q = planBuffer(DType::F32, c.qShape()),
             k = planBuffer(DType::F32, c.kShape()),
             v = planBuffer(DType::F32, c.vShape());
  PlanBuffer mask = planBuffer(DType::Bool, c.maskShape),
             bias = planBuffer(DType::F32, c.biasShape);
  AttentionShape shape =
      attentionShape(q, k, v, c.maskShape.empty() ? nullptr : &mask,
                     c.biasShape.empty() ? nullptr : &bias);
  AttentionTensors t;
  t.q = in.q.data(), t.k = in.k.data(), t.v = in.v.data();
  t.out = r.out.data(), t.lse = r.lse.data();
  t.mask = c.maskShape.empty() ? nullptr : in.mask.data();
  t.bias = c.biasShape.empty() ? nullptr : in.bias.data();
  if (c.segments) {
    t.segments = c.segments32 ? static_cast<const void *>(in.segments32.data())
                              : static_cast<const void *>(in.segments.data());
    t.segments64 = !c.segments32;
  }
  t.seed = c.dropoutSeed;
  std::string error;
  EXPECT_TRUE(runAttention(stepOf(c, AttentionDirection::Forward), shape, t,
                           &error, isa))
      << error;
  t.dout = in.dout.data();
  t.dq = r.dq.data(), t.dk = r.dk.data(), t.dv = r.dv.data();
  t.dbias = c.dbias ? r.dbias.data() : nullptr;
  EXPECT_TRUE(runAttention(stepOf(c, AttentionDirection::Backward), shape, t,
                           &error, isa))
      << error;
  return r;
}

/// ||got - want|| / ||want|| (absolute where want is 0); -inf must match
/// -inf exactly (lse of rows with no allowed key) and is left out.
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      if (got[i] != want[i])
        return kInf;
      continue;
    }
    if (std::isnan(got[i]))
      return kInf;
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void expectMatchesReference(const Case &c) {
  Inputs in = randomInputs(c);
  Reference want = reference(c, in);
  for (AttentionIsa isa : availableAttentionIsas()) {
    SCOPED_TRACE(c.name + " on " + attentionIsaName(isa));
    Results got = runKernels(c, in, isa);
    const double tolerance = 1e-5;
    EXPECT_LT(relativeError(got.out, want.out), tolerance) << "out";
    EXPECT_LT(relativeError(got.lse, want.lse), tolerance) << "lse";
    EXPECT_LT(relativeError(got.dq, want.dq), tolerance) << "dq";
    EXPECT_LT(relativeError(got.dk, want.dk), tolerance) << "dk";
    EXPECT_LT(relativeError(got.dv, want.dv), tolerance) << "dv";
    if (c.dbias)
      EXPECT_LT(relativeError(got.dbias, want.dbias), tolerance) << "dbias";
  }
}

TEST(CpuAttention, NoMask) {
  Case c;
  c.name = "no mask", c.b = 2, c.hq = 2, c.hkv = 2, c.t = 37, c.s = 70;
  expectMatchesReference(c);
}

TEST(CpuAttention, Causal) {
  Case c;
  c.name = "causal", c.hq = 2, c.hkv = 2, c.t = c.s = 130, c.d = c.dv = 64;
  c.causal = true, c.seed = 2;
  expectMatchesReference(c);
}

TEST(CpuAttention, CausalWindow) {
  Case c;
  c.name = "causal window 20", c.b = 2, c.hq = 2, c.hkv = 2, c.t = c.s = 130,
  c.causal = true, c.window = 20, c.seed = 3;
  expectMatchesReference(c);
  c.name = "causal window 2 (a query, its key and the one before)",
  c.window = 2;
  expectMatchesReference(c);
  c.name = "causal window 100 (over block edges)", c.window = 100;
  c.d = c.dv = 64;
  expectMatchesReference(c);
}

TEST(CpuAttention, GroupedQueryHeads) {
  Case c;
  c.name = "GQA 4/2", c.b = 2, c.hq = 4, c.hkv = 2, c.t = 70, c.s = 37;
  c.seed = 4;
  expectMatchesReference(c);
  c.name = "GQA 4/2 causal", c.t = c.s = 70, c.causal = true, c.d = 64,
  c.dv = 64;
  expectMatchesReference(c);
  c.name = "MQA 4/1", c.hkv = 1, c.causal = false, c.t = 37, c.s = 130;
  expectMatchesReference(c);
  c.name = "MQA 4/1 causal", c.t = c.s = 130, c.causal = true;
  expectMatchesReference(c);
}

TEST(CpuAttention, BroadcastMask) {
  Case c;
  c.name = "mask [B, 1, 1, S]", c.b = 2, c.hq = 2, c.hkv = 2, c.t = 37,
  c.s = 70, c.maskShape = {2, 1, 1, 70}, c.seed = 5;
  expectMatchesReference(c);
  c.name = "mask [B, Hq, T, S] with causal", c.t = c.s = 70;
  c.maskShape = {2, 2, 70, 70}, c.causal = true;
  expectMatchesReference(c);
}

TEST(CpuAttention, BiasAndItsGradient) {
  Case c;
  // Broadcast over the batch: the backward's batches share one task.
  c.name = "bias [1, Hq, T, S]", c.b = 2, c.hq = 2, c.hkv = 2, c.t = 37,
  c.s = 70, c.biasShape = {1, 2, 37, 70}, c.dbias = true, c.seed = 6;
  expectMatchesReference(c);
  // Broadcast over heads and queries: one task for all key/value heads.
  c.name = "bias [B, 1, 1, S]", c.hq = 4, c.hkv = 2, c.t = c.s = 130;
  c.biasShape = {2, 1, 1, 130}, c.causal = true;
  expectMatchesReference(c);
  c.name = "bias [1, 1, T, 1], no dbias", c.biasShape = {1, 1, 130, 1};
  c.dbias = false;
  expectMatchesReference(c);
}

// Packed documents: ids that increase along the sequence (block pairs whose
// ids do not meet are skipped), causal and not, i64 and i32; and unsorted
// ids, where nothing can be skipped by their order.
TEST(CpuAttention, DocumentIds) {
  Case c;
  c.name = "packed documents, causal", c.b = 2, c.hq = 2, c.hkv = 1;
  c.t = c.s = 400, c.causal = true, c.segments = 1, c.seed = 9;
  expectMatchesReference(c);
  c.name = "packed documents, i32, not causal", c.causal = false;
  c.segments32 = true, c.seed = 10;
  expectMatchesReference(c);
  c.name = "unsorted document ids with a bias", c.segments = 2;
  c.segments32 = false, c.t = c.s = 150, c.biasShape = {1, 2, 150, 150};
  c.dbias = true;
  expectMatchesReference(c);
}

// Dropout on the probabilities: the mask of loom.dropout over [B, Hq, T, S]
// (the reference draws it element by element), over blocks that are not
// multiples of the tiles, causal and grouped, with a bias and its gradient.
TEST(CpuAttention, Dropout) {
  Case c;
  c.name = "dropout, causal, grouped", c.b = 2, c.hq = 4, c.hkv = 2;
  c.t = c.s = 150, c.causal = true, c.dropout = 0.25f, c.dropoutSeed = 42;
  c.stream = 3, c.seed = 12;
  expectMatchesReference(c);
  c.name = "dropout with a bias", c.causal = false, c.t = 70, c.s = 200;
  c.biasShape = {1, 4, 70, 200}, c.dbias = true, c.dropout = 0.5f;
  c.dropoutSeed = -7, c.seed = 13;
  expectMatchesReference(c);
}

TEST(CpuAttention, HeadSizes) {
  Case c;
  c.name = "D 64, Dv 32", c.b = 1, c.hq = 2, c.hkv = 1, c.t = 130, c.s = 70;
  c.d = 64, c.dv = 32, c.seed = 7;
  expectMatchesReference(c);
  // Not multiples of any tile width: the column tails.
  c.name = "D 20, Dv 13", c.d = 20, c.dv = 13, c.causal = true, c.s = 130;
  expectMatchesReference(c);
  c.name = "T = S = 1", c.t = c.s = 1, c.d = c.dv = 16;
  expectMatchesReference(c);
}

TEST(CpuAttention, RowsWithNoAllowedKey) {
  Case c;
  c.name = "rows 3 and 40 fully masked", c.b = 1, c.hq = 2, c.hkv = 1, c.t = 70,
  c.s = 70, c.maskShape = {1, 1, 70, 1}, c.deadRows = {3, 40};
  c.causal = true, c.seed = 8;
  Inputs in = randomInputs(c);
  // The random part of a [1, 1, T, 1] mask drops whole rows too: keep
  // only the chosen ones.
  for (int64_t i = 0; i < c.t; ++i)
    in.mask[i] = i != 3 && i != 40;
  Reference want = reference(c, in);
  for (AttentionIsa isa : availableAttentionIsas()) {
    SCOPED_TRACE(attentionIsaName(isa));
    Results got = runKernels(c, in, isa);
    for (int64_t h = 0; h < c.hq; ++h)
      for (int64_t row : {3, 40}) {
        EXPECT_EQ(got.lse[h * c.t + row],
                  -std::numeric_limits<float>::infinity());
        for (int64_t x = 0; x < c.dv; ++x)
          EXPECT_EQ(got.out[(h * c.t + row) * c.dv + x], 0.0f);
        for (int64_t x = 0; x < c.d; ++x)
          EXPECT_EQ(got.dq[(h * c.t + row) * c.d + x], 0.0f);
      }
    EXPECT_LT(relativeError(got.out, want.out), 1e-5);
    EXPECT_LT(relativeError(got.lse, want.lse), 1e-5);
    EXPECT_LT(relativeError(got.dq, want.dq), 1e-5);
    EXPECT_LT(relativeError(got.dk, want.dk), 1e-5);
    EXPECT_LT(relativeError(got.dv, want.dv), 1e-5);
  }
  // Every row masked: everything 0 and -inf.
  c.name = "all masked", c.maskShape = {1, 1, 1, 1}, c.deadRows = {0};
  expectMatchesReference(c);
}

TEST(CpuAttention, NaNIsNotAMaskedScore) {
  // A NaN score makes its row NaN; taken for -inf (masked) it would make
  // the row 0 and hide the NaN from --check-numerics.
  Case c;
  c.name = "NaN", c.t = c.s = 70, c.causal = true;
  Inputs in = randomInputs(c);
  in.q[5 * c.d] = std::numeric_limits<float>::quiet_NaN(); // row 5
  for (AttentionIsa isa : availableAttentionIsas()) {
    SCOPED_TRACE(attentionIsaName(isa));
    Results got = runKernels(c, in, isa);
    EXPECT_TRUE(std::isnan(got.lse[5]));
    EXPECT_TRUE(std::isnan(got.out[5 * c.dv]));
    EXPECT_FALSE(std::isnan(got.lse[4]));
  }
}

TEST(CpuAttention, EverythingAtOnce) {
  Case c;
  c.name = "GQA, causal window, mask, bias, dbias", c.b = 2, c.hq = 4,
  c.hkv = 2, c.t = c.s = 200, c.d = 64, c.dv = 48, c.causal = true,
  c.window = 90, c.maskShape = {2, 1, 1, 200}, c.biasShape = {1, 4, 200, 200},
  c.dbias = true, c.scale = 0.2, c.seed = 9;
  expectMatchesReference(c);
}

// --- the plan ----------------------------------------------------------------

/// An entry running `c`'s attention `direction` (forward, backward or
/// both: two steps), every tensor an input or output of the entry; `extra`
/// is appended to each step (`"node": ...`, or fields to refuse).
EntryBuilder attentionEntry(const Case &c, const std::string &direction,
                            const std::string &extra = "",
                            const std::string &dtype = "f32",
                            const std::string &lseDtype = "f32") {
  EntryBuilder e("main");
  int q = e.buffer(dtype, c.qShape());
  int k = e.buffer(dtype, c.kShape());
  int v = e.buffer(dtype, c.vShape());
  int out = e.buffer(dtype, c.outShape());
  int lse = e.buffer(lseDtype, {c.b, c.hq, c.t});
  e.input("q", "input", q);
  e.input("k", "input", k);
  e.input("v", "input", v);
  std::string common =
      ", \"q\": " + std::to_string(q) + ", \"k\": " + std::to_string(k) +
      ", \"v\": " + std::to_string(v) + ", \"out\": " + std::to_string(out) +
      ", \"lse\": " + std::to_string(lse);
  if (!c.maskShape.empty()) {
    int mask = e.buffer("bool", c.maskShape);
    e.input("mask", "input", mask);
    common += ", \"mask\": " + std::to_string(mask);
  }
  int bias = -1;
  if (!c.biasShape.empty()) {
    bias = e.buffer(dtype, c.biasShape);
    e.input("bias", "input", bias);
    common += ", \"bias\": " + std::to_string(bias);
  }
  char scale[32];
  std::snprintf(scale, sizeof scale, "%.17g", c.realScale());
  common += std::string(", \"scale\": ") + scale +
            ", \"causal\": " + (c.causal ? "true" : "false") +
            ", \"window\": " + std::to_string(c.window);
  bool forward = direction != "backward", backward = direction != "forward";
  if (forward) {
    e.rawStep("{\"kind\": \"attention\", \"direction\": \"forward\"" + common +
              extra + "}");
  } else {
    e.input("out", "input", out);
    e.input("lse", "input", lse);
  }
  e.output("out", "output", out);
  e.output("lse", "output", lse);
  if (backward) {
    int dout = e.buffer(dtype, c.outShape());
    int dq = e.buffer(dtype, c.qShape());
    int dk = e.buffer(dtype, c.kShape());
    int dv = e.buffer(dtype, c.vShape());
    e.input("dout", "input", dout);
    std::string grads = ", \"dout\": " + std::to_string(dout) +
                        ", \"dq\": " + std::to_string(dq) +
                        ", \"dk\": " + std::to_string(dk) +
                        ", \"dv\": " + std::to_string(dv);
    e.output("dq", "output", dq);
    e.output("dk", "output", dk);
    e.output("dv", "output", dv);
    if (c.dbias) {
      int dbias = e.buffer(dtype, c.biasShape);
      grads += ", \"dbias\": " + std::to_string(dbias);
      e.output("dbias", "output", dbias);
    }
    e.rawStep("{\"kind\": \"attention\", \"direction\": \"backward\"" + common +
              grads + extra + "}");
  }
  return e;
}

Case planCase() {
  Case c;
  c.name = "plan", c.b = 2, c.hq = 4, c.hkv = 2, c.t = 37, c.s = 37;
  c.d = 16, c.dv = 8, c.causal = true, c.window = 10;
  c.maskShape = {2, 1, 1, 37}, c.biasShape = {1, 4, 37, 37}, c.dbias = true;
  return c;
}

std::string parseFailure(const std::string &text) {
  std::string error;
  std::optional<Plan> plan = parsePlan(text, "plan.json", &error);
  EXPECT_FALSE(plan) << "accepted:\n" << text;
  return error;
}

#define EXPECT_REFUSED(text, fragment)                                         \
  do {                                                                         \
    std::string message_ = parseFailure(text);                                 \
    EXPECT_NE(message_.find(fragment), std::string::npos) << message_;         \
  } while (0)

std::string plan(const Case &c, const std::string &direction,
                 const std::string &extra = "",
                 const std::string &dtype = "f32",
                 const std::string &lseDtype = "f32") {
  return planJson({attentionEntry(c, direction, extra, dtype, lseDtype)},
                  "null", "null");
}

TEST(AttentionPlan, AcceptsTheSchema) {
  Case c = planCase();
  std::string error;
  std::optional<Plan> parsed = parsePlan(
      plan(c, "both", ", \"node\": \"/attn/sdpa\""), "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  const PlanEntry &e = parsed->entries[0];
  ASSERT_EQ(e.steps.size(), 2u);
  const PlanStep &f = e.steps[0], &b = e.steps[1];
  EXPECT_EQ(f.kind, PlanStep::Kind::Attention);
  EXPECT_STREQ(stepKindName(f.kind), "attention");
  EXPECT_EQ(kStepKinds, size_t(PlanStep::Kind::Collective) + 1);
  const AttentionStep &a = b.attention;
  EXPECT_EQ(f.attention.direction, AttentionDirection::Forward);
  EXPECT_EQ(a.direction, AttentionDirection::Backward);
  EXPECT_TRUE(a.causal);
  EXPECT_EQ(a.window, 10);
  EXPECT_DOUBLE_EQ(a.scale, 0.25);
  // Buffers in the order attentionEntry made them.
  EXPECT_EQ(a.q, 0u);
  EXPECT_EQ(a.lse, 4u);
  EXPECT_EQ(a.mask, std::optional<uint32_t>(5));
  EXPECT_EQ(a.bias, std::optional<uint32_t>(6));
  EXPECT_EQ(a.dbias, std::optional<uint32_t>(11));
  EXPECT_FALSE(f.attention.dbias);
  EXPECT_EQ(f.writes, (std::vector<uint32_t>{3, 4}));
  EXPECT_EQ(b.writes, (std::vector<uint32_t>{8, 9, 10, 11}));
  EXPECT_EQ(b.nodes, std::vector<std::string>(4, "/attn/sdpa"));
  EXPECT_EQ(stepBuffers(f), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(stepBuffers(b),
            (std::vector<uint32_t>{0, 1, 2, 3, 4, 7, 8, 9, 10, 5, 6, 11}));
  // mask, bias and dbias are optional, null is absent.
  Case plain = c;
  plain.maskShape.clear(), plain.biasShape.clear(), plain.dbias = false;
  EXPECT_TRUE(
      parsePlan(plan(plain, "both", ", \"mask\": null"), "plan.json", &error))
      << error;
}

TEST(AttentionPlan, RefusesMalformedSteps) {
  Case c = planCase();
  std::string good = plan(c, "both");
  auto edit = [](std::string text, const std::string &from,
                 const std::string &to) {
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos)
      text.replace(at, from.size(), to);
    return text;
  };
  // Wrong rank: q as [B * Hq, T, D].
  EXPECT_REFUSED(
      edit(good, "\"shape\": [2, 4, 37, 16]", "\"shape\": [8, 37, 16]"),
      "step 0 (attention): field 'q': buffer 0 is f32 [8, 37, 16]; "
      "an attention step's q is rank 4 [B, Hq, T, D]");
  // Hkv = 3 does not divide Hq = 4 (k, v and the backward's dk, dv).
  Case odd = c;
  odd.hkv = 3;
  EXPECT_REFUSED(plan(odd, "forward"),
                 "field 'k': buffer 1 is f32 [2, 3, 37, 16], q is f32 [2, 4, "
                 "37, 16]: 3 key/value heads do not divide 4 query heads");
  // causal with T != S.
  Case cross = c;
  cross.s = 40, cross.window = 0, cross.maskShape = {2, 1, 1, 40};
  cross.biasShape.clear(), cross.dbias = false;
  EXPECT_REFUSED(plan(cross, "forward"),
                 "field 'causal': a causal step needs as many queries as "
                 "keys, q has T = 37 and k S = 40");
  // A window without causal.
  Case windowed = cross;
  windowed.causal = false, windowed.window = 4;
  EXPECT_REFUSED(plan(windowed, "forward"),
                 "field 'window': a window of 4 keys needs a causal step");
  EXPECT_REFUSED(edit(good, "\"window\": 10", "\"window\": -1"),
                 "field 'window': expected 0 (no window) or a positive");
  // lse of another dtype.
  EXPECT_REFUSED(plan(c, "forward", "", "f32", "f64"),
                 "field 'lse': buffer 4 is f64 [2, 4, 37]; an attention "
                 "step's lse is f32 [B, Hq, T]");
  // lse of another shape.
  EXPECT_REFUSED(
      edit(good, "\"shape\": [2, 4, 37]}", "\"shape\": [2, 4, 36]}"),
      "field 'lse': buffer 4 is f32 [2, 4, 36]; expected [2, 4, 37]");
  // A mask that does not broadcast, and one of floats.
  Case badMask = c;
  badMask.maskShape = {2, 1, 2, 37};
  EXPECT_REFUSED(plan(badMask, "forward"),
                 "field 'mask': buffer 5 is i1 [2, 1, 2, 37]; expected rank 4 "
                 "broadcasting to the scores [B, Hq, T, S] = [2, 4, 37, 37]");
  EXPECT_REFUSED(edit(good, "\"dtype\": \"bool\"", "\"dtype\": \"u8\""),
                 "field 'mask': buffer 5 is ui8 [2, 1, 1, 37]; an attention "
                 "mask is bool");
  // A bias that does not broadcast.
  Case badBias = c;
  badBias.biasShape = {1, 4, 37};
  badBias.dbias = false;
  EXPECT_REFUSED(plan(badBias, "forward"), "field 'bias': buffer 6 is f32 "
                                           "[1, 4, 37]; expected rank 4");
  // The backward without dq; with dq in a forward; dbias without bias.
  EXPECT_REFUSED(edit(good, "\"dq\": 8, ", ""),
                 "step 1 (attention): missing field 'dq'");
  EXPECT_REFUSED(edit(good, "\"direction\": \"forward\"",
                      "\"direction\": \"forward\", \"dq\": 8"),
                 "step 0 (attention): field 'dq': given, but only a backward "
                 "attention step has it");
  EXPECT_REFUSED(edit(good, "\"direction\": \"forward\"",
                      "\"direction\": \"forward\", \"dbias\": 11"),
                 "step 0 (attention): field 'dbias': given, but only a "
                 "backward");
  Case noBias = c;
  noBias.biasShape.clear(), noBias.dbias = false;
  EXPECT_REFUSED(plan(noBias, "backward", ", \"dbias\": 3"),
                 "field 'dbias': given, but the step has no 'bias'");
  // dq of another shape.
  EXPECT_REFUSED(edit(good, "\"dq\": 8", "\"dq\": 9"),
                 "field 'dq': buffer 9 is f32 [2, 2, 37, 16]; expected [2, 4, "
                 "37, 16] (q's shape)");
  // Not f32: all bf16, or one f64 among f32.
  EXPECT_REFUSED(plan(c, "forward", "", "bf16"),
                 "field 'q': buffer 0 is bf16 [2, 4, 37, 16]; attention steps "
                 "take f32 tensors in this runtime");
  EXPECT_REFUSED(edit(good, "\"dtype\": \"f32\", \"shape\": [2, 2, 37, 8]",
                      "\"dtype\": \"f16\", \"shape\": [2, 2, 37, 8]"),
                 "field 'v': buffer 2 is f16 [2, 2, 37, 8]; attention steps "
                 "take f32 tensors in this runtime");
  // Other fields.
  EXPECT_REFUSED(
      edit(good, "\"direction\": \"forward\"", "\"direction\": \"sideways\""),
      "field 'direction': unknown direction 'sideways' (expected "
      "forward or backward)");
  EXPECT_REFUSED(edit(good, "\"scale\": 0.25", "\"scale\": \"0.25\""),
                 "field 'scale': expected a finite number, got string");
  EXPECT_REFUSED(edit(good, "\"causal\": true", "\"causal\": 1"),
                 "field 'causal': expected true or false");
  EXPECT_REFUSED(edit(good, ", \"scale\": 0.25", ""), "missing field 'scale'");
  // out written over q's bytes.
  std::string overlap = good;
  size_t at = overlap.find("\"offset\": ");
  for (int i = 0; i < 3; ++i) // buffer 3: out
    at = overlap.find("\"offset\": ", at + 1);
  at += std::string("\"offset\": ").size();
  overlap.replace(at, overlap.find(',', at) - at, "0");
  EXPECT_REFUSED(overlap,
                 "step 0 (attention): field 'q': buffer 0 overlaps buffer 3 "
                 "('out'), which the step writes");
  // The list of kinds names it.
  EXPECT_REFUSED(edit(good, "\"kind\": \"attention\"", "\"kind\": \"attend\""),
                 "(expected kernel, gemm, copy, conv, attention, "
                 "linear_cross_entropy or collective)");
}

/// The artifact's outputs by name.
std::map<std::string, std::vector<float>>
runArtifact(Artifact &artifact, const Case &c, const Inputs &in,
            std::string *error, bool *ok) {
  NpyArray q = f32Array(c.qShape(), in.q), k = f32Array(c.kShape(), in.k),
           v = f32Array(c.vShape(), in.v),
           dout = f32Array(c.outShape(), in.dout), bias, mask;
  std::map<std::string, const NpyArray *> inputs = {
      {"q", &q}, {"k", &k}, {"v", &v}, {"dout", &dout}};
  if (!c.maskShape.empty()) {
    mask = makeArray(DType::Bool, c.maskShape, in.mask.data());
    inputs["mask"] = &mask;
  }
  if (!c.biasShape.empty()) {
    bias = f32Array(c.biasShape, in.bias);
    inputs["bias"] = &bias;
  }
  std::vector<NpyArray> outputs;
  *ok = artifact.run("main", inputs, &outputs, error);
  std::map<std::string, std::vector<float>> byName;
  const PlanEntry *entry = artifact.plan().findEntry("main");
  for (size_t i = 0; *ok && i < outputs.size(); ++i)
    byName[entry->outputs[i].name] = f32Values(outputs[i]);
  return byName;
}

TEST(AttentionPlan, ArtifactRunsBothDirections) {
  Case c = planCase();
  c.seed = 10;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeBytes(dir.file("plan.json"), plan(c, "both"));
  std::string error;
  LoadOptions options;
  options.profile = true;
  std::unique_ptr<Artifact> artifact =
      Artifact::load(dir.path(), options, &error);
  ASSERT_TRUE(artifact) << error;
  Inputs in = randomInputs(c);
  Reference want = reference(c, in);
  bool ok = false;
  auto got = runArtifact(*artifact, c, in, &error, &ok);
  ASSERT_TRUE(ok) << error;
  EXPECT_LT(relativeError(got["out"], want.out), 1e-5);
  EXPECT_LT(relativeError(got["lse"], want.lse), 1e-5);
  EXPECT_LT(relativeError(got["dq"], want.dq), 1e-5);
  EXPECT_LT(relativeError(got["dk"], want.dk), 1e-5);
  EXPECT_LT(relativeError(got["dv"], want.dv), 1e-5);
  EXPECT_LT(relativeError(got["dbias"], want.dbias), 1e-5);
  std::vector<StepProfile> profile = artifact->profile();
  ASSERT_EQ(profile.size(), 2u);
  EXPECT_EQ(profile[0].kind, PlanStep::Kind::Attention);
  EXPECT_EQ(profile[0].what,
            "attention forward 2x4x37x16 * 2x2x37x16 causal window 10 mask "
            "bias");
  EXPECT_EQ(profile[1].what.rfind("attention backward", 0), 0u);
}

TEST(AttentionPlan, CheckNumericsAllowsTheLseOfAMaskedRow) {
  // A row with no allowed key has lse -inf: a value, not an overflow.
  Case c;
  c.name = "dead row", c.hq = 2, c.t = c.s = 5, c.maskShape = {1, 1, 5, 1};
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeBytes(dir.file("plan.json"), plan(c, "both"));
  std::string error;
  LoadOptions options;
  options.checkNumerics = true;
  std::unique_ptr<Artifact> artifact =
      Artifact::load(dir.path(), options, &error);
  ASSERT_TRUE(artifact) << error;
  Inputs in = randomInputs(c);
  in.mask = {1, 0, 1, 1, 1};
  bool ok = false;
  auto got = runArtifact(*artifact, c, in, &error, &ok);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(got["lse"][1], -std::numeric_limits<float>::infinity());
  // A NaN in what the step reads shows in what it writes (it does not
  // pass for a masked score).
  in.q[0] = std::numeric_limits<float>::quiet_NaN();
  runArtifact(*artifact, c, in, &error, &ok);
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("(attention forward writing buffer 3)"),
            std::string::npos)
      << error;
}

TEST(AttentionPlan, CudaBackendRefusesAttentionAtLoad) {
  Case c = planCase();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string text = toCudaPlan(plan(c, "forward"), 90, "null", "null");
  std::string error;
  ASSERT_TRUE(parsePlan(text, "plan.json", &error)) << error;
  writeBytes(dir.file("plan.json"), text);
  ScopedEnv driver("LOOMRT_CUDA_DRIVER", LOOMRT_FAKE_CUDA_PATH);
  ScopedEnv blasLt("LOOMRT_CUBLASLT_LIBRARY", LOOMRT_FAKE_CUDA_PATH);
  ErrorCode code = ErrorCode::Ok;
  std::unique_ptr<Artifact> artifact =
      Artifact::load(dir.path(), &error, &code);
  ASSERT_FALSE(artifact);
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_NE(error.find("entry 'main': step 0 (attention): attention steps "
                       "run on the CPU target only in this runtime (loomc "
                       "--target=cuda makes a fused attention a generated "
                       "kernel instead)"),
            std::string::npos)
      << error;
}

} // namespace
} // namespace loomrt::test
