//===- MeshPlanTest.cpp - The mesh, collective steps and shards in plan.json
//===//
//
// Every rule of docs/plan-format.md's "Meshes, collectives and shards", one
// test each: what is accepted, and the message (entry, step, field) of each
// refusal.
//
//===----------------------------------------------------------------------===//

#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Plan.h"

#include <gtest/gtest.h>

#include <random>

namespace loomrt::test {
namespace {

/// dp=2: x [4] -> all_reduce sum -> a [4] -> reduce_scatter mean -> s [2]
/// -> all_gather -> g [4] -> rank_slice -> t [2]; m: a state tensor of 3
/// elements sharded over dp ([2] per rank).
EntryBuilder meshEntry(const std::string &name = "main") {
  EntryBuilder e(name);
  int x = e.buffer("f32", {4});
  int a = e.buffer("f32", {4});
  int s = e.buffer("f32", {2});
  int g = e.buffer("f32", {4});
  int t = e.buffer("f32", {2});
  int m = e.buffer("f32", {2});
  e.input("x", "input", x);
  e.input("m", "state", m, shardJson("dp", {3}));
  e.collective("all_reduce", "sum", "dp", x, a);
  e.collective("reduce_scatter", "mean", "dp", a, s);
  e.collective("all_gather", "", "dp", s, g);
  e.collective("rank_slice", "", "dp", g, t);
  e.output("g", "output", g);
  e.output("t", "output", t);
  e.output("m", "output", m, shardJson("dp", {3}));
  return e;
}

std::string meshPlan(const std::string &mesh = meshJson({"dp"}, {2})) {
  return planJson({meshEntry()}, "null", "null", mesh);
}

std::string replace(std::string text, const std::string &from,
                    const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "fixture lacks: " << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// The parse error of `text` (which must be refused).
std::string refusal(const std::string &text, ErrorCode *code = nullptr) {
  std::string error;
  EXPECT_FALSE(parsePlan(text, "plan.json", &error, code)) << "accepted:\n"
                                                           << text;
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

TEST(MeshPlan, AcceptsMeshCollectivesAndShards) {
  std::optional<Plan> plan = accepted(meshPlan());
  ASSERT_TRUE(plan);
  ASSERT_TRUE(plan->mesh);
  EXPECT_EQ(plan->mesh->axes, std::vector<std::string>{"dp"});
  EXPECT_EQ(plan->mesh->size(), 2);
  EXPECT_EQ(plan->mesh->describe(), "dp=2");
  const PlanEntry &e = plan->entries[0];
  ASSERT_EQ(e.steps.size(), 4u);
  const CollectiveOp ops[] = {CollectiveOp::AllReduce,
                              CollectiveOp::ReduceScatter,
                              CollectiveOp::AllGather, CollectiveOp::RankSlice};
  const CollectiveReduce reductions[] = {
      CollectiveReduce::Sum, CollectiveReduce::Mean, CollectiveReduce::None,
      CollectiveReduce::None};
  for (size_t i = 0; i < 4; ++i) {
    const PlanStep &step = e.steps[i];
    EXPECT_EQ(step.kind, PlanStep::Kind::Collective);
    EXPECT_EQ(step.collective.op, ops[i]);
    EXPECT_EQ(step.collective.reduce, reductions[i]);
    EXPECT_EQ(step.collective.ranks, 2);
    EXPECT_EQ(step.writes, std::vector<uint32_t>{step.collective.dst});
    EXPECT_EQ(stepBuffers(step), (std::vector<uint32_t>{step.collective.src,
                                                        step.collective.dst}));
  }
  EXPECT_STREQ(stepKindName(PlanStep::Kind::Collective), "collective");
  EXPECT_EQ(kStepKinds, size_t(PlanStep::Kind::Collective) + 1);
  const Binding &m = e.inputs[1];
  ASSERT_TRUE(m.shard);
  EXPECT_EQ(m.shard->axis, "dp");
  EXPECT_EQ(m.shard->ranks, 2);
  EXPECT_EQ(m.shard->shape, std::vector<int64_t>{3});
  EXPECT_EQ(m.shape, std::vector<int64_t>{2});
  EXPECT_EQ(m.wholeShape(), std::vector<int64_t>{3});
  EXPECT_EQ(m.wholeBytes(), 12u);
  EXPECT_EQ(stateBindings(*plan).at("m"), &m);
  // A node name is optional.
  plan = accepted(replace(meshPlan(), "\"op\": \"all_reduce\"",
                          "\"op\": \"all_reduce\", \"node\": \"/Add\""));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->entries[0].steps[0].nodes, std::vector<std::string>{"/Add"});
}

TEST(MeshPlan, NoMeshOrANullOneIsOneDevice) {
  std::optional<Plan> plan =
      accepted(planJson({EntryBuilder("main")}, "null", "null"));
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->mesh);
  plan = accepted(
      planJson({EntryBuilder("main")}, "null", "null", ", \"mesh\": null"));
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->mesh);
}

TEST(MeshPlan, MeshIsAnObject) {
  EXPECT_HAS(refusal(meshPlan(", \"mesh\": [2]")),
             "plan.json: field 'mesh': expected an object, got array");
}

TEST(MeshPlan, MeshHasOneToFourAxes) {
  EXPECT_HAS(refusal(meshPlan(meshJson({}, {}))),
             "plan.json: mesh: field 'axes': expected an array of 1 to 4 axis "
             "names, got an array of 0");
  EXPECT_HAS(
      refusal(meshPlan(meshJson({"a", "b", "c", "d", "dp"}, {1, 1, 1, 1, 2}))),
      "an array of 5");
  EXPECT_HAS(refusal(meshPlan(", \"mesh\": {\"shape\": [2]}")),
             "plan.json: mesh: missing field 'axes'");
}

TEST(MeshPlan, MeshAxesAndShapeAgree) {
  EXPECT_HAS(refusal(meshPlan(meshJson({"dp"}, {2, 1}))),
             "plan.json: mesh: field 'shape': expected 1 sizes (one per "
             "axis), got an array of 2");
  EXPECT_HAS(refusal(meshPlan(", \"mesh\": {\"axes\": [\"dp\"]}")),
             "mesh: missing field 'shape'");
}

TEST(MeshPlan, MeshAxisNamesArePlainAndUnique) {
  EXPECT_HAS(refusal(meshPlan(meshJson({"dp", "dp"}, {2, 1}))),
             "mesh: field 'axes': element 1: duplicate axis 'dp'");
  EXPECT_HAS(refusal(meshPlan(meshJson({"d-p"}, {2}))),
             "mesh: field 'axes': element 0: 'd-p' is not an axis name (1 to "
             "64 of A-Z a-z 0-9 _)");
  EXPECT_HAS(refusal(meshPlan(meshJson({""}, {2}))), "is not an axis name");
  EXPECT_HAS(refusal(meshPlan(", \"mesh\": {\"axes\": [3], \"shape\": [2]}")),
             "element 0: expected an axis name, got integer");
}

TEST(MeshPlan, MeshSizesArePositive) {
  EXPECT_HAS(refusal(meshPlan(meshJson({"dp"}, {0}))),
             "mesh: field 'shape': element 0: axis 'dp': expected a size from "
             "1 to 65536, got 0");
  EXPECT_HAS(refusal(meshPlan(meshJson({"dp"}, {-2}))), "got -2");
  EXPECT_HAS(
      refusal(meshPlan(", \"mesh\": {\"axes\": [\"dp\"], \"shape\": [1.5]}")),
      "got 1.5");
  EXPECT_HAS(
      refusal(meshPlan(", \"mesh\": {\"axes\": [\"dp\"], \"shape\": [\"2\"]}")),
      "got \"2\"");
}

TEST(MeshPlan, MeshHasAtMost65536Ranks) {
  EXPECT_HAS(refusal(meshPlan(meshJson({"dp", "tp"}, {256, 512}))),
             "mesh: field 'shape': more than 65536 ranks in all");
  EXPECT_TRUE(accepted(planJson({EntryBuilder("main")}, "null", "null",
                                meshJson({"dp", "tp"}, {256, 256}))));
}

TEST(MeshPlan, CollectiveStepsNeedAMesh) {
  EXPECT_HAS(refusal(planJson({meshEntry()}, "null", "null")),
             "plan.json: entry 'main': input 1: shard: field 'axis': a shard "
             "over axis 'dp', but the plan has no mesh");
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {4});
  e.collective("all_reduce", "sum", "dp", x, y);
  EXPECT_HAS(refusal(planJson({e}, "null", "null")),
             "plan.json: entry 'main': step 0 (collective): field 'axis': a "
             "collective step over axis 'dp', but the plan has no mesh");
}

