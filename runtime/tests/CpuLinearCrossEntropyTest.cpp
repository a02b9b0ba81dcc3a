//===- CpuLinearCrossEntropyTest.cpp - linear_cross_entropy steps ---------===//
//
// The tiled kernel (src/cpu/CpuLinearCrossEntropy.h) against a naive
// reference in double precision that makes the whole [N, V] logits and
// applies the formulas of docs/plan-format.md: the forward's loss and lse,
// the backward's dx and dw, for both layouts of w, every reduction, i64 and
// i32 labels, ignored rows (all of them too), tiles that do not divide N or
// V, on oneDNN and on CBLAS; labels out of range. Then the plan's schema
// and refusals, an artifact running both directions, --check-numerics, and
// the CUDA backend's refusal.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuLinearCrossEntropy.h"
#include "CudaFixtures.h"
#include "Fixtures.h"
#include "cpu/CpuGemm.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <random>

namespace loomrt::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

using Reduction = LinearCrossEntropyReduction;
using Direction = LinearCrossEntropyDirection;

struct Case {
  std::string name;
  int64_t n = 37, c = 24, v = 70;
  bool transposeW = true;
  Reduction reduction = Reduction::Mean;
  std::optional<int64_t> ignoreIndex;
  std::vector<int64_t> ignoredRows; ///< labelled ignoreIndex
  bool labels64 = true;
  LinearCrossEntropyBlocks blocks; ///< zero: the kernel's choice
  unsigned seed = 1;

  std::vector<int64_t> xShape() const { return {n, c}; }
  std::vector<int64_t> wShape() const {
    return transposeW ? std::vector<int64_t>{v, c} : std::vector<int64_t>{c, v};
  }
  std::vector<int64_t> lossShape() const {
    return reduction == Reduction::None ? std::vector<int64_t>{n}
                                        : std::vector<int64_t>{};
  }
};

struct Inputs {
  std::vector<float> x, w, dloss;
  std::vector<int64_t> labels;
};

Inputs randomInputs(const Case &c) {
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Inputs in;
  in.x.resize(c.n * c.c);
  in.w.resize(c.v * c.c);
  for (float &e : in.x)
    e = u(rng);
  for (float &e : in.w)
    e = u(rng);
  std::uniform_int_distribution<int64_t> label(0, c.v - 1);
  in.labels.resize(c.n);
  for (int64_t &l : in.labels)
    l = label(rng);
  for (int64_t row : c.ignoredRows)
    in.labels[row] = *c.ignoreIndex;
  in.dloss.resize(c.reduction == Reduction::None ? c.n : 1);
  for (float &e : in.dloss)
    e = 0.5f + u(rng);
  return in;
}

/// W[v, c] whichever way w is stored.
double weightAt(const Case &c, const Inputs &in, int64_t v, int64_t k) {
  return c.transposeW ? in.w[v * c.c + k] : in.w[k * c.v + v];
}

struct Reference {
  std::vector<double> loss, lse, dx, dw;
};

/// The whole [N, V] logits in double; plain log-softmax and gradients.
Reference reference(const Case &c, const Inputs &in) {
  const int64_t N = c.n, C = c.c, V = c.v;
  std::vector<double> logits(N * V);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) {
      double dot = 0;
      for (int64_t k = 0; k < C; ++k)
        dot += double(in.x[i * C + k]) * weightAt(c, in, v, k);
      logits[i * V + v] = dot;
    }
  Reference r;
  r.lse.resize(N);
  std::vector<double> rowLoss(N);
  int64_t counted = 0;
  for (int64_t i = 0; i < N; ++i) {
    double m = -kInf, sum = 0;
    for (int64_t v = 0; v < V; ++v)
      m = std::max(m, logits[i * V + v]);
    for (int64_t v = 0; v < V; ++v)
      sum += std::exp(logits[i * V + v] - m);
    r.lse[i] = m + std::log(sum);
    const bool ignored = c.ignoreIndex && in.labels[i] == *c.ignoreIndex;
    rowLoss[i] = ignored ? 0 : r.lse[i] - logits[i * V + in.labels[i]];
    counted += !ignored;
  }
  double total = 0;
  for (double l : rowLoss)
    total += l;
  if (c.reduction == Reduction::None)
    r.loss = rowLoss;
  else if (c.reduction == Reduction::Sum)
    r.loss = {total};
  else
    r.loss = {counted == 0 ? 0.0 : total / double(counted)}; // as loom.cross_entropy
  // dlogits, then dx = dlogits W and dw = dlogits^T x (in w's layout).
  std::vector<double> d(N * V, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (c.ignoreIndex && in.labels[i] == *c.ignoreIndex)
      continue;
    const double weight = c.reduction == Reduction::None ? in.dloss[i]
                          : c.reduction == Reduction::Sum
                              ? in.dloss[0]
                              : in.dloss[0] / double(counted);
    for (int64_t v = 0; v < V; ++v)
      d[i * V + v] = weight * (std::exp(logits[i * V + v] - r.lse[i]) -
                               (v == in.labels[i] ? 1.0 : 0.0));
  }
  r.dx.assign(N * C, 0.0);
  r.dw.assign(V * C, 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) {
      const double dv = d[i * V + v];
      if (dv == 0)
        continue;
      for (int64_t k = 0; k < C; ++k) {
        r.dx[i * C + k] += dv * weightAt(c, in, v, k);
        double &dw = c.transposeW ? r.dw[v * C + k] : r.dw[k * V + v];
        dw += dv * in.x[i * C + k];
      }
    }
  return r;
}

