//===- PipelineScheduleTest.cpp - Pipeline schedules: make, read, check ---===//
//
// Tokens and the text form; every rule of the checker on a hand-written
// broken schedule, with its whole message; hand-derived lists and timings of
// small generated schedules; and a sweep over every (ranks 1..8,
// micro-batches 1..16, virtual stages 1..4, schedule) the generator
// accepts, plus a random sample of larger ones: each is checked, each stage
// and micro-batch gets its F and B (or I and W), the sends and receives sit
// where docs/pipeline.md puts them, the measured makespan and peak in-flight
// match the schedule's formulas, and the checker refuses each schedule with
// one of its sends or receives removed.
//
//===----------------------------------------------------------------------===//

#include "loomrt/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

namespace loomrt::pp {
namespace {

const std::string kRule1 = " (rule 1: tokens, ranges and ranks)";
const std::string kRule2 = " (rule 2: wrong rank)";
const std::string kRule3 = " (rule 3: one F and one B, or one I and one W)";
const std::string kRule4 = " (rule 4: runs before what it needs)";
const std::string kRule5 = " (rule 5: no peer)";
const std::string kRule6 = " (rule 6: wrong message)";
const std::string kRule7 = " (rule 7: deadlock)";
const std::string kRule8 = " (rule 8: unreceived send)";

// docs/pipeline.md's example: 1F1B, 2 ranks, 2 stages, 3 micro-batches.
const char *kDocExample =
    "# 1F1B, 2 ranks, 2 stages, 3 micro-batches\n"
    "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 F0.2 SF0.2 RB0.1 B0.1 RB0.2 "
    "B0.2\n"
    "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1 RF1.2 F1.2 B1.2 "
    "SB1.2\n";

Schedule parseOrDie(const std::string &text, int64_t ranks, int64_t stages,
                    int64_t microbatches) {
  Schedule schedule;
  std::string error;
  EXPECT_TRUE(
      parseSchedule(text, ranks, stages, microbatches, &schedule, &error))
      << error;
  return schedule;
}

/// The checker's message for a schedule in the text form ("" if it passes).
std::string
check(const std::string &text, int64_t ranks, int64_t stages,
      int64_t microbatches,
      const std::vector<std::vector<BoundaryTensor>> &boundaries = {}) {
  Schedule schedule = parseOrDie(text, ranks, stages, microbatches);
  std::string error;
  if (checkSchedule(schedule, boundaries, nullptr, &error))
    return "";
  EXPECT_FALSE(error.empty());
  return error;
}

std::string parseError(const std::string &text, int64_t ranks, int64_t stages,
                       int64_t microbatches) {
  Schedule schedule;
  std::string error;
  EXPECT_FALSE(
      parseSchedule(text, ranks, stages, microbatches, &schedule, &error));
  return error;
}

BoundaryTensor tensor(const std::string &dtype, std::vector<int64_t> shape,
                      bool grad = true) {
  BoundaryTensor t;
  t.name = "t";
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.grad = grad;
  return t;
}

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleTest, FormatsEveryKind) {
  EXPECT_EQ(formatAction({ActionKind::Forward, 0, 3}), "F0.3");
  EXPECT_EQ(formatAction({ActionKind::Backward, 12, 0}), "B12.0");
  EXPECT_EQ(formatAction({ActionKind::BackwardInput, 1, 2}), "I1.2");
  EXPECT_EQ(formatAction({ActionKind::BackwardWeight, 1, 2}), "W1.2");
  EXPECT_EQ(formatAction({ActionKind::SendActivation, 4, 5}), "SF4.5");
  EXPECT_EQ(formatAction({ActionKind::RecvActivation, 4, 5}), "RF4.5");
  EXPECT_EQ(formatAction({ActionKind::SendGradient, 2, 1}), "SB2.1");
  EXPECT_EQ(formatAction({ActionKind::RecvGradient, 2, 10}), "RB2.10");
}

TEST(PipelineScheduleTest, TokensRoundTrip) {
  for (const char *text : {"F0.0", "B3.7", "I10.2", "W2.10", "SF0.15", "RF7.3",
                           "SB123.456", "RB1.0"}) {
    Action action;
    std::string error;
    ASSERT_TRUE(parseAction(text, &action, &error)) << text << ": " << error;
    EXPECT_EQ(formatAction(action), text);
  }
  Action a;
  ASSERT_TRUE(parseAction("RB12.345", &a, nullptr));
  EXPECT_EQ(a.kind, ActionKind::RecvGradient);
  EXPECT_EQ(a.stage, 12);
  EXPECT_EQ(a.microbatch, 345);
  std::mt19937 random(7);
  for (int i = 0; i < 500; ++i) {
    Action action{ActionKind(random() % 8), int64_t(random() % 100000),
                  int64_t(random() % 100000)};
    Action back;
    ASSERT_TRUE(parseAction(formatAction(action), &back, nullptr));
    EXPECT_EQ(back, action) << formatAction(action);
  }
  // Decimal with leading zeros is still decimal.
  ASSERT_TRUE(parseAction("F007.01", &a, nullptr));
  EXPECT_EQ(a, (Action{ActionKind::Forward, 7, 1}));
}

TEST(PipelineScheduleTest, RefusesMalformedTokens) {
  for (const char *text : {"", "F", "F0", "F0.", "F.0", "F0.1.2", "F-1.0",
                           "F+1.0", "f0.1", "S0.1", "SFF0.1", "F0.1 ", " F0.1",
                           "F0,1", "X0.1", "FF0.1", "F1234567890123456.0"}) {
    Action action{ActionKind::Backward, 9, 9};
    std::string error;
    EXPECT_FALSE(parseAction(text, &action, &error)) << "'" << text << "'";
    EXPECT_EQ(error, "'" + std::string(text) +
                         "' is not an action: expected F, B, I, W, SF, RF, "
                         "SB or RB, then <stage>.<micro-batch> (like F0.3)");
    EXPECT_EQ(action, (Action{ActionKind::Backward, 9, 9})) << "untouched";
  }
}

TEST(PipelineScheduleTest, ComputeAndRanks) {
  EXPECT_TRUE(isCompute(ActionKind::Forward));
  EXPECT_TRUE(isCompute(ActionKind::Backward));
  EXPECT_TRUE(isCompute(ActionKind::BackwardInput));
  EXPECT_TRUE(isCompute(ActionKind::BackwardWeight));
  EXPECT_FALSE(isCompute(ActionKind::SendActivation));
  EXPECT_FALSE(isCompute(ActionKind::RecvActivation));
  EXPECT_FALSE(isCompute(ActionKind::SendGradient));
  EXPECT_FALSE(isCompute(ActionKind::RecvGradient));
  Schedule s;
  s.ranks = 4;
  s.stages = 8;
  EXPECT_EQ(stageRank(s, 0), 0);
  EXPECT_EQ(stageRank(s, 3), 3);
  EXPECT_EQ(stageRank(s, 5), 1);
  EXPECT_EQ(stageRank(s, 7), 3);
  EXPECT_EQ(std::string(scheduleNames()), "gpipe, 1f1b, interleaved, zb-h1");
}

//===----------------------------------------------------------------------===//
// The text form
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleTest, ParsesTheDocExample) {
  Schedule s = parseOrDie(kDocExample, 2, 2, 3);
  EXPECT_EQ(s.name, "file");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.microbatches, 3);
  ASSERT_EQ(s.actions.size(), 2u);
  ASSERT_EQ(s.actions[0].size(), 12u);
  EXPECT_EQ(s.actions[0][4], (Action{ActionKind::RecvGradient, 0, 0}));
  EXPECT_EQ(s.actions[1][3], (Action{ActionKind::SendGradient, 1, 0}));
  // printSchedule writes the same lines, without the comment.
  std::string text = kDocExample;
  EXPECT_EQ(printSchedule(s), text.substr(text.find('\n') + 1));
  // And it is what generateSchedule makes for 1f1b.
  Schedule generated;
  ASSERT_TRUE(generateSchedule("1f1b", 2, 1, 3, &generated, nullptr));
  EXPECT_EQ(generated.actions, s.actions);
  EXPECT_EQ(check(kDocExample, 2, 2, 3), "");
}

