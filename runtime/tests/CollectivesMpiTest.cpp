//===- CollectivesMpiTest.cpp - The MPI collectives, run by mpirun --------===//
//
// Run as `mpirun -np N LoomRTCollectivesMpiTest` (CTest runs N = 2 and 4):
// every collective of loomrt::Collectives on every rank, with values whose
// expected results each rank computes on its own (rank r contributes
// r + 1 + i at element i), then the same over communicators split from the
// world. `... LoomRTCollectivesMpiTest watchdog` (4 ranks): a collective on
// a split communicator that its partner joins late times out, naming the
// world ranks, and completes when waited for again. Exit status 0 only if
// every check on every rank passed; rank 0 prints the total.
//
//===----------------------------------------------------------------------===//

#include "tool/MpiCollectives.h"

#include "Half.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt;

namespace {
int failures = 0, checks = 0;

void check(bool ok, const std::string &what, int rank) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  }
}

bool run(std::unique_ptr<Request> r, int rank, const char *what) {
  std::string error;
  bool ok = r && r->wait(&error);
  if (!r) {
    // the call itself failed; `error` is empty here, the request null
  }
  check(ok, std::string(what) + " completed", rank);
  return ok;
}
/// Every collective over the world.
void everyCollective(Collectives *comm) {
  std::string error;
  const int r = comm->rank(), n = comm->size();
  const size_t count = 5;

  // all-reduce: sum and avg of f32, f64; max of i64.
  {
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i)
      x[i] = float(r + 1 + i);
    std::vector<double> y(x.begin(), x.end());
    std::vector<int64_t> z(x.begin(), x.end());
    std::vector<double> avg(x.begin(), x.end());
    std::unique_ptr<Request> a =
        comm->allReduce(x.data(), count, DType::F32, ReduceOp::Sum, &error);
    std::unique_ptr<Request> b =
        comm->allReduce(y.data(), count, DType::F64, ReduceOp::Sum, &error);
    std::unique_ptr<Request> c =
        comm->allReduce(z.data(), count, DType::I64, ReduceOp::Max, &error);
    std::unique_ptr<Request> d =
        comm->allReduce(avg.data(), count, DType::F64, ReduceOp::Avg, &error);
    // All four in flight together; waited for in another order.
    run(std::move(d), r, "allReduce avg");
    run(std::move(c), r, "allReduce max");
    run(std::move(a), r, "allReduce f32");
    run(std::move(b), r, "allReduce f64");
    for (size_t i = 0; i < count; ++i) {
      double sum = n * (n + 1) / 2.0 + double(n) * i;
      check(x[i] == float(sum), "f32 sum element " + std::to_string(i), r);
      check(y[i] == sum, "f64 sum element " + std::to_string(i), r);
      check(z[i] == int64_t(n + i), "i64 max element " + std::to_string(i), r);
      check(std::fabs(avg[i] - sum / n) < 1e-12,
            "f64 avg element " + std::to_string(i), r);
    }
  }
  // An all-reduce of a count the ranks do not divide (uneven shards in the
  // hierarchical one), and of fewer elements than ranks.
  for (size_t odd : {size_t(7), size_t(1)}) {
    std::vector<float> x(odd);
    for (size_t i = 0; i < odd; ++i)
      x[i] = float(r * 100 + i);
    run(comm->allReduce(x.data(), odd, DType::F32, ReduceOp::Sum, &error), r,
        "allReduce odd count");
    for (size_t i = 0; i < odd; ++i)
      check(x[i] == float(100 * n * (n - 1) / 2 + n * i),
            "odd-count sum element " + std::to_string(i), r);
  }
  // reduce-scatter: block b of rank s holds s + b; rank r gets sum_s (s + r).
  {
    std::vector<float> send(count * n), recv(count, -1);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        send[b * count + i] = float(r + b);
    run(comm->reduceScatter(send.data(), recv.data(), count, DType::F32,
                            ReduceOp::Sum, &error),
        r, "reduceScatter");
    for (size_t i = 0; i < count; ++i)
      check(recv[i] == float(n * (n - 1) / 2 + n * r), "reduceScatter", r);
  }
  // all-gather of bf16 bits: block s is rank s's.
  {
    std::vector<uint16_t> send(count, uint16_t(100 + r)), recv(count * n, 0);
    run(comm->allGather(send.data(), recv.data(), count, DType::BF16, &error),
        r, "allGather");
    for (int s = 0; s < n; ++s)
      check(recv[s * count] == uint16_t(100 + s) &&
                recv[s * count + count - 1] == uint16_t(100 + s),
            "allGather block " + std::to_string(s), r);
  }
  // broadcast from the last rank.
  {
    std::vector<int32_t> x(count, r == n - 1 ? 77 : r);
    run(comm->broadcast(x.data(), count, DType::I32, n - 1, &error), r,
        "broadcast");
    check(x[0] == 77 && x[count - 1] == 77, "broadcast values", r);
  }
  // all-to-all: block b of rank s is 10 s + b; rank r gets 10 s + r from s.
  {
    std::vector<double> send(count * n), recv(count * n, -1);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        send[b * count + i] = 10.0 * r + b;
    run(comm->allToAll(send.data(), recv.data(), count, DType::F64, &error), r,
        "allToAll");
    for (int s = 0; s < n; ++s)
      check(recv[s * count] == 10.0 * s + r, "allToAll from " +
                                                  std::to_string(s), r);
  }
  // send/recv around the ring, both posted before either is waited for.
  {
    std::vector<int64_t> out(count, 1000 + r), in(count, -1);
    int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::unique_ptr<Request> rx =
        comm->recv(in.data(), count, DType::I64, prev, 7, &error);
    std::unique_ptr<Request> tx =
        comm->send(out.data(), count, DType::I64, next, 7, &error);
    run(std::move(rx), r, "recv");
    run(std::move(tx), r, "send");
    check(in[0] == 1000 + prev, "ring value", r);
  }
  // bf16 and f16 reduce through MPI user ops (each pair summed in f32 and
  // rounded back): small integers are exact in both. All-reduce sum, max
  // and avg (hierarchical too), and a reduce-scatter.
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::string name(dtypeToShortName(dtype));
    auto bits = [&](float v) {
      return dtype == DType::BF16 ? floatToBf16(v) : floatToHalf(v);
    };
    auto value = [&](uint16_t v) {
      return dtype == DType::BF16 ? bf16ToFloat(v) : halfToFloat(v);
    };
    std::vector<uint16_t> sum(count), max(count), avg(count);
    for (size_t i = 0; i < count; ++i)
      sum[i] = max[i] = avg[i] = bits(float(r + 1 + i));
    run(comm->allReduce(sum.data(), count, dtype, ReduceOp::Sum, &error), r,
        "16-bit sum");
    run(comm->allReduce(max.data(), count, dtype, ReduceOp::Max, &error), r,
        "16-bit max");
    run(comm->allReduce(avg.data(), count, dtype, ReduceOp::Avg, &error), r,
        "16-bit avg");
    for (size_t i = 0; i < count; ++i) {
      float total = float(n * (n + 1) / 2 + n * i);
      check(value(sum[i]) == total, name + " sum element " + std::to_string(i),
            r);
      check(value(max[i]) == float(n + i),
            name + " max element " + std::to_string(i), r);
      check(value(avg[i]) == value(bits(total / float(n))),
            name + " avg element " + std::to_string(i), r);
    }
    std::vector<uint16_t> send(count * n), recv(count);
    for (int b = 0; b < n; ++b)
      for (size_t i = 0; i < count; ++i)
        send[b * count + i] = bits(float(r + b));
    run(comm->reduceScatter(send.data(), recv.data(), count, dtype,
                            ReduceOp::Sum, &error),
        r, "16-bit reduceScatter");
    for (size_t i = 0; i < count; ++i)
      check(value(recv[i]) == float(n * (n - 1) / 2 + n * r),
            name + " reduceScatter", r);
  }
  // Refusals: a reduction of i16, an average of i64, a rank out of range.
  {
    std::vector<uint16_t> h(count);
    std::string why;
    check(!comm->allReduce(h.data(), count, DType::I16, ReduceOp::Sum, &why) &&
              why.find("cannot reduce i16") != std::string::npos,
          "i16 reduction refused: " + why, r);
    std::vector<int64_t> k(count);
    check(!comm->allReduce(k.data(), count, DType::I64, ReduceOp::Avg, &why) &&
              why.find("avg") != std::string::npos,
          "i64 avg refused: " + why, r);
    check(!comm->send(k.data(), count, DType::I64, n, 0, &why) &&
              why.find("not in [0,") != std::string::npos,
          "send to rank n refused: " + why, r);
  }
  check(comm->barrier(&error), "barrier", r);
}

