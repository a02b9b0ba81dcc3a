//===- ArtifactTest.cpp - Loading artifacts and running their entries -----===//

#include "Fixtures.h"

#include "loomrt/Artifact.h"

#include <gtest/gtest.h>

#include <cstring>

namespace loomrt::test {
namespace {

/// An entry `bgemm` in f64: c_i = a_i^T . b^T for a batch of 2, b shared.
EntryBuilder batchedEntry() {
  EntryBuilder e("bgemm");
  int a = e.buffer("f64", {2, 3, 2}); // per batch: k x m = 3 x 2
  int b = e.buffer("f64", {2, 3});    // shared: n x k = 2 x 3
  int c = e.buffer("f64", {2, 2, 2});
  e.input("a", "input", a);
  e.input("b", "input", b);
  e.gemm(a, b, c, 2, 2, 2, 3, true, true, 6, 0, 4);
  e.output("c", "output", c);
  return e;
}

TEST(Artifact, RunsGemmKernelAndCopy) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeBytes(dir.file("plan.json"),
             planJson({mainEntry(), batchedEntry()}, "\"kernels.so\"", "null",
                      ", \"source_model\": \"/models/m.onnx\""));
  ASSERT_TRUE(installKernels(dir.path()));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  EXPECT_EQ(artifact->sourceModel(), "/models/m.onnx");
  EXPECT_EQ(artifact->entryNames(),
            (std::vector<std::string>{"main", "bgemm"}));

  std::vector<float> av = {1, -2, 3, 0.5f, 4, -1};
  std::vector<float> bv = {2, 1, 0, -1, 1, 3};
  std::vector<float> biasv = {0.5f, -20, 1, 2};
  NpyArray a = f32Array({2, 3}, av), b = f32Array({3, 2}, bv),
           bias = f32Array({2, 2}, biasv);
  std::vector<NpyArray> outputs;
  ASSERT_TRUE(artifact->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}},
                            &outputs, &error))
      << error;
  ASSERT_EQ(outputs.size(), 2u);
  std::vector<float> expected(4);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      float acc = 0;
      for (int k = 0; k < 3; ++k)
        acc += av[i * 3 + k] * bv[k * 2 + j];
      acc += biasv[i * 2 + j];
      expected[i * 2 + j] = acc > 0 ? acc : 0;
    }
  EXPECT_EQ(outputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f32Values(outputs[0]), expected);
  EXPECT_EQ(outputs[1].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(f32Values(outputs[1]), expected);

  // Runs again on the same arena with other values.
  biasv = {100, 100, 100, 100};
  bias = f32Array({2, 2}, biasv);
  ASSERT_TRUE(artifact->run("main", {{"a", &a}, {"b", &b}, {"bias", &bias}},
                            &outputs, &error));
  EXPECT_GT(f32Values(outputs[0])[1], 99.0f);

  // Batched, transposed, f64, shared B.
  std::vector<double> ad(12), bd(6);
  for (int i = 0; i < 12; ++i)
    ad[i] = 0.5 * i - 2;
  for (int i = 0; i < 6; ++i)
    bd[i] = 1.5 - i;
  NpyArray a64 = makeArray(DType::F64, {2, 3, 2}, ad.data());
  NpyArray b64 = makeArray(DType::F64, {2, 3}, bd.data());
  ASSERT_TRUE(
      artifact->run("bgemm", {{"a", &a64}, {"b", &b64}}, &outputs, &error))
      << error;
  std::vector<double> got(8);
  std::memcpy(got.data(), outputs[0].data.data(), 64);
  for (int p = 0; p < 2; ++p)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        double acc = 0;
        for (int k = 0; k < 3;
             ++k) // a_p^T[i][k] = a_p[k][i]; b^T[k][j] = b[j][k]
          acc += ad[p * 6 + k * 2 + i] * bd[j * 3 + k];
        EXPECT_DOUBLE_EQ(got[p * 4 + i * 2 + j], acc) << p << i << j;
      }
}

