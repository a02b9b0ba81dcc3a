//===- MeshTest.cpp - Collective steps, shards and mesh plans, one process ===//
//
// What needs no second process: the shard helpers (with counts the ranks
// do not divide); plans of one rank, whose collectives are copies; the
// overlap of collectives with the steps after them, against a fake peer
// whose data arrives only when the run waits (a step that read a result
// too early would see the old values); the messages for a world that does
// not fit the mesh; and training a mesh plan of one rank, which must match
// the plain artifact bit for bit, checkpoints crossing between the two.
// MeshMpiTest.cpp runs the same on 2 and 4 ranks under mpirun.
//
//===----------------------------------------------------------------------===//

#include "Fixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Collectives.h"
#include "loomrt/Mesh.h"
#include "loomrt/Trainer.h"

#include <gtest/gtest.h>

#include <functional>

namespace loomrt::test {
namespace {

#define EXPECT_HAS(message, text)                                              \
  EXPECT_NE((message).find(text), std::string::npos) << "message: " << (message)

//===----------------------------------------------------------------------===//
// Shards
//===----------------------------------------------------------------------===//

NpyArray iota(DType dtype, std::vector<int64_t> shape) {
  NpyArray a = makeArray(dtype, std::move(shape), nullptr);
  size_t size = dtypeSize(dtype);
  for (size_t i = 0; i < a.data.size() / size; ++i)
    a.data[i * size] = uint8_t(i + 1); // little-endian: the low byte
  return a;
}

TEST(Shards, ShardElementsRoundUp) {
  EXPECT_EQ(shardElements(8, 4), 2u);
  EXPECT_EQ(shardElements(7, 3), 3u);
  EXPECT_EQ(shardElements(1, 4), 1u);
  EXPECT_EQ(shardElements(0, 4), 0u);
  EXPECT_EQ(shardElements(5, 1), 5u);
}

TEST(Shards, SliceZeroPadsTheLastRanks) {
  // 7 elements over 3 ranks: k = 3, rank 2 holds one and two zeros.
  NpyArray whole = f32Array({7}, {1, 2, 3, 4, 5, 6, 7});
  const std::vector<float> expected[3] = {{1, 2, 3}, {4, 5, 6}, {7, 0, 0}};
  std::string error;
  for (int r = 0; r < 3; ++r) {
    NpyArray shard;
    ASSERT_TRUE(sliceShard(whole, 3, r, &shard, &error)) << error;
    EXPECT_EQ(shard.shape, std::vector<int64_t>{3});
    EXPECT_EQ(f32Values(shard), expected[r]);
  }
  // 2 x 3 over 4 ranks: k = 2, rank 3 all padding.
  NpyArray matrix = f32Array({2, 3}, {1, 2, 3, 4, 5, 6});
  NpyArray last;
  ASSERT_TRUE(sliceShard(matrix, 4, 3, &last, &error)) << error;
  EXPECT_EQ(f32Values(last), (std::vector<float>{0, 0}));
  EXPECT_FALSE(sliceShard(matrix, 4, 4, &last, &error));
  EXPECT_HAS(error, "rank 4 is not in [0, 4)");
}

TEST(Shards, JoinDropsThePadding) {
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::U8}) {
    for (int ranks : {1, 2, 3, 4, 5}) {
      SCOPED_TRACE(std::string(dtypeToShortName(dtype)) + " over " +
                   std::to_string(ranks));
      NpyArray whole = iota(dtype, {2, 5});
      NpyArray gathered;
      gathered.dtype = dtype;
      std::string error;
      for (int r = 0; r < ranks; ++r) {
        NpyArray shard;
        ASSERT_TRUE(sliceShard(whole, ranks, r, &shard, &error)) << error;
        ASSERT_EQ(shard.shape[0], int64_t(shardElements(10, ranks)));
        gathered.data.insert(gathered.data.end(), shard.data.begin(),
                             shard.data.end());
      }
      NpyArray back;
      ASSERT_TRUE(joinShards(gathered, {2, 5}, &back, &error)) << error;
      EXPECT_EQ(back.shape, (std::vector<int64_t>{2, 5}));
      EXPECT_EQ(back.data, whole.data);
    }
  }
  NpyArray tooFew = f32Array({3}, {1, 2, 3}), out;
  std::string error;
  EXPECT_FALSE(joinShards(tooFew, {2, 2}, &out, &error));
  EXPECT_HAS(error, "the gathered shards hold 12 bytes, fewer than f32 [2, 2]");
}