TEST(PipelineScheduleTest, ParsesContinuationLinesCommentsAndSpacing) {
  Schedule s = parseOrDie("\n"
                          "rank 1 :   # rank 1 first, over three lines\n"
                          "  RF1.0\tF1.0\n"
                          "\n"
                          "  B1.0 SB1.0 # done\r\n"
                          "   rank 0:F0.0 SF0.0\n"
                          "RB0.0 B0.0",
                          2, 2, 1);
  EXPECT_EQ(printSchedule(s), "rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                              "rank 1: RF1.0 F1.0 B1.0 SB1.0\n");
  // An empty list prints without a trailing blank.
  Schedule empty = parseOrDie("rank 0:", 1, 1, 1);
  EXPECT_EQ(printSchedule(empty), "rank 0:\n");
}

TEST(PipelineScheduleTest, ParseErrorsNameTheLine) {
  EXPECT_EQ(parseError("rank 0: F0.0\nrank 1: F1.0 X1.0\n", 2, 2, 1),
            "line 2: 'X1.0' is not an action: expected F, B, I, W, SF, RF, "
            "SB or RB, then <stage>.<micro-batch> (like F0.3)" +
                kRule1);
  EXPECT_EQ(parseError("F0.0\nrank 0:", 1, 1, 1),
            "line 1: 'F0.0' comes before the first 'rank R:' line" + kRule1);
  EXPECT_EQ(parseError("# c\nrank 0: F0.0\n\nrank 0: B0.0\n", 2, 2, 1),
            "line 4: rank 0 is given twice (first on line 2)" + kRule1);
  EXPECT_EQ(parseError("rank 0: F0.0\nrank 2:", 2, 2, 1),
            "line 2: rank 2 is out of range: the schedule has 2 ranks (0..1)" +
                kRule1);
  EXPECT_EQ(parseError("rank 1: F1.0", 2, 2, 1),
            "rank 0 is missing: there is no 'rank 0:' line" + kRule1);
  EXPECT_EQ(
      parseError("rank 0: F0.0\n  F2.0\nrank 1:", 2, 2, 1),
      "line 2: F2.0: names stage 2, but the schedule has 2 stages (0..1)" +
          kRule1);
  EXPECT_EQ(parseError("rank 0: F0.1", 1, 1, 1),
            "line 1: F0.1: names micro-batch 1, but the schedule has 1 "
            "micro-batch (0..0)" +
                kRule1);
  EXPECT_EQ(parseError("rank 0: F0.3", 1, 1, 3),
            "line 1: F0.3: names micro-batch 3, but the schedule has 3 "
            "micro-batches (0..2)" +
                kRule1);
  const std::string badRankLine =
      ": expected 'rank R:' with R a rank number, like 'rank 0:'" + kRule1;
  EXPECT_EQ(parseError("rank x: F0.0", 1, 1, 1), "line 1" + badRankLine);
  EXPECT_EQ(parseError("\nrank 0 F0.0", 1, 1, 1), "line 2" + badRankLine);
  EXPECT_EQ(parseError("ranks 0: F0.0", 1, 1, 1), "line 1" + badRankLine);
  EXPECT_EQ(parseError("", 2, 3, 1),
            "the stages (3) must be a multiple of the ranks (2): stage s runs "
            "on rank s mod ranks" +
                kRule1);
  EXPECT_EQ(parseError("", 0, 1, 1),
            "a schedule needs at least 1 rank, 1 stage and 1 micro-batch (got "
            "0 ranks, 1 stage, 1 micro-batch)" +
                kRule1);
}

//===----------------------------------------------------------------------===//
// The checks, one rule at a time
//===----------------------------------------------------------------------===//

TEST(PipelineScheduleTest, Rule1ListsAndRanges) {
  Schedule s = parseOrDie(kDocExample, 2, 2, 3);
  std::string error;
  Schedule oneList = s;
  oneList.actions.pop_back();
  EXPECT_FALSE(checkSchedule(oneList, {}, nullptr, &error));
  EXPECT_EQ(error, "the schedule has 2 ranks but 1 action list: each rank "
                   "needs exactly one" +
                       kRule1);
  Schedule outOfRange = s;
  outOfRange.actions[0][1] = {ActionKind::Backward, 7, 0};
  EXPECT_FALSE(checkSchedule(outOfRange, {}, nullptr, &error));
  EXPECT_EQ(error, "rank 0, step 1 (B7.0): names stage 7, but the schedule "
                   "has 2 stages (0..1)" +
                       kRule1);
  outOfRange.actions[0][1] = {ActionKind::Forward, 0, -1};
  EXPECT_FALSE(checkSchedule(outOfRange, {}, nullptr, &error));
  EXPECT_EQ(error, "rank 0, step 1 (F0.-1): names micro-batch -1, but the "
                   "schedule has 3 micro-batches (0..2)" +
                       kRule1);
  outOfRange.actions[0][1] = {ActionKind(42), 0, 0};
  EXPECT_FALSE(checkSchedule(outOfRange, {}, nullptr, &error));
  EXPECT_EQ(error, "rank 0, step 1: not an action (kind 42)" + kRule1);
  EXPECT_FALSE(checkSchedule(s, {{}, {}, {}}, nullptr, &error));
  EXPECT_EQ(error, "the schedule's 2 stages need stages - 1 = 1 boundary "
                   "lists, but 3 were given");
}

TEST(PipelineScheduleTest, Rule2WrongRank) {
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 F1.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "rank 0, step 2 (F1.0): stage 1 runs on rank 1, not on rank 0" +
                kRule2);
  // A send belongs with the stage whose data it moves.
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0 SF0.0\n",
                  2, 2, 1),
            "rank 1, step 4 (SF0.0): stage 0 runs on rank 0, not on rank 1" +
                kRule2);
}