/// Communicators split from the world: by parity of the world rank,
/// ranked in reverse (key -r), and one of them split again.
void splits(Collectives &world) {
  const int r = world.rank(), n = world.size();
  std::string error;
  std::unique_ptr<Collectives> half = world.split(r % 2, -r, &error);
  check(bool(half), "split: " + error, r);
  if (!half)
    return;
  // The ranks of this parity, highest world rank first.
  std::vector<int> members;
  for (int p = n - 1; p >= 0; --p)
    if (p % 2 == r % 2)
      members.push_back(p);
  const int m = int(members.size());
  check(half->size() == m, "split size", r);
  check(half->rank() ==
            int(std::find(members.begin(), members.end(), r) - members.begin()),
        "split rank in key order", r);
  check(half->localRank() == world.localRank(), "split keeps the local rank",
        r);
  const size_t count = 3;
  std::vector<float> x(count), avg(count);
  std::vector<uint16_t> b(count);
  for (size_t i = 0; i < count; ++i) {
    x[i] = avg[i] = float(r + 1 + i);
    b[i] = floatToBf16(float(r + 1 + i));
  }
  run(half->allReduce(x.data(), count, DType::F32, ReduceOp::Sum, &error), r,
      "split allReduce");
  run(half->allReduce(avg.data(), count, DType::F32, ReduceOp::Avg, &error), r,
      "split allReduce avg");
  run(half->allReduce(b.data(), count, DType::BF16, ReduceOp::Sum, &error), r,
      "split bf16 allReduce");
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int p : members)
      sum += float(p + 1 + i);
    check(x[i] == sum, "split allReduce sums its members alone", r);
    check(avg[i] == sum / float(m), "split avg divides by its size", r);
    check(bf16ToFloat(b[i]) == sum, "split bf16 allReduce", r);
  }
  // Every member's world rank, in the split's rank order.
  int64_t mine = r;
  std::vector<int64_t> ranks(size_t(m), -1);
  run(half->allGather(&mine, ranks.data(), 1, DType::I64, &error), r,
      "split allGather");
  check(ranks == std::vector<int64_t>(members.begin(), members.end()),
        "split allGather in the split's rank order", r);
  check(half->barrier(&error), "split barrier: " + error, r);
  std::string why;
  check(!half->send(&mine, 1, DType::I64, m, 0, &why) &&
            why.find("not in [0, " + std::to_string(m) + ")") !=
                std::string::npos,
        "split send to rank m refused: " + why, r);
  // Split again: every rank alone.
  std::unique_ptr<Collectives> alone = half->split(half->rank(), 0, &error);
  check(alone && alone->size() == 1 && alone->rank() == 0,
        "split of a split: " + error, r);
  if (alone) {
    float one = 5;
    run(alone->allReduce(&one, 1, DType::F32, ReduceOp::Sum, &error), r,
        "allReduce alone");
    check(one == 5, "allReduce alone keeps the value", r);
  }
  check(!world.split(-1, 0, &why) && why.find("color -1") != std::string::npos,
        "a negative color refused: " + why, r);
}

