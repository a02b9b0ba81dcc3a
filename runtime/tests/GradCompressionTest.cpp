//===- GradCompressionTest.cpp - Gradient compression's algorithms -------===//
//
// The spec's grammar; the plan's `grad` and `grad_compression` fields; the
// algorithms of GradCompression.h against independent oracles: PowerSGD
// reconstructs a gradient of rank <= R in one step, and under error
// feedback the running mean of its results converges to a fixed gradient
// of higher rank; top-k sends the k largest entries (a sort is the
// oracle) and, with integer-valued gradients, what it sent over the steps
// plus the final residual is exactly the sum of the gradients; int8's
// stochastic rounding is unbiased (the mean of many draws) and off by less
// than the scale. GradientCompression runs on a stand-in for two ranks
// that hold the same gradient (every collective returns this rank's
// values), so the mean over the ranks is this rank's own result; the MPI
// test (GradCompressionMpiTest.cpp) runs real ranks.
//
//===----------------------------------------------------------------------===//

#include "GradCompression.h"
#include "Fixtures.h"

#include "loomrt/Plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

using namespace loomrt;
using namespace loomrt::test;

namespace {

//===----------------------------------------------------------------------===//
// The spec
//===----------------------------------------------------------------------===//

TEST(GradCompressionSpec, ParsesEachMethod) {
  GradCompressionSpec s;
  std::string error;
  ASSERT_TRUE(parseGradCompression("none", &s, &error)) << error;
  EXPECT_FALSE(s.enabled());
  ASSERT_TRUE(parseGradCompression("int8", &s, &error)) << error;
  EXPECT_EQ(s.method, GradCompressionSpec::Method::Int8);
  EXPECT_EQ(s.text, "int8");
  ASSERT_TRUE(parseGradCompression("powersgd:rank=4", &s, &error)) << error;
  EXPECT_EQ(s.method, GradCompressionSpec::Method::PowerSgd);
  EXPECT_EQ(s.rank, 4);
  EXPECT_EQ(s.text, "powersgd:rank=4");
  ASSERT_TRUE(parseGradCompression("topk:0.01", &s, &error)) << error;
  EXPECT_EQ(s.method, GradCompressionSpec::Method::TopK);
  EXPECT_EQ(s.fraction, 0.01);
  EXPECT_EQ(s.text, "topk:0.01");
  ASSERT_TRUE(parseGradCompression("topk:1", &s, &error)) << error;
  EXPECT_EQ(s.fraction, 1.0);
  // Canonical text: what checkpoints compare.
  ASSERT_TRUE(parseGradCompression("topk:1e-3", &s, &error)) << error;
  EXPECT_EQ(s.text, "topk:0.001");
  ASSERT_TRUE(parseGradCompression("topk:.25", &s, &error)) << error;
  EXPECT_EQ(s.text, "topk:0.25");
  ASSERT_TRUE(parseGradCompression("powersgd:rank=007", &s, &error)) << error;
  EXPECT_EQ(s.text, "powersgd:rank=7");
}

TEST(GradCompressionSpec, RefusesWhatIsNotTheGrammar) {
  const char *bad[] = {"",
                       "Int8",
                       "int8 ",
                       " none",
                       "int4",
                       "powersgd",
                       "powersgd:",
                       "powersgd:2",
                       "powersgd:rank=",
                       "powersgd:rank=0",
                       "powersgd:rank=-1",
                       "powersgd:rank=65537",
                       "powersgd:rank=2x",
                       "topk",
                       "topk:",
                       "topk:0",
                       "topk:0.0",
                       "topk:1.5",
                       "topk:-0.1",
                       "topk:+0.1",
                       "topk:nan",
                       "topk:inf",
                       "topk:0x1p-3",
                       "topk:1e",
                       "topk:0.1.2",
                       "topk:0.1 "};
  for (const char *text : bad) {
    std::string error;
    GradCompressionSpec s;
    EXPECT_FALSE(parseGradCompression(text, &s, &error)) << text;
    EXPECT_NE(error.find("gradient compression '" + std::string(text) + "'"),
              std::string::npos)
        << "names the text: " << error;
  }
  std::string error;
  parseGradCompression("topk:2", nullptr, &error);
  EXPECT_EQ(error, "gradient compression 'topk:2': the fraction must be in "
                   "(0, 1] (e.g. topk:0.01)");
  parseGradCompression("zip", nullptr, &error);
  EXPECT_EQ(error, "gradient compression 'zip': expected none, "
                   "powersgd:rank=R, topk:FRACTION or int8");
}

TEST(GradCompressionSpec, ReservedCheckpointNames) {
  EXPECT_EQ(gradResidualName("fc1.weight", 3), "fc1.weight.grad_residual.dp3");
  EXPECT_EQ(powerSgdQName("fc1.weight"), "fc1.weight.powersgd_q");
  EXPECT_TRUE(isGradCompressionTensorName("w.grad_residual.dp0"));
  EXPECT_TRUE(isGradCompressionTensorName("w.grad_residual.dp12"));
  EXPECT_TRUE(isGradCompressionTensorName("w.powersgd_q"));
  EXPECT_FALSE(isGradCompressionTensorName("w.grad_residual.dp"));
  EXPECT_FALSE(isGradCompressionTensorName("w.grad_residual.dpx"));
  EXPECT_FALSE(isGradCompressionTensorName("w.momentum"));
  EXPECT_FALSE(isGradCompressionTensorName(".powersgd_q"));
}

//===----------------------------------------------------------------------===//
// The plan's fields
//===----------------------------------------------------------------------===//

std::string meshPlan(const std::string &gradStep, const std::string &top = "") {
  EntryBuilder e("main");
  int a = e.buffer("f32", {4}), b = e.buffer("f32", {4}),
      c = e.buffer("f32", {2});
  e.input("x", "input", a);
  e.rawStep(gradStep);
  e.output("y", "output", b);
  e.output("z", "output", c);
  return planJson({e}, "null", "null", meshJson({"dp"}, {2}) + top);
}

TEST(GradCompressionPlan, ReadsGradAndTopLevelSpec) {
  std::string error;
  std::optional<Plan> plan = parsePlan(
      meshPlan("{\"kind\": \"collective\", \"op\": \"all_reduce\", \"reduce\": "
               "\"mean\", \"axis\": \"dp\", \"src\": 0, \"dst\": 1, \"grad\": "
               "\"w\"}",
               ", \"grad_compression\": \"topk:0.5\""),
      "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  EXPECT_EQ(plan->gradCompression, "topk:0.5");
  EXPECT_EQ(plan->entries[0].steps[0].collective.grad, "w");

  plan = parsePlan(meshPlan("{\"kind\": \"collective\", \"op\": "
                            "\"reduce_scatter\", \"reduce\": \"mean\", "
                            "\"axis\": \"dp\", \"src\": 0, \"dst\": 2, "
                            "\"grad\": \"w\"}"),
                   "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  EXPECT_EQ(plan->gradCompression, "");
  EXPECT_EQ(plan->entries[0].steps[0].collective.grad, "w");
}

TEST(GradCompressionPlan, RefusesBadFields) {
  struct Case {
    std::string step, top, message;
  };
  const std::string head =
      "{\"kind\": \"collective\", \"axis\": \"dp\", \"src\": 0, ";
  std::vector<Case> cases = {
      {head + "\"op\": \"all_reduce\", \"reduce\": \"sum\", \"dst\": 1, "
              "\"grad\": \"w\"}",
       "",
       "plan.json: entry 'main': step 0 (collective): field 'grad': given on "
       "an all_reduce sum; only a mean all_reduce or reduce_scatter (a "
       "gradient's data-parallel reduction) names a gradient"},
      {head + "\"op\": \"all_gather\", \"dst\": 1, \"grad\": \"w\"}", "", ""},
      {head + "\"op\": \"all_reduce\", \"reduce\": \"mean\", \"dst\": 1, "
              "\"grad\": 3}",
       "",
       "plan.json: entry 'main': step 0 (collective): field 'grad': expected "
       "a string, got integer"},
      {head + "\"op\": \"all_reduce\", \"reduce\": \"mean\", \"dst\": 1, "
              "\"grad\": \"\"}",
       "", ""},
      {head + "\"op\": \"all_reduce\", \"reduce\": \"mean\", \"dst\": 1}",
       ", \"grad_compression\": \"topk:0\"",
       "plan.json: field 'grad_compression': gradient compression 'topk:0': "
       "the fraction must be in (0, 1] (e.g. topk:0.01)"},
      {head + "\"op\": \"all_reduce\", \"reduce\": \"mean\", \"dst\": 1}",
       ", \"grad_compression\": 8",
       "plan.json: field 'grad_compression': expected a string, got integer"},
  };
  for (const Case &c : cases) {
    std::string error;
    std::optional<Plan> plan =
        parsePlan(meshPlan(c.step, c.top), "plan.json", &error);
    EXPECT_FALSE(plan) << c.step << c.top;
    if (!c.message.empty())
      EXPECT_EQ(error, c.message);
    else
      EXPECT_NE(error.find("field 'grad'"), std::string::npos) << error;
  }
}

//===----------------------------------------------------------------------===//
// The algorithms
//===----------------------------------------------------------------------===//

TEST(GradCompressionMath, PowerSgdCompressesOnlyWhereItSaves) {
  int64_t n = 0, m = 0;
  EXPECT_FALSE(gradcomp::powerSgdCompresses({64}, 1, &n, &m)) << "a vector";
  EXPECT_FALSE(gradcomp::powerSgdCompresses({4, 1}, 1, &n, &m));
  EXPECT_FALSE(gradcomp::powerSgdCompresses({4, 4}, 2, &n, &m))
      << "(4 + 4) 2 = 16 is not < 16";
  EXPECT_TRUE(gradcomp::powerSgdCompresses({4, 4}, 1, &n, &m));
  EXPECT_TRUE(gradcomp::powerSgdCompresses({8, 2, 3}, 2, &n, &m));
  EXPECT_EQ(n, 8);
  EXPECT_EQ(m, 6);
}

TEST(GradCompressionMath, OrthonormalizesAndGuardsZeroColumns) {
  // [3, 3]: columns (1, 1, 0), (0, 0, 0), (1, 0, 1).
  std::vector<float> a = {1, 0, 1, 1, 0, 0, 0, 0, 1};
  gradcomp::orthonormalizeColumns(a.data(), 3, 3);
  for (float v : a)
    EXPECT_TRUE(std::isfinite(v));
  auto dot = [&](int i, int j) {
    double s = 0;
    for (int r = 0; r < 3; ++r)
      s += double(a[r * 3 + i]) * a[r * 3 + j];
    return s;
  };
  EXPECT_NEAR(dot(0, 0), 1, 1e-6);
  EXPECT_EQ(dot(1, 1), 0) << "the zero column stays zero";
  EXPECT_NEAR(dot(2, 2), 1, 1e-6);
  EXPECT_NEAR(dot(0, 2), 0, 1e-6);
}

/// The oracle of top-k: every index sorted by |v| (descending; ties in
/// index order), the first k, ascending.
std::vector<uint32_t> largestK(const std::vector<float> &v, uint64_t k) {
  std::vector<uint32_t> all(v.size());
  std::iota(all.begin(), all.end(), 0u);
  std::stable_sort(all.begin(), all.end(), [&](uint32_t a, uint32_t b) {
    return std::fabs(v[a]) > std::fabs(v[b]);
  });
  all.resize(k);
  std::sort(all.begin(), all.end());
  return all;
}

TEST(GradCompressionMath, TopKPicksTheLargestMagnitudes) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> d(-20, 20);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> v(37);
    for (float &x : v)
      x = float(d(rng)); // many ties
    uint64_t k = 1 + uint64_t(trial % 37);
    EXPECT_EQ(gradcomp::topK(v.data(), v.size(), k), largestK(v, k))
        << "k " << k;
  }
  EXPECT_EQ(gradcomp::topKCount(0.01, 100), 1u);
  EXPECT_EQ(gradcomp::topKCount(0.01, 101), 2u);
  EXPECT_EQ(gradcomp::topKCount(1e-9, 10), 1u) << "at least one";
  EXPECT_EQ(gradcomp::topKCount(1.0, 10), 10u);
}

TEST(GradCompressionMath, Int8RoundingIsUnbiasedAndWithinTheScale) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const uint64_t n = 500;
  const int draws = 4000;
  std::vector<float> v(n);
  for (float &x : v)
    x = u(rng);
  float largest = 0;
  for (float x : v)
    largest = std::max(largest, std::fabs(x));
  const float scale = largest / 127.0f; // as int8 compression picks it
  std::vector<double> mean(n, 0.0);
  std::vector<int8_t> q(n);
  bool roundedBothWays = false;
  for (int d = 0; d < draws; ++d) {
    gradcomp::quantizeInt8(v.data(), n, scale, gradcomp::int8Key(1, d, 0, "w"),
                           q.data());
    for (uint64_t i = 0; i < n; ++i) {
      double back = double(scale) * q[i];
      ASSERT_LT(std::fabs(back - v[i]), double(scale) * (1 + 1e-6))
          << "element " << i;
      mean[i] += back / draws;
    }
    if (d == 1) {
      std::vector<int8_t> first(n);
      gradcomp::quantizeInt8(v.data(), n, scale,
                             gradcomp::int8Key(1, 0, 0, "w"), first.data());
      roundedBothWays = first != q;
    }
  }
  EXPECT_TRUE(roundedBothWays) << "the draws differ between steps";
  // The mean of `draws` roundings: within 5 standard deviations (at most
  // scale / 2 / sqrt(draws)) of the value.
  double bound = 5 * 0.5 * double(scale) / std::sqrt(double(draws));
  int outside = 0;
  for (uint64_t i = 0; i < n; ++i)
    outside += std::fabs(mean[i] - v[i]) > bound;
  EXPECT_EQ(outside, 0);
  // The same key draws the same.
  std::vector<int8_t> a(n), b(n);
  gradcomp::quantizeInt8(v.data(), n, scale, 42, a.data());
  gradcomp::quantizeInt8(v.data(), n, scale, 42, b.data());
  EXPECT_EQ(a, b);
}

