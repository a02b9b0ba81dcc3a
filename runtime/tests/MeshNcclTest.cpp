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
#include "Fixtures.h"
#include "Half.h"
#include "fakecuda/FakeCuda.h"
#include "fakenccl/FakeNccl.h"
#include "tool/MpiCollectives.h"

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
int failures = 0, checks = 0, rank = 0, localRank = -1;

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
    switch (c.op) {
    case CollectiveOp::AllReduce:
      if (src.offset != dst.offset)
        word("d2d");
      std::snprintf(call.op, sizeof call.op, "ncclAllReduce");
      call.sendOffset = call.recvOffset = int64_t(dst.offset);
      call.count = dst.elements;
      call.type = ncclType(dst.dtype);
      call.redOp = ncclOp(c.reduce);
      break;
    case CollectiveOp::ReduceScatter:
      std::snprintf(call.op, sizeof call.op, "ncclReduceScatter");
      call.sendOffset = int64_t(src.offset);
      call.recvOffset = int64_t(dst.offset);
      call.count = dst.elements;
      call.type = ncclType(dst.dtype);
      call.redOp = ncclOp(c.reduce);
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
    std::string trace = std::string(fakes.trace());
    std::string wantTrace = "h2d h2d " + want.trace;
    for (size_t i = 0; i < out.size(); ++i)
      wantTrace += " d2h";
    check(trace == wantTrace,
          at + "the stream ran '" + trace + "', expected '" + wantTrace + "'");
    // One for the outputs (the first run also one before it allocates
    // the pinned staging of the uploads).
    check(fakes.stats->synchronizations == (run == 0 ? 2 : 1),
          at + std::to_string(fakes.stats->synchronizations) +
              " stream synchronizations, expected " +
              (run == 0 ? "2 (staging, outputs)" : "1 (for the outputs)"));
  }
}