TEST(PipelineScheduleTest, Rule3OneForwardOneBackward) {
  const char *rank1 = "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1\n";
  const char *rank0 = "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1\n";
  EXPECT_EQ(check(std::string(rank0) + rank1, 2, 2, 2), "");
  // Twice.
  EXPECT_EQ(check(std::string("rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 F0.1 "
                              "RB0.1 B0.1\n") +
                      rank1,
                  2, 2, 2),
            "rank 0, step 6 (F0.1): F0.1 runs a second time (first at step 2)" +
                kRule3);
  // Missing.
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 "
                                       "F1.1\n",
                  2, 2, 2),
            "rank 1 has no B1.1 (or I1.1 and W1.1)" + kRule3);
  EXPECT_EQ(
      check(std::string("rank 0: F0.0 SF0.0 RB0.0 B0.0 RB0.1 B0.1\n") + rank1,
            2, 2, 2),
      "rank 0 has no F0.1" + kRule3);
  // B mixed with I and W.
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 "
                                       "F1.1 I1.1 SB1.1 W1.1 B1.1\n",
                  2, 2, 2),
            "rank 1, step 9 (B1.1): B1.1 and I1.1 (step 6) both run; a stage "
            "and micro-batch gets either B or I and W" +
                kRule3);
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 "
                                       "F1.1 B1.1 SB1.1 W1.1\n",
                  2, 2, 2),
            "rank 1, step 8 (W1.1): W1.1 and B1.1 (step 6) both run; a stage "
            "and micro-batch gets either B or I and W" +
                kRule3);
  // I without W, W without I.
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 "
                                       "F1.1 I1.1 SB1.1\n",
                  2, 2, 2),
            "rank 1 has no W1.1, which I1.1 (step 6) needs after it" + kRule3);
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 "
                                       "F1.1 W1.1\n",
                  2, 2, 2),
            "rank 1 has no I1.1, which W1.1 (step 6) needs before it" + kRule3);
}