TEST(MeshPlan, CollectiveAxisIsAMeshAxis) {
  EXPECT_HAS(refusal(replace(meshPlan(meshJson({"dp", "tp"}, {2, 1})),
                             "\"axis\": \"dp\", \"src\"",
                             "\"axis\": \"pp\", \"src\"")),
             "entry 'main': step 0 (collective): field 'axis': 'pp' is not an "
             "axis of the mesh (dp, tp)");
  EXPECT_HAS(refusal(replace(meshPlan(), "\"axis\": \"dp\", \"src\"",
                             "\"axis\": 0, \"src\"")),
             "step 0 (collective): field 'axis': expected a string");
}

TEST(MeshPlan, CollectiveOpIsKnown) {
  EXPECT_HAS(refusal(replace(meshPlan(), "\"all_gather\"", "\"broadcast\"")),
             "entry 'main': step 2 (collective): field 'op': unknown op "
             "'broadcast' (expected all_reduce, reduce_scatter, all_gather or "
             "rank_slice)");
  EXPECT_HAS(refusal(replace(meshPlan(), "\"op\": \"all_gather\", ", "")),
             "step 2 (collective): missing field 'op'");
}

TEST(MeshPlan, ReductionsNeedAReduce) {
  EXPECT_HAS(refusal(replace(meshPlan(), ", \"reduce\": \"sum\"", "")),
             "entry 'main': step 0 (collective): missing field 'reduce'");
  EXPECT_HAS(refusal(replace(meshPlan(), "\"reduce\": \"sum\"",
                             "\"reduce\": \"min\"")),
             "step 0 (collective): field 'reduce': unknown reduction 'min' "
             "(expected sum, max or mean)");
  EXPECT_TRUE(accepted(
      replace(meshPlan(), "\"reduce\": \"sum\"", "\"reduce\": \"max\"")));
}

