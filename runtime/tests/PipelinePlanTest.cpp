//===- PipelinePlanTest.cpp - plan.json's `pipeline`, and one-rank pipelines
//
// docs/pipeline.md, "In plan.json" and "Running", in one process: what the
// loader accepts, the message of each refusal (a schedule that would
// deadlock, a missing or mismatched stage entry, a tensor of two stages,
// a collective over the pipeline axis, a malformed `shared`), and
// training a pipeline of one rank with two stages (the local hand-off, B
// and I/W lists) against the same model trained by one artifact with
// --accumulate M, bit for bit (to rounding with a param both stages
// read), with checkpoints that move between the two. The runs over
// several ranks are PipelineMpiTest.cpp's.
//
//===----------------------------------------------------------------------===//

#include "CudaFixtures.h"
#include "PipelineFixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"
#include "loomrt/Trainer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <tuple>

namespace loomrt::test {
namespace {

std::string replaceEvery(std::string text, const std::string &from,
                       const std::string &to) {
  size_t at = 0, n = 0;
  while ((at = text.find(from, at)) != std::string::npos) {
    text.replace(at, from.size(), to);
    at += to.size();
    ++n;
  }
  EXPECT_GT(n, 0u) << "fixture lacks: " << from;
  return text;
}

std::string refusal(const std::string &text) {
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(parsePlan(text, "plan.json", &error, &code)) << "accepted:\n"
                                                            << text;
  EXPECT_EQ(code, ErrorCode::Format);
  return error;
}

std::optional<Plan> accepted(const std::string &text) {
  std::string error;
  std::optional<Plan> plan = parsePlan(text, "plan.json", &error);
  EXPECT_TRUE(plan) << error << "\n" << text;
  return plan;
}

#define EXPECT_HAS(message, text)                                              \
  EXPECT_NE((message).find(text), std::string::npos) << "message: " << (message)

TEST(PipelinePlan, AcceptsStagesBoundariesAndActions) {
  ChainPipeline p; // 2 ranks, 1f1b, 4 micro-batches
  std::optional<Plan> plan = accepted(p.plan());
  ASSERT_TRUE(plan && plan->pipeline);
  const PlanPipeline &pipe = *plan->pipeline;
  EXPECT_EQ(pipe.axis, "pp");
  EXPECT_EQ(pipe.axisIndex, 0u);
  EXPECT_EQ(pipe.ranks, 2);
  EXPECT_EQ(pipe.stages, 2);
  EXPECT_EQ(pipe.virtualStages, 1);
  EXPECT_EQ(pipe.microbatches, 4);
  EXPECT_EQ(pipe.schedule.name, "1f1b");
  ASSERT_EQ(pipe.boundaries.size(), 1u);
  ASSERT_EQ(pipe.boundaries[0].size(), 1u);
  EXPECT_EQ(pipe.boundaries[0][0].name, "pp.b0.0");
  EXPECT_EQ(pipe.boundaries[0][0].dtype, "f32");
  EXPECT_EQ(pipe.boundaries[0][0].shape, (std::vector<int64_t>{8, 1}));
  EXPECT_TRUE(pipe.boundaries[0][0].grad);
  EXPECT_EQ(pipe.fullBackward, (std::vector<bool>{true, true}));
  EXPECT_EQ(pipe.splitBackward, (std::vector<bool>{false, false}));
  ASSERT_EQ(pipe.schedule.actions.size(), 2u);
  EXPECT_EQ(pipe.schedule.actions[0].size(), 16u); // F, SF, RB, B x 4
  EXPECT_EQ(pipelineEntryName(3, "backward_input"), "stage3_backward_input");

  // zb-h1's I and W take the split entries.
  p.schedule = "zb-h1";
  plan = accepted(p.plan());
  ASSERT_TRUE(plan && plan->pipeline);
  EXPECT_EQ(plan->pipeline->splitBackward, (std::vector<bool>{true, true}));
  EXPECT_TRUE(plan->findEntry("stage0_backward_weight"));
  // `schedule` is informational and optional.
  plan = accepted(replaceEvery(p.plan(), "\"schedule\": \"zb-h1\",", ""));
  ASSERT_TRUE(plan && plan->pipeline);
  EXPECT_EQ(plan->pipeline->schedule.name, "file");
}

TEST(PipelinePlan, RefusesAScheduleThatWouldDeadlock) {
  ChainPipeline p;
  p.microbatches = 1;
  // Rank 0 waits for the gradient before it sends the activation.
  p.actions = {tokens("F0.0 RB0.0 SF0.0 B0.0"),
               tokens("RF1.0 F1.0 B1.0 SB1.0")};
  pp::Schedule s;
  s.name = "file";
  s.ranks = 2;
  s.stages = 2;
  s.microbatches = 1;
  for (const auto &list : p.actions) {
    s.actions.emplace_back();
    for (const std::string &t : list) {
      pp::Action a;
      std::string why;
      ASSERT_TRUE(pp::parseAction(t, &a, &why)) << why;
      s.actions.back().push_back(a);
    }
  }
  std::string checker;
  ASSERT_FALSE(pp::checkSchedule(s, {{{"pp.b0.0", "f32", {8, 1}, true}}},
                                 nullptr, &checker));
  EXPECT_EQ(refusal(p.plan()),
            "plan.json: pipeline: field 'actions': " + checker);
}

TEST(PipelinePlan, RefusesMalformedActions) {
  ChainPipeline p;
  p.microbatches = 1;
  p.actions = {tokens("F0.0 SF0.0 RB0.0 X0.0"),
               tokens("RF1.0 F1.0 B1.0 SB1.0")};
  EXPECT_HAS(refusal(p.plan()),
             "plan.json: pipeline: field 'actions': rank 0: step 3: ");
  p.actions = {tokens("F0.0 SF0.0 RB0.0 B0.7"),
               tokens("RF1.0 F1.0 B1.0 SB1.0")};
  EXPECT_HAS(refusal(p.plan()), "plan.json: pipeline: field 'actions': rank "
                                "0: step 3: ");
  p.actions = {tokens("F0.0 SF0.0 RB0.0 B0.0")};
  EXPECT_HAS(refusal(p.plan()),
             "plan.json: pipeline: field 'actions': expected 2 lists (one per "
             "rank of mesh axis 'pp'), got 1");
}

TEST(PipelinePlan, RefusesFieldsThatDisagreeWithTheMesh) {
  ChainPipeline p;
  EXPECT_HAS(
      refusal(replaceEvery(p.plan(), "\"axis\": \"pp\"", "\"axis\": \"tp\"")),
      "plan.json: pipeline: field 'axis': 'tp' is not an axis of the "
      "mesh (pp=2)");
  EXPECT_HAS(refusal(replaceEvery(p.plan(), "\"stages\": 2", "\"stages\": 4")),
             "plan.json: pipeline: field 'stages': 4 is not virtual_stages "
             "(1) times the 2 rank(s) of mesh axis 'pp'");
  EXPECT_HAS(refusal(replaceEvery(p.plan(), "\"microbatches\": 4",
                                "\"microbatches\": 0")),
             "plan.json: pipeline: field 'microbatches': expected an integer "
             "from 1 to 65536, got 0");
  EXPECT_HAS(
      refusal(replaceEvery(p.plan(), "\"name\": \"pp.b0.0\"", "\"name\": \"h\"")),
      "plan.json: pipeline: field 'boundaries': boundary 0: tensor 0: "
      "field 'name': expected 'pp.b0.0', got \"h\"");
  EXPECT_HAS(refusal(replaceEvery(p.plan(), "\"grad\": true", "\"grad\": 1")),
             "field 'grad': expected true or false, got integer");
  EXPECT_HAS(refusal(replaceEvery(p.plan(), "\"boundaries\": [[",
                                "\"boundaries\": [[], [")),
             "plan.json: pipeline: field 'boundaries': expected 1 lists "
             "(stages - 1), got 2");
  EXPECT_HAS(
      refusal(planJson(p.entries(), "\"kernels.so\"", "\"params.safetensors\"",
                       p.extra().substr(p.extra().find(", \"pipeline\"")))),
      "plan.json: pipeline: the plan has no mesh");
}

TEST(PipelinePlan, RefusesAMissingStageEntry) {
  ChainPipeline p;
  for (const char *name :
       {"stage1_backward", "stage0_forward", "stage1_apply_gradients"}) {
    std::vector<EntryBuilder> entries;
    const std::string prefix = std::string("{\"name\": \"") + name + "\"";
    for (const EntryBuilder &e : p.entries())
      if (e.json().compare(0, prefix.size(), prefix) != 0)
        entries.push_back(e);
    std::string message = refusal(planJson(
        entries, "\"kernels.so\"", "\"params.safetensors\"", p.extra()));
    EXPECT_HAS(message, std::string("plan.json: pipeline: stage ") + name[5] +
                            " has no entry '" + name + "'");
  }
  // zb-h1 needs the split backwards.
  p.schedule = "zb-h1";
  std::string plan = planJson(ChainPipeline().entries(), "\"kernels.so\"",
                              "\"params.safetensors\"", p.extra());
  EXPECT_HAS(refusal(plan), "plan.json: pipeline: stage 0 has no entry "
                            "'stage0_backward_weight' (its actions have I and "
                            "W)");
  // Stage 0's backward_input is optional (it would return nothing); the
  // other stages' is not.
  std::vector<EntryBuilder> entries;
  for (const EntryBuilder &e : p.entries())
    if (e.json().compare(0, 32, "{\"name\": \"stage1_backward_input\"") != 0)
      entries.push_back(e);
  EXPECT_HAS(refusal(planJson(entries, "\"kernels.so\"",
                              "\"params.safetensors\"", p.extra())),
             "plan.json: pipeline: stage 1 has no entry "
             "'stage1_backward_input' (its actions have I and W)");
  entries = p.entries();
  entries.push_back(chainBackward(0, 2, BackwardKind::Input));
  EXPECT_TRUE(accepted(planJson(entries, "\"kernels.so\"",
                                "\"params.safetensors\"", p.extra())));
}

TEST(PipelinePlan, RefusesStageEntriesThatDisagreeWithTheBoundaries) {
  ChainPipeline p;
  EXPECT_EQ(refusal(replaceEvery(p.plan(), "\"shape\": [8, 1], \"grad\"",
                               "\"shape\": [8, 2], \"grad\"")),
            "plan.json: entry 'stage0_forward': output 0: 'pp.b0.0' is f32 "
            "[8, 1], but boundary 0's tensor 0 is f32 [8, 2]");
  // Stage 1's backward returns no gradient of its input.
  EXPECT_HAS(refusal(replaceEvery(
                 p.plan(), "\"name\": \"pp.b0.0.grad\", \"kind\": \"output\"",
                 "\"name\": \"h.grad\", \"kind\": \"output\"")),
             "plan.json: entry 'stage1_backward': output 2: 'h.grad' is "
             "neither a grad output nor the gradient of a tensor of boundary "
             "0 that carries one");
  // Stage 0's backward takes no output gradient.
  EXPECT_HAS(refusal(replaceEvery(
                 p.plan(), "\"name\": \"pp.b0.0.grad\", \"kind\": \"input\"",
                 "\"name\": \"dh\", \"kind\": \"input\"")),
             "plan.json: entry 'stage0_backward': input 2: 'dh' is not an "
             "input of 'stage0_forward'");
  // Stage 0's update takes no gradient of w0.
  EXPECT_HAS(refusal(replaceEvery(p.plan(), "\"name\": \"w0.grad\"",
                                "\"name\": \"w0.gradient\"")),
             "plan.json: entry 'stage0_apply_gradients': input 2: "
             "'w0.gradient' is neither step, seed nor '<param>.grad' for a "
             "param of 'stage0_forward'");
}

TEST(PipelinePlan, RefusesATensorOfTwoStages) {
  ChainPipeline p;
  p.ranks = 3;
  p.microbatches = 3;
  EXPECT_EQ(refusal(replaceEvery(p.plan(), "w2.momentum", "w1.momentum")),
            "plan.json: pipeline: state 'w1.momentum' is taken by stage 1 "
            "(entry 'stage1_apply_gradients') and stage 2 (entry "
            "'stage2_apply_gradients'): a tensor belongs to one stage");
}

TEST(PipelinePlan, RefusesACollectiveOverThePipelineAxis) {
  ChainPipeline p;
  p.dp = 2;
  EXPECT_EQ(
      refusal(replaceEvery(p.plan(), "\"axis\": \"dp\"", "\"axis\": \"pp\"")),
      "plan.json: entry 'stage0_apply_gradients': step 0 (collective): "
      "communicates over the pipeline axis 'pp', whose other ranks run "
      "other stages");
}

//===----------------------------------------------------------------------===//
// A param shared by stages (`shared`)
//===----------------------------------------------------------------------===//

/// `entries` with the entry named `name` replaced by `with`.
std::vector<EntryBuilder> withEntry(const std::vector<EntryBuilder> &entries,
                                    const std::string &name,
                                    const EntryBuilder &with) {
  std::vector<EntryBuilder> out;
  const std::string prefix = "{\"name\": \"" + name + "\"";
  for (const EntryBuilder &e : entries)
    out.push_back(e.json().compare(0, prefix.size(), prefix) == 0 ? with : e);
  return out;
}

TEST(PipelinePlan, AcceptsASharedParam) {
  ChainPipeline p; // 2 ranks: stages 0 and 1 read `tie`
  p.tied = {0, 1};
  std::optional<Plan> plan = accepted(p.plan());
  ASSERT_TRUE(plan && plan->pipeline);
  ASSERT_EQ(plan->pipeline->shared.size(), 1u);
  EXPECT_EQ(plan->pipeline->shared[0].name, "tie");
  EXPECT_EQ(plan->pipeline->shared[0].stages, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(plan->pipeline->shared[0].owner(), 0);
  EXPECT_TRUE(plan->pipeline->findShared("tie"));
  EXPECT_FALSE(plan->pipeline->findShared("w0"));
  // Three readers over 4 stages, zb-h1's split backwards.
  p.ranks = 4;
  p.tied = {0, 2, 3};
  p.schedule = "zb-h1";
  plan = accepted(p.plan());
  ASSERT_TRUE(plan && plan->pipeline);
  EXPECT_EQ(plan->pipeline->shared[0].stages, (std::vector<int64_t>{0, 2, 3}));
  // `shared` is optional: null is none.
  plan = accepted(replaceEvery(ChainPipeline().plan(), "\"actions\": [",
                               "\"shared\": null, \"actions\": ["));
  ASSERT_TRUE(plan && plan->pipeline);
  EXPECT_TRUE(plan->pipeline->shared.empty());
}

TEST(PipelinePlan, RefusesAMalformedShared) {
  ChainPipeline p;
  p.tied = {0, 1};
  const std::string plan = p.plan(), list = "\"stages\": [0, 1]";
  // Without `shared`, a param of two stages is refused as before.
  EXPECT_EQ(
      refusal(replaceEvery(
          plan, ",\n\"shared\": [{\"name\": \"tie\", " + list + "}]", "")),
      "plan.json: pipeline: param 'tie' is taken by stage 0 (entry "
      "'stage0_forward') and stage 1 (entry 'stage1_forward'): a "
      "tensor belongs to one stage (a param that several stages read "
      "is listed in the pipeline's 'shared')");
  EXPECT_EQ(refusal(replaceEvery(
                plan, "\"shared\": [{\"name\": \"tie\", " + list + "}]",
                "\"shared\": {\"name\": \"tie\", " + list + "}")),
            "plan.json: pipeline: field 'shared': expected an array, got "
            "object");
  EXPECT_EQ(refusal(replaceEvery(plan, "\"name\": \"tie\", \"stages\"",
                                 "\"name\": \"tye\", \"stages\"")),
            "plan.json: pipeline: field 'shared': 'tye' is not a param of any "
            "stage's forward");
  EXPECT_EQ(refusal(replaceEvery(plan, list, "\"stages\": [1, 0]")),
            "plan.json: pipeline: field 'shared': item 0: field 'stages': "
            "'tie': expected strictly increasing stages (the first owns the "
            "param), got [1, 0]");
  EXPECT_EQ(refusal(replaceEvery(plan, list, "\"stages\": [0, 0]")),
            "plan.json: pipeline: field 'shared': item 0: field 'stages': "
            "'tie': expected strictly increasing stages (the first owns the "
            "param), got [0, 0]");
  EXPECT_EQ(refusal(replaceEvery(plan, list, "\"stages\": [0]")),
            "plan.json: pipeline: field 'shared': item 0: field 'stages': "
            "'tie': expected at least 2 stages, got [0]");
  EXPECT_EQ(refusal(replaceEvery(plan, list, "\"stages\": [0, 2]")),
            "plan.json: pipeline: field 'shared': item 0: field 'stages': "
            "item 1: expected a stage from 0 to 1, got 2");
  EXPECT_EQ(
      refusal(replaceEvery(plan, list + "}]",
                           list + "}, {\"name\": \"tie\", " + list + "}]")),
      "plan.json: pipeline: field 'shared': item 1: field 'name': 'tie' is "
      "listed twice (items 0 and 1)");

  // A listed stage that does not read it; a reader not listed.
  ChainPipeline three;
  three.ranks = 3;
  three.microbatches = 3;
  three.tied = {0, 2};
  EXPECT_EQ(refusal(replaceEvery(three.plan(), "\"stages\": [0, 2]",
                                 "\"stages\": [0, 1, 2]")),
            "plan.json: pipeline: field 'shared': 'tie' lists stage 1, whose "
            "entry 'stage1_forward' takes no param 'tie'");
  three.tied = {0, 1, 2};
  EXPECT_EQ(refusal(replaceEvery(three.plan(), "\"stages\": [0, 1, 2]",
                                 "\"stages\": [0, 1]")),
            "plan.json: pipeline: field 'shared': 'tie' is read by stage 2 "
            "(entry 'stage2_forward'), which its stages [0, 1] do not list");

  // Only the owner's apply takes the param, its gradient and its state.
  const std::string notOwner =
      ", shared by stages [0, 1]: only the owner's (stage 0) "
      "apply_gradients takes it, its gradient and its state";
  for (const auto &[name, kind, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tie", "param", "takes the param 'tie'"},
           {"tie.grad", "input",
            "takes 'tie.grad', the gradient of the param 'tie'"},
           {"tie.momentum", "state",
            "takes state 'tie.momentum' of the param 'tie'"}}) {
    EntryBuilder apply = chainApply(1, 2, 1);
    apply.input(name, kind, apply.buffer("f32", {1, 1}));
    EXPECT_EQ(refusal(planJson(
                  withEntry(p.entries(), "stage1_apply_gradients", apply),
                  "\"kernels.so\"", "\"params.safetensors\"", p.extra())),
              "plan.json: entry 'stage1_apply_gradients': input 7: " + message +
                  notOwner)
        << name;
  }
  // The owner's apply updates it.
  EXPECT_EQ(
      refusal(planJson(
          withEntry(p.entries(), "stage0_apply_gradients", chainApply(0, 2, 1)),
          "\"kernels.so\"", "\"params.safetensors\"", p.extra())),
      "plan.json: entry 'stage0_apply_gradients': takes no param 'tie' "
      "of stage 0");
}

//===----------------------------------------------------------------------===//
// Training a pipeline of one rank
//===----------------------------------------------------------------------===//

class PipelineTraining : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    dataPath = dir.file("data.npz");
    ASSERT_TRUE(writeRegressionData(dataPath, 64));
    ASSERT_TRUE(writeChainReferenceArtifact(dir.file("plain.loom"), 2));
    plain = load(dir.file("plain.loom"));
  }