TEST(PipelineScheduleTest, Rule4ProgramOrder) {
  const char *rank0 = "rank 0: F0.0 SF0.0 RB0.0 B0.0\n";
  const char *rank1 = "rank 1: RF1.0 F1.0 B1.0 SB1.0\n";
  EXPECT_EQ(check(std::string(rank0) + rank1, 2, 2, 1), "");
  const std::string notYet0 = ", which has not run on rank 0 yet" + kRule4;
  const std::string notYet1 = ", which has not run on rank 1 yet" + kRule4;
  EXPECT_EQ(
      check(std::string(rank0) + "rank 1: F1.0 RF1.0 B1.0 SB1.0", 2, 2, 1),
      "rank 1, step 0 (F1.0): runs before RF1.0 (its input)" + notYet1);
  EXPECT_EQ(
      check(std::string(rank0) + "rank 1: RF1.0 B1.0 F1.0 SB1.0", 2, 2, 1),
      "rank 1, step 1 (B1.0): runs before F1.0" + notYet1);
  EXPECT_EQ(
      check(std::string("rank 0: F0.0 SF0.0 B0.0 RB0.0\n") + rank1, 2, 2, 1),
      "rank 0, step 2 (B0.0): runs before RB0.0 (its output gradient)" +
          notYet0);
  EXPECT_EQ(
      check(std::string("rank 0: SF0.0 F0.0 RB0.0 B0.0\n") + rank1, 2, 2, 1),
      "rank 0, step 0 (SF0.0): runs before F0.0 (what it sends)" + notYet0);
  EXPECT_EQ(
      check(std::string(rank0) + "rank 1: RF1.0 F1.0 SB1.0 B1.0", 2, 2, 1),
      "rank 1, step 2 (SB1.0): runs before B1.0 (what it sends)" + notYet1);
  EXPECT_EQ(
      check(std::string(rank0) + "rank 1: RF1.0 F1.0 SB1.0 I1.0 W1.0", 2, 2, 1),
      "rank 1, step 2 (SB1.0): runs before I1.0 (what it sends)" + notYet1);
  EXPECT_EQ(
      check(std::string(rank0) + "rank 1: RF1.0 F1.0 W1.0 I1.0 SB1.0", 2, 2, 1),
      "rank 1, step 2 (W1.0): runs before I1.0" + notYet1);
  // Neighbouring stages on one rank pass their data without messages.
  EXPECT_EQ(check("rank 0: F0.0 F1.0 B1.0 B0.0", 1, 2, 1), "");
  EXPECT_EQ(check("rank 0: F1.0 F0.0 B1.0 B0.0", 1, 2, 1),
            "rank 0, step 0 (F1.0): runs before F0.0 (its input)" + notYet0);
  EXPECT_EQ(check("rank 0: F0.0 F1.0 B0.0 B1.0", 1, 2, 1),
            "rank 0, step 2 (B0.0): runs before B1.0 (its output gradient)" +
                notYet0);
  EXPECT_EQ(check("rank 0: F0.0 F1.0 I0.0 W0.0 I1.0 W1.0", 1, 2, 1),
            "rank 0, step 2 (I0.0): runs before I1.0 (its output gradient)" +
                notYet0);
}

TEST(PipelineScheduleTest, Rule5NoPeer) {
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 B0.0", 1, 1, 1),
            "rank 0, step 1 (SF0.0): stage 0 is the last stage: there is no "
            "stage after it to send to" +
                kRule5);
  EXPECT_EQ(check("rank 0: RF0.0 F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "rank 0, step 0 (RF0.0): stage 0 is the first stage: there is no "
            "stage before it to receive from" +
                kRule5);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0 SB0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "rank 0, step 4 (SB0.0): stage 0 is the first stage: there is no "
            "stage before it to send to" +
                kRule5);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 RB1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "rank 1, step 2 (RB1.0): stage 1 is the last stage: there is no "
            "stage after it to receive from" +
                kRule5);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 F1.0 B1.0 B0.0", 1, 2, 1),
            "rank 0, step 1 (SF0.0): stages 0 and 1 both run on rank 0, which "
            "passes the data on without a send or receive" +
                kRule5);
  EXPECT_EQ(check("rank 0: F0.0 F1.0 B1.0 RB0.0 B0.0", 1, 2, 1),
            "rank 0, step 3 (RB0.0): stages 0 and 1 both run on rank 0, which "
            "passes the data on without a send or receive" +
                kRule5);
}

