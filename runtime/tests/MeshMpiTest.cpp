//===- MeshMpiTest.cpp - Plans compiled for a mesh, run by mpirun ---------===//
//
// Run as `mpirun -np N LoomRTMeshMpiTest` (CTest runs N = 2 and 4):
//
// - a hand-written plan with collective steps (all four ops; sum, max and
//   mean; f32, f64, bf16; in place; a copy that must wait for the
//   all-reduce before it) through Artifact::run, against values each rank
//   computes itself (rank r contributes r + 1 + i at element i);
// - the regression model compiled for the mesh (ZeRO 1, 2, 3: Fixtures.h)
//   trained over the N ranks against the same model trained by one process
//   with --accumulate N (the runtime's data parallelism gives the same
//   global batch): bit for bit with 2 ranks, to rounding with 4 (MPI sums
//   four values in another order); checkpoints of whole tensors that
//   resume at this world size, in one process without the mesh, and from
//   a one-process checkpoint into the mesh;
// - an entry compiled for another number of ranks refused with its message.
//
// Exit status 0 only if every check on every rank passed; rank 0 prints
// the total. `LoomRTMeshMpiTest --write DIR RANKS` (no MPI) writes the
// ZeRO-3 artifact, a [dp=2, tp=2] one, data and inputs for CTest's
// loom-run-under-mpirun tests.
//
//===----------------------------------------------------------------------===//

#include "Fixtures.h"
#include "Half.h"
#include "tool/MpiCollectives.h"

#include "loomrt/Artifact.h"
#include "loomrt/Mesh.h"
#include "loomrt/Trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {
int failures = 0, checks = 0, rank = 0;

void check(bool ok, const std::string &what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "rank %d: FAIL %s\n", rank, what.c_str());
  }
}

template <typename T> std::vector<T> valuesOf(const NpyArray &a) {
  std::vector<T> v(a.data.size() / sizeof(T));
  std::memcpy(v.data(), a.data.data(), v.size() * sizeof(T));
  return v;
}

template <typename T>
NpyArray arrayOf(DType dtype, const std::vector<T> &values) {
  return makeArray(dtype, {int64_t(values.size())}, values.data());
}