struct Results {
  std::vector<float> loss, lse, dx, dw;
  bool forwardOk = false, backwardOk = false;
  std::string error;
};

LinearCrossEntropyStep stepOf(const Case &c, Direction direction) {
  LinearCrossEntropyStep step;
  step.direction = direction;
  step.transposeW = c.transposeW;
  step.reduction = c.reduction;
  step.ignoreIndex = c.ignoreIndex;
  step.node = "/lm_head/ce";
  return step;
}

/// Both directions through runLinearCrossEntropy (the backward on the
/// forward's lse); every output starts as NaN (all of it must be written).
Results runKernel(const Case &c, const Inputs &in, const DnnlGemm &gemm,
                  AttentionIsa isa = AttentionIsa::Best) {
  Results r;
  r.loss.assign(c.reduction == Reduction::None ? c.n : 1, kNaN);
  r.lse.assign(c.n, kNaN);
  r.dx.assign(c.n * c.c, kNaN);
  r.dw.assign(c.v * c.c, kNaN);
  std::vector<int32_t> labels32(in.labels.begin(), in.labels.end());
  LinearCrossEntropyShape shape{c.n, c.c, c.v};
  LinearCrossEntropyTensors t;
  t.x = in.x.data(), t.w = in.w.data();
  t.labels64 = c.labels64;
  t.labels = c.labels64 ? static_cast<const void *>(in.labels.data())
                        : static_cast<const void *>(labels32.data());
  t.lse = r.lse.data(), t.loss = r.loss.data();
  r.forwardOk = runLinearCrossEntropy(stepOf(c, Direction::Forward), shape, t,
                                      gemm, &r.error, c.blocks, nullptr, isa);
  t.loss = nullptr;
  t.dloss = in.dloss.data(), t.dx = r.dx.data(), t.dw = r.dw.data();
  r.backwardOk = r.forwardOk &&
                 runLinearCrossEntropy(stepOf(c, Direction::Backward), shape, t,
                                       gemm, &r.error, c.blocks, nullptr, isa);
  return r;
}

/// ||got - want|| / ||want|| (absolute where want is 0); a NaN in either
/// must be a NaN in both, and is left out.
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) {
      if (std::isnan(got[i]) != std::isnan(want[i]))
        return kInf;
      continue;
    }
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// The GEMM paths to run on: oneDNN where it can be opened, and CBLAS.
std::vector<std::pair<std::string, DnnlGemm>> gemmPaths() {
  std::vector<std::pair<std::string, DnnlGemm>> paths;
  DnnlGemm onednn;
  onednn.open();
  if (onednn.available())
    paths.push_back({"onednn", onednn});
  paths.push_back({"cblas", DnnlGemm()});
  return paths;
}

/// `c` on every GEMM path and every instruction set this CPU runs.
void expectMatchesReference(const Case &c, const Inputs &in) {
  Reference want = reference(c, in);
  for (const auto &[library, gemm] : gemmPaths())
    for (AttentionIsa isa : availableAttentionIsas()) {
      SCOPED_TRACE(c.name + " on " + library + ", " + attentionIsaName(isa));
      Results got = runKernel(c, in, gemm, isa);
      ASSERT_TRUE(got.forwardOk && got.backwardOk) << got.error;
      const double tolerance = 1e-5;
      EXPECT_LT(relativeError(got.loss, want.loss), tolerance) << "loss";
      EXPECT_LT(relativeError(got.lse, want.lse), tolerance) << "lse";
      EXPECT_LT(relativeError(got.dx, want.dx), tolerance) << "dx";
      EXPECT_LT(relativeError(got.dw, want.dw), tolerance) << "dw";
    }
}

