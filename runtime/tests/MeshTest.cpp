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

/// f32 values 1, 2, ... in row-major order, shaped `shape`.
NpyArray counting(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(i + 1);
  return f32Array(std::move(shape), v);
}

/// One case of a shard along a dimension: the whole tensor counting(shape)
/// and, for each rank, the values its shard holds, written out by hand
/// from the definition (docs/plan-format.md, "Shards").
struct DimCase {
  std::vector<int64_t> shape;
  int64_t dim, groups;
  std::vector<int64_t> shardShape;
  std::vector<std::vector<float>> perRank;
};

TEST(Shards, AlongADimensionEachRankTakesItsBlockOfEveryGroup) {
  const std::vector<DimCase> cases = {
      // [[1 2 3 4], [5 6 7 8]] by columns over 2 ranks.
      {{2, 4}, 1, 1, {2, 2}, {{1, 2, 5, 6}, {3, 4, 7, 8}}},
      // [4, 2] by rows over 4 ranks: row r each.
      {{4, 2}, 0, 1, {1, 2}, {{1, 2}, {3, 4}, {5, 6}, {7, 8}}},
      // [2, 6] by columns, 3 groups of 2 columns over 2 ranks: rank 0 the
      // columns 0, 2, 4, rank 1 the columns 1, 3, 5 (a fused QKV weight).
      {{2, 6}, 1, 3, {2, 3}, {{1, 3, 5, 7, 9, 11}, {2, 4, 6, 8, 10, 12}}},
      // [6, 2] by rows, 3 groups of 2 rows over 2 ranks: rows 0, 2, 4 and
      // rows 1, 3, 5.
      {{6, 2}, 0, 3, {3, 2}, {{1, 2, 5, 6, 9, 10}, {3, 4, 7, 8, 11, 12}}},
      // [2, 12] by columns, 3 groups of 4 over 4 ranks: rank r the
      // columns r, 4 + r, 8 + r.
      {{2, 12},
       1,
       3,
       {2, 3},
       {{1, 5, 9, 13, 17, 21},
        {2, 6, 10, 14, 18, 22},
        {3, 7, 11, 15, 19, 23},
        {4, 8, 12, 16, 20, 24}}},
      // [12, 1] by rows, 3 groups of 4 over 4 ranks.
      {{12, 1}, 0, 3, {3, 1}, {{1, 5, 9}, {2, 6, 10}, {3, 7, 11}, {4, 8, 12}}},
      // [8] over 4 ranks, one group: 2 consecutive elements each.
      {{8}, 0, 1, {2}, {{1, 2}, {3, 4}, {5, 6}, {7, 8}}},
      // The middle dimension of [2, 2, 2]: [[[1 2] [3 4]] [[5 6] [7 8]]].
      {{2, 2, 2}, 1, 1, {2, 1, 2}, {{1, 2, 5, 6}, {3, 4, 7, 8}}},
  };
  for (const DimCase &c : cases) {
    int64_t ranks = int64_t(c.perRank.size());
    std::string shape;
    for (int64_t d : c.shape)
      shape += (shape.empty() ? "[" : ", ") + std::to_string(d);
    SCOPED_TRACE(shape + "] dim " + std::to_string(c.dim) + ", " +
                 std::to_string(c.groups) + " group(s), " +
                 std::to_string(ranks) + " ranks");
    NpyArray whole = counting(c.shape);
    NpyArray gathered;
    gathered.dtype = DType::F32;
    std::string error;
    for (int64_t r = 0; r < ranks; ++r) {
      NpyArray shard;
      ASSERT_TRUE(sliceShard(whole, ranks, r, c.dim, c.groups, &shard, &error))
          << error;
      EXPECT_EQ(shard.shape, c.shardShape) << "rank " << r;
      EXPECT_EQ(f32Values(shard), c.perRank[size_t(r)]) << "rank " << r;
      gathered.data.insert(gathered.data.end(), shard.data.begin(),
                           shard.data.end());
    }
    // The all-gathered buffers (rank order) back into the whole tensor.
    NpyArray back;
    ASSERT_TRUE(
        joinShards(gathered, c.shape, ranks, c.dim, c.groups, &back, &error))
        << error;
    EXPECT_EQ(back.shape, c.shape);
    EXPECT_EQ(f32Values(back), f32Values(whole));
  }
}