/// Every op of a collective step through an artifact with mesh dp=n.
void collectiveSteps(Collectives &comm, const std::string &dir) {
  const int n = comm.size(), r = comm.rank();
  const int64_t c = 3; // elements per rank's block
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
  e.copy(sum, after); // must wait for the sum
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
  std::string artifactDir = dir + "/collectives-" + std::to_string(r);
  std::filesystem::create_directories(artifactDir);
  writeBytes(artifactDir + "/plan.json",
             planJson({e}, "null", "null", meshJson({"dp"}, {n})));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(artifactDir, &error);
  check(bool(artifact), "load: " + error);
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  std::vector<float> xf(n * c);
  std::vector<double> xdv(n * c);
  std::vector<uint16_t> xbv(n * c);
  for (int64_t i = 0; i < n * c; ++i) {
    xf[i] = float(r + 1 + i);
    xdv[i] = double(r + 1 + i);
    xbv[i] = floatToBf16(float(r + 1 + i));
  }
  NpyArray in = arrayOf(DType::F32, xf), ind = arrayOf(DType::F64, xdv),
           inb = arrayOf(DType::BF16, xbv);
  std::vector<NpyArray> out;
  // Twice: the second run reuses the arena (and what the first left in it).
  for (int run = 0; run < 2; ++run) {
    bool ran = artifact->run("main", {{"x", &in}, {"xd", &ind}, {"xb", &inb}},
                             &out, &error);
    check(ran, "run: " + error);
    if (!ran)
      return;
    std::vector<float> s = valuesOf<float>(out[0]), m = valuesOf<float>(out[1]),
                       rsv = valuesOf<float>(out[3]),
                       g = valuesOf<float>(out[5]),
                       sl = valuesOf<float>(out[6]),
                       ip = valuesOf<float>(out[7]),
                       af = valuesOf<float>(out[9]);
    std::vector<double> md = valuesOf<double>(out[2]),
                        rsm = valuesOf<double>(out[4]);
    std::vector<uint16_t> bs = valuesOf<uint16_t>(out[8]);
    double ranksSum = n * (n + 1) / 2.0;
    for (int64_t i = 0; i < n * c; ++i) {
      std::string at = " element " + std::to_string(i);
      double total = ranksSum + double(n) * double(i);
      check(s[i] == float(total), "all_reduce sum" + at);
      check(af[i] == float(total), "copy after the all_reduce" + at);
      check(ip[i] == float(total), "all_reduce in place" + at);
      check(m[i] == float(n + i), "all_reduce max" + at);
      check(std::fabs(md[i] - total / n) < 1e-12, "all_reduce mean" + at);
      check(bf16ToFloat(bs[i]) == float(total), "bf16 all_reduce sum" + at);
      // all_gather of every rank's reduce_scatter block: the sum again.
      check(g[i] == float(total), "all_gather" + at);
    }
    for (int64_t j = 0; j < c; ++j) {
      std::string at = " element " + std::to_string(j);
      double total = ranksSum + double(n) * double(r * c + j);
      check(rsv[j] == float(total), "reduce_scatter sum" + at);
      check(std::fabs(rsm[j] - total / n) < 1e-12, "reduce_scatter mean" + at);
      check(sl[j] == float(r + 1 + r * c + j), "rank_slice" + at);
    }
  }

  // Compiled for twice these ranks: refused before anything moves.
  std::string wrongDir = artifactDir + "-wrong";
  std::filesystem::create_directories(wrongDir);
  EntryBuilder w("main");
  int a = w.buffer("f32", {4}), b = w.buffer("f32", {4});
  w.input("x", "input", a);
  w.collective("all_reduce", "sum", "dp", a, b);
  w.output("y", "output", b);
  writeBytes(wrongDir + "/plan.json",
             planJson({w}, "null", "null", meshJson({"dp"}, {2 * n})));
  std::unique_ptr<Artifact> wrong = Artifact::load(wrongDir, &error);
  check(bool(wrong), "load: " + error);
  if (wrong) {
    wrong->setCollectives(&comm);
    NpyArray four = f32Array({4}, {1, 2, 3, 4});
    check(!wrong->run("main", {{"x", &four}}, nullptr, &error) &&
              error == "entry 'main' was compiled for " +
                           std::to_string(2 * n) +
                           " ranks (mesh dp=" + std::to_string(2 * n) +
                           "); this run has " + std::to_string(n) +
                           " processes: launch it with mpirun -np " +
                           std::to_string(2 * n),
          "wrong world refused: " + error);
  }
}

