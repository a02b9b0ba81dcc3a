//===- MeshNcclTest.cpp - Plan collective steps over NCCL, under mpirun ---===//
//
// Run as `mpirun -np N LoomRTMeshNcclTest` with LOOMRT_CUDA_DRIVER and
// LOOMRT_CUBLASLT_LIBRARY naming the fake driver (tests/fakecuda) and
// LOOMRT_NCCL_LIBRARY the fake NCCL (tests/fakenccl: MPI on the fake
// driver's host memory): CTest runs N = 1, 2 and 4. Or with the real
// libraries, one rank per GPU (scripts/gpu_nccl_check.sh): the checks that
// need the fake kernels or the fakes' logs are then skipped.
//
// - One rank's NCCL through CollectiveSteps: a plan with mesh [dp=1] whose
//   axis is given a communicator of this rank alone (DeviceComms::set), so
//   that every step goes through ncclAllReduce / ncclReduceScatter /
//   ncclAllGather on the CUDA backend's arena and stream: what a machine
//   with one GPU can check (NCCL refuses two ranks on one GPU).
// - Every op through Artifact::run on a cuda plan with mesh dp=N (and, with
//   4 ranks, [dp=2, tp=2]: a communicator per axis), against values each
//   rank computes itself. With the fakes: the NCCL calls in plan order on
//   the arena's buffers (offsets, counts, types, reductions, the
//   communicator), on the stream the backend's copies use, interleaved
//   with those copies as the plan orders them (the fake stream's trace of
//   what ran), and one synchronization per run (for the outputs): no host
//   round trip, no CUDA graph.
// - (fakes) The regression model compiled for the mesh (ZeRO 1, 2, 3;
//   tensor parallel [dp=1, tp=N] and [dp=2, tp=2]) as cuda artifacts,
//   trained over NCCL, against the cuda model trained by one process with
//   --accumulate; a resume; checkpoints gathered over MPI.
// - NCCL missing on every rank, or on one: every rank fails with a message
//   (the one that lacks it names the library), none hangs.
//
// Exit status 0 only if every check on every rank passed; rank 0 prints
// the total. `LoomRTMeshNcclTest --write DIR` (no MPI) writes cuda
// artifacts for the fake driver, data and inputs for CTest's loom-run
// tests.
//
//===----------------------------------------------------------------------===//

#include "CollectiveSteps.h"
#include "CudaFixtures.h"
#include "MeshTestUtil.h"
#include "fakecuda/FakeCuda.h"
#include "fakenccl/FakeNccl.h"

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Mesh.h"
#include "loomrt/Trainer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::test;

namespace {
int localRank = -1;

/// The fakes' counters and logs, when the libraries the runtime loads are
/// the fakes (null members otherwise: real NCCL on real GPUs).
struct Fakes {
  FakeCudaStats *stats = nullptr;
  void (*reset)() = nullptr;
  const char *(*trace)() = nullptr;
  const FakeNcclCall *(*calls)(int64_t *) = nullptr;
  void (*clearCalls)() = nullptr;