  std::unique_ptr<Artifact> load(const std::string &path) {
    std::string error;
    std::unique_ptr<Artifact> a = Artifact::load(path, &error);
    EXPECT_TRUE(a) << error;
    return a;
  }

  TrainOptions options(int64_t steps, int64_t accumulate = 1) const {
    TrainOptions o;
    o.dataPath = dataPath;
    o.steps = steps;
    o.accumulate = accumulate;
    o.progress = ProgressMode::None;
    return o;
  }

  TrainResult train(Artifact &a, const TrainOptions &o) {
    TrainResult r;
    std::string error;
    EXPECT_TRUE(loomrt::train(a, o, &r, &error)) << error;
    return r;
  }

  TempDir dir;
  std::string dataPath;
  std::unique_ptr<Artifact> plain;
};

void expectSameTensors(const std::map<std::string, NpyArray> &got,
                       const std::map<std::string, NpyArray> &want,
                       const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto &[name, t] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": " << name;
    EXPECT_EQ(it->second.shape, t.shape) << what << ": " << name;
    EXPECT_EQ(it->second.data, t.data) << what << ": bits of " << name;
  }
}

TEST_F(PipelineTraining, OneRankTwoStagesMatchesAccumulate) {
  const int M = 3;
  TrainResult reference = train(*plain, options(6, M));
  ASSERT_EQ(reference.finalStep, 6);
  // The generated interleaved list, a hand-written one with B, and one
  // with I and W: stage 1's outputs reach stage 0 on this rank.
  std::vector<std::vector<std::vector<std::string>>> lists = {
      {},
      {tokens("F0.0 F1.0 F0.1 F1.1 B1.0 B0.0 F0.2 F1.2 B1.1 B0.1 B1.2 B0.2")},
      {tokens("F0.0 F1.0 I1.0 I0.0 F0.1 F1.1 W1.0 I1.1 W0.0 I0.1 W1.1 W0.1 "
              "F0.2 F1.2 I1.2 W1.2 I0.2 W0.2")}};
  for (size_t i = 0; i < lists.size(); ++i) {
    ChainPipeline p;
    p.ranks = 1;
    p.virtualStages = 2;
    p.microbatches = M;
    p.schedule = i == 0 ? "interleaved" : "file";
    p.actions = lists[i];
    std::string path = dir.file("pp" + std::to_string(i) + ".loom");
    ASSERT_TRUE(writeChainPipelineArtifact(path, p));
    std::unique_ptr<Artifact> piped = load(path);
    ASSERT_TRUE(piped);
    TrainOptions o = options(6);
    o.metricsPath = dir.file("metrics" + std::to_string(i) + ".jsonl");
    o.pipelineTracePath = dir.file("trace" + std::to_string(i) + ".jsonl");
    TrainResult result = train(*piped, o);
    std::string what = "list " + std::to_string(i);
    EXPECT_EQ(result.finalStep, 6) << what;
    expectSameTensors(result.tensors, reference.tensors, what);
    EXPECT_EQ(result.lastLoss, reference.lastLoss) << what;
    EXPECT_EQ(result.position.accumulate, M) << what;

    // What the stash held: as the list says; the stash of a micro-batch is
    // x (128 bytes) for stage 0, h and y (32 + 32) for stage 1.
    std::vector<std::string> list = p.lists()[0];
    const PipelineStats &ps = result.pipeline;
    ASSERT_EQ(ps.ranksStats.size(), 1u) << what;
    const PipelineRankStats &r = ps.ranksStats[0];
    EXPECT_EQ(r.stages, (std::vector<int64_t>{0, 1})) << what;
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(r.peakInFlight[size_t(s)], peakInFlight(list, s)) << what;
      EXPECT_EQ(r.peakStashBytes[size_t(s)],
                uint64_t(peakInFlight(list, s)) * (s == 0 ? 128u : 64u))
          << what;
    }
    EXPECT_GE(r.bubble, 0) << what;
    EXPECT_LT(r.bubble, 1) << what;
    EXPECT_EQ(ps.idealBubble, i == 0 ? 0.0 : -1.0) << what;

    // The trace: every action of every step, in order.
    std::ifstream trace(o.pipelineTracePath);
    std::vector<std::string> lines;
    for (std::string line; std::getline(trace, line);)
      lines.push_back(line);
    ASSERT_EQ(lines.size(), 6 * list.size()) << what;
    for (size_t k = 0; k < lines.size(); ++k) {
      EXPECT_HAS(lines[k], "{\"rank\": 0, \"pp\": 0, \"step\": " +
                               std::to_string(k / list.size()) +
                               ", \"action\": \"" + list[k % list.size()] +
                               "\", \"start\": ");
    }
    std::ifstream metrics(o.metricsPath);
    std::vector<std::string> mlines;
    for (std::string line; std::getline(metrics, line);)
      mlines.push_back(line);
    ASSERT_EQ(mlines.size(), 7u) << what;
    EXPECT_HAS(mlines[0], "{\"step\": 1, \"loss\": ");
    EXPECT_HAS(mlines[0], "\"lr\": 0.0500000007");
    EXPECT_HAS(mlines[6], "{\"step\": 6, \"pipeline\": {\"schedule\": \"" +
                              p.schedule +
                              "\", \"ranks\": 1, \"virtual_stages\": 2, "
                              "\"microbatches\": 3, ");
    EXPECT_HAS(mlines[6], "\"peak_in_flight\": ");
  }
}