TEST(MeshPlan, ReduceScatterDoesNotTakeMax) {
  EXPECT_HAS(refusal(replace(meshPlan(), "\"reduce\": \"mean\"",
                             "\"reduce\": \"max\"")),
             "step 1 (collective): field 'reduce': reduce_scatter reduces by "
             "sum or mean, not max");
}

TEST(MeshPlan, MovesTakeNoReduce) {
  EXPECT_HAS(refusal(replace(meshPlan(), "\"op\": \"all_gather\"",
                             "\"op\": \"all_gather\", \"reduce\": \"sum\"")),
             "step 2 (collective): field 'reduce': given, but all_gather does "
             "not reduce");
  EXPECT_HAS(refusal(replace(meshPlan(), "\"op\": \"rank_slice\"",
                             "\"op\": \"rank_slice\", \"reduce\": \"mean\"")),
             "step 3 (collective): field 'reduce': given, but rank_slice does "
             "not reduce");
  EXPECT_TRUE(accepted(replace(meshPlan(), "\"op\": \"all_gather\"",
                               "\"op\": \"all_gather\", \"reduce\": null")));
}

TEST(MeshPlan, CollectiveBufferIdsAreChecked) {
  EXPECT_HAS(refusal(replace(meshPlan(), "\"src\": 0", "\"src\": 9")),
             "step 0 (collective): field 'src': buffer id 9 is out of range "
             "(the entry has 6 buffers)");
  EXPECT_HAS(refusal(replace(meshPlan(), "\"dst\": 1", "\"dst\": -1")),
             "step 0 (collective): field 'dst': expected a non-negative "
             "integer");
}

TEST(MeshPlan, CollectiveBuffersShareADtype) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f64", {4});
  e.collective("all_gather", "", "dp", x, y);
  EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {1}))),
             "entry 'main': step 0 (collective): field 'dst': buffer 1 has "
             "dtype f64, src buffer 0 has f32");
}