  Fakes() {
    const char *driver = std::getenv("LOOMRT_CUDA_DRIVER");
    const char *nccl = std::getenv("LOOMRT_NCCL_LIBRARY");
    void *cu = driver ? ::dlopen(driver, RTLD_NOW | RTLD_LOCAL) : nullptr;
    void *nc = nccl ? ::dlopen(nccl, RTLD_NOW | RTLD_LOCAL) : nullptr;
    if (!cu || !nc)
      return;
    auto get =
        reinterpret_cast<FakeCudaStats *(*)()>(::dlsym(cu, "fakecuda_stats"));
    reset = reinterpret_cast<void (*)()>(::dlsym(cu, "fakecuda_reset"));
    trace = reinterpret_cast<const char *(*)()>(::dlsym(cu, "fakecuda_trace"));
    calls = reinterpret_cast<const FakeNcclCall *(*)(int64_t *)>(
        ::dlsym(nc, "fakenccl_calls"));
    clearCalls =
        reinterpret_cast<void (*)()>(::dlsym(nc, "fakenccl_clear_calls"));
    if (get && reset && trace && calls && clearCalls)
      stats = get();
  }
  explicit operator bool() const { return stats != nullptr; }
  /// Counters, trace and call log from now on.
  void clear() const {
    reset();
    clearCalls();
  }
  std::vector<FakeNcclCall> log() const {
    int64_t n = 0;
    const FakeNcclCall *c = calls(&n);
    return std::vector<FakeNcclCall>(c, c + n);
  }
};

// ncclDataType_t and ncclRedOp_t (nccl.h).
int ncclType(DType dtype) {
  switch (dtype) {
  case DType::F16:
    return 6;
  case DType::F32:
    return 7;
  case DType::F64:
    return 8;
  case DType::BF16:
    return 9;
  default:
    return -1;
  }
}
int ncclOp(CollectiveReduce reduce) {
  return reduce == CollectiveReduce::Max    ? 2
         : reduce == CollectiveReduce::Mean ? 4
                                            : 0;
}

/// What the NCCL calls of one run of `entry` must be, step by step, for
/// this rank at `coordinates` on the mesh: each step that communicates is
/// one call on the arena's buffers (NcclCollectives all-gathers bytes).
/// Also the fake stream's trace of the steps: a copy "d2d" (none in
/// place), an all-reduce out of place "d2d ext" (src to dst, then NCCL in
/// place), other NCCL calls "ext", rank_slice "d2d".
struct Expected {
  std::vector<FakeNcclCall> calls;
  std::string trace;
};
/// `everyCollective`: steps over an axis of one rank go through NCCL too
/// (a communicator of one rank set on the axis).
Expected expectedFor(const Plan & /*plan*/, const PlanEntry &entry,
                     const std::vector<int64_t> &coordinates,
                     bool everyCollective = false) {
  Expected e;
  auto word = [&](const char *w) {
    e.trace += (e.trace.empty() ? "" : " ") + std::string(w);
  };
  for (const PlanStep &step : entry.steps) {
    if (step.kind == PlanStep::Kind::Copy) {
      const PlanBuffer &s = entry.buffers[step.src];
      const PlanBuffer &d = entry.buffers[step.dst];
      if (s.offset != d.offset && d.bytes)
        word("d2d");
      continue;
    }
    if (step.kind != PlanStep::Kind::Collective)
      continue;
    const CollectiveStep &c = step.collective;
    const PlanBuffer &src = entry.buffers[c.src], &dst = entry.buffers[c.dst];
    bool nccl = everyCollective ? c.op != CollectiveOp::RankSlice
                                : stepCommunicates(step);
    if (!nccl) {
      if (src.offset != dst.offset && dst.bytes)
        word("d2d");
      continue;
    }
    FakeNcclCall call{};
    call.root = -1;
    call.redOp = -1;
    call.sendAllocation = call.recvAllocation = entry.arenaBytes;
    call.commSize = int(c.ranks);
    call.commRank = int(coordinates[c.axis]);
    // A reduction of dst's elements, from `send` into dst.
    auto reduction = [&](const char *op, uint64_t send) {
      std::snprintf(call.op, sizeof call.op, "%s", op);
      call.sendOffset = int64_t(send);
      call.recvOffset = int64_t(dst.offset);
      call.count = dst.elements;
      call.type = ncclType(dst.dtype);
      call.redOp = ncclOp(c.reduce);
    };
    switch (c.op) {
    case CollectiveOp::AllReduce:
      if (src.offset != dst.offset)
        word("d2d");
      reduction("ncclAllReduce", dst.offset); // in place, after the copy
      break;
    case CollectiveOp::ReduceScatter:
      reduction("ncclReduceScatter", src.offset);
      break;
    case CollectiveOp::AllGather:
      std::snprintf(call.op, sizeof call.op, "ncclAllGather");
      call.sendOffset = int64_t(src.offset);
      call.recvOffset = int64_t(dst.offset);
      call.count = src.bytes;
      call.type = 1; // ncclUint8
      break;
    case CollectiveOp::RankSlice:
      break;
    }
    word("ext");
    e.calls.push_back(call);
  }
  return e;
}

/// The NCCL calls made (`got`) against `want`, and all on `stream`; each
/// axis's calls on one communicator, different axes on different ones.
void checkCalls(const std::vector<FakeNcclCall> &got,
                const std::vector<FakeNcclCall> &want, void *stream,
                const std::string &what) {
  check(got.size() == want.size(), what + ": " + std::to_string(got.size()) +
                                       " NCCL calls, expected " +
                                       std::to_string(want.size()));
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const FakeNcclCall &g = got[i], &w = want[i];
    std::string at = what + ": NCCL call " + std::to_string(i) + " (" + g.op +
                     ", expected " + w.op + ")";
    check(std::string(g.op) == w.op, at + ": op");
    check(g.sendOffset == w.sendOffset && g.recvOffset == w.recvOffset,
          at + ": buffers at arena offsets " + std::to_string(g.sendOffset) +
              " -> " + std::to_string(g.recvOffset) + ", expected " +
              std::to_string(w.sendOffset) + " -> " +
              std::to_string(w.recvOffset));
    check(g.sendAllocation == w.sendAllocation &&
              g.recvAllocation == w.recvAllocation,
          at + ": in the entry's arena (" + std::to_string(g.recvAllocation) +
              " bytes, expected " + std::to_string(w.recvAllocation) + ")");
    check(g.count == w.count && g.type == w.type && g.redOp == w.redOp,
          at + ": count " + std::to_string(g.count) + " type " +
              std::to_string(g.type) + " op " + std::to_string(g.redOp) +
              ", expected " + std::to_string(w.count) + " " +
              std::to_string(w.type) + " " + std::to_string(w.redOp));
    check(g.commSize == w.commSize && g.commRank == w.commRank,
          at + ": communicator of " + std::to_string(g.commSize) +
              " ranks, this one " + std::to_string(g.commRank) + "; expected " +
              std::to_string(w.commSize) + ", " + std::to_string(w.commRank));
    check(g.stream == stream && stream != nullptr,
          at + ": on the stream of the backend's copies");
  }
}

