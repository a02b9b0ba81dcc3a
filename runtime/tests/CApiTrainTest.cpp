//===- CApiTrainTest.cpp - The C API's training calls (loomrt_train_*) ----===//
//
// On the hand-built regression artifact of Fixtures.h: in-memory data,
// training in several runs against one, the metrics callback, state
// tensors, checkpoints and the errors a caller can make.
//
//===----------------------------------------------------------------------===//

#include "Fixtures.h"

#include "loomrt/Trainer.h"
#include "loomrt/loomrt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace loomrt::test {
namespace {

/// y = x . [1, -2, 3, 0.5] + 0.25, as writeRegressionData, in memory.
struct Data {
  explicit Data(int64_t samples) : n(samples) {
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const float w[kFeatures] = {1.0f, -2.0f, 3.0f, 0.5f};
    x.resize(static_cast<size_t>(n * kFeatures));
    y.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.25f;
      for (int j = 0; j < kFeatures; ++j)
        acc += w[j] * (x[i * kFeatures + j] = u(rng));
      y[i] = acc;
    }
    xShape = {n, kFeatures};
    yShape = {n, 1};
  }
  loomrt_tensor tensor(const char *name) {
    bool isX = name[0] == 'x';
    std::vector<float> &v = isX ? x : y;
    return loomrt_tensor{name,     LOOMRT_DTYPE_F32,
                         2,        isX ? xShape.data() : yShape.data(),
                         v.data(), v.size() * sizeof(float)};
  }
  int64_t n;
  std::vector<float> x, y;
  std::vector<int64_t> xShape, yShape;
};

class CApiTrainTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    std::string artifactDir = dir.file("model.loom");
    std::filesystem::create_directories(artifactDir);
    ASSERT_TRUE(writeRegressionArtifact(artifactDir, /*withSeed=*/true));
    ASSERT_EQ(loomrt_artifact_load(artifactDir.c_str(), &artifact), LOOMRT_OK)
        << loomrt_last_error();
  }
  void TearDown() override { loomrt_artifact_free(artifact); }

  /// A trainer on `data` for `steps` steps.
  loomrt_trainer *trainer(Data &data, int64_t steps) {
    loomrt_trainer *t = nullptr;
    EXPECT_EQ(loomrt_train_create(artifact, &t), LOOMRT_OK);
    loomrt_tensor x = data.tensor("x"), y = data.tensor("y");
    EXPECT_EQ(loomrt_train_add_array(t, 0, &x), LOOMRT_OK)
        << loomrt_last_error();
    EXPECT_EQ(loomrt_train_add_array(t, 0, &y), LOOMRT_OK);
    setSteps(t, steps);
    return t;
  }
  static void setSteps(loomrt_trainer *t, int64_t steps) {
    EXPECT_EQ(
        loomrt_train_set_option(t, "steps", std::to_string(steps).c_str()),
        LOOMRT_OK);
  }
  /// State tensor `name`'s values.
  static std::vector<float> values(const loomrt_trainer *t,
                                   const std::string &name) {
    size_t count = 0;
    EXPECT_EQ(loomrt_train_num_tensors(t, &count), LOOMRT_OK);
    for (size_t i = 0; i < count; ++i) {
      loomrt_tensor info;
      EXPECT_EQ(loomrt_train_tensor(t, i, &info, nullptr), LOOMRT_OK);
      if (name == info.name) {
        const float *p = static_cast<const float *>(info.data);
        return std::vector<float>(p, p + info.nbytes / 4);
      }
    }
    ADD_FAILURE() << "no tensor " << name;
    return {};
  }

  TempDir dir;
  loomrt_artifact *artifact = nullptr;
};

/// Collects the metrics lines; stops after `stopAt` lines if positive.
struct Collected {
  std::vector<std::string> lines;
  size_t stopAt = 0;
  static int callback(void *user, const char *json) {
    auto *self = static_cast<Collected *>(user);
    self->lines.push_back(json);
    return self->stopAt && self->lines.size() >= self->stopAt;
  }
};