TEST(MeshPlan, ReductionsAreOfFloats) {
  for (const char *dtype : {"i32", "i64", "i8"}) {
    SCOPED_TRACE(dtype);
    EntryBuilder e("main");
    int x = e.buffer(dtype, {4}), y = e.buffer(dtype, {4});
    e.collective("all_reduce", "max", "dp", x, y);
    EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {2}))),
               std::string("step 0 (collective): field 'src': buffer 0 has "
                           "dtype ") +
                   dtype + "; all_reduce reduces f32, f64, f16 and bf16");
  }
  for (const char *dtype : {"f64", "f16", "bf16"}) {
    EntryBuilder e("main");
    int x = e.buffer(dtype, {4}), y = e.buffer(dtype, {2});
    e.collective("reduce_scatter", "sum", "dp", x, y);
    EXPECT_TRUE(accepted(planJson({e}, "null", "null", meshJson({"dp"}, {2}))));
  }
  // Moving needs no arithmetic: any dtype.
  EntryBuilder e("main");
  int x = e.buffer("i64", {2}), y = e.buffer("i64", {4}),
      z = e.buffer("i64", {1});
  e.collective("all_gather", "", "dp", x, y);
  e.collective("rank_slice", "", "dp", x, z);
  EXPECT_TRUE(accepted(planJson({e}, "null", "null", meshJson({"dp"}, {2}))));
}

TEST(MeshPlan, AllReduceKeepsItsElementCount) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {2, 3});
  e.collective("all_reduce", "sum", "dp", x, y);
  EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {2}))),
             "step 0 (collective): field 'dst': buffer 1 holds 6 elements; "
             "all_reduce needs as many elements as src (4)");
}

TEST(MeshPlan, ReduceScatterDividesByTheRanks) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {6}), y = e.buffer("f32", {3});
  e.collective("reduce_scatter", "sum", "dp", x, y);
  std::string plan = planJson({e}, "null", "null", meshJson({"dp"}, {3}));
  EXPECT_HAS(refusal(plan),
             "step 0 (collective): field 'dst': buffer 1 holds 3 elements; "
             "reduce_scatter needs 1 / 3 (ranks of dp) of src's 6 elements");
  EXPECT_TRUE(accepted(replace(plan, "\"shape\": [3]}", "\"shape\": [2]}")));
}

TEST(MeshPlan, AllGatherMultipliesByTheRanks) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {2}), y = e.buffer("f32", {2, 3});
  e.collective("all_gather", "", "tp", x, y);
  EXPECT_HAS(
      refusal(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {3, 2}))),
      "step 0 (collective): field 'dst': buffer 1 holds 6 elements; "
      "all_gather needs 2 (ranks of tp) * 2 (src) elements");
}

TEST(MeshPlan, RankSliceDividesByTheRanks) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {1});
  e.collective("rank_slice", "", "dp", x, y);
  EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {2}))),
             "step 0 (collective): field 'dst': buffer 1 holds 1 elements; "
             "rank_slice needs 1 / 2 (ranks of dp) of src's 4 elements");
}

TEST(MeshPlan, CollectiveBuffersAreDisjoint) {
  // reduce_scatter into its own source's bytes.
  EntryBuilder e("main");
  int x = e.buffer("f32", {32});
  int y = e.bufferAt(64, "f32", {16});
  e.collective("reduce_scatter", "sum", "dp", x, y);
  EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {2}))),
             "step 0 (collective): field 'dst': buffer 1 overlaps src buffer "
             "0 (reduce_scatter needs disjoint buffers)");
  // An all_reduce between two partly overlapping buffers.
  EntryBuilder p("main");
  int a = p.buffer("f32", {32});
  int b = p.bufferAt(64, "f32", {32});
  p.collective("all_reduce", "sum", "dp", a, b);
  EXPECT_HAS(refusal(planJson({p}, "null", "null", meshJson({"dp"}, {2}))),
             "field 'dst': buffer 1 overlaps src buffer 0 without being the "
             "same bytes");
  // In place: one buffer, or two ids of the same bytes.
  EntryBuilder q("main");
  int c = q.buffer("f32", {32});
  int d = q.bufferAt(0, "f32", {4, 8});
  q.collective("all_reduce", "sum", "dp", c, c);
  q.collective("all_reduce", "mean", "dp", c, d);
  EXPECT_TRUE(accepted(planJson({q}, "null", "null", meshJson({"dp"}, {2}))));
}

