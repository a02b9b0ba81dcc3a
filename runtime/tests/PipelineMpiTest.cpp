//===- PipelineMpiTest.cpp - Pipeline-parallel training under mpirun ------===//
//
// Run as `mpirun -np N LoomRTPipelineMpiTest` (CTest runs N = 2 and 4):
// the chain model of PipelineFixtures.h cut into stages, trained over the
// N ranks with each schedule (gpipe, 1f1b, interleaved, zb-h1, and lists
// written by hand), against the same model trained by one artifact in one
// process with --accumulate M (M x n_dp with data-parallel rows): the
// parameters and optimizer state bit for bit (without dp rows) or to 1e-6
// (with them: each row's mean is averaged over the rows, the reference
// sums all the micro-batches first; and with a param several stages
// read, `tie`, whose stages' sums are added after the micro-batches',
// every rank's copy of it checked against the owner's); the stashed
// activations measured
// against the lists; the trace every rank contributes to; checkpoints
// that resume the pipeline, resume in one process with the plain
// artifact, and the other way round.
//
// Exit status 0 only if every check on every rank passed; rank 0 prints
// the total. `LoomRTPipelineMpiTest --write DIR` (no MPI) writes a 2-rank
// 1f1b artifact and data for CTest's loom-run tests;
// `LoomRTPipelineMpiTest --check-trace FILE STEPS` checks the trace that
// loom-run wrote for it.
//
//===----------------------------------------------------------------------===//

#include "MeshTestUtil.h"
#include "PipelineFixtures.h"

#include "loomrt/Artifact.h"
#include "loomrt/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {

constexpr int kSteps = 6;

std::unique_ptr<Artifact> loadOrFail(const std::string &path) {
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(path, &error);
  check(bool(a), "load " + path + ": " + error);
  return a;
}

