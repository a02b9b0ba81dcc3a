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
// backend). Communication reads and writes the arena from the host, so it
// needs a backend with host arenas (the CPU's); Artifact::load refuses
// anything else (checkCollectiveBackend).
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_COLLECTIVESTEPS_H
#define LOOMRT_SRC_COLLECTIVESTEPS_H

#include "loomrt/Artifact.h"
#include "loomrt/Backend.h"
#include "loomrt/Collectives.h"
#include "loomrt/Mesh.h"
#include "loomrt/Plan.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {

/// Whether `backend` can run every collective step of `plan`: those that
/// communicate need host arenas. Unsupported (NCCL is not wired to plans
/// yet), naming the first such step, otherwise.
bool checkCollectiveBackend(const Plan &plan, const Backend &backend,
                            const std::string &what, std::string *error,
                            ErrorCode *code);

/// The collective steps of one run of `entry` in `arena`. `comms` holds
/// the communicator of each mesh axis (null: one process; the caller
/// checked with checkMeshWorld that the mesh fits the world), and each
/// step communicates over its axis's. `blocking`: each collective
/// completes within its step (profiling, --check-numerics).
class CollectiveSteps {
public:
  /// `times` (may be null) adds up what the communicating ones cost.
  CollectiveSteps(const Plan &plan, const PlanEntry &entry, Backend &backend,
                  Arena &arena, const MeshComms *comms, bool blocking,
                  CollectiveTimes *times = nullptr);
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
    Range src, dst;
    std::string what; ///< "collective step 3 (all_reduce sum of 1024 f32
                      ///< over dp, 2 ranks)"
    std::chrono::steady_clock::time_point issued;
  };

  bool allReduce(const PlanStep &step, Collectives &comm, std::string *error);
  bool reduceScatter(const PlanStep &step, Collectives &comm,
                     std::string *error);
  bool allGather(const PlanStep &step, Collectives &comm, std::string *error);
  bool rankSlice(const PlanStep &step, std::string *error);
  /// A step that moves nothing between ranks: `bytes` from src (at
  /// `srcSkip` bytes into it) to dst, on the backend.
  bool localCopy(const PlanStep &step, uint64_t srcSkip, std::string *error);
  /// Keeps `request` (made by a Collectives call for `step`) until a later
  /// step needs its bytes, or waits at once when blocking.
  bool track(const PlanStep &step, std::unique_ptr<Request> request,
             const std::string *why, std::string *error);
  /// Waits for pending[i] and drops it.
  bool complete(size_t i, std::string *error);
  void *host(uint32_t buffer);
  std::string describe(const PlanStep &step) const;

  const Plan &plan;
  const PlanEntry &entry;
  Backend &backend;
  Arena &arena;
  const MeshComms *comms;
  bool blocking;
  CollectiveTimes *times;
  std::vector<Pending> pending;
};

} // namespace loomrt

#endif // LOOMRT_SRC_COLLECTIVESTEPS_H