void expectMatchesReference(const Case &c) {
  expectMatchesReference(c, randomInputs(c));
}

TEST(CpuLinearCrossEntropy, EveryReductionAndLayoutInSmallTiles) {
  // Tiles of 8 rows x 16 classes: 5 row blocks (the last of 5 rows) by 5
  // class blocks (the last of 6 classes).
  for (bool transposeW : {true, false})
    for (Reduction reduction :
         {Reduction::Mean, Reduction::Sum, Reduction::None}) {
      Case c;
      c.name = std::string(transposeW ? "w [V, C], " : "w [C, V], ") +
               linearCrossEntropyReductionName(reduction);
      c.transposeW = transposeW, c.reduction = reduction;
      c.blocks = {8, 16};
      c.seed = 2 + int(reduction);
      expectMatchesReference(c);
    }
}

TEST(CpuLinearCrossEntropy, DefaultTilesOverALargeVocabulary) {
  // V = 70000: 4 MiB of logits hold 28336 classes of 37 rows, so three
  // class blocks, the last partial.
  Case c;
  c.name = "N 37, C 24, V 70000", c.v = 70000;
  c.ignoreIndex = -100, c.ignoredRows = {3, 20}, c.seed = 11;
  LinearCrossEntropyShape shape{c.n, c.c, c.v};
  LinearCrossEntropyBlocks blocks = linearCrossEntropyBlocks(shape);
  EXPECT_EQ(blocks.rows, 37);
  EXPECT_EQ(blocks.classes, 28336);
  EXPECT_LE(linearCrossEntropyScratchBytes(shape, {}),
            (uint64_t(4) << 20) + 4096); // and a few floats per row
  EXPECT_LT(linearCrossEntropyScratchBytes(shape, {}), uint64_t(c.n * c.v * 4));
  expectMatchesReference(c);
  c.name += ", w [C, V], sum, i32 labels";
  c.transposeW = false, c.reduction = Reduction::Sum, c.labels64 = false;
  expectMatchesReference(c);
}

TEST(CpuLinearCrossEntropy, WholeRowTiles) {
  // V = 3000: 349 rows fit 4 MiB, so tiles of 336 whole rows, the second
  // of 64.
  Case c;
  c.name = "N 400, C 16, V 3000", c.n = 400, c.c = 16, c.v = 3000;
  c.reduction = Reduction::None, c.seed = 12;
  LinearCrossEntropyBlocks blocks = linearCrossEntropyBlocks({c.n, c.c, c.v});
  EXPECT_EQ(blocks.rows, 336);
  EXPECT_EQ(blocks.classes, 3000);
  expectMatchesReference(c);
  // All at once where it fits; 512 rows by classes where fewer than 256
  // whole rows fit.
  blocks = linearCrossEntropyBlocks({300, 16, 3000});
  EXPECT_EQ(blocks.rows, 300);
  EXPECT_EQ(blocks.classes, 3000);
  blocks = linearCrossEntropyBlocks({2048, 768, 50304});
  EXPECT_EQ(blocks.rows, 512);
  EXPECT_EQ(blocks.classes, 2048);
  blocks = linearCrossEntropyBlocks({2048, 768, 5000000});
  EXPECT_EQ(blocks.rows, 512);
  EXPECT_EQ(blocks.classes, 2048);
  blocks = linearCrossEntropyBlocks({2048, 768, 50304}, int64_t(4) << 20);
  EXPECT_EQ(blocks.rows, 512);
  EXPECT_EQ(blocks.classes, 8192);
}

TEST(CpuLinearCrossEntropy, IgnoredRows) {
  Case c;
  c.name = "ignore_index -100 on 4 rows", c.ignoreIndex = -100;
  c.ignoredRows = {0, 7, 8, 36}, c.blocks = {8, 32}, c.seed = 13;
  expectMatchesReference(c);
  c.name = "ignore_index 5, a class: those rows ignored", c.ignoreIndex = 5;
  c.transposeW = false;
  expectMatchesReference(c);
  c.name = "ignore_index per row (none)", c.reduction = Reduction::None;
  expectMatchesReference(c);
}