TEST(Shards, AlongADimensionRoundTripsEveryDtype) {
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::U8})
    for (int64_t ranks : {1, 2, 4})
      for (int64_t groups : {1, 3})
        for (int64_t dim : {0, 1}) {
          SCOPED_TRACE(std::string(dtypeToShortName(dtype)) + " dim " +
                       std::to_string(dim) + ", " + std::to_string(groups) +
                       " group(s), " + std::to_string(ranks) + " ranks");
          std::vector<int64_t> shape = {5, 5};
          shape[size_t(dim)] = 2 * groups * ranks;
          NpyArray whole = iota(dtype, shape);
          BindingShard layout;
          layout.ranks = ranks;
          layout.shape = shape;
          layout.dim = dim;
          layout.groups = groups;
          NpyArray gathered;
          gathered.dtype = dtype;
          std::string error;
          for (int64_t r = 0; r < ranks; ++r) {
            NpyArray shard;
            ASSERT_TRUE(sliceShard(whole, layout, r, &shard, &error)) << error;
            std::vector<int64_t> expected = shape;
            expected[size_t(dim)] /= ranks;
            ASSERT_EQ(shard.shape, expected);
            gathered.data.insert(gathered.data.end(), shard.data.begin(),
                                 shard.data.end());
          }
          NpyArray back;
          ASSERT_TRUE(joinShards(gathered, layout, &back, &error)) << error;
          EXPECT_EQ(back.shape, shape);
          EXPECT_EQ(back.data, whole.data);
        }
}

TEST(Shards, AlongADimensionRefusesWhatDoesNotSplit) {
  NpyArray whole = counting({2, 6}), out;
  std::string error;
  EXPECT_FALSE(sliceShard(whole, 2, 0, 2, 1, &out, &error));
  EXPECT_EQ(error, "dimension 2 is not a dimension of [2, 6]");
  EXPECT_FALSE(sliceShard(whole, 4, 0, 1, 1, &out, &error));
  EXPECT_EQ(error, "dimension 1 of [2, 6] (6) does not split into 1 "
                   "group(s) of 4 equal blocks");
  EXPECT_FALSE(sliceShard(whole, 2, 0, 1, 2, &out, &error));
  EXPECT_HAS(error, "does not split into 2 group(s) of 2 equal blocks");
  EXPECT_FALSE(sliceShard(whole, 2, 2, 1, 1, &out, &error));
  EXPECT_EQ(error, "rank 2 is not in [0, 2)");
  EXPECT_FALSE(sliceShard(whole, 2, 0, -1, 3, &out, &error));
  EXPECT_HAS(error, "3 groups without a dimension");
  // Flat when dim < 0: 12 elements over 5 ranks, k = 3; rank 3 holds
  // elements 9 to 11, rank 4 padding alone.
  ASSERT_TRUE(sliceShard(whole, 5, 3, -1, 1, &out, &error)) << error;
  EXPECT_EQ(f32Values(out), (std::vector<float>{10, 11, 12}));
  ASSERT_TRUE(sliceShard(whole, 5, 4, -1, 1, &out, &error)) << error;
  EXPECT_EQ(f32Values(out), (std::vector<float>{0, 0, 0}));
  NpyArray half = counting({2, 3});
  EXPECT_FALSE(joinShards(half, {2, 6}, 2, 1, 1, &out, &error));
  EXPECT_EQ(error, "the gathered shards hold 24 bytes, not the 48 of f32 "
                   "[2, 6]");
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
/// wait, how many test() calls came before it. With `splitSize`, split()
/// gives the FakeWorld of rank `key` of that many ranks, and records the
/// call and the collectives issued on what it gave (by color); without,
/// it cannot split.
class FakeWorld final : public Collectives {
public:
  FakeWorld(int rank, int size, int splitSize = 0)
      : rank_(rank), size_(size), splitSize(splitSize) {}
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
  std::unique_ptr<Collectives> split(int color, int key,
                                     std::string *error) noexcept override {
    if (!splitSize)
      return Collectives::split(color, key, error);
    splits.push_back({color, key});
    auto part = std::make_unique<FakeWorld>(key, splitSize);
    part->parent = this;
    part->color = color;
    return part;
  }

  std::vector<int> testsBeforeWait; ///< one entry per completed request
  int issued = 0;
  std::vector<std::pair<int, int>> splits; ///< (color, key) of each split
  std::map<int, int> issuedByColor;        ///< on the split ones

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
    if (parent)
      ++parent->issuedByColor[color];
    return std::make_unique<FakeRequest>(*this, std::move(move));
  }
  std::unique_ptr<Request> refuse(std::string *error) {
    *error = "not faked";
    return nullptr;
  }
  int rank_, size_, splitSize;
  FakeWorld *parent = nullptr; ///< what this was split from
  int color = 0;
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

TEST(MeshRun, TwoAxesLargerThanOneNeedCollectivesThatSplit) {
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {4});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, y);
  e.output("y", "output", y);
  // Parsed and loaded...
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})));
  ASSERT_TRUE(l->artifact);
  // ...but not run over collectives that cannot split.
  FakeWorld world(0, 4);
  l->artifact->setCollectives(&world);
  NpyArray x4 = f32Array({4}, {1, 2, 3, 4});
  std::string error;
  ErrorCode code = ErrorCode::Ok;
  EXPECT_FALSE(l->artifact->run("main", {{"x", &x4}}, nullptr, &error, &code));
  EXPECT_EQ(code, ErrorCode::Unsupported);
  EXPECT_EQ(error, "entry 'main' was compiled for the mesh dp=2, tp=2, which "
                   "needs a communicator per axis larger than 1: the fake "
                   "collectives cannot split into a communicator per group "
                   "of ranks");
  EXPECT_EQ(world.issued, 0);
  // One axis larger than 1 among others of size 1 runs over the world.
  std::unique_ptr<Loaded> ok =
      load(planJson({e}, "null", "null", meshJson({"tp", "dp"}, {1, 2})));
  ASSERT_TRUE(ok->artifact);
  FakeWorld two(0, 2);
  ok->artifact->setCollectives(&two);
  std::vector<NpyArray> out;
  ASSERT_TRUE(ok->artifact->run("main", {{"x", &x4}}, &out, &error)) << error;
  EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, 1, 2));
  EXPECT_EQ(two.issued, 1);
}