TEST(Shards, TensorsOfAMeshOfOneRankAreFlattened) {
  EntryBuilder e("main");
  e.input("w", "param", e.buffer("f32", {6}), shardJson("dp", {2, 3}));
  e.input("b", "param", e.buffer("f32", {3}));
  std::string error;
  std::optional<Plan> plan =
      parsePlan(planJson({e}, "null", "null", meshJson({"dp"}, {1})),
                "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  std::map<std::string, NpyArray> tensors;
  tensors["w"] = f32Array({2, 3}, {1, 2, 3, 4, 5, 6});
  tensors["b"] = f32Array({3}, {7, 8, 9});
  ASSERT_TRUE(shardTensors(*plan, nullptr, tensors, &error)) << error;
  EXPECT_EQ(tensors["w"].shape, std::vector<int64_t>{6});
  EXPECT_EQ(tensors["b"].shape, std::vector<int64_t>{3});
  ASSERT_TRUE(gatherTensors(*plan, nullptr, tensors, &error)) << error;
  EXPECT_EQ(tensors["w"].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f32Values(tensors["w"]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // A shard's whole tensor of the wrong shape.
  tensors["w"] = f32Array({6}, {1, 2, 3, 4, 5, 6});
  EXPECT_FALSE(shardTensors(*plan, nullptr, tensors, &error));
  EXPECT_HAS(error, "tensor 'w' is f32 [6], expected the whole f32 [2, 3]");
  // Two ranks' shards need two ranks.
  plan = parsePlan(planJson({e}, "null", "null", meshJson({"dp"}, {2})),
                   "plan.json", &error);
  ASSERT_FALSE(plan); // [6] is not a shard of [2, 3] over 2 ranks
}

//===----------------------------------------------------------------------===//
// A fake world
//===----------------------------------------------------------------------===//

/// Rank `rank` of `size` ranks (f32 only), where rank s holds this rank's
/// values plus (s - rank), element by element. Nothing moves until a
/// request is waited for; test() never completes one. Records, for every
/// wait, how many test() calls came before it.
class FakeWorld final : public Collectives {
public:
  FakeWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  int localRank() const noexcept override { return rank_; }
  const char *name() const noexcept override { return "fake"; }

  std::unique_ptr<Request> allReduce(void *data, size_t count, DType dtype,
                                     ReduceOp op,
                                     std::string *error) noexcept override {
    auto *v = static_cast<float *>(data);
    return request(dtype, error, [=] {
      for (size_t i = 0; i < count; ++i) {
        float sum = 0, max = -1e30f;
        for (int s = 0; s < size_; ++s) {
          sum += v[i] + float(s - rank_);
          max = std::max(max, v[i] + float(s - rank_));
        }
        v[i] = op == ReduceOp::Max   ? max
               : op == ReduceOp::Avg ? sum / float(size_)
                                     : sum;
      }
    });
  }
  std::unique_ptr<Request> reduceScatter(const void *send, void *recv,
                                         size_t count, DType dtype, ReduceOp op,
                                         std::string *error) noexcept override {
    const float *in = static_cast<const float *>(send) + count * rank_;
    auto *out = static_cast<float *>(recv);
    return request(dtype, error, [=] {
      for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int s = 0; s < size_; ++s)
          sum += in[i] + float(s - rank_);
        out[i] = op == ReduceOp::Avg ? sum / float(size_) : sum;
      }
    });
  }
  std::unique_ptr<Request> allGather(const void *send, void *recv, size_t count,
                                     DType dtype,
                                     std::string *error) noexcept override {
    const auto *in = static_cast<const float *>(send);
    auto *out = static_cast<float *>(recv);
    return request(dtype, error, [=] {
      for (int s = 0; s < size_; ++s)
        for (size_t i = 0; i < count; ++i)
          out[s * count + i] = in[i] + float(s - rank_);
    });
  }
  std::unique_ptr<Request> broadcast(void *, size_t, DType, int,
                                     std::string *error) noexcept override {
    return refuse(error);
  }
  std::unique_ptr<Request> allToAll(const void *, void *, size_t, DType,
                                    std::string *error) noexcept override {
    return refuse(error);
  }
  std::unique_ptr<Request> send(const void *, size_t, DType, int, int,
                                std::string *error) noexcept override {
    return refuse(error);
  }
  std::unique_ptr<Request> recv(void *, size_t, DType, int, int,
                                std::string *error) noexcept override {
    return refuse(error);
  }
  bool barrier(std::string *) noexcept override { return true; }

  std::vector<int> testsBeforeWait; ///< one entry per completed request
  int issued = 0;

private:
  class FakeRequest final : public Request {
  public:
    FakeRequest(FakeWorld &world, std::function<void()> move)
        : world(world), move(std::move(move)) {}
    bool wait(std::string *) noexcept override {
      if (move) {
        move();
        move = nullptr;
        world.testsBeforeWait.push_back(tests);
      }
      return true;
    }
    bool test(bool *complete, std::string *) noexcept override {
      ++tests;
      *complete = !move;
      return true;
    }

  private:
    FakeWorld &world;
    std::function<void()> move;
    int tests = 0;
  };

  std::unique_ptr<Request> request(DType dtype, std::string *error,
                                   std::function<void()> move) {
    if (dtype != DType::F32)
      return refuse(error);
    ++issued;
    return std::make_unique<FakeRequest>(*this, std::move(move));
  }
  std::unique_ptr<Request> refuse(std::string *error) {
    *error = "not faked";
    return nullptr;
  }
  int rank_, size_;
};

/// Loads `plan` (the test kernels beside it) from a fresh directory.
struct Loaded {
  TempDir dir;
  std::unique_ptr<Artifact> artifact;
};
std::unique_ptr<Loaded> load(const std::string &plan,
                             const LoadOptions &options = {}) {
  auto loaded = std::make_unique<Loaded>();
  writeBytes(loaded->dir.file("plan.json"), plan);
  EXPECT_TRUE(installKernels(loaded->dir.path()));
  std::string error;
  loaded->artifact = Artifact::load(loaded->dir.path(), options, &error);
  EXPECT_TRUE(loaded->artifact) << error;
  return loaded;
}

std::vector<float> plus(const std::vector<float> &v, float a, float m = 1) {
  std::vector<float> out;
  for (float x : v)
    out.push_back(m * x + a);
  return out;
}

//===----------------------------------------------------------------------===//
// Plans of one rank: collectives are copies
//===----------------------------------------------------------------------===//

TEST(MeshRun, OneRankRunsCollectivesAsCopies) {
  // No kernels at all: collective and copy steps only.
  EntryBuilder e("main");
  int x = e.buffer("f32", {2, 3});
  int a = e.buffer("f32", {6});
  int s = e.buffer("f32", {6});
  int g = e.buffer("f32", {6});
  int t = e.buffer("f32", {6});
  int m = e.buffer("f32", {6});
  int c = e.buffer("f32", {3, 2});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, a);
  e.collective("all_reduce", "mean", "dp", a, a); // in place
  e.collective("reduce_scatter", "mean", "dp", a, s);
  e.collective("all_gather", "", "dp", s, g);
  e.collective("rank_slice", "", "dp", g, t);
  e.collective("all_reduce", "max", "dp", t, m);
  e.copy(m, c);
  e.output("g", "output", g);
  e.output("c", "output", c);
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "null", "null", meshJson({"dp"}, {1})));
  ASSERT_TRUE(l->artifact);
  std::vector<float> values = {1, -2, 3.5f, 4, 5, -6};
  NpyArray in = f32Array({2, 3}, values);
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", {{"x", &in}}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), values);
  EXPECT_EQ(out[1].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(f32Values(out[1]), values);
}