/// "memset " (the first run: the new arena zeroed), an "h2d" per input,
/// the steps, a "d2h" per output.
std::string runTrace(const PlanEntry &entry, const std::string &steps,
                     bool first) {
  std::string t = first ? "memset" : "";
  for (size_t i = 0; i < entry.inputs.size(); ++i)
    t += (t.empty() ? "" : " ") + std::string("h2d");
  if (!steps.empty())
    t += " " + steps;
  for (size_t i = 0; i < entry.outputs.size(); ++i)
    t += " d2h";
  return t;
}

/// What the fake stream ran this run against `wantTrace`.
void checkTrace(const Fakes &fakes, const std::string &wantTrace,
                const std::string &at) {
  std::string trace = fakes.trace();
  check(trace == wantTrace,
        at + "the stream ran '" + trace + "', expected '" + wantTrace + "'");
}

/// One stream synchronization for the outputs (run 0 also one before it
/// allocates the pinned staging of the uploads).
void checkSynchronizations(const Fakes &fakes, int run, const std::string &at) {
  check(fakes.stats->synchronizations == (run == 0 ? 2 : 1),
        at + std::to_string(fakes.stats->synchronizations) +
            " stream synchronizations, expected " +
            (run == 0 ? "2 (staging, outputs)" : "1 (for the outputs)"));
}