TEST(PipelineScheduleTest, Rule6WrongMessage) {
  const char *rank0 = "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1\n";
  // Rank 1 takes micro-batch 1 first; the head of its channel is 0's.
  EXPECT_EQ(check(std::string(rank0) + "rank 1: RF1.1 F1.1 B1.1 SB1.1 RF1.0 "
                                       "F1.0 B1.0 SB1.0\n",
                  2, 2, 2),
            "rank 1, step 0 (RF1.1): receives the activations SF0.0 sent by "
            "rank 0 at step 1, expected those of F0.1" +
                kRule6);
  // Rank 0 takes the gradients of micro-batch 1 first.
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.1 B0.1 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1\n",
                  2, 2, 2),
            "rank 0, step 4 (RB0.1): receives the gradients SB1.0 sent by rank "
            "1 at step 3, expected those of B1.1" +
                kRule6);
  // Two stages per rank: rank 0 sends boundary 2 (stage 2's output) before
  // micro-batch 1 of boundary 0, which rank 1 expects first.
  const std::string interleaved =
      "rank 0: F0.0 SF0.0 RF2.0 F2.0 SF2.0 F0.1 SF0.1 RF2.1 F2.1 SF2.1\n"
      "        RB2.0 B2.0 SB2.0 RB2.1 B2.1 SB2.1 RB0.0 B0.0 RB0.1 B0.1\n"
      "rank 1: RF1.0 F1.0 SF1.0 RF1.1 F1.1 SF1.1 RF3.0 F3.0 B3.0 SB3.0\n"
      "        RF3.1 F3.1 B3.1 SB3.1 RB1.0 B1.0 SB1.0 RB1.1 B1.1 SB1.1\n";
  const std::string wrong =
      "rank 1, step 3 (RF1.1): receives the activations SF2.0 sent by rank 0 "
      "at step 4, expected those of F0.1";
  EXPECT_EQ(check(interleaved, 2, 4, 2), wrong + kRule6);
  // Boundaries alike: no word on shapes.
  EXPECT_EQ(check(interleaved, 2, 4, 2,
                  {{tensor("f32", {4, 64})},
                   {tensor("f32", {4, 64})},
                   {tensor("f32", {4, 64})}}),
            wrong + kRule6);
  EXPECT_EQ(check(interleaved, 2, 4, 2,
                  {{tensor("f32", {4, 64})},
                   {tensor("f32", {4, 64})},
                   {tensor("f32", {4, 32})}}),
            wrong +
                "; it receives f32[4,32] (boundary 2) where F1.1 takes "
                "f32[4,64] (boundary 0)" +
                kRule6);
  EXPECT_EQ(check(interleaved, 2, 4, 2,
                  {{tensor("f32", {4, 64})},
                   {tensor("f32", {4, 64})},
                   {tensor("bf16", {4, 64}), tensor("i64", {4}, false)}}),
            wrong +
                "; it receives {bf16[4,64], i64[4]} (boundary 2) where F1.1 "
                "takes f32[4,64] (boundary 0)" +
                kRule6);
  // Unknown tensors (empty lists) are not compared.
  EXPECT_EQ(check(interleaved, 2, 4, 2, {{tensor("f32", {4, 64})}, {}, {}}),
            wrong + kRule6);
}

TEST(PipelineScheduleTest, Rule6WrongGradientShapes) {
  // Stages 1 and 3 on rank 1 both send gradients to rank 0. Rank 0 waits
  // for boundary 0's (from B1.0) first, but rank 1 sends boundary 2's
  // (from B3.0) first.
  const std::string text =
      "rank 0: F0.0 SF0.0 RF2.0 F2.0 SF2.0 RB0.0 B0.0 RB2.0 B2.0 SB2.0\n"
      "rank 1: RF1.0 F1.0 SF1.0 RF3.0 F3.0 B3.0 SB3.0 RB1.0 B1.0 SB1.0\n";
  // Rank 0's RB0.0 at step 5 takes SB3.0 (rank 1, step 6): boundary 2's
  // gradient where B0.0 takes boundary 0's.
  EXPECT_EQ(check(text, 2, 4, 1,
                  {{tensor("f32", {4, 64}), tensor("i32", {4}, false)},
                   {tensor("f32", {4, 64})},
                   {tensor("f16", {8})}}),
            "rank 0, step 5 (RB0.0): receives the gradients SB3.0 sent by rank "
            "1 at step 6, expected those of B1.0; it receives f16[8] (boundary "
            "2's gradient) where B0.0 takes f32[4,64] (boundary 0's gradient)" +
                kRule6);
}

TEST(PipelineScheduleTest, Rule7Deadlock) {
  EXPECT_EQ(check("rank 0: RB0.0 F0.0 SF0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "the ranks deadlock: rank 0, step 0 (RB0.0) waits for SB1.0 from "
            "rank 1; rank 1, step 0 (RF1.0) waits for SF0.0 from rank 0" +
                kRule7);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0\n",
                  2, 2, 1),
            "the ranks deadlock: rank 0, step 2 (RB0.0) waits for SB1.0 from "
            "rank 1, which has finished" +
                kRule7);
  // Three ranks: rank 0 waits on rank 1, which waits on rank 0; rank 2
  // waits on rank 1.
  EXPECT_EQ(check("rank 0: F0.0 RB0.0 SF0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 SF1.0 RB1.0 B1.0 SB1.0\n"
                  "rank 2: RF2.0 F2.0 B2.0 SB2.0\n",
                  3, 3, 1),
            "the ranks deadlock: rank 0, step 1 (RB0.0) waits for SB1.0 from "
            "rank 1; rank 1, step 0 (RF1.0) waits for SF0.0 from rank 0; "
            "rank 2, step 0 (RF2.0) waits for SF1.0 from rank 1" +
                kRule7);
}

TEST(PipelineScheduleTest, Rule8UnreceivedSend) {
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0\n",
                  2, 2, 1),
            "rank 0, step 2 (SF0.0): sends to rank 1, which never receives it" +
                kRule8);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0 SB1.0\n",
                  2, 2, 1),
            "rank 1, step 4 (SB1.0): sends to rank 0, which never receives "
            "it" +
                kRule8);
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 SF0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 B1.0 SB1.0 SB1.0\n",
                  2, 2, 1),
            "rank 0, step 2 (SF0.0): sends to rank 1, which never receives "
            "it; 2 more sends are not received either" +
                kRule8);
  // Three ranks: the gradients go back to rank 0, not on to rank 2.
  EXPECT_EQ(check("rank 0: F0.0 SF0.0 RB0.0 B0.0\n"
                  "rank 1: RF1.0 F1.0 SF1.0 RB1.0 B1.0 SB1.0 SB1.0\n"
                  "rank 2: RF2.0 F2.0 B2.0 SB2.0\n",
                  3, 3, 1),
            "rank 1, step 6 (SB1.0): sends to rank 0, which never receives "
            "it" +
                kRule8);
}

