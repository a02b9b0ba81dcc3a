//===- TrainerTest.cpp - The training loop on a hand-built regression model
//===//

#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace loomrt::test {
namespace {

class TrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    artifactDir = dir.file("model.loom");
    std::filesystem::create_directories(artifactDir);
    ASSERT_TRUE(writeRegressionArtifact(artifactDir, /*withSeed=*/true));
    dataPath = dir.file("data.npz");
    ASSERT_TRUE(writeRegressionData(dataPath, 20));
    std::string error;
    artifact = Artifact::load(artifactDir, &error);
    ASSERT_TRUE(artifact) << error;
  }

  TrainOptions options(int64_t steps) const {
    TrainOptions o;
    o.dataPath = dataPath;
    o.steps = steps;
    o.progress = ProgressMode::None;
    return o;
  }

  bool run(const TrainOptions &o, TrainResult *result = nullptr,
           std::string *error = nullptr, ErrorCode *code = nullptr) {
    std::string message;
    TrainResult r;
    bool ok = train(*artifact, o, &r, &message, code);
    if (error)
      *error = message;
    else
      EXPECT_TRUE(ok) << message;
    if (result)
      *result = std::move(r);
    return ok;
  }

  TempDir dir;
  std::string artifactDir, dataPath;
  std::unique_ptr<Artifact> artifact;
};

std::vector<std::string> readLines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