std::unique_ptr<Artifact>
loadCuda(const std::string &dir, const std::string &what,
         StepCollectives kind = StepCollectives::Auto) {
  LoadOptions options;
  options.localRank = localRank;
  options.collectives = kind;
  options.collectiveTimeoutSeconds = 60;
  std::string error;
  std::unique_ptr<Artifact> a = Artifact::load(dir, options, &error);
  check(bool(a), what + ": load " + dir + ": " + error);
  if (a)
    check(a->backendName() == "cuda" &&
              a->stepCollectives() == StepCollectives::Device,
          what + ": the cuda backend, collective steps over NCCL");
  return a;
}

/// Runs entry `main` of `artifact` on `inputs`, the fakes' counters and
/// logs cleared first; false (a failed check) where it fails.
bool runMain(Artifact &artifact, const Fakes &fakes,
             const std::map<std::string, const NpyArray *> &inputs,
             std::vector<NpyArray> *out, const std::string &at) {
  if (fakes)
    fakes.clear();
  std::string error;
  bool ran = artifact.run("main", inputs, out, &error);
  check(ran, at + error);
  return ran;
}

/// A plan of collective steps over an axis of one rank, each run through
/// NCCL by a communicator of this rank alone: what one GPU can check.
void oneRankThroughNccl(Collectives &world, const std::string &dir,
                        const Fakes &fakes) {
  std::string error;
  // This rank alone: a communicator of one, split from the world.
  std::unique_ptr<Collectives> self = world.split(world.rank(), 0, &error);
  check(self && self->size() == 1, "a communicator of one rank: " + error);
  if (!self)
    return;
  const int64_t len = 6;
  EntryBuilder e("main");
  int x = e.buffer("f32", {len});
  int xb = e.buffer("bf16", {len});
  int sum = e.buffer("f32", {len});
  int max = e.buffer("f32", {len});
  int mean = e.buffer("f32", {len});
  int rs = e.buffer("f32", {len});
  int gathered = e.buffer("f32", {len});
  int slice = e.buffer("f32", {len});
  int bsum = e.buffer("bf16", {len});
  e.input("x", "input", x);
  e.input("xb", "input", xb);
  e.collective("all_reduce", "sum", "dp", x, sum);
  e.copy(x, max);
  e.collective("all_reduce", "max", "dp", max, max);
  e.collective("all_reduce", "mean", "dp", sum, mean);
  e.collective("reduce_scatter", "sum", "dp", mean, rs);
  e.collective("all_gather", "", "dp", rs, gathered);
  e.collective("rank_slice", "", "dp", gathered, slice);
  e.collective("all_reduce", "sum", "dp", xb, bsum);
  for (int id : {sum, max, mean, rs, gathered, slice, bsum})
    e.output("out" + std::to_string(id), "output", id);
  std::string planText = toCudaPlan(
      planJson({e}, "null", "null", meshJson({"dp"}, {1})), 90, "null", "null");
  std::optional<Plan> parsed = parsePlan(planText, "plan.json", &error);
  check(bool(parsed), "one rank: plan: " + error);
  if (!parsed)
    return;
  const Plan &plan = *parsed;
  const PlanEntry &entry = plan.entries[0];

  BackendOptions options;
  options.localRank = localRank;
  ErrorCode code = ErrorCode::Ok;
  std::unique_ptr<Backend> backend =
      createBackend("cuda", &error, &code, options);
  check(bool(backend), "one rank: the cuda backend: " + error);
  if (!backend || !backend->load(plan, dir, &error, &code)) {
    check(false, "one rank: backend load: " + error);
    return;
  }
  std::unique_ptr<Arena> arena =
      backend->allocateArena(entry.arenaBytes, &error, &code);
  check(bool(arena), "one rank: arena: " + error);
  DeviceComms device;
  std::unique_ptr<Collectives> nccl =
      backend->startDeviceCollectives(*self, 60, &error);
  check(nccl && nccl->size() == 1 && std::string(nccl->name()) == "nccl",
        "one rank: NCCL of one rank on the backend: " + error);
  if (!arena || !nccl)
    return;
  device.set(0, std::move(nccl));
  // The arena's zeroing out of the way of the runs' traces.
  check(backend->synchronize(&error), "one rank: synchronize: " + error);

  std::vector<float> xf(len);
  std::vector<uint16_t> xbv(len);
  for (int64_t i = 0; i < len; ++i) {
    xf[size_t(i)] = float(world.rank() + 1) * 0.5f + float(i);
    xbv[size_t(i)] = floatToBf16(xf[size_t(i)]);
  }
  for (int run = 0; run < 2; ++run) {
    if (fakes)
      fakes.clear();
    std::string at = "one rank, run " + std::to_string(run) + ": ";
    bool ok = backend->upload(*arena, entry.buffers[x].offset, xf.data(),
                              xf.size() * 4, &error) &&
              backend->upload(*arena, entry.buffers[xb].offset, xbv.data(),
                              xbv.size() * 2, &error);
    CollectiveTimes times;
    {
      CollectiveSteps steps(plan, entry, *backend, *arena, nullptr,
                            /*blocking=*/false, &times, &device);
      for (const PlanStep &step : entry.steps) {
        if (!ok)
          break;
        ok = steps.beforeStep(step, &error);
        if (ok && step.kind == PlanStep::Kind::Copy)
          ok = backend->copy(*arena, entry.buffers[step.src].offset,
                             entry.buffers[step.dst].offset,
                             entry.buffers[step.dst].bytes, &error);
        else if (ok)
          ok = steps.issue(step, &error);
        ok = ok && steps.afterStep(&error);
      }
      ok = ok && steps.finish(&error);
    }
    check(ok, at + "steps: " + error);
    if (!ok)
      return;
    check(times.calls == 6,
          at + std::to_string(times.calls) + " NCCL calls counted, expected 6");
    std::vector<std::vector<uint8_t>> out(entry.outputs.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const PlanBuffer &b = entry.buffers[entry.outputs[i].buffer];
      out[i].resize(b.bytes);
      ok = ok &&
           backend->download(*arena, b.offset, out[i].data(), b.bytes, &error);
    }
    ok = ok && backend->synchronize(&error);
    check(ok, at + "outputs: " + error);
    if (!ok)
      return;
    // Over one rank every op gives its input back.
    for (size_t i = 0; i + 1 < out.size(); ++i) {
      std::vector<float> v(len);
      std::memcpy(v.data(), out[i].data(), size_t(len) * 4);
      check(v == xf, at + "output " + entry.outputs[i].name + " is x");
    }
    check(std::memcmp(out.back().data(), xbv.data(), size_t(len) * 2) == 0,
          at + "the bf16 sum is xb");
    if (!fakes)
      continue;
    Expected want = expectedFor(plan, entry, {0}, /*everyCollective=*/true);
    checkCalls(fakes.log(), want.calls, fakes.stats->lastStream, at);
    std::string wantTrace = "h2d h2d " + want.trace;
    for (size_t i = 0; i < out.size(); ++i)
      wantTrace += " d2h";
    checkTrace(fakes, wantTrace, at);
    checkSynchronizations(fakes, run, at);
  }
}