TEST(Artifact, RunChecksInputs) {
  TempDir dir;
  writeBytes(dir.file("plan.json"),
             planJson({mainEntry()}, "\"kernels.so\"", "null"));
  ASSERT_TRUE(installKernels(dir.path()));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  NpyArray a = f32Array({2, 3}, std::vector<float>(6, 1.0f));
  NpyArray b = f32Array({3, 2}, std::vector<float>(6, 1.0f));
  NpyArray bias = f32Array({2, 2}, std::vector<float>(4, 1.0f));
  NpyArray wrong = makeArray(DType::F64, {2, 3}, nullptr);
  std::vector<NpyArray> out;
  ErrorCode code;

  EXPECT_FALSE(artifact->run("main",
                             {{"a", &wrong}, {"b", &b}, {"bias", &bias}}, &out,
                             &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_NE(error.find("input 'a': expected f32 [2, 3], got f64 [2, 3]"),
            std::string::npos)
      << error;

  NpyArray transposed = f32Array({3, 2}, std::vector<float>(6, 1.0f));
  EXPECT_FALSE(artifact->run(
      "main", {{"a", &transposed}, {"b", &b}, {"bias", &bias}}, &out, &error));
  EXPECT_NE(error.find("expected f32 [2, 3], got f32 [3, 2]"),
            std::string::npos)
      << error;

  EXPECT_FALSE(artifact->run("main", {{"a", &a}, {"b", &b}}, &out, &error));
  EXPECT_NE(error.find("missing input 'bias'"), std::string::npos) << error;

  EXPECT_FALSE(artifact->run(
      "main", {{"a", &a}, {"b", &b}, {"bias", &bias}, {"extra", &a}}, &out,
      &error));
  EXPECT_NE(error.find("unknown input 'extra'"), std::string::npos) << error;

  EXPECT_FALSE(artifact->run("nope", {{"a", &a}}, &out, &error));
  EXPECT_NE(error.find("no entry 'nope'"), std::string::npos) << error;
}

} // namespace
} // namespace loomrt::test