TEST(MeshPlan, ShardIsAnObject) {
  EXPECT_HAS(refusal(replace(meshPlan(), shardJson("dp", {3}), "\"dp\"")),
             "entry 'main': input 1: field 'shard': expected an object, got "
             "string");
  // null: not sharded (the input and its new value alike).
  std::optional<Plan> plan =
      accepted(replace(replace(meshPlan(), shardJson("dp", {3}), "null"),
                       shardJson("dp", {3}), "null"));
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->entries[0].inputs[1].shard);
}

TEST(MeshPlan, ShardAxisIsAMeshAxis) {
  EXPECT_HAS(
      refusal(replace(meshPlan(), shardJson("dp", {3}), shardJson("tp", {3}))),
      "entry 'main': input 1: shard: field 'axis': 'tp' is not an axis "
      "of the mesh (dp)");
  EXPECT_HAS(
      refusal(replace(meshPlan(), shardJson("dp", {3}), "{\"shape\": [3]}")),
      "input 1: shard: missing field 'axis'");
}

TEST(MeshPlan, ShardShapeIsValid) {
  EXPECT_HAS(refusal(replace(meshPlan(), shardJson("dp", {3}),
                             "{\"axis\": \"dp\", \"shape\": [-3]}")),
             "input 1: shard: field 'shape': dimension 0 is not a "
             "non-negative integer");
  EXPECT_HAS(refusal(replace(meshPlan(), shardJson("dp", {3}),
                             "{\"axis\": \"dp\", \"shape\": 3}")),
             "input 1: shard: field 'shape': expected an array of dimensions");
  EXPECT_HAS(refusal(replace(meshPlan(), shardJson("dp", {3}),
                             shardJson("dp", {4611686018427387904, 4}))),
             "overflows a 64-bit byte size");
}

TEST(MeshPlan, ShardedBindingIsOneRanksSlice) {
  // ceil(5 / 2) = 3, not the buffer's 2.
  EXPECT_HAS(
      refusal(replace(meshPlan(), shardJson("dp", {3}), shardJson("dp", {5}))),
      "entry 'main': input 1: field 'shard': 'm' is f32 [2], but a "
      "shard of [5] over dp (2 ranks) is [3] (ceil(5 / 2))");
  // Not 1-D.
  EntryBuilder e("main");
  int m = e.buffer("f32", {1, 2});
  e.input("m", "state", m, shardJson("dp", {2, 2}));
  EXPECT_HAS(refusal(planJson({e}, "null", "null", meshJson({"dp"}, {2}))),
             "input 0: field 'shard': 'm' is f32 [1, 2], but a shard of [2, "
             "2] over dp (2 ranks) is [2]");
  // An axis of one rank: the whole tensor, flattened.
  EntryBuilder w("main");
  w.input("w", "param", w.buffer("f32", {6}), shardJson("dp", {2, 3}));
  EXPECT_TRUE(accepted(planJson({w}, "null", "null", meshJson({"dp"}, {1}))));
}

TEST(MeshPlan, ShardsAgreeAcrossEntries) {
  EntryBuilder other("other");
  other.input("m", "state", other.buffer("f32", {2}));
  EXPECT_HAS(refusal(planJson({meshEntry(), other}, "null", "null",
                              meshJson({"dp"}, {2}))),
             "entry 'other': state 'm' is f32 [2] but another entry has it "
             "as state f32 [2] (shard of [3] over dp)");
}

TEST(MeshPlan, NewValuesKeepTheirSharding) {
  std::string plan = meshPlan();
  size_t input = plan.find(shardJson("dp", {3}));
  size_t output = plan.find(shardJson("dp", {3}), input + 1);
  ASSERT_NE(output, std::string::npos);
  plan.replace(output, shardJson("dp", {3}).size(), "null");
  EXPECT_HAS(refusal(plan), "entry 'main': output 2: 'm' is f32 [2] but the "
                            "input of that name is f32 [2] (shard of [3] over "
                            "dp)");
}