/// Tensors equal bit for bit (`tolerance` 0) or to `tolerance` relative.
void compare(const std::map<std::string, NpyArray> &got,
             const std::map<std::string, NpyArray> &want, double tolerance,
             const std::string &what) {
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

std::unique_ptr<Artifact> loadOrFail(const std::string &path) {
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(path, &error);
  check(bool(a), "load " + path + ": " + error);
  return a;
}

/// Trains; false (a failed check) with the message otherwise.
bool trainOk(Artifact &artifact, const TrainOptions &options,
             TrainResult *result, const std::string &what) {
  std::string error;
  bool ok = train(artifact, options, result, &error);
  check(ok, what + ": " + error);
  return ok;
}

/// The mesh regression model over the world against one process with
/// --accumulate n on the plain model, and checkpoints across the two.
void training(Collectives &comm, const std::string &dir) {
  const int n = comm.size();
  const bool lead = comm.rank() == 0;
  std::string error;
  if (lead) {
    std::filesystem::create_directories(dir + "/plain.loom");
    check(writeRegressionArtifact(dir + "/plain.loom"), "write plain");
    for (int zero : {1, 2, 3}) {
      std::string path = dir + "/zero" + std::to_string(zero) + ".loom";
      std::filesystem::create_directories(path);
      check(writeMeshRegressionArtifact(path, n, zero), "write " + path);
    }
    check(writeRegressionData(dir + "/data.npz", 64), "write data");
  }
  comm.barrier(&error);
  const double tolerance = n == 2 ? 0 : 1e-5;
  auto options = [&](int64_t steps) {
    TrainOptions o;
    o.dataPath = dir + "/data.npz";
    o.steps = steps;
    o.progress = ProgressMode::None;
    return o;
  };

  // The reference: one process, n micro-batches a step (each rank alone).
  std::unique_ptr<Artifact> plain = loadOrFail(dir + "/plain.loom");
  if (!plain)
    return;
  TrainOptions ref = options(6);
  ref.accumulate = n;
  TrainResult reference, referenceHalf;
  if (!trainOk(*plain, ref, &reference, "reference"))
    return;
  ref.steps = 3;
  if (lead)
    ref.checkpointDir = dir + "/ckpt-plain";
  if (!trainOk(*plain, ref, &referenceHalf, "reference to step 3"))
    return;
  comm.barrier(&error);

  for (int zero : {1, 2, 3}) {
    std::string name = "zero " + std::to_string(zero);
    std::string path = dir + "/zero" + std::to_string(zero) + ".loom";
    std::unique_ptr<Artifact> mesh = loadOrFail(path);
    if (!mesh)
      continue;
    TrainOptions o = options(6);
    o.collectives = &comm;
    o.checkpointDir = dir + "/ckpt-zero" + std::to_string(zero);
    o.saveEvery = 3;
    o.evalDataPath = dir + "/data.npz"; // zero 3: every rank evaluates
    o.saveParamsPath = dir + "/params-zero" + std::to_string(zero);
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, tolerance, name);
    check(std::fabs(result.lastLoss - reference.lastLoss) <=
              1e-5 * std::max(1.0, std::fabs(reference.lastLoss)),
          name + ": loss " + std::to_string(result.lastLoss) + " vs " +
              std::to_string(reference.lastLoss));
    check(result.position.accumulate == n, name + ": checkpoint micro-batches");

    // Resume the mesh run at step 3: the same bits as straight through.
    TrainOptions again = options(6);
    again.collectives = &comm;
    again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
    TrainResult resumed;
    if (trainOk(*mesh, again, &resumed, name + " resumed"))
      compare(resumed.tensors, result.tensors, 0, name + " resumed");

    // Its step-3 checkpoint in one process, without the mesh.
    TrainOptions alone = options(6);
    alone.accumulate = n;
    alone.resumePath = again.resumePath;
    if (trainOk(*plain, alone, &resumed, name + " resumed alone"))
      compare(resumed.tensors, reference.tensors, tolerance,
              name + " resumed alone");

    // One process's checkpoint into the mesh.
    TrainOptions into = options(6);
    into.collectives = &comm;
    into.resumePath = dir + "/ckpt-plain/" + checkpointFileName(3);
    if (trainOk(*mesh, into, &resumed, name + " from one process"))
      compare(resumed.tensors, reference.tensors, tolerance,
              name + " from one process");

    if (lead) {
      std::unique_ptr<SafetensorsFile> saved =
          SafetensorsFile::open(o.saveParamsPath, &error);
      check(saved && saved->find("w") &&
                saved->find("w")->shape == std::vector<int64_t>{kFeatures, 1},
            name + ": --save-params holds the whole w " + error);
    }
    comm.barrier(&error);
  }
}