namespace loomrt::test {
namespace {

// An arena no machine can back fails at the first run with a message, not
// with the OOM killer.
TEST(Artifact, ImpossibleArenaFailsCleanly) {
  TempDir dir;
  EntryBuilder e("main");
  int a = e.buffer("f32", {4});
  e.input("a", "input", a);
  e.output("a", "output", a);
  std::string plan = planJson({e}, "null", "null");
  plan.replace(plan.find("\"arena_bytes\": 64"), 17,
               "\"arena_bytes\": 1152921504606846976");
  writeBytes(dir.file("plan.json"), plan);
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  NpyArray x = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  ErrorCode code;
  EXPECT_FALSE(artifact->run("main", {{"a", &x}}, &out, &error, &code));
  EXPECT_EQ(code, ErrorCode::OutOfMemory);
  EXPECT_NE(error.find("cannot allocate an arena of 1152921504606846976 bytes"),
            std::string::npos)
      << error;
}

/// State updated in place (the regression artifact's train_step and
/// apply_optimizer write w, b and their momenta over their inputs) lives in
/// the running entry's arena and moves between entries: a resident sequence
/// of train_step, apply_optimizer and train_step again, with forward runs
/// reading the state in between, gives bitwise the state and losses of the
/// same sequence run plainly with every tensor passed in and out.
TEST(Artifact, ResidentStateUpdatedInPlaceMatchesPlainRuns) {
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(writeRegressionArtifact(dir.path()));
  std::string error;
  std::unique_ptr<Artifact> resident = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(resident) << error;
  std::unique_ptr<Artifact> plain = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(plain) << error;

  std::vector<float> xv(kBatch * kFeatures), yv(kBatch), gv = {0.5f, -1, 2,
                                                              0.25f};
  for (size_t i = 0; i < xv.size(); ++i)
    xv[i] = static_cast<float>((i * 7) % 5) - 2.0f;
  for (size_t i = 0; i < yv.size(); ++i)
    yv[i] = static_cast<float>(i) * 0.5f - 1.0f;
  NpyArray x = f32Array({kBatch, kFeatures}, xv), y = f32Array({kBatch, 1}, yv);
  NpyArray gw = f32Array({kFeatures, 1}, gv), gb = f32Array({1}, {0.75f});
  int64_t zero = 0;
  NpyArray step = makeArray(DType::I64, {}, &zero);
  std::map<std::string, NpyArray> state = {
      {"w", f32Array({kFeatures, 1}, {0.1f, 0.2f, -0.3f, 0.4f})},
      {"b", f32Array({1}, {0.5f})},
      {"w.momentum", f32Array({kFeatures, 1}, {0, 0.1f, 0, -0.1f})},
      {"b.momentum", f32Array({1}, {0.2f})}};
  ASSERT_TRUE(resident->setResidentState(state, &error)) << error;

  // The plain run: every param and state tensor in, the new values out.
  auto plainRun = [&](const std::string &entry,
                      std::map<std::string, const NpyArray *> inputs) {
    const PlanEntry *e = nullptr;
    for (const PlanEntry &pe : plain->plan().entries)
      if (pe.name == entry)
        e = &pe;
    for (const Binding &in : e->inputs)
      if (state.count(in.name))
        inputs[in.name] = &state.at(in.name);
    std::vector<NpyArray> outs, kept;
    EXPECT_TRUE(plain->run(entry, inputs, &outs, &error)) << error;
    if (outs.size() != e->outputs.size())
      return kept;
    for (size_t i = 0; i < outs.size(); ++i)
      if (state.count(e->outputs[i].name) &&
          e->outputs[i].kind == BindingKind::Output)
        state[e->outputs[i].name] = outs[i];
      else
        kept.push_back(outs[i]);
    return kept; // the outputs that are not state (loss, step, lr)
  };
  auto residentRun = [&](const std::string &entry,
                         std::vector<TensorRef> inputs) {
    std::vector<NpyArray> outs;
    EXPECT_TRUE(resident->runResident(entry, inputs, &outs, &error)) << error;
    outs.resize(4); // (indexed below even after a failure)
    return outs;
  };
  auto residentState = [&] {
    std::map<std::string, NpyArray> now;
    EXPECT_TRUE(resident->readResidentState(&now, &error)) << error;
    return now;
  };
  auto expectSameState = [&](const char *when) {
    std::map<std::string, NpyArray> now = residentState();
    for (auto &[name, t] : state)
      EXPECT_EQ(now.at(name).data, t.data) << name << " " << when;
  };
  std::vector<TensorRef> stepInputs = {tensorRef("x", x), tensorRef("y", y),
                                       tensorRef("step", step)};
  for (int i = 0; i < 3; ++i) {
    std::vector<NpyArray> r = residentRun("train_step", stepInputs);
    std::vector<NpyArray> p =
        plainRun("train_step", {{"x", &x}, {"y", &y}, {"step", &step}});
    ASSERT_FALSE(p.empty());
    EXPECT_EQ(r[0].data, p[0].data) << "loss of step " << i;
    expectSameState("after train_step");
    // Another entry reads the state where it lives now.
    std::vector<NpyArray> rf =
        residentRun("forward", {tensorRef("x", x), tensorRef("y", y)});
    std::vector<NpyArray> pf = plainRun("forward", {{"x", &x}, {"y", &y}});
    ASSERT_FALSE(pf.empty());
    EXPECT_EQ(rf[0].data, pf[0].data);
  }
  // The state moves to apply_optimizer's arena, and back.
  residentRun("apply_optimizer", {tensorRef("step", step), tensorRef("w.grad", gw),
                                  tensorRef("b.grad", gb)});
  plainRun("apply_optimizer",
           {{"step", &step}, {"w.grad", &gw}, {"b.grad", &gb}});
  expectSameState("after apply_optimizer");
  residentRun("train_step", stepInputs);
  plainRun("train_step", {{"x", &x}, {"y", &y}, {"step", &step}});
  expectSameState("after train_step again");
  // Setting the state again writes where it lives now.
  ASSERT_TRUE(resident->setResidentState(state, &error)) << error;
  expectSameState("after setResidentState");
}

} // namespace
} // namespace loomrt::test