TEST(MeshRun, EachAxisCommunicatesOverItsOwnGroup) {
  // Rank 2 of [dp=2, tp=2]: coordinates (1, 0). Its dp group is world
  // ranks {0, 2} (color 0, key 1), its tp group {2, 3} (color 2, key 0).
  EntryBuilder e("main");
  int x = e.buffer("f32", {4});
  int sumDp = e.buffer("f32", {4}), sumTp = e.buffer("f32", {4});
  int sliceDp = e.buffer("f32", {2}), sliceTp = e.buffer("f32", {2});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, sumDp);
  e.collective("all_reduce", "sum", "tp", x, sumTp);
  e.collective("rank_slice", "", "dp", x, sliceDp);
  e.collective("rank_slice", "", "tp", x, sliceTp);
  e.output("sum_dp", "output", sumDp);
  e.output("sum_tp", "output", sumTp);
  e.output("slice_dp", "output", sliceDp);
  e.output("slice_tp", "output", sliceTp);
  std::unique_ptr<Loaded> l =
      load(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})));
  ASSERT_TRUE(l->artifact);
  FakeWorld world(2, 4, /*splitSize=*/2);
  l->artifact->setCollectives(&world);
  NpyArray in = f32Array({4}, {1, 2, 3, 4});
  std::vector<NpyArray> out;
  std::string error;
  for (int run = 0; run < 2; ++run) {
    ASSERT_TRUE(l->artifact->run("main", {{"x", &in}}, &out, &error)) << error;
    // Over dp this rank is rank 1 of 2 (its peer holds x - 1), over tp
    // rank 0 of 2 (its peer holds x + 1).
    EXPECT_EQ(f32Values(out[0]), plus({1, 2, 3, 4}, -1, 2));
    EXPECT_EQ(f32Values(out[1]), plus({1, 2, 3, 4}, 1, 2));
    EXPECT_EQ(f32Values(out[2]), (std::vector<float>{3, 4}));
    EXPECT_EQ(f32Values(out[3]), (std::vector<float>{1, 2}));
  }
  // Split once per axis, in axis order; nothing on the world itself.
  EXPECT_EQ(world.splits, (std::vector<std::pair<int, int>>{{0, 1}, {2, 0}}));
  EXPECT_EQ(world.issued, 0);
  EXPECT_EQ(world.issuedByColor, (std::map<int, int>{{0, 2}, {2, 2}}));
  const MeshComms *comms = l->artifact->meshComms(&error);
  ASSERT_TRUE(comms) << error;
  EXPECT_EQ(comms->index(0), 1);
  EXPECT_EQ(comms->index(1), 0);
  EXPECT_EQ(comms->axis(0)->size(), 2);
  EXPECT_EQ(comms->axis(1)->rank(), 0);
  // Another world: split again.
  FakeWorld other(2, 4, 2);
  l->artifact->setCollectives(&other);
  ASSERT_TRUE(l->artifact->run("main", {{"x", &in}}, &out, &error)) << error;
  EXPECT_EQ(other.splits.size(), 2u);
  l->artifact->setCollectives(nullptr);
}