//===----------------------------------------------------------------------===//
// GradientCompression on two ranks that hold the same gradient
//===----------------------------------------------------------------------===//

class DoneRequest final : public Request {
public:
  bool wait(std::string *) noexcept override { return true; }
  bool test(bool *complete, std::string *) noexcept override {
    *complete = true;
    return true;
  }
};

/// Two ranks whose values are this rank's: a mean or maximum over them is
/// the value, an all-gather two copies of it.
class MirrorTwoRanks final : public Collectives {
public:
  int calls = 0;
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  int localRank() const noexcept override { return 0; }
  const char *name() const noexcept override { return "mirror"; }
  std::unique_ptr<Request> allReduce(void *data, size_t count, DType dtype,
                                     ReduceOp op,
                                     std::string *) noexcept override {
    ++calls;
    if (op == ReduceOp::Sum && dtype == DType::F32)
      for (size_t i = 0; i < count; ++i)
        static_cast<float *>(data)[i] *= 2;
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> reduceScatter(const void *, void *, size_t, DType,
                                         ReduceOp,
                                         std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> allGather(const void *send, void *recv, size_t count,
                                     DType dtype,
                                     std::string *) noexcept override {
    ++calls;
    size_t bytes = count * dtypeSize(dtype);
    std::memcpy(recv, send, bytes);
    std::memcpy(static_cast<uint8_t *>(recv) + bytes, send, bytes);
    return std::make_unique<DoneRequest>();
  }
  std::unique_ptr<Request> broadcast(void *, size_t, DType, int,
                                     std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> allToAll(const void *, void *, size_t, DType,
                                    std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> send(const void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> recv(void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return nullptr;
  }
  bool barrier(std::string *) noexcept override { return true; }
};

/// A plan over mesh dp=2 whose entry all-reduces (mean) the gradient of
/// `w` ([rows, cols]) and reduce-scatters that of `v` ([rows, cols]).
struct OneReduction {
  Plan plan;
  const PlanEntry *entry = nullptr;
  const PlanStep *allReduce = nullptr, *reduceScatter = nullptr;
  const PlanBuffer *src = nullptr;

  OneReduction(int64_t rows, int64_t cols) {
    EntryBuilder e("main");
    int g = e.buffer("f32", {rows, cols});
    int h = e.buffer("f32", {rows, cols});
    int hs = e.buffer("f32", {rows * cols / 2});
    e.input("g", "input", g);
    e.input("h", "input", h);
    e.collective("all_reduce", "mean", "dp", g, g, "w");
    e.collective("reduce_scatter", "mean", "dp", h, hs, "v");
    e.output("g", "output", g);
    e.output("hs", "output", hs);
    std::string error;
    std::optional<Plan> p =
        parsePlan(planJson({e}, "null", "null", meshJson({"dp"}, {2})),
                  "plan.json", &error);
    EXPECT_TRUE(p) << error;
    if (!p)
      return;
    plan = std::move(*p);
    entry = &plan.entries[0];
    allReduce = &entry->steps[0];
    reduceScatter = &entry->steps[1];
    src = &entry->buffers[0];
  }
};

GradientCompression made(const std::string &text, const OneReduction &r) {
  GradCompressionSpec spec;
  std::string error;
  EXPECT_TRUE(parseGradCompression(text, &spec, &error)) << error;
  GradientCompression c(spec, /*seed=*/11);
  EXPECT_TRUE(c.addEntry(r.plan, *r.entry, &error)) << error;
  return c;
}

/// Runs the all-reduce of w's gradient `g`; returns the result.
std::vector<float> reduceW(GradientCompression &c, const OneReduction &r,
                           MirrorTwoRanks &comm, const std::vector<float> &g) {
  std::vector<float> out(g.size());
  std::string error;
  EXPECT_TRUE(
      c.reduce(*r.allReduce, *r.src, g.data(), out.data(), comm, &error))
      << error;
  return out;
}

std::map<std::string, NpyArray> stateOf(GradientCompression &c) {
  std::map<std::string, NpyArray> state;
  std::string error;
  EXPECT_TRUE(c.gatherState(nullptr, 0, &state, &error)) << error;
  return state;
}

TEST(GradCompression, PowerSgdReconstructsALowRankGradientInOneStep) {
  const int64_t n = 12, m = 10;
  OneReduction r(n, m);
  GradientCompression c = made("powersgd:rank=2", r);
  ASSERT_TRUE(c.compresses(*r.allReduce));
  // g = u1 v1^T + u2 v2^T: rank 2.
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  std::vector<float> u1(n), u2(n), v1(m), v2(m), g(size_t(n * m));
  for (auto *x : {&u1, &u2})
    for (float &e : *x)
      e = d(rng);
  for (auto *x : {&v1, &v2})
    for (float &e : *x)
      e = d(rng);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      g[size_t(i * m + j)] =
          u1[size_t(i)] * v1[size_t(j)] + 0.5f * u2[size_t(i)] * v2[size_t(j)];
  MirrorTwoRanks comm;
  std::vector<float> out = reduceW(c, r, comm, g);
  EXPECT_EQ(comm.calls, 2) << "P and Q are all-reduced";
  double worst = 0, largest = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, double(std::fabs(out[i] - g[i])));
    largest = std::max(largest, double(std::fabs(g[i])));
  }
  EXPECT_LT(worst, 1e-5 * largest) << "rank 2 == R: exact to rounding";
  // The residual is what was not sent: zero to rounding.
  std::vector<float> e = f32Values(stateOf(c).at("w.grad_residual.dp0"));
  for (float x : e)
    EXPECT_LT(std::fabs(x), 1e-5 * largest);
  EXPECT_EQ(c.bytes().sent, uint64_t((n + m) * 2 * 4));
  EXPECT_EQ(c.bytes().exact, uint64_t(n * m * 4));
}

TEST(GradCompression, PowerSgdWithErrorFeedbackConvergesOnAFixedGradient) {
  // A fixed gradient of rank 3 (singular values 4, 2, 1) compressed at
  // rank 1: each step's result is a rank-1 matrix, but under error
  // feedback the mean of the results over T steps is g - e_T / T, which
  // must go to g (the residual stays bounded). And every step, result +
  // new residual = g + old residual (to rounding): nothing is lost.
  const int64_t n = 8, m = 6;
  OneReduction r(n, m);
  GradientCompression c = made("powersgd:rank=1", r);
  std::vector<float> g(size_t(n * m), 0.0f);
  const float sigma[3] = {4, 2, 1};
  for (int k = 0; k < 3; ++k)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        // Orthogonal rows/columns: unit vectors e_k (and e_{k+1}).
        g[size_t(i * m + j)] += sigma[k] * (i == k) * (j == (k + 1) % m);
  MirrorTwoRanks comm;
  std::vector<double> sum(g.size(), 0.0);
  std::vector<float> e(g.size(), 0.0f);
  const int T = 300;
  for (int t = 0; t < T; ++t) {
    std::vector<float> out = reduceW(c, r, comm, g);
    std::vector<float> next = f32Values(stateOf(c).at("w.grad_residual.dp0"));
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_NEAR(out[i] + next[i], g[i] + e[i], 1e-5);
      sum[i] += out[i];
    }
    e = next;
  }
  double err = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err += std::pow(sum[i] / T - g[i], 2);
    norm += double(g[i]) * g[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.02) << "the mean of the results -> g";
}

TEST(GradCompression, TopKErrorFeedbackLosesNothing) {
  // Integer-valued gradients: every sum below is exact in f32, so the
  // identity sum(sent) + e_T == sum(g) holds bit for bit.
  const int64_t n = 5, m = 4; // 20 entries, k = 5
  OneReduction r(n, m);
  GradientCompression c = made("topk:0.25", r);
  MirrorTwoRanks comm;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(-50, 50);
  std::vector<float> sent(size_t(n * m), 0.0f), total(size_t(n * m), 0.0f),
      e(size_t(n * m), 0.0f);
  for (int t = 0; t < 10; ++t) {
    std::vector<float> g(size_t(n * m));
    for (float &x : g)
      x = float(d(rng));
    // The oracle's choice: the 5 largest |g + e|.
    std::vector<float> ge(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      ge[i] = g[i] + e[i];
    std::vector<uint32_t> want = largestK(ge, 5);
    std::vector<float> out = reduceW(c, r, comm, g);
    size_t nonzero = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      bool picked = std::binary_search(want.begin(), want.end(), uint32_t(i));
      // Two ranks sent the same pair: the mean is the value.
      EXPECT_EQ(out[i], picked ? ge[i] : 0.0f) << "step " << t << " " << i;
      nonzero += out[i] != 0;
      sent[i] += out[i];
      total[i] += g[i];
    }
    EXPECT_LE(nonzero, 5u);
    e = f32Values(stateOf(c).at("w.grad_residual.dp0"));
  }
  for (size_t i = 0; i < total.size(); ++i)
    EXPECT_EQ(sent[i] + e[i], total[i]) << "entry " << i;
  EXPECT_EQ(c.bytes().sent, 10u * 5 * 8);
  EXPECT_EQ(c.bytes().exact, 10u * 20 * 4);
}

TEST(GradCompression, Int8ResidualIsWhatRoundingLeftOut) {
  const int64_t n = 6, m = 7;
  OneReduction r(n, m);
  GradientCompression c = made("int8", r);
  MirrorTwoRanks comm;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-3, 3);
  std::vector<float> g(size_t(n * m));
  for (float &x : g)
    x = u(rng);
  float largest = 0;
  for (float x : g)
    largest = std::max(largest, std::fabs(x));
  const float scale = largest / 127.0f;
  c.beginStep(4);
  std::vector<float> out = reduceW(c, r, comm, g);
  std::vector<float> e = f32Values(stateOf(c).at("w.grad_residual.dp0"));
  for (size_t i = 0; i < g.size(); ++i) {
    // Each result a multiple of the scale, within one scale of g; g = out
    // + e (to rounding).
    float steps = out[i] / scale;
    EXPECT_NEAR(steps, std::round(steps), 1e-3) << i;
    EXPECT_LT(std::fabs(out[i] - g[i]), scale * 1.0001f) << i;
    EXPECT_NEAR(out[i] + e[i], g[i], 1e-6) << i;
  }
  EXPECT_EQ(c.bytes().sent, uint64_t(n * m + 4));
  // The draws are a function of the step: again at step 4 from the same
  // state draws the same.
  GradientCompression again = made("int8", r);
  again.beginStep(4);
  EXPECT_EQ(reduceW(again, r, comm, g), out);
}

TEST(GradCompression, NonFiniteResultLeavesTheResidual) {
  // An overflow (which dynamic loss scaling skips) must show in the result
  // and must not poison the residual of the steps after it.
  for (const char *spec : {"int8", "topk:0.5", "powersgd:rank=1"}) {
    OneReduction r(4, 4);
    GradientCompression c = made(spec, r);
    MirrorTwoRanks comm;
    std::vector<float> g(16);
    for (size_t i = 0; i < g.size(); ++i)
      g[i] = float(i % 5) - 2.0f;
    reduceW(c, r, comm, g);
    std::vector<float> before = f32Values(stateOf(c).at("w.grad_residual.dp0"));
    std::vector<float> bad = g;
    bad[3] = std::numeric_limits<float>::infinity();
    bad[7] = std::nanf("");
    std::vector<float> out = reduceW(c, r, comm, bad);
    EXPECT_FALSE(std::all_of(out.begin(), out.end(), [](float v) {
      return std::isfinite(v);
    })) << spec;
    EXPECT_EQ(f32Values(stateOf(c).at("w.grad_residual.dp0")), before) << spec;
    out = reduceW(c, r, comm, g);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(),
                            [](float v) { return std::isfinite(v); }))
        << spec << ": the next step is finite again";
  }
}