TEST_F(PipelineTraining, CheckpointsMoveBetweenPipelineAndOneArtifact) {
  const int M = 2;
  ChainPipeline p;
  p.ranks = 1;
  p.virtualStages = 2;
  p.microbatches = M;
  p.schedule = "interleaved";
  ASSERT_TRUE(writeChainPipelineArtifact(dir.file("pp.loom"), p));
  std::unique_ptr<Artifact> piped = load(dir.file("pp.loom"));
  ASSERT_TRUE(piped && plain);
  TrainResult reference = train(*plain, options(6, M));

  // The pipeline's step-3 checkpoint, resumed by the pipeline and by the
  // plain artifact.
  TrainOptions o = options(6);
  o.checkpointDir = dir.file("ckpt-pp");
  o.saveEvery = 3;
  o.saveParamsPath = dir.file("final.safetensors");
  TrainResult straight = train(*piped, o);
  expectSameTensors(straight.tensors, reference.tensors, "straight");
  TrainOptions again = options(6);
  again.resumePath = dir.file("ckpt-pp/") + checkpointFileName(3);
  expectSameTensors(train(*piped, again).tensors, reference.tensors,
                    "pipeline resumed");
  TrainOptions alone = options(6, M);
  alone.resumePath = again.resumePath;
  expectSameTensors(train(*plain, alone).tensors, reference.tensors,
                    "resumed by the plain artifact");

  // The plain artifact's checkpoint into the pipeline.
  TrainOptions half = options(3, M);
  half.checkpointDir = dir.file("ckpt-plain");
  train(*plain, half);
  TrainOptions into = options(6);
  into.resumePath = dir.file("ckpt-plain/") + checkpointFileName(3);
  expectSameTensors(train(*piped, into).tensors, reference.tensors,
                    "plain checkpoint resumed by the pipeline");

  // --save-params: the params (no momentum) of both stages.
  std::string error;
  std::unique_ptr<SafetensorsFile> saved =
      SafetensorsFile::open(o.saveParamsPath, &error);
  ASSERT_TRUE(saved) << error;
  EXPECT_TRUE(saved->find("w0") && saved->find("w1") && saved->find("b"));
  EXPECT_FALSE(saved->find("w0.momentum"));
}