TEST(MeshRun, CoordinatesAreRowMajorOverTheAxes) {
  std::string error;
  EntryBuilder e("main");
  e.input("x", "input", e.buffer("f32", {4}));
  std::optional<Plan> plan =
      parsePlan(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 3})),
                "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  // rank = i_dp * 3 + i_tp.
  for (int rank = 0; rank < 6; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    FakeWorld world(rank, 6);
    EXPECT_EQ(meshIndex(*plan, 0, &world), rank / 3);
    EXPECT_EQ(meshIndex(*plan, 1, &world), rank % 3);
    DataParallelPlace dp = dataParallelPlace(*plan, &world);
    EXPECT_EQ(dp.ranks, 2);
    EXPECT_EQ(dp.index, rank / 3);
  }
  EXPECT_EQ(plan->mesh->stride(0), 3);
  EXPECT_EQ(plan->mesh->stride(1), 1);
  // Without an axis "dp" every rank takes the same batches.
  plan = parsePlan(planJson({e}, "null", "null", meshJson({"tp"}, {4})),
                   "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  FakeWorld world(3, 4);
  DataParallelPlace dp = dataParallelPlace(*plan, &world);
  EXPECT_EQ(dp.ranks, 1);
  EXPECT_EQ(dp.index, 0);
  EXPECT_EQ(meshIndex(*plan, 0, &world), 3);
}

TEST(Shards, DimShardsOfAFakeTwoByTwoMesh) {
  // w [2, 4] along dim 1 over tp, m [3] flat over dp; this process is
  // rank 1 of [dp=2, tp=2]: coordinates (0, 1).
  EntryBuilder e("main");
  e.input("w", "param", e.buffer("f32", {2, 2}),
          "{\"axis\": \"tp\", \"shape\": [2, 4], \"dim\": 1}");
  e.input("m", "state", e.buffer("f32", {2}), shardJson("dp", {3}));
  std::string error;
  std::optional<Plan> plan =
      parsePlan(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})),
                "plan.json", &error);
  ASSERT_TRUE(plan) << error;
  std::map<std::string, NpyArray> tensors;
  tensors["w"] = f32Array({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  tensors["m"] = f32Array({3}, {9, 10, 11});
  FakeWorld world(1, 4);
  ASSERT_TRUE(shardTensors(*plan, &world, tensors, &error)) << error;
  EXPECT_EQ(tensors["w"].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f32Values(tensors["w"]), (std::vector<float>{3, 4, 7, 8}));
  EXPECT_EQ(f32Values(tensors["m"]), (std::vector<float>{9, 10}));
  // One process cannot take a shard of two ranks' axis.
  tensors["w"] = f32Array({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  tensors["m"] = f32Array({3}, {9, 10, 11});
  EXPECT_FALSE(shardTensors(*plan, nullptr, tensors, &error));
  EXPECT_EQ(error, "tensor 'm' is sharded over dp (2 ranks of the mesh dp=2, "
                   "tp=2), but this run has 1 rank(s)");
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

TEST_F(MeshTraining, ATensorParallelMeshOfOneRankMatchesThePlainArtifact) {
  std::unique_ptr<Artifact> plain = artifact("plain.loom", 1, 0);
  std::string path = dir.file("tp.loom");
  std::filesystem::create_directories(path);
  ASSERT_TRUE(writeTensorParallelRegressionArtifact(path, 1, 1));
  std::string error;
  std::unique_ptr<Artifact> tp = Artifact::load(path, &error);
  ASSERT_TRUE(plain && tp) << error;
  TrainResult reference, result;
  ASSERT_TRUE(train(*plain, options(6), &reference, &error)) << error;
  TrainOptions o = options(6);
  o.checkpointDir = dir.file("ckpt-tp");
  ASSERT_TRUE(train(*tp, o, &result, &error)) << error;
  EXPECT_EQ(result.lastLoss, reference.lastLoss);
  for (const auto &[name, t] : reference.tensors) {
    ASSERT_TRUE(result.tensors.count(name)) << name;
    EXPECT_EQ(result.tensors.at(name).shape, t.shape) << name;
    EXPECT_EQ(result.tensors.at(name).data, t.data) << name;
  }
  // Its checkpoint holds w's momentum whole.
  std::map<std::string, NpyArray> saved;
  ASSERT_TRUE(loadCheckpoint(o.checkpointDir + "/" + checkpointFileName(6),
                             *plain, &saved, nullptr, &error))
      << error;
  EXPECT_EQ(saved.at("w.momentum").shape, (std::vector<int64_t>{kFeatures, 1}));
  EXPECT_EQ(saved.at("w.momentum").data,
            reference.tensors.at("w.momentum").data);
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