//===----------------------------------------------------------------------===//
// Overlap: what waits for a pending collective, and what does not
//===----------------------------------------------------------------------===//

/// dp=2: a = all_reduce sum x; two kernels that do not touch a; then a
/// copy out of a's bytes through another buffer id (the memory planner's
/// reuse), which must see the reduced values.
std::string overlapPlan() {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4});
  int a = e.buffer("f32", {4}); // bytes [64, 80)
  int z = e.buffer("f32", {1});
  int z2 = e.buffer("f32", {1});
  int y = e.buffer("f32", {4});
  int alias = e.bufferAt(64, "f32", {2, 2});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, a);
  e.kernel("fill_seven", {z});
  e.kernel("fill_seven", {z2});
  e.copy(alias, y);
  e.output("y", "output", y);
  e.output("z", "output", z);
  return planJson({e}, "\"kernels.so\"", "null", meshJson({"dp"}, {2}));
}

TEST(MeshRun, AStepTouchingAPendingCollectiveWaitsForIt) {
  std::unique_ptr<Loaded> l = load(overlapPlan());
  ASSERT_TRUE(l->artifact);
  FakeWorld world(0, 2);
  l->artifact->setCollectives(&world);
  NpyArray x = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", {{"x", &x}}, &out, &error)) << error;
  // Rank 1 holds x + 1: the sum is 2x + 1, read through the alias.
  EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, 1, 2));
  // In flight through the two kernels that do not touch it (tested after
  // steps 0, 1 and 2), waited for before the copy.
  EXPECT_EQ(world.testsBeforeWait, std::vector<int>{3});
}

