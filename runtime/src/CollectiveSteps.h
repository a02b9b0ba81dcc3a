//===- CollectiveSteps.h - A run's collective steps, overlapped -*- C++ -*-===//
//
// Artifact runs a plan's `collective` steps through this: each is issued
// when its step comes, as a nonblocking Collectives call, and the steps
// after it go on while the data moves. A later step that names a buffer
// sharing bytes with a pending collective's src or dst waits for it first
// (by byte range, not buffer id: the memory planner reuses arena bytes
// between tensors); after every step the pending ones are tested, which is
// what makes MPI progress; the entry waits for all of them at its end.
//
// Over an axis of one rank, and for rank_slice, nothing moves between
// ranks: the step is a Backend::copy (so it runs, and records, on any
// backend). The others go one of two ways (StepCollectives):
//
// - host collectives (MPI): they read and write the arena from the host,
//   so the backend must have host arenas (the CPU's); the backend is
//   synchronized before each is issued;
// - device collectives (NCCL on CUDA, DeviceComms): they take the arena's
//   device addresses and are queued on the backend's own stream, so the
//   stream orders them with the steps around them: nothing waits for them
//   by byte range, and the entry waits for them (with their watchdog) only
//   at its end.
//
// Artifact::load refuses a combination that cannot run
// (checkCollectiveBackend).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_COLLECTIVESTEPS_H
#define LOOMRT_SRC_COLLECTIVESTEPS_H

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Collectives.h"
#include "loomrt/Mesh.h"
#include "loomrt/Plan.h"

#include "GradCompression.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

/// Whether `step` moves data between ranks: a collective step other than
/// rank_slice over an axis larger than 1.
bool stepCommunicates(const PlanStep &step) noexcept;
/// Whether any step of `entry` does.
bool entryCommunicates(const PlanEntry &entry) noexcept;

/// Whether collective steps run over the backend's device collectives:
/// `kind` Device, or Auto on a backend whose arenas are not host memory.
bool usesDeviceCollectives(StepCollectives kind,
                           const Backend &backend) noexcept;

/// Whether `backend` can run the collective steps of `plan` over `kind`
/// (`what` prefixes the message, e.g. "model.loom/plan.json"), all
/// Unsupported otherwise:
/// - Host on a backend without host arenas, when a step communicates
///   (named: "entry 'main': step 1 (collective): a reduce_scatter over 2
///   ranks cannot run over host collectives (MPI) on the cuda backend ...");
/// - Device on a backend without device collectives (the CPU);
/// - Device asked for explicitly where they cannot start
///   (Backend::deviceCollectivesAvailable: NCCL is missing). Auto finds
///   that out when it first needs them, so that an entry that does not
///   communicate still runs without NCCL.
bool checkCollectiveBackend(const Plan &plan, const Backend &backend,
                            StepCollectives kind, const std::string &what,
                            std::string *error, ErrorCode *code);

/// The device collectives of a plan's mesh axes: for each axis larger than
/// 1, Backend::startDeviceCollectives over that axis's host communicator
/// (MeshComms::axis: the world, or the split of it), in axis order on
/// every rank, so rank 0 of each axis group sends its group the NCCL
/// unique id. Axes of one rank have none (their steps are copies).
class DeviceComms {
public:
  DeviceComms();
  ~DeviceComms();
  DeviceComms(DeviceComms &&) noexcept;
  DeviceComms &operator=(DeviceComms &&) noexcept;

  /// A collective over `host`'s world: every rank calls it at the same
  /// point. IO, naming the axis, when one cannot start (every rank of that
  /// axis fails alike: startNccl's ranks agree first).
  bool build(const Plan &plan, const MeshComms &host, Backend &backend,
             double timeoutSeconds, const std::string &who, std::string *error,
             ErrorCode *code = nullptr) noexcept;
  /// The device collectives of mesh axis `axis`, or null.
  Collectives *axis(uint32_t axis) const noexcept;
  /// Sets axis `axis`'s (tests: a communicator of one rank on an axis of
  /// one, which the steps over it then go through instead of a copy).
  void set(uint32_t axis, std::unique_ptr<Collectives> comm);

private:
  std::vector<std::unique_ptr<Collectives>> axes;
};