TEST(GradCompression, ReduceScatterReturnsThisRanksBlock) {
  const int64_t n = 4, m = 4;
  OneReduction r(n, m);
  GradientCompression c = made("topk:1", r);
  ASSERT_TRUE(c.compresses(*r.reduceScatter));
  std::vector<float> h(16), block(8);
  std::iota(h.begin(), h.end(), 1.0f);
  std::string error;
  ASSERT_TRUE(c.reduce(*r.reduceScatter, r.entry->buffers[1], h.data(),
                       block.data(), *std::make_unique<MirrorTwoRanks>(),
                       &error))
      << error;
  EXPECT_EQ(block, std::vector<float>(h.begin(), h.begin() + 8));
}

TEST(GradCompression, StateRoundTripsThroughCheckpointTensors) {
  OneReduction r(8, 8);
  GradientCompression c = made("powersgd:rank=1", r);
  MirrorTwoRanks comm;
  std::vector<float> g(64);
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = float(std::sin(double(i)));
  reduceW(c, r, comm, g);
  std::map<std::string, NpyArray> state = stateOf(c);
  ASSERT_EQ(state.count("w.grad_residual.dp0"), 1u);
  ASSERT_EQ(state.count("w.powersgd_q"), 1u);
  EXPECT_EQ(state.at("w.powersgd_q").shape, (std::vector<int64_t>{8, 1}));
  // A fresh one restored from the tensors continues bit for bit.
  GradientCompression d = made("powersgd:rank=1", r);
  std::vector<std::string> notes;
  d.restore(state, 0, &notes);
  EXPECT_TRUE(notes.empty());
  // v's state is not there (its reduce-scatter never ran, but it exists):
  // restored from the same tensors it is found, so no note.
  EXPECT_EQ(reduceW(d, r, comm, g), reduceW(c, r, comm, g));
  // Tensors without the state: a note, zero residuals.
  GradientCompression f = made("powersgd:rank=1", r);
  f.restore({}, 0, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'w.grad_residual.dp0'"), std::string::npos)
      << notes[0];
}

TEST(GradCompression, LeavesOtherGradientsExact) {
  // A bf16 gradient, a vector under PowerSGD, a step over an axis of one
  // rank: not compressed.
  EntryBuilder e("main");
  int a = e.buffer("bf16", {8, 8}), b = e.buffer("f32", {16}),
      c = e.buffer("f32", {8, 8});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.input("c", "input", c);
  e.collective("all_reduce", "mean", "dp", a, a, "a");
  e.collective("all_reduce", "mean", "dp", b, b, "b");
  e.collective("all_reduce", "mean", "one", c, c, "c");
  e.output("a", "output", a);
  std::string error;
  std::optional<Plan> plan =
      parsePlan(planJson({e}, "null", "null", meshJson({"dp", "one"}, {2, 1})),
                "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  GradCompressionSpec spec;
  ASSERT_TRUE(parseGradCompression("powersgd:rank=1", &spec, &error));
  GradientCompression comp(spec, 0);
  ASSERT_TRUE(comp.addEntry(*plan, plan->entries[0], &error)) << error;
  EXPECT_EQ(comp.registeredCount(), 2u) << "a and b; c's axis has one rank";
  EXPECT_EQ(comp.compressedCount(), 0u);
  EXPECT_EQ(comp.notF32(), std::vector<std::string>{"a"});
  for (const PlanStep &s : plan->entries[0].steps)
    EXPECT_FALSE(comp.compresses(s));
}

} // namespace