/// Every op through Artifact::run on a cuda plan with mesh dp=n (the
/// values of MeshMpiTest's collectiveSteps).
void everyOp(Collectives &comm, const std::string &dir, const Fakes &fakes) {
  const int n = comm.size(), r = comm.rank();
  std::string artifactDir = dir + "/every-op-" + std::to_string(r);
  std::filesystem::create_directories(artifactDir);
  std::string planText = toCudaPlan(
      planJson({everyOpEntry(n)}, "null", "null", meshJson({"dp"}, {n})), 90,
      "null", "null");
  writeBytes(artifactDir + "/plan.json", planText);
  std::unique_ptr<Artifact> artifact = loadCuda(artifactDir, "every op");
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  EveryOpInputs in(n, r);
  const PlanEntry &entry = artifact->plan().entries[0];
  Expected want = expectedFor(artifact->plan(), entry, {r});
  std::vector<NpyArray> out;
  // Three runs: none is recorded into a graph (the NCCL calls' events).
  for (int run = 0; run < 3; ++run) {
    std::string at = "every op, run " + std::to_string(run) + ": ";
    if (!runMain(*artifact, fakes, in.refs(), &out, at))
      return;
    checkEveryOp(out, n, r, at);
    // One rank: nothing communicates, and the entry is a CUDA graph.
    if (!fakes || n == 1)
      continue;
    checkCalls(fakes.log(), want.calls, fakes.stats->lastStream, at);
    checkTrace(fakes, runTrace(entry, want.trace, run == 0), at);
    checkSynchronizations(fakes, run, at);
    check(fakes.stats->captures == 0, at + "no CUDA graph");
  }
  CollectiveTimes times = artifact->collectiveTimes();
  int64_t perRun = 0;
  for (const PlanStep &step : entry.steps)
    perRun += stepCommunicates(step);
  check(times.calls == (n > 1 ? 3 * perRun : 0),
        "every op: " + std::to_string(times.calls) + " collectives counted");
  artifact->setCollectives(nullptr);
}