/// A mesh [dp=2, tp=2] on 4 ranks (rank = i_dp * 2 + i_tp): every op of a
/// collective step over each axis, which must reach the ranks of this
/// rank's group on that axis alone. World rank q contributes q + 1 + i at
/// element i; the ranks of this rank's dp group are {i_tp, 2 + i_tp}, of
/// its tp group {2 * i_dp, 2 * i_dp + 1}.
void twoAxisSteps(Collectives &comm, const std::string &dir) {
  const int q = comm.rank(), idp = q / 2, itp = q % 2;
  const int64_t c = 3, len = 2 * c;
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
  std::string artifactDir = dir + "/two-axes-" + std::to_string(q);
  std::filesystem::create_directories(artifactDir);
  writeBytes(artifactDir + "/plan.json",
             planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(artifactDir, &error);
  check(bool(artifact), "2x2 load: " + error);
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  std::vector<float> xf(len);
  std::vector<double> xdv(len);
  for (int64_t i = 0; i < len; ++i)
    xdv[i] = xf[i] = float(q + 1 + i);
  NpyArray in = arrayOf(DType::F32, xf), ind = arrayOf(DType::F64, xdv);
  // x's element i on world rank p.
  auto of = [](int p, int64_t i) { return double(p + 1 + i); };
  const int dpPeers[2] = {itp, 2 + itp}, tpPeers[2] = {2 * idp, 2 * idp + 1};
  std::vector<NpyArray> out;
  for (int run = 0; run < 2; ++run) {
    bool ran = artifact->run("main", {{"x", &in}, {"xd", &ind}}, &out, &error);
    check(ran, "2x2 run: " + error);
    if (!ran)
      return;
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
      check(sDp[i] == float(sum(dpPeers, i)), "2x2 all_reduce sum dp" + at);
      check(sTp[i] == float(sum(tpPeers, i)), "2x2 all_reduce sum tp" + at);
      check(mDp[i] == float(of(2 + itp, i)), "2x2 all_reduce max dp" + at);
      check(mTp[i] == sum(tpPeers, i) / 2, "2x2 all_reduce mean tp" + at);
      int64_t b = i / c, j = i % c;
      // all_gather over tp of the dp reduce-scatter: tp member b of this
      // rank's tp group holds the dp sum (over its own dp group {b, 2 +
      // b}) of block idp.
      int dpGroupOfB[2] = {int(b), 2 + int(b)};
      check(gDp[i] == float(sum(dpGroupOfB, idp * c + j)),
            "2x2 all_gather tp of reduce_scatter dp" + at);
      // all_gather over dp of the tp reduce-scatter: dp member b holds the
      // tp sum (over {2b, 2b + 1}) of block itp.
      int tpGroupOfB[2] = {2 * int(b), 2 * int(b) + 1};
      check(gTp[i] == float(sum(tpGroupOfB, itp * c + j)),
            "2x2 all_gather dp of reduce_scatter tp" + at);
    }
    for (int64_t j = 0; j < c; ++j) {
      std::string at = " element " + std::to_string(j);
      check(rDp[j] == float(sum(dpPeers, idp * c + j)),
            "2x2 reduce_scatter dp" + at);
      check(rTp[j] == float(sum(tpPeers, itp * c + j)),
            "2x2 reduce_scatter tp" + at);
      check(lDp[j] == float(of(q, idp * c + j)), "2x2 rank_slice dp" + at);
      check(lTp[j] == float(of(q, itp * c + j)), "2x2 rank_slice tp" + at);
    }
  }
  const MeshComms *comms = artifact->meshComms(&error);
  check(comms && comms->index(0) == idp && comms->index(1) == itp &&
            comms->axis(0)->size() == 2 && comms->axis(1)->rank() == itp,
        "2x2 coordinates: " + error);
  artifact->setCollectives(nullptr);
}