TEST(MeshRun, PendingCollectivesAreWaitedForAtTheEnd) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4});
  int a = e.buffer("f32", {4});
  int z = e.buffer("f32", {1});
  e.input("x", "input", x);
  e.collective("all_reduce", "max", "dp", x, a);
  e.kernel("fill_seven", {z});
  e.output("a", "output", a);
  e.output("z", "output", z);
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "\"kernels.so\"", "null", meshJson({"dp"}, {2})));
  ASSERT_TRUE(l->artifact);
  FakeWorld world(0, 2);
  l->artifact->setCollectives(&world);
  NpyArray in = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", {{"x", &in}}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, 1));
  EXPECT_EQ(world.testsBeforeWait, std::vector<int>{2});
}

TEST(MeshRun, ProfilingWaitsWithinTheStep) {
  LoadOptions options;
  options.profile = true;
  std::unique_ptr<Loaded> l = load(overlapPlan(), options);
  ASSERT_TRUE(l->artifact);
  FakeWorld world(0, 2);
  l->artifact->setCollectives(&world);
  NpyArray x = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", {{"x", &x}}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, 1, 2));
  EXPECT_EQ(world.testsBeforeWait, std::vector<int>{0});
  std::vector<StepProfile> profile = l->artifact->profile();
  ASSERT_EQ(profile.size(), 4u);
  EXPECT_EQ(profile[0].kind, PlanStep::Kind::Collective);
  EXPECT_EQ(profile[0].what, "all_reduce sum 4 f32 over dp=2");
}

TEST(MeshRun, EachRankTakesItsBlock) {
  // Rank 1 of 2: the second block of every split.
  EntryBuilder e("main");
  int x = e.buffer("f32", {4});
  int s = e.buffer("f32", {2});
  int g = e.buffer("f32", {4});
  int t = e.buffer("f32", {2});
  int m = e.buffer("f32", {4});
  e.input("x", "input", x);
  e.collective("reduce_scatter", "sum", "dp", x, s);
  e.collective("all_gather", "", "dp", s, g);
  e.collective("rank_slice", "", "dp", x, t);
  e.collective("all_reduce", "mean", "dp", x, m);
  e.output("s", "output", s);
  e.output("g", "output", g);
  e.output("t", "output", t);
  e.output("m", "output", m);
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "null", "null", meshJson({"dp"}, {2})));
  ASSERT_TRUE(l->artifact);
  FakeWorld world(1, 2);
  l->artifact->setCollectives(&world);
  NpyArray in = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", {{"x", &in}}, &out, &error)) << error;
  // Block 1 of x is {3, 4}; rank 0 holds it minus 1.
  EXPECT_EQ(f32Values(out[0]), (std::vector<float>{5, 7}));
  EXPECT_EQ(f32Values(out[1]), (std::vector<float>{4, 6, 5, 7}));
  EXPECT_EQ(f32Values(out[2]), (std::vector<float>{3, 4}));
  EXPECT_EQ(f32Values(out[3]), plus({1, 2, 3, 4}, -0.5f));
  EXPECT_EQ(world.issued, 3); // rank_slice moves nothing between ranks
}

//===----------------------------------------------------------------------===//
// A world that does not fit the mesh
//===----------------------------------------------------------------------===//