/// A mesh [dp=2, tp=2] on 4 ranks (rank = i_dp * 2 + i_tp): every op over
/// each axis through its own NCCL communicator (MeshMpiTest's twoAxisSteps
/// on the cuda backend).
void twoAxes(Collectives &comm, const std::string &dir, const Fakes &fakes) {
  const int q = comm.rank(), idp = q / 2, itp = q % 2;
  std::string artifactDir = dir + "/two-axes-" + std::to_string(q);
  std::filesystem::create_directories(artifactDir);
  writeBytes(artifactDir + "/plan.json",
             toCudaPlan(planJson({twoAxisEntry()}, "null", "null",
                                 meshJson({"dp", "tp"}, {2, 2})),
                        90, "null", "null"));
  std::unique_ptr<Artifact> artifact = loadCuda(artifactDir, "2x2");
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  TwoAxisInputs in(q);
  const PlanEntry &entry = artifact->plan().entries[0];
  Expected want = expectedFor(artifact->plan(), entry, {idp, itp});
  std::vector<NpyArray> out;
  for (int run = 0; run < 2; ++run) {
    std::string at = "2x2, run " + std::to_string(run) + ": ";
    if (!runMain(*artifact, fakes, in.refs(), &out, at))
      return;
    checkTwoAxes(out, q, at);
    if (!fakes)
      continue;
    std::vector<FakeNcclCall> got = fakes.log();
    checkCalls(got, want.calls, fakes.stats->lastStream, at);
    // One communicator per axis: the dp steps' and the tp steps' differ,
    // and each axis keeps its own.
    int dpComm = -1, tpComm = -1;
    bool consistent = true;
    size_t k = 0;
    for (const PlanStep &step : entry.steps) {
      if (!stepCommunicates(step) || k >= got.size())
        continue;
      int &id = step.collective.axis == 0 ? dpComm : tpComm;
      if (id < 0)
        id = got[k].commId;
      consistent &= id == got[k].commId;
      ++k;
    }
    check(consistent && dpComm > 0 && tpComm > 0 && dpComm != tpComm,
          at + "one NCCL communicator per mesh axis");
    checkTrace(fakes, runTrace(entry, want.trace, run == 0), at);
  }
  artifact->setCollectives(nullptr);
}

/// Writes `write` into `path` (a cpu artifact, Fixtures.h) and makes it a
/// cuda one for the fake driver.
bool writeCuda(const std::string &path, bool written) {
  std::string error;
  bool ok = written && makeFakeCudaArtifact(path, &error);
  check(ok, "write " + path + ": " + error);
  return ok;
}