/// gatherTensors of shards along a dimension over a [dp=2, tp=2] mesh:
/// each rank fills its shard from the definition, with values that carry
/// its coordinate on the other axis, and the gather must join the shards
/// of its group on the shard's axis alone.
void twoAxisGather(Collectives &comm) {
  const int q = comm.rank(), idp = q / 2, itp = q % 2;
  // w [2, 12] along dim 1 over tp in 3 groups (blocks of 2 columns); v
  // [4, 3] along dim 0 over dp; m [5] flat over tp.
  EntryBuilder e("main");
  e.input("w", "param", e.buffer("f32", {2, 6}),
          "{\"axis\": \"tp\", \"shape\": [2, 12], \"dim\": 1, "
          "\"groups\": 3}");
  e.input("v", "param", e.buffer("f32", {2, 3}),
          "{\"axis\": \"dp\", \"shape\": [4, 3], \"dim\": 0}");
  e.input("m", "state", e.buffer("f32", {3}), shardJson("tp", {5}));
  std::string error;
  std::optional<Plan> plan =
      parsePlan(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})),
                "plan.json", &error);
  check(bool(plan), "2x2 gather plan: " + error);
  if (!plan)
    return;
  // w's whole value at (row, col): 100 * idp + 12 * row + col + 1 (the
  // same on both ranks of a tp group, another on the other group). This
  // rank's shard: columns g * 4 + itp * 2 + {0, 1} for g = 0, 1, 2.
  std::vector<float> w, wantW, v, wantV, m, wantM;
  for (int row = 0; row < 2; ++row)
    for (int g = 0; g < 3; ++g)
      for (int j = 0; j < 2; ++j)
        w.push_back(float(100 * idp + 12 * row + g * 4 + itp * 2 + j + 1));
  for (int i = 0; i < 24; ++i)
    wantW.push_back(float(100 * idp + i + 1));
  // v's at (row, col): 1000 * itp + 3 * row + col + 1; rows 2 * idp + {0,
  // 1} here.
  for (int i = 0; i < 6; ++i)
    v.push_back(float(1000 * itp + 6 * idp + i + 1));
  for (int i = 0; i < 12; ++i)
    wantV.push_back(float(1000 * itp + i + 1));
  // m's element i: 100 * idp + i + 1 (k = 3, the last one padding).
  for (int i = 0; i < 3; ++i) {
    int at = 3 * itp + i;
    m.push_back(at < 5 ? float(100 * idp + at + 1) : 0.0f);
  }
  for (int i = 0; i < 5; ++i)
    wantM.push_back(float(100 * idp + i + 1));
  for (bool kept : {false, true}) {
    std::string how = kept ? " (MeshComms)" : " (world)";
    std::map<std::string, NpyArray> tensors;
    tensors["w"] = f32Array({2, 6}, w);
    tensors["v"] = f32Array({2, 3}, v);
    tensors["m"] = f32Array({3}, m);
    bool ok;
    if (kept) {
      MeshComms comms;
      ok = comms.build(*plan, &comm, "the test", &error) &&
           gatherTensors(*plan, comms, tensors, &error);
    } else {
      ok = gatherTensors(*plan, &comm, tensors, &error);
    }
    check(ok, "2x2 gatherTensors" + how + ": " + error);
    if (!ok)
      continue;
    check(tensors["w"].shape == std::vector<int64_t>{2, 12} &&
              f32Values(tensors["w"]) == wantW,
          "2x2 gather of w along dim 1, 3 groups, over tp" + how);
    check(tensors["v"].shape == std::vector<int64_t>{4, 3} &&
              f32Values(tensors["v"]) == wantV,
          "2x2 gather of v along dim 0 over dp" + how);
    check(tensors["m"].shape == std::vector<int64_t>{5} &&
              f32Values(tensors["m"]) == wantM,
          "2x2 gather of flat m over tp" + how);
    // And back: this rank's shards again.
    check(shardTensors(*plan, &comm, tensors, &error) &&
              f32Values(tensors["w"]) == w && f32Values(tensors["v"]) == v &&
              f32Values(tensors["m"]) == m,
          "2x2 shardTensors" + how + ": " + error);
  }
}