/// Every op through Artifact::run on a cuda plan with mesh dp=n (the
/// values of MeshMpiTest's collectiveSteps).
void everyOp(Collectives &comm, const std::string &dir, const Fakes &fakes) {
  const int n = comm.size(), r = comm.rank();
  const int64_t c = 3;
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
  e.copy(sum, after); // after the sum, by the stream's order
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
  std::string artifactDir = dir + "/every-op-" + std::to_string(r);
  std::filesystem::create_directories(artifactDir);
  std::string planText = toCudaPlan(
      planJson({e}, "null", "null", meshJson({"dp"}, {n})), 90, "null", "null");
  writeBytes(artifactDir + "/plan.json", planText);
  std::unique_ptr<Artifact> artifact = loadCuda(artifactDir, "every op");
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
  std::string error;
  const PlanEntry &entry = artifact->plan().entries[0];
  Expected want = expectedFor(artifact->plan(), entry, {r});
  std::vector<NpyArray> out;
  // Three runs: none is recorded into a graph (the NCCL calls' events).
  for (int run = 0; run < 3; ++run) {
    std::string at = "every op, run " + std::to_string(run) + ": ";
    if (fakes)
      fakes.clear();
    bool ran = artifact->run("main", {{"x", &in}, {"xd", &ind}, {"xb", &inb}},
                             &out, &error);
    check(ran, at + error);
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
      std::string el = " element " + std::to_string(i);
      double total = ranksSum + double(n) * double(i);
      check(s[i] == float(total), at + "all_reduce sum" + el);
      check(af[i] == float(total), at + "copy after the all_reduce" + el);
      check(ip[i] == float(total), at + "all_reduce in place" + el);
      check(m[i] == float(n + i), at + "all_reduce max" + el);
      check(std::fabs(md[i] - total / n) < 1e-12, at + "all_reduce mean" + el);
      check(bf16ToFloat(bs[i]) == float(total),
            at + "bf16 all_reduce sum" + el);
      check(g[i] == float(total), at + "all_gather" + el);
    }
    for (int64_t j = 0; j < c; ++j) {
      std::string el = " element " + std::to_string(j);
      double total = ranksSum + double(n) * double(r * c + j);
      check(rsv[j] == float(total), at + "reduce_scatter sum" + el);
      check(std::fabs(rsm[j] - total / n) < 1e-12,
            at + "reduce_scatter mean" + el);
      check(sl[j] == float(r + 1 + r * c + j), at + "rank_slice" + el);
    }
    // One rank: nothing communicates, and the entry is a CUDA graph.
    if (!fakes || n == 1)
      continue;
    checkCalls(fakes.log(), want.calls, fakes.stats->lastStream, at);
    std::string trace = fakes.trace();
    std::string wantTrace = runTrace(entry, want.trace, run == 0);
    check(trace == wantTrace,
          at + "the stream ran '" + trace + "', expected '" + wantTrace + "'");
    // One for the outputs (the first run also one before it allocates
    // the pinned staging of the uploads).
    check(fakes.stats->synchronizations == (run == 0 ? 2 : 1),
          at + std::to_string(fakes.stats->synchronizations) +
              " stream synchronizations, expected " +
              (run == 0 ? "2 (staging, outputs)" : "1 (for the outputs)"));
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
  writeBytes(
      artifactDir + "/plan.json",
      toCudaPlan(planJson({e}, "null", "null", meshJson({"dp", "tp"}, {2, 2})),
                 90, "null", "null"));
  std::unique_ptr<Artifact> artifact = loadCuda(artifactDir, "2x2");
  if (!artifact)
    return;
  artifact->setCollectives(&comm);
  std::vector<float> xf(len);
  std::vector<double> xdv(len);
  for (int64_t i = 0; i < len; ++i)
    xdv[i] = xf[i] = float(q + 1 + i);
  NpyArray in = arrayOf(DType::F32, xf), ind = arrayOf(DType::F64, xdv);
  auto of = [](int p, int64_t i) { return double(p + 1 + i); };
  const int dpPeers[2] = {itp, 2 + itp}, tpPeers[2] = {2 * idp, 2 * idp + 1};
  const PlanEntry &entry = artifact->plan().entries[0];
  Expected want = expectedFor(artifact->plan(), entry, {idp, itp});
  std::vector<NpyArray> out;
  std::string error;
  for (int run = 0; run < 2; ++run) {
    std::string at = "2x2, run " + std::to_string(run) + ": ";
    if (fakes)
      fakes.clear();
    bool ran = artifact->run("main", {{"x", &in}, {"xd", &ind}}, &out, &error);
    check(ran, at + error);
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
      std::string el = " element " + std::to_string(i);
      check(sDp[i] == float(sum(dpPeers, i)), at + "all_reduce sum dp" + el);
      check(sTp[i] == float(sum(tpPeers, i)), at + "all_reduce sum tp" + el);
      check(mDp[i] == float(of(2 + itp, i)), at + "all_reduce max dp" + el);
      check(mTp[i] == sum(tpPeers, i) / 2, at + "all_reduce mean tp" + el);
      int64_t b = i / c, j = i % c;
      int dpGroupOfB[2] = {int(b), 2 + int(b)};
      check(gDp[i] == float(sum(dpGroupOfB, idp * c + j)),
            at + "all_gather tp of reduce_scatter dp" + el);
      int tpGroupOfB[2] = {2 * int(b), 2 * int(b) + 1};
      check(gTp[i] == float(sum(tpGroupOfB, itp * c + j)),
            at + "all_gather dp of reduce_scatter tp" + el);
    }
    for (int64_t j = 0; j < c; ++j) {
      std::string el = " element " + std::to_string(j);
      check(rDp[j] == float(sum(dpPeers, idp * c + j)),
            at + "reduce_scatter dp" + el);
      check(rTp[j] == float(sum(tpPeers, itp * c + j)),
            at + "reduce_scatter tp" + el);
      check(lDp[j] == float(of(q, idp * c + j)), at + "rank_slice dp" + el);
      check(lTp[j] == float(of(q, itp * c + j)), at + "rank_slice tp" + el);
    }
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
    std::string trace = fakes.trace();
    std::string wantTrace = runTrace(entry, want.trace, run == 0);
    check(trace == wantTrace,
          at + "the stream ran '" + trace + "', expected '" + wantTrace + "'");
  }
  artifact->setCollectives(nullptr);
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