std::vector<std::string> readLines(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

/// The largest |a - b| / max(1, |b|) over the f32 tensors of `want`.
double maxRelativeDifference(const std::map<std::string, NpyArray> &got,
                             const std::map<std::string, NpyArray> &want) {
  double worst = 0;
  for (const auto &[name, t] : want) {
    auto it = got.find(name);
    if (it == got.end() || it->second.data.size() != t.data.size())
      return INFINITY;
    std::vector<float> a = f32Values(it->second), b = f32Values(t);
    for (size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, double(std::fabs(a[i] - b[i])) /
                                  std::max(1.0, double(std::fabs(b[i]))));
  }
  return worst;
}

/// Every rank whose stages read the shared `tie` holds it, with the bits
/// of the owner's (world rank 0's gathered) value; the others do not.
void checkSharedCopies(Collectives &comm, const ChainPipeline &p,
                       const TrainResult &result, const std::string &name) {
  const int world = comm.size();
  auto it = result.tensors.find(kTie);
  double mine[2] = {it != result.tensors.end() ? 1.0 : 0.0, 0.0};
  if (it != result.tensors.end() && it->second.data.size() == 4)
    mine[1] = double(f32Values(it->second)[0]);
  std::vector<double> all(size_t(2 * world));
  std::string error;
  check(
      waitFor(comm.allGather(mine, all.data(), 2, DType::F64, &error), &error),
      name + ": gathering the copies of 'tie': " + error);
  for (int r = 0; r < world; ++r) {
    const int pp = r / p.tp % p.ranks;
    bool reads = false;
    for (int s : p.tied)
      reads |= s % p.ranks == pp;
    // World rank 0 gathers every tensor.
    check(all[size_t(2 * r)] == ((reads || r == 0) ? 1.0 : 0.0),
          name + ": rank " + std::to_string(r) +
              (reads ? " holds no" : " holds a") + " copy of 'tie'");
    if (all[size_t(2 * r)] == 1.0)
      check(all[size_t(2 * r + 1)] == all[1],
            name + ": rank " + std::to_string(r) + "'s copy of 'tie' " +
                std::to_string(all[size_t(2 * r + 1)]) + ", rank 0's " +
                std::to_string(all[1]));
  }
}

/// `p` over the world against the plain artifact in this process.
void pipelined(Collectives &comm, const std::string &dir, ChainPipeline p,
               const std::string &name) {
  const bool lead = comm.rank() == 0;
  const int S = p.stages(), M = p.microbatches;
  // With dp rows, or a shared param (each stage's sum over the
  // micro-batches is formed first), the sums are reassociated.
  const double tolerance = p.dp > 1 || !p.tied.empty() ? 1e-6 : 0;
  std::string path = dir + "/" + name + ".loom";
  // Each case its own files: rewriting a kernels.so in place that another
  // rank (or an earlier case, not yet unmapped) has loaded crashes dlsym.
  std::string plainPath = dir + "/plain-" + name + ".loom";
  std::string error;
  if (lead) {
    check(writeChainPipelineArtifact(path, p), name + ": write");
    check(writeChainReferenceArtifact(plainPath, S, p.tied),
          name + ": write plain");
  }
  comm.barrier(&error);
  std::unique_ptr<Artifact> piped = loadOrFail(path);
  std::unique_ptr<Artifact> plain = loadOrFail(plainPath);
  if (!piped || !plain)
    return;

  TrainOptions ref = trainingOptions(dir, M * p.dp);
  ref.steps = kSteps;
  TrainResult reference;
  if (!trainOk(*plain, ref, &reference, name + ": reference"))
    return;

  TrainOptions o = trainingOptions(dir, 1);
  o.steps = kSteps;
  o.collectives = &comm;
  o.checkpointDir = dir + "/ckpt-" + name;
  o.saveEvery = 3;
  o.pipelineTracePath = dir + "/trace-" + name + ".jsonl";
  o.metricsPath = dir + "/metrics-" + name + ".jsonl";
  TrainResult result;
  if (!trainOk(*piped, o, &result, name))
    return;
  check(result.finalStep == kSteps, name + ": final step");
  check(result.position.accumulate == M * p.dp,
        name + ": a step takes M x dp micro-batches");
  // Every rank knows the loss (summed over the rows' last stages).
  checkLoss(result, reference, tolerance, name);
  if (lead) {
    compare(result.tensors, reference.tensors, tolerance, name);
    std::printf("%s: max relative difference to one process %g\n", name.c_str(),
                maxRelativeDifference(result.tensors, reference.tensors));
  }

  if (!p.tied.empty())
    checkSharedCopies(comm, p, result, name);

  // What each pipeline rank held, as its list says: x (128 bytes) on stage
  // 0, the boundary (32) on the others, y (32) too on the last.
  std::vector<std::vector<std::string>> lists = p.lists();
  const PipelineStats &ps = result.pipeline;
  check(ps.ranksStats.size() == size_t(p.ranks), name + ": stats per rank");
  check(ps.schedule == p.schedule && ps.microbatches == M,
        name + ": stats name the schedule");
  check(ps.idealBubble ==
            pp::idealBubble(p.schedule, p.ranks, p.virtualStages, M),
        name + ": ideal bubble");
  for (const PipelineRankStats &r : ps.ranksStats) {
    std::string at = name + ": pipeline rank " + std::to_string(r.rank);
    check(r.bubble >= 0 && r.bubble < 1,
          at + ": bubble " + std::to_string(r.bubble));
    for (size_t v = 0; v < r.stages.size(); ++v) {
      int64_t s = r.stages[v];
      int64_t want = peakInFlight(lists[size_t(r.rank)], s);
      uint64_t bytes = s == 0 ? 128 : s == S - 1 ? 64 : 32;
      check(r.peakInFlight[v] == want, at + ": stage " + std::to_string(s) +
                                           " in flight " +
                                           std::to_string(r.peakInFlight[v]) +
                                           ", list " + std::to_string(want));
      check(r.peakStashBytes[v] == uint64_t(want) * bytes,
            at + ": stage " + std::to_string(s) + " stash bytes");
    }
  }

  if (lead) {
    // Every rank's actions of every step, rank 0's first.
    size_t perStep = 0;
    for (const auto &l : lists)
      perStep += l.size() * size_t(p.dp * p.tp);
    std::vector<std::string> lines = readLines(o.pipelineTracePath);
    check(lines.size() == kSteps * perStep,
          name + ": trace lines " + std::to_string(lines.size()));
    std::vector<int> seen(size_t(comm.size()), 0);
    for (const std::string &line : lines)
      for (int r = 0; r < comm.size(); ++r)
        if (line.find("{\"rank\": " + std::to_string(r) + ", ") == 0)
          ++seen[size_t(r)];
    for (int r = 0; r < comm.size(); ++r)
      check(seen[size_t(r)] ==
                kSteps * int(lists[size_t(r / p.tp % p.ranks)].size()),
            name + ": trace lines of rank " + std::to_string(r));
    check(!lines.empty() &&
              lines[0].find("\"step\": 0, \"action\": \"" + lists[0][0] +
                            "\", \"start\": ") != std::string::npos,
          name + ": trace starts with rank 0's first action");
    std::vector<std::string> metrics = readLines(o.metricsPath);
    check(metrics.size() == kSteps + 1 &&
              metrics.back().find("\"pipeline\": {\"schedule\": \"" +
                                  p.schedule + "\"") != std::string::npos,
          name + ": metrics end with the pipeline's measurements");
  }

  // The step-3 checkpoint: resumed by the pipeline (the same bits as
  // straight through), and by the plain artifact in one process.
  TrainOptions again = o;
  again.checkpointDir.clear();
  again.saveEvery = 0;
  again.pipelineTracePath.clear();
  again.metricsPath.clear();
  again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
  TrainResult resumed;
  if (trainOk(*piped, again, &resumed, name + " resumed") && lead)
    compare(resumed.tensors, result.tensors, 0, name + " resumed");
  TrainOptions alone = ref;
  alone.resumePath = again.resumePath;
  if (trainOk(*plain, alone, &resumed, name + " resumed alone"))
    compare(resumed.tensors, reference.tensors, tolerance,
            name + " resumed alone");

  // One process's checkpoint into the pipeline.
  TrainOptions half = ref;
  half.steps = 3;
  half.checkpointDir =
      dir + "/ckpt-plain-" + name + "-" + std::to_string(comm.rank());
  TrainResult ignored;
  trainOk(*plain, half, &ignored, name + " plain to step 3");
  comm.barrier(&error);
  TrainOptions into = again;
  into.resumePath = dir + "/ckpt-plain-" + name + "-0/" + checkpointFileName(3);
  if (trainOk(*piped, into, &resumed, name + " from one process") && lead)
    compare(resumed.tensors, reference.tensors, tolerance,
            name + " from one process");
  comm.barrier(&error);
}

/// For CTest's loom-run tests: a 2-rank 1f1b pipeline, the plain chain it
/// must equal (with --accumulate 4), and data.
int writeFixtures(const std::string &dir) {
  ChainPipeline p; // 2 ranks, 1f1b, 4 micro-batches
  if (!writeChainPipelineArtifact(dir + "/pp2.loom", p) ||
      !writeChainReferenceArtifact(dir + "/plain.loom", p.stages(), p.tied) ||
      !writeRegressionData(dir + "/data.npz", 64))
    return 1;
  return 0;
}

/// loom-run's trace of pp2.loom: every action of both ranks for `steps`.
int checkTrace(const std::string &file, int steps) {
  std::vector<std::vector<std::string>> lists = ChainPipeline().lists();
  std::vector<std::string> lines = readLines(file);
  size_t want = size_t(steps) * (lists[0].size() + lists[1].size());
  if (lines.size() != want) {
    std::fprintf(stderr, "%s: %zu lines, expected %zu\n", file.c_str(),
                 lines.size(), want);
    return 1;
  }
  size_t k = 0;
  for (int r = 0; r < 2; ++r)
    for (int s = 0; s < steps; ++s)
      for (const std::string &action : lists[size_t(r)]) {
        std::string head = "{\"rank\": " + std::to_string(r) +
                           ", \"pp\": " + std::to_string(r) +
                           ", \"step\": " + std::to_string(s) +
                           ", \"action\": \"" + action + "\", \"start\": ";
        if (lines[k].compare(0, head.size(), head) != 0) {
          std::fprintf(stderr, "%s: line %zu is '%s', expected '%s...'\n",
                       file.c_str(), k + 1, lines[k].c_str(), head.c_str());
          return 1;
        }
        ++k;
      }
  std::printf("trace: %zu actions of 2 ranks\n", lines.size());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2]);
  if (argc == 4 && std::string(argv[1]) == "--check-trace")
    return checkTrace(argv[2], std::atoi(argv[3]));
  MeshJob job = startJob();
  if (!job.comm)
    return job.status;
  Collectives &comm = *job.comm;
  std::string error;
  if (comm.rank() == 0)
    check(writeRegressionData(job.dir + "/data.npz", 64), "write data");
  comm.barrier(&error);
  const int n = comm.size();
  auto make = [](int ranks, int v, int m, int dp, const std::string &name) {
    ChainPipeline p;
    p.ranks = ranks;
    p.virtualStages = v;
    p.microbatches = m;
    p.dp = dp;
    p.schedule = name;
    return p;
  };
  if (n == 2) {
    for (const char *name : {"gpipe", "1f1b", "zb-h1"})
      pipelined(comm, job.dir, make(2, 1, 4, 1, name), name);
    pipelined(comm, job.dir, make(2, 2, 4, 1, "interleaved"), "interleaved");
    // docs/pipeline.md's example, and a list with I and W.
    ChainPipeline byHand = make(2, 1, 3, 1, "file");
    byHand.actions = {
        tokens("F0.0 SF0.0 F0.1 SF0.1 RB0.0 B0.0 F0.2 SF0.2 RB0.1 B0.1 RB0.2 "
               "B0.2"),
        tokens("RF1.0 F1.0 B1.0 SB1.0 RF1.1 F1.1 B1.1 SB1.1 RF1.2 F1.2 B1.2 "
               "SB1.2")};
    pipelined(comm, job.dir, byHand, "by-hand");
    ChainPipeline split = make(2, 1, 2, 1, "file");
    split.actions = {
        tokens("F0.0 SF0.0 F0.1 SF0.1 RB0.0 I0.0 RB0.1 I0.1 W0.0 W0.1"),
        tokens("RF1.0 F1.0 I1.0 SB1.0 RF1.1 F1.1 I1.1 SB1.1 W1.0 W1.1")};
    pipelined(comm, job.dir, split, "split-by-hand");
    // A param read by the first and the last stage (docs/pipeline.md,
    // `shared`); interleaved: stage 2 on the owner's rank, 3 on the other.
    for (const char *name : {"gpipe", "1f1b", "zb-h1"}) {
      ChainPipeline tied = make(2, 1, 4, 1, name);
      tied.tied = {0, 1};
      pipelined(comm, job.dir, tied, std::string("tied-") + name);
    }
    ChainPipeline tied = make(2, 2, 4, 1, "interleaved");
    tied.tied = {0, 2, 3};
    pipelined(comm, job.dir, tied, "tied-interleaved");
  } else if (n == 4) {
    pipelined(comm, job.dir, make(4, 1, 4, 1, "1f1b"), "1f1b-4");
    pipelined(comm, job.dir, make(4, 2, 4, 1, "interleaved"), "interleaved-4");
    pipelined(comm, job.dir, make(4, 1, 6, 1, "zb-h1"), "zb-h1-4");
    pipelined(comm, job.dir, make(2, 1, 2, 2, "1f1b"), "dp2-1f1b");
    pipelined(comm, job.dir, make(2, 1, 3, 2, "gpipe"), "dp2-gpipe");
    ChainPipeline tp = make(2, 1, 4, 1, "1f1b");
    tp.tp = 2;
    pipelined(comm, job.dir, tp, "pp2-tp2");
    // Shared params over 4 ranks; one whose owner is not on world rank 0;
    // with dp rows and with a tp axis.
    ChainPipeline tied = make(4, 1, 4, 1, "1f1b");
    tied.tied = {0, 3};
    pipelined(comm, job.dir, tied, "tied-1f1b-4");
    tied = make(4, 2, 4, 1, "interleaved");
    tied.tied = {0, 4, 7};
    pipelined(comm, job.dir, tied, "tied-interleaved-4");
    tied = make(4, 1, 6, 1, "zb-h1");
    tied.tied = {1, 2, 3};
    pipelined(comm, job.dir, tied, "tied-zb-h1-4-owner1");
    tied = make(2, 1, 3, 2, "1f1b");
    tied.tied = {0, 1};
    pipelined(comm, job.dir, tied, "tied-dp2-1f1b");
    tied = make(2, 1, 4, 1, "gpipe");
    tied.tp = 2;
    tied.tied = {0, 1};
    pipelined(comm, job.dir, tied, "tied-pp2-tp2");
  }

  int64_t failed = failuresInAll(comm);
  if (comm.rank() == 0)
    std::printf("%d ranks (mpi): pipeline plans: %d checks per rank, %lld "
                "failed in all\n",
                comm.size(), rankChecks.checks, static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