/// The largest |a - b| / max(1, |b|) over the f32 tensors of `want`
/// (infinite where `got` lacks one or its size differs).
double maxRelativeDifference(const std::map<std::string, NpyArray> &got,
                             const std::map<std::string, NpyArray> &want) {
  double worst = 0;
  for (const auto &[name, t] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.data.size() != t.data.size())
      return INFINITY;
    std::vector<float> a = f32Values(it->second), b = f32Values(t);
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, double(std::fabs(a[i] - b[i])) /
                                  std::max(1.0, double(std::fabs(b[i]))));
  }
  return worst;
}

/// A tied pipeline against the tied one-artifact model: the pipeline sums
/// each stage's gradient of `tie` over the micro-batches and then adds the
/// stages' sums, the reference adds the stages' per micro-batch first, so
/// they agree to rounding.
constexpr double kTiedTolerance = 1e-6;

TEST_F(PipelineTraining, OneRankSharedParamMatchesAccumulate) {
  const int M = 3;
  ASSERT_TRUE(
      writeChainReferenceArtifact(dir.file("plain-tied.loom"), 2, {0, 1}));
  std::unique_ptr<Artifact> plainTied = load(dir.file("plain-tied.loom"));
  ASSERT_TRUE(plainTied && plain);
  TrainResult reference = train(*plainTied, options(6, M));
  ASSERT_EQ(reference.finalStep, 6);
  ASSERT_TRUE(reference.tensors.count("tie"));
  // `tie` matters: the untied model ends elsewhere.
  EXPECT_GT(maxRelativeDifference(train(*plain, options(6, M)).tensors,
                                  [&] {
                                    auto t = reference.tensors;
                                    t.erase("tie");
                                    t.erase("tie.momentum");
                                    return t;
                                  }()),
            1e-3);
  std::vector<std::vector<std::vector<std::string>>> lists = {
      {},
      {tokens("F0.0 F1.0 F0.1 F1.1 B1.0 B0.0 F0.2 F1.2 B1.1 B0.1 B1.2 B0.2")},
      {tokens("F0.0 F1.0 I1.0 I0.0 F0.1 F1.1 W1.0 I1.1 W0.0 I0.1 W1.1 W0.1 "
              "F0.2 F1.2 I1.2 W1.2 I0.2 W0.2")}};
  for (size_t i = 0; i < lists.size(); ++i) {
    ChainPipeline p;
    p.ranks = 1;
    p.virtualStages = 2;
    p.microbatches = M;
    p.schedule = i == 0 ? "interleaved" : "file";
    p.actions = lists[i];
    p.tied = {0, 1};
    std::string path = dir.file("pp-tied" + std::to_string(i) + ".loom");
    ASSERT_TRUE(writeChainPipelineArtifact(path, p));
    std::unique_ptr<Artifact> piped = load(path);
    ASSERT_TRUE(piped);
    TrainResult result = train(*piped, options(6));
    std::string what = "tied list " + std::to_string(i);
    EXPECT_EQ(result.finalStep, 6) << what;
    EXPECT_EQ(result.tensors.size(), reference.tensors.size()) << what;
    double worst = maxRelativeDifference(result.tensors, reference.tensors);
    EXPECT_LE(worst, kTiedTolerance) << what;
    EXPECT_NEAR(result.lastLoss, reference.lastLoss,
                kTiedTolerance * std::max(1.0, std::fabs(reference.lastLoss)))
        << what;
    std::printf("%s: max relative difference to one process %g\n", what.c_str(),
                worst);
  }
}

