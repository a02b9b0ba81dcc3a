//===- GradCompressionMpiTest.cpp - Gradient compression under mpirun ----===//
//
// Run as `mpirun -np N LoomRTGradCompressionMpiTest` (CTest runs N = 2 and
// 4):
//
// - 2 ranks: the matrix model of GradCompressionFixtures.h on mesh dp=2
//   with ZeRO 0, 1 and 2 (all_reduce; all_reduce then rank_slice;
//   reduce_scatter), trained 12 steps with each method (powersgd:rank=1
//   and 2, topk:0.25 and 1, int8): the loss falls to under half its first
//   value; topk:1 (every entry sent) gives the bits of the exact run
//   (two ranks: the exact mean is (a + b) / 2 and top-k's 0 + a + b over
//   2, the same float operations); the lossy methods give other
//   parameters; the bytes each rank sent are the payload model's, step
//   for step; a checkpoint at step 6 resumed to 12 ends with the bits of
//   the straight run, its final checkpoint's residuals (both ranks') and
//   Q included. Plain runs write no compression state; a checkpoint of
//   another spec, of none, and a run without compression resume with
//   zero residuals and say so; the plan's grad_compression applies unless
//   the options say otherwise; a mesh with a tp axis is refused; with
//   --accumulate 2 (apply_gradients reduces), topk:1 is exact and int8
//   resumes bitwise.
// - 4 ranks: the pipelined chain model of PipelineFixtures.h on mesh
//   [dp=2, pp=2] (each stage's apply_gradients reduces over dp): int8 and
//   topk:1 against the exact run, resumed bitwise, the checkpoint holding
//   every stage's residuals of both dp ranks (gathered to rank 0), the
//   bytes summed over the stages; and the matrix model on dp=4 with int8.
//
// Exit status 0 only if every check on every rank passed; rank 0 prints
// the total. `LoomRTGradCompressionMpiTest --write DIR` (no MPI) writes
// the ZeRO-1 matrix artifact with `"grad_compression": "int8"` and its
// data for CTest's loom-run tests.
//
//===----------------------------------------------------------------------===//

#include "GradCompression.h"
#include "GradCompressionFixtures.h"
#include "MeshTestUtil.h"
#include "PipelineFixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Safetensors.h"
#include "loomrt/Trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {

constexpr int kSteps = 12;