TEST(MeshPlan, GradientsHaveTheWholeTypeOfTheirParam) {
  // ZeRO-3's param shard, its gradient whole: accepted.
  EntryBuilder e("forward_backward");
  e.input("w", "param", e.buffer("f32", {2}), shardJson("dp", {4}));
  int g = e.buffer("f32", {4});
  e.output("w", "grad", g);
  EXPECT_TRUE(accepted(planJson({e}, "null", "null", meshJson({"dp"}, {2}))));
  EntryBuilder bad("forward_backward");
  bad.input("w", "param", bad.buffer("f32", {2}), shardJson("dp", {4}));
  bad.output("w", "grad", bad.buffer("f32", {3}));
  EXPECT_HAS(refusal(planJson({bad}, "null", "null", meshJson({"dp"}, {2}))),
             "output 0: 'w' is f32 [3] but the input of that name is f32 [2] "
             "(shard of [4] over dp)");
}

TEST(MeshPlan, ParamsHoldWholeTensors) {
  TempDir dir;
  writeBytes(dir.file("plan.json"),
             planJson({meshEntry()}, "null", "\"params.safetensors\"",
                      meshJson({"dp"}, {2})));
  float values[3] = {1, 2, 3};
  SafetensorsWriter whole;
  whole.add("m", DType::F32, {3}, values, 12);
  std::string error;
  ASSERT_TRUE(whole.write(dir.file("params.safetensors"), &error)) << error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  EXPECT_EQ(artifact->initialState().at("m").shape, std::vector<int64_t>{3});
  // A shard in the file is refused: files hold whole tensors.
  SafetensorsWriter shard;
  shard.add("m", DType::F32, {2}, values, 8);
  ASSERT_TRUE(shard.write(dir.file("params.safetensors"), &error)) << error;
  EXPECT_FALSE(Artifact::load(dir.path(), &error));
  EXPECT_HAS(error, "params.safetensors: tensor 'm' is f32 [2], the plan "
                    "expects f32 [3] (whole; the plan shards it over dp) "
                    "(state input of entry 'main')");
}

//===----------------------------------------------------------------------===//
// Shards along a dimension
//===----------------------------------------------------------------------===//

/// `"shard"` along dimension `dim` (with `groups` when not empty).
std::string dimShard(const std::string &axis, const std::string &shape,
                     const std::string &dim, const std::string &groups = "") {
  return "{\"axis\": \"" + axis + "\", \"shape\": " + shape +
         ", \"dim\": " + dim +
         (groups.empty() ? std::string() : ", \"groups\": " + groups) + "}";
}

/// An entry taking param w, buffer `buffer`, with `shard`, and giving its
/// new value alike; mesh dp=2, tp=`tp`.
std::string dimPlan(const std::vector<int64_t> &buffer,
                    const std::string &shard, int64_t tp = 2) {
  EntryBuilder e("main");
  int w = e.buffer("f32", buffer);
  e.input("w", "param", w, shard);
  e.output("w", "output", w, shard);
  return planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, tp}));
}

TEST(MeshPlan, AcceptsShardsAlongADimension) {
  std::optional<Plan> plan =
      accepted(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "3")));
  ASSERT_TRUE(plan);
  const Binding &w = plan->entries[0].inputs[0];
  ASSERT_TRUE(w.shard);
  EXPECT_EQ(w.shard->axis, "tp");
  EXPECT_EQ(w.shard->ranks, 2);
  EXPECT_EQ(w.shard->dim, 1);
  EXPECT_EQ(w.shard->groups, 3);
  EXPECT_TRUE(w.shard->alongDim());
  EXPECT_EQ(w.wholeShape(), (std::vector<int64_t>{2, 6}));
  EXPECT_EQ(w.wholeBytes(), 48u);
  EXPECT_EQ(describeBinding(w),
            "f32 [2, 3] (shard of [2, 6] over tp, dim 1, 3 groups)");
  EXPECT_EQ(plan->mesh->axesLargerThanOne(), 2);
  // groups defaults to 1; dim 0; a null groups is absent.
  plan = accepted(dimPlan({3, 6}, dimShard("dp", "[6, 6]", "0")));
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->entries[0].inputs[0].shard->groups, 1);
  EXPECT_EQ(describeBinding(plan->entries[0].inputs[0]),
            "f32 [3, 6] (shard of [6, 6] over dp, dim 0)");
  EXPECT_TRUE(accepted(dimPlan({3, 6}, dimShard("dp", "[6, 6]", "0", "null"))));
  // Flat shards keep dim -1.
  plan = accepted(meshPlan());
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->entries[0].inputs[1].shard->dim, -1);
  EXPECT_FALSE(plan->entries[0].inputs[1].shard->alongDim());
  // An axis of one rank: the whole shape.
  EXPECT_TRUE(accepted(dimPlan({2, 6}, dimShard("tp", "[2, 6]", "1", "3"), 1)));
}