//===----------------------------------------------------------------------===//
// Generated schedules, small ones by hand
//===----------------------------------------------------------------------===//

Schedule generateOrDie(const std::string &name, int64_t ranks, int64_t v,
                       int64_t microbatches) {
  Schedule s;
  std::string error;
  EXPECT_TRUE(generateSchedule(name, ranks, v, microbatches, &s, &error))
      << error;
  return s;
}

ScheduleStats statsOrDie(const Schedule &s) {
  ScheduleStats stats;
  std::string error;
  EXPECT_TRUE(checkSchedule(s, {}, &stats, &error)) << error;
  return stats;
}

TEST(PipelineScheduleTest, OneFOneBTwoRanksThreeMicrobatches) {
  Schedule s = generateOrDie("1f1b", 2, 1, 3);
  EXPECT_EQ(s.name, "1f1b");
  EXPECT_EQ(s.stages, 2);
  std::string text = kDocExample;
  EXPECT_EQ(printSchedule(s), text.substr(text.find('\n') + 1));
  // By hand: rank 0 F [0,1) [1,2), rank 1 F1.0 [1,2) B1.0 [2,4); rank 0
  // B0.0 [4,6) F0.2 [6,7); rank 1 F1.1 [4,5) B1.1 [5,7) F1.2 [7,8) B1.2
  // [8,10); rank 0 B0.1 [7,9) B0.2 [10,12).
  ScheduleStats stats = statsOrDie(s);
  EXPECT_EQ(stats.makespan, 12);
  EXPECT_EQ(stats.busy, (std::vector<int64_t>{9, 9}));
  EXPECT_EQ(stats.peakInFlight, (std::vector<int64_t>{2, 1}));
  EXPECT_DOUBLE_EQ(stats.bubble(), 0.25);
  EXPECT_DOUBLE_EQ(idealBubble("1f1b", 2, 1, 3), 0.25);
}

TEST(PipelineScheduleTest, GPipeTwoRanksTwoMicrobatches) {
  Schedule s = generateOrDie("gpipe", 2, 1, 2);
  EXPECT_EQ(printSchedule(s),
            "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 RB0.1 B0.1\n"
            "rank 1: RF1.0 F1.0 RF1.1 F1.1 B1.0 SB1.0 B1.1 SB1.1\n");
  ScheduleStats stats = statsOrDie(s);
  EXPECT_EQ(stats.makespan, 9); // 3 (M + P - 1)
  EXPECT_EQ(stats.peakInFlight, (std::vector<int64_t>{2, 2}));
}