/// (Fakes: the kernels are the host's.) The regression model compiled for
/// the mesh, as cuda artifacts trained over NCCL, against the cuda plain
/// model trained by one process with --accumulate: ZeRO 1, 2, 3 on mesh
/// dp=n, tensor parallel on [dp=1, tp=n] and (4 ranks) [dp=2, tp=2].
void training(Collectives &comm, const std::string &dir, const Fakes &fakes) {
  const int n = comm.size();
  const bool lead = comm.rank() == 0;
  std::string error;
  std::vector<std::pair<std::string, int>> meshes; // path, dp ranks
  if (lead) {
    std::filesystem::create_directories(dir + "/plain.loom");
    writeCuda(dir + "/plain.loom",
              writeRegressionArtifact(dir + "/plain.loom"));
    check(writeRegressionData(dir + "/data.npz", 64), "write data");
  }
  for (int zero : {1, 2, 3}) {
    std::string path = dir + "/zero" + std::to_string(zero) + ".loom";
    meshes.push_back({path, n});
    if (lead) {
      std::filesystem::create_directories(path);
      writeCuda(path, writeMeshRegressionArtifact(path, n, zero));
    }
  }
  std::vector<std::pair<int, int>> tp = {{1, n}};
  if (n == 4)
    tp.push_back({2, 2});
  for (auto [dp, t] : tp) {
    std::string path =
        dir + "/tp-" + std::to_string(dp) + "x" + std::to_string(t) + ".loom";
    meshes.push_back({path, dp});
    if (lead) {
      std::filesystem::create_directories(path);
      writeCuda(path, writeTensorParallelRegressionArtifact(path, dp, t));
    }
  }
  comm.barrier(&error);
  std::unique_ptr<Artifact> plain = loadCuda(dir + "/plain.loom", "plain");
  if (!plain)
    return;
  // The fake cuBLASLt sums in one order whatever the rank count; NCCL's
  // (the fake's MPI) sums 4 values in another order than the trainer.
  const double tolerance = n <= 2 ? 0 : 1e-5;
  for (const auto &[path, dp] : meshes) {
    std::string name = path.substr(dir.size() + 1);
    TrainOptions ref = trainingOptions(dir, dp);
    TrainResult reference;
    if (!trainOk(*plain, ref, &reference, name + " reference"))
      continue;
    std::unique_ptr<Artifact> mesh = loadCuda(path, name);
    if (!mesh)
      continue;
    TrainOptions o = meshOptions(ref, comm, path + "-ckpt");
    if (fakes)
      fakes.clearCalls();
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, tolerance, name);
    checkLoss(result, reference, 1e-5, name);
    if (n > 1) {
      check(result.planCollectives.calls > 0,
            name + ": the plan's collective steps communicated");
      if (fakes) {
        std::vector<FakeNcclCall> calls = fakes.log();
        check(int64_t(calls.size()) >= result.planCollectives.calls &&
                  !calls.empty(),
              name + ": " + std::to_string(calls.size()) + " NCCL calls for " +
                  std::to_string(result.planCollectives.calls) +
                  " collective steps");
      }
    }
    // Resumed at step 3 (a checkpoint of whole tensors, gathered over
    // MPI): the same bits as straight through.
    checkResumed(*mesh, o, result, name);
    comm.barrier(&error);
  }
}

