//===- GradientBucketsTest.cpp - Bucketed gradient all-reduce -------------===//
//
// GradientBuckets against a fake two-rank world whose other rank holds the
// same gradients: a sum doubles each element, and only once the request
// completes (after a given number of test() calls), so the tests see when
// buckets are issued, what they hold, and that the sums come back only at
// the end of the run.
//
//===----------------------------------------------------------------------===//

#include "GradientBuckets.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace loomrt;

namespace {

struct Call {
  size_t count;
  DType dtype;
};

class FakeRequest final : public Request {
public:
  FakeRequest(void *data, size_t count, DType dtype, int testsToComplete)
      : data(data), count(count), dtype(dtype), left(testsToComplete) {}
  bool wait(std::string *) noexcept override {
    complete();
    return true;
  }
  bool test(bool *done, std::string *) noexcept override {
    if (left > 0)
      --left;
    if (left == 0)
      complete();
    *done = finished;
    return true;
  }

private:
  void complete() {
    if (finished)
      return;
    finished = true;
    for (size_t i = 0; i < count; ++i) {
      if (dtype == DType::F32)
        static_cast<float *>(data)[i] *= 2;
      else
        static_cast<double *>(data)[i] *= 2;
    }
  }
  void *data;
  size_t count;
  DType dtype;
  int left;
  bool finished = false;
};

class FakeTwoRanks final : public Collectives {
public:
  std::vector<Call> calls;
  int testsToComplete = 1;
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 2; }
  int localRank() const noexcept override { return 0; }
  const char *name() const noexcept override { return "fake"; }
  std::unique_ptr<Request> allReduce(void *data, size_t count, DType dtype,
                                     ReduceOp op, std::string *) noexcept override {
    EXPECT_EQ(op, ReduceOp::Sum);
    calls.push_back({count, dtype});
    return std::make_unique<FakeRequest>(data, count, dtype, testsToComplete);
  }
  std::unique_ptr<Request> reduceScatter(const void *, void *, size_t, DType,
                                         ReduceOp, std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> allGather(const void *, void *, size_t, DType,
                                     std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> broadcast(void *, size_t, DType, int,
                                     std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> allToAll(const void *, void *, size_t, DType,
                                    std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> send(const void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return nullptr;
  }
  std::unique_ptr<Request> recv(void *, size_t, DType, int, int,
                                std::string *) noexcept override {
    return nullptr;
  }
  bool barrier(std::string *) noexcept override { return true; }
};

Binding output(const char *name, BindingKind kind, DType dtype, int64_t n) {
  Binding b;
  b.name = name;
  b.kind = kind;
  b.dtype = dtype;
  b.shape = {n};
  b.bytes = uint64_t(n) * dtypeSize(dtype);
  return b;
}

/// Outputs: grad a (4 f32), loss (1 f32), grad b (8 f32), grad c (2 f64).
PlanEntry entryWithGrads() {
  PlanEntry e;
  e.name = "forward_backward";
  e.outputs = {output("a", BindingKind::Grad, DType::F32, 4),
               output("loss", BindingKind::Output, DType::F32, 1),
               output("b", BindingKind::Grad, DType::F32, 8),
               output("c", BindingKind::Grad, DType::F64, 2)};
  return e;
}

TEST(GradientBucketsTest, IssuesFullBucketsDuringTheRunAndSumsAtTheEnd) {
  FakeTwoRanks comm;
  comm.testsToComplete = 2;
  PlanEntry entry = entryWithGrads();
  std::vector<float> a = {1, 2, 3, 4}, loss = {5}, b(8, 0.5f);
  std::vector<double> c = {7, 8};
  GradientBuckets buckets(comm, entry, /*bucketBytes=*/40);
  RunObserver o = buckets.observer();
  std::string error;

  ASSERT_TRUE(o.outputReady(0, a.data(), &error)) << error;
  EXPECT_TRUE(comm.calls.empty()) << "16 bytes do not fill a 40-byte bucket";
  ASSERT_TRUE(o.outputReady(1, loss.data(), &error)) << error;
  EXPECT_TRUE(comm.calls.empty()) << "the loss is not a gradient";
  ASSERT_TRUE(o.outputReady(2, b.data(), &error)) << error;
  ASSERT_EQ(comm.calls.size(), 1u) << "a and b fill the f32 bucket";
  EXPECT_EQ(comm.calls[0].count, 12u);
  EXPECT_EQ(comm.calls[0].dtype, DType::F32);
  ASSERT_TRUE(o.afterStep(&error)) << error;
  ASSERT_TRUE(o.afterStep(&error)) << error; // completes the request
  EXPECT_EQ(a[0], 1) << "sums are written back only when the run ends";
  ASSERT_TRUE(o.outputReady(3, c.data(), &error)) << error;
  EXPECT_EQ(comm.calls.size(), 1u) << "f64 goes in a bucket of its own";

  ASSERT_TRUE(o.finish(&error)) << error;
  ASSERT_EQ(comm.calls.size(), 2u) << "the partial f64 bucket goes at the end";
  EXPECT_EQ(comm.calls[1].count, 2u);
  EXPECT_EQ(comm.calls[1].dtype, DType::F64);
  EXPECT_EQ(a, (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(b, std::vector<float>(8, 1.0f));
  EXPECT_EQ(c, (std::vector<double>{14, 16}));
  EXPECT_EQ(loss[0], 5) << "the loss is left alone";
  EXPECT_EQ(buckets.times().buckets, 2);
  EXPECT_EQ(buckets.times().bytes, 64);
}

TEST(GradientBucketsTest, ARunsFirstBucketIsSmaller) {
  FakeTwoRanks comm;
  PlanEntry entry = entryWithGrads();
  GradientBuckets buckets(comm, entry, /*bucketBytes=*/1 << 20,
                          /*firstBucketBytes=*/20);
  std::string error;
  for (int run = 0; run < 2; ++run) {
    comm.calls.clear();
    std::vector<float> a = {1, 2, 3, 4}, b(8, 1.0f);
    std::vector<double> c = {1, 1};
    RunObserver o = buckets.observer();
    ASSERT_TRUE(o.outputReady(0, a.data(), &error)) << error;
    EXPECT_TRUE(comm.calls.empty()) << "16 bytes: the first bucket is open";
    ASSERT_TRUE(o.outputReady(2, b.data(), &error)) << error;
    ASSERT_EQ(comm.calls.size(), 1u)
        << "run " << run << ": 48 bytes close the 20-byte first bucket";
    EXPECT_EQ(comm.calls[0].count, 12u);
    ASSERT_TRUE(o.outputReady(3, c.data(), &error)) << error;
    EXPECT_EQ(comm.calls.size(), 1u)
        << "a later bucket (here the f64 one) fills to 1 MiB";
    ASSERT_TRUE(o.finish(&error)) << error;
    ASSERT_EQ(comm.calls.size(), 2u);
    EXPECT_EQ(a, (std::vector<float>{2, 4, 6, 8})) << "run " << run;
    EXPECT_EQ(c, (std::vector<double>{2, 2})) << "run " << run;
  }
}

TEST(GradientBucketsTest, ALaterRunStartsWithEmptyBuckets) {
  FakeTwoRanks comm;
  PlanEntry entry = entryWithGrads();
  GradientBuckets buckets(comm, entry, /*bucketBytes=*/1 << 20);
  std::string error;
  for (int run = 0; run < 2; ++run) {
    std::vector<float> a = {1, 2, 3, 4}, b(8, 1.0f);
    std::vector<double> c = {1, 1};
    RunObserver o = buckets.observer();
    ASSERT_TRUE(o.outputReady(0, a.data(), &error)) << error;
    ASSERT_TRUE(o.outputReady(2, b.data(), &error)) << error;
    ASSERT_TRUE(o.outputReady(3, c.data(), &error)) << error;
    EXPECT_EQ(comm.calls.size(), size_t(2 * run))
        << "nothing fills a 1 MiB bucket before the end";
    ASSERT_TRUE(o.finish(&error)) << error;
    ASSERT_EQ(comm.calls.size(), size_t(2 * run + 2));
    EXPECT_EQ(comm.calls[2 * run].count, 12u) << "run " << run;
    EXPECT_EQ(a, (std::vector<float>{2, 4, 6, 8})) << "run " << run;
    EXPECT_EQ(c, (std::vector<double>{2, 2})) << "run " << run;
  }
}

} // namespace