TEST(MeshPlan, ShardDimIsADimensionOfTheShape) {
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "2"))),
             "entry 'main': input 0: shard: field 'dim': 2 is not a "
             "dimension of [2, 6] (expected 0 to 1)");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "-1"))),
             "input 0: shard: field 'dim': -1 is not a dimension of [2, 6]");
  EXPECT_HAS(refusal(dimPlan({}, dimShard("tp", "[]", "0"))),
             "input 0: shard: field 'dim': 0 is not a dimension of [] (a 0-D "
             "tensor has none)");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "\"1\""))),
             "input 0: shard: field 'dim': expected an integer, got string");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1.0"))),
             "input 0: shard: field 'dim': expected an integer");
}

TEST(MeshPlan, ShardGroupsArePositiveAndNeedADim) {
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "0"))),
             "entry 'main': input 0: shard: field 'groups': expected at "
             "least 1 group, got 0");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "-3"))),
             "field 'groups': expected at least 1 group, got -3");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "true"))),
             "field 'groups': expected an integer, got boolean");
  EXPECT_HAS(refusal(dimPlan({6}, "{\"axis\": \"tp\", \"shape\": [2, "
                                  "6], \"groups\": 3}")),
             "entry 'main': input 0: shard: field 'groups': groups without "
             "'dim': only a shard along a dimension has groups");
}

TEST(MeshPlan, ShardDimSplitsIntoGroupsOfRanksBlocks) {
  // 6 columns: 3 groups of 2, but 4 groups do not divide them, nor do 2
  // groups of 3 columns split over 2 ranks.
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "4"))),
             "entry 'main': input 0: shard: field 'dim': dimension 1 of [2, "
             "6] (6) does not split into 4 groups of 2 equal blocks (one per "
             "rank of tp)");
  EXPECT_HAS(refusal(dimPlan({2, 3}, dimShard("tp", "[2, 6]", "1", "2"))),
             "dimension 1 of [2, 6] (6) does not split into 2 groups of 2 "
             "equal blocks");
  EXPECT_HAS(refusal(dimPlan({1, 6}, dimShard("tp", "[3, 6]", "0"))),
             "dimension 0 of [3, 6] (3) does not split into 1 group of 2 "
             "equal blocks");
}

TEST(MeshPlan, DimShardedBindingIsTheRanksBlocks) {
  // The shard of [2, 6] along dim 1 over 2 ranks is [2, 3].
  EXPECT_HAS(refusal(dimPlan({2, 6}, dimShard("tp", "[2, 6]", "1", "3"))),
             "entry 'main': input 0: field 'shard': 'w' is f32 [2, 6], but a "
             "shard of [2, 6] along dim 1 over tp (2 ranks) is [2, 3]");
  EXPECT_HAS(refusal(dimPlan({6}, dimShard("tp", "[2, 6]", "1"))),
             "'w' is f32 [6], but a shard of [2, 6] along dim 1 over tp (2 "
             "ranks) is [2, 3]");
  // Not flattened: [k] of the flat form is refused along a dimension.
  EXPECT_HAS(refusal(dimPlan({1, 6}, dimShard("tp", "[2, 6]", "1"))),
             "is [2, 3]");
}