/// NCCL missing: on every rank (each says why), then on rank 1 alone (it
/// says why, the others that it could not start); nobody hangs, and the
/// artifact still loads (auto finds NCCL missing when a step needs it).
void missingNccl(Collectives &comm, const std::string &dir) {
  const int n = comm.size(), r = comm.rank();
  if (n < 2)
    return;
  EntryBuilder e("main");
  int x = e.buffer("f32", {4}), y = e.buffer("f32", {4});
  e.input("x", "input", x);
  e.collective("all_reduce", "sum", "dp", x, y);
  e.output("y", "output", y);
  std::string artifactDir = dir + "/no-nccl-" + std::to_string(r);
  std::filesystem::create_directories(artifactDir);
  writeBytes(artifactDir + "/plan.json",
             toCudaPlan(planJson({e}, "null", "null", meshJson({"dp"}, {n})),
                        90, "null", "null"));
  NpyArray four = f32Array({4}, {1, 2, 3, 4});
  const std::string missing = dir + "/missing/libnccl.so.2";
  for (bool everyRank : {true, false}) {
    std::string what =
        everyRank ? "NCCL missing on every rank" : "NCCL missing on rank 1";
    bool lacks = everyRank || r == 1;
    ScopedEnv nccl("LOOMRT_NCCL_LIBRARY",
                   lacks ? missing.c_str()
                         : std::getenv("LOOMRT_NCCL_LIBRARY"));
    std::unique_ptr<Artifact> artifact = loadCuda(artifactDir, what);
    if (!artifact)
      continue;
    artifact->setCollectives(&comm);
    std::string error;
    ErrorCode code = ErrorCode::Ok;
    check(!artifact->run("main", {{"x", &four}}, nullptr, &error, &code),
          what + ": the run fails");
    check(code == ErrorCode::IO, what + ": IO");
    check(error.find("entry 'main': starting the device collectives (NCCL) "
                     "of mesh axis dp (" +
                     std::to_string(n) + " ranks) on the cuda backend: ") !=
              std::string::npos,
          what + ": says where: " + error);
    check(lacks
              ? error.find("no NCCL (LOOMRT_NCCL_LIBRARY=" + missing +
                           " cannot be loaded") != std::string::npos
              : error.find("rank 1 could not start NCCL") != std::string::npos,
          what + ": says why: " + error);
    artifact->setCollectives(nullptr);
    comm.barrier(&error);
  }
}

/// For CTest's loom-run tests under mpirun: cuda artifacts for the fake
/// driver (ZeRO 1 on mesh dp=2; tensor parallel on [dp=2, tp=2]), data,
/// and the inputs of one step.
int writeFixtures(const std::string &dir) {
  std::string error;
  for (const char *name :
       {"/zero1-cuda.loom", "/tp2x2-cuda.loom", "/plain-cuda.loom"})
    std::filesystem::create_directories(dir + name);
  // plain-cuda.loom: one process with --accumulate 2, which both must equal.
  if (!writeRegressionArtifact(dir + "/plain-cuda.loom") ||
      !makeFakeCudaArtifact(dir + "/plain-cuda.loom", &error) ||
      !writeMeshRegressionArtifact(dir + "/zero1-cuda.loom", 2, 1) ||
      !makeFakeCudaArtifact(dir + "/zero1-cuda.loom", &error) ||
      !writeTensorParallelRegressionArtifact(dir + "/tp2x2-cuda.loom", 2, 2) ||
      !makeFakeCudaArtifact(dir + "/tp2x2-cuda.loom", &error) ||
      !writeRegressionData(dir + "/data.npz", 64)) {
    std::fprintf(stderr, "writing the fixtures: %s\n", error.c_str());
    return 1;
  }
  return writeRegressionBatch(dir, &error) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2]);
  MeshJob job = startJob();
  if (!job.comm)
    return job.status;
  Collectives &comm = *job.comm;
  localRank = launcherLocalRank();
  if (localRank < 0)
    localRank = comm.localRank();
  Fakes fakes;
  oneRankThroughNccl(comm, job.dir, fakes);
  everyOp(comm, job.dir, fakes);
  if (comm.size() == 4)
    twoAxes(comm, job.dir, fakes);
  if (fakes)
    training(comm, job.dir, fakes);
  missingNccl(comm, job.dir);

  int64_t failed = failuresInAll(comm);
  if (comm.rank() == 0)
    std::printf("%d ranks (nccl, %s): mesh plans over nccl: %d checks per "
                "rank, %lld failed in all\n",
                comm.size(), fakes ? "fake NCCL" : "real NCCL",
                rankChecks.checks, static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}
