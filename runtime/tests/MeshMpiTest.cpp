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

#include "MeshTestUtil.h"

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

/// Every op of a collective step through an artifact with mesh dp=n.
void collectiveSteps(Collectives &comm, const std::string &dir) {
  const int n = comm.size(), r = comm.rank();
  std::string artifactDir = dir + "/collectives-" + std::to_string(r);
  std::filesystem::create_directories(artifactDir);
  writeBytes(
      artifactDir + "/plan.json",
      planJson({everyOpEntry(n)}, "null", "null", meshJson({"dp"}, {n})));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(artifactDir, &error);
  check(bool(artifact), "load: " + error);
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  EveryOpInputs in(n, r);
  std::vector<NpyArray> out;
  // Twice: the second run reuses the arena (and what the first left in it).
  for (int run = 0; run < 2; ++run) {
    bool ran = artifact->run("main", in.refs(), &out, &error);
    check(ran, "run: " + error);
    if (!ran)
      return;
    checkEveryOp(out, n, r, "");
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

std::unique_ptr<Artifact> loadOrFail(const std::string &path) {
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(path, &error);
  check(bool(a), "load " + path + ": " + error);
  return a;
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

  // The reference: one process, n micro-batches a step (each rank alone).
  std::unique_ptr<Artifact> plain = loadOrFail(dir + "/plain.loom");
  if (!plain)
    return;
  TrainOptions ref = trainingOptions(dir, n);
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
    // Evaluating: under zero 3, every rank.
    TrainOptions o = meshOptions(trainingOptions(dir, n), comm,
                                 dir + "/ckpt-zero" + std::to_string(zero));
    o.saveParamsPath = dir + "/params-zero" + std::to_string(zero);
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, tolerance, name);
    checkLoss(result, reference, 1e-5, name);
    check(result.position.accumulate == n, name + ": checkpoint micro-batches");

    // Resume the mesh run at step 3: the same bits as straight through.
    TrainOptions again = trainingOptions(dir, 1);
    again.collectives = &comm;
    again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
    TrainResult resumed;
    if (trainOk(*mesh, again, &resumed, name + " resumed"))
      compare(resumed.tensors, result.tensors, 0, name + " resumed");

    // Its step-3 checkpoint in one process, without the mesh.
    TrainOptions alone = trainingOptions(dir, n);
    alone.resumePath = again.resumePath;
    if (trainOk(*plain, alone, &resumed, name + " resumed alone"))
      compare(resumed.tensors, reference.tensors, tolerance,
              name + " resumed alone");

    // One process's checkpoint into the mesh.
    TrainOptions into = trainingOptions(dir, 1);
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
  std::string artifactDir = dir + "/two-axes-" + std::to_string(q);
  std::filesystem::create_directories(artifactDir);
  writeBytes(artifactDir + "/plan.json",
             planJson({twoAxisEntry()}, "null", "null",
                      meshJson({"dp", "tp"}, {2, 2})));
  std::string error;
  std::unique_ptr<Artifact> artifact = Artifact::load(artifactDir, &error);
  check(bool(artifact), "2x2 load: " + error);
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  TwoAxisInputs in(q);
  std::vector<NpyArray> out;
  for (int run = 0; run < 2; ++run) {
    bool ran = artifact->run("main", in.refs(), &out, &error);
    check(ran, "2x2 run: " + error);
    if (!ran)
      return;
    checkTwoAxes(out, q, "2x2 ");
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
    TrainOptions ref = trainingOptions(dir, dp);
    TrainResult reference;
    if (!trainOk(*plain, ref, &reference, name + " reference"))
      continue;
    TrainOptions o = meshOptions(ref, comm, path + "/ckpt");
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, 0, name);
    // The plan's mean of f32 losses against the trainer's in f64.
    checkLoss(result, reference, 1e-6, name);
    check(result.position.accumulate == dp,
          name + ": a step takes dp micro-batches");

    TrainOptions again = checkResumed(*mesh, o, result, name);
    TrainOptions alone = ref;
    alone.resumePath = again.resumePath;
    TrainResult resumed;
    if (trainOk(*plain, alone, &resumed, name + " resumed alone"))
      compare(resumed.tensors, reference.tensors, 0, name + " resumed alone");
    comm.barrier(&error);
  }
}

/// For CTest's loom-run tests: the ZeRO-3 model for `ranks` ranks, the
/// tensor-parallel one for a mesh [dp=2, tp=2], the plain model both must
/// equal (with --accumulate dp), data, and the inputs of one forward.
int writeFixtures(const std::string &dir, int ranks) {
  std::filesystem::create_directories(dir + "/zero3.loom");
  std::filesystem::create_directories(dir + "/tp2x2.loom");
  std::filesystem::create_directories(dir + "/plain.loom");
  if (!writeRegressionArtifact(dir + "/plain.loom") ||
      !writeMeshRegressionArtifact(dir + "/zero3.loom", ranks, 3) ||
      !writeTensorParallelRegressionArtifact(dir + "/tp2x2.loom", 2, 2) ||
      !writeRegressionData(dir + "/data.npz", 64))
    return 1;
  std::string error;
  return writeRegressionBatch(dir, &error) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 4 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2], std::atoi(argv[3]));
  MeshJob job = startJob();
  if (!job.comm)
    return job.status;
  Collectives &comm = *job.comm;
  collectiveSteps(comm, job.dir);
  if (comm.size() == 4) {
    twoAxisSteps(comm, job.dir);
    twoAxisGather(comm);
  }
  training(comm, job.dir);
  tensorParallelTraining(comm, job.dir);

  int64_t failed = failuresInAll(comm);
  if (comm.rank() == 0)
    std::printf("%d ranks (mpi): mesh plans: %d checks per rank, %lld failed "
                "in all\n",
                comm.size(), rankChecks.checks, static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
