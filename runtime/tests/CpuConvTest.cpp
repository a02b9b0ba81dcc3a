//===- CpuConvTest.cpp - conv steps: reference loops, oneDNN, the plan ----===//
//
// The reference loops are checked by hand on a small case and by the
// adjoint identities that tie the three directions together; oneDNN's
// primitives are then checked against them on geometries that exercise
// groups, depthwise, strides with a remainder, dilation and asymmetric
// padding; the plan's conv steps are checked for their refusals and run
// through an artifact.
//
//===----------------------------------------------------------------------===//

#include "Fixtures.h"
#include "cpu/CpuConv.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace loomrt::test {
namespace {

struct Geometry {
  ConvShape shape;
  ConvStep step;
  std::string name;
};

/// A geometry with y's size computed from the rest.
Geometry geometry(std::string name, int64_t n, int64_t c, int64_t h,
                  int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t sh,
                  int64_t sw, std::array<int64_t, 4> pad, int64_t dh,
                  int64_t dw, int64_t groups) {
  Geometry g;
  g.name = std::move(name);
  g.shape = {n, c, h, w, o, kh, kw, 0, 0};
  g.step.strides[0] = sh, g.step.strides[1] = sw;
  for (int i = 0; i < 4; ++i)
    g.step.padding[i] = pad[i];
  g.step.dilations[0] = dh, g.step.dilations[1] = dw;
  g.step.groups = groups;
  g.shape.oh = (h + pad[0] + pad[2] - (kh - 1) * dh - 1) / sh + 1;
  g.shape.ow = (w + pad[1] + pad[3] - (kw - 1) * dw - 1) / sw + 1;
  return g;
}

std::vector<Geometry> geometries() {
  return {
      geometry("3x3 pad 1", 2, 8, 9, 7, 16, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 1),
      geometry("stride 2 with a remainder", 2, 16, 10, 9, 32, 3, 3, 2, 2,
               {1, 1, 1, 1}, 1, 1, 1),
      geometry("1x1 stride 2", 3, 32, 8, 8, 16, 1, 1, 2, 2, {0, 0, 0, 0}, 1,
               1, 1),
      geometry("7x7 stem, 3 channels", 2, 3, 20, 20, 16, 7, 7, 2, 2,
               {3, 3, 3, 3}, 1, 1, 1),
      geometry("depthwise 3x3", 2, 24, 11, 11, 24, 3, 3, 1, 1, {1, 1, 1, 1},
               1, 1, 24),
      geometry("depthwise 5x5 stride 2", 2, 32, 12, 12, 32, 5, 5, 2, 2,
               {2, 2, 2, 2}, 1, 1, 32),
      geometry("4 groups", 2, 16, 8, 8, 8, 3, 3, 1, 1, {1, 1, 1, 1}, 1, 1, 4),
      geometry("dilated, asymmetric padding", 1, 4, 12, 10, 6, 3, 2, 1, 2,
               {2, 0, 1, 3}, 2, 3, 1),
  };
}

struct Tensors {
  std::vector<float> x, w, y;
};

Tensors randomTensors(const Geometry &g, unsigned seed) {
  const ConvShape &s = g.shape;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensors t;
  t.x.resize(s.n * s.c * s.h * s.w);
  t.w.resize(s.o * (s.c / g.step.groups) * s.kh * s.kw);
  t.y.resize(s.n * s.o * s.oh * s.ow);
  for (auto *v : {&t.x, &t.w, &t.y})
    for (float &e : *v)
      e = u(rng);
  return t;
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += double(a[i]) * b[i];
  return sum;
}

/// The direction's output of `t` (y, x or w), computed by `conv`.
template <typename Conv>
std::vector<float> runDirection(Conv &&conv, Geometry g, ConvDirection d,
                                Tensors t) {
  g.step.direction = d;
  conv(g.step, g.shape, t.x.data(), t.w.data(), t.y.data());
  return d == ConvDirection::Forward        ? t.y
         : d == ConvDirection::BackwardData ? t.x
                                            : t.w;
}

void reference(const ConvStep &step, const ConvShape &shape, float *x,
               float *w, float *y) {
  referenceConv(step, shape, x, w, y);
}

TEST(CpuConv, ReferenceByHand) {
  // x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], w = [[1, 0], [0, -1]], no
  // padding: y[i][j] = x[i][j] - x[i+1][j+1] = -4 everywhere.
  Geometry g = geometry("2x2", 1, 1, 3, 3, 1, 2, 2, 1, 1, {0, 0, 0, 0}, 1, 1,
                        1);
  Tensors t{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 0, 0, -1}, {0, 0, 0, 0}};
  EXPECT_EQ(runDirection(reference, g, ConvDirection::Forward, t),
            (std::vector<float>{-4, -4, -4, -4}));
  // dy = [[1, 0], [0, 2]]: dx scatters dy through w.
  t.y = {1, 0, 0, 2};
  EXPECT_EQ(runDirection(reference, g, ConvDirection::BackwardData, t),
            (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, -2}));
  // dw[i][j] = sum dy[a][b] x[a+i][b+j] = x[i][j] + 2 x[i+1][j+1].
  EXPECT_EQ(runDirection(reference, g, ConvDirection::BackwardWeights, t),
            (std::vector<float>{1 + 10, 2 + 12, 4 + 16, 5 + 18}));
}