TEST_F(TrainerTest, LossGoesDown) {
  TrainOptions o = options(60);
  o.metricsPath = dir.file("metrics.jsonl");
  o.evalDataPath = dataPath;
  o.evalEvery = 30;
  TrainResult result;
  ASSERT_TRUE(run(o, &result));
  EXPECT_EQ(result.startStep, 0);
  EXPECT_EQ(result.finalStep, 60);
  EXPECT_LT(result.lastLoss, 0.05);

  std::vector<std::string> lines = readLines(o.metricsPath);
  ASSERT_EQ(lines.size(), 62u); // 60 steps + 2 evaluations
  EXPECT_NE(lines[0].find("\"step\": 1, \"loss\": "), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("\"lr\": 0.0500000007"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("\"samples_per_sec\": "), std::string::npos);
  EXPECT_NE(lines[30].find("\"eval_loss\": "), std::string::npos) << lines[30];
  EXPECT_NE(lines[30].find("\"eval_samples\": 16"), std::string::npos)
      << lines[30];
  double first = std::stod(lines[0].substr(lines[0].find("loss\": ") + 7));
  EXPECT_GT(first, 10 * result.lastLoss);

  // The trained weights approach [1, -2, 3, 0.5] and 0.25.
  std::vector<float> w = f32Values(result.tensors.at("w"));
  EXPECT_NEAR(w[0], 1.0f, 0.3f);
  EXPECT_NEAR(w[1], -2.0f, 0.3f);
  EXPECT_NEAR(w[2], 3.0f, 0.3f);
}

TEST_F(TrainerTest, PrefetchDoesNotChangeResults) {
  TrainOptions o = options(15);
  TrainResult with, without;
  ASSERT_TRUE(run(o, &with));
  o.prefetch = false;
  ASSERT_TRUE(run(o, &without));
  for (const auto &[name, a] : with.tensors)
    EXPECT_EQ(a.data, without.tensors.at(name).data) << name;
  // Another seed gives other batches, hence other weights.
  o.seed = 7;
  TrainResult other;
  ASSERT_TRUE(run(o, &other));
  EXPECT_NE(other.tensors.at("w").data, with.tensors.at("w").data);
}

TEST_F(TrainerTest, ResumeIsBitwiseIdentical) {
  // Uninterrupted: 20 steps, a checkpoint every 10.
  TrainOptions a = options(20);
  a.checkpointDir = dir.file("ckpt-a");
  a.saveEvery = 10;
  a.saveParamsPath = dir.file("a.safetensors");
  a.metricsPath = dir.file("a.jsonl");
  ASSERT_TRUE(run(a));
  // Interrupted after 10, resumed from the directory to 20.
  TrainOptions b = options(10);
  b.checkpointDir = dir.file("ckpt-b");
  b.saveEvery = 10;
  b.metricsPath = dir.file("b.jsonl");
  ASSERT_TRUE(run(b));
  TrainOptions c = options(20);
  c.resumePath = b.checkpointDir;
  c.checkpointDir = b.checkpointDir;
  c.saveEvery = 10;
  c.saveParamsPath = dir.file("c.safetensors");
  c.metricsPath = b.metricsPath;
  TrainResult resumed;
  ASSERT_TRUE(run(c, &resumed));
  EXPECT_EQ(resumed.startStep, 10);
  EXPECT_EQ(resumed.finalStep, 20);

  std::string pa = readBytes(a.saveParamsPath),
              pc = readBytes(c.saveParamsPath);
  ASSERT_FALSE(pa.empty());
  EXPECT_EQ(pa, pc);
  // The checkpoints at step 20 are the same bytes too (tensors, step, data
  // position), and so are the metrics' losses.
  EXPECT_EQ(readBytes(a.checkpointDir + "/" + checkpointFileName(20)),
            readBytes(b.checkpointDir + "/" + checkpointFileName(20)));
  std::vector<std::string> la = readLines(a.metricsPath),
                           lb = readLines(b.metricsPath);
  ASSERT_EQ(la.size(), 20u);
  ASSERT_EQ(lb.size(), 20u);
  for (size_t i = 0; i < 20; ++i)
    EXPECT_EQ(la[i].substr(0, la[i].find(", \"samples")),
              lb[i].substr(0, lb[i].find(", \"samples")));
  EXPECT_EQ(readBytes(a.checkpointDir + "/latest"),
            checkpointFileName(20) + "\n");

  // Resuming a finished run does nothing and says so.
  TrainResult done;
  ASSERT_TRUE(run(c, &done));
  EXPECT_EQ(done.startStep, 20);
  EXPECT_EQ(done.finalStep, 20);
}

TEST_F(TrainerTest, KeepsTheNewestCheckpoints) {
  TrainOptions o = options(12);
  o.checkpointDir = dir.file("ckpt");
  o.saveEvery = 2;
  o.keepCheckpoints = 2;
  ASSERT_TRUE(run(o));
  std::vector<std::string> names;
  for (const auto &e : std::filesystem::directory_iterator(o.checkpointDir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{checkpointFileName(10),
                                      checkpointFileName(12), "latest"}));
}

TEST_F(TrainerTest, GradientAccumulationAveragesGradients) {
  // With 8 samples, every batch holds the same samples (in another order):
  // averaging two micro-batches' gradients equals one batch's gradient up to
  // rounding, so --accumulate 2 follows train_step closely.
  std::string small = dir.file("small.npz");
  ASSERT_TRUE(writeRegressionData(small, 8));
  TrainOptions o = options(10);
  o.dataPath = small;
  TrainResult plain, accumulated;
  ASSERT_TRUE(run(o, &plain));
  o.accumulate = 2;
  ASSERT_TRUE(run(o, &accumulated));
  EXPECT_EQ(accumulated.finalStep, 10);
  std::vector<float> wp = f32Values(plain.tensors.at("w")),
                     wa = f32Values(accumulated.tensors.at("w"));
  for (size_t i = 0; i < wp.size(); ++i)
    EXPECT_NEAR(wp[i], wa[i], 1e-4f) << i;
  EXPECT_NEAR(plain.lastLoss, accumulated.lastLoss,
              1e-4 * std::max(1.0, plain.lastLoss));
}

TEST_F(TrainerTest, TruncatedOrForeignCheckpointsAreRefused) {
  TrainOptions o = options(4);
  o.checkpointDir = dir.file("ckpt");
  ASSERT_TRUE(run(o));
  std::string path = o.checkpointDir + "/" + checkpointFileName(4);
  std::string bytes = readBytes(path);
  ASSERT_GT(bytes.size(), 100u);

  std::string truncated = dir.file("truncated.safetensors");
  writeBytes(truncated, bytes.substr(0, bytes.size() / 2));
  TrainOptions r = options(8);
  r.resumePath = truncated;
  std::string error;
  ErrorCode code;
  EXPECT_FALSE(run(r, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::Format);
  EXPECT_NE(error.find("cannot read checkpoint: " + truncated),
            std::string::npos)
      << error;

  // A checkpoint whose tensors do not fit the artifact names the tensor.
  std::map<std::string, NpyArray> tensors;
  CheckpointInfo info;
  ASSERT_TRUE(loadCheckpoint(path, *artifact, &tensors, &info, &error))
      << error;
  EXPECT_EQ(info.step, 4);
  EXPECT_EQ(info.batchSize, kBatch);
  tensors["w"] = f32Array({2, 2}, {0, 0, 0, 0});
  std::string foreign = dir.file("foreign.safetensors");
  ASSERT_TRUE(saveCheckpoint(foreign, tensors, info, &error));
  r.resumePath = foreign;
  EXPECT_FALSE(run(r, nullptr, &error));
  EXPECT_NE(error.find("tensor 'w' is f32 [2, 2], the artifact's param is f32 "
                       "[4, 1]"),
            std::string::npos)
      << error;
  tensors["w"] = f32Array({4, 1}, {0, 0, 0, 0});
  tensors["decoder.weight"] = f32Array({1}, {0});
  ASSERT_TRUE(saveCheckpoint(foreign, tensors, info, &error));
  EXPECT_FALSE(run(r, nullptr, &error));
  EXPECT_NE(
      error.find("tensor 'decoder.weight' is not a param or state tensor"),
      std::string::npos)
      << error;
  tensors.erase("decoder.weight");
  tensors.erase("b.momentum");
  ASSERT_TRUE(saveCheckpoint(foreign, tensors, info, &error));
  EXPECT_FALSE(run(r, nullptr, &error));
  EXPECT_NE(error.find("checkpoint has no tensor 'b.momentum'"),
            std::string::npos)
      << error;

  // A plain safetensors file is not a checkpoint.
  r.resumePath = artifactDir + "/params.safetensors";
  EXPECT_FALSE(run(r, nullptr, &error));
  EXPECT_NE(error.find("not a Loom checkpoint"), std::string::npos) << error;
  // An empty directory has nothing to resume.
  std::filesystem::create_directories(dir.file("empty"));
  r.resumePath = dir.file("empty");
  EXPECT_FALSE(run(r, nullptr, &error));
  EXPECT_NE(error.find("no checkpoint"), std::string::npos) << error;
}

TEST_F(TrainerTest, DataOfTheWrongShapeIsRefused) {
  auto refuse = [&](const std::map<std::string, NpyArray> &arrays,
                    const std::string &expected) {
    std::string path = dir.file("bad.npz");
    ASSERT_TRUE(writeNpz(path, arrays, nullptr));
    TrainOptions o = options(2);
    o.dataPath = path;
    std::string error;
    EXPECT_FALSE(run(o, nullptr, &error));
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  };
  NpyArray y = f32Array({16, 1}, std::vector<float>(16));
  refuse({{"x", f32Array({16, 5}, std::vector<float>(80))}, {"y", y}},
         "bad.npz: array 'x' is f32 [16, 5], expected f32 [N, 4] (N samples; "
         "entry 'train_step' takes batches of f32 [8, 4])");
  refuse({{"x", makeArray(DType::F64, {16, 4}, nullptr)}, {"y", y}},
         "array 'x' is f64 [16, 4], expected f32 [N, 4]");
  refuse({{"x", f32Array({16}, std::vector<float>(16))}, {"y", y}},
         "array 'x' is f32 [16], expected f32 [N, 4]");
  refuse({{"x", f32Array({16, 4}, std::vector<float>(64))}},
         "bad.npz: no array 'y' (entry 'train_step' takes input 'y', expected "
         "f32 [N, 1]; the file has 'x')");
  refuse({{"x", f32Array({16, 4}, std::vector<float>(64))},
          {"y", f32Array({12, 1}, std::vector<float>(12))}},
         "array 'y' has 12 samples but 'x' has 16");
  refuse({{"x", f32Array({4, 4}, std::vector<float>(16))},
          {"y", f32Array({4, 1}, std::vector<float>(4))}},
         "4 samples, fewer than one batch of 8");

  TrainOptions o = options(2);
  o.dataPath = dir.file("missing.npz");
  std::string error;
  EXPECT_FALSE(run(o, nullptr, &error));
  EXPECT_NE(error.find("missing.npz"), std::string::npos) << error;
}

TEST_F(TrainerTest, OptionsAreChecked) {
  std::string error;
  TrainOptions o = options(2);
  o.batchSize = 16;
  EXPECT_FALSE(run(o, nullptr, &error));
  EXPECT_NE(error.find("--batch-size 16 does not match the compiled batch "
                       "size 8"),
            std::string::npos)
      << error;
  o = options(2);
  o.saveEvery = 1;
  EXPECT_FALSE(run(o, nullptr, &error));
  EXPECT_NE(error.find("--save-every needs --checkpoint-dir"),
            std::string::npos);
  o = options(2);
  o.resumePath = "x";
  o.paramsPath = "y";
  EXPECT_FALSE(run(o, nullptr, &error));
  EXPECT_NE(error.find("give one"), std::string::npos);
}

TEST(Trainer, DropoutSeedIsAFunctionOfSeedStepAndMicroBatch) {
  EXPECT_EQ(dropoutSeed(0, 5, 0), dropoutSeed(0, 5, 0));
  EXPECT_NE(dropoutSeed(0, 5, 0), dropoutSeed(0, 6, 0));
  EXPECT_NE(dropoutSeed(0, 5, 0), dropoutSeed(1, 5, 0));
  EXPECT_NE(dropoutSeed(0, 5, 0), dropoutSeed(0, 5, 1));
  EXPECT_GE(dropoutSeed(~0ull, 1, 2), 0);
}

/// predict: logits = x; forward: loss = x[0][0]. Batch 4, 3 classes.
void writeClassifier(const std::string &dir) {
  EntryBuilder p("predict");
  int x = p.buffer("f32", {4, 3});
  int w = p.buffer("f32", {1});
  int logits = p.buffer("f32", {4, 3});
  p.input("x", "input", x);
  p.input("w", "param", w);
  p.copy(x, logits);
  p.output("logits", "output", logits);
  EntryBuilder f("forward");
  int fx = f.buffer("f32", {4, 3});
  int labels = f.buffer("i64", {4});
  int fw = f.buffer("f32", {1});
  int loss = f.buffer("f32", {});
  f.input("x", "input", fx);
  f.input("labels", "input", labels);
  f.input("w", "param", fw);
  f.kernel("first_elem", {fx, loss});
  f.output("loss", "output", loss);
  writeBytes(dir + "/plan.json", planJson({p, f}));
  ASSERT_TRUE(installKernels(dir));
  SafetensorsWriter params;
  float zero = 0;
  params.add("w", DType::F32, {1}, &zero, 4);
  ASSERT_TRUE(params.write(dir + "/params.safetensors", nullptr));
}

TEST(Trainer, EvaluatesAccuracyAndLossOnFullBatches) {
  TempDir dir;
  writeClassifier(dir.path());
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  // 10 samples: two batches of 4 are evaluated, the last 2 dropped.
  std::vector<float> x = {
      9, 0, 1, /**/ 0, 5, 1, /**/ 0, 1, 2, /**/ 3, 2, 1, // batch 0
      2, 1, 0, /**/ 0, 0, 4, /**/ 1, 7, 0, /**/ 0, 1, 0, // batch 1
      9, 9, 9, /**/ 9, 9, 9};                            // dropped
  std::vector<int64_t> labels = {0, 1, 0, 0, 0, -100, 2, 1, 0, 0};
  // argmax: 0 1 2 0 | 0 2 1 1 → correct: yes yes no yes | yes (ignored) no yes
  std::map<std::string, NpyArray> arrays;
  arrays["x"] = f32Array({10, 3}, x);
  arrays["labels"] = makeArray(DType::I64, {10}, labels.data());
  std::string data = dir.file("eval.npz");
  ASSERT_TRUE(writeNpz(data, arrays, nullptr));
  EvalResult result;
  ASSERT_TRUE(
      evaluate(*artifact, artifact->initialState(), data, 0, &result, &error))
      << error;
  EXPECT_EQ(result.samples, 8);
  EXPECT_EQ(result.counted, 7);
  ASSERT_TRUE(result.haveAccuracy);
  EXPECT_DOUBLE_EQ(result.accuracy, 5.0 / 7.0);
  ASSERT_TRUE(result.haveLoss);
  EXPECT_DOUBLE_EQ(result.loss, (9.0 + 2.0) / 2);

  // Labels of the wrong shape are refused with both shapes.
  arrays["labels"] = makeArray(DType::I64, {10, 3}, nullptr);
  ASSERT_TRUE(writeNpz(data, arrays, nullptr));
  EXPECT_FALSE(
      evaluate(*artifact, artifact->initialState(), data, 0, &result, &error));
  EXPECT_NE(error.find("array 'labels' is i64 [10, 3], expected i64 [N]"),
            std::string::npos)
      << error;
}

} // namespace
} // namespace loomrt::test