/// The regression model on a mesh with a tp axis (Fixtures.h): dp * tp =
/// the world, against one process with --accumulate dp, bit for bit (the
/// only reductions are over dp, of 1 or 2 values); checkpoints of whole
/// tensors (w's momentum gathered over tp) resumed on the mesh and in one
/// process.
void tensorParallelTraining(Collectives &comm, const std::string &dir) {
  const int n = comm.size();
  const bool lead = comm.rank() == 0;
  std::vector<std::pair<int, int>> meshes = {{1, n}};
  if (n == 4)
    meshes.push_back({2, 2});
  std::string error;
  for (auto [dp, tp] : meshes) {
    std::string name =
        "mesh dp=" + std::to_string(dp) + ", tp=" + std::to_string(tp);
    std::string path =
        dir + "/tp-" + std::to_string(dp) + "x" + std::to_string(tp) + ".loom";
    if (lead) {
      std::filesystem::create_directories(path);
      check(writeTensorParallelRegressionArtifact(path, dp, tp),
            "write " + path);
    }
    comm.barrier(&error);
    std::unique_ptr<Artifact> plain = loadOrFail(dir + "/plain.loom");
    std::unique_ptr<Artifact> mesh = loadOrFail(path);
    if (!plain || !mesh)
      continue;
    TrainOptions ref;
    ref.dataPath = dir + "/data.npz";
    ref.steps = 6;
    ref.progress = ProgressMode::None;
    ref.accumulate = dp;
    TrainResult reference;
    if (!trainOk(*plain, ref, &reference, name + " reference"))
      continue;
    TrainOptions o = ref;
    o.accumulate = 1;
    o.collectives = &comm;
    o.checkpointDir = path + "/ckpt";
    o.saveEvery = 3;
    o.evalDataPath = dir + "/data.npz";
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, 0, name);
    // The plan's mean of f32 losses against the trainer's in f64.
    check(std::fabs(result.lastLoss - reference.lastLoss) <=
              1e-6 * std::max(1.0, std::fabs(reference.lastLoss)),
          name + ": loss " + std::to_string(result.lastLoss) + " vs " +
              std::to_string(reference.lastLoss));
    check(result.position.accumulate == dp,
          name + ": a step takes dp micro-batches");

    TrainOptions again = o;
    again.checkpointDir.clear();
    again.saveEvery = 0;
    again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
    TrainResult resumed;
    if (trainOk(*mesh, again, &resumed, name + " resumed"))
      compare(resumed.tensors, result.tensors, 0, name + " resumed");
    TrainOptions alone = ref;
    alone.resumePath = again.resumePath;
    if (trainOk(*plain, alone, &resumed, name + " resumed alone"))
      compare(resumed.tensors, reference.tensors, 0, name + " resumed alone");
    comm.barrier(&error);
  }
}

/// For CTest's loom-run tests: the ZeRO-3 model for `ranks` ranks, the
/// tensor-parallel one for a mesh [dp=2, tp=2], data, and the inputs of
/// one forward.
int writeFixtures(const std::string &dir, int ranks) {
  std::filesystem::create_directories(dir + "/zero3.loom");
  std::filesystem::create_directories(dir + "/tp2x2.loom");
  if (!writeMeshRegressionArtifact(dir + "/zero3.loom", ranks, 3) ||
      !writeTensorParallelRegressionArtifact(dir + "/tp2x2.loom", 2, 2) ||
      !writeRegressionData(dir + "/data.npz", 64))
    return 1;
  std::vector<float> x(kBatch * kFeatures, 0.5f), y(kBatch, 1.0f);
  std::string error;
  return writeNpy(dir + "/x.npy", f32Array({kBatch, kFeatures}, x), &error) &&
                 writeNpy(dir + "/y.npy", f32Array({kBatch, 1}, y), &error)
             ? 0
             : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 4 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2], std::atoi(argv[3]));
  if (!launchedByMpi()) {
    std::fprintf(stderr, "run me with mpirun -np N\n");
    return 2;
  }
  std::string error;
  std::unique_ptr<Collectives> comm = startMpi(MpiOptions(), &error);
  if (!comm) {
    std::fprintf(stderr, "startMpi: %s\n", error.c_str());
    return 1;
  }
  rank = comm->rank();
  // One directory for the job: rank 0's, its name broadcast.
  char path[256] = {};
  std::unique_ptr<TempDir> dir;
  if (rank == 0) {
    dir = std::make_unique<TempDir>();
    std::snprintf(path, sizeof path, "%s", dir->path().c_str());
  }
  if (!waitFor(comm->broadcast(path, sizeof path, DType::U8, 0, &error),
               &error)) {
    std::fprintf(stderr, "broadcast: %s\n", error.c_str());
    return 1;
  }
  collectiveSteps(*comm, path);
  if (comm->size() == 4) {
    twoAxisSteps(*comm, path);
    twoAxisGather(*comm);
  }
  training(*comm, path);
  tensorParallelTraining(*comm, path);

  int64_t totals[2] = {failures, checks};
  waitFor(comm->allReduce(totals, 2, DType::I64, ReduceOp::Sum, &error),
          &error);
  comm->barrier(&error);
  if (rank == 0)
    std::printf("%d ranks (mpi): mesh plans: %d checks per rank, %lld failed "
                "in all\n",
                comm->size(), checks, static_cast<long long>(totals[0]));
  dir.reset();
  return totals[0] == 0 ? 0 : 1;
}