TEST_F(CApiTrainTest, TrainsOnArraysInMemoryAndReportsEachStep) {
  Data data(20);
  loomrt_trainer *t = trainer(data, 60);
  Collected seen;
  ASSERT_EQ(loomrt_train_set_callback(t, &Collected::callback, &seen),
            LOOMRT_OK);
  std::vector<float> w0 = values(t, "w");
  ASSERT_EQ(w0, std::vector<float>(4, 0.0f));
  ASSERT_EQ(loomrt_train_run(t), LOOMRT_OK) << loomrt_last_error();

  loomrt_train_summary s;
  ASSERT_EQ(loomrt_train_summary_get(t, &s), LOOMRT_OK);
  EXPECT_EQ(s.start_step, 0);
  EXPECT_EQ(s.step, 60);
  EXPECT_LT(s.last_loss, 0.05);
  ASSERT_EQ(seen.lines.size(), 60u);
  EXPECT_EQ(seen.lines[0].rfind("{\"step\": 1, \"loss\": ", 0), 0u)
      << seen.lines[0];
  EXPECT_EQ(seen.lines[59].back(), '}');
  double first = std::stod(seen.lines[0].substr(20));
  EXPECT_GT(first, 10 * s.last_loss);
  std::vector<float> w = values(t, "w");
  EXPECT_NEAR(w[0], 1.0f, 0.3f);
  EXPECT_NEAR(w[1], -2.0f, 0.3f);

  // Kinds: params and optimizer state.
  size_t count = 0;
  ASSERT_EQ(loomrt_train_num_tensors(t, &count), LOOMRT_OK);
  ASSERT_EQ(count, 4u);
  loomrt_tensor info;
  loomrt_binding_kind kind;
  ASSERT_EQ(loomrt_train_tensor(t, 0, &info, &kind), LOOMRT_OK);
  EXPECT_STREQ(info.name, "b");
  EXPECT_EQ(kind, LOOMRT_BINDING_PARAM);
  ASSERT_EQ(loomrt_train_tensor(t, 1, &info, &kind), LOOMRT_OK);
  EXPECT_STREQ(info.name, "b.momentum");
  EXPECT_EQ(kind, LOOMRT_BINDING_STATE);
  EXPECT_EQ(loomrt_train_tensor(t, 4, &info, &kind),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  loomrt_train_free(t);
}

TEST_F(CApiTrainTest, SeveralRunsEqualOneRunBitwise) {
  Data data(20);
  loomrt_trainer *one = trainer(data, 24);
  ASSERT_EQ(loomrt_train_run(one), LOOMRT_OK) << loomrt_last_error();
  loomrt_trainer *three = trainer(data, 5);
  ASSERT_EQ(loomrt_train_run(three), LOOMRT_OK);
  setSteps(three, 13);
  ASSERT_EQ(loomrt_train_run(three), LOOMRT_OK);
  setSteps(three, 24);
  ASSERT_EQ(loomrt_train_run(three), LOOMRT_OK);
  loomrt_train_summary s;
  ASSERT_EQ(loomrt_train_summary_get(three, &s), LOOMRT_OK);
  EXPECT_EQ(s.start_step, 13);
  EXPECT_EQ(s.step, 24);
  for (const char *name : {"w", "b", "w.momentum", "b.momentum"})
    EXPECT_EQ(values(one, name), values(three, name)) << name;
  loomrt_train_free(one);
  loomrt_train_free(three);
}

TEST_F(CApiTrainTest, TheCallbackStopsTrainingAndTheStateIsKept) {
  Data data(20);
  loomrt_trainer *t = trainer(data, 50);
  Collected seen;
  seen.stopAt = 7;
  ASSERT_EQ(loomrt_train_set_callback(t, &Collected::callback, &seen),
            LOOMRT_OK);
  EXPECT_EQ(loomrt_train_run(t), LOOMRT_ERROR_CANCELLED);
  EXPECT_NE(std::string(loomrt_last_error()).find("at step 7"),
            std::string::npos)
      << loomrt_last_error();
  loomrt_train_summary s;
  ASSERT_EQ(loomrt_train_summary_get(t, &s), LOOMRT_OK);
  EXPECT_EQ(s.step, 7);
  EXPECT_NE(values(t, "w"), std::vector<float>(4, 0.0f));
  // Without the callback it goes on from step 7.
  ASSERT_EQ(loomrt_train_set_callback(t, nullptr, nullptr), LOOMRT_OK);
  ASSERT_EQ(loomrt_train_run(t), LOOMRT_OK);
  ASSERT_EQ(loomrt_train_summary_get(t, &s), LOOMRT_OK);
  EXPECT_EQ(s.start_step, 7);
  EXPECT_EQ(s.step, 50);
  loomrt_train_free(t);
}

TEST_F(CApiTrainTest, CheckpointsRoundTripAndResumeTheSameSteps) {
  Data data(20);
  loomrt_trainer *a = trainer(data, 10);
  ASSERT_EQ(loomrt_train_run(a), LOOMRT_OK);
  std::string ckpt = dir.file("ckpt-10.safetensors");
  ASSERT_EQ(loomrt_train_save_checkpoint(a, ckpt.c_str()), LOOMRT_OK)
      << loomrt_last_error();
  setSteps(a, 20);
  ASSERT_EQ(loomrt_train_run(a), LOOMRT_OK);

  loomrt_trainer *b = trainer(data, 20);
  ASSERT_EQ(loomrt_train_load_checkpoint(b, ckpt.c_str()), LOOMRT_OK)
      << loomrt_last_error();
  loomrt_train_summary s;
  ASSERT_EQ(loomrt_train_summary_get(b, &s), LOOMRT_OK);
  EXPECT_EQ(s.step, 10);
  ASSERT_EQ(loomrt_train_run(b), LOOMRT_OK);
  EXPECT_EQ(values(a, "w"), values(b, "w"));
  EXPECT_EQ(values(a, "b.momentum"), values(b, "b.momentum"));
  // A directory means its newest checkpoint; a missing file is an I/O error.
  EXPECT_EQ(loomrt_train_load_checkpoint(b, dir.path().c_str()), LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(loomrt_train_load_checkpoint(b, dir.file("nope").c_str()),
            LOOMRT_ERROR_IO);
  loomrt_train_free(a);
  loomrt_train_free(b);
}

TEST_F(CApiTrainTest, SetTensorReplacesParametersAndChecksTheirType) {
  Data data(20);
  loomrt_trainer *t = trainer(data, 0);
  float w[4] = {1, -2, 3, 0.5f};
  int64_t shape[2] = {4, 1};
  loomrt_tensor value{"w", LOOMRT_DTYPE_F32, 2, shape, w, sizeof w};
  ASSERT_EQ(loomrt_train_set_tensor(t, &value), LOOMRT_OK);
  EXPECT_EQ(values(t, "w"), std::vector<float>(w, w + 4));

  int64_t wrong[2] = {2, 2};
  value.shape = wrong;
  EXPECT_EQ(loomrt_train_set_tensor(t, &value), LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(loomrt_last_error(),
               "loomrt_train_set_tensor: 'w' is f32 [2, 2], the artifact's "
               "param is f32 [4, 1]");
  value.shape = shape;
  value.name = "nope";
  EXPECT_EQ(loomrt_train_set_tensor(t, &value), LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(loomrt_last_error()).find("'nope' is not a param"),
            std::string::npos);
  loomrt_train_free(t);
}

TEST_F(CApiTrainTest, EvaluatesOnArraysInMemory) {
  Data data(20);
  loomrt_trainer *t = trainer(data, 40);
  loomrt_tensor x = data.tensor("x"), y = data.tensor("y");
  ASSERT_EQ(loomrt_train_add_array(t, 1, &x), LOOMRT_OK);
  ASSERT_EQ(loomrt_train_add_array(t, 1, &y), LOOMRT_OK);
  double before = 0, after = 0, accuracy = 0;
  int64_t samples = 0;
  ASSERT_EQ(loomrt_train_evaluate(t, &before, &accuracy, &samples), LOOMRT_OK)
      << loomrt_last_error();
  EXPECT_EQ(samples, 16);            // two full batches of 8
  EXPECT_TRUE(std::isnan(accuracy)); // no predict entry
  ASSERT_EQ(loomrt_train_run(t), LOOMRT_OK);
  ASSERT_EQ(loomrt_train_evaluate(t, &after, nullptr, nullptr), LOOMRT_OK);
  EXPECT_LT(after, before / 10);
  loomrt_train_free(t);
}

TEST_F(CApiTrainTest, BadOptionsAndDataAreRefusedWithAMessage) {
  loomrt_trainer *t = nullptr;
  ASSERT_EQ(loomrt_train_create(artifact, &t), LOOMRT_OK);
  EXPECT_EQ(loomrt_train_set_option(t, "stepz", "3"),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(loomrt_last_error()).find("unknown option 'stepz'"),
            std::string::npos);
  EXPECT_EQ(loomrt_train_set_option(t, "steps", "3x"),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(loomrt_last_error(), "loomrt_train_set_option: steps='3x': "
                                    "expected a non-negative integer");
  EXPECT_EQ(loomrt_train_set_option(t, "accumulate", "0"),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loomrt_train_set_option(t, "progress", "loud"),
            LOOMRT_ERROR_INVALID_ARGUMENT);

  // No data at all, then x of the wrong shape.
  ASSERT_EQ(loomrt_train_set_option(t, "steps", "3"), LOOMRT_OK);
  EXPECT_EQ(loomrt_train_run(t), LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(loomrt_last_error()).find("training needs"),
            std::string::npos);
  Data data(20);
  std::vector<int64_t> bad = {10, 8};
  loomrt_tensor x = data.tensor("x"), y = data.tensor("y");
  x.shape = bad.data();
  ASSERT_EQ(loomrt_train_add_array(t, 0, &x), LOOMRT_OK);
  ASSERT_EQ(loomrt_train_add_array(t, 0, &y), LOOMRT_OK);
  EXPECT_EQ(loomrt_train_run(t), LOOMRT_ERROR_FORMAT);
  EXPECT_NE(std::string(loomrt_last_error())
                .find("the training data: array 'x' is f32 [10, 8], "
                      "expected f32 [N, 4]"),
            std::string::npos)
      << loomrt_last_error();
  // An array whose byte count disagrees with its shape.
  x.shape = data.xShape.data();
  x.nbytes = 12;
  EXPECT_EQ(loomrt_train_add_array(t, 0, &x), LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(loomrt_last_error(), "loomrt_train_add_array: array 'x' is "
                                    "f32 [20, 4] but has 12 bytes");
  EXPECT_EQ(loomrt_train_create(nullptr, &t), LOOMRT_ERROR_INVALID_ARGUMENT);
  loomrt_train_free(t);
}

TEST_F(CApiTrainTest, InputKindsComeFromThePlan) {
  loomrt_binding_kind kind;
  ASSERT_EQ(loomrt_artifact_input_kind(artifact, "train_step", 0, &kind),
            LOOMRT_OK);
  EXPECT_EQ(kind, LOOMRT_BINDING_INPUT);
  ASSERT_EQ(loomrt_artifact_input_kind(artifact, "train_step", 2, &kind),
            LOOMRT_OK);
  EXPECT_EQ(kind, LOOMRT_BINDING_PARAM);
  ASSERT_EQ(loomrt_artifact_output_kind(artifact, "forward_backward", 1, &kind),
            LOOMRT_OK);
  EXPECT_EQ(kind, LOOMRT_BINDING_GRAD);
  EXPECT_EQ(loomrt_artifact_input_kind(artifact, "train_step", 99, &kind),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(loomrt_artifact_input_kind(artifact, "nope", 0, &kind),
            LOOMRT_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(loomrt_status_string(LOOMRT_ERROR_CANCELLED),
               "LOOMRT_ERROR_CANCELLED");
  EXPECT_STREQ(loomrt_status_string(LOOMRT_ERROR_NON_FINITE),
               "LOOMRT_ERROR_NON_FINITE");
}

} // namespace
} // namespace loomrt::test