TEST(CpuConv, ReferenceDirectionsAreAdjoint) {
  // <conv(x, w), dy> = <x, backward_data(dy, w)> = <w, backward_weights(x,
  // dy)>: each direction is the transpose of the forward in one operand.
  for (const Geometry &g : geometries()) {
    Tensors t = randomTensors(g, 1);
    double forward =
        dot(runDirection(reference, g, ConvDirection::Forward, t), t.y);
    double data =
        dot(runDirection(reference, g, ConvDirection::BackwardData, t), t.x);
    double weights = dot(
        runDirection(reference, g, ConvDirection::BackwardWeights, t), t.w);
    double scale = 1 + std::fabs(forward);
    EXPECT_NEAR(data, forward, 1e-4 * scale) << g.name;
    EXPECT_NEAR(weights, forward, 1e-4 * scale) << g.name;
  }
}

/// `t`'s x and y (NCHW) as NHWC, or back (`toNhwc` false).
Tensors relayout(const Geometry &g, const Tensors &t, bool toNhwc) {
  const ConvShape &s = g.shape;
  auto move = [&](const std::vector<float> &from, int64_t n, int64_t c,
                  int64_t h, int64_t w) {
    std::vector<float> to(from.size());
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = 0; b < c; ++b)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x) {
            int64_t nchw = ((a * c + b) * h + y) * w + x;
            int64_t nhwc = ((a * h + y) * w + x) * c + b;
            to[toNhwc ? nhwc : nchw] = from[toNhwc ? nchw : nhwc];
          }
    return to;
  };
  return {move(t.x, s.n, s.c, s.h, s.w), t.w, move(t.y, s.n, s.o, s.oh, s.ow)};
}

/// The direction's output of `t` (NCHW) computed on NHWC activations by
/// `conv` with a channels-last step, brought back to NCHW.
template <typename Conv>
std::vector<float> runChannelsLast(Conv &&conv, Geometry g, ConvDirection d,
                                   const Tensors &t) {
  g.step.channelsLast = true;
  g.step.direction = d;
  Tensors cl = relayout(g, t, true);
  conv(g.step, g.shape, cl.x.data(), cl.w.data(), cl.y.data());
  Tensors back = relayout(g, cl, false);
  return d == ConvDirection::Forward        ? back.y
         : d == ConvDirection::BackwardData ? back.x
                                            : back.w;
}

/// oneDNN's primitives against the reference loops on every geometry (with
/// `channelsLast`, those with one group, on NHWC activations) and direction.
void expectOneDnnMatchesReference(bool channelsLast, unsigned seed) {
  CpuConv conv;
  if (std::string(conv.library()) != "onednn")
    GTEST_SKIP() << "oneDNN (libdnnl) is not installed";
  auto library = [&](const ConvStep &step, const ConvShape &shape, float *x,
                     float *w, float *y) {
    std::string error;
    ASSERT_TRUE(conv.run(step, shape, x, w, y, &error)) << error;
  };
  for (const Geometry &g : geometries()) {
    if (channelsLast && g.step.groups != 1)
      continue;
    for (ConvDirection d :
         {ConvDirection::Forward, ConvDirection::BackwardData,
          ConvDirection::BackwardWeights}) {
      Tensors t = randomTensors(g, seed);
      // Garbage in the output: both must overwrite all of it.
      std::vector<float> want = runDirection(reference, g, d, t);
      std::vector<float> got = channelsLast
                                   ? runChannelsLast(library, g, d, t)
                                   : runDirection(library, g, d, t);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, double(std::fabs(got[i] - want[i])) /
                                    (1 + std::fabs(want[i])));
      EXPECT_LT(worst, 1e-4) << g.name << ", " << convDirectionName(d);
    }
  }
  // Every one of them ran on oneDNN, none fell back to the loops.
  EXPECT_EQ(conv.referenceRuns(), 0u);
}

