//===- MeshTestUtil.h - Plans and checks shared by the mesh mpirun tests --===//
//
// MeshMpiTest.cpp (host collectives, the cpu backend) and MeshNcclTest.cpp
// (NCCL, the cuda backend) run the same plans and check them alike: every
// op of a collective step over mesh dp=N and over each axis of a mesh
// [dp=2, tp=2], against values each rank computes itself (world rank r
// contributes r + 1 + i at element i); training on a mesh against one
// process; and the job around them (MPI started, one temporary directory,
// the failures summed over the world).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_TESTS_MESHTESTUTIL_H
#define LOOMRT_TESTS_MESHTESTUTIL_H

#include "Fixtures.h"
#include "Half.h"
#include "RankChecks.h"
#include "tool/MpiCollectives.h"

#include "loomrt/Artifact.h"
#include "loomrt/Trainer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace loomrt::test {

template <typename T> std::vector<T> valuesOf(const NpyArray &a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
NpyArray arrayOf(DType dtype, const std::vector<T> &values) {
  return makeArray(dtype, {int64_t(values.size())}, values.data());
}

//===----------------------------------------------------------------------===//
// Every op over mesh dp=n
//===----------------------------------------------------------------------===//

/// Elements of a rank's block in the plans below.
inline constexpr int64_t kBlock = 3;

/// Entry `main` over mesh dp=n: every op of a collective step on inputs x
/// (f32), xd (f64) and xb (bf16) of n blocks. Outputs, in this order: sum,
/// max, mean (all_reduce), rs, rs_mean (reduce_scatter), gathered (the
/// all_gather of rs), slice (rank_slice), in_place (an all_reduce sum in
/// place), bsum (bf16 all_reduce sum), after (a copy of sum, which must
/// wait for the all_reduce: on a stream, after it by the stream's order).
inline EntryBuilder everyOpEntry(int n) {
  const int64_t c = kBlock;
  EntryBuilder e("main");
  int x = e.buffer("f32", {n * c});
  int xd = e.buffer("f64", {n * c});
  int xb = e.buffer("bf16", {n * c});
  int sum = e.buffer("f32", {n * c});
  int max = e.buffer("f32", {n * c});
  int mean = e.buffer("f64", {n * c});
  int rs = e.buffer("f32", {c});
  int rsMean = e.buffer("f64", {c});
  int gathered = e.buffer("f32", {n * c});
  int slice = e.buffer("f32", {c});
  int inPlace = e.buffer("f32", {n * c});
  int bsum = e.buffer("bf16", {n * c});
  int after = e.buffer("f32", {n * c});
  e.input("x", "input", x);
  e.input("xd", "input", xd);
  e.input("xb", "input", xb);
  e.collective("all_reduce", "sum", "dp", x, sum);
  e.copy(sum, after);
  e.collective("all_reduce", "max", "dp", x, max);
  e.collective("all_reduce", "mean", "dp", xd, mean);
  e.collective("reduce_scatter", "sum", "dp", x, rs);
  e.collective("reduce_scatter", "mean", "dp", xd, rsMean);
  e.collective("all_gather", "", "dp", rs, gathered);
  e.collective("rank_slice", "", "dp", x, slice);
  e.copy(x, inPlace);
  e.collective("all_reduce", "sum", "dp", inPlace, inPlace);
  e.collective("all_reduce", "sum", "dp", xb, bsum);
  for (auto [name, id] :
       std::vector<std::pair<const char *, int>>{{"sum", sum},
                                                 {"max", max},
                                                 {"mean", mean},
                                                 {"rs", rs},
                                                 {"rs_mean", rsMean},
                                                 {"gathered", gathered},
                                                 {"slice", slice},
                                                 {"in_place", inPlace},
                                                 {"bsum", bsum},
                                                 {"after", after}})
    e.output(name, "output", id);
  return e;
}

/// everyOpEntry's inputs on rank r of n: r + 1 + i at element i.
struct EveryOpInputs {
  NpyArray x, xd, xb;
  EveryOpInputs(int n, int r) {
    const int64_t len = n * kBlock;
    std::vector<float> xf(len);
    std::vector<double> xdv(len);
    std::vector<uint16_t> xbv(len);
    for (int64_t i = 0; i < len; ++i) {
      xf[i] = float(r + 1 + i);
      xdv[i] = double(r + 1 + i);
      xbv[i] = floatToBf16(float(r + 1 + i));
    }
    x = arrayOf(DType::F32, xf);
    xd = arrayOf(DType::F64, xdv);
    xb = arrayOf(DType::BF16, xbv);
  }
  std::map<std::string, const NpyArray *> refs() const {
    return {{"x", &x}, {"xd", &xd}, {"xb", &xb}};
  }
};

/// everyOpEntry's outputs on rank r of n; each check named `prefix`, the
/// op and the element.
inline void checkEveryOp(const std::vector<NpyArray> &out, int n, int r,
                         const std::string &prefix) {
  const int64_t c = kBlock;
  std::vector<float> s = valuesOf<float>(out[0]), m = valuesOf<float>(out[1]),
                     rsv = valuesOf<float>(out[3]), g = valuesOf<float>(out[5]),
                     sl = valuesOf<float>(out[6]), ip = valuesOf<float>(out[7]),
                     af = valuesOf<float>(out[9]);
  std::vector<double> md = valuesOf<double>(out[2]),
                      rsm = valuesOf<double>(out[4]);
  std::vector<uint16_t> bs = valuesOf<uint16_t>(out[8]);
  double ranksSum = n * (n + 1) / 2.0;
  for (int64_t i = 0; i < n * c; ++i) {
    std::string at = " element " + std::to_string(i);
    double total = ranksSum + double(n) * double(i);
    check(s[i] == float(total), prefix + "all_reduce sum" + at);
    check(af[i] == float(total), prefix + "copy after the all_reduce" + at);
    check(ip[i] == float(total), prefix + "all_reduce in place" + at);
    check(m[i] == float(n + i), prefix + "all_reduce max" + at);
    check(std::fabs(md[i] - total / n) < 1e-12,
          prefix + "all_reduce mean" + at);
    check(bf16ToFloat(bs[i]) == float(total),
          prefix + "bf16 all_reduce sum" + at);
    // all_gather of every rank's reduce_scatter block: the sum again.
    check(g[i] == float(total), prefix + "all_gather" + at);
  }
  for (int64_t j = 0; j < c; ++j) {
    std::string at = " element " + std::to_string(j);
    double total = ranksSum + double(n) * double(r * c + j);
    check(rsv[j] == float(total), prefix + "reduce_scatter sum" + at);
    check(std::fabs(rsm[j] - total / n) < 1e-12,
          prefix + "reduce_scatter mean" + at);
    check(sl[j] == float(r + 1 + r * c + j), prefix + "rank_slice" + at);
  }
}

//===----------------------------------------------------------------------===//
// Every op over each axis of a mesh [dp=2, tp=2]
//===----------------------------------------------------------------------===//

/// Entry `main` over a mesh [dp=2, tp=2] on 4 ranks (rank = i_dp * 2 +
/// i_tp): every op of a collective step over each axis, on inputs x (f32)
/// and xd (f64) of 2 blocks. Outputs, in this order: all_reduce sum over
/// dp and over tp, max over dp, mean over tp (f64), reduce_scatter sum over
/// dp and over tp, all_gather over tp of the dp reduce_scatter and over dp
/// of the tp one, rank_slice over dp and over tp.
inline EntryBuilder twoAxisEntry() {
  const int64_t c = kBlock, len = 2 * c;
  EntryBuilder e("main");
  int x = e.buffer("f32", {len});
  int xd = e.buffer("f64", {len});
  int sumDp = e.buffer("f32", {len}), sumTp = e.buffer("f32", {len});
  int maxDp = e.buffer("f32", {len}), meanTp = e.buffer("f64", {len});
  int rsDp = e.buffer("f32", {c}), rsTp = e.buffer("f32", {c});
  int agDp = e.buffer("f32", {len}), agTp = e.buffer("f32", {len});
  int slDp = e.buffer("f32", {c}), slTp = e.buffer("f32", {c});
  e.input("x", "input", x);
  e.input("xd", "input", xd);
  e.collective("all_reduce", "sum", "dp", x, sumDp);
  e.collective("all_reduce", "sum", "tp", x, sumTp);
  e.collective("all_reduce", "max", "dp", x, maxDp);
  e.collective("all_reduce", "mean", "tp", xd, meanTp);
  e.collective("reduce_scatter", "sum", "dp", x, rsDp);
  e.collective("reduce_scatter", "sum", "tp", x, rsTp);
  e.collective("all_gather", "", "tp", rsDp, agDp);
  e.collective("all_gather", "", "dp", rsTp, agTp);
  e.collective("rank_slice", "", "dp", x, slDp);
  e.collective("rank_slice", "", "tp", x, slTp);
  for (int id :
       {sumDp, sumTp, maxDp, meanTp, rsDp, rsTp, agDp, agTp, slDp, slTp})
    e.output("out" + std::to_string(id), "output", id);
  return e;
}

/// twoAxisEntry's inputs on world rank q: q + 1 + i at element i.
struct TwoAxisInputs {
  NpyArray x, xd;
  explicit TwoAxisInputs(int q) {
    const int64_t len = 2 * kBlock;
    std::vector<float> xf(len);
    std::vector<double> xdv(len);
    for (int64_t i = 0; i < len; ++i)
      xdv[i] = xf[i] = float(q + 1 + i);
    x = arrayOf(DType::F32, xf);
    xd = arrayOf(DType::F64, xdv);
  }
  std::map<std::string, const NpyArray *> refs() const {
    return {{"x", &x}, {"xd", &xd}};
  }
};

/// twoAxisEntry's outputs on world rank q, whose dp group is world ranks
/// {i_tp, 2 + i_tp} and tp group {2 * i_dp, 2 * i_dp + 1}: each op must
/// reach the ranks of this rank's group on its axis alone. Each check
/// named `prefix`, the op and the element.
inline void checkTwoAxes(const std::vector<NpyArray> &out, int q,
                         const std::string &prefix) {
  const int idp = q / 2, itp = q % 2;
  const int64_t c = kBlock, len = 2 * c;
  // x's element i on world rank p.
  auto of = [](int p, int64_t i) { return double(p + 1 + i); };
  const int dpPeers[2] = {itp, 2 + itp}, tpPeers[2] = {2 * idp, 2 * idp + 1};
  std::vector<float> sDp = valuesOf<float>(out[0]),
                     sTp = valuesOf<float>(out[1]),
                     mDp = valuesOf<float>(out[2]),
                     rDp = valuesOf<float>(out[4]),
                     rTp = valuesOf<float>(out[5]),
                     gDp = valuesOf<float>(out[6]),
                     gTp = valuesOf<float>(out[7]),
                     lDp = valuesOf<float>(out[8]),
                     lTp = valuesOf<float>(out[9]);
  std::vector<double> mTp = valuesOf<double>(out[3]);
  auto sum = [&](const int *peers, int64_t i) {
    return of(peers[0], i) + of(peers[1], i);
  };
  for (int64_t i = 0; i < len; ++i) {
    std::string at = " element " + std::to_string(i);
    check(sDp[i] == float(sum(dpPeers, i)), prefix + "all_reduce sum dp" + at);
    check(sTp[i] == float(sum(tpPeers, i)), prefix + "all_reduce sum tp" + at);
    check(mDp[i] == float(of(2 + itp, i)), prefix + "all_reduce max dp" + at);
    check(mTp[i] == sum(tpPeers, i) / 2, prefix + "all_reduce mean tp" + at);
    int64_t b = i / c, j = i % c;
    // all_gather over tp of the dp reduce-scatter: tp member b of this
    // rank's tp group holds the dp sum (over its own dp group {b, 2 +
    // b}) of block idp.
    int dpGroupOfB[2] = {int(b), 2 + int(b)};
    check(gDp[i] == float(sum(dpGroupOfB, idp * c + j)),
          prefix + "all_gather tp of reduce_scatter dp" + at);
    // all_gather over dp of the tp reduce-scatter: dp member b holds the
    // tp sum (over {2b, 2b + 1}) of block itp.
    int tpGroupOfB[2] = {2 * int(b), 2 * int(b) + 1};
    check(gTp[i] == float(sum(tpGroupOfB, itp * c + j)),
          prefix + "all_gather dp of reduce_scatter tp" + at);
  }
  for (int64_t j = 0; j < c; ++j) {
    std::string at = " element " + std::to_string(j);
    check(rDp[j] == float(sum(dpPeers, idp * c + j)),
          prefix + "reduce_scatter dp" + at);
    check(rTp[j] == float(sum(tpPeers, itp * c + j)),
          prefix + "reduce_scatter tp" + at);
    check(lDp[j] == float(of(q, idp * c + j)), prefix + "rank_slice dp" + at);
    check(lTp[j] == float(of(q, itp * c + j)), prefix + "rank_slice tp" + at);
  }
}

//===----------------------------------------------------------------------===//
// Training on a mesh against one process
//===----------------------------------------------------------------------===//

/// Tensors equal bit for bit (`tolerance` 0) or to `tolerance` relative.
inline void compare(const std::map<std::string, NpyArray> &got,
                    const std::map<std::string, NpyArray> &want,
                    double tolerance, const std::string &what) {
  for (const auto &[name, t] : want) {
    auto it = got.find(name);
    check(it != got.end(), what + ": has " + name);
    if (it == got.end())
      continue;
    check(it->second.shape == t.shape, what + ": whole shape of " + name);
    if (it->second.data.size() != t.data.size())
      continue;
    if (tolerance == 0) {
      check(it->second.data == t.data, what + ": bits of " + name);
      continue;
    }
    std::vector<float> a = f32Values(it->second), b = f32Values(t);
    for (size_t i = 0; i < a.size(); ++i)
      check(std::fabs(a[i] - b[i]) <=
                tolerance * std::max(1.0f, std::fabs(b[i])),
            what + ": " + name + "[" + std::to_string(i) + "] " +
                std::to_string(a[i]) + " vs " + std::to_string(b[i]));
  }
}

/// Trains; false (a failed check) with the message otherwise.
inline bool trainOk(Artifact &artifact, const TrainOptions &options,
                    TrainResult *result, const std::string &what) {
  std::string error;
  bool ok = train(artifact, options, result, &error);
  check(ok, what + ": " + error);
  return ok;
}

/// The last loss of `got` within `tolerance` (relative) of `want`'s.
inline void checkLoss(const TrainResult &got, const TrainResult &want,
                      double tolerance, const std::string &what) {
  check(std::fabs(got.lastLoss - want.lastLoss) <=
            tolerance * std::max(1.0, std::fabs(want.lastLoss)),
        what + ": loss " + std::to_string(got.lastLoss) + " vs " +
            std::to_string(want.lastLoss));
}

/// 6 quiet steps of `dir`/data.npz, `accumulate` micro-batches each (a
/// reference in one process: the mesh's dp ranks).
inline TrainOptions trainingOptions(const std::string &dir,
                                    int64_t accumulate) {
  TrainOptions o;
  o.dataPath = dir + "/data.npz";
  o.steps = 6;
  o.progress = ProgressMode::None;
  o.accumulate = accumulate;
  return o;
}

/// `ref` on the mesh over `comm` (one micro-batch a step per dp rank),
/// checkpointing every 3 steps into `checkpointDir` and evaluating the
/// training data.
inline TrainOptions meshOptions(const TrainOptions &ref, Collectives &comm,
                                const std::string &checkpointDir) {
  TrainOptions o = ref;
  o.accumulate = 1;
  o.collectives = &comm;
  o.checkpointDir = checkpointDir;
  o.saveEvery = 3;
  o.evalDataPath = ref.dataPath;
  return o;
}

/// `o` resumed from its step-3 checkpoint (saving none) must give the bits
/// of `result`, its run straight through. Returns the resumed options.
inline TrainOptions checkResumed(Artifact &mesh, const TrainOptions &o,
                                 const TrainResult &result,
                                 const std::string &name) {
  TrainOptions again = o;
  again.checkpointDir.clear();
  again.saveEvery = 0;
  again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
  TrainResult resumed;
  if (trainOk(mesh, again, &resumed, name + " resumed"))
    compare(resumed.tensors, result.tensors, 0, name + " resumed");
  return again;
}

//===----------------------------------------------------------------------===//
// The job
//===----------------------------------------------------------------------===//

/// A program's run under mpirun: the world's collectives and one
/// temporary directory for the whole job.
struct MeshJob {
  std::unique_ptr<Collectives> comm; ///< null where it could not start
  int status = 0;                    ///< then what to exit with
  std::string dir;                   ///< rank 0's directory, on every rank
  std::unique_ptr<TempDir> owner;    ///< rank 0: removes it (first)
};

/// Starts MPI (this rank named in the checks' messages) and gives every
/// rank the path of rank 0's temporary directory; without comm, having
/// said why, where it cannot.
inline MeshJob startJob() {
  MeshJob job;
  if (!launchedByMpi()) {
    std::fprintf(stderr, "run me with mpirun -np N\n");
    job.status = 2;
    return job;
  }
  job.status = 1;
  std::string error;
  std::unique_ptr<Collectives> comm = startMpi(MpiOptions(), &error);
  if (!comm) {
    std::fprintf(stderr, "startMpi: %s\n", error.c_str());
    return job;
  }
  rankChecks.rank = comm->rank();
  char path[256] = {};
  if (comm->rank() == 0) {
    job.owner = std::make_unique<TempDir>();
    std::snprintf(path, sizeof path, "%s", job.owner->path().c_str());
  }
  if (!waitFor(comm->broadcast(path, sizeof path, DType::U8, 0, &error),
               &error)) {
    std::fprintf(stderr, "broadcast: %s\n", error.c_str());
    return job;
  }
  job.dir = path;
  job.comm = std::move(comm);
  return job;
}

/// The failures of every rank, summed (once every rank has finished).
inline int64_t failuresInAll(Collectives &comm) {
  std::string error;
  int64_t totals[2] = {rankChecks.failures, rankChecks.checks};
  waitFor(comm.allReduce(totals, 2, DType::I64, ReduceOp::Sum, &error), &error);
  comm.barrier(&error);
  return totals[0];
}

} // namespace loomrt::test

#endif // LOOMRT_TESTS_MESHTESTUTIL_H