TEST(CpuLinearCrossEntropy, EveryRowIgnored) {
  Case c;
  c.name = "all ignored", c.n = 9, c.ignoreIndex = -1, c.blocks = {4, 16};
  for (int64_t i = 0; i < c.n; ++i)
    c.ignoredRows.push_back(i);
  for (Reduction reduction :
       {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    c.reduction = reduction;
    SCOPED_TRACE(linearCrossEntropyReductionName(reduction));
    Inputs in = randomInputs(c);
    Reference want = reference(c, in);
    for (const auto &[library, gemm] : gemmPaths())
      for (AttentionIsa isa : availableAttentionIsas()) {
        SCOPED_TRACE(library + ", " + attentionIsaName(isa));
        Results got = runKernel(c, in, gemm, isa);
        ASSERT_TRUE(got.forwardOk && got.backwardOk) << got.error;
        // mean over no counted row: 0, as loom.cross_entropy (PyTorch
        // gives NaN); sum 0; none 0 per row.
        for (float l : got.loss)
          EXPECT_EQ(l, 0.0f);
        EXPECT_LT(relativeError(got.lse, want.lse), 1e-5); // every row's
        for (float g : got.dx)
          ASSERT_EQ(g, 0.0f);
        for (float g : got.dw)
          ASSERT_EQ(g, 0.0f);
      }
  }
}

TEST(CpuLinearCrossEntropy, PeakedAndFlatRows) {
  // Large logits (the row maximum matters) and all-equal ones (lse =
  // log V): x scaled by 30, one row zero.
  Case c;
  c.name = "peaked", c.blocks = {16, 16}, c.seed = 14;
  Inputs in = randomInputs(c);
  for (float &e : in.x)
    e *= 30.0f;
  std::fill(in.x.begin() + 4 * c.c, in.x.begin() + 5 * c.c, 0.0f);
  EXPECT_NEAR(reference(c, in).lse[4], std::log(70.0), 1e-12);
  expectMatchesReference(c, in);
}

TEST(CpuLinearCrossEntropy, NoRows) {
  Case c;
  c.name = "N 0", c.n = 0;
  for (Reduction reduction : {Reduction::Mean, Reduction::Sum}) {
    c.reduction = reduction;
    Inputs in = randomInputs(c);
    Results got = runKernel(c, in, DnnlGemm());
    ASSERT_TRUE(got.forwardOk && got.backwardOk) << got.error;
    EXPECT_EQ(got.loss[0], 0.0f); // mean over no row: 0, as cross_entropy
    for (float g : got.dw)
      ASSERT_EQ(g, 0.0f);
  }
}

TEST(CpuLinearCrossEntropy, LabelOutOfRangeFailsNamingNodeRowAndLabel) {
  Case c;
  c.name = "bad label", c.blocks = {8, 16};
  for (int64_t bad : {int64_t(70), int64_t(-1), int64_t(1) << 40}) {
    for (bool labels64 : {true, false}) {
      if (!labels64 && bad > 1000)
        continue; // not an i32
      SCOPED_TRACE(std::to_string(bad) + (labels64 ? " i64" : " i32"));
      c.labels64 = labels64;
      Inputs in = randomInputs(c);
      in.labels[5] = bad;
      Results got = runKernel(c, in, DnnlGemm());
      EXPECT_FALSE(got.forwardOk);
      EXPECT_EQ(got.error, "linear_cross_entropy '/lm_head/ce': row 5 has "
                           "label " +
                               std::to_string(bad) +
                               ", outside [0, 70) and not the ignore_index "
                               "(none given)");
      // Nothing written.
      for (float l : got.lse)
        ASSERT_TRUE(std::isnan(l));
      EXPECT_TRUE(std::isnan(got.loss[0]));
      // The backward checks them too.
      LinearCrossEntropyStep step = stepOf(c, Direction::Backward);
      step.ignoreIndex = -100;
      std::vector<float> lse(c.n, 0.0f), dx(c.n * c.c, kNaN),
          dw(c.v * c.c, kNaN);
      std::vector<int32_t> labels32(in.labels.begin(), in.labels.end());
      LinearCrossEntropyTensors t;
      t.x = in.x.data(), t.w = in.w.data(), t.labels64 = labels64;
      t.labels = labels64 ? static_cast<const void *>(in.labels.data())
                          : static_cast<const void *>(labels32.data());
      t.lse = lse.data(), t.dloss = in.dloss.data(), t.dx = dx.data(),
      t.dw = dw.data();
      std::string error;
      EXPECT_FALSE(
          runLinearCrossEntropy(step, {c.n, c.c, c.v}, t, DnnlGemm(), &error));
      EXPECT_EQ(error, "linear_cross_entropy '/lm_head/ce': row 5 has label " +
                           std::to_string(bad) +
                           ", outside [0, 70) and not the ignore_index -100");
      EXPECT_TRUE(std::isnan(dw[0]));
    }
  }
}

// --- the plan ----------------------------------------------------------------

/// An entry running `c`'s step `direction` (forward, backward or both: two
/// steps), every tensor an input or output of the entry; `extra` is
/// appended to each step (`"node": ...`, or fields to refuse).
EntryBuilder lceEntry(const Case &c, const std::string &direction,
                      const std::string &extra = "",
                      const std::string &labelType = "i64") {
  EntryBuilder e("main");
  int x = e.buffer("f32", c.xShape());
  int w = e.buffer("f32", c.wShape());
  int labels = e.buffer(labelType, {c.n});
  int lse = e.buffer("f32", {c.n});
  int loss = e.buffer("f32", c.lossShape());
  e.input("x", "input", x);
  e.input("w", "input", w);
  e.input("labels", "input", labels);
  std::string common =
      ", \"x\": " + std::to_string(x) + ", \"w\": " + std::to_string(w) +
      ", \"labels\": " + std::to_string(labels) +
      ", \"lse\": " + std::to_string(lse) +
      ", \"transpose_w\": " + (c.transposeW ? "true" : "false") +
      ", \"reduction\": \"" + linearCrossEntropyReductionName(c.reduction) +
      "\"";
  if (c.ignoreIndex)
    common += ", \"ignore_index\": " + std::to_string(*c.ignoreIndex);
  const bool forward = direction != "backward",
             backward = direction != "forward";
  if (forward) {
    e.rawStep("{\"kind\": \"linear_cross_entropy\", \"direction\": "
              "\"forward\"" +
              common + ", \"loss\": " + std::to_string(loss) + extra + "}");
    e.output("loss", "output", loss);
    e.output("lse", "output", lse);
  } else {
    e.input("lse", "input", lse);
  }
  if (backward) {
    int dloss = e.buffer("f32", c.lossShape());
    int dx = e.buffer("f32", c.xShape());
    int dw = e.buffer("f32", c.wShape());
    e.input("dloss", "input", dloss);
    e.rawStep("{\"kind\": \"linear_cross_entropy\", \"direction\": "
              "\"backward\"" +
              common + ", \"dloss\": " + std::to_string(dloss) +
              ", \"dx\": " + std::to_string(dx) +
              ", \"dw\": " + std::to_string(dw) + extra + "}");
    e.output("dx", "output", dx);
    e.output("dw", "output", dw);
  }
  return e;
}

std::string plan(const Case &c, const std::string &direction,
                 const std::string &extra = "",
                 const std::string &labelType = "i64") {
  return planJson({lceEntry(c, direction, extra, labelType)}, "null", "null");
}

Case planCase() {
  Case c;
  c.name = "plan", c.n = 37, c.c = 24, c.v = 70, c.ignoreIndex = -100;
  c.ignoredRows = {2};
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

std::string edit(std::string text, const std::string &from,
                 const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

TEST(LinearCrossEntropyPlan, AcceptsTheSchema) {
  Case c = planCase();
  std::string error;
  std::optional<Plan> parsed = parsePlan(
      plan(c, "both", ", \"node\": \"/lm_head\""), "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  const PlanEntry &e = parsed->entries[0];
  ASSERT_EQ(e.steps.size(), 2u);
  const PlanStep &f = e.steps[0], &b = e.steps[1];
  EXPECT_EQ(f.kind, PlanStep::Kind::LinearCrossEntropy);
  EXPECT_STREQ(stepKindName(f.kind), "linear_cross_entropy");
  EXPECT_EQ(kStepKinds, size_t(PlanStep::Kind::Collective) + 1);
  const LinearCrossEntropyStep &l = b.linearCrossEntropy;
  EXPECT_EQ(f.linearCrossEntropy.direction, Direction::Forward);
  EXPECT_EQ(l.direction, Direction::Backward);
  EXPECT_TRUE(l.transposeW);
  EXPECT_EQ(l.reduction, Reduction::Mean);
  EXPECT_EQ(l.ignoreIndex, std::optional<int64_t>(-100));
  EXPECT_EQ(l.node, "/lm_head");
  // Buffers in the order lceEntry made them: x w labels lse loss dloss dx
  // dw.
  EXPECT_EQ(f.linearCrossEntropy.loss, 4u);
  EXPECT_EQ(l.dloss, 5u);
  EXPECT_EQ(f.writes, (std::vector<uint32_t>{4, 3}));
  EXPECT_EQ(b.writes, (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(b.nodes, std::vector<std::string>(2, "/lm_head"));
  EXPECT_EQ(stepBuffers(f), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(stepBuffers(b), (std::vector<uint32_t>{0, 1, 2, 3, 5, 6, 7}));
  // ignore_index and node absent or null; i32 labels; w [C, V]; none.
  Case other = c;
  other.ignoreIndex.reset(), other.ignoredRows.clear();
  other.transposeW = false, other.reduction = Reduction::None;
  parsed = parsePlan(plan(other, "both", ", \"ignore_index\": null"),
                     "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_FALSE(parsed->entries[0].steps[1].linearCrossEntropy.ignoreIndex);
  EXPECT_EQ(parsed->entries[0].steps[1].nodes, std::vector<std::string>(2, ""));
  EXPECT_TRUE(parsePlan(plan(other, "forward", "", "i32"), "plan.json", &error))
      << error;
  // writes: which outputs --check-numerics reads.
  parsed =
      parsePlan(plan(c, "forward", ", \"writes\": [3]"), "plan.json", &error);
  ASSERT_TRUE(parsed) << error;
  EXPECT_EQ(parsed->entries[0].steps[0].writes, std::vector<uint32_t>{3});
}

TEST(LinearCrossEntropyPlan, RefusesMalformedSteps) {
  Case c = planCase();
  const std::string node = ", \"node\": \"/lm_head\"";
  std::string good = plan(c, "both", node);
  const std::string forward =
      "entry 'main': step 0 (linear_cross_entropy, node '/lm_head'): ";
  const std::string backward =
      "entry 'main': step 1 (linear_cross_entropy, node '/lm_head'): ";
  // w of the wrong shape: [V, C - 1], and [V, C] with transpose_w false.
  EXPECT_REFUSED(edit(good, "\"shape\": [70, 24]", "\"shape\": [70, 23]"),
                 forward + "field 'w': buffer 1 is f32 [70, 23], x is f32 "
                           "[37, 24]: expected w [V, C] (transpose_w) with C "
                           "= 24");
  Case wrongLayout = c;
  wrongLayout.transposeW = false;
  EXPECT_REFUSED(edit(plan(wrongLayout, "forward", node), "\"shape\": [24, 70]",
                      "\"shape\": [70, 24]"),
                 forward + "field 'w': buffer 1 is f32 [70, 24], x is f32 "
                           "[37, 24]: expected w [C, V] (transpose_w false) "
                           "with C = 24");
  EXPECT_REFUSED(edit(good, "\"shape\": [37, 24]", "\"shape\": [37, 24, 1]"),
                 forward + "field 'x': buffer 0 is f32 [37, 24, 1]; a "
                           "linear_cross_entropy step's x is rank 2 [N, C]");
  // Labels: floats, u8, another length.
  EXPECT_REFUSED(plan(c, "forward", node, "f32"),
                 forward + "field 'labels': buffer 2 is f32 [37]; the labels "
                           "are i64 or i32 class indices");
  EXPECT_REFUSED(plan(c, "forward", node, "u8"),
                 "field 'labels': buffer 2 is ui8 [37]; the labels are i64");
  EXPECT_REFUSED(
      edit(good, "\"dtype\": \"i64\", \"shape\": [37]",
           "\"dtype\": \"i64\", \"shape\": [36]"),
      forward + "field 'labels': buffer 2 is i64 [36]; expected [37] ([N], "
                "one label per row of x)");
  // Reductions: unknown; a loss (or dloss) whose shape is another
  // reduction's.
  EXPECT_REFUSED(
      edit(good, "\"reduction\": \"mean\"", "\"reduction\": \"avg\""),
      forward + "field 'reduction': unknown reduction 'avg' "
                "(expected mean, sum or none)");
  Case none = c;
  none.reduction = Reduction::None;
  EXPECT_REFUSED(edit(plan(none, "forward", node), "\"reduction\": \"none\"",
                      "\"reduction\": \"sum\""),
                 forward + "field 'loss': buffer 4 is f32 [37]; expected [] "
                           "(reduction sum: one scalar)");
  EXPECT_REFUSED(edit(plan(c, "backward", node), "\"reduction\": \"mean\"",
                      "\"reduction\": \"none\""),
                 "step 0 (linear_cross_entropy, node '/lm_head'): field "
                 "'dloss': buffer 5 is f32 []; expected [37] (reduction none: "
                 "one loss per row)");
  // Missing fields; fields of the other direction.
  EXPECT_REFUSED(edit(good, ", \"transpose_w\": true", ""),
                 forward + "missing field 'transpose_w'");
  EXPECT_REFUSED(edit(good, ", \"reduction\": \"mean\"", ""),
                 forward + "missing field 'reduction'");
  EXPECT_REFUSED(edit(good, ", \"loss\": 4", ""),
                 forward + "missing field 'loss'");
  EXPECT_REFUSED(edit(good, ", \"dx\": 6", ""),
                 backward + "missing field 'dx'");
  EXPECT_REFUSED(edit(good, ", \"loss\": 4", ", \"loss\": 4, \"dx\": 6"),
                 forward + "field 'dx': given, but only a backward "
                           "linear_cross_entropy step has it");
  EXPECT_REFUSED(edit(good, ", \"dloss\": 5", ", \"dloss\": 5, \"loss\": 4"),
                 backward + "field 'loss': given, but only a forward "
                            "linear_cross_entropy step has it");
  // Other types and values.
  EXPECT_REFUSED(
      edit(good, "\"direction\": \"forward\"", "\"direction\": \"up\""),
      forward + "field 'direction': unknown direction 'up' (expected "
                "forward or backward)");
  EXPECT_REFUSED(edit(good, "\"transpose_w\": true", "\"transpose_w\": 1"),
                 forward + "field 'transpose_w': expected true or false");
  EXPECT_REFUSED(edit(good, "\"ignore_index\": -100", "\"ignore_index\": 1.5"),
                 forward + "field 'ignore_index': expected an integer");
  EXPECT_REFUSED(edit(good, "\"x\": 0", "\"x\": 99"),
                 forward + "field 'x': buffer id 99 is out of range");
  EXPECT_REFUSED(edit(good, "\"node\": \"/lm_head\"", "\"node\": 3"),
                 "step 0 (linear_cross_entropy): field 'node': expected a "
                 "node name");
  // lse of another dtype or length; dw of another shape; not f32.
  EXPECT_REFUSED(edit(good, "\"dtype\": \"f32\", \"shape\": [37]}",
                      "\"dtype\": \"f64\", \"shape\": [37]}"),
                 forward +
                     "field 'lse': buffer 3 is f64 [37]; linear_cross_entropy "
                     "steps take f32 tensors in this runtime");
  EXPECT_REFUSED(edit(good, "\"dtype\": \"f32\", \"shape\": [37]}",
                      "\"dtype\": \"f32\", \"shape\": [36]}"),
                 forward + "field 'lse': buffer 3 is f32 [36]; expected [37]");
  std::string dw = good;
  size_t at = dw.rfind("\"shape\": [70, 24]");
  dw.replace(at, std::string("\"shape\": [70, 24]").size(),
             "\"shape\": [24, 70]");
  EXPECT_REFUSED(dw, backward + "field 'dw': buffer 7 is f32 [24, 70]; "
                                "expected [70, 24] (w's shape)");
  EXPECT_REFUSED(edit(good, "\"dtype\": \"f32\", \"shape\": [37, 24]",
                      "\"dtype\": \"bf16\", \"shape\": [37, 24]"),
                 forward + "field 'x': buffer 0 is bf16 [37, 24]; "
                           "linear_cross_entropy steps take f32 tensors");
  // No classes.
  EXPECT_REFUSED(edit(good, "\"shape\": [70, 24]", "\"shape\": [0, 24]"),
                 forward + "field 'w': buffer 1 is f32 [0, 24]; a "
                           "linear_cross_entropy step needs at least one "
                           "class (V)");
  // lse written over x's bytes (buffer 3 at x's offset 0).
  std::string overlap = good;
  at = overlap.find("\"offset\": ");
  for (int i = 0; i < 3; ++i)
    at = overlap.find("\"offset\": ", at + 1);
  at += std::string("\"offset\": ").size();
  overlap.replace(at, overlap.find(',', at) - at, "0");
  EXPECT_REFUSED(overlap, forward + "field 'x': buffer 0 overlaps buffer 3 "
                                    "('lse'), which the step writes");
  // writes naming a buffer the step does not write.
  EXPECT_REFUSED(plan(c, "forward", node + ", \"writes\": [0]"),
                 forward + "field 'writes': element 0: expected a buffer the "
                           "step writes (4 or 3), got 0");
  // The list of kinds names it.
  EXPECT_REFUSED(edit(good, "\"kind\": \"linear_cross_entropy\"",
                      "\"kind\": \"cross_entropy\""),
                 "(expected kernel, gemm, copy, conv, attention, "
                 "linear_cross_entropy or collective)");
}

/// The artifact's outputs by name.
std::map<std::string, std::vector<float>>
runArtifact(Artifact &artifact, const Case &c, const Inputs &in,
            std::string *error, bool *ok) {
  NpyArray x = f32Array(c.xShape(), in.x), w = f32Array(c.wShape(), in.w),
           labels = makeArray(DType::I64, {c.n}, in.labels.data()),
           dloss = f32Array(c.lossShape(), in.dloss);
  std::map<std::string, const NpyArray *> inputs = {
      {"x", &x}, {"w", &w}, {"labels", &labels}, {"dloss", &dloss}};
  std::vector<NpyArray> outputs;
  *ok = artifact.run("main", inputs, &outputs, error);
  std::map<std::string, std::vector<float>> byName;
  const PlanEntry *entry = artifact.plan().findEntry("main");
  for (size_t i = 0; *ok && i < outputs.size(); ++i)
    byName[entry->outputs[i].name] = f32Values(outputs[i]);
  return byName;
}

TEST(LinearCrossEntropyPlan, ArtifactRunsBothDirections) {
  for (bool transposeW : {true, false}) {
    Case c = planCase();
    c.transposeW = transposeW, c.seed = 20;
    SCOPED_TRACE(transposeW ? "w [V, C]" : "w [C, V]");
    TempDir dir;
    ASSERT_TRUE(dir.ok());
    writeBytes(dir.file("plan.json"), plan(c, "both", ", \"node\": \"/head\""));
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
    EXPECT_LT(relativeError(got["loss"], want.loss), 1e-5);
    EXPECT_LT(relativeError(got["lse"], want.lse), 1e-5);
    EXPECT_LT(relativeError(got["dx"], want.dx), 1e-5);
    EXPECT_LT(relativeError(got["dw"], want.dw), 1e-5);
    std::vector<StepProfile> profile = artifact->profile();
    ASSERT_EQ(profile.size(), 2u);
    EXPECT_EQ(profile[0].kind, PlanStep::Kind::LinearCrossEntropy);
    EXPECT_EQ(profile[0].what,
              transposeW ? "linear_cross_entropy forward 37x24 * 70x24 "
                           "transpose_w mean ignore_index -100"
                         : "linear_cross_entropy forward 37x24 * 24x70 mean "
                           "ignore_index -100");
    EXPECT_EQ(profile[1].what.rfind("linear_cross_entropy backward", 0), 0u);
    // A label out of range fails the run, naming the node, row and label.
    in.labels[30] = 70;
    runArtifact(*artifact, c, in, &error, &ok);
    EXPECT_FALSE(ok);
    EXPECT_NE(error.find("step 0"), std::string::npos) << error;
    EXPECT_NE(error.find("linear_cross_entropy '/head': row 30 has label 70, "
                         "outside [0, 70) and not the ignore_index -100"),
              std::string::npos)
        << error;
  }
}

TEST(LinearCrossEntropyPlan, CheckNumericsSeesANaNInput) {
  // A NaN in x makes its row's loss, and so the mean, NaN: --check-numerics
  // reports the step that wrote it. Every row ignored is a mean of 0, finite.
  Case c = planCase();
  c.n = 4;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeBytes(dir.file("plan.json"), plan(c, "both", ", \"node\": \"/head\""));
  std::string error;
  LoadOptions options;
  options.checkNumerics = true;
  std::unique_ptr<Artifact> artifact =
      Artifact::load(dir.path(), options, &error);
  ASSERT_TRUE(artifact) << error;
  Inputs in = randomInputs(c);
  in.x[0] = std::numeric_limits<float>::quiet_NaN();
  bool ok = false;
  runArtifact(*artifact, c, in, &error, &ok);
  EXPECT_FALSE(ok);
  EXPECT_NE(error.find("node '/head' became non-finite"), std::string::npos)
      << error;
  EXPECT_NE(error.find("(linear_cross_entropy forward writing buffer"),
            std::string::npos)
      << error;
  Case ignored = c;
  ignored.ignoredRows = {0, 1, 2, 3};
  Inputs all = randomInputs(ignored);
  auto got = runArtifact(*artifact, ignored, all, &error, &ok);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(got["loss"][0], 0.0f);
}

TEST(LinearCrossEntropyPlan, CudaBackendRefusesItAtLoad) {
  Case c = planCase();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::string text = toCudaPlan(plan(c, "forward", ", \"node\": \"/head\""), 90,
                                "null", "null");
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
  EXPECT_NE(error.find("entry 'main': step 0 (linear_cross_entropy, node "
                       "'/head'): linear_cross_entropy steps run on the CPU "
                       "target only in this runtime; the CUDA "
                       "linear_cross_entropy is not built yet"),
            std::string::npos)
      << error;
}

} // namespace
} // namespace loomrt::test