TEST(CpuConv, OneDnnMatchesReference) {
  expectOneDnnMatchesReference(false, 2);
}

TEST(CpuConv, OneDnnChannelsLastMatchesReference) {
  expectOneDnnMatchesReference(true, 5);
}

/// An entry y = conv2d(x, w) of `g`, as a plan's conv step.
/// With `channelsLast`, x and y are NHWC buffers and the step says
/// `"layout": "nhwc"`.
EntryBuilder convEntry(const Geometry &g, const std::string &direction,
                       const std::string &extra = "",
                       bool channelsLast = false) {
  const ConvShape &s = g.shape;
  EntryBuilder e("main");
  int x = e.buffer("f32", channelsLast
                              ? std::vector<int64_t>{s.n, s.h, s.w, s.c}
                              : std::vector<int64_t>{s.n, s.c, s.h, s.w});
  int w = e.buffer("f32", {s.o, s.c / g.step.groups, s.kh, s.kw});
  int y = e.buffer("f32", channelsLast
                              ? std::vector<int64_t>{s.n, s.oh, s.ow, s.o}
                              : std::vector<int64_t>{s.n, s.o, s.oh, s.ow});
  e.input("x", "input", x);
  e.input("w", "input", w);
  e.output("y", "output", y);
  auto pair = [](const int64_t *v, int n) {
    std::string text = "[";
    for (int i = 0; i < n; ++i)
      text += (i ? ", " : "") + std::to_string(v[i]);
    return text + "]";
  };
  e.rawStep("{\"kind\": \"conv\", \"direction\": \"" + direction +
            "\", \"x\": " + std::to_string(x) + ", \"w\": " +
            std::to_string(w) + ", \"y\": " + std::to_string(y) +
            ", \"strides\": " + pair(g.step.strides, 2) +
            ", \"padding\": " + pair(g.step.padding, 4) +
            ", \"dilations\": " + pair(g.step.dilations, 2) +
            ", \"groups\": " + std::to_string(g.step.groups) +
            (channelsLast ? ", \"layout\": \"nhwc\"" : "") + extra + "}");
  return e;
}

std::string parseFailure(const std::string &text) {
  std::string error;
  std::optional<Plan> plan = parsePlan(text, "plan.json", &error);
  EXPECT_FALSE(plan) << "accepted:\n" << text;
  return error;
}