/// Pairs {0, 1} and {2, 3}: the first of each issues an all-reduce that
/// the second joins 3 s later; with a 1 s watchdog the first wait fails
/// naming the pair's world ranks, and waiting again completes it.
void watchdog(Collectives &world) {
  const int r = world.rank();
  std::string error;
  std::unique_ptr<Collectives> pair = world.split(r / 2, r, &error);
  check(bool(pair), "split: " + error, r);
  if (!pair)
    return;
  float x = float(r);
  if (pair->rank() == 1)
    std::this_thread::sleep_for(std::chrono::seconds(3));
  std::unique_ptr<Request> request =
      pair->allReduce(&x, 1, DType::F32, ReduceOp::Sum, &error);
  check(bool(request), "issued: " + error, r);
  if (!request)
    return;
  std::string why;
  if (pair->rank() == 0) {
    std::string group = std::to_string(r) + ", " + std::to_string(r + 1);
    check(!request->wait(&why) &&
              why.find("MPI_Iallreduce of 1 f32 elements among world ranks " +
                       group + " (world rank " + std::to_string(r) +
                       ", this rank's collective ") != std::string::npos &&
              why.find("did not complete within 1 s") != std::string::npos,
          "a late partner times out: " + why, r);
  }
  // Waited for again (the 1 s watchdog each time) until the partner came.
  bool done = false;
  for (int tries = 0; tries < 10 && !done; ++tries)
    done = request->wait(&why);
  check(done, "then completes: " + why, r);
  check(x == float(2 * (r / 2) * 2 + 1), "the pair's sum", r);
}

} // namespace

int main(int argc, char **argv) {
  if (!launchedByMpi()) {
    std::fprintf(stderr, "run me with mpirun -np N [ranks-per-node "
                         "flat|hierarchical]\n");
    return 2;
  }
  MpiOptions options;
  if (argc == 3) {
    options.ranksPerNode = std::atoi(argv[1]);
    options.allReduce = argv[2];
  }
  const bool watchdogOnly = argc == 2 && std::string(argv[1]) == "watchdog";
  if (watchdogOnly)
    options.timeoutSeconds = 1;
  std::string error;
  std::unique_ptr<Collectives> comm = startMpi(options, &error);
  if (!comm) {
    std::fprintf(stderr, "startMpi: %s\n", error.c_str());
    return 1;
  }
  const int r = comm->rank();
  if (watchdogOnly) {
    watchdog(*comm);
  } else {
    everyCollective(comm.get());
    splits(*comm);
  }

  int64_t failed = failures;
  std::unique_ptr<Request> total =
      comm->allReduce(&failed, 1, DType::I64, ReduceOp::Sum, &error);
  if (!total || !total->wait(&error))
    failed = 1;
  if (r == 0)
    std::printf("%s: %d checks per rank, %lld failed in all\n",
                describeWorld(*comm).c_str(), checks,
                static_cast<long long>(failed));
  // Broken on purpose, to show that the tests catch it
  // (LoomRT.CheckedTestCatchesRankExit): the last rank exits 1 after the
  // summary said all was well.
  const char *brk = std::getenv("LOOMRT_TEST_BREAK");
  if (brk && std::string(brk) == "exit-after-summary" &&
      r == comm->size() - 1) {
    std::fflush(stdout);
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