TEST(PipelineScheduleTest, InterleavedTwoRanksTwoChunks) {
  // By Megatron's formulas: rank 0 warms up with min(2 + 2, 4) = 4
  // forwards (chunk (k / 2) % 2, micro-batch k % 2), rank 1 with 2; the
  // backwards walk the chunks in reverse.
  Schedule s = generateOrDie("interleaved", 2, 2, 2);
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(printSchedule(s),
            "rank 0: F0.0 SF0.0 F0.1 SF0.1 RF2.0 F2.0 SF2.0 RF2.1 F2.1 SF2.1 "
            "RB2.0 B2.0 SB2.0 RB2.1 B2.1 SB2.1 RB0.0 B0.0 RB0.1 B0.1\n"
            "rank 1: RF1.0 F1.0 SF1.0 RF1.1 F1.1 SF1.1 RF3.0 F3.0 B3.0 SB3.0 "
            "RF3.1 F3.1 B3.1 SB3.1 RB1.0 B1.0 SB1.0 RB1.1 B1.1 SB1.1\n");
  ScheduleStats stats = statsOrDie(s);
  EXPECT_EQ(stats.peakInFlight, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(stats.makespan, 3 * (2 * 2 + 2 - 1));
}

TEST(PipelineScheduleTest, ZeroBubbleH1TwoRanksTwoMicrobatches) {
  // Slots by hand (I > F within P - r in flight > W): rank 0 F0 F1 - I0 W0
  // - I1 W1; rank 1 - F0 I0 W0 F1 I1 W1 (its limit of 1 holds F1 back
  // until W0).
  Schedule s = generateOrDie("zb-h1", 2, 1, 2);
  EXPECT_EQ(printSchedule(s),
            "rank 0: F0.0 SF0.0 F0.1 SF0.1 RB0.0 I0.0 W0.0 RB0.1 I0.1 W0.1\n"
            "rank 1: RF1.0 F1.0 I1.0 SB1.0 W1.0 RF1.1 F1.1 I1.1 SB1.1 W1.1\n");
  ScheduleStats stats = statsOrDie(s);
  EXPECT_EQ(stats.makespan, 8); // 3 M + 2 (P - 1)
  EXPECT_EQ(stats.busy, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(stats.peakInFlight, (std::vector<int64_t>{2, 1}));
  EXPECT_DOUBLE_EQ(stats.bubble(), 0.25);
}

TEST(PipelineScheduleTest, OneRankHasNoCommunication) {
  for (const char *name : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
    Schedule s =
        generateOrDie(name, 1, std::string(name) == "interleaved" ? 3 : 1, 4);
    for (const Action &a : s.actions[0])
      EXPECT_TRUE(isCompute(a.kind)) << name << ": " << formatAction(a);
    EXPECT_EQ(statsOrDie(s).bubble(), 0.0) << name;
  }
}

TEST(PipelineScheduleTest, GenerateErrors) {
  Schedule s;
  std::string error;
  EXPECT_FALSE(generateSchedule("foo", 2, 1, 4, &s, &error));
  EXPECT_EQ(error,
            "unknown pipeline schedule 'foo' (known: gpipe, 1f1b, interleaved, "
            "zb-h1)");
  for (const char *name : {"gpipe", "1f1b", "zb-h1"}) {
    EXPECT_FALSE(generateSchedule(name, 2, 2, 4, &s, &error));
    EXPECT_EQ(error, std::string(name) +
                         " runs one stage per rank, so virtual stages must be "
                         "1 (got 2); only interleaved runs several");
  }
  EXPECT_FALSE(generateSchedule("interleaved", 4, 2, 6, &s, &error));
  EXPECT_EQ(error, "interleaved needs the micro-batches to be a multiple of "
                   "the ranks (got 6 micro-batches for 4 ranks)");
  EXPECT_FALSE(generateSchedule("1f1b", 0, 1, 4, &s, &error));
  EXPECT_EQ(error, "1f1b needs at least 1 rank, 1 virtual stage and 1 "
                   "micro-batch (got 0, 1 and 4)");
  EXPECT_FALSE(generateSchedule("gpipe", 2, 1, -1, &s, &error));
  EXPECT_FALSE(
      generateSchedule("interleaved", 1 << 20, 4, 1 << 20, &s, &error));
  EXPECT_NE(error.find("more than"), std::string::npos) << error;
}

TEST(PipelineScheduleTest, IdealBubble) {
  EXPECT_DOUBLE_EQ(idealBubble("gpipe", 4, 1, 4), 3.0 / 7);
  EXPECT_DOUBLE_EQ(idealBubble("1f1b", 4, 1, 8), 3.0 / 11);
  EXPECT_DOUBLE_EQ(idealBubble("interleaved", 4, 2, 4), 3.0 / 11);
  EXPECT_DOUBLE_EQ(idealBubble("zb-h1", 4, 1, 4), 3.0 / 15);
  EXPECT_DOUBLE_EQ(idealBubble("1f1b", 1, 1, 4), 0.0);
  EXPECT_EQ(idealBubble("file", 4, 1, 4), -1);
  EXPECT_EQ(idealBubble("gpipe", 0, 1, 4), -1);
}

TEST(PipelineScheduleTest, BubbleOfEmptyStats) {
  ScheduleStats stats;
  EXPECT_EQ(stats.bubble(), 0.0);
  stats.makespan = 10;
  stats.busy = {10, 5};
  EXPECT_DOUBLE_EQ(stats.bubble(), 0.25);
}

//===----------------------------------------------------------------------===//
// The sweep
//===----------------------------------------------------------------------===//

/// The sends and receives docs/pipeline.md places around `compute`, placed
/// again here to compare with the generator's.
std::vector<Action> placeCommunication(const std::vector<Action> &compute,
                                       int64_t rank, int64_t P, int64_t S) {
  std::vector<Action> out;
  for (const Action &a : compute) {
    int64_t s = a.stage, m = a.microbatch;
    bool f = a.kind == ActionKind::Forward;
    bool b =
        a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput;
    bool prevElsewhere = s > 0 && (s - 1) % P != rank;
    bool nextElsewhere = s < S - 1 && (s + 1) % P != rank;
    if (f && prevElsewhere)
      out.push_back({ActionKind::RecvActivation, s, m});
    if (b && nextElsewhere)
      out.push_back({ActionKind::RecvGradient, s, m});
    out.push_back(a);
    if (f && nextElsewhere)
      out.push_back({ActionKind::SendActivation, s, m});
    if (b && prevElsewhere)
      out.push_back({ActionKind::SendGradient, s, m});
  }
  return out;
}

/// Everything the sweep asserts of one generated schedule.
void checkGenerated(const std::string &name, int64_t P, int64_t V, int64_t M,
                    const Schedule &s, std::mt19937 &random) {
  SCOPED_TRACE(name + " P=" + std::to_string(P) + " V=" + std::to_string(V) +
               " M=" + std::to_string(M));
  const int64_t S = P * V;
  ASSERT_EQ(s.ranks, P);
  ASSERT_EQ(s.stages, S);
  ASSERT_EQ(s.microbatches, M);
  ASSERT_EQ(int64_t(s.actions.size()), P);
  ScheduleStats stats;
  std::string error;
  ASSERT_TRUE(checkSchedule(s, {}, &stats, &error)) << error;

  // Each stage and micro-batch: one F and one B, or one I and one W, on
  // the stage's rank; and the communication exactly where the doc puts it.
  std::map<std::tuple<int, int64_t, int64_t>, int> count;
  for (int64_t r = 0; r < P; ++r) {
    std::vector<Action> compute;
    for (const Action &a : s.actions[r]) {
      if (!isCompute(a.kind))
        continue;
      EXPECT_EQ(a.stage % P, r) << formatAction(a);
      ++count[{int(a.kind), a.stage, a.microbatch}];
      compute.push_back(a);
    }
    EXPECT_EQ(placeCommunication(compute, r, P, S), s.actions[r])
        << "rank " << r;
  }
  bool zeroBubble = name == "zb-h1";
  for (int64_t st = 0; st < S; ++st) {
    for (int64_t m = 0; m < M; ++m) {
      auto n = [&](ActionKind k) {
        auto it = count.find({int(k), st, m});
        return it == count.end() ? 0 : it->second;
      };
      EXPECT_EQ(n(ActionKind::Forward), 1) << st << "." << m;
      EXPECT_EQ(n(ActionKind::Backward), zeroBubble ? 0 : 1) << st << "." << m;
      EXPECT_EQ(n(ActionKind::BackwardInput), zeroBubble ? 1 : 0);
      EXPECT_EQ(n(ActionKind::BackwardWeight), zeroBubble ? 1 : 0);
    }
  }

  // Timing and memory against the schedules' formulas (unit costs F = 1,
  // B = 2, I = W = 1; every rank computes 3 M V units).
  ASSERT_EQ(int64_t(stats.busy.size()), P);
  ASSERT_EQ(int64_t(stats.peakInFlight.size()), P);
  for (int64_t r = 0; r < P; ++r)
    EXPECT_EQ(stats.busy[r], 3 * M * V);
  for (int64_t r = 0; r < P; ++r) {
    int64_t peak = stats.peakInFlight[r];
    if (name == "gpipe") {
      EXPECT_EQ(peak, M) << "rank " << r;
    } else if (name == "1f1b") {
      EXPECT_LE(peak, P - r) << "rank " << r;
      EXPECT_EQ(peak, std::min(P - r, M)) << "rank " << r;
    } else if (name == "zb-h1") {
      EXPECT_LE(peak, P - r) << "rank " << r;
    } else {
      // Megatron: (P - r - 1) * 2 + (V - 1) * P warm-up forwards, one
      // more before the first backward frees one, all M V at most.
      int64_t bound = std::min((P - r - 1) * 2 + (V - 1) * P + 1, M * V);
      EXPECT_EQ(peak, bound) << "rank " << r;
    }
  }
  if (name == "gpipe" || name == "1f1b") {
    EXPECT_EQ(stats.makespan, 3 * (M + P - 1));
    EXPECT_NEAR(stats.bubble(), idealBubble(name, P, V, M), 1e-12);
  } else if (name == "interleaved") {
    // Observed on every schedule of the sweep (not proven): the ideal
    // (P - 1) / (V M + P - 1), i.e. a makespan of 3 (V M + P - 1).
    EXPECT_EQ(stats.makespan, 3 * (V * M + P - 1));
  } else {
    // With at most P - r micro-batches between F and W, the last rank runs
    // F, I, W of one micro-batch before the next F, so no schedule ends
    // before 3 M + 2 (P - 1); the greedy generator reaches that bound
    // (ZB-H1's 3 M + P - 1 needs more micro-batches in flight).
    EXPECT_EQ(stats.makespan, 3 * M + 2 * (P - 1));
    EXPECT_LE(stats.makespan - (3 * M + P - 1), P - 1);
  }

  // The text form round-trips.
  Schedule back;
  ASSERT_TRUE(parseSchedule(printSchedule(s), P, S, M, &back, &error)) << error;
  EXPECT_EQ(back.actions, s.actions);

  // The checker can fail: drop one send or receive, and it refuses.
  std::vector<std::pair<int64_t, int64_t>> communication;
  for (int64_t r = 0; r < P; ++r)
    for (int64_t i = 0; i < int64_t(s.actions[r].size()); ++i)
      if (!isCompute(s.actions[r][i].kind))
        communication.push_back({r, i});
  if (!communication.empty()) {
    auto [r, i] = communication[random() % communication.size()];
    Schedule broken = s;
    broken.actions[r].erase(broken.actions[r].begin() + i);
    EXPECT_FALSE(checkSchedule(broken, {}, nullptr, &error))
        << "without rank " << r << ", step " << i;
    EXPECT_NE(error.find("(rule "), std::string::npos) << error;
  }
}

TEST(PipelineScheduleTest, SweepEveryAcceptedCombination) {
  std::mt19937 random(2024);
  int accepted = 0;
  for (const char *name : {"gpipe", "1f1b", "interleaved", "zb-h1"}) {
    for (int64_t P = 1; P <= 8; ++P) {
      for (int64_t M = 1; M <= 16; ++M) {
        for (int64_t V = 1; V <= 4; ++V) {
          bool interleaved = std::string(name) == "interleaved";
          bool valid = interleaved ? M % P == 0 : V == 1;
          Schedule s;
          std::string error;
          bool ok = generateSchedule(name, P, V, M, &s, &error);
          ASSERT_EQ(ok, valid) << name << " P=" << P << " V=" << V << " M=" << M
                               << ": " << error;
          if (!ok)
            continue;
          ++accepted;
          checkGenerated(name, P, V, M, s, random);
          if (HasFatalFailure())
            return;
        }
      }
    }
  }
  // gpipe, 1f1b, zb-h1: 8 * 16 each; interleaved: 4 V for each M that P
  // divides (16 + 8 + 5 + 4 + 3 + 2 + 2 + 2 = 42 pairs).
  EXPECT_EQ(accepted, 3 * 8 * 16 + 4 * 42);
}

TEST(PipelineScheduleTest, SweepRandomLargerCombinations) {
  std::mt19937 random(99);
  const char *names[] = {"gpipe", "1f1b", "interleaved", "zb-h1"};
  for (int i = 0; i < 200; ++i) {
    std::string name = names[random() % 4];
    int64_t P = 1 + random() % 16;
    int64_t V = name == "interleaved" ? 1 + random() % 4 : 1;
    int64_t M = 1 + random() % 48;
    if (name == "interleaved")
      M = P * (1 + random() % 6);
    Schedule s = generateOrDie(name, P, V, M);
    checkGenerated(name, P, V, M, s, random);
    if (HasFatalFailure())
      return;
  }
}

} // namespace
} // namespace loomrt::pp