/// The collective steps of one run of `entry` in `arena`. `comms` holds
/// the host communicator of each mesh axis (null: one process; the caller
/// checked with checkMeshWorld that the mesh fits the world), and each
/// step communicates over its axis's; `device` (null: host collectives)
/// holds the device ones, which steps then go through instead.
/// `blocking`: each collective completes within its step (profiling,
/// --check-numerics). `compression` (null: none) runs the host steps with
/// a `grad` that it compresses, synchronously, after everything in flight
/// (GradCompression.h), and counts the bytes of the others.
class CollectiveSteps {
public:
  /// `times` (may be null) adds up what the communicating ones cost.
  CollectiveSteps(const Plan &plan, const PlanEntry &entry, Backend &backend,
                  Arena &arena, const MeshComms *comms, bool blocking,
                  CollectiveTimes *times = nullptr,
                  const DeviceComms *device = nullptr,
                  GradientCompression *compression = nullptr);
  /// Waits for whatever is still in flight (a run that failed), so that
  /// no transfer outlives the run.
  ~CollectiveSteps();
  CollectiveSteps(const CollectiveSteps &) = delete;
  CollectiveSteps &operator=(const CollectiveSteps &) = delete;

  /// Before `step`: waits for the pending collectives whose bytes it
  /// touches.
  bool beforeStep(const PlanStep &step, std::string *error);
  /// Issues collective step `step`.
  bool issue(const PlanStep &step, std::string *error);
  /// After any step: tests the pending collectives (MPI progresses).
  bool afterStep(std::string *error);
  /// Waits for the pending collectives that touch [offset, offset + bytes).
  bool waitForBytes(uint64_t offset, uint64_t bytes, std::string *error);
  /// Waits for every pending collective (the end of the entry).
  bool finish(std::string *error);

private:
  struct Range {
    uint64_t begin = 0, end = 0;
    bool overlaps(uint64_t b, uint64_t e) const { return begin < e && b < end; }
  };
  struct Pending {
    std::unique_ptr<Request> request;
    /// Queued on the backend's stream (device collectives): the stream
    /// orders the steps that touch its bytes; only the end of the entry
    /// waits.
    bool streamOrdered = false;
    Range src, dst;
    std::string what; ///< "collective step 3 (all_reduce sum of 1024 f32
                      ///< over dp, 2 ranks)"
    std::chrono::steady_clock::time_point issued;
  };

  bool allReduce(const PlanStep &step, Collectives &comm, std::string *error);
  bool reduceScatter(const PlanStep &step, Collectives &comm,
                     std::string *error);
  bool allGather(const PlanStep &step, Collectives &comm, std::string *error);
  /// The same three over device collectives, on device addresses.
  bool deviceAllReduce(const PlanStep &step, Collectives &comm,
                       std::string *error);
  bool deviceReduceScatter(const PlanStep &step, Collectives &comm,
                           std::string *error);
  bool deviceAllGather(const PlanStep &step, Collectives &comm,
                       std::string *error);
  bool rankSlice(const PlanStep &step, std::string *error);
  /// A gradient reduction run by `compression`.
  bool compressedReduce(const PlanStep &step, Collectives &comm,
                        std::string *error);
  /// A step that moves nothing between ranks: `bytes` from src (at
  /// `srcSkip` bytes into it) to dst, on the backend.
  bool localCopy(const PlanStep &step, uint64_t srcSkip, std::string *error);
  /// Keeps `request` (made by a Collectives call for `step`) until a later
  /// step needs its bytes, or waits at once when blocking.
  bool track(const PlanStep &step, std::unique_ptr<Request> request,
             const std::string *why, std::string *error,
             bool streamOrdered = false);
  /// Waits for pending[i] and drops it.
  bool complete(size_t i, std::string *error);
  void *host(uint32_t buffer);
  void *device(uint32_t buffer);
  std::string describe(const PlanStep &step) const;

  const Plan &plan;
  const PlanEntry &entry;
  Backend &backend;
  Arena &arena;
  const MeshComms *comms;
  const DeviceComms *deviceComms;
  bool blocking;
  CollectiveTimes *times;
  GradientCompression *compression;
  std::vector<Pending> pending;
};

} // namespace loomrt

#endif // LOOMRT_SRC_COLLECTIVESTEPS_H