TEST(MeshRun, AnEntryThatCommunicatesNeedsEveryRank) {
  std::unique_ptr<Loaded> l = load(overlapPlan());
  ASSERT_TRUE(l->artifact);
  NpyArray x = f32Array({4}, {1, 2, 3, 4});
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(l->artifact->run("main", {{"x", &x}}, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_EQ(error, "entry 'main' was compiled for 2 ranks (mesh dp=2); this "
                   "run has 1 process: launch it with mpirun -np 2");
  FakeWorld four(0, 4);
  l->artifact->setCollectives(&four);
  EXPECT_FALSE(l->artifact->run("main", {{"x", &x}}, nullptr, &error, &code));
  EXPECT_HAS(error, "this run has 4 processes: launch it with mpirun -np 2");
  EXPECT_EQ(four.issued, 0);
}

TEST(MeshRun, EntriesThatDoNotCommunicateRunAnywhere) {
  EntryBuilder e("main");
  int z = e.buffer("f32", {1});
  e.kernel("fill_seven", {z});
  e.output("z", "output", z);
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "\"kernels.so\"", "null", meshJson({"dp"}, {4})));
  ASSERT_TRUE(l->artifact);
  std::vector<NpyArray> out;
  std::string error;
  ASSERT_TRUE(l->artifact->run("main", std::vector<TensorRef>{}, &out, &error))
      << error;
  EXPECT_EQ(f32Values(out[0]), std::vector<float>{7});
}

TEST(MeshRun, TwoAxesLargerThanOneAreNotSupportedYet) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {4});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, y);
  e.output("y", "output", y);
  // Parsed and loaded...
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})));
  ASSERT_TRUE(l->artifact);
  // ...but not run.
  FakeWorld world(0, 4);
  l->artifact->setCollectives(&world);
  NpyArray x4 = f32Array({4}, {1, 2, 3, 4});
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(l->artifact->run("main", {{"x", &x4}}, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_HAS(error, "entry 'main' was compiled for the mesh dp=2, tp=2: a "
                    "mesh of more than one axis larger than 1");
  EXPECT_HAS(error, "is not supported yet");
  // One axis larger than 1 among others of size 1 runs.
  std::unique_ptr<Loaded> ok =
      load(planJson({e}, "null", "null", meshJson({"tp", "dp"}, {1, 2})));
  ASSERT_TRUE(ok->artifact);
  FakeWorld two(0, 2);
  ok->artifact->setCollectives(&two);
  std::vector<NpyArray> out;
  ASSERT_TRUE(ok->artifact->run("main", {{"x", &x4}}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, 1, 2));
}

//===----------------------------------------------------------------------===//
// Training a mesh plan on one rank
//===----------------------------------------------------------------------===//

class MeshTraining : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(dir.ok());
    dataPath = dir.file("data.npz");
    ASSERT_TRUE(writeRegressionData(dataPath, 40));
  }
  std::unique_ptr<Artifact> artifact(const std::string &name, int ranks,
                                     int zero) {
    std::string path = dir.file(name);
    std::filesystem::create_directories(path);
    bool written = zero ? writeMeshRegressionArtifact(path, ranks, zero)
                        : writeRegressionArtifact(path);
    EXPECT_TRUE(written);
    std::string error;
    std::unique_ptr<Artifact> a = Artifact::load(path, &error);
    EXPECT_TRUE(a) << error;
    return a;
  }
  TrainOptions options(int64_t steps) const {
    TrainOptions o;
    o.dataPath = dataPath;
    o.steps = steps;
    o.progress = ProgressMode::None;
    return o;
  }
  TempDir dir;
  std::string dataPath;
};

TEST_F(MeshTraining, OneRankMatchesThePlainArtifactBitwise) {
  std::unique_ptr<Artifact> plain = artifact("plain.loom", 1, 0);
  ASSERT_TRUE(plain);
  TrainResult reference;
  std::string error;
  TrainOptions o = options(6);
  o.evalDataPath = dataPath;
  ASSERT_TRUE(train(*plain, o, &reference, &error)) << error;
  for (int zero : {1, 2, 3}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    std::unique_ptr<Artifact> mesh =
        artifact("zero" + std::to_string(zero) + ".loom", 1, zero);
    ASSERT_TRUE(mesh);
    TrainOptions m = options(6);
    m.evalDataPath = dataPath;
    m.saveParamsPath = dir.file("params" + std::to_string(zero));
    TrainResult result;
    ASSERT_TRUE(train(*mesh, m, &result, &error)) << error;
    EXPECT_EQ(result.lastLoss, reference.lastLoss);
    // Whole tensors come back, equal bit for bit.
    for (const auto &[name, t] : reference.tensors) {
      ASSERT_TRUE(result.tensors.count(name)) << name;
      EXPECT_EQ(result.tensors.at(name).shape, t.shape) << name;
      EXPECT_EQ(result.tensors.at(name).data, t.data) << name;
    }
    std::unique_ptr<SafetensorsFile> saved =
        SafetensorsFile::open(m.saveParamsPath, &error);
    ASSERT_TRUE(saved) << error;
    ASSERT_TRUE(saved->find("w"));
    EXPECT_EQ(saved->find("w")->shape, (std::vector<int64_t>{kFeatures, 1}));
  }
}