std::unique_ptr<Artifact> loadOrFail(const std::string &path) {
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(path, &error);
  check(bool(a), "load " + path + ": " + error);
  return a;
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// The bytes one rank sends per step for the matrix model's reductions of
/// W (64 f32) and b (8 f32) under `spec`: the payload model.
uint64_t matrixBytes(const std::string &spec) {
  if (spec == "powersgd:rank=1")
    return (8 + 8) * 1 * 4 + 32; // b is a vector: exact
  if (spec == "powersgd:rank=2")
    return (8 + 8) * 2 * 4 + 32;
  if (spec == "topk:0.25")
    return 16 * 8 + 2 * 8;
  if (spec == "topk:1")
    return 64 * 8 + 8 * 8;
  if (spec == "int8")
    return (64 + 4) + (8 + 4);
  return 64 * 4 + 8 * 4;
}

/// Every gradient compression tensor of two checkpoints, bit for bit, and
/// `names` present in the first.
void compareCheckpointState(const std::string &a, const std::string &b,
                            const std::vector<std::string> &names,
                            const std::string &what) {
  std::string error;
  std::unique_ptr<SafetensorsFile> fa = SafetensorsFile::open(a, &error);
  std::unique_ptr<SafetensorsFile> fb = SafetensorsFile::open(b, &error);
  check(fa && fb, what + ": open " + error);
  if (!fa || !fb)
    return;
  for (const std::string &name : names)
    check(fa->find(name) != nullptr, what + ": the checkpoint holds " + name);
  size_t compared = 0;
  for (const TensorView &t : fa->tensors()) {
    const TensorView *u = fb->find(t.name);
    check(u && u->shape == t.shape && u->nbytes == t.nbytes &&
              std::memcmp(u->data, t.data, t.nbytes) == 0,
          what + ": bits of " + t.name);
    compared += isGradCompressionTensorName(t.name);
  }
  check(compared == names.size(),
        what + ": " + std::to_string(compared) + " compression tensors");
}

/// Whether two tensors of the checkpoint at `path` differ.
bool differ(const std::string &path, const std::string &x,
            const std::string &y) {
  std::string error;
  std::unique_ptr<SafetensorsFile> f = SafetensorsFile::open(path, &error);
  const TensorView *a = f ? f->find(x) : nullptr;
  const TensorView *b = f ? f->find(y) : nullptr;
  return a && b && a->nbytes == b->nbytes &&
         std::memcmp(a->data, b->data, a->nbytes) != 0;
}

/// Training options over `comm` on the matrix data: kSteps steps,
/// checkpoints every 6 into `ckpt` (none when empty).
TrainOptions matrixOptions(const std::string &dir, Collectives &comm,
                           const std::string &spec, const std::string &ckpt) {
  TrainOptions o = trainingOptions(dir, 1);
  o.dataPath = dir + "/matrix.npz";
  o.steps = kSteps;
  o.collectives = &comm;
  o.gradCompression = spec;
  if (!ckpt.empty()) {
    o.checkpointDir = ckpt;
    o.saveEvery = 6;
  }
  return o;
}

/// Every method on the matrix model with ZeRO `zero` over the world.
void methods(Collectives &comm, const std::string &dir, int zero) {
  const bool lead = comm.rank() == 0;
  const int n = comm.size();
  const std::string z = "zero" + std::to_string(zero);
  const std::string path = dir + "/matrix-" + z + ".loom";
  std::string error;
  if (lead)
    check(writeMatrixArtifact(path, n, zero), z + ": write");
  comm.barrier(&error);
  std::unique_ptr<Artifact> artifact = loadOrFail(path);
  if (!artifact)
    return;

  TrainResult exact;
  TrainOptions plain = matrixOptions(dir, comm, "", dir + "/ckpt-" + z);
  if (!trainOk(*artifact, plain, &exact, z + " exact"))
    return;
  check(exact.gradCompression.empty() && exact.gradBytesSent == 0,
        z + ": no compression, no bytes counted");
  if (lead) {
    // A plain run's checkpoint: what it always was.
    std::unique_ptr<SafetensorsFile> f = SafetensorsFile::open(
        plain.checkpointDir + "/" + checkpointFileName(kSteps), &error);
    check(f && f->tensors().size() == 5 &&
              !f->metadata().count("grad_compression"),
          z + ": a plain checkpoint holds the 4 tensors and step alone " +
              error);
  }

  for (const std::string spec :
       {"powersgd:rank=1", "powersgd:rank=2", "topk:0.25", "topk:1", "int8"}) {
    std::string name = z + " " + spec;
    std::string tag = spec;
    for (char &c : tag)
      if (c == ':' || c == '=')
        c = '-';
    std::string ckpt = dir + "/ckpt-" + z + "-" + tag;
    TrainOptions o = matrixOptions(dir, comm, spec, ckpt);
    std::vector<double> losses;
    o.onMetrics = [&](const std::string &json) {
      size_t at = json.find("\"loss\": ");
      if (at != std::string::npos)
        losses.push_back(std::atof(json.c_str() + at + 8));
      return true;
    };
    o.metricsPath = dir + "/metrics-" + z + "-" + tag + ".jsonl";
    TrainResult result;
    if (!trainOk(*artifact, o, &result, name))
      continue;
    check(result.gradCompression == spec, name + ": reported spec");
    check(result.gradBytesSent == kSteps * matrixBytes(spec) &&
              result.gradBytesExact == kSteps * matrixBytes("none"),
          name + ": bytes " + std::to_string(result.gradBytesSent) + " of " +
              std::to_string(result.gradBytesExact));
    if (lead) {
      check(losses.size() == kSteps && losses.back() < 0.5 * losses.front(),
            name + ": the loss falls: " +
                (losses.empty() ? std::string("none")
                                : std::to_string(losses.front()) + " to " +
                                      std::to_string(losses.back())));
      std::string metrics = readText(o.metricsPath);
      char want[200];
      std::snprintf(want, sizeof want,
                    "{\"step\": %d, \"grad_compression\": {\"spec\": \"%s\", "
                    "\"steps\": %d, \"bytes_sent\": %llu, \"bytes_exact\": "
                    "%llu, \"ratio\": ",
                    kSteps, spec.c_str(), kSteps,
                    (unsigned long long)(kSteps * matrixBytes(spec)),
                    (unsigned long long)(kSteps * matrixBytes("none")));
      check(contains(metrics, want), name + ": the last metrics line " + want);
    }
    if (spec == "topk:1")
      compare(result.tensors, exact.tensors, 0, name + " == exact");
    else if (lead)
      check(result.tensors.at("W").data != exact.tensors.at("W").data,
            name + ": compression changed the update");

    // Resume at step 6: the bits of the straight run, residuals included.
    TrainOptions again = matrixOptions(dir, comm, spec, ckpt + "-resumed");
    again.saveEvery = 0;
    again.resumePath = ckpt + "/" + checkpointFileName(6);
    TrainResult resumed;
    if (!trainOk(*artifact, again, &resumed, name + " resumed"))
      continue;
    compare(resumed.tensors, result.tensors, 0, name + " resumed");
    check(resumed.gradBytesSent == 6 * matrixBytes(spec),
          name + ": resumed bytes");
    if (lead) {
      std::vector<std::string> names = {"W.grad_residual.dp0",
                                        "W.grad_residual.dp1"};
      if (spec.rfind("powersgd", 0) == 0)
        names.push_back("W.powersgd_q"); // b: a vector, exact
      else
        names.insert(names.end(),
                     {"b.grad_residual.dp0", "b.grad_residual.dp1"});
      std::string final = "/" + checkpointFileName(kSteps);
      compareCheckpointState(ckpt + final, ckpt + "-resumed" + final, names,
                             name + " resumed");
      if (spec != "topk:1")
        check(
            differ(ckpt + final, "W.grad_residual.dp0", "W.grad_residual.dp1"),
            name + ": the ranks' residuals differ");
      std::unique_ptr<SafetensorsFile> f =
          SafetensorsFile::open(ckpt + "/" + checkpointFileName(6), &error);
      check(f && f->metadata().count("grad_compression") &&
                f->metadata().at("grad_compression") == spec &&
                f->metadata().at("grad_compression_ranks") == std::to_string(n),
            name + ": checkpoint metadata " + error);
    }
    comm.barrier(&error);
  }
}

/// --accumulate 2 on the ZeRO-0 model: apply_gradients reduces (and
/// compresses) once per step.
void accumulated(Collectives &comm, const std::string &dir) {
  const bool lead = comm.rank() == 0;
  std::string error;
  std::unique_ptr<Artifact> artifact = loadOrFail(dir + "/matrix-zero0.loom");
  if (!artifact)
    return;
  TrainResult exact, all, lossy, resumed;
  TrainOptions o = matrixOptions(dir, comm, "", "");
  o.accumulate = 2;
  if (!trainOk(*artifact, o, &exact, "accumulate exact"))
    return;
  o.gradCompression = "topk:1";
  if (trainOk(*artifact, o, &all, "accumulate topk:1"))
    compare(all.tensors, exact.tensors, 0, "accumulate topk:1 == exact");
  o.gradCompression = "int8";
  o.checkpointDir = dir + "/ckpt-accumulate";
  o.saveEvery = 6;
  if (!trainOk(*artifact, o, &lossy, "accumulate int8"))
    return;
  check(lossy.gradBytesSent == kSteps * matrixBytes("int8"),
        "accumulate int8: one reduction per step");
  if (lead)
    check(lossy.tensors.at("W").data != exact.tensors.at("W").data,
          "accumulate int8: compression changed the update");
  TrainOptions again = o;
  again.checkpointDir.clear();
  again.saveEvery = 0;
  again.resumePath = o.checkpointDir + "/" + checkpointFileName(6);
  if (trainOk(*artifact, again, &resumed, "accumulate int8 resumed"))
    compare(resumed.tensors, lossy.tensors, 0, "accumulate int8 resumed");
  comm.barrier(&error);
}

/// Resuming across specs and from plain checkpoints; the plan's
/// grad_compression; what is refused.
void crossing(Collectives &comm, const std::string &dir) {
  const bool lead = comm.rank() == 0;
  std::string error;
  const std::string path = dir + "/matrix-plan-int8.loom";
  const std::string tpPath = dir + "/tp-1x2.loom";
  if (lead) {
    check(writeMatrixArtifact(path, comm.size(), 0, true,
                              ", \"grad_compression\": \"int8\""),
          "write the int8 plan");
    std::filesystem::create_directories(tpPath);
    check(writeTensorParallelRegressionArtifact(tpPath, 1, 2), "write tp");
  }
  comm.barrier(&error);
  std::unique_ptr<Artifact> artifact = loadOrFail(path);
  if (!artifact)
    return;
  auto logged = [&](TrainOptions o, const std::string &what) {
    std::string log = dir + "/log-" + std::to_string(comm.rank());
    std::FILE *f = std::fopen(log.c_str(), "w");
    o.log = f;
    o.progress = ProgressMode::Lines;
    TrainResult r;
    trainOk(*artifact, o, &r, what);
    std::fclose(f);
    return std::make_pair(r, readText(log));
  };
  // The plan's spec applies; the options override it.
  auto [byPlan, planLog] =
      logged(matrixOptions(dir, comm, "", dir + "/ckpt-plan"), "plan's int8");
  check(byPlan.gradCompression == "int8" &&
            byPlan.gradBytesSent == kSteps * matrixBytes("int8"),
        "the plan's grad_compression applies");
  if (lead)
    check(contains(planLog, "gradient compression int8: 2 of 2 gradient "
                            "reduction(s) compressed, over 2 data-parallel "
                            "ranks") &&
              contains(planLog, "; gradient compression int8: 80 of 288 "
                                "bytes per step sent (3.6x less)"),
          "the plan's int8 says what it compresses and sends: " + planLog);
  auto [none, noneLog] = logged(matrixOptions(dir, comm, "none", ""), "none");
  check(none.gradCompression.empty() && none.gradBytesSent == 0,
        "--grad-compression=none overrides the plan");

  const std::string int8Ckpt = dir + "/ckpt-plan/" + checkpointFileName(6);
  // Another spec: zero residuals, with a warning.
  TrainOptions o = matrixOptions(dir, comm, "topk:0.25", "");
  o.resumePath = int8Ckpt;
  auto [other, otherLog] = logged(o, "int8 checkpoint resumed with topk");
  if (lead)
    check(contains(otherLog, "warning: the checkpoint's gradient compression "
                             "state is for 'int8' over 2 data-parallel "
                             "ranks, this run's 'topk:0.25' over 2: it is "
                             "not used, the residuals start at zero"),
          "another spec warns: " + otherLog);
  // No compression: the state is ignored, with a note.
  o.gradCompression = "none";
  auto [ignored, ignoredLog] = logged(o, "int8 checkpoint resumed plain");
  if (lead)
    check(contains(ignoredLog, "note: the checkpoint holds gradient "
                               "compression state ('int8' over 2 "
                               "data-parallel ranks); this run compresses "
                               "nothing and ignores it"),
          "a plain run ignores the state: " + ignoredLog);
  // A plain checkpoint into a compressed run: zero residuals.
  o.gradCompression = "int8";
  o.resumePath = dir + "/ckpt-zero0/" + checkpointFileName(6);
  auto [fromPlain, fromPlainLog] = logged(o, "plain checkpoint resumed int8");
  if (lead)
    check(contains(fromPlainLog, "note: the checkpoint holds no gradient "
                                 "compression state: the residuals start "
                                 "at zero"),
          "a plain checkpoint starts at zero: " + fromPlainLog);

  // A tp axis of 2: refused.
  std::unique_ptr<Artifact> tp = loadOrFail(tpPath);
  if (tp) {
    TrainOptions t = trainingOptions(dir, 1);
    t.collectives = &comm;
    t.gradCompression = "int8";
    TrainResult r;
    ErrorCode code = ErrorCode::Ok;
    check(!train(*tp, t, &r, &error, &code) && code == ErrorCode::Unsupported &&
              contains(error, "gradient compression 'int8' with mesh axis "
                              "'tp' of 2 ranks (mesh dp=1, tp=2) is not "
                              "implemented"),
          "a tp axis is refused: " + error);
  }
  comm.barrier(&error);
}

/// The chain model on mesh [dp=2, pp=2], its reductions named.
void pipelined(Collectives &comm, const std::string &dir) {
  const bool lead = comm.rank() == 0;
  std::string error;
  ChainPipeline p;
  p.ranks = 2;
  p.microbatches = 2;
  p.dp = 2;
  p.gradFields = true;
  const std::string path = dir + "/chain.loom";
  if (lead)
    check(writeChainPipelineArtifact(path, p), "write the pipeline");
  comm.barrier(&error);
  std::unique_ptr<Artifact> artifact = loadOrFail(path);
  if (!artifact)
    return;
  auto options = [&](const std::string &spec, const std::string &ckpt) {
    TrainOptions o = trainingOptions(dir, 1);
    o.steps = 6;
    o.collectives = &comm;
    o.gradCompression = spec;
    if (!ckpt.empty()) {
      o.checkpointDir = ckpt;
      o.saveEvery = 3;
    }
    return o;
  };
  TrainResult exact;
  if (!trainOk(*artifact, options("", ""), &exact, "pipeline exact"))
    return;
  // Per step, one dp replica (both stages): w0 [4, 1], w1 [1, 1], b [1].
  struct Case {
    std::string spec;
    uint64_t bytes;
  };
  for (const Case &c : {Case{"int8", (4 + 4) + (1 + 4) + (1 + 4)},
                        Case{"topk:1", 4 * 8 + 8 + 8}}) {
    std::string name = "pipeline " + c.spec;
    std::string ckpt = dir + "/ckpt-chain-" + c.spec.substr(0, 4);
    TrainResult result;
    TrainOptions o = options(c.spec, ckpt);
    std::vector<double> losses;
    o.onMetrics = [&](const std::string &json) {
      size_t at = json.find("\"loss\": ");
      if (at != std::string::npos)
        losses.push_back(std::atof(json.c_str() + at + 8));
      return true;
    };
    if (!trainOk(*artifact, o, &result, name))
      continue;
    if (lead)
      check(losses.size() == 6 && losses.back() < 0.75 * losses.front(),
            name + ": the loss falls: " +
                (losses.empty() ? std::string("none")
                                : std::to_string(losses.front()) + " to " +
                                      std::to_string(losses.back())));
    check(result.gradBytesSent == 6 * c.bytes &&
              result.gradBytesExact == 6 * 24u,
          name + ": bytes " + std::to_string(result.gradBytesSent) + " of " +
              std::to_string(result.gradBytesExact));
    if (c.spec == "topk:1" && lead)
      compare(result.tensors, exact.tensors, 0, name + " == exact");
    TrainOptions again = options(c.spec, ckpt + "-resumed");
    again.saveEvery = 0;
    again.resumePath = ckpt + "/" + checkpointFileName(3);
    TrainResult resumed;
    if (!trainOk(*artifact, again, &resumed, name + " resumed"))
      continue;
    if (lead) {
      compare(resumed.tensors, result.tensors, 0, name + " resumed");
      std::vector<std::string> names;
      for (const char *param : {"w0", "w1", "b"})
        for (int r = 0; r < 2; ++r)
          names.push_back(std::string(param) + ".grad_residual.dp" +
                          std::to_string(r));
      std::string final = "/" + checkpointFileName(6);
      compareCheckpointState(ckpt + final, ckpt + "-resumed" + final, names,
                             name + " resumed");
    }
    comm.barrier(&error);
  }
}

/// The matrix model on dp=4, ZeRO 1, with int8.
void fourRanks(Collectives &comm, const std::string &dir) {
  const bool lead = comm.rank() == 0;
  std::string error;
  const std::string path = dir + "/matrix-dp4.loom";
  if (lead)
    check(writeMatrixArtifact(path, 4, 1), "write dp4");
  comm.barrier(&error);
  std::unique_ptr<Artifact> artifact = loadOrFail(path);
  if (!artifact)
    return;
  TrainResult result;
  TrainOptions o = matrixOptions(dir, comm, "int8", dir + "/ckpt-dp4");
  if (!trainOk(*artifact, o, &result, "dp4 int8"))
    return;
  check(result.gradBytesSent == kSteps * matrixBytes("int8"), "dp4 bytes");
  TrainOptions again = matrixOptions(dir, comm, "int8", "");
  again.resumePath = o.checkpointDir + "/" + checkpointFileName(6);
  TrainResult resumed;
  if (trainOk(*artifact, again, &resumed, "dp4 int8 resumed"))
    compare(resumed.tensors, result.tensors, 0, "dp4 int8 resumed");
  if (lead)
    check(differ(o.checkpointDir + "/" + checkpointFileName(kSteps),
                 "W.grad_residual.dp0", "W.grad_residual.dp3"),
          "dp4: four ranks' residuals");
  comm.barrier(&error);
}

int writeFixtures(const std::string &dir) {
  return writeMatrixArtifact(dir + "/int8.loom", 2, 1, true,
                             ", \"grad_compression\": \"int8\"") &&
                 writeMatrixData(dir + "/data.npz", 64)
             ? 0
             : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2]);
  MeshJob job = startJob();
  if (!job.comm)
    return job.status;
  Collectives &comm = *job.comm;
  std::string error;
  if (comm.rank() == 0) {
    check(writeMatrixData(job.dir + "/matrix.npz", 64), "write matrix data");
    check(writeRegressionData(job.dir + "/data.npz", 64), "write data");
  }
  comm.barrier(&error);
  if (comm.size() == 2) {
    for (int zero : {0, 1, 2})
      methods(comm, job.dir, zero);
    accumulated(comm, job.dir);
    crossing(comm, job.dir);
  } else if (comm.size() == 4) {
    pipelined(comm, job.dir);
    fourRanks(comm, job.dir);
  }
  int64_t failed = failuresInAll(comm);
  if (comm.rank() == 0)
    std::printf("%d ranks (mpi): gradient compression: %d checks per rank, "
                "%lld failed in all\n",
                comm.size(), rankChecks.checks, static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