TEST_F(PipelineTraining,
       SharedParamCheckpointsMoveBetweenPipelineAndOneArtifact) {
  const int M = 2;
  ChainPipeline p;
  p.ranks = 1;
  p.virtualStages = 2;
  p.microbatches = M;
  p.schedule = "interleaved";
  p.tied = {0, 1};
  ASSERT_TRUE(writeChainPipelineArtifact(dir.file("pp-tied.loom"), p));
  ASSERT_TRUE(
      writeChainReferenceArtifact(dir.file("plain-tied.loom"), 2, p.tied));
  std::unique_ptr<Artifact> piped = load(dir.file("pp-tied.loom"));
  std::unique_ptr<Artifact> plainTied = load(dir.file("plain-tied.loom"));
  ASSERT_TRUE(piped && plainTied);
  TrainResult reference = train(*plainTied, options(6, M));

  TrainOptions o = options(6);
  o.checkpointDir = dir.file("ckpt-pp-tied");
  o.saveEvery = 3;
  o.saveParamsPath = dir.file("final-tied.safetensors");
  TrainResult straight = train(*piped, o);
  EXPECT_LE(maxRelativeDifference(straight.tensors, reference.tensors),
            kTiedTolerance);
  // The checkpoint holds `tie` and its state once, as one process's does.
  std::string error;
  const std::string ckpt = o.checkpointDir + "/" + checkpointFileName(3);
  std::unique_ptr<SafetensorsFile> file = SafetensorsFile::open(ckpt, &error);
  ASSERT_TRUE(file) << error;
  EXPECT_TRUE(file->find("tie") && file->find("tie.momentum"));
  // Resumed by the pipeline: the bits of the run straight through; by the
  // plain artifact: the reference to rounding.
  TrainOptions again = options(6);
  again.resumePath = ckpt;
  expectSameTensors(train(*piped, again).tensors, straight.tensors,
                    "tied pipeline resumed");
  TrainOptions alone = options(6, M);
  alone.resumePath = ckpt;
  EXPECT_LE(maxRelativeDifference(train(*plainTied, alone).tensors,
                                  reference.tensors),
            kTiedTolerance);
  // One process's checkpoint into the pipeline.
  TrainOptions half = options(3, M);
  half.checkpointDir = dir.file("ckpt-plain-tied");
  train(*plainTied, half);
  TrainOptions into = options(6);
  into.resumePath = dir.file("ckpt-plain-tied/") + checkpointFileName(3);
  EXPECT_LE(
      maxRelativeDifference(train(*piped, into).tensors, reference.tensors),
      kTiedTolerance);
  std::unique_ptr<SafetensorsFile> saved =
      SafetensorsFile::open(o.saveParamsPath, &error);
  ASSERT_TRUE(saved) << error;
  EXPECT_TRUE(saved->find("tie") && saved->find("w0") && saved->find("w1"));
  EXPECT_FALSE(saved->find("tie.momentum"));
}