TEST_F(MeshTraining, CheckpointsCrossBetweenShardedAndWhole) {
  std::unique_ptr<Artifact> plain = artifact("plain.loom", 1, 0);
  std::unique_ptr<Artifact> zero3 = artifact("zero3.loom", 1, 3);
  ASSERT_TRUE(plain && zero3);
  std::string error;
  TrainResult straight;
  ASSERT_TRUE(train(*plain, options(8), &straight, &error)) << error;

  // zero 3 to step 4 (a checkpoint of whole tensors), plain on to 8.
  TrainOptions first = options(4);
  first.checkpointDir = dir.file("ckpt-zero3");
  ASSERT_TRUE(train(*zero3, first, nullptr, &error)) << error;
  std::map<std::string, NpyArray> saved;
  ASSERT_TRUE(loadCheckpoint(first.checkpointDir + "/" + checkpointFileName(4),
                             *plain, &saved, nullptr, &error))
      << error;
  EXPECT_EQ(saved.at("w.momentum").shape, (std::vector<int64_t>{kFeatures, 1}));
  TrainOptions second = options(8);
  second.resumePath = first.checkpointDir;
  TrainResult resumed;
  ASSERT_TRUE(train(*plain, second, &resumed, &error)) << error;
  for (const auto &[name, t] : straight.tensors)
    EXPECT_EQ(resumed.tensors.at(name).data, t.data) << name;

  // And back: plain to 4, zero 3 on to 8.
  first.checkpointDir = dir.file("ckpt-plain");
  ASSERT_TRUE(train(*plain, first, nullptr, &error)) << error;
  second.resumePath = first.checkpointDir;
  ASSERT_TRUE(train(*zero3, second, &resumed, &error)) << error;
  for (const auto &[name, t] : straight.tensors)
    EXPECT_EQ(resumed.tensors.at(name).data, t.data) << name;

  // The starting tensors of an embedder are whole too.
  TrainOptions fromMemory = options(8);
  fromMemory.startTensors = &straight.tensors;
  fromMemory.startPosition = straight.position;
  ASSERT_TRUE(train(*zero3, fromMemory, &resumed, &error)) << error;
  EXPECT_EQ(resumed.finalStep, 8);
  EvalResult eval;
  ASSERT_TRUE(evaluate(*zero3, straight.tensors, dataPath, 8, &eval, &error))
      << error;
  EXPECT_TRUE(eval.haveLoss);
}

TEST_F(MeshTraining, AMeshOfSeveralRanksNeedsThem) {
  std::unique_ptr<Artifact> two = artifact("two.loom", 2, 1);
  ASSERT_TRUE(two);
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(train(*two, options(2), nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::InvalidArgument);
  EXPECT_EQ(error, "the artifact was compiled for 2 ranks (mesh dp=2); this "
                   "run has 1 process: launch it with mpirun -np 2");
  // One rank's plan under a launcher of two.
  std::unique_ptr<Artifact> one = artifact("one.loom", 1, 1);
  ASSERT_TRUE(one);
  FakeWorld world(0, 2);
  TrainOptions o = options(2);
  o.collectives = &world;
  EXPECT_FALSE(train(*one, o, nullptr, &error, &code));
  EXPECT_EQ(error, "the artifact was compiled for 1 rank (mesh dp=1); this "
                   "run has 2 processes: run it as one process, without "
                   "mpirun");
  EXPECT_EQ(one->collectives(), nullptr); // handed back
}

// Accumulation on a mesh runs the plan's apply_gradients; a plan without
// one is refused before the first step.
TEST_F(MeshTraining, AccumulationNeedsApplyGradients) {
  std::unique_ptr<Artifact> one = artifact("one.loom", 1, 2);
  ASSERT_TRUE(one);
  TrainOptions o = options(2);
  o.accumulate = 2;
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(train(*one, o, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_HAS(error, "--accumulate 2 with an artifact compiled for a mesh "
                    "(mesh dp=1) needs its entry 'apply_gradients'");
}

} // namespace
} // namespace loomrt::test