TEST(CpuConv, PlanRefusesInconsistentSteps) {
  Geometry g = geometries()[1];
  std::string error;
  ASSERT_TRUE(parsePlan(planJson({convEntry(g, "forward")}, "null", "null"),
                        "plan.json", &error))
      << error;
  EXPECT_NE(parseFailure(planJson({convEntry(g, "sideways")}, "null", "null"))
                .find("step 0 (conv): field 'direction': unknown direction "
                      "'sideways'"),
            std::string::npos);
  Geometry wrong = g;
  wrong.step.strides[0] = 1; // y's height no longer follows
  std::string message =
      parseFailure(planJson({convEntry(wrong, "forward")}, "null", "null"));
  EXPECT_NE(message.find("do not agree: height 5, the geometry gives 10"),
            std::string::npos)
      << message;
  Geometry grouped = g;
  grouped.step.groups = 3; // 16 channels
  message =
      parseFailure(planJson({convEntry(grouped, "forward")}, "null", "null"));
  EXPECT_NE(message.find("field 'groups'"), std::string::npos) << message;
  // A buffer of another dtype (a smaller one: the layout stays valid).
  std::string plan = planJson({convEntry(g, "forward")}, "null", "null");
  std::string f16 = plan;
  f16.replace(f16.find("\"f32\""), 5, "\"f16\"");
  message = parseFailure(f16);
  EXPECT_NE(message.find("field 'x': buffer 0 is f16 [2, 16, 10, 9]; conv "
                         "steps take rank-4 f32 tensors"),
            std::string::npos)
      << message;
  // y placed on x's bytes: the step would overwrite its own input.
  std::string overlap = plan;
  size_t y = overlap.find("\"offset\": ");
  for (int i = 0; i < 2; ++i)
    y = overlap.find("\"offset\": ", y + 1);
  size_t digits = y + std::string("\"offset\": ").size();
  overlap.replace(digits, overlap.find(',', digits) - digits, "0");
  message = parseFailure(overlap);
  EXPECT_NE(message.find("field 'x': buffer 0 overlaps the buffer the step "
                         "writes"),
            std::string::npos)
      << message;
  // The CUDA target has no conv steps.
  std::string cuda = planJson({convEntry(g, "forward")}, "\"kernels.cubin\"",
                              "null", ", \"sm\": 90, \"ptx\": null");
  cuda.replace(cuda.find("\"cpu\""), 5, "\"cuda\"");
  message = parseFailure(cuda);
  EXPECT_NE(message.find("conv steps run on the CPU target only"),
            std::string::npos)
      << message;
}

TEST(CpuConv, ReferenceChannelsLastIsTheSameConvolution) {
  // The loops sum in the same order in either layout: the same bits.
  for (const Geometry &g : geometries()) {
    if (g.step.groups != 1)
      continue;
    for (ConvDirection d :
         {ConvDirection::Forward, ConvDirection::BackwardData,
          ConvDirection::BackwardWeights}) {
      Tensors t = randomTensors(g, 4);
      EXPECT_EQ(runChannelsLast(reference, g, d, t),
                runDirection(reference, g, d, t))
          << g.name << ", " << convDirectionName(d);
    }
  }
}

TEST(CpuConv, PlanReadsTheLayout) {
  Geometry g = geometries()[1];
  std::string error;
  std::optional<Plan> plan = parsePlan(
      planJson({convEntry(g, "forward", "", true)}, "null", "null"),
      "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  EXPECT_TRUE(plan->entries[0].steps[0].conv.channelsLast);
  // NCHW buffers under an nhwc step: the shapes no longer agree.
  std::string message = parseFailure(planJson(
      {convEntry(g, "forward", ", \"layout\": \"nhwc\"")}, "null", "null"));
  EXPECT_NE(message.find("do not agree"), std::string::npos) << message;
  message = parseFailure(planJson(
      {convEntry(g, "forward", ", \"layout\": \"chwn\"")}, "null", "null"));
  EXPECT_NE(message.find("field 'layout': unknown layout 'chwn' (expected "
                         "nchw or nhwc)"),
            std::string::npos)
      << message;
  Geometry grouped = geometries()[6]; // 4 groups
  message = parseFailure(planJson({convEntry(grouped, "forward", "", true)},
                                  "null", "null"));
  EXPECT_NE(message.find("an nhwc conv step has one group, this one 4"),
            std::string::npos)
      << message;
}

TEST(CpuConv, ArtifactRunsAConvStep) {
  Geometry g = geometries()[4]; // depthwise
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeBytes(dir.file("plan.json"),
             planJson({convEntry(g, "forward")}, "null", "null"));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  Tensors t = randomTensors(g, 3);
  const ConvShape &s = g.shape;
  NpyArray x = f32Array({s.n, s.c, s.h, s.w}, t.x);
  NpyArray w = f32Array({s.o, 1, s.kh, s.kw}, t.w);
  std::vector<NpyArray> outputs;
  ASSERT_TRUE(artifact->run("main", {{"x", &x}, {"w", &w}}, &outputs, &error))
      << error;
  std::vector<float> want = runDirection(reference, g, ConvDirection::Forward, t);
  ASSERT_EQ(outputs.size(), 1u);
  ASSERT_EQ(outputs[0].data.size(), want.size() * sizeof(float));
  const float *got = reinterpret_cast<const float *>(outputs[0].data.data());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

} // namespace
} // namespace loomrt::test
