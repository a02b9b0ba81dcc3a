//===- CollectiveSteps.cpp - A run's collective steps, overlapped ---------===//
//
// See CollectiveSteps.h. One handler per op, each over the communicator
// of its step's mesh axis (MeshComms); parsePlan proved the element
// counts and that src and dst are disjoint (or, for an all_reduce, the
// same bytes), so nothing here checks them again.
//
//===----------------------------------------------------------------------===//

#include "CollectiveSteps.h"

#include "loomrt/Mesh.h"

#include "Support.h"

#include <cstring>

namespace loomrt {

using detail::quoteName;

namespace {

/// Whether step `step` moves data between ranks.
bool communicates(const PlanStep &step) {
  return step.kind == PlanStep::Kind::Collective && step.collective.ranks > 1 &&
         step.collective.op != CollectiveOp::RankSlice;
}

ReduceOp reduceOpOf(CollectiveReduce reduce) {
  switch (reduce) {
  case CollectiveReduce::Max:
    return ReduceOp::Max;
  case CollectiveReduce::Mean:
    return ReduceOp::Avg;
  case CollectiveReduce::Sum:
  case CollectiveReduce::None:
    break;
  }
  return ReduceOp::Sum;
}

} // namespace

bool checkCollectiveBackend(const Plan &plan, const Backend &backend,
                            const std::string &what, std::string *error,
                            ErrorCode *code) {
  if (backend.hostArenas())
    return true;
  for (const PlanEntry &entry : plan.entries)
    for (size_t s = 0; s < entry.steps.size(); ++s) {
      const PlanStep &step = entry.steps[s];
      if (!communicates(step))
        continue;
      detail::ErrorSink{error, code}.set(
          ErrorCode::Unsupported,
          what + ": entry " + quoteName(entry.name) + ": step " +
              std::to_string(s) + " (collective): a " +
              collectiveOpName(step.collective.op) + " over " +
              std::to_string(step.collective.ranks) +
              " ranks cannot run on the " + std::string(backend.name()) +
              " backend yet (collective steps communicate over MPI on host "
              "memory; NCCL is not wired to plans yet)");
      return false;
    }
  return true;
}

CollectiveSteps::CollectiveSteps(const Plan &plan, const PlanEntry &entry,
                                 Backend &backend, Arena &arena,
                                 const MeshComms *comms, bool blocking,
                                 CollectiveTimes *times)
    : plan(plan), entry(entry), backend(backend), arena(arena), comms(comms),
      blocking(blocking), times(times) {}

CollectiveSteps::~CollectiveSteps() {
  std::string ignored;
  for (Pending &p : pending)
    p.request->wait(&ignored);
}

void *CollectiveSteps::host(uint32_t buffer) {
  return backend.hostAddress(arena, entry.buffers[buffer].offset);
}

std::string CollectiveSteps::describe(const PlanStep &step) const {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  std::string text = "collective step " +
                     std::to_string(&step - entry.steps.data()) + " (" +
                     collectiveOpName(c.op);
  if (c.reduce != CollectiveReduce::None)
    text += std::string(" ") + collectiveReduceName(c.reduce);
  return text + " of " + std::to_string(src.elements) + " " +
         std::string(dtypeToShortName(src.dtype)) + " over " +
         plan.mesh->axes[c.axis] + ", " + std::to_string(c.ranks) + " ranks)";
}

bool CollectiveSteps::beforeStep(const PlanStep &step, std::string *error) {
  if (pending.empty())
    return true;
  for (uint32_t id : stepBuffers(step)) {
    const PlanBuffer &b = entry.buffers[id];
    if (!waitForBytes(b.offset, b.bytes, error))
      return false;
  }
  return true;
}

bool CollectiveSteps::waitForBytes(uint64_t offset, uint64_t bytes,
                                   std::string *error) {
  if (bytes == 0)
    return true;
  for (size_t i = 0; i < pending.size();) {
    const Pending &p = pending[i];
    if (p.src.overlaps(offset, offset + bytes) ||
        p.dst.overlaps(offset, offset + bytes)) {
      if (!complete(i, error))
        return false;
    } else {
      ++i;
    }
  }
  return true;
}

bool CollectiveSteps::complete(size_t i, std::string *error) {
  std::string why;
  auto waitBegin = std::chrono::steady_clock::now();
  bool ok = pending[i].request->wait(&why);
  if (times) {
    auto now = std::chrono::steady_clock::now();
    times->waitedSeconds +=
        std::chrono::duration<double>(now - waitBegin).count();
    times->inFlightSeconds +=
        std::chrono::duration<double>(now - pending[i].issued).count();
  }
  if (!ok)
    *error = pending[i].what + ": " + why;
  pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
  return ok;
}

bool CollectiveSteps::afterStep(std::string *error) {
  for (size_t i = 0; i < pending.size();) {
    bool done = false;
    std::string why;
    if (!pending[i].request->test(&done, &why)) {
      *error = pending[i].what + ": " + why;
      return false;
    }
    // Done: dropping it now spares later steps the overlap checks.
    if (done) {
      if (!complete(i, error))
        return false;
    } else {
      ++i;
    }
  }
  return true;
}

bool CollectiveSteps::finish(std::string *error) {
  while (!pending.empty())
    if (!complete(0, error))
      return false;
  return true;
}

bool CollectiveSteps::issue(const PlanStep &step, std::string *error) {
  // Artifact checked both (checkMeshWorld, checkCollectiveBackend); a
  // caller that did not gets a message, not a crash.
  Collectives *comm = comms ? comms->axis(step.collective.axis) : nullptr;
  if (communicates(step) && (!comm || !backend.hostArenas())) {
    *error = describe(step) + ": " +
             (comm ? "the backend's memory is not the host's"
                   : "no Collectives for the ranks");
    return false;
  }
  // Over an axis of one rank nothing communicates: each op is a copy.
  const CollectiveStep &c = step.collective;
  if (c.ranks == 1 && c.op != CollectiveOp::RankSlice)
    return localCopy(step, 0, error);
  switch (c.op) {
  case CollectiveOp::AllReduce:
    return allReduce(step, *comm, error);
  case CollectiveOp::ReduceScatter:
    return reduceScatter(step, *comm, error);
  case CollectiveOp::AllGather:
    return allGather(step, *comm, error);
  case CollectiveOp::RankSlice:
    return rankSlice(step, error);
  }
  *error = "unknown collective op";
  return false;
}

bool CollectiveSteps::localCopy(const PlanStep &step, uint64_t srcSkip,
                                std::string *error) {
  const PlanBuffer &src = entry.buffers[step.collective.src];
  const PlanBuffer &dst = entry.buffers[step.collective.dst];
  if (src.offset + srcSkip == dst.offset || dst.bytes == 0)
    return true; // in place
  return backend.copy(arena, src.offset + srcSkip, dst.offset, dst.bytes,
                      error);
}

bool CollectiveSteps::track(const PlanStep &step,
                            std::unique_ptr<Request> request,
                            const std::string *why, std::string *error) {
  std::string what = describe(step);
  if (!request) {
    *error = what + ": " + *why;
    return false;
  }
  const PlanBuffer &src = entry.buffers[step.collective.src];
  const PlanBuffer &dst = entry.buffers[step.collective.dst];
  pending.push_back(Pending{std::move(request),
                            {src.offset, src.offset + src.bytes},
                            {dst.offset, dst.offset + dst.bytes},
                            std::move(what), std::chrono::steady_clock::now()});
  if (times)
    ++times->calls;
  return !blocking || complete(pending.size() - 1, error);
}

bool CollectiveSteps::allReduce(const PlanStep &step, Collectives &comm,
                                std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  const PlanBuffer &dst = entry.buffers[c.dst];
  // Collectives reduce in place: src's values go to dst first. The host
  // reads and writes the arena from here on.
  if (!backend.synchronize(error))
    return false;
  if (src.offset != dst.offset)
    std::memcpy(host(c.dst), host(c.src), dst.bytes);
  std::string why;
  return track(step,
               comm.allReduce(host(c.dst), dst.elements, dst.dtype,
                              reduceOpOf(c.reduce), &why),
               &why, error);
}

bool CollectiveSteps::reduceScatter(const PlanStep &step, Collectives &comm,
                                    std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &dst = entry.buffers[c.dst];
  if (!backend.synchronize(error))
    return false;
  std::string why;
  return track(step,
               comm.reduceScatter(host(c.src), host(c.dst), dst.elements,
                                  dst.dtype, reduceOpOf(c.reduce), &why),
               &why, error);
}

bool CollectiveSteps::allGather(const PlanStep &step, Collectives &comm,
                                std::string *error) {
  const CollectiveStep &c = step.collective;
  const PlanBuffer &src = entry.buffers[c.src];
  if (!backend.synchronize(error))
    return false;
  std::string why;
  return track(
      step,
      comm.allGather(host(c.src), host(c.dst), src.elements, src.dtype, &why),
      &why, error);
}

bool CollectiveSteps::rankSlice(const PlanStep &step, std::string *error) {
  const CollectiveStep &c = step.collective;
  // Block r of src: r * dst's bytes into it, r this rank's coordinate on
  // the step's axis.
  uint64_t r =
      c.ranks > 1 && comms ? static_cast<uint64_t>(comms->index(c.axis)) : 0;
  return localCopy(step, r * entry.buffers[c.dst].bytes, error);
}

} // namespace loomrt