TEST_F(PipelineTraining, RefusesACudaArtifact) {
  ScopedEnv driver("LOOMRT_CUDA_DRIVER", LOOMRT_FAKE_CUDA_PATH);
  ScopedEnv blasLt("LOOMRT_CUBLASLT_LIBRARY", LOOMRT_FAKE_CUDA_PATH);
  ChainPipeline p;
  p.ranks = 1;
  p.virtualStages = 2;
  p.microbatches = 2;
  p.schedule = "interleaved";
  std::string path = dir.file("pp-cuda.loom"), error;
  ASSERT_TRUE(writeChainPipelineArtifact(path, p));
  ASSERT_TRUE(makeFakeCudaArtifact(path, &error)) << error;
  std::unique_ptr<Artifact> cuda = load(path);
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->target(), "cuda");
  TrainResult r;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(loomrt::train(*cuda, options(2), &r, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_HAS(error, "pipeline-parallel training runs cpu artifacts for now; "
                    "this artifact's target is 'cuda'");
}

TEST_F(PipelineTraining, RefusesWhatItDoesNotRun) {
  ChainPipeline p; // 2 ranks
  ASSERT_TRUE(writeChainPipelineArtifact(dir.file("pp2.loom"), p));
  std::unique_ptr<Artifact> two = load(dir.file("pp2.loom"));
  ASSERT_TRUE(two);
  TrainResult r;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(loomrt::train(*two, options(2), &r, &error, &code));
  EXPECT_EQ(error, "the artifact was compiled for 2 ranks (mesh pp=2); this "
                   "run has 1 process: launch it with mpirun -np 2");

  p.ranks = 1;
  p.virtualStages = 2;
  p.microbatches = 2;
  p.schedule = "interleaved";
  ASSERT_TRUE(writeChainPipelineArtifact(dir.file("pp1.loom"), p));
  std::unique_ptr<Artifact> one = load(dir.file("pp1.loom"));
  ASSERT_TRUE(one);
  TrainOptions o = options(2);
  o.evalDataPath = dataPath;
  EXPECT_FALSE(loomrt::train(*one, o, &r, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_HAS(error, "--eval-data with a pipeline-parallel artifact: its "
                    "stages have no entry 'predict' or 'forward'");
  o = options(2, 3);
  EXPECT_FALSE(loomrt::train(*one, o, &r, &error, &code));
  EXPECT_EQ(error, "--accumulate 3: the artifact's pipeline runs 2 "
                   "micro-batches per step (loomc --microbatches); leave "
                   "--accumulate out or give 2");
  // --accumulate M itself is fine.
  o = options(1, 2);
  EXPECT_TRUE(loomrt::train(*one, o, &r, &error, &code)) << error;
}

} // namespace
} // namespace loomrt::test