bool trainOk(Artifact &artifact, const TrainOptions &options,
             TrainResult *result, const std::string &what) {
  std::string error;
  bool ok = train(artifact, options, result, &error);
  check(ok, what + ": " + error);
  return ok;
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
    TrainOptions ref;
    ref.dataPath = dir + "/data.npz";
    ref.steps = 6;
    ref.progress = ProgressMode::None;
    ref.accumulate = dp;
    TrainResult reference;
    if (!trainOk(*plain, ref, &reference, name + " reference"))
      continue;
    std::unique_ptr<Artifact> mesh = loadCuda(path, name);
    if (!mesh)
      continue;
    TrainOptions o = ref;
    o.accumulate = 1;
    o.collectives = &comm;
    o.checkpointDir = path + "-ckpt";
    o.saveEvery = 3;
    o.evalDataPath = dir + "/data.npz";
    if (fakes)
      fakes.clearCalls();
    TrainResult result;
    if (!trainOk(*mesh, o, &result, name))
      continue;
    compare(result.tensors, reference.tensors, tolerance, name);
    check(std::fabs(result.lastLoss - reference.lastLoss) <=
              1e-5 * std::max(1.0, std::fabs(reference.lastLoss)),
          name + ": loss " + std::to_string(result.lastLoss) + " vs " +
              std::to_string(reference.lastLoss));
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
    TrainOptions again = o;
    again.checkpointDir.clear();
    again.saveEvery = 0;
    again.resumePath = o.checkpointDir + "/" + checkpointFileName(3);
    TrainResult resumed;
    if (trainOk(*mesh, again, &resumed, name + " resumed"))
      compare(resumed.tensors, result.tensors, 0, name + " resumed");
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
  for (const char *name : {"/zero1-cuda.loom", "/tp2x2-cuda.loom"})
    std::filesystem::create_directories(dir + name);
  if (!writeMeshRegressionArtifact(dir + "/zero1-cuda.loom", 2, 1) ||
      !makeFakeCudaArtifact(dir + "/zero1-cuda.loom", &error) ||
      !writeTensorParallelRegressionArtifact(dir + "/tp2x2-cuda.loom", 2, 2) ||
      !makeFakeCudaArtifact(dir + "/tp2x2-cuda.loom", &error) ||
      !writeRegressionData(dir + "/data.npz", 64)) {
    std::fprintf(stderr, "writing the fixtures: %s\n", error.c_str());
    return 1;
  }
  std::vector<float> x(kBatch * kFeatures, 0.5f), y(kBatch, 1.0f);
  return writeNpy(dir + "/x.npy", f32Array({kBatch, kFeatures}, x), &error) &&
                 writeNpy(dir + "/y.npy", f32Array({kBatch, 1}, y), &error)
             ? 0
             : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 3 && std::string(argv[1]) == "--write")
    return writeFixtures(argv[2]);
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
  localRank = launcherLocalRank();
  if (localRank < 0)
    localRank = comm->localRank();
  Fakes fakes;
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
  oneRankThroughNccl(*comm, path, fakes);
  everyOp(*comm, path, fakes);
  if (comm->size() == 4)
    twoAxes(*comm, path, fakes);
  if (fakes)
    training(*comm, path, fakes);
  missingNccl(*comm, path);

  int64_t totals[2] = {failures, checks};
  waitFor(comm->allReduce(totals, 2, DType::I64, ReduceOp::Sum, &error),
          &error);
  comm->barrier(&error);
  if (rank == 0)
    std::printf("%d ranks (nccl, %s): mesh plans over nccl: %d checks per "
                "rank, %lld failed in all\n",
                comm->size(), fakes ? "fake NCCL" : "real NCCL", checks,
                static_cast<long long>(totals[0]));
  dir.reset();
  return totals[0] == 0 ? 0 : 1;
}