TEST(MeshPlan, DimShardsAgreeAcrossEntries) {
  // The same buffer shape, another number of groups.
  EntryBuilder a("a"), b("b");
  a.input("w", "param", a.buffer("f32", {2, 3}),
          dimShard("tp", "[2, 6]", "1", "3"));
  b.input("w", "param", b.buffer("f32", {2, 3}), dimShard("tp", "[2, 6]", "1"));
  EXPECT_HAS(
      refusal(planJson({a, b}, "null", "null", meshJson({"dp", "tp"}, {2, 2}))),
      "entry 'b': param 'w' is f32 [2, 3] (shard of [2, 6] over tp, "
      "dim 1) but another entry has it as param f32 [2, 3] (shard of "
      "[2, 6] over tp, dim 1, 3 groups)");
  // Sharded by dim in one entry, whole in another.
  EntryBuilder c("c");
  c.input("w", "param", c.buffer("f32", {2, 6}));
  EXPECT_HAS(
      refusal(planJson({a, c}, "null", "null", meshJson({"dp", "tp"}, {2, 2}))),
      "entry 'c': param 'w' is f32 [2, 6] but another entry has it "
      "as param f32 [2, 3] (shard of [2, 6] over tp, dim 1, 3 "
      "groups)");
  // Alike everywhere: accepted.
  EntryBuilder d("d");
  d.input("w", "param", d.buffer("f32", {2, 3}),
          dimShard("tp", "[2, 6]", "1", "3"));
  EXPECT_TRUE(accepted(
      planJson({a, d}, "null", "null", meshJson({"dp", "tp"}, {2, 2}))));
}

TEST(MeshPlan, DimShardsNewValuesKeepTheirSharding) {
  EntryBuilder e("main");
  int w = e.buffer("f32", {2, 3});
  e.input("w", "param", w, dimShard("tp", "[2, 6]", "1", "3"));
  e.output("w", "output", w, dimShard("tp", "[2, 6]", "1"));
  EXPECT_HAS(
      refusal(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2}))),
      "entry 'main': output 0: 'w' is f32 [2, 3] (shard of [2, 6] over "
      "tp, dim 1) but the input of that name is f32 [2, 3] (shard of "
      "[2, 6] over tp, dim 1, 3 groups)");
}

TEST(MeshPlan, DimShardedParamsAreWholeInTheFile) {
  TempDir dir;
  EntryBuilder e("main");
  int w = e.buffer("f32", {2, 3});
  e.input("w", "param", w, dimShard("tp", "[2, 6]", "1", "3"));
  e.output("w", "output", w, dimShard("tp", "[2, 6]", "1", "3"));
  writeBytes(dir.file("plan.json"),
             planJson({e}, "null", "\"params.safetensors\"",
                      meshJson({"dp", "tp"}, {2, 2})));
  float values[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  SafetensorsWriter whole;
  whole.add("w", DType::F32, {2, 6}, values, 48);
  std::string error;
  ASSERT_TRUE(whole.write(dir.file("params.safetensors"), &error)) << error;
  std::unique_ptr<Artifact> artifact = Artifact::load(dir.path(), &error);
  ASSERT_TRUE(artifact) << error;
  EXPECT_EQ(artifact->initialState().at("w").shape,
            (std::vector<int64_t>{2, 6}));
  SafetensorsWriter shard;
  shard.add("w", DType::F32, {2, 3}, values, 24);
  ASSERT_TRUE(shard.write(dir.file("params.safetensors"), &error)) << error;
  EXPECT_FALSE(Artifact::load(dir.path(), &error));
  EXPECT_HAS(error, "params.safetensors: tensor 'w' is f32 [2, 3], the plan "
                    "expects f32 [2, 6] (whole; the plan shards it over tp) "
                    "(param input of entry 'main')");
}

// Random damage to a mesh plan gives an error or a plan, never a crash (a
// mesh axis of size 0 once divided by zero).
TEST(MeshPlan, SurvivesRandomMutations) {
  std::string base = meshPlan();
  std::mt19937 rng(2024);
  const char alphabet[] = "{}[]\":,-0123456789e.tfnul \\x";
  for (int i = 0; i < 3000; ++i) {
    std::string text = base;
    for (int e = 1 + int(rng() % 4); e > 0; --e) {
      size_t at = rng() % text.size();
      if (rng() % 2)
        text[at] = alphabet[rng() % (sizeof(alphabet) - 1)];
      else
        text.erase(at, 1 + rng() % 8);
    }
    std::string error;
    if (!parsePlan(text, "plan.json", &error))
      EXPECT_FALSE(error.empty());
  }
}

} // namespace
} // namespace loomrt::test
